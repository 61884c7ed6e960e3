"""Large n: the float64 NTK leave-one-out path (in-place Cholesky and inverse, peak about 2n²) equals the
unblocked JAX path, and the fast-path kernel computed in row blocks under a memory budget equals one block."""
import importlib
import tracemalloc

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ntk
from influence import ntk_loo_influence

ntk_loo = importlib.import_module("influence.ntk_loo")
empirical = importlib.import_module("ntk.empirical")


def _problem(n, t=15, classes=3, seed=0):
  """An arc-cosine NTK of random unit rows (the paper's kernel; K + λI has κ ~ 1e5 at n = 300)."""
  rng = np.random.default_rng(seed)
  x = rng.random((n + t, 50))
  x /= np.linalg.norm(x, axis=1, keepdims=True)
  with jax.enable_x64(True):
    k = np.asarray(ntk.arccos_ntk(jnp.asarray(x)))
  labels = rng.integers(0, classes, n + t)
  y = np.eye(classes)[labels]
  return k[:n, :n], k[n:, :n], y[:n], y[n:]


def test_float64_loo_equals_the_unblocked_jax_path_to_1e_10():
  k, kt, y, yt = _problem(300)
  got = ntk_loo_influence(k, kt, y, yt)
  with jax.enable_x64(True):
    ref, preds = ntk_loo._loo(jnp.asarray(k), jnp.asarray(kt), jnp.asarray(y), jnp.asarray(yt),
                              jnp.asarray(got.ridge))
    ref, preds = np.asarray(ref), np.asarray(preds)
  assert ref.dtype == np.float64
  scale = np.abs(ref).max()
  np.testing.assert_allclose(got.per_pair, ref, rtol=0, atol=1e-10 * scale)
  np.testing.assert_allclose(got.test_predictions, preds, rtol=1e-10)
  np.testing.assert_allclose(got.scores, ref.sum(0), rtol=0, atol=1e-10 * np.abs(ref.sum(0)).max())


def test_float64_loo_peak_is_one_work_array_beyond_the_inputs():
  """tracemalloc sees numpy's allocations: beyond the caller's K the path holds one n×n float64 work array
  (factorised and inverted in place) plus O(n·t) vectors; the earlier path held about 6n²."""
  n = 500
  k, kt, y, yt = _problem(n, t=10)
  ntk_loo_influence(k[:20, :20], kt[:, :20], y[:20], yt)  # imports and first-call set-up outside the window
  tracemalloc.start()
  try:
    ntk_loo_influence(k, kt, y, yt)
    _, peak = tracemalloc.get_traced_memory()
  finally:
    tracemalloc.stop()
  n2_bytes = 8 * n * n
  assert n2_bytes <= peak < 1.3 * n2_bytes, f"peak {peak / n2_bytes:.2f} n² float64"


def test_loo_not_positive_definite_raises():
  k = np.diag([1.0, -5.0, 1.0])
  with pytest.raises(ValueError, match="positive definite"):
    ntk_loo_influence(k, np.ones((1, 3)), np.ones((3, 1)), np.ones((1, 1)), ridge=1.0)


@pytest.mark.parametrize("readout", ["fixed", "trained"])
def test_blocked_fast_path_kernel_equals_one_block(readout):
  d, width = 12, 32
  model = ntk.two_layer_relu(width, d, out_dim=3, readout=readout)
  _, params = model.init_fn(jax.random.PRNGKey(1), (-1, d))
  rng = np.random.default_rng(2)
  x1 = rng.normal(size=(23, d)).astype(np.float32)
  x2 = rng.normal(size=(9, d)).astype(np.float32)
  for other, m in ((x2, 9), (None, 23)):
    whole = np.asarray(ntk.two_layer_relu_ntk(model, params, x1, other))
    rows = 5  # 23 = 4·5 + 3: the last block is padded
    budget = 4 * (m * (d + 3 * width) + rows * (d + 3 * width + 4 * m))
    assert empirical.fast_path_block_rows(23, m, d, width, memory_bytes=budget) == rows
    blocked = ntk.two_layer_relu_ntk(model, params, x1, other, memory_bytes=budget)
    assert isinstance(blocked, np.ndarray) and blocked.shape == (23, m)
    np.testing.assert_allclose(blocked, whole, rtol=1e-6, atol=1e-6 * np.abs(whole).max())
  np.testing.assert_allclose(blocked, blocked.T, rtol=1e-6)  # K(x1, x1) is symmetric


def test_fast_path_block_rows_accounting_and_errors():
  n, m, d, width = 1000, 400, 784, 256
  fixed, per_row = 4 * m * (d + 3 * width), 4 * (d + 3 * width + 4 * m)
  assert empirical.fast_path_block_rows(n, m, d, width, memory_bytes=fixed + 37 * per_row + per_row - 1) == 37
  assert empirical.fast_path_block_rows(n, m, d, width, memory_bytes=1 << 40) == n
  assert empirical.fast_path_block_rows(n, m, d, width, memory_bytes=2 * (fixed + 10 * per_row), itemsize=8) == 10
  with pytest.raises(ValueError, match="memory_bytes must be an integer ≥"):
    empirical.fast_path_block_rows(n, m, d, width, memory_bytes=fixed)
  with pytest.raises(ValueError, match="n_rows"):
    empirical.fast_path_block_rows(0, m, d, width)
