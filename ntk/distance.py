"""How far a finite-width NTK is from its infinite-width limit, and how fast that gap closes.

* Relative Frobenius distance ‖K_m − K∞‖_F / ‖K∞‖_F: falls as m^(−1/2) for both of the paper's models
  (the sanity check; Monte-Carlo averaging over m hidden units).
* Spectral distance relative to the smallest eigenvalue, ‖K_m − K∞‖₂ / λ_min(K∞): what governs the
  kernel predictor (K + λI)⁻¹y, so the discriminating figure between 2L-ReLU and MLP-Attn
  (arXiv 2603.13085; REFERENCE §1: at m = 4096 on 256 MNIST images ≈16 vs ≈1.4e3).
* ``loglog_fit``: least-squares slope of log(y) against log(m) with its standard error, and the width at
  which the fitted line reaches a target value (e.g. 1 for the spectral ratio).
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
