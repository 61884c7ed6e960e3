"""Adaptive sharpness (influence.sharpness.adaptive_sharpness) against the dense T H T, and its invariance
to the ReLU rescaling that changes the raw top Hessian eigenvalue (Kwon et al., arXiv 2102.11600, §3)."""
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from influence.sharpness import adaptive_sharpness, hessian_top_eigenvalues
from ntk.models import two_layer_relu

D, M, C, N = 4, 5, 2, 12


def _problem():
  model = two_layer_relu(M, D, out_dim=C, readout="trained")
  _, params = model.init_fn(jax.random.PRNGKey(0), (-1, D))
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(N, D)))
  y = jax.nn.one_hot(rng.integers(0, C, N), C)

  def objective(p):
    return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(model.apply_fn(p, x)), axis=-1))

  return model, params, x, objective


def _rescaled(params, c):
  (w, _), _, (v, _) = params
  return [(c * w, None), (), (v / c, None)]


def test_rescaling_the_first_layer_by_c_and_the_readout_by_1_over_c_leaves_adaptive_sharpness_unchanged():
  with jax.enable_x64(True):
    model, params, x, objective = _problem()
    assert ravel_pytree(params)[0].dtype == jnp.float64
    n_params = D * M + M * C
    raw, adaptive = {}, {}
    for c in (1.0, 3.0, 0.25):
      scaled = _rescaled(params, c)
      np.testing.assert_allclose(model.apply_fn(scaled, x), model.apply_fn(params, x), rtol=1e-12)
      raw[c] = hessian_top_eigenvalues(objective, scaled, k=2, num_iters=n_params)
      adaptive[c] = adaptive_sharpness(objective, scaled, k=2, num_iters=n_params)
    for c in (3.0, 0.25):
      np.testing.assert_allclose(adaptive[c], adaptive[1.0], rtol=1e-5)
      assert abs(raw[c][0] / raw[1.0][0] - 1) > 0.5, (c, raw)


def test_adaptive_sharpness_equals_the_top_eigenvalues_of_the_dense_normalised_hessian():
  with jax.enable_x64(True):
    _, params, _, objective = _problem()
    flat, unravel = ravel_pytree(params)
    hessian = jax.hessian(lambda f: objective(unravel(f)))(flat)
    t = jnp.abs(flat)
    dense = np.sort(np.linalg.eigvalsh(np.asarray(t[:, None] * hessian * t[None, :])))[::-1]
    lanczos = adaptive_sharpness(objective, params, k=3, num_iters=flat.size)
    np.testing.assert_allclose(lanczos, dense[:3], rtol=1e-8)
    raw = np.sort(np.linalg.eigvalsh(np.asarray(hessian)))[::-1]
    assert abs(dense[0] / raw[0] - 1) > 0.05  # the normalisation is not a no-op here


def test_matched_loss_scale_reaches_the_target_and_keeps_the_activation_pattern():
  """A 2-layer ReLU net with its first layer scaled by c outputs c·f(x): the loss ½·mean((c·f − y)²) is a
  quadratic in c, whose root the scale must equal (closed form); the pattern relu(c·Wx) > 0 is that of Wx."""
  import math
  import numpy as np
  import pytest
  from influence.sharpness import matched_loss_scale
  rng = np.random.default_rng(0)
  w, a, x = rng.normal(size=(16, 5)), rng.choice([-1.0, 1.0], 16), rng.normal(size=(30, 5))
  f = np.maximum(x @ w.T, 0) @ a / 4
  y = f + 0.05 * rng.normal(size=30)
  loss = lambda c: 0.5 * np.mean((np.maximum(c * x @ w.T, 0) @ a / 4 - y) ** 2)  # noqa: E731
  target = 2 * loss(1.0) + 0.01
  c = matched_loss_scale(loss, target)
  # ½·mean((c f − y)²) = target: A c² − 2 B c + C − 2·target = 0 with A = mean f², B = mean f y, C = mean y²
  A, B, C = np.mean(f * f), np.mean(f * y), np.mean(y * y)
  roots = [(B - s * math.sqrt(B * B - A * (C - 2 * target))) / A for s in (1, -1)]
  assert any(abs(c - r) < 1e-9 for r in roots if 0 <= r <= 1)
  assert np.array_equal(c * x @ w.T > 0, x @ w.T > 0)
  assert matched_loss_scale(loss, loss(1.0)) == 1.0
  with pytest.raises(ValueError, match="outside"):
    matched_loss_scale(loss, loss(1.0) / 2)
