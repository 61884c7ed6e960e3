"""Leave-one-out influence of training points for kernel ridge regression (KRR) with an NTK.

Setting (arXiv 2603.13085 §5; Zhang & Zhang, arXiv 2112.08297): K is the n×n (empirical, at
the trained parameters, or infinite-width) NTK on the training set, A = (K + λI)⁻¹ with ridge
λ = 1e-3·tr(K)/n by default, α = A Y for one-hot targets Y ∈ R^(n×C), and the KRR predictor is
f(x) = k_xᵀ α. The refit without training point j has, exactly,
    f₋ⱼ(x) = f(x) − (k_xᵀ A e_j / A_jj) · α_j          (α_j: row j of α, in R^C),
so with B = K_test A and Δ_tj = f₋ⱼ(x_t) − f(x_t) = −(B_tj / A_jj) α_j, the per-pair influence is
    I_tj = ℓ(f₋ⱼ(x_t), y_t) − ℓ(f(x_t), y_t) = Δ_tj·(f(x_t) − y_t) + ½‖Δ_tj‖²,   ℓ = ½‖f − y‖²,
and the influence of point j is I_j = Σ_t I_tj. **I_j > 0 means point j helps** (removing it raises the
test loss). Everything goes through one Cholesky factorisation K + λI = LLᵀ; A_jj = ‖L⁻¹e_j‖² are the
squared column norms of L⁻¹.

Memory (float64, the default): K + λI is formed in one n×n work array and factorised in place (LAPACK
potrf); α and B = K_test A are solved from L, and only then is L overwritten in place by the lower triangle
of A (LAPACK potri, a blocked Level-3 inversion computing L⁻ᵀL⁻¹ from L⁻¹), whose diagonal is A_jj. The
peak is the caller's K plus one work array, about 2n² float64 (n = 10,000: 1.6 GB; the earlier path held
about 6n²). The float32 path (``float64=False``) keeps the jitted JAX computation with an explicit L⁻¹.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import scipy.linalg
import threadpoolctl

from attention._checks import check_finite_matrix


class LOOInfluence(NamedTuple):
  """NTK leave-one-out influence.

  Fields:
    scores: [n] I_j = Σ_test [ℓ(f₋ⱼ) − ℓ(f)]; positive = helpful.
    per_pair: [t, n] I_tj for every (test point, training point) pair.
    ridge: the λ used.
    test_predictions: [t, C] f(x_test) of the full KRR fit.
  """
  scores: np.ndarray
  per_pair: np.ndarray
  ridge: float
  test_predictions: np.ndarray


def default_ridge(k_train_NxN) -> float:
  """λ = 1e-3 · tr(K) / n (docs/theory.md#ntk-leave-one-out-influence)."""
  k = np.asarray(k_train_NxN)
  return float(1e-3 * np.trace(k) / k.shape[0])


def _asymmetry(k, block: int = 256) -> tuple[float, float]:
  """(max |K − Kᵀ|, max |K|) of a square matrix, in row blocks: no n × n temporary (the float64 path's peak
  memory stays one work array beyond the inputs)."""
  asym = scale = 0.0
  for i in range(0, k.shape[0], block):
    rows = np.asarray(k[i:i + block], np.float64)
    asym = max(asym, float(np.max(np.abs(rows - np.asarray(k[:, i:i + block], np.float64).T))))
    scale = max(scale, float(np.max(np.abs(rows))))
  return asym, scale


def _check(k_train, k_test, y_train, y_test):
  n = k_train.shape[0]
  if k_train.ndim != 2 or k_train.shape != (n, n):
    raise ValueError(f"k_train must be square [n, n], got {k_train.shape}")
  if k_test.ndim != 2 or k_test.shape[1] != n:
    raise ValueError(f"k_test_train must be [t, n] with n = {n}, got {k_test.shape}")
  if y_train.ndim != 2 or y_train.shape[0] != n:
    raise ValueError(f"y_train must be [n, C] with n = {n} (one-hot for classes), got {y_train.shape}")
  if y_test.shape != (k_test.shape[0], y_train.shape[1]):
    raise ValueError(f"y_test must be [t, C] = {(k_test.shape[0], y_train.shape[1])}, got {y_test.shape}")
  for name, a in (("k_train", k_train), ("k_test_train", k_test), ("y_train", y_train), ("y_test", y_test)):
    check_finite_matrix(a, name)
  asym, scale = _asymmetry(k_train)
  if asym > 1e-5 * max(scale, np.finfo(np.float64).tiny):  # float32 kernels assembled blockwise agree to ~1e-7
    raise ValueError(f"k_train must be a symmetric kernel [n, n]: max |K − Kᵀ| = {asym:.3g} against max |K| = "
                     f"{scale:.3g} (pass the train-train kernel, not a test-train block)")


def ntk_loo_influence(k_train_NxN, k_test_train_TxN, y_train_NxC, y_test_TxC, *, ridge: float | None = None,
                      float64: bool = True) -> LOOInfluence:
  """Exact leave-one-out influence of every training point on the test loss of NTK ridge regression.

  Args:
    k_train_NxN: kernel on the training set, [n, n] (symmetric PSD).
    k_test_train_TxN: kernel between test and training points, [t, n].
    y_train_NxC: training targets, [n, C] (one-hot for classification; C = 1 for scalar regression).
    y_test_TxC: test targets, [t, C].
    ridge: λ > 0; default 1e-3·tr(K)/n.
    float64: compute in float64 (numpy/LAPACK, peak about 2n² float64; module docstring), else in
      float32 (jitted JAX, matmuls at the highest precision).

  Returns:
    ``LOOInfluence`` (numpy arrays). The score convention is in the module docstring.

  Raises:
    ValueError: mismatched shapes, NaN/inf entries, λ ≤ 0, or K + λI not positive definite.
  """
  k_train = np.asarray(k_train_NxN, np.float64)
  k_test = np.asarray(k_test_train_TxN, np.float64)
  y_train = np.asarray(y_train_NxC, np.float64)
  y_test = np.asarray(y_test_TxC, np.float64)
  _check(k_train, k_test, y_train, y_test)
  if ridge is None:
    lam = default_ridge(k_train)
    if not lam > 0:
      raise ValueError(f"k_train must be a positive semi-definite kernel with a positive trace (the default "
                       f"ridge is 1e-3·tr(K)/n), got tr(K)/n = {1e3 * lam:.3g}; pass ridge= explicitly")
  else:
    lam = float(ridge)
    if not lam > 0:
      raise ValueError(f"ridge must be > 0, got {lam}")
  if float64:
    per_pair, preds = _loo_float64(k_train, k_test, y_train, y_test, lam)
  else:
    per_pair, preds = _loo(jnp.asarray(k_train, jnp.float32), jnp.asarray(k_test, jnp.float32),
                           jnp.asarray(y_train, jnp.float32), jnp.asarray(y_test, jnp.float32),
                           jnp.asarray(lam, jnp.float32))
    per_pair, preds = np.asarray(per_pair), np.asarray(preds)
  if not np.all(np.isfinite(per_pair)):
    raise ValueError("K + λI is not numerically positive definite; increase the ridge")
  return LOOInfluence(per_pair.sum(axis=0), per_pair, lam, preds)


def _loo_float64(k_train, k_test, y_train, y_test, lam):
  """The float64 path with a peak of about 2n² (module docstring); numpy in, numpy out ([t, n], [t, C]).

  LAPACK and BLAS run on one thread here (``threadpoolctl``): at these sizes OpenBLAS's threads cost more than
  they give, and beside JAX's own threads far more (n = 512 / 1,024 / 2,048: 0.25 / 1.2 / 6.0 s on OpenBLAS's
  default 2 threads against 0.055 / 0.09 / 1.0 s on one, medians on 2 busy cores; benchmarks/loo_threads.py)."""
  with _blas().limit(limits=1, user_api="blas"):
    return _loo_float64_serial(k_train, k_test, y_train, y_test, lam)


@functools.cache
def _blas() -> threadpoolctl.ThreadpoolController:
  """The loaded BLAS libraries, found once (a fresh ``threadpool_limits`` scans them again: 2 ms a call)."""
  return threadpoolctl.ThreadpoolController()


def _loo_float64_serial(k_train, k_test, y_train, y_test, lam):
  n = k_train.shape[0]
  work = np.add(k_train, k_train.T)                  # the one n×n work array: K + Kᵀ ...
  work *= 0.5                                        # ... symmetrised in place
  work[np.diag_indices(n)] += lam
  # work is symmetric, so its transpose is the same matrix in Fortran order: LAPACK factorises in place.
  chol, info = scipy.linalg.lapack.dpotrf(work.T, lower=1, clean=0, overwrite_a=1)
  if info != 0:
    return np.full((k_test.shape[0], n), np.nan), np.full(y_test.shape, np.nan)
  alpha_NxC = scipy.linalg.cho_solve((chol, True), y_train, check_finite=False)
  b_TxN = scipy.linalg.cho_solve((chol, True), k_test.T, check_finite=False).T   # K_test A
  a_inv, info = scipy.linalg.lapack.dpotri(chol, lower=1, overwrite_c=1)         # A in place of L
  if info != 0:
    return np.full((k_test.shape[0], n), np.nan), np.full(y_test.shape, np.nan)
  a_diag_N = np.diagonal(a_inv).copy()               # A_jj
  del work, chol, a_inv
  f_TxC = k_test @ alpha_NxC
  coef_TxN = -b_TxN / a_diag_N[None, :]
  per_pair = coef_TxN * ((f_TxC - y_test) @ alpha_NxC.T)
  per_pair += 0.5 * coef_TxN ** 2 * np.sum(alpha_NxC ** 2, axis=1)[None, :]
  return per_pair, f_TxC


@jax.jit
@jax.default_matmul_precision("highest")  # float32 on GPUs would otherwise use TF32 (~1e-3 relative)
def _loo(k_train, k_test, y_train, y_test, lam):
  n = k_train.shape[0]
  chol = jsl.cholesky((k_train + k_train.T) / 2 + lam * jnp.eye(n, dtype=k_train.dtype), lower=True)
  alpha_NxC = jsl.cho_solve((chol, True), y_train)
  b_TxN = jsl.cho_solve((chol, True), k_test.T).T               # K_test A
  l_inv = jsl.solve_triangular(chol, jnp.eye(n, dtype=k_train.dtype), lower=True)
  a_diag_N = jnp.sum(l_inv ** 2, axis=0)                         # A_jj = ‖L⁻¹ e_j‖²
  f_TxC = k_test @ alpha_NxC
  coef_TxN = -b_TxN / a_diag_N[None, :]                          # Δ_tj = coef_tj · α_j
  resid_TxC = f_TxC - y_test
  first_TxN = coef_TxN * (resid_TxC @ alpha_NxC.T)
  second_TxN = 0.5 * coef_TxN ** 2 * jnp.sum(alpha_NxC ** 2, axis=1)[None, :]
  return first_TxN + second_TxN, f_TxC


def brute_force_loo_influence(k_train_NxN, k_test_train_TxN, y_train_NxC, y_test_TxC, *,
                              ridge: float) -> np.ndarray:
  """Reference: refits KRR without each training point (float64 numpy); returns per-pair I [t, n].

  O(n⁴): for tests and small n only.
  """
  k = np.asarray(k_train_NxN, np.float64)
  kt = np.asarray(k_test_train_TxN, np.float64)
  y = np.asarray(y_train_NxC, np.float64)
  yt = np.asarray(y_test_TxC, np.float64)
  n = k.shape[0]

  def loss(f):
    return 0.5 * np.sum((f - yt) ** 2, axis=1)

  full = kt @ np.linalg.solve(k + ridge * np.eye(n), y)
  out = np.zeros((kt.shape[0], n))
  for j in range(n):
    keep = np.arange(n) != j
    alpha = np.linalg.solve(k[np.ix_(keep, keep)] + ridge * np.eye(n - 1), y[keep])
    out[:, j] = loss(kt[:, keep] @ alpha) - loss(full)
  return out
