"""Carlini–Wagner L2 attack: Adam in tanh space with a per-sample binary search on the constant c.

Source: Carlini & Wagner, "Towards Evaluating the Robustness of Neural Networks" (IEEE S&P 2017), §V.A
(objective f₆, change of variables x' = (tanh w + 1)/2) and their reference code `l2_attack.py`
(binary search, early abort); docs/theory.md#cw-l2.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from attacks import _checks, _driver, chunking
from attacks.losses import all_zero, cw_loss, is_adversarial, logit_margin
from attacks.projections import per_sample, safe_sqrt, within_budget
from attacks.result import AttackResult

_TANH_SHRINK = 0.999999  # keeps arctanh finite at pixels equal to the bounds (reference code)
_NO_UPPER = 1e10         # "no upper bound on c found yet"
_ADAM_B1, _ADAM_B2, _ADAM_EPS = 0.9, 0.999, 1e-8


def _sum_sq(d):
  return jnp.sum(jnp.square(d), axis=tuple(range(1, d.ndim)))


def _reaches_confidence(logits_BxK, y, target, confidence):
  """CW success: prediction is adversarial and the margin is at least κ (docs/theory.md#cw-l2)."""
  if target is None:
    margin_ok = -logit_margin(logits_BxK, y) >= confidence
  else:
    margin_ok = logit_margin(logits_BxK, target) >= confidence
  return margin_ok & is_adversarial(logits_BxK, y, target_B=target)


@functools.partial(jax.jit, static_argnames=("fn_static", "steps", "search_steps", "abort_early"))
def _cw_l2(*, fn_static, fn_dynamic, x, y, target, eps, initial_const, confidence, learning_rate, lower,
           upper, steps, search_steps, abort_early):
  logits_fn = _driver.merge_logits_fn(fn_static, fn_dynamic)
  batch = x.shape[0]
  scale = upper - lower
  unit = (x - lower) / jnp.where(scale > 0, scale, 1.0)
  w_start = jnp.arctanh((2.0 * unit - 1.0) * _TANH_SHRINK)

  def to_pixels(w):
    return lower + scale * (jnp.tanh(w) + 1.0) / 2.0

  def total(w, const_B, x_B, y_B, target_B):
    x_adv = to_pixels(w)
    dist_B = _sum_sq(x_adv - x_B)
    logits_BxK = logits_fn(x_adv)
    loss_B = dist_B + const_B * cw_loss(logits_BxK, y_B, target_B=target_B, confidence=confidence)
    return jnp.sum(loss_B), (loss_B, dist_B, logits_BxK, x_adv)

  chunk = chunking.chunk_size(logits_fn, x)  # cache-sized chunks on CPU (attacks.chunking)

  def grad_fn(w, const_B):
    per_chunk = jax.grad(total, has_aux=True)
    if chunk is None:
      return per_chunk(w, const_B, x, y, target)
    return chunking.map_chunks(per_chunk, chunk, w, const_B, x, y, target)
  check_every = max(steps // 10, 1)

  def optimise(const_B, best_dist_B, best_x):
    """One binary-search step: Adam from w_start for up to `steps` steps, per-sample early abort."""
    def cond(state):
      return (state[0] < steps) & ~jnp.all(state[4])

    def body(state):
      i, w, m, v, done_B, prev_B, found_B, best_dist_B, best_x = state
      g, (loss_B, dist_B, logits_BxK, x_adv) = grad_fn(w, const_B)
      adv_B = _reaches_confidence(logits_BxK, y, target, confidence) & ~done_B
      found_B = found_B | adv_B
      better_B = adv_B & (dist_B < best_dist_B)
      best_dist_B = jnp.where(better_B, dist_B, best_dist_B)
      best_x = jnp.where(per_sample(better_B, x), x_adv, best_x)
      t = (i + 1).astype(x.dtype)
      m_new = _ADAM_B1 * m + (1 - _ADAM_B1) * g
      v_new = _ADAM_B2 * v + (1 - _ADAM_B2) * jnp.square(g)
      m_hat, v_hat = m_new / (1 - _ADAM_B1 ** t), v_new / (1 - _ADAM_B2 ** t)
      w_new = w - learning_rate * m_hat / (jnp.sqrt(v_hat) + _ADAM_EPS)
      keep = per_sample(done_B, x)
      w, m, v = (jnp.where(keep, a, b) for a, b in ((w, w_new), (m, m_new), (v, v_new)))
      if abort_early:
        is_check = (i % check_every) == 0
        done_B = done_B | (is_check & (loss_B > 0.9999 * prev_B))
        prev_B = jnp.where(is_check, loss_B, prev_B)
      return (i + 1, w, m, v, done_B, prev_B, found_B, best_dist_B, best_x)

    zeros = jnp.zeros_like(x)
    state = (jnp.int32(0), w_start, zeros, zeros, jnp.zeros(batch, bool),
             jnp.full(batch, jnp.inf, x.dtype), jnp.zeros(batch, bool), best_dist_B, best_x)
    state = jax.lax.while_loop(cond, body, state)
    return state[6], state[7], state[8]

  def search(_, carry):
    const_B, low_B, high_B, best_dist_B, best_x = carry
    found_B, best_dist_B, best_x = optimise(const_B, best_dist_B, best_x)
    high_B = jnp.where(found_B, jnp.minimum(high_B, const_B), high_B)
    low_B = jnp.where(found_B, low_B, jnp.maximum(low_B, const_B))
    bracketed_B = high_B < 1e9
    const_B = jnp.where(bracketed_B, (low_B + high_B) / 2,
                        jnp.where(found_B, const_B, const_B * 10))
    return const_B, low_B, high_B, best_dist_B, best_x

  carry = (jnp.full(batch, initial_const, x.dtype), jnp.zeros(batch, x.dtype),
           jnp.full(batch, _NO_UPPER, x.dtype), jnp.full(batch, jnp.inf, x.dtype), x)
  _, _, _, best_dist_B, best_x = jax.lax.fori_loop(0, search_steps, search, carry)

  within_B = jnp.isfinite(best_dist_B) & within_budget(safe_sqrt(best_dist_B), eps)  # best_dist is ‖δ‖²
  x_adv = jnp.where(per_sample(within_B, x), best_x, x)
  success_B = within_B & _reaches_confidence(logits_fn(x_adv), y, target, confidence)
  x_adv = jnp.where(per_sample(success_B, x), x_adv, x)

  margin_grad = jax.grad(lambda z: jnp.sum(logit_margin(logits_fn(z), y if target is None else target)))
  return AttackResult(x_adv, success_B, all_zero(margin_grad(x)))


def cw_l2(logits_fn, x, y, *, eps=None, key=None, targeted: bool = False, target=None,
          confidence: float = 0.0, initial_const: float = 1e-3, learning_rate: float = 1e-2,
          steps: int = 1000, search_steps: int = 9, abort_early: bool = True,
          bounds=(0.0, 1.0)) -> AttackResult:
  """Carlini–Wagner L2: the smallest L2 perturbation the optimiser finds that reaches confidence κ.

  Minimises ‖x' − x‖₂² + c·max(Z_y − max_{i≠y} Z_i + κ, 0) over x' = lo + (hi − lo)(tanh w + 1)/2,
  starting at w = arctanh((2x − 1)·0.999999), with Adam (lr 1e-2). The max over other logits masks the
  true class with −inf. c starts at 1e-3 and is binary-searched per sample for `search_steps` rounds:
  halved towards the last failure after a success, ×10 while no success bounds it. Each round restarts
  Adam from x and stops a sample early when its loss has not fallen by 0.01 % over a tenth of the steps.
  Untargeted success with confidence κ: max_{i≠y} Z_i ≥ Z_y + κ (and argmax ≠ y); targeted:
  Z_t ≥ max_{i≠t} Z_i + κ.

  CW has no ε budget: it returns the smallest adversarial found over all rounds and steps, and x
  itself where it found none. Count its success on an L2 budget grid with
  `attacks.metrics.success_within_l2`, never on the L∞ grid of the other attacks. Passing `eps` applies
  one L2 budget here: adversarials with ‖x' − x‖₂ > ε (beyond the relative tolerance
  `attacks.projections.BUDGET_RTOL`) are replaced by x and count as failures.

  Defaults: κ = 0, c₀ = 1e-3, 9 binary-search steps, Adam lr 1e-2 and early abort, as Carlini & Wagner's
  reference code; 1,000 steps per round as cleverhans (the reference code uses 10,000).

  Args:
    logits_fn: pure function x [batch, ...] -> logits [batch, classes] (logits Z, not probabilities).
    x: inputs with shape [batch, ...], floating, inside `bounds`.
    y: true labels, integer, shape [batch].
    eps: optional L2 budget ≥ 0 on the pixel scale; None (or inf) means unbounded.
    key: unused (CW is deterministic); accepted for the shared signature.
    targeted: reach `target` instead of leaving y.
    target: target labels with shape [batch] (targeted only).
    confidence: κ ≥ 0, in logit units.
    initial_const: c₀ > 0.
    learning_rate: Adam step size ≥ 0 in tanh space.
    steps: Adam steps per binary-search round, ≥ 0.
    search_steps: binary-search rounds ≥ 1.
    abort_early: stop a sample's round when its loss stalls.
    bounds: pixel bounds (lower, upper); default (0, 1).

  Returns:
    AttackResult(x_adv [batch, ...], success [batch] bool, zero_grad [batch] bool); zero_grad tests the
    input gradient of the logit margin Z_y − max_{i≠y} Z_i at x.

  Raises:
    ValueError: negative eps, κ, c₀, learning rate or counts, non-finite logits at x, and the input errors
      of `pgd_linf`.
  """
  del key
  if eps is None or (isinstance(eps, float) and eps == float("inf")):  # unbounded (np.float64 is a float)
    eps = float("inf")
  else:
    eps = _checks.check_nonnegative(eps, "eps")
  confidence = _checks.check_nonnegative(confidence, "confidence")
  initial_const = _checks.check_nonnegative(initial_const, "initial_const")
  if float(initial_const) == 0.0:
    raise ValueError("initial_const must be > 0 (the search multiplies it by 10)")
  learning_rate = _checks.check_nonnegative(learning_rate, "learning_rate")
  steps = _checks.check_count(steps, "steps")
  search_steps = _checks.check_count(search_steps, "search_steps", minimum=1)
  if not isinstance(abort_early, bool):
    raise ValueError(f"abort_early must be a bool, got {abort_early!r}")
  inputs = _checks.check_attack_inputs(logits_fn, x, y, bounds=bounds, targeted=targeted, target=target,
                                       key=None, needs_key=False, attack="cw_l2")
  # CW returns x where it finds nothing, so non-finite logits would pass as "robust": check them once.
  clean = logits_fn(inputs.x)
  if not isinstance(clean, jax.core.Tracer) and not bool(jnp.all(jnp.isfinite(clean))):
    raise ValueError("cw_l2: logits_fn returned non-finite logits on the clean inputs; check the model")
  return _driver.run_attack(
      _cw_l2, logits_fn, dict(x=inputs.x, y=inputs.y, target=inputs.target),
      eps=eps, initial_const=initial_const, confidence=confidence, learning_rate=learning_rate,
      lower=inputs.lower, upper=inputs.upper, steps=steps, search_steps=search_steps,
      abort_early=abort_early)
