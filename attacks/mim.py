"""Momentum Iterative Method (MI-FGSM), L∞.

Source: Dong, Liao, Pang, Su, Zhu, Hu & Li, "Boosting Adversarial Attacks with Momentum" (CVPR 2018),
Algorithm 1, eqs. (6)–(7); docs/theory.md#mim.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from attacks import _checks, _driver
from attacks.losses import is_adversarial
from attacks.projected_gradient import pgd_loop
from attacks.projections import normalize_l1, project_linf
from attacks.result import AttackResult


@functools.partial(jax.jit, static_argnames=("fn_static", "steps", "early_stop"))
def _mim(*, fn_static, fn_dynamic, x, y, target, eps, alpha, decay, lower, upper, steps, early_stop):
  logits_fn = _driver.merge_logits_fn(fn_static, fn_dynamic)

  def step_fn(x_t, grad, momentum):
    momentum = decay * momentum + normalize_l1(grad)
    return project_linf(x_t + alpha * jnp.sign(momentum), x, eps, lower, upper), momentum

  x_adv, zero_B = pgd_loop(logits_fn, x, y, target, x, step_fn=step_fn, steps=steps,
                           early_stop=early_stop)
  return AttackResult(x_adv, is_adversarial(logits_fn(x_adv), y, target_B=target), zero_B)


def mim(logits_fn, x, y, *, eps, key=None, targeted: bool = False, target=None, alpha=None,
        steps: int = 10, decay: float = 1.0, early_stop: bool = False,
        bounds=(0.0, 1.0)) -> AttackResult:
  """MI-FGSM: sign steps along an accumulated, L1-normalised gradient, projected into the ε-box.

  g_{t+1} = μ·g_t + ∇ₓJ(x_t)/‖∇ₓJ(x_t)‖₁ (L1 norm per sample; a zero gradient contributes zero, never
  NaN), x_{t+1} = clip_[lo, hi](x + clip(x_t + α·sign(g_{t+1}) − x, −ε, ε)), x₀ = x (no random start).
  J is CE(f(x), y), or −CE(f(x), t) when targeted.

  Defaults: 10 steps, μ = 1.0, α = ε/T (Dong et al. 2018, §4: ε = 16/255, T = 10). torchattacks'
  `MIFGSM` instead divides by the mean |∇| (same direction, NaN on a zero gradient) and uses α = 2/255.

  Args:
    logits_fn: pure function x [batch, ...] -> logits [batch, classes].
    x: inputs with shape [batch, ...], floating, inside `bounds`.
    y: true labels, integer, shape [batch].
    eps: L∞ budget on the pixel scale, ≥ 0.
    key: unused (MIM is deterministic); accepted for the shared signature.
    targeted: move towards `target`.
    target: target labels with shape [batch] (targeted only).
    alpha: step size ≥ 0; None means ε / steps.
    steps: number of iterations T ≥ 0.
    decay: momentum decay μ ≥ 0.
    early_stop: stop updating a sample at its first adversarial iterate.
    bounds: pixel bounds (lower, upper); default (0, 1).

  Returns:
    AttackResult(x_adv [batch, ...], success [batch] bool, zero_grad [batch] bool).

  Raises:
    ValueError: negative ε, α, μ or steps, and the input errors of `pgd_linf`.
  """
  del key
  eps = _checks.check_nonnegative(eps, "eps")
  steps = _checks.check_count(steps, "steps")
  alpha = eps / max(steps, 1) if alpha is None else _checks.check_nonnegative(alpha, "alpha")
  decay = _checks.check_nonnegative(decay, "decay")
  if not isinstance(early_stop, bool):
    raise ValueError(f"early_stop must be a bool, got {early_stop!r}")
  inputs = _checks.check_attack_inputs(logits_fn, x, y, bounds=bounds, targeted=targeted, target=target,
                                       key=None, needs_key=False, attack="mim")
  return _driver.run_attack(
      _mim, logits_fn, dict(x=inputs.x, y=inputs.y, target=inputs.target),
      eps=eps, alpha=alpha, decay=decay, lower=inputs.lower, upper=inputs.upper, steps=steps,
      early_stop=early_stop)
