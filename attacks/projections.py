"""Per-sample norms, normalisations and projections onto ε-balls intersected with the pixel box.

Every reduction here is over all axes but the first (the batch axis): a sample's step, norm and
projection never depend on the other samples in the batch (the batch-wide norms of some libraries are a
known source of wrong attacks). Source: docs/theory.md#attack-conventions; Madry et al., "Towards Deep Learning Models
Resistant to Adversarial Attacks" (ICLR 2018), eq. (2) and §2.1.
"""
from __future__ import annotations

import jax.numpy as jnp


BUDGET_RTOL = 1e-5
"""Relative tolerance of every budget check: ‖δ‖ ≤ ε·(1 + BUDGET_RTOL) counts as within ε.

An attack that projects onto the ε-ball ends at ‖δ‖ = ε up to float32 rounding (PGD-L2 at ε = 0.5 ends at
ε + 6e-8), so an exact ‖δ‖ ≤ ε drops successes that are inside the budget. 1e-5 is ~80 float32 ulps: far
above the rounding, far below any budget difference a study compares.
"""


def within_budget(norm, eps) -> jnp.ndarray:
  """norm ≤ eps·(1 + BUDGET_RTOL), elementwise with broadcasting: the one budget comparison of the code base.

  Args:
    norm: perturbation norms (any ℓp, on the pixel scale), any shape.
    eps: budgets ≥ 0 on the same scale, broadcastable against norm.

  Returns:
    bool array of the broadcast shape.
  """
  return norm <= eps * (1 + BUDGET_RTOL)


def per_sample(v_B: jnp.ndarray, x: jnp.ndarray) -> jnp.ndarray:
  """Reshapes a per-sample vector with shape [batch] to [batch, 1, ..., 1] so it broadcasts against x."""
  return jnp.reshape(v_B, v_B.shape[:1] + (1,) * (x.ndim - 1))


def _sample_axes(x: jnp.ndarray) -> tuple[int, ...]:
  return tuple(range(1, x.ndim))


def safe_sqrt(s: jnp.ndarray) -> jnp.ndarray:
  """√s for s ≥ 0 with derivative 0 at s = 0 (never inf or NaN): the double-where form, so the unused
  branch of the `where` never sees 0 either. Every ℓ2 norm of the attacks goes through it."""
  positive = s > 0
  return jnp.where(positive, jnp.sqrt(jnp.where(positive, s, jnp.ones_like(s))), jnp.zeros_like(s))


def l2_norm(x: jnp.ndarray) -> jnp.ndarray:
  """Per-sample ℓ2 norm ‖x_i‖₂ of x with shape [batch, ...]; returns shape [batch]. Its gradient is finite
  everywhere: x_i/‖x_i‖₂, and 0 for a zero sample (where plain √ gives NaN)."""
  return safe_sqrt(jnp.sum(jnp.square(x), axis=_sample_axes(x)))


def linf_norm(x: jnp.ndarray) -> jnp.ndarray:
  """Per-sample ℓ∞ norm max_j |x_ij| of x with shape [batch, ...]; returns shape [batch]."""
  return jnp.max(jnp.abs(x), axis=_sample_axes(x))


def _normalize(g: jnp.ndarray, norm_B: jnp.ndarray) -> jnp.ndarray:
  norm_B = per_sample(norm_B, g)
  return g / jnp.where(norm_B > 0, norm_B, jnp.ones_like(norm_B))


def normalize_l2(g: jnp.ndarray) -> jnp.ndarray:
  """g_i / ‖g_i‖₂ per sample; a sample with zero norm is returned as zeros (never NaN). Shape kept."""
  return _normalize(g, l2_norm(g))


def normalize_l1(g: jnp.ndarray) -> jnp.ndarray:
  """g_i / ‖g_i‖₁ per sample (MIM's normalisation); a zero sample stays zero (never NaN). Shape kept."""
  return _normalize(g, jnp.sum(jnp.abs(g), axis=_sample_axes(g)))


def project_linf(x_adv, x, eps, lower, upper) -> jnp.ndarray:
  """Projects x_adv onto {x' : ‖x' − x‖∞ ≤ ε} ∩ [lower, upper]^d, per sample.

  clip(x + clip(x_adv − x, −ε, ε), lower, upper): both sets are boxes, so clipping in turn is the exact
  Euclidean projection onto their intersection. The projection is always around the original x.

  Args:
    x_adv: candidate points, shape [batch, ...].
    x: the original inputs, same shape, inside [lower, upper].
    eps: scalar budget ≥ 0 on the pixel scale; ε = 0 returns x exactly.
    lower, upper: scalar pixel bounds.

  Returns:
    Array with the shape and dtype of x_adv.
  """
  return jnp.clip(x + jnp.clip(x_adv - x, -eps, eps), lower, upper)


def project_l2(x_adv, x, eps, lower, upper) -> jnp.ndarray:
  """Clips δ = x_adv − x into the ℓ2 ball of radius ε, then x + δ into [lower, upper], per sample.

  δ ← δ·min(1, ε/‖δ‖₂): points inside the ball are left alone, never rescaled onto its surface
  (docs/theory.md#attack-conventions). A zero δ (or ε = 0) gives no 0/0. The box clip afterwards only shrinks ‖δ‖₂, so
  the result is feasible (it is not the exact projection onto the intersection, as in every library).

  Args:
    x_adv: candidate points, shape [batch, ...].
    x: the original inputs, same shape.
    eps: scalar ℓ2 budget ≥ 0 on the pixel scale.
    lower, upper: scalar pixel bounds.

  Returns:
    Array with the shape and dtype of x_adv.
  """
  delta = x_adv - x
  norm_B = l2_norm(delta)
  safe_B = jnp.where(norm_B > 0, norm_B, jnp.ones_like(norm_B))
  factor_B = jnp.where(norm_B > eps, eps / safe_B, jnp.ones_like(norm_B))
  return jnp.clip(x + delta * per_sample(factor_B, delta), lower, upper)
