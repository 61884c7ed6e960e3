"""Single-step attacks: FGSM (L∞) and its L2 counterpart FGM.

Source: Goodfellow, Shlens & Szegedy, "Explaining and Harnessing Adversarial Examples" (ICLR 2015),
eq. (3); L2 FGM as in Miyato et al., "Adversarial Training Methods for Semi-Supervised Text
Classification" (ICLR 2017), eq. (5). docs/theory.md#fgsm-and-fgm.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from attacks import _checks, _driver
from attacks.losses import all_zero, is_adversarial, objective_and_grad
from attacks.projections import normalize_l2, project_l2
from attacks.result import AttackResult


@functools.partial(jax.jit, static_argnames=("fn_static", "norm"))
def _fast_gradient(*, fn_static, fn_dynamic, x, y, target, eps, lower, upper, norm):
  logits_fn = _driver.merge_logits_fn(fn_static, fn_dynamic)
  _, _, grad = objective_and_grad(logits_fn, x, y, target_B=target)
  if norm == "linf":
    x_adv = jnp.clip(x + eps * jnp.sign(grad), lower, upper)
  else:
    x_adv = project_l2(x + eps * normalize_l2(grad), x, eps, lower, upper)
  success = is_adversarial(logits_fn(x_adv), y, target_B=target)
  return AttackResult(x_adv, success, all_zero(grad))


def _run(logits_fn, x, y, *, eps, targeted, target, bounds, norm, name):
  eps = _checks.check_nonnegative(eps, "eps")
  inputs = _checks.check_attack_inputs(logits_fn, x, y, bounds=bounds, targeted=targeted, target=target,
                                       key=None, needs_key=False, attack=name)
  return _driver.run_attack(
      _fast_gradient, logits_fn, dict(x=inputs.x, y=inputs.y, target=inputs.target),
      eps=eps, lower=inputs.lower, upper=inputs.upper, norm=norm)


def fgsm(logits_fn, x, y, *, eps, key=None, targeted: bool = False, target=None,
         bounds=(0.0, 1.0)) -> AttackResult:
  """Fast Gradient Sign Method: one L∞ step of size ε along the sign of the loss gradient.

  x' = clip_[lo, hi](x + ε·sign(∇ₓ CE(f(x), y))) untargeted; x' = clip(x − ε·sign(∇ₓ CE(f(x), t)))
  targeted. sign(0) = 0, so a zero gradient leaves x unchanged; ε = 0 returns x exactly. Agrees with
  torchattacks 3.5.1 `FGSM` (tests/fixtures/attacks/torchattacks_reference.npz).

  Args:
    logits_fn: pure function x [batch, ...] -> logits [batch, classes]; samples must not interact. Pass
      `jax.tree_util.Partial(apply, params)` to reuse the compiled attack across weights.
    x: inputs with shape [batch, ...], floating, inside `bounds`.
    y: true labels, integer, shape [batch].
    eps: L∞ budget on the pixel scale, ≥ 0. Common default 8/255 (CIFAR-10), 0.3 (MNIST; Madry et al.).
    key: unused (FGSM is deterministic); accepted for the shared signature.
    targeted: if True, move towards `target` instead of away from y.
    target: target labels with shape [batch] (targeted only), ≠ y.
    bounds: pixel bounds (lower, upper); default (0, 1).

  Returns:
    AttackResult(x_adv [batch, ...], success [batch] bool, zero_grad [batch] bool).

  Raises:
    ValueError: negative or non-finite eps, bad bounds, x outside bounds, labels out of range, target
      missing or given without targeted=True.

  Example:
    >>> result = fgsm(logits_fn, x, y, eps=8 / 255)
  """
  del key
  return _run(logits_fn, x, y, eps=eps, targeted=targeted, target=target, bounds=bounds, norm="linf",
              name="fgsm")


def fgm_l2(logits_fn, x, y, *, eps, key=None, targeted: bool = False, target=None,
           bounds=(0.0, 1.0)) -> AttackResult:
  """Fast Gradient Method in L2: one step of length exactly ε along the normalised gradient.

  x' = clip_[lo, hi](x + ε·g/‖g‖₂), g = ∇ₓ CE(f(x), y) per sample (g = −∇ₓ CE(f(x), t) targeted). The
  step has length ε before the pixel clip (cleverhans' JAX FGM ignores ε here, a bug this avoids); a
  zero gradient gives x' = x, never NaN.

  Args:
    logits_fn: pure function x [batch, ...] -> logits [batch, classes].
    x: inputs with shape [batch, ...], floating, inside `bounds`.
    y: true labels, integer, shape [batch].
    eps: L2 budget on the pixel scale (‖δ‖₂ over all features of a sample), ≥ 0.
    key: unused; accepted for the shared signature.
    targeted: move towards `target`.
    target: target labels with shape [batch] (targeted only).
    bounds: pixel bounds (lower, upper); default (0, 1).

  Returns:
    AttackResult(x_adv [batch, ...], success [batch] bool, zero_grad [batch] bool).

  Raises:
    ValueError: as `fgsm`.
  """
  del key
  return _run(logits_fn, x, y, eps=eps, targeted=targeted, target=target, bounds=bounds, norm="l2",
              name="fgm_l2")
