"""Projected gradient descent in L∞ and L2 (Madry et al. 2018), the whole loop compiled.

Source: Madry, Makelov, Schmidt, Tsipras & Vladu, "Towards Deep Learning Models Resistant to Adversarial
Attacks" (ICLR 2018), eq. (2) and §2.1; docs/theory.md#pgd-linf and docs/theory.md#pgd-l2.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from attacks import _checks, _driver
from attacks.losses import all_zero, is_adversarial, objective_and_grad
from attacks.projections import normalize_l2, per_sample, project_l2, project_linf
from attacks.random_start import start_points
from attacks.result import AttackResult


def pgd_loop(logits_fn, x, y, target, x_start, *, step_fn, steps: int, early_stop: bool,
             loss: str = "ce"):
  """Iterates x ← step_fn(x, g, state) for `steps` steps under lax.fori_loop.

  Args:
    logits_fn: pure function x -> logits.
    x: original inputs [batch, ...] (step_fn projects around them).
    y, target: labels and optional targets, shape [batch].
    x_start: the first iterate, shape of x.
    step_fn: (x_t, grad, state) -> (x_{t+1}, state); state starts as zeros shaped like x.
    steps: number of gradient steps ≥ 0.
    early_stop: freeze a sample at the first iterate that is adversarial.
    loss: the objective ("ce" or "dlr").

  Returns:
    (x_adv [batch, ...], zero_grad [batch] bool: the gradient at x_start was all zero).
  """
  batch = x.shape[0]

  def body(i, carry):
    x_t, state, done_B, zero_B = carry
    _, logits_BxK, grad = objective_and_grad(logits_fn, x_t, y, target_B=target, loss=loss)
    zero_B = jnp.where(i == 0, all_zero(grad), zero_B)
    x_next, state_next = step_fn(x_t, grad, state)
    if early_stop:
      done_B = done_B | is_adversarial(logits_BxK, y, target_B=target)
      keep = per_sample(done_B, x)
      x_next, state_next = jnp.where(keep, x_t, x_next), jnp.where(keep, state, state_next)
    return x_next, state_next, done_B, zero_B

  init = (x_start, jnp.zeros_like(x), jnp.zeros(batch, bool), jnp.zeros(batch, bool))
  x_adv, _, _, zero_B = jax.lax.fori_loop(0, steps, body, init)
  return x_adv, zero_B


@functools.partial(jax.jit, static_argnames=("fn_static", "norm", "steps", "early_stop"))
def _pgd(*, fn_static, fn_dynamic, x, y, target, x_start, eps, alpha, lower, upper, norm, steps,
         early_stop):
  logits_fn = _driver.merge_logits_fn(fn_static, fn_dynamic)
  if norm == "linf":
    def step_fn(x_t, grad, state):
      return project_linf(x_t + alpha * jnp.sign(grad), x, eps, lower, upper), state
  else:
    def step_fn(x_t, grad, state):
      return project_l2(x_t + alpha * normalize_l2(grad), x, eps, lower, upper), state
  x_start = x if x_start is None else x_start
  x_adv, zero_B = pgd_loop(logits_fn, x, y, target, x_start, step_fn=step_fn, steps=steps,
                           early_stop=early_stop)
  return AttackResult(x_adv, is_adversarial(logits_fn(x_adv), y, target_B=target), zero_B)


def _run(logits_fn, x, y, *, eps, alpha, steps, key, random_start, early_stop, targeted, target, bounds,
         norm, name):
  eps = _checks.check_nonnegative(eps, "eps")
  alpha = _checks.check_nonnegative(alpha, "alpha")
  steps = _checks.check_count(steps, "steps")
  if not isinstance(random_start, bool) or not isinstance(early_stop, bool):
    raise ValueError(f"random_start and early_stop must be bools, got {random_start!r}, {early_stop!r}")
  inputs = _checks.check_attack_inputs(logits_fn, x, y, bounds=bounds, targeted=targeted, target=target,
                                       key=key, needs_key=random_start, attack=name)
  x_start = None
  if random_start:
    x_start = start_points(key, inputs.x, eps, inputs.lower, inputs.upper,
                           kind="uniform_linf" if norm == "linf" else "uniform_l2_ball")
  return _driver.run_attack(
      _pgd, logits_fn, dict(x=inputs.x, y=inputs.y, target=inputs.target, x_start=x_start),
      eps=eps, alpha=alpha, lower=inputs.lower, upper=inputs.upper, norm=norm, steps=steps,
      early_stop=early_stop)


def pgd_linf(logits_fn, x, y, *, eps, key=None, targeted: bool = False, target=None,
             alpha=2 / 255, steps: int = 10, random_start: bool = True, early_stop: bool = False,
             bounds=(0.0, 1.0)) -> AttackResult:
  """PGD in L∞ with a uniform random start, projected around the original x at every step.

  x₀ = clip(x + U(−ε, ε)^d) (clipped before the first gradient; x₀ = x without random start);
  x_{t+1} = clip_[lo, hi](x + clip(x_t + α·sign(∇ₓ CE(f(x_t), y)) − x, −ε, ε)); targeted attacks
  descend CE to the target. With random_start=False this agrees with torchattacks 3.5.1
  `PGD(random_start=False)` (tests/fixtures/attacks/torchattacks_reference.npz).

  Defaults: α = 2/255, 10 steps, random start, the common CIFAR-10 setting for ε = 8/255
  (docs/theory.md#pgd-linf; torchattacks' defaults). For ε = 0.3 on MNIST use Madry et al.'s α = 0.01 and 40 steps,
  `attacks.presets.MADRY_MNIST_LINF`.

  Args:
    logits_fn: pure function x [batch, ...] -> logits [batch, classes]; samples must not interact. Pass
      `jax.tree_util.Partial(apply, params)` to reuse the compiled attack across weights.
    x: inputs with shape [batch, ...], floating, inside `bounds`.
    y: true labels, integer, shape [batch].
    eps: L∞ budget on the pixel scale, ≥ 0.
    key: PRNG key, required with random_start; sample i uses fold_in(key, i).
    targeted: move towards `target`.
    target: target labels with shape [batch] (targeted only), ≠ y.
    alpha: step size α ≥ 0 on the pixel scale (α = ε is allowed).
    steps: number of gradient steps ≥ 0.
    random_start: start from a uniform point in the ε-box (Madry et al.).
    early_stop: stop updating a sample at its first adversarial iterate (per sample; off in Madry et
      al. and torchattacks, which return the last iterate).
    bounds: pixel bounds (lower, upper); default (0, 1).

  Returns:
    AttackResult(x_adv [batch, ...], success [batch] bool, zero_grad [batch] bool); ε, α are traced, so
    sweeping them does not recompile.

  Raises:
    ValueError: negative ε or α, negative steps, bad bounds, x outside bounds, labels out of range,
      missing key with random_start, target without targeted=True or vice versa.
  """
  return _run(logits_fn, x, y, eps=eps, alpha=alpha, steps=steps, key=key, random_start=random_start,
              early_stop=early_stop, targeted=targeted, target=target, bounds=bounds, norm="linf",
              name="pgd_linf")


def pgd_l2(logits_fn, x, y, *, eps, key=None, targeted: bool = False, target=None, alpha=0.2,
           steps: int = 10, random_start: bool = True, early_stop: bool = False,
           bounds=(0.0, 1.0)) -> AttackResult:
  """PGD in L2: normalised-gradient steps of length α, δ clipped into the ε-ball around x.

  ĝ = g/‖g‖₂ per sample (a zero gradient gives ĝ = 0, not NaN); x_{t+1} = clip_[lo, hi](x + δ·min(1,
  ε/‖δ‖₂)) with δ = x_t + α·ĝ − x (points inside the ball are not rescaled onto its surface). Random
  start uniform in the ball: direction z/‖z‖₂, z ~ N(0, I), radius ε·U^(1/d), then clipped.

  Defaults: α = 0.2, 10 steps, random start (torchattacks 3.5.1 `PGDL2`, whose default ε is 1.0).

  Args:
    logits_fn: pure function x [batch, ...] -> logits [batch, classes].
    x: inputs with shape [batch, ...], floating, inside `bounds`.
    y: true labels, integer, shape [batch].
    eps: L2 budget on the pixel scale (‖δ‖₂ over all features of a sample), ≥ 0.
    key: PRNG key, required with random_start; sample i uses fold_in(key, i).
    targeted: move towards `target`.
    target: target labels with shape [batch] (targeted only).
    alpha: L2 length of each step, ≥ 0.
    steps: number of gradient steps ≥ 0.
    random_start: start from a uniform point in the ε-ball.
    early_stop: stop updating a sample at its first adversarial iterate.
    bounds: pixel bounds (lower, upper); default (0, 1).

  Returns:
    AttackResult(x_adv [batch, ...], success [batch] bool, zero_grad [batch] bool).

  Raises:
    ValueError: as `pgd_linf`.
  """
  return _run(logits_fn, x, y, eps=eps, alpha=alpha, steps=steps, key=key, random_start=random_start,
              early_stop=early_stop, targeted=targeted, target=target, bounds=bounds, norm="l2",
              name="pgd_l2")


PGD_NORMS = ("linf", "l2")


def pgd(logits_fn, x, y, *, eps, norm: str = "linf", **kwargs) -> AttackResult:
  """PGD in the norm ``norm``: ``pgd_linf`` (``'linf'``, α = 2/255 by default) or ``pgd_l2`` (``'l2'``,
  α = 0.2); every other keyword goes to that function (Madry et al., arXiv 1706.06083).

  Raises:
    ValueError: ``norm`` not one of ``PGD_NORMS``, or as the function it calls.
  """
  if norm not in PGD_NORMS:
    raise ValueError(f"norm must be one of {PGD_NORMS}, got {norm!r}")
  return (pgd_linf if norm == "linf" else pgd_l2)(logits_fn, x, y, eps=eps, **kwargs)
