"""How far a finite-width NTK is from its infinite-width limit, and how fast that gap closes.

* Relative Frobenius distance ‖K_m − K∞‖_F / ‖K∞‖_F: falls as m^(−1/2) for both of the paper's models
  (the sanity check; Monte-Carlo averaging over m hidden units).
* Spectral distance relative to the smallest eigenvalue, ‖K_m − K∞‖₂ / λ_min(K∞): what governs the
  kernel predictor (K + λI)⁻¹y, so the discriminating figure between 2L-ReLU and MLP-Attn
  (arXiv 2603.13085; docs/theory.md#kernel-distance: at m = 4096 on 256 MNIST images ≈16 vs ≈1.4e3).
* ``loglog_fit``: least-squares slope of log(y) against log(m) with its standard error, and the width at
  which the fitted line reaches a target value (e.g. 1 for the spectral ratio).
* ``kernel_movement_measures``: how far a trained kernel moved from K₀ (raw, centred, 1 − CKA, top-k
  eigenspace), each relative to K₀.
* ``kernel_regression`` and ``function_distance``: the converged predictor of the empirical NTK at
  initialisation with the network's own f₀, and how far a network trained to convergence is from it.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.stats


def relative_frobenius(k_m, k_inf) -> float:
  """‖K_m − K∞‖_F / ‖K∞‖_F in float64.

  Args:
    k_m: finite-width kernel, any shape (e.g. [n, n] or [t, n]).
    k_inf: the reference kernel, same shape.

  Raises:
    ValueError: shape mismatch or a zero reference.
  """
  a, b = np.asarray(k_m, np.float64), np.asarray(k_inf, np.float64)
  if a.shape != b.shape:
    raise ValueError(f"k_m has shape {a.shape} but k_inf has {b.shape}")
  denom = np.linalg.norm(b)
  if denom == 0:
    raise ValueError("k_inf is zero; the relative distance is undefined")
  return float(np.linalg.norm(a - b) / denom)


KERNEL_MOVEMENT_TOP_K = 10  # k of the top-k eigenspace movement recorded by the width sweep


class KernelMovement(NamedTuple):
  """How far a trained kernel K_T has moved from the kernel at initialisation K₀, by four measures
  (``kernel_movement_measures``); Python floats, each 0 for K_T = K₀.

  Fields:
    raw: ‖K_T − K₀‖_F / ‖K₀‖_F (dominated by the top eigenvalue when one mode carries the trace).
    centred: ‖H(K_T − K₀)H‖_F / ‖HK₀H‖_F with H = I − 11ᵀ/n (the constant mode removed).
    one_minus_cka: 1 − CKA(K_T, K₀), CKA(K, L) = ⟨HKH, HLH⟩_F / (‖HKH‖_F ‖HLH‖_F), in [0, 2] (0: the
      centred kernels are proportional; invariant to scaling either kernel).
    top_k_subspace: 1 − ‖U_kᵀV_k‖_F² / k, U_k and V_k the orthonormal top-k eigenvectors of K₀ and K_T:
      the mean squared sine of the k principal angles between the two top-k eigenspaces, in [0, 1]
      (0: the same subspace; 1: orthogonal).
    top_k: the k used (min(top_k, n)).
  """
  raw: float
  centred: float
  one_minus_cka: float
  top_k_subspace: float
  top_k: int


def kernel_movement_measures(k_trained_NxN, k_initial_NxN, *, top_k: int = KERNEL_MOVEMENT_TOP_K
                             ) -> KernelMovement:
  """Four measures of the movement of a kernel during training, all normalised by (or relative to) the
  kernel at initialisation K₀, never the trained one.

  * raw ‖K_T − K₀‖_F / ‖K₀‖_F, the lazy-training measure (Jacot et al. 2018, arXiv 1806.07572; Chizat
    et al. 2019, arXiv 1812.07956);
  * centred ‖H(K_T − K₀)H‖_F / ‖HK₀H‖_F, H = I − 11ᵀ/n: the same after removing the constant mode
    (centred kernels, Cortes, Mohri & Rostamizadeh 2012, JMLR 13 "Algorithms for learning kernels based
    on centered alignment"), so a top eigenvector near 1/√n that carries most of the trace (MLP-Attn's
    K₀: 95 %) does not dominate the norm;
  * 1 − CKA(K_T, K₀), centred kernel alignment CKA(K, L) = ⟨HKH, HLH⟩_F / (‖HKH‖_F ‖HLH‖_F)
    (Kornblith et al. 2019, arXiv 1905.00414, eq. 3 with HSIC(K, L) = tr(KHLH)/(n − 1)²; equal since H
    is a symmetric projection): a change of shape, blind to a change of scale;
  * top-k eigenspace movement 1 − ‖U_kᵀV_k‖_F² / k = (1/k) Σᵢ sin²θᵢ over the principal angles θᵢ
    between the top-k eigenspaces of K₀ (U_k) and K_T (V_k) (the squared projection / chordal subspace
    distance divided by k; Golub & Van Loan, Matrix Computations, §6.4.3). Ill-defined when λ_k = λ_{k+1}.

  Centred and CKA measures are invariant to adding c·11ᵀ to both kernels; CKA also to scaling either.

  Args:
    k_trained_NxN: K_T, shape [n, n] (symmetrised for the eigenvectors).
    k_initial_NxN: K₀, same shape.
    top_k: k ≥ 1 (capped at n).

  Returns:
    ``KernelMovement`` (computed in float64). 1 − CKA is NaN when HK_TH = 0 (a constant trained kernel, e.g.
    a network whose units all died); the top-k movement is NaN when either kernel's k-th largest eigenvalue
    is not positive (beyond rounding): its top-k eigenspace is then not determined.

  Raises:
    ValueError: non-square or mismatched shapes, non-finite entries, top_k < 1, ‖K₀‖_F = 0 or ‖HK₀H‖_F = 0.
  """
  kt, k0 = np.asarray(k_trained_NxN, np.float64), np.asarray(k_initial_NxN, np.float64)
  if kt.shape != k0.shape or k0.ndim != 2 or k0.shape[0] != k0.shape[1] or k0.shape[0] < 1:
    raise ValueError(f"kernels must be square and equal in shape, got {kt.shape} and {k0.shape}")
  if not (np.isfinite(kt).all() and np.isfinite(k0).all()):
    raise ValueError("kernels hold NaN or inf")
  if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
    raise ValueError(f"top_k must be an integer >= 1, got {top_k!r}")
  n = k0.shape[0]

  def centre(k):  # HKH without forming H: subtract row and column means, add back the grand mean
    return k - k.mean(0, keepdims=True) - k.mean(1, keepdims=True) + k.mean()

  c0, ct = centre(k0), centre(kt)
  norm0, cnorm0, cnormt = np.linalg.norm(k0), np.linalg.norm(c0), np.linalg.norm(ct)
  if norm0 == 0 or cnorm0 == 0:
    raise ValueError("the initial kernel is zero (or constant after centring): the relative movement is "
                     "undefined")
  cka = float(np.sum(c0 * ct) / (cnorm0 * cnormt)) if cnormt > 0 else float("nan")
  import scipy.linalg
  k = int(min(top_k, n))
  spaces = []
  for a in (k0, kt):  # the top k only
    lam, vec = scipy.linalg.eigh((a + a.T) / 2, subset_by_index=[n - k, n - 1])
    determined = lam[0] > n * np.finfo(np.float64).eps * max(abs(lam[-1]), np.finfo(np.float64).tiny)
    spaces.append(vec if determined else None)
  u, v = spaces
  overlap = float(np.sum((u.T @ v) ** 2)) / k if u is not None and v is not None else float("nan")
  return KernelMovement(raw=float(np.linalg.norm(kt - k0) / norm0), centred=float(np.linalg.norm(ct - c0) / cnorm0),
                        one_minus_cka=1.0 - cka, top_k_subspace=float(np.clip(1.0 - overlap, 0.0, 1.0)), top_k=k)


class SpectralDistance(NamedTuple):
  """‖K_m − K∞‖₂ relative to the spectrum of K∞ (float64).

  Fields:
    ratio_to_lambda_min: ‖K_m − K∞‖₂ / λ_min(K∞).
    operator_norm: ‖K_m − K∞‖₂.
    lambda_min, lambda_max: extreme eigenvalues of K∞.
  """
  ratio_to_lambda_min: float
  operator_norm: float
  lambda_min: float
  lambda_max: float


def spectral_distance(k_m, k_inf) -> SpectralDistance:
  """Operator-norm distance between square symmetric kernels, relative to λ_min(K∞).

  Args:
    k_m, k_inf: kernels with shape [n, n] (symmetrised before use).

  Returns:
    ``SpectralDistance``. λ_min ≤ 0 (a singular K∞) gives ratio inf, never NaN.

  Raises:
    ValueError: non-square or mismatched shapes.
  """
  a, b = np.asarray(k_m, np.float64), np.asarray(k_inf, np.float64)
  if a.shape != b.shape or a.ndim != 2 or a.shape[0] != a.shape[1]:
    raise ValueError(f"k_m and k_inf must be square and equal in shape, got {a.shape} and {b.shape}")
  diff = (a - b + (a - b).T) / 2
  op = float(np.max(np.abs(np.linalg.eigvalsh(diff))))
  lam = np.linalg.eigvalsh((b + b.T) / 2)
  lam_min, lam_max = float(lam[0]), float(lam[-1])
  ratio = op / lam_min if lam_min > 0 else float("inf")
  return SpectralDistance(ratio, op, lam_min, lam_max)


class LogLogFit(NamedTuple):
  """y ≈ exp(intercept) · m^slope fitted on log-log axes.

  Fields:
    slope, slope_stderr: fitted exponent and its standard error (scipy.stats.linregress).
    intercept: log(y) at m = 1.
    r_squared: coefficient of determination.
    n_points: number of (m, y) points used.
  """
  slope: float
  slope_stderr: float
  intercept: float
  r_squared: float
  n_points: int

  def width_reaching(self, target: float) -> float:
    """Width m at which the fitted line equals ``target`` (inf when the slope is ≥ 0)."""
    if self.slope >= 0:
      return float("inf")
    return float(np.exp((np.log(target) - self.intercept) / self.slope))


def loglog_fit(widths, values) -> LogLogFit:
  """Least-squares fit of log(values) = intercept + slope · log(widths).

  Args:
    widths: positive widths, shape [k] (repeat a width once per seed to use all seeds).
    values: positive values, shape [k].

  Raises:
    ValueError: fewer than 3 points, fewer than 2 distinct widths, or non-positive entries.
  """
  w, v = np.asarray(widths, np.float64), np.asarray(values, np.float64)
  if w.shape != v.shape or w.ndim != 1 or w.size < 3:
    raise ValueError(f"widths and values must be 1-D of equal length ≥ 3, got {w.shape} and {v.shape}")
  if np.unique(w).size < 2:
    raise ValueError("widths must hold at least 2 distinct values")
  if np.any(w <= 0) or np.any(v <= 0) or not np.all(np.isfinite(v)):
    raise ValueError("widths and values must be positive and finite for a log-log fit")
  res = scipy.stats.linregress(np.log(w), np.log(v))
  return LogLogFit(float(res.slope), float(res.stderr), float(res.intercept), float(res.rvalue ** 2),
                   int(w.size))


class KernelRegression(NamedTuple):
  """The converged kernel predictor f₀ + K(·, X)(K(X, X) + λI)⁻¹(Y − f₀(X)) (float64).

  Fields:
    train: predictions on the training inputs, shape [n, C].
    test: predictions on the test inputs, shape [t, C].
    ridge: λ used, = ridge_scale · tr(K(X, X)) / n (record it with the distance).
  """
  train: np.ndarray
  test: np.ndarray
  ridge: float


def kernel_regression(k_train_train_NxN, k_test_train_TxN, y_train_NxC, *, fx_train_0, fx_test_0,
                      ridge_scale: float = 1e-6) -> KernelRegression:
  """The t → ∞ limit of gradient descent in the kernel regime, started from the network's own f₀.

  With the empirical NTK at initialisation K₀ = Θ₀ this is what a network trained to convergence would
  compute if its kernel stayed at K₀ (Lee et al. 2019, arXiv 1902.06720, eq. 9 at t → ∞; Jacot et al.
  2018): f(x) = f₀(x) + K₀(x, X)(K₀(X, X) + λI)⁻¹(Y − f₀(X)). The small ridge λ = ridge_scale · tr(K₀)/n
  keeps the solve stable when K₀(X, X) is near-singular; it leaves the training residual at
  λ(K₀ + λI)⁻¹(Y − f₀(X)) instead of 0.

  Args:
    k_train_train_NxN: K₀(X, X), shape [n, n] (symmetrised; output-averaged as in ``ntk.empirical``).
    k_test_train_TxN: K₀(x, X) on the test inputs, shape [t, n].
    y_train_NxC: targets, shape [n, C] (one-hot for classification).
    fx_train_0, fx_test_0: the network's outputs at initialisation, shapes [n, C] and [t, C].
    ridge_scale: λ / (tr(K₀)/n), ≥ 0 (1e-6 by default).

  Returns:
    ``KernelRegression`` (solved in float64 by a Cholesky factorisation).

  Raises:
    ValueError: shapes that do not line up, non-finite entries, a negative ridge_scale, or a kernel that is
      not positive definite after adding λI.
  """
  import scipy.linalg

  k = np.asarray(k_train_train_NxN, np.float64)
  k_t = np.asarray(k_test_train_TxN, np.float64)
  y = np.asarray(y_train_NxC, np.float64)
  f_tr, f_te = np.asarray(fx_train_0, np.float64), np.asarray(fx_test_0, np.float64)
  if y.ndim != 2:
    raise ValueError(f"y_train_NxC must have shape [n, C], got {y.shape}")
  n, c = y.shape
  if k.shape != (n, n) or k_t.ndim != 2 or k_t.shape[1] != n:
    raise ValueError(f"kernel shapes {k.shape} and {k_t.shape} do not match {n} training targets")
  if f_tr.shape != (n, c) or f_te.shape != (k_t.shape[0], c):
    raise ValueError(f"fx_train_0 must have shape {(n, c)} and fx_test_0 {(k_t.shape[0], c)}, got "
                     f"{f_tr.shape} and {f_te.shape}")
  if not all(np.isfinite(a).all() for a in (k, k_t, y, f_tr, f_te)):
    raise ValueError("kernels, targets and initial outputs must be finite")
  if not (np.isfinite(ridge_scale) and ridge_scale >= 0):
    raise ValueError(f"ridge_scale must be finite and ≥ 0, got {ridge_scale!r}")
  k = (k + k.T) / 2
  ridge = float(ridge_scale * np.trace(k) / n)
  try:
    factor = scipy.linalg.cho_factor(k + ridge * np.eye(n))
  except np.linalg.LinAlgError:
    raise ValueError(f"K(X, X) + λI is not positive definite (λ = {ridge:.3g}); raise ridge_scale") from None
  alpha = scipy.linalg.cho_solve(factor, y - f_tr)
  return KernelRegression(f_tr + k @ alpha, f_te + k_t @ alpha, ridge)


class FunctionDistance(NamedTuple):
  """Distance between a trained network's outputs and a kernel predictor's on the same inputs (float64).

  Fields:
    distance: ‖f_net − f_kernel‖_F over the [t, C] outputs.
    rms: distance / √(t·C).
    relative: distance / ‖f_kernel − f₀‖_F, the predictor's own movement from initialisation.
  """
  distance: float
  rms: float
  relative: float


def function_distance(f_net_TxC, f_kernel_TxC, f0_TxC) -> FunctionDistance:
  """‖f_net − f_kernel‖_F, absolute, per entry and relative to ‖f_kernel − f₀‖_F.

  Args:
    f_net_TxC: the trained network's outputs, shape [t, C].
    f_kernel_TxC: the kernel predictor's outputs (e.g. ``KernelRegression.test``), shape [t, C].
    f0_TxC: the network's outputs at initialisation, shape [t, C].

  Raises:
    ValueError: shapes differ or an entry is not finite. A predictor that never moves gives relative inf.
  """
  a, b, f0 = (np.asarray(v, np.float64) for v in (f_net_TxC, f_kernel_TxC, f0_TxC))
  if not a.shape == b.shape == f0.shape or a.size == 0:
    raise ValueError(f"f_net, f_kernel and f0 must have the same non-empty shape, got {a.shape}, {b.shape}, "
                     f"{f0.shape}")
  if not all(np.isfinite(v).all() for v in (a, b, f0)):
    raise ValueError("outputs must be finite")
  dist = float(np.linalg.norm(a - b))
  moved = float(np.linalg.norm(b - f0))
  return FunctionDistance(dist, dist / np.sqrt(a.size), dist / moved if moved > 0 else float("inf"))
