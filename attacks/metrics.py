"""Attack success rate under named counting conventions, and CW's L2 budget grid.

Libraries disagree on the denominator of the success rate, so the convention is an explicit argument
and the counts are returned beside the rate. Source: docs/theory.md#success-rate-conventions; Croce & Hein (ICML 2020) and
RobustBench for "clean_correct".
"""
from __future__ import annotations

from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp

from attacks.projections import l2_norm, within_budget

Convention = Literal["clean_correct", "all", "robust_error"]
CONVENTIONS = ("clean_correct", "all", "robust_error")


class SuccessRate(NamedTuple):
  """Attack success rate and the counts behind it.

  Attributes:
    rate: float, n_success / n_counted (NaN when n_counted = 0); shape [...] of the leading axes of
      `success` (scalar for a single attack).
    n_success: int, samples counted as successes, same shape.
    n_counted: int, samples in the denominator, same shape (the clean-correct count under the default
      convention: report it beside the rate).
  """
  rate: jnp.ndarray
  n_success: jnp.ndarray
  n_counted: jnp.ndarray


def attack_success_rate(success, y, clean_pred, *, convention: Convention = "clean_correct"
                        ) -> SuccessRate:
  """Fraction of samples the attack fooled, under a named convention.

  Conventions:
    * "clean_correct" (default; AutoAttack / RobustBench): among samples the model classified correctly
      before the attack, the fraction the attack fooled. Samples already wrong are ignored.
    * "all" (torchattacks / foolbox style, 1 − robust accuracy for untargeted attacks): `success` over
      every sample, so samples wrong before the attack count as successes when they stay wrong.
    * "robust_error" (1 − AutoAttack's robust accuracy): over every sample, a sample counts when it was
      wrong before the attack or the attack fooled it.

  Args:
    success: bool with shape [..., batch] (e.g. `AttackResult.success`, or a grid of them from
      `success_within_l2`).
    y: true labels, integer, shape [batch].
    clean_pred: the model's predictions on the clean inputs, integer, shape [batch].
    convention: one of "clean_correct", "all", "robust_error".

  Returns:
    SuccessRate(rate, n_success, n_counted), each with shape [...].

  Raises:
    ValueError: unknown convention, mismatched shapes or a non-bool success.
  """
  if convention not in CONVENTIONS:
    raise ValueError(f"convention must be one of {CONVENTIONS}, got {convention!r}")
  success, y, clean_pred = jnp.asarray(success), jnp.asarray(y), jnp.asarray(clean_pred)
  if success.dtype != jnp.bool_:
    raise ValueError(f"success must be a bool array (AttackResult.success), got dtype {success.dtype}")
  if y.ndim != 1 or clean_pred.shape != y.shape or success.shape[-1:] != y.shape:
    raise ValueError(f"need success [..., batch], y [batch], clean_pred [batch] with one batch size; "
                     f"got {success.shape}, {y.shape}, {clean_pred.shape}")
  correct = jnp.broadcast_to(clean_pred == y, success.shape)
  if convention == "clean_correct":
    counted, won = correct, success & correct
  elif convention == "all":
    counted, won = jnp.ones_like(success), success
  else:
    counted, won = jnp.ones_like(success), success | ~correct
  n_success = jnp.sum(won, axis=-1)
  n_counted = jnp.sum(counted, axis=-1)
  rate = jnp.where(n_counted > 0, n_success / jnp.maximum(n_counted, 1), jnp.nan)
  return SuccessRate(rate, n_success, n_counted)


def success_within_l2(x, x_adv, success, eps_grid) -> jnp.ndarray:
  """Success on an L2 budget grid, for budget-free attacks such as CW-L2.

  Args:
    x: clean inputs with shape [batch, ...].
    x_adv: the attack's output, same shape.
    success: bool with shape [batch], the attack's success at any size.
    eps_grid: L2 budgets on the pixel scale, shape [n_eps].

  Returns:
    bool with shape [n_eps, batch]: success[i] and ‖x_adv_i − x_i‖₂ ≤ ε_j·(1 + BUDGET_RTOL), the relative
    tolerance of every budget check (`attacks.projections.within_budget`), so rounding at ‖δ‖ = ε counts.

  Raises:
    ValueError: eps_grid not 1-D, or holding a negative or NaN budget.
  """
  eps_grid = jnp.asarray(eps_grid)
  if eps_grid.ndim != 1:
    raise ValueError(f"eps_grid must have shape [n_eps], got {eps_grid.shape}")
  if not isinstance(eps_grid, jax.core.Tracer) and not bool(jnp.all(eps_grid >= 0)):  # NaN fails too
    raise ValueError(f"eps_grid must hold L2 budgets >= 0, got {eps_grid}")
  dist_B = l2_norm(jnp.asarray(x_adv) - jnp.asarray(x))
  return jnp.asarray(success)[None, :] & within_budget(dist_B[None, :], eps_grid[:, None])
