"""Condition numbers of Gram matrices in float64, from eigenvalues (never by forming powers).

For a symmetric positive semi-definite G with eigenvalues λ₁ ≥ … ≥ λ_n ≥ 0, κ(G) = λ₁/λ_n and, since
G^p has eigenvalues λ^p, κ(G^p) = κ(G)^p. The linearized-attention Gram matrix is G³ (arXiv 2603.13085),
so log10 κ(G̃) = 3 log10 κ(G). Past full rank (n > d, duplicate rows) λ_n is rounding noise: we then
report a pseudo-condition number λ₁/λ_r over the eigenvalues above rtol·λ₁, together with the rank r.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from attention._checks import check_finite_matrix


class Spectrum(NamedTuple):
  """Condition report of a symmetric PSD matrix (all float64).

  Fields:
    condition_number: λ₁/λ_n if full rank, else the pseudo-condition number λ₁/λ_r; finite unless it
      exceeds float64's range (1e308), when it is inf and only the log10 field is meaningful.
    log10_condition_number: its log10 (use this for powers: p · log10 κ).
    rank: number of eigenvalues above threshold.
    n: matrix size.
    threshold: absolute eigenvalue threshold rtol·λ₁ used for the rank.
    rtol: the relative threshold.
    full_rank: rank == n.
    lambda_max, lambda_min: largest eigenvalue and smallest one kept (above threshold).
  """
  condition_number: float
  log10_condition_number: float
  rank: int
  n: int
  threshold: float
  rtol: float
  full_rank: bool
  lambda_max: float
  lambda_min: float


def default_rtol(n: int) -> float:
  """n · float64 machine epsilon: eigenvalues below rtol·λ₁ are indistinguishable from 0."""
  return float(n * np.finfo(np.float64).eps)


def _as_square(matrix, name: str) -> np.ndarray:
  return check_finite_matrix(np.asarray(matrix, dtype=np.float64), name, shape="[n, n]", square=True,
                             nonempty=True)


def _power(value, power: int) -> float:
  """value**power in float64, inf/0 past float64's range instead of an OverflowError."""
  with np.errstate(over="ignore", under="ignore"):
    return float(np.power(np.float64(value), power))


def gram_spectrum(gram, *, power: int = 1, rtol: float | None = None) -> Spectrum:
  """Condition report of G^power for a symmetric PSD Gram matrix G, via the eigenvalues of G.

  Args:
    gram: symmetric PSD matrix G with shape [n, n] (any float dtype; computed in float64).
    power: p ≥ 1; eigenvalues of G^p are λ^p, so log10 κ(G^p) = p · log10 κ(G) (no matrix powers formed).
    rtol: relative eigenvalue threshold for the rank of G (default n·eps64). The threshold for G^p is
      rtol^p·λ₁^p, i.e. the same eigenvalues of G are kept.

  Returns:
    ``Spectrum`` of G^p (finite even when rank-deficient; then ``full_rank`` is False).

  Raises:
    ValueError: non-square, non-symmetric (beyond 1e-8 relative), NaN input, power < 1, rtol ∉ (0, 1).
  """
  g = _as_square(gram, "gram")
  if int(power) != power or power < 1:
    raise ValueError(f"power must be an integer ≥ 1, got {power!r}")
  scale = np.abs(g).max()
  if np.abs(g - g.T).max() > 1e-8 * max(scale, 1e-300):
    raise ValueError("gram must be symmetric; use condition_number for general matrices")
  n = g.shape[0]
  rtol = default_rtol(n) if rtol is None else float(rtol)
  if not 0 < rtol < 1:
    raise ValueError(f"rtol must be in (0, 1), got {rtol}")
  lam = np.linalg.eigvalsh(g)[::-1]
  lam_max = float(lam[0])
  if lam_max <= 0:
    raise ValueError("gram has no positive eigenvalue; the condition number is undefined")
  kept = lam[lam > rtol * lam_max]
  rank = int(kept.size)
  log10_kappa = power * float(np.log10(lam_max) - np.log10(kept[-1]))
  return Spectrum(
      # Beyond float64's range (κ > 1e308) this is inf; the log10 field stays exact.
      condition_number=float(np.power(10.0, log10_kappa)) if log10_kappa < 308 else float("inf"),
      log10_condition_number=log10_kappa,
      rank=rank,
      n=n,
      threshold=_power(rtol * lam_max, power),
      rtol=rtol,
      full_rank=rank == n,
      lambda_max=_power(lam_max, power),
      lambda_min=_power(kept[-1], power),
  )


def condition_number(matrix) -> float:
  """Spectral condition number κ₂ = σ_max/σ_min of a matrix, in float64.

  Symmetric matrices use eigenvalue magnitudes (``eigvalsh``), others singular values.

  Args:
    matrix: shape [n, n], any float dtype.

  Returns:
    κ₂ as a Python float (≥ 1).

  Raises:
    ValueError: non-square, NaN, or singular (σ_min ≤ n·eps·σ_max): use ``gram_spectrum`` for the
      pseudo-condition number and rank of rank-deficient Gram matrices.
  """
  m = _as_square(matrix, "matrix")
  if np.allclose(m, m.T, rtol=0, atol=0):
    s = np.sort(np.abs(np.linalg.eigvalsh(m)))[::-1]
  else:
    s = np.linalg.svd(m, compute_uv=False)
  if s[0] == 0 or s[-1] <= default_rtol(m.shape[0]) * s[0]:
    raise ValueError(
        f"matrix is singular to float64 precision (σ_min/σ_max = {s[-1] / max(s[0], 1e-300):.3g}); "
        "use ntk.gram_spectrum for a pseudo-condition number with its rank")
  return float(s[0] / s[-1])
