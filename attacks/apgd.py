"""Auto-PGD (APGD) with CE or DLR loss, in L∞ or L2: step-size-free PGD with checkpoints.

Source: Croce & Hein, "Reliable evaluation of adversarial robustness with an ensemble of diverse
parameter-free attacks" (ICML 2020), Algorithm 1 and §3.1–3.2, and their code (autoattack/
autopgd_base.py, `APGDAttack.attack_single_run`); docs/theory.md#apgd.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from attacks import _checks, _driver
from attacks.losses import LOSSES, all_zero, is_adversarial, objective_and_grad
from attacks.projections import normalize_l2, per_sample, project_l2, project_linf
from attacks.random_start import start_points
from attacks.result import AttackResult

NORMS = ("linf", "l2")
STEP_WEIGHT = 0.75  # α in x_{k+1} = P(x_k + α(z − x_k) + (1 − α)(x_k − x_{k−1})); not a momentum μ


def checkpoint_schedule(steps: int) -> tuple[np.ndarray, np.ndarray]:
  """APGD's checkpoints as in the reference code.

  The first checkpoint comes after ⌊0.22·N⌋ iterations; each later window is shorter by ⌊0.03·N⌋
  iterations, down to ⌊0.06·N⌋ (each at least 1): p₀ = 0, p₁ = 0.22, p_{j+1} = p_j + max(p_j − p_{j−1}
  − 0.03, 0.06) in fractions of N.

  Args:
    steps: the number of iterations N ≥ 0.

  Returns:
    (is_check bool [steps], window int32 [steps]): whether iteration i (0-based) ends a window, and that
    window's length in iterations (0 elsewhere).
  """
  window = max(int(0.22 * steps), 1)
  shrink, shortest = max(int(0.03 * steps), 1), max(int(0.06 * steps), 1)
  is_check, lengths = np.zeros(steps, bool), np.zeros(steps, np.int32)
  since = 0
  for i in range(steps):
    since += 1
    if since == window:
      is_check[i], lengths[i] = True, window
      window, since = max(window - shrink, shortest), 0
  return is_check, lengths


def _single_run(logits_fn, x, y, target, x_start, eps, lower, upper, *, norm, loss, steps, rho):
  """One APGD run from x_start; returns (x_best, loss_best, x_best_adv, found, zero_grad)."""
  if norm == "linf":
    direction, project = jnp.sign, project_linf
  else:
    direction, project = normalize_l2, project_l2
  grad_at = functools.partial(objective_and_grad, logits_fn, labels_B=y, target_B=target, loss=loss)

  loss_B, logits_BxK, g = grad_at(x_start)
  found_B = is_adversarial(logits_BxK, y, target_B=target)
  batch = x.shape[0]
  carry = dict(
      x_k=x_start, x_prev=x_start, g=g, eta_B=jnp.full(batch, 2.0, x.dtype) * eps,
      x_best=x_start, g_best=g, loss_best_B=loss_B, x_best_adv=x_start, found_B=found_B,
      loss_prev_B=loss_B, n_rise_B=jnp.zeros(batch, jnp.int32), loss_best_last_B=loss_B,
      reduced_last_B=jnp.ones(batch, bool))

  def step(c, xs):
    i, is_check, window = xs
    weight = jnp.where(i > 0, STEP_WEIGHT, 1.0).astype(x.dtype)
    x_k = c["x_k"]
    z = project(x_k + per_sample(c["eta_B"], x) * direction(c["g"]), x, eps, lower, upper)
    x_new = project(x_k + weight * (z - x_k) + (1 - weight) * (x_k - c["x_prev"]), x, eps, lower, upper)
    loss_B, logits_BxK, g = grad_at(x_new)

    adv_B = is_adversarial(logits_BxK, y, target_B=target)
    x_best_adv = jnp.where(per_sample(adv_B, x), x_new, c["x_best_adv"])
    n_rise_B = c["n_rise_B"] + (loss_B > c["loss_prev_B"]).astype(jnp.int32)
    better_B = loss_B > c["loss_best_B"]
    x_best = jnp.where(per_sample(better_B, x), x_new, c["x_best"])
    g_best = jnp.where(per_sample(better_B, x), g, c["g_best"])
    loss_best_B = jnp.where(better_B, loss_B, c["loss_best_B"])

    # Checkpoint: halve η and restart from x_best where the loss rose in ≤ ρ of the window's steps, or
    # where η was not cut last time and the best loss has not improved since.
    oscillating_B = n_rise_B <= rho * window
    stalled_B = ~c["reduced_last_B"] & (c["loss_best_last_B"] >= loss_best_B)
    reduce_B = is_check & (oscillating_B | stalled_B)
    back = per_sample(reduce_B, x)
    return dict(
        x_k=jnp.where(back, x_best, x_new), x_prev=x_k, g=jnp.where(back, g_best, g),
        eta_B=jnp.where(reduce_B, c["eta_B"] / 2, c["eta_B"]), x_best=x_best, g_best=g_best,
        loss_best_B=loss_best_B, x_best_adv=x_best_adv, found_B=c["found_B"] | adv_B,
        loss_prev_B=loss_B, n_rise_B=jnp.where(is_check, 0, n_rise_B),
        loss_best_last_B=jnp.where(is_check, loss_best_B, c["loss_best_last_B"]),
        reduced_last_B=jnp.where(is_check, reduce_B, c["reduced_last_B"])), None

  is_check, window = checkpoint_schedule(steps)
  c, _ = jax.lax.scan(step, carry, (jnp.arange(steps), jnp.asarray(is_check), jnp.asarray(window)))
  return c["x_best"], c["loss_best_B"], c["x_best_adv"], c["found_B"], all_zero(g)


@functools.partial(jax.jit, static_argnames=("fn_static", "norm", "loss", "steps"))
def _apgd(*, fn_static, fn_dynamic, x, y, target, x_starts, eps, rho, lower, upper, norm, loss, steps):
  logits_fn = _driver.merge_logits_fn(fn_static, fn_dynamic)
  batch = x.shape[0]
  restarts = 1 if x_starts is None else x_starts.shape[1]

  def restart(r, best):
    x_best, loss_best_B, x_best_adv, found_B, zero_B = best
    x_start = x if x_starts is None else x_starts[:, r]
    run = _single_run(logits_fn, x, y, target, x_start, eps, lower, upper, norm=norm, loss=loss,
                      steps=steps, rho=rho)
    new_adv_B = run[3] & ~found_B
    higher_B = run[1] > loss_best_B
    return (jnp.where(per_sample(higher_B, x), run[0], x_best), jnp.maximum(run[1], loss_best_B),
            jnp.where(per_sample(new_adv_B, x), run[2], x_best_adv), found_B | run[3],
            jnp.where(r == 0, run[4], zero_B))

  init = (x, jnp.full(batch, -jnp.inf, x.dtype), x, jnp.zeros(batch, bool), jnp.zeros(batch, bool))
  x_best, _, x_best_adv, found_B, zero_B = jax.lax.fori_loop(0, restarts, restart, init)
  x_adv = jnp.where(per_sample(found_B, x), x_best_adv, x_best)
  return AttackResult(x_adv, is_adversarial(logits_fn(x_adv), y, target_B=target), zero_B)


def apgd(logits_fn, x, y, *, eps, key=None, targeted: bool = False, target=None, norm: str = "linf",
         loss: str = "ce", steps: int = 100, restarts: int = 1, random_start: bool = True,
         rho: float = 0.75, bounds=(0.0, 1.0)) -> AttackResult:
  """APGD: PGD whose step size η adapts per sample at checkpoints, with a step-weight update.

  η₀ = 2ε. Each iteration: z = P(x_k + η·s(g)), x_{k+1} = P(x_k + 0.75(z − x_k) + 0.25(x_k − x_{k−1}))
  with x₁ = z₁; s = sign (L∞) or g/‖g‖₂ (L2); P projects onto the ε-ball around x and the pixel box.
  0.75 weighs the new step against the previous displacement; it is not a momentum coefficient. At
  each checkpoint (`checkpoint_schedule`) a sample halves η and restarts from its highest-loss point if
  its loss rose in ≤ ρ = 75 % of the window's steps, or if η was not cut at the previous checkpoint and
  the best loss did not improve. Losses: "ce" (CE(z, y); −CE(z, t) targeted) or "dlr" (DLR, eq. 6;
  targeted DLR, eq. 7, needs ≥ 4 classes).

  Defaults: 100 iterations, 1 restart, ρ = 0.75, random start, as AutoAttack's standard APGD-CE
  (Croce & Hein 2020). The random start is AutoAttack's: L∞ x + ε·t/‖t‖∞, t ~ U(−1, 1)^d; L2 on the
  ε-sphere. The first checkpoint's rise count compares with the start's loss (the reference code reads
  an unset entry, 0, there).

  Returns, per sample, the last adversarial iterate found over all restarts, or the highest-loss point
  where none was found (AutoAttack returns x there).

  Args:
    logits_fn: pure function x [batch, ...] -> logits [batch, classes].
    x: inputs with shape [batch, ...], floating, inside `bounds`.
    y: true labels, integer, shape [batch].
    eps: budget ≥ 0 on the pixel scale, in the norm `norm`.
    key: PRNG key, required with random_start; sample i draws its `restarts` starts from
      fold_in(key, i).
    targeted: move towards `target`.
    target: target labels with shape [batch] (targeted only).
    norm: "linf" or "l2".
    loss: "ce" or "dlr".
    steps: iterations per restart ≥ 0.
    restarts: independent random restarts ≥ 1 (> 1 needs random_start).
    random_start: start from AutoAttack's random point (else from x).
    rho: oscillation threshold ρ ∈ [0, 1].
    bounds: pixel bounds (lower, upper); default (0, 1).

  Returns:
    AttackResult(x_adv [batch, ...], success [batch] bool, zero_grad [batch] bool: zero gradient at the
    first restart's start).

  Raises:
    ValueError: unsupported norm or loss; DLR with < 3 classes (< 4 targeted); restarts > 1 without
      random start; negative ε or counts; ρ outside [0, 1]; and the input errors of `pgd_linf`.
  """
  _checks.check_choice(norm, "norm", NORMS, attack="apgd")
  _checks.check_choice(loss, "loss", LOSSES, attack="apgd")
  eps = _checks.check_nonnegative(eps, "eps")
  steps = _checks.check_count(steps, "steps")
  restarts = _checks.check_count(restarts, "restarts", minimum=1)
  rho = _checks.check_nonnegative(rho, "rho")
  if float(rho) > 1:
    raise ValueError(f"rho must lie in [0, 1], got {rho}")
  if not isinstance(random_start, bool):
    raise ValueError(f"random_start must be a bool, got {random_start!r}")
  if restarts > 1 and not random_start:
    raise ValueError("apgd with restarts > 1 needs random_start=True (restarts from x are identical)")
  min_classes = (4 if targeted else 3) if loss == "dlr" else 2
  inputs = _checks.check_attack_inputs(
      logits_fn, x, y, bounds=bounds, targeted=targeted, target=target, key=key,
      needs_key=random_start, attack=f"apgd with loss='dlr'{' targeted' if targeted else ''}"
      if loss == "dlr" else "apgd", min_classes=min_classes)
  x_starts = None
  if random_start:
    x_starts = start_points(key, inputs.x, eps, inputs.lower, inputs.upper, kind=f"apgd_{norm}",
                            restarts=restarts)
  return _driver.run_attack(
      _apgd, logits_fn, dict(x=inputs.x, y=inputs.y, target=inputs.target, x_starts=x_starts),
      eps=eps, rho=rho, lower=inputs.lower, upper=inputs.upper, norm=norm, loss=loss, steps=steps)
