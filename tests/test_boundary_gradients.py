"""Values and gradients at the boundaries of sqrt / arccos / norm / division (issue: NaN gradients of the
closed-form kernels at ρ = ±1 and at a zero row). Expected values come from the closed forms derived in the
comments, from central finite differences, or from neural-tangents' own kernels — never from the code under
test."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attacks.projections import l2_norm, normalize_l2, project_l2
from attention import cosine_alignment, linearized_attention, normalize_rows
from ntk import arccos_nngp, arccos_ntk

X_UNIT = np.array([[0.6, 0.8, 0.0]])


def _central_difference(f, x, h=1e-4):
  """Gradient of scalar f at float64 x by central differences: the midpoint of the one-sided slopes, so at
  a symmetric kink |t| it is 0, the convention the kernels use."""
  g = np.zeros_like(x)
  for idx in np.ndindex(x.shape):
    e = np.zeros_like(x)
    e[idx] = h
    g[idx] = (float(f(x + e)) - float(f(x - e))) / (2 * h)
  return g


@pytest.mark.parametrize("kernel", [lambda x: arccos_ntk(x)[0, 0], lambda x: arccos_nngp(x)[0, 0]],
                         ids=["ntk_fixed", "nngp"])
def test_kernel_diagonal_gradient_at_rho_one(kernel):
  # θ(x, x) = 0, so k(x, x) = ‖x‖² π/(2π) = ‖x‖²/2 for both kernels, whose gradient is x.
  g = jax.grad(kernel)(jnp.asarray(X_UNIT, jnp.float32))
  np.testing.assert_allclose(g, [[0.6, 0.8, 0.0]], atol=1e-6)
  assert np.all(np.isfinite(jax.grad(kernel)(jnp.zeros((1, 3)))))
  np.testing.assert_array_equal(jax.grad(kernel)(jnp.zeros((1, 3))), 0.0)  # k(x, x) = ‖x‖²/2 at 0


def test_kernel_gradients_at_rho_plus_minus_one_match_central_differences():
  with jax.enable_x64(True):
    x1 = np.array([[0.6, 0.8, 0.0]])
    for x2 in (x1.copy(), -2.0 * x1):  # ρ = 1 and ρ = −1
      for kernel in (arccos_ntk, arccos_nngp):
        f = lambda a: kernel(jnp.asarray(a), jnp.asarray(x2))[0, 0]
        g = np.asarray(jax.grad(f)(jnp.asarray(x1)))
        np.testing.assert_allclose(g, _central_difference(f, x1), atol=1e-5)
    # ρ = 1 with x' fixed: θ stays 0 to first order along x, so ∇ₓ[xᵀx'(π − θ)/(2π)] = x'/2.
    g = jax.grad(lambda a: arccos_ntk(a, jnp.asarray(x1))[0, 0])(jnp.asarray(x1))
    np.testing.assert_allclose(g, x1 / 2, atol=1e-12)
    # ρ = −1: π − θ = 0 and the kink of θ is symmetric, so the fixed-readout gradient is 0.
    g = jax.grad(lambda a: arccos_ntk(a, jnp.asarray(-x1))[0, 0])(jnp.asarray(x1))
    np.testing.assert_allclose(g, 0.0, atol=1e-7)


def test_kernel_gradients_match_neural_tangents_with_zero_and_antiparallel_rows():
  from neural_tangents import stax
  # Rows: a unit row, a zero row, its antipode (ρ = −1), a duplicate (ρ = 1), a generic row.
  x = jnp.array([[0.6, 0.8, 0.0], [0.0, 0.0, 0.0], [-0.6, -0.8, 0.0], [0.6, 0.8, 0.0], [0.3, -0.2, 0.5]])
  d = x.shape[1]
  # Dense(W_std=√d) divides by √d in the NTK parameterisation, so its pre-activations have covariance
  # xᵀx': neural-tangents' 'nngp' is then our degree-1 kernel and its 'ntk' our trained-readout NTK.
  _, _, kernel_fn = stax.serial(stax.Dense(1, W_std=np.sqrt(d), b_std=None), stax.Relu(),
                                stax.Dense(1, W_std=1.0, b_std=None))
  weights = jnp.asarray(np.random.default_rng(0).normal(size=(5, 5)), jnp.float32)
  for ours, theirs in ((lambda a: arccos_nngp(a), lambda a: kernel_fn(a, None, "nngp")),
                       (lambda a: arccos_ntk(a, readout="trained"), lambda a: kernel_fn(a, None, "ntk"))):
    np.testing.assert_allclose(ours(x), theirs(x), atol=1e-6)
    g_ours = jax.grad(lambda a: jnp.sum(weights * ours(a)))(x)
    g_theirs = jax.grad(lambda a: jnp.sum(weights * theirs(a)))(x)
    assert np.all(np.isfinite(g_ours))
    np.testing.assert_allclose(g_ours, g_theirs, atol=1e-5)


def test_normalize_rows_and_normalized_attention_have_finite_gradients_at_a_zero_row():
  x = jnp.array([[0.0, 0.0, 0.0], [3.0, 4.0, 0.0]])
  np.testing.assert_allclose(normalize_rows(x), [[0, 0, 0], [0.6, 0.8, 0.0]], atol=1e-7)
  jac = jax.jacobian(normalize_rows)(x)
  assert np.all(np.isfinite(jac))
  # Unit row u = x/‖x‖: ∂u/∂x = (I − u uᵀ)/‖x‖.
  u = np.array([0.6, 0.8, 0.0])
  np.testing.assert_allclose(jac[1, :, 1, :], (np.eye(3) - np.outer(u, u)) / 5.0, atol=1e-6)
  # Linearized attention X Xᵀ X keeps a zero row at zero; normalising it must not poison the gradient.
  g = jax.grad(lambda a: jnp.sum(linearized_attention(a, normalize=True)))(x)
  assert np.all(np.isfinite(g))


@pytest.mark.parametrize("scale, expected_cos", [(2.0, 1.0), (-0.5, -1.0)], ids=["rho_one", "rho_minus_one"])
def test_cosine_alignment_at_plus_minus_one(scale, expected_cos):
  j1 = jnp.array([[1.0, 2.0], [2.0, -1.0]])
  cos, rho = cosine_alignment(j1, scale * j1)
  np.testing.assert_allclose([cos, rho], [expected_cos, abs(scale)], rtol=1e-6)
  grads = jax.grad(lambda a, b: sum(cosine_alignment(a, b)), argnums=(0, 1))(j1, scale * j1)
  assert all(np.all(np.isfinite(g)) for g in grads)


def test_cosine_alignment_at_a_zero_jacobian():
  j = jnp.array([[1.0, 2.0], [2.0, -1.0]])
  zero = jnp.zeros_like(j)
  assert cosine_alignment(zero, j) == (0.0, np.inf)  # no direction: cos θ = 0; ρ = ‖j‖/0
  assert cosine_alignment(j, zero) == (0.0, 0.0)
  assert cosine_alignment(zero, zero) == (0.0, 0.0)
  for a, b in ((zero, j), (j, zero), (zero, zero)):
    grads = jax.grad(lambda p, q: sum(cosine_alignment(p, q)), argnums=(0, 1))(a, b)
    assert all(np.all(np.isfinite(g)) for g in grads)


def test_attack_l2_norms_and_projection_have_finite_gradients_at_zero():
  x = jnp.full((2, 3), 0.5)
  delta = jnp.array([[0.0, 0.0, 0.0], [0.3, 0.4, 0.0]])
  g = jax.grad(lambda d: jnp.sum(l2_norm(d)))(delta)
  np.testing.assert_allclose(g, [[0, 0, 0], [0.6, 0.8, 0]], atol=1e-7)  # ∇‖d‖ = d/‖d‖, 0 at 0
  assert np.all(np.isfinite(jax.jacobian(normalize_l2)(delta)))
  for eps in (0.0, 0.25, 1.0):
    jac = jax.jacobian(lambda xa: project_l2(xa, x, eps, 0.0, 1.0))(x + delta)
    assert np.all(np.isfinite(jac))
  # Inside the ball (and in the box) the projection is the identity.
  jac = jax.jacobian(lambda xa: project_l2(xa, x, 1.0, 0.0, 1.0))(x + delta)
  np.testing.assert_allclose(jac.reshape(6, 6), np.eye(6), atol=1e-7)
