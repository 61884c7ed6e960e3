"""The sensitivity theory of differential attention as measurements (arXiv 2510.00517, §4; docs/theory.md
sections "Theorem 2", "Theorem 3 as a predictor" and "Corollary 1").

* Theorem 2's sensitivity ratio of one head, ‖∇A_DA‖/‖∇A_std‖ = γ·√(1 + λ²ρ² − 2λρ cos θ), from the measured
  γ, ρ, θ and λ (``theorem2_ratio``), and its layer aggregate over heads (``layer_sensitivity_ratio``);
* Theorem 3's condition as a score (``theorem3_margin``: > 0 exactly where the theorem says DA is the more
  sensitive) and the ROC AUC of a score against an outcome (``roc_auc``; a constant guess has AUC ½);
* Corollary 1's depth threshold: a per-layer noise-cancellation factor ᾱ and the depth D* at which the
  relative sensitivity r₁·ᾱ^(D−1) of DiffViT to ViT reaches 1 (``noise_cancellation_fit``,
  ``crossover_depth_estimate``).

Everything here works on measured arrays (numpy, float64); nothing trains or differentiates.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


def _finite(name: str, value) -> np.ndarray:
  arr = np.asarray(value, dtype=np.float64)
  if not np.all(np.isfinite(arr)):
    raise ValueError(f"{name} must be finite, got non-finite values")
  return arr


def theorem2_ratio(cos_theta, rho, gamma, lam) -> np.ndarray:
  """Theorem 2's ratio ‖∇A_DA‖/‖∇A_std‖ = γ·√(1 + λ²ρ² − 2λρ cos θ) of one differential head.

  It follows from Lemma 1, ‖∇A_DA‖² = ‖∇A₁‖²(1 + λ²ρ² − 2λρ cos θ), divided by ‖∇A_std‖ = ‖∇A₁‖/γ
  (arXiv 2510.00517, Lemma 1 and Theorem 2; docs/theory.md#theorem-2).

  Args:
    cos_theta: cos θ between the input Jacobians of the head's two maps, in [−1, 1]; any shape.
    rho: ρ = ‖∇A₂‖/‖∇A₁‖ ≥ 0; gamma: γ = ‖∇A₁‖/‖∇A_std‖ ≥ 0; lam: λ (any real). All broadcast together.

  Returns:
    float64 array of the broadcast shape, ≥ 0.

  Raises:
    ValueError: a non-finite input, cos θ outside [−1, 1] (beyond 1e-9 rounding), ρ, γ < 0, or shapes that
      do not broadcast (each names the argument).
  """
  cos, rho, gamma, lam = _theorem_inputs(cos_theta, rho, gamma, lam)
  # ‖J₁ − λJ₂‖/‖J₁‖ = √(1 + u² − 2u cos θ) = hypot(1 − u cos θ, u sin θ) with u = λρ: no square overflows.
  with np.errstate(over="ignore", invalid="ignore"):
    u = lam * rho
    ratio = gamma * np.hypot(1 - u * cos, u * np.sqrt(np.maximum(1 - cos * cos, 0.0)))
  if not np.all(np.isfinite(ratio)):
    raise ValueError("theorem2_ratio overflows float64: γ·λρ exceeds about 1.8e308 (lam, rho or gamma too large)")
  return ratio


def _theorem_inputs(cos_theta, rho, gamma, lam):
  """The four measured quantities as float64 arrays of one broadcast shape, checked (ValueError naming the
  argument: non-finite, cos θ outside [−1, 1] beyond 1e-9 rounding, ρ or γ < 0, shapes that do not
  broadcast)."""
  values = {n: _finite(n, v) for n, v in (("cos_theta", cos_theta), ("rho", rho), ("gamma", gamma), ("lam", lam))}
  if np.any(np.abs(values["cos_theta"]) > 1 + 1e-9):
    raise ValueError("cos_theta must lie in [-1, 1]")
  for name in ("rho", "gamma"):
    if np.any(values[name] < 0):
      raise ValueError(f"{name} must be >= 0 (a ratio of norms)")
  try:
    cos, rho, gamma, lam = np.broadcast_arrays(*values.values())
  except ValueError:
    raise ValueError("cos_theta, rho, gamma and lam must broadcast to one shape, got "
                     + ", ".join(f"{n} {v.shape}" for n, v in values.items())) from None
  return np.clip(cos, -1.0, 1.0), rho, gamma, lam


def layer_sensitivity_ratio(norm_da_SxH, norm_std_SxH) -> np.ndarray:
  """Per sample, the layer's ratio √(Σ_h ‖∇A_DA,h‖²) / √(Σ_h ‖∇A_std,h‖²): Theorem 2's ratio of the layer's
  stacked head Jacobians (each DiffViT head against its matched ViT head; docs/theory.md#theorem-2).

  Args:
    norm_da_SxH, norm_std_SxH: Jacobian norms, float [S, H] (``attention.alignment.HeadAlignment``).

  Returns:
    float64 [S].

  Raises:
    ValueError: shapes differ or are not 2-D, non-finite or negative norms, or a sample whose standard
      norms are all 0.
  """
  da, std = _finite("norm_da_SxH", norm_da_SxH), _finite("norm_std_SxH", norm_std_SxH)
  if da.shape != std.shape or da.ndim != 2:
    raise ValueError(f"norm_da_SxH and norm_std_SxH must have the same shape [S, H], got {da.shape}, {std.shape}")
  if np.any(da < 0) or np.any(std < 0):
    raise ValueError("norms must be >= 0")
  if np.any(std.max(axis=1, initial=0.0) == 0):
    raise ValueError("norm_std_SxH has a sample whose standard-head Jacobians are all 0 (ratio undefined)")
  scale = np.maximum(da.max(axis=1), std.max(axis=1))[:, None]  # > 0; scaled so no square over/underflows
  return np.linalg.norm(da / scale, axis=1) / np.linalg.norm(std / scale, axis=1)


def theorem3_margin(cos_theta, rho, gamma, lam) -> np.ndarray:
  """(1 + λ²ρ² − γ⁻²) − 2λρ cos θ: positive exactly where Theorem 3 says the differential head is more
  sensitive than the standard one (‖∇A_DA‖ > ‖∇A_std‖), for either sign of λρ (arXiv 2510.00517,
  Theorem 3; docs/theory.md#theorem-3). Equal to (‖∇A_DA‖² − ‖∇A_std‖²)/‖∇A₁‖², so it also ranks by how
  much. Broadcasts; γ = 0 gives −inf (a zero ‖∇A₁‖ is never the more sensitive).

  Raises:
    ValueError: as ``theorem2_ratio``.
  """
  cos, rho, gamma, lam = _theorem_inputs(cos_theta, rho, gamma, lam)
  with np.errstate(divide="ignore", over="ignore"):
    return 1 + (lam * rho) ** 2 - gamma ** -2.0 - 2 * lam * rho * cos


def roc_auc(scores, labels) -> float:
  """Area under the ROC curve of ``scores`` for the positive ``labels``: P(score⁺ > score⁻) + ½ P(tie), the
  Mann–Whitney U statistic over n⁺·n⁻ pairs (a constant score gives ½).

  Args:
    scores: float [S]; labels: bool [S], or numbers each 0 or 1.

  Returns:
    AUC in [0, 1].

  Raises:
    ValueError: shapes differ, not 1-D, non-finite scores, labels other than 0/1 or booleans, or one class
      absent (AUC undefined).
  """
  s = _finite("scores", scores)
  raw = np.asarray(labels)
  if raw.dtype != bool and (raw.dtype.kind not in "iuf" or not np.all((raw == 0) | (raw == 1))):
    raise ValueError(f"labels must be booleans or numbers each 0 or 1, got {raw.dtype} values "
                     f"{np.unique(raw)[:5].tolist()}")
  y = raw.astype(bool)
  if s.ndim != 1 or y.shape != s.shape:
    raise ValueError(f"scores and labels must be 1-D of the same length, got {s.shape} and {y.shape}")
  pos, neg = s[y], s[~y]
  if len(pos) == 0 or len(neg) == 0:
    raise ValueError(f"roc_auc needs both classes, got {len(pos)} positive and {len(neg)} negative labels")
  # Mann–Whitney through mid-ranks: U = Σ ranks of positives − n⁺(n⁺ + 1)/2.
  order = np.argsort(s, kind="mergesort")
  ranks = np.empty(len(s))
  sorted_s = s[order]
  start = 0
  while start < len(s):
    stop = start
    while stop + 1 < len(s) and sorted_s[stop + 1] == sorted_s[start]:
      stop += 1
    ranks[order[start:stop + 1]] = 0.5 * (start + stop) + 1.0
    start = stop + 1
  u = ranks[y].sum() - len(pos) * (len(pos) + 1) / 2.0
  return float(u / (len(pos) * len(neg)))


class NoiseCancellationFit(NamedTuple):
  """r1: the fitted relative sensitivity of DiffViT to ViT after the first layer; alpha_bar: the fitted
  per-layer factor ᾱ; layers: how many layers were fitted."""
  r1: float
  alpha_bar: float
  layers: int


def noise_cancellation_fit(ratio_by_layer) -> NoiseCancellationFit:
  """Fits s_l = r₁·ᾱ^(l−1) to the relative sensitivity s_l = L̂_DiffViT,l / L̂_ViT,l after blocks l = 1..L
  (least squares on log s_l): ᾱ < 1 is the per-layer noise-cancellation factor of Corollary 1, r₁ the
  first layer's amplification (arXiv 2510.00517, Corollary 1, as read in docs/theory.md#corollary-1).

  Args:
    ratio_by_layer: s_1..s_L > 0, float [L], L ≥ 2.

  Returns:
    ``NoiseCancellationFit``.

  Raises:
    ValueError: fewer than 2 layers, or a non-finite or non-positive ratio.
  """
  s = _finite("ratio_by_layer", ratio_by_layer)
  if s.ndim != 1 or len(s) < 2:
    raise ValueError(f"ratio_by_layer must hold at least 2 layers, got shape {s.shape}")
  if np.any(s <= 0):
    raise ValueError("ratio_by_layer must be > 0 (ratios of Lipschitz estimates)")
  layers = np.arange(len(s), dtype=np.float64)
  slope, intercept = np.polyfit(layers, np.log(s), 1)
  fit = NoiseCancellationFit(float(np.exp(intercept)), float(np.exp(slope)), len(s))
  if not (0 < fit.r1 < math.inf and 0 < fit.alpha_bar < math.inf):
    raise ValueError(f"ratio_by_layer spans too many decades for a fit in float64 (r1 = {fit.r1}, alpha_bar = "
                     f"{fit.alpha_bar})")
  return fit


def crossover_depth_estimate(r1: float, alpha_bar: float) -> float:
  """The depth D* at which r₁·ᾱ^(D−1) = 1: D* = 1 + ln r₁ / ln(1/ᾱ) (Corollary 1; docs/theory.md#corollary-1).

  Beyond D* DiffViT is predicted to be the less sensitive model. Edge cases: r₁ ≤ 1 gives 1 (no
  amplification to cancel: DiffViT is no more sensitive from the first layer on); ᾱ ≥ 1 with r₁ > 1 gives
  +inf (nothing cancels, no crossover).

  Raises:
    ValueError: r₁ or ᾱ not finite and > 0.
  """
  try:
    r1, alpha_bar = float(r1), float(alpha_bar)
  except (TypeError, ValueError):
    raise ValueError(f"r1 and alpha_bar must be numbers, got {r1!r} and {alpha_bar!r}") from None
  if not (math.isfinite(r1) and r1 > 0 and math.isfinite(alpha_bar) and alpha_bar > 0):
    raise ValueError(f"r1 and alpha_bar must be finite and > 0, got {r1!r} and {alpha_bar!r}")
  if r1 <= 1.0:
    return 1.0
  if alpha_bar >= 1.0:
    return math.inf
  return 1.0 + math.log(r1) / math.log(1.0 / alpha_bar)
