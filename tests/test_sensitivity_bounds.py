"""Local sensitivity bounds of one self-attention head (attention.sensitivity, operator_norm).

Soundness: no sampled or PGD-optimised Δ with ‖Δ‖_F ≤ ε moves F(X) by more than the naive or the
fine-grained bound, over random heads, sequence lengths and radii (float64). The operators are checked
against the dense Kronecker form (column-major vec) and against the autodiff Jacobian.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention import operator_norm, sensitivity as S

EPS_GRID = (1e-3, 1e-2, 0.1, 0.5, 2.0)


def _head(seed, n, d, e, a_scale):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, d)) * rng.uniform(0.5, 2.0)
  a = rng.normal(size=(d, d)) * a_scale / np.sqrt(d)
  w_v = rng.normal(size=(d, e)) / np.sqrt(d)
  return x, a, w_v


def _commutation(n, d):
  """Π with Π vec(Δ) = vec(Δᵀ) for column-major vec of Δ [n, d]."""
  pi = np.zeros((n * d, n * d))
  for i in range(n):
    for j in range(d):
      pi[j + d * i, i + n * j] = 1.0
  return pi


def _dense_key_side(x, a, w_v):
  """(Vᵀ ⊗ I_n)·(Σ_i J_i ⊗ e_ie_iᵀ)·(I_n ⊗ XA)·Π, formed explicitly (small cases only)."""
  n = x.shape[0]
  p = np.asarray(S.attention_probs(x, a))
  eye = np.eye(n)
  jac = sum(np.kron(np.diag(p[i]) - np.outer(p[i], p[i]), np.outer(eye[i], eye[i])) for i in range(n))
  return np.kron((x @ w_v).T, eye) @ jac @ np.kron(eye, x @ a) @ _commutation(n, x.shape[1])


def _dense_query_side(x, a, w_v):
  n = x.shape[0]
  p = np.asarray(S.attention_probs(x, a))
  eye = np.eye(n)
  jac = sum(np.kron(np.diag(p[i]) - np.outer(p[i], p[i]), np.outer(eye[i], eye[i])) for i in range(n))
  return np.kron((x @ w_v).T, eye) @ jac @ np.kron(x @ a.T, eye)


def _vec(m):
  return np.asarray(m).reshape(-1, order="F")


@functools.partial(jax.jit, static_argnames=("samples",))
def _attack(x, a, w_v, eps, key, samples=32):
  """Largest deviation over random Δ (inside and on the ball) and over PGD; and the bounds."""
  direction_key, radius_key, pgd_key, power_key = jax.random.split(key, 4)
  layer = lambda z: S.self_attention(z, a, w_v)
  f0 = layer(x)
  z = jax.random.normal(direction_key, (samples,) + x.shape, x.dtype)
  radius = eps * jnp.where(jnp.arange(samples)[:, None, None] % 2 == 0, 1.0,
                           jax.random.uniform(radius_key, (samples, 1, 1), x.dtype))
  deltas = radius * z / jnp.linalg.norm(z, axis=(1, 2), keepdims=True)
  sampled = jnp.max(jax.vmap(lambda d: jnp.linalg.norm(layer(x + d) - f0))(deltas))
  pgd, delta = S.max_deviation(layer, x, eps, key=pgd_key, steps=60, restarts=3)
  c = S.head_constants(x, a, w_v, key=power_key, power_iters=60)   # ≥ n·d: Lanczos is exact
  terms = S.bound_terms(c, eps)
  rigorous = S.fine_grained_bound(c, eps, key_norm="closed_form")
  return sampled, pgd, jnp.linalg.norm(delta), terms.fine, terms.naive, rigorous


@pytest.mark.parametrize("n,d,e", [(1, 3, 2), (2, 4, 3), (5, 3, 4), (9, 6, 2)])
def test_no_perturbation_exceeds_the_bounds(n, d, e):
  with jax.enable_x64(True):
    worst = 0.0
    for seed in range(4):
      x, a, w_v = _head(seed + 10 * n, n, d, e, a_scale=(0.3, 1.0, 3.0, 8.0)[seed])
      for k, eps in enumerate(EPS_GRID):
        sampled, pgd, delta_norm, fine, naive, rigorous = map(
            float, _attack(jnp.asarray(x), jnp.asarray(a), jnp.asarray(w_v), eps,
                           jax.random.PRNGKey(100 * seed + k)))
        assert delta_norm <= eps * (1 + 1e-12)
        attained = max(sampled, pgd)
        assert pgd >= sampled * (1 - 1e-9)   # the attack beats random search
        for name, bound in (("fine", fine), ("naive", naive), ("fine/closed_form", rigorous)):
          assert attained <= bound * (1 + 1e-9), (name, n, seed, eps, attained, bound)
        worst = max(worst, attained / min(fine, naive))
    assert worst > 0.3   # the bound is not vacuous: some case comes within a factor of ~3


@jax.jit
def _attack_layer(x, a, w_v, eps, key):
  layer = lambda z: S.multi_head_attention(z, a, w_v)
  pgd, _ = S.max_deviation(layer, x, eps, key=key, steps=60, restarts=3)
  lc = S.layer_constants(x, a, w_v, key=jax.random.fold_in(key, 1), power_iters=40)
  bounds = S.layer_bound_terms(lc, eps)
  rigorous = S.layer_bound(lc, eps, key_norm="closed_form")
  first = jnp.sum(lc.heads.p_norm * lc.heads.wv_norm + lc.heads.query_norm + lc.heads.key_norm)
  return pgd, bounds.naive, bounds.fine, bounds.joint, bounds.min, rigorous, lc.jacobian_norm, first


def test_multi_head_layer_joint_bound_is_sound():
  """The joint bound (exact layer Jacobian + per-head higher-order terms) is never exceeded either."""
  n, heads = 7, 3
  with jax.enable_x64(True):
    for seed in range(3):
      rng = np.random.default_rng(seed)
      x = rng.normal(size=(n, 4))
      a = rng.normal(size=(heads, 4, 4)) * (0.5, 2.0, 5.0)[seed] / 2
      w_v = rng.normal(size=(heads, 4, 4)) / 2
      for k, eps in enumerate(EPS_GRID):
        pgd, naive, fine, joint, best, rigorous, jac, first = map(
            float, _attack_layer(jnp.asarray(x), jnp.asarray(a), jnp.asarray(w_v), eps,
                                 jax.random.PRNGKey(10 * seed + k)))
        for bound in (naive, fine, joint, best, rigorous):
          assert pgd <= bound * (1 + 1e-9), (seed, eps, pgd, naive, fine, joint)
        assert best <= min(naive, fine, joint) * (1 + 1e-12)
        assert jac <= first * (1 + 1e-9)   # the joint first order never loses to the triangle inequality


def test_value_only_head_is_attained():
  """With A = 0 the softmax is constant (uniform), F(X+Δ) − F(X) = PΔW_V and B_fine = ‖P‖₂‖W_V‖₂ε exactly."""
  with jax.enable_x64(True):
    x, _, w_v = _head(0, 6, 4, 3, 1.0)
    a = np.zeros((4, 4))
    c = S.head_constants(x, a, w_v, key=jax.random.PRNGKey(0))
    layer = lambda z: S.self_attention(z, jnp.asarray(a), jnp.asarray(w_v))
    attack = jax.jit(lambda eps: S.max_deviation(layer, jnp.asarray(x), eps, key=jax.random.PRNGKey(1),
                                                 steps=50)[0])
    for eps in (0.01, 1.0):
      dev = attack(eps)
      np.testing.assert_allclose(float(dev), float(S.fine_grained_bound(c, eps)), rtol=1e-6)


@pytest.mark.parametrize("seed,n,d,e", [(0, 2, 2, 1), (1, 4, 3, 2), (2, 6, 5, 3), (3, 7, 2, 4)])
def test_power_iteration_agrees_with_dense_svd(seed, n, d, e):
  with jax.enable_x64(True):
    x, a, w_v = _head(seed, n, d, e, a_scale=2.0)
    k_dense = _dense_key_side(x, a, w_v)
    delta = np.random.default_rng(seed).normal(size=(n, d))
    # The matrix-free operator is the Kronecker form with column-major vec.
    np.testing.assert_allclose(_vec(S.key_side_operator(x, a, w_v)(delta)), k_dense @ _vec(delta),
                               rtol=1e-10, atol=1e-12)
    q_dense = _dense_query_side(x, a, w_v)
    np.testing.assert_allclose(_vec(S.query_side_operator(x, a, w_v)(delta)), q_dense @ _vec(delta),
                               rtol=1e-10, atol=1e-12)
    c = S.head_constants(x, a, w_v, key=jax.random.PRNGKey(seed), power_iters=50)
    sigma_k = np.linalg.svd(k_dense, compute_uv=False)[0]
    np.testing.assert_allclose(float(c.key_norm), sigma_k, rtol=1e-7)
    assert float(c.key_gap) < 1e-7
    assert float(c.key_norm_upper) >= sigma_k * (1 - 1e-12)   # the closed form is an upper bound
    np.testing.assert_allclose(float(c.query_norm), np.linalg.svd(q_dense, compute_uv=False)[0], rtol=1e-10)
    # Alone, the Kronecker factor (I ⊗ XA) has norm ‖XA‖₂, which the composition undercuts
    # (docs/theory.md#local-sensitivity-of-self-attention).
    np.testing.assert_allclose(np.linalg.norm(np.kron(np.eye(n), x @ a), 2), np.linalg.norm(x @ a, 2))
    assert sigma_k <= np.linalg.norm(x @ a, 2) * np.linalg.norm(x @ w_v, 2)


def test_operators_sum_to_the_jacobian():
  """∂F/∂X[Δ] = PΔW_V + query side + key side (the linear part of the decomposition)."""
  with jax.enable_x64(True):
    x, a, w_v = _head(5, 5, 4, 3, 2.0)
    delta = np.random.default_rng(0).normal(size=x.shape)
    _, jvp = jax.jvp(lambda z: S.self_attention(z, a, w_v), (jnp.asarray(x),), (jnp.asarray(delta),))
    parts = sum(op(x, a, w_v)(delta) for op in (S.value_operator, S.query_side_operator, S.key_side_operator))
    np.testing.assert_allclose(np.asarray(parts), np.asarray(jvp), rtol=1e-10, atol=1e-12)
    c = S.head_constants(x, a, w_v, key=jax.random.PRNGKey(0), power_iters=40)
    lipschitz = float(S.jacobian_norm(lambda z: S.self_attention(z, a, w_v), x, key=jax.random.PRNGKey(1),
                                      iters=40))
    first_order = float(c.p_norm * c.wv_norm + c.query_norm + c.key_norm)
    assert lipschitz <= first_order * (1 + 1e-10)
    # B_fine(ε)/ε tends to its first-order coefficient as ε → 0.
    np.testing.assert_allclose(float(S.fine_grained_bound(c, 1e-9)) / 1e-9, first_order, rtol=1e-6)


def test_softmax_jacobian_rows_and_half_norm():
  rng = np.random.default_rng(0)
  for _ in range(20):
    p = rng.dirichlet(np.full(7, rng.uniform(0.05, 3.0)), size=3)
    u = rng.normal(size=(3, 7))
    got = np.asarray(S.softmax_jacobian_rows(jnp.asarray(p), jnp.asarray(u)))
    for i in range(3):
      jac = np.diag(p[i]) - np.outer(p[i], p[i])
      np.testing.assert_allclose(got[i], jac @ u[i], rtol=1e-5, atol=1e-7)
      assert np.linalg.norm(jac, 2) <= 0.5 + 1e-12


@pytest.mark.parametrize("method", ["lanczos", "power"])
def test_krylov_methods_agree_with_dense_svd_of_the_key_side_operator(method):
  with jax.enable_x64(True):
    x, a, w_v = _head(7, 6, 4, 3, a_scale=3.0)
    est = operator_norm.top_singular_value(S.key_side_operator(x, a, w_v), jnp.zeros((6, 4)),
                                           key=jax.random.PRNGKey(0), iters=30 if method == "lanczos" else 400,
                                           method=method)
    dense = np.linalg.svd(_dense_key_side(x, a, w_v), compute_uv=False)[0]
    np.testing.assert_allclose(float(est.sigma), dense, rtol=1e-8)
    assert float(est.sigma) <= dense * (1 + 1e-12) and float(est.gap) < 1e-6


def test_lanczos_converges_where_power_iteration_is_slow():
  """Clustered top singular values (1, 0.995, 0.99, …): 30 power steps stay visibly low, 30 Lanczos steps
  do not — why Lanczos is the default (a trained layer showed the same, docs/theory.md#operator-norms)."""
  with jax.enable_x64(True):
    s = 1.0 - 0.005 * np.arange(300)
    op = lambda v: jnp.asarray(s) * v
    key = jax.random.PRNGKey(0)
    lanczos = operator_norm.top_singular_value(op, jnp.zeros(300), key=key, iters=30)
    power = operator_norm.top_singular_value(op, jnp.zeros(300), key=key, iters=30, method="power")
    assert 1.0 - float(lanczos.sigma) < 1e-4 < 1.0 - float(power.sigma)
    assert float(lanczos.sigma) <= 1.0 + 1e-12 and float(power.sigma) <= 1.0 + 1e-12
    with pytest.raises(ValueError, match="method"):
      operator_norm.top_singular_value(op, jnp.zeros(300), key=key, method="arnoldi")


def test_power_iteration_of_zero_operator_is_zero():
  for method in operator_norm.METHODS:
    est = operator_norm.top_singular_value(lambda v: 0.0 * v, jnp.zeros((3, 2)), key=jax.random.PRNGKey(0),
                                           method=method)
    assert float(est.sigma) == 0.0 and np.all(np.isfinite(np.asarray(est.vector)))


def test_fine_bound_can_lose_to_naive_at_large_radius():
  """The remainder is quadratic in ‖XA‖ε, so min(naive, fine) matters (docs/theory.md#fine-grained-bound)."""
  x, a, w_v = _head(3, 6, 4, 3, 4.0)
  c = S.head_constants(x, a, w_v, key=jax.random.PRNGKey(0))
  assert float(S.fine_grained_bound(c, 1e-3)) < float(S.naive_bound(c, 1e-3))
  assert float(S.fine_grained_bound(c, 5.0)) > float(S.naive_bound(c, 5.0))
  np.testing.assert_allclose(float(S.local_bound(c, 5.0)), float(S.naive_bound(c, 5.0)))


def test_bound_terms_are_typed_and_add_up():
  """BoundTerms: fine = Σ of its five terms = first_order + higher_order, naive = its two parts, the first
  order is linear in ε with slope ‖P‖₂‖W_V‖₂ + σ_Q + σ_K, and higher_order/ε → 0 (step 5).
  LayerBoundTerms of one head: naive and fine are the head's, min = min(naive, fine, joint), and with
  key_norm="closed_form" joint is inf and min = min(naive, fine)."""
  with jax.enable_x64(True):
    x, a, w_v = _head(5, 5, 4, 3, 2.0)
    c = S.head_constants(x, a, w_v, key=jax.random.PRNGKey(0), power_iters=40)
    slope = float(c.p_norm * c.wv_norm + c.query_norm + c.key_norm)
    for eps in (1e-6, 0.1, 1.0):
      t = S.bound_terms(c, eps)
      assert isinstance(t, S.BoundTerms)
      np.testing.assert_allclose(float(t.fine), float(t.value + t.query + t.key + t.second_order + t.remainder),
                                 rtol=1e-12)
      np.testing.assert_allclose(float(t.fine), float(t.first_order + t.higher_order), rtol=1e-12)
      np.testing.assert_allclose(float(t.naive), float(t.naive_value + t.naive_softmax), rtol=1e-12)
      np.testing.assert_allclose(float(t.first_order), slope * eps, rtol=1e-12)
    assert float(S.bound_terms(c, 1e-6).higher_order) / 1e-6 < 1e-4 * slope
    lc = S.layer_constants(x, a[None], w_v[None], key=jax.random.PRNGKey(1), power_iters=40)
    head = S.bound_terms(jax.tree_util.tree_map(lambda f: f[0], lc.heads), 0.3)
    layer = S.layer_bound_terms(lc, 0.3)
    assert isinstance(layer, S.LayerBoundTerms) and layer._fields == ("naive", "fine", "joint", "min")
    np.testing.assert_allclose(float(layer.naive), float(head.naive), rtol=1e-12)
    np.testing.assert_allclose(float(layer.fine), float(head.fine), rtol=1e-12)
    assert float(layer.min) == min(float(layer.naive), float(layer.fine), float(layer.joint))
    rigorous = S.layer_bound_terms(lc, 0.3, key_norm="closed_form")
    assert np.isinf(float(rigorous.joint))
    assert float(rigorous.min) == min(float(rigorous.naive), float(rigorous.fine))


def test_bad_inputs_raise_clear_errors():
  x, a, w_v = _head(0, 4, 3, 2, 1.0)
  key = jax.random.PRNGKey(0)
  c = S.head_constants(x, a, w_v, key=key)
  with pytest.raises(ValueError, match="eps"):
    S.fine_grained_bound(c, -0.1)
  with pytest.raises(ValueError, match="eps"):
    S.naive_bound(c, float("nan"))
  with pytest.raises(ValueError, match="key_norm"):
    S.fine_grained_bound(c, 0.1, key_norm="svd")
  with pytest.raises(ValueError, match="x"):
    S.head_constants(np.full((4, 3), np.nan), a, w_v, key=key)
  with pytest.raises(ValueError, match="rank 2"):
    S.head_constants(x[None], a, w_v, key=key)
  with pytest.raises(ValueError, match="a must have shape"):
    S.head_constants(x, a[:2], w_v, key=key)
  with pytest.raises(ValueError, match="w_v must have shape"):
    S.head_constants(x, a, w_v.T, key=key)
  with pytest.raises(ValueError, match="iters"):
    S.head_constants(x, a, w_v, key=key, power_iters=0)
  with pytest.raises(ValueError, match="eps"):
    S.max_deviation(lambda z: z, x, -1.0, key=key)
  with pytest.raises(ValueError, match="start"):
    S.max_deviation(lambda z: z, x, 1.0, key=key, restarts=0, jacobian_start=False)
  lc = S.layer_constants(x, a[None], w_v[None], key=key)
  with pytest.raises(ValueError, match="mode"):
    S.layer_bound(lc, 0.1, mode="crown")
  with pytest.raises(ValueError, match="joint"):
    S.layer_bound(lc, 0.1, mode="joint", key_norm="closed_form")
  with pytest.raises(ValueError, match="same H"):
    S.layer_constants(x, a[None], np.stack([w_v, w_v]), key=key)
