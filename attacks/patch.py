"""Adversarial patch: projected sign-gradient steps confined to a square of the image, the whole loop compiled.

The budget is the patch's side ``size`` in pixels, not a norm ball: inside the patch every pixel may take any
value in the pixel bounds (an unbounded patch, as in the patch attacks on CLIP-style models the
differential-attention paper reports, arXiv 2510.00517), or, with ``eps``, any value within ε of the clean
pixel (an ε-bounded patch); outside it the image is untouched. A patch's loss is far from monotone along the
iterates, so the attack returns the iterate with the highest attack loss (PGD returns its last).

Source: Brown, Mané, Roy, Abadi & Gilmer, "Adversarial Patch" (2017), for the threat model; the update is
PGD's (Madry et al., ICLR 2018, eq. (2)) restricted to the patch; docs/theory.md#attack-conventions.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from attacks import _checks, _driver
from attacks.losses import all_zero, is_adversarial, objective_and_grad
from attacks.result import AttackResult


def patch_mask(positions_Bx2, size: int, height: int, width: int) -> jnp.ndarray:
  """0/1 float masks [B, H, W, 1]: 1 on the size × size square whose top-left corner is positions[b] = (row,
  col)."""
  rows, cols = jnp.arange(height), jnp.arange(width)
  r0, c0 = positions_Bx2[:, 0, None], positions_Bx2[:, 1, None]
  in_rows = (rows[None, :] >= r0) & (rows[None, :] < r0 + size)            # [B, H]
  in_cols = (cols[None, :] >= c0) & (cols[None, :] < c0 + size)            # [B, W]
  return (in_rows[:, :, None] & in_cols[:, None, :]).astype(jnp.float32)[..., None]


@functools.partial(jax.jit, static_argnames=("fn_static", "steps"))
def _patch(*, fn_static, fn_dynamic, x, y, target, mask, eps, alpha, lower, upper, steps):
  logits_fn = _driver.merge_logits_fn(fn_static, fn_dynamic)
  inside = mask.astype(bool)
  lo = jnp.maximum(lower, x - eps)           # eps = +inf: the pixel bounds alone (an unbounded patch)
  hi = jnp.minimum(upper, x + eps)

  def step(x_t, grad):
    return jnp.where(inside, jnp.clip(x_t + alpha * jnp.sign(grad), lo, hi), x)

  def body(_, carry):
    x_t, grad, best_x, best_obj = carry
    x_next = step(x_t, grad)
    obj_B, _, grad = objective_and_grad(logits_fn, x_next, y, target_B=target)
    better = (obj_B > best_obj).reshape((-1,) + (1,) * (x.ndim - 1))
    return x_next, grad, jnp.where(better, x_next, best_x), jnp.maximum(obj_B, best_obj)

  obj0, _, grad0 = objective_and_grad(logits_fn, x, y, target_B=target)   # x₀ = x is the first candidate
  zero_B = all_zero(grad0 * mask.astype(grad0.dtype))
  _, _, x_adv, _ = jax.lax.fori_loop(0, steps, body, (x, grad0, x, obj0))
  return AttackResult(x_adv, is_adversarial(logits_fn(x_adv), y, target_B=target), zero_B)


def _positions(position, key, batch: int, size: int, height: int, width: int) -> jnp.ndarray:
  """Top-left corners [B, 2] (int32) from ``position`` (None: uniform per sample from ``key``)."""
  if isinstance(position, jax.core.Tracer):
    raise ValueError("position must be concrete (a tuple or an integer array), not a traced value: compute it "
                     "outside jax.jit, or pass position=None with a key")
  if position is None:
    _checks.check_key(key, "patch", "patch with position=None draws a random position per sample: it needs "
                      "key=jax.random.key(seed), or pass position=(row, col)")
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(batch))
    rows = jax.vmap(lambda k: jax.random.randint(k, (), 0, height - size + 1))(keys)
    cols = jax.vmap(lambda k: jax.random.randint(jax.random.fold_in(k, 1), (), 0, width - size + 1))(keys)
    return jnp.stack([rows, cols], axis=1).astype(jnp.int32)
  pos = np.asarray(position)
  if pos.shape == (2,):
    pos = np.broadcast_to(pos, (batch, 2))
  if pos.shape != (batch, 2) or not np.issubdtype(pos.dtype, np.integer):
    raise ValueError(f"position must be integer (row, col) or an integer array [batch, 2] = [{batch}, 2], got "
                     f"shape {np.shape(position)} and dtype {pos.dtype}")
  bad = (pos[:, 0] < 0) | (pos[:, 0] > height - size) | (pos[:, 1] < 0) | (pos[:, 1] > width - size)
  if bad.any():
    i = int(np.flatnonzero(bad)[0])
    raise ValueError(f"position must put the {size}×{size} patch inside the {height}×{width} image: row in "
                     f"[0, {height - size}] and col in [0, {width - size}], got {tuple(int(v) for v in pos[i])} "
                     f"for sample {i}")
  return jnp.asarray(pos, jnp.int32)


def patch(logits_fn, x, y, *, size: int, position=None, key=None, targeted: bool = False, target=None,
          alpha=0.05, steps: int = 100, eps=None, bounds=(0.0, 1.0)) -> AttackResult:
  """Adversarial patch: sign-gradient steps on a size × size square of each image, the best iterate kept.

  Inside the patch, x_{t+1} = clip_[l, u](x_t + α·sign(∇ₓJ(x_t))) with [l, u] the pixel bounds (and, with
  ``eps``, also [x − ε, x + ε]); outside it x_{t+1} = x exactly. J is CE(f(x), y), or −CE(f(x), t) when
  targeted. x₀ = x. The result is the iterate (x₀ … x_T) with the highest J per sample, so its attack loss
  is never below the clean image's.

  Args:
    logits_fn: pure function x [batch, H, W, C] -> logits [batch, classes]; samples must not interact.
    x: images [batch, H, W, C], floating, inside ``bounds``.
    y: true labels, integer, shape [batch].
    size: the patch side in pixels, an integer in [1, min(H, W)].
    position: the patch's top-left corner (row, col), shared by every sample, or an integer array [batch, 2];
      None draws one per sample uniformly from ``key`` (sample i uses fold_in(key, i)).
    key: PRNG key, required when position is None.
    targeted: move towards ``target``. target: target labels [batch] (targeted only).
    alpha: step size ≥ 0 on the pixel scale (default 0.05: 20 steps cross the whole [0, 1] range).
    steps: gradient steps ≥ 0 (default 100).
    eps: None (default) for an unbounded patch, or an L∞ bound ≥ 0 on the change of each patch pixel.
    bounds: pixel bounds (lower, upper); default (0, 1).

  Returns:
    AttackResult(x_adv [batch, H, W, C], success [batch] bool: the prediction at x_adv differs from y
    (untargeted) or equals the target (targeted); samples already misclassified count as successes, as in
    every attack here (``attacks.attack_success_rate`` counts on the clean-correct ones), zero_grad [batch]
    bool: the gradient on the patch was exactly zero at x).

  Raises:
    ValueError: x not 4-D, a size outside [1, min(H, W)], a position outside the image or of the wrong shape,
      no key with position=None, negative α, ε or steps, and as the other attacks (bounds, labels, target).
  """
  x = jnp.asarray(x)
  if x.ndim != 4:
    raise ValueError(f"patch needs images x with shape [batch, H, W, C], got shape {tuple(x.shape)}")
  batch, height, width, _ = x.shape
  if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or not 1 <= size <= min(height, width):
    raise ValueError(f"size must be an integer patch side in [1, {min(height, width)}] pixels, got {size!r}")
  alpha = _checks.check_nonnegative(alpha, "alpha")
  eps = _checks.check_nonnegative(eps, "eps", allow_none=True)
  steps = _checks.check_count(steps, "steps")
  inputs = _checks.check_attack_inputs(logits_fn, x, y, bounds=bounds, targeted=targeted, target=target,
                                       key=key, needs_key=False, attack="patch")
  mask = patch_mask(_positions(position, key, batch, int(size), height, width), int(size), height, width)
  return _driver.run_attack(
      _patch, logits_fn, dict(x=inputs.x, y=inputs.y, target=inputs.target, mask=mask),
      eps=jnp.inf if eps is None else eps, alpha=alpha, lower=inputs.lower, upper=inputs.upper, steps=steps)
