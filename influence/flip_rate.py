"""Flip rate of influence scores under a perturbation of the training data (arXiv 2603.13085 §5).

flip rate = share of the top-τ most influential training samples — the ⌈τn⌉ largest |I_j| before the
perturbation, ties broken by the lower index — whose influence changes sign: I_before·I_after < 0 (a score
that becomes exactly 0 is not a flip). Spearman's ρ between the full before/after score vectors is
reported beside it (docs/theory.md#flip-rate).
"""
from __future__ import annotations

import fractions
import math
from typing import NamedTuple

import numpy as np
import scipy.stats


class FlipRate(NamedTuple):
  """rate: flips / n_top; n_top = ⌈τn⌉; n_flipped; spearman: ρ over all n (nan if either side is constant);
  top_indices: the [n_top] indices of the top-τ samples."""
  rate: float
  n_top: int
  n_flipped: int
  spearman: float
  top_indices: np.ndarray


def _check_fraction(top_fraction) -> None:
  if isinstance(top_fraction, (str, bool)) or not np.ndim(top_fraction) == 0 or not 0 < top_fraction <= 1:
    raise ValueError(f"top_fraction must be a number in (0, 1], got {top_fraction!r}")


def top_count(top_fraction: float, n: int) -> int:
  """⌈τn⌉ in exact arithmetic, τ taken as the decimal it is written as (0.07, not 0.07000000000000000666).

  Float arithmetic gives 0.07·100 = 7.000000000000001 and so ⌈·⌉ = 8; the count here is 7.

  Raises:
    ValueError: τ outside (0, 1], or n < 0.
  """
  _check_fraction(top_fraction)
  if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
    raise ValueError(f"n must be a non-negative integer, got {n!r}")
  # The shortest decimal that reads back as τ in its own precision: '0.1' for np.float32(0.1), not
  # '0.10000000149011612' (which gave 11 of 100).
  text = (np.format_float_positional(top_fraction, unique=True, trim="0")
          if isinstance(top_fraction, np.floating) else repr(float(top_fraction)))
  return math.ceil(fractions.Fraction(text) * int(n))


def top_influential(scores_N, top_fraction: float) -> np.ndarray:
  """Indices of the ⌈τn⌉ largest |I_j| (``top_count``, exact), ties broken by index (stable).

  Raises:
    ValueError: τ outside (0, 1].
  """
  s = np.asarray(scores_N)
  if s.ndim != 1 or not np.issubdtype(s.dtype, np.number) or not np.isfinite(s).all():
    raise ValueError(f"scores_N must be a 1-D array of finite numbers, got shape {s.shape}, dtype {s.dtype}")
  n_top = top_count(top_fraction, s.size)
  order = np.lexsort((np.arange(s.size), -np.abs(s)))
  return order[:n_top]


def flip_rate(before_N, after_N, top_fraction: float = 0.1) -> FlipRate:
  """Flip rate of the top-τ influential samples and Spearman ρ.

  Args:
    before_N: influence scores before the perturbation, shape [n].
    after_N: influence scores after, shape [n], same sample order.
    top_fraction: τ ∈ (0, 1].

  Returns:
    ``FlipRate``.

  Raises:
    ValueError: shape mismatch, empty or non-finite scores, τ outside (0, 1].
  """
  b, a = np.asarray(before_N, np.float64), np.asarray(after_N, np.float64)
  if b.ndim != 1 or b.shape != a.shape or b.size == 0:
    raise ValueError(f"before and after must be equal-length 1-D arrays, got {b.shape} and {a.shape}")
  if not (np.all(np.isfinite(b)) and np.all(np.isfinite(a))):
    raise ValueError("influence scores hold NaN or inf")
  _check_fraction(top_fraction)
  top = top_influential(b, top_fraction)
  flipped = int(np.sum(np.sign(b[top]) * np.sign(a[top]) < 0))  # signs: a product of 1e-200s underflows
  if np.ptp(b) == 0 or np.ptp(a) == 0:
    rho = float("nan")
  else:
    rho = float(scipy.stats.spearmanr(b, a).statistic)
  return FlipRate(flipped / top.size, int(top.size), flipped, rho, top)


def relative_shift(before_N, after_N) -> float:
  """‖I_after − I_before‖₂ / ‖I_before‖₂: how far a perturbation moved the whole influence vector, a
  continuous companion of the flip rate and Spearman's ρ (which count signs and ranks, and so jump when
  one score crosses another or 0).

  Args:
    before_N, after_N: influence scores [n] before and after, same sample order.

  Returns:
    The relative shift ≥ 0 (float64); inf when ‖I_before‖₂ = 0 and the scores moved, 0 when neither.

  Raises:
    ValueError: shape mismatch, empty or non-finite scores.
  """
  b, a = np.asarray(before_N, np.float64), np.asarray(after_N, np.float64)
  if b.ndim != 1 or b.shape != a.shape or b.size == 0:
    raise ValueError(f"before and after must be equal-length 1-D arrays, got {b.shape} and {a.shape}")
  if not (np.all(np.isfinite(b)) and np.all(np.isfinite(a))):
    raise ValueError("influence scores hold NaN or inf")
  # both norms of the vectors scaled by one power of two (exact): no underflow of scores near 1e-200 to a
  # zero norm, no overflow of Σx² for scores near 1e200 (the ratio does not change)
  with np.errstate(over="ignore"):
    diff = a - b
  if not np.all(np.isfinite(diff)):      # a − b itself overflows: halve both first (exact)
    a, b = a / 2, b / 2
    diff = a - b
  top = max(float(np.max(np.abs(diff))), float(np.max(np.abs(b))))
  if top == 0:
    return 0.0
  scale = 2.0 ** -math.frexp(top)[1]
  moved, size = float(np.linalg.norm(diff * scale)), float(np.linalg.norm(b * scale))
  if size == 0:
    return math.inf
  return moved / size
