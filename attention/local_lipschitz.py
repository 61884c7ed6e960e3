"""Empirical local Lipschitz constant of a network around data points (Yang et al. 2020).

  L̂(x) = max_{x' ∈ B∞(x, ε) ∩ [0, 1]^d} ‖f(x) − f(x')‖₁ / ‖x − x'‖∞,

the inner max approximated by sign-gradient ascent on the ratio itself: x'₀ = x + 0.001·N(0, I), then
``steps`` = 10 steps x' ← clip_[0,1](clip(x' + 0.003·sign(∇_{x'} ratio), x − ε, x + ε)); the value is read
at the last iterate, as in the authors' code (``estimate_local_lip_v2``: top norm 1, bottom norm ∞).
f is the logits, or any per-sample feature map (e.g. a ViT's tokens after layer l for the per-layer
estimate). Source: Yang, Rashtchian, Zhang, Salakhutdinov & Chaudhuri, "A Closer Look at Accuracy vs.
Robustness" (NeurIPS 2020), §4 and their repository; arXiv 2510.00517 uses ε equal to the attack ε
(docs/theory.md#local-lipschitz-estimate).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

DEFAULT_STEPS = 10
DEFAULT_STEP_SIZE = 0.003
DEFAULT_INIT_STD = 0.001


def _as_pytree_fn(fn):
  """A plain function becomes a leafless Partial, so it can be passed to jit (static by identity)."""
  return fn if isinstance(fn, jax.tree_util.Partial) else jax.tree_util.Partial(fn)


def _flat(a):
  return a.reshape(a.shape[0], -1)


def lipschitz_ratio(fn, x, x_prime) -> jnp.ndarray:
  """‖f(x) − f(x')‖₁ / ‖x − x'‖∞ per sample, shape [batch] (inputs [batch, ...])."""
  top_B = jnp.sum(jnp.abs(_flat(fn(x)) - _flat(fn(x_prime))), axis=1)
  return top_B / jnp.max(jnp.abs(_flat(x - x_prime)), axis=1)


@functools.partial(jax.jit, static_argnames=("steps",))
@jax.default_matmul_precision("highest")
def _estimate(fn, x, keys, eps, step_size, init_std, lower, upper, *, steps):
  noise = jax.vmap(lambda k: jax.random.normal(k, x.shape[1:], x.dtype))(keys)
  x_prime = x + init_std * noise  # unclipped, as the reference code
  grad_fn = jax.grad(lambda xp: jnp.sum(lipschitz_ratio(fn, x, xp)))

  def body(_, xp):
    xp = xp + step_size * jnp.sign(grad_fn(xp))
    return jnp.clip(jnp.clip(xp, x - eps, x + eps), lower, upper)

  x_prime = jax.lax.fori_loop(0, steps, body, x_prime)
  return lipschitz_ratio(fn, x, x_prime)


def local_lipschitz(fn, x, *, eps: float, key, steps: int = DEFAULT_STEPS, step_size: float = DEFAULT_STEP_SIZE,
                    init_std: float = DEFAULT_INIT_STD, bounds=(0.0, 1.0)) -> jnp.ndarray:
  """Per-sample local Lipschitz estimate L̂(x) (module docstring); average it for the paper's number.

  Args:
    fn: pure per-sample function x [batch, ...] -> outputs [batch, ...] (logits or features); samples must
      not interact. A ``jax.tree_util.Partial(apply, params)`` reuses the compiled program across weights.
    x: inputs with shape [batch, ...] inside ``bounds`` (pixels in [0, 1]).
    eps: L∞ radius ε > 0 on the pixel scale (the attack's ε in arXiv 2510.00517).
    key: PRNG key for the starting noise; sample i uses fold_in(key, i), so a sample's value does not
      depend on the rest of the batch.
    steps: ascent steps ≥ 0 (10 in the reference code).
    step_size: ascent step on the pixel scale (0.003 in the reference code).
    init_std: std of the Gaussian start around x (0.001).
    bounds: pixel bounds (lower, upper).

  Returns:
    float array [batch]: ‖f(x) − f(x')‖₁ / ‖x − x'‖∞ at the last iterate.

  Raises:
    ValueError: ε or init_std not finite and > 0, step size not finite and ≥ 0, negative steps, not one PRNG
      key, bounds not finite or reversed, x of rank < 2, outside bounds or NaN, a non-finite estimate.
  """
  x = jnp.asarray(x)
  if x.ndim < 2 or x.shape[0] == 0:
    raise ValueError(f"x must have shape [batch, ...] with batch >= 1, got {tuple(x.shape)}")
  for name, value, positive in (("eps", eps, True), ("step_size", step_size, False),
                                ("init_std", init_std, True)):
    dtype = jnp.asarray(value).dtype if not isinstance(value, (str, bool, np.bool_)) else None
    real = dtype is not None and np.ndim(value) == 0 and (
        jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer))
    if not (real and np.isfinite(float(value)) and (value > 0 if positive else value >= 0)):
      bound = "> 0" if positive else ">= 0"
      raise ValueError(f"{name} must be a finite real number {bound} (pixel scale), got {value!r}")
  if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
    raise ValueError(f"steps must be an integer >= 0, got {steps!r}")
  try:
    jax.eval_shape(lambda k: jax.random.fold_in(k, 0), key)  # one PRNG key, as JAX reads it
  except (TypeError, ValueError):
    raise ValueError(f"key must be one PRNG key, e.g. jax.random.key(0), for the starting noise; got "
                     f"{type(key).__name__} with shape {np.shape(key)}") from None
  lower, upper = (float(b) for b in bounds)
  if not (np.isfinite(lower) and np.isfinite(upper) and lower <= upper):
    raise ValueError(f"bounds must be finite with lower <= upper, got ({lower}, {upper})")
  values = np.asarray(x)
  if not np.isfinite(values).all():
    raise ValueError("x holds NaN or inf values")
  if values.min() < lower or values.max() > upper:
    raise ValueError(f"x must lie inside bounds [{lower}, {upper}], got [{values.min()}, {values.max()}]")
  keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(x.shape[0]))
  out = _estimate(_as_pytree_fn(fn), x, keys, eps, step_size, init_std, lower, upper, steps=int(steps))
  if not bool(jnp.all(jnp.isfinite(out))):
    raise ValueError("the estimate is NaN or inf: fn returned non-finite outputs or gradients near x")
  return out


@jax.jit
@jax.default_matmul_precision("highest")
def _jacobian_norms(fn, x):
  jac = jax.vmap(jax.jacrev(lambda xi: fn(xi[None])[0]))(x)  # [batch, outputs..., inputs...]
  return jnp.sqrt(jnp.sum(jnp.square(_flat(jac)), axis=1))


def input_jacobian_norm(fn, x) -> jnp.ndarray:
  """‖∂f(x)/∂x‖_F per sample, shape [batch]: the ε → 0 (L2) counterpart of the local Lipschitz estimate.

  Args:
    fn: pure per-sample function x [batch, ...] -> outputs [batch, k] (e.g. logits).
    x: inputs [batch, ...].
  """
  x = jnp.asarray(x)
  if x.ndim < 2:
    raise ValueError(f"x must have shape [batch, ...], got {tuple(x.shape)}")
  return _jacobian_norms(_as_pytree_fn(fn), x)
