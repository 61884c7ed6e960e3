"""Square roots, norms, divisions and arccos whose values and gradients stay finite at their boundaries.

`jnp.sqrt` has an infinite derivative at 0, `jnp.linalg.norm` a NaN one at the zero vector, and `arccos` an
infinite one at ±1. A plain `jnp.where(ok, f(x), fill)` does not help: the gradient of the unused branch
is still evaluated and 0·inf = NaN. Every function here uses the double-where form instead: the argument
is replaced by a harmless value *before* the singular function sees it, and the result is selected after,
so both branches have finite derivatives. Away from the boundary the values are bit-identical to the
plain functions.

Conventions at the boundary (the ones neural-tangents uses for its closed-form ReLU kernels, Novak et
al., arXiv 1912.02803, ``stax.Relu``):
  * sqrt(0) = 0 with derivative 0 (the symmetric subgradient of |t| = sqrt(t²));
  * arccos(±1) = 0 / π with derivative 0 (θ is a kink |t| in the perpendicular direction there; 0 is the
    midpoint of its subdifferential);
  * a ratio with a zero denominator takes the caller's fill value, with derivative 0.

ntk, attention and influence import these; attacks keeps its own per-sample norms (attacks.projections),
written in the same form.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def safe_sqrt(x) -> jnp.ndarray:
  """√max(x, 0) elementwise, with derivative 0 wherever x ≤ 0 (never inf or NaN). Shape and dtype of x."""
  x = jnp.asarray(x)
  positive = x > 0
  return jnp.where(positive, jnp.sqrt(jnp.where(positive, x, jnp.ones_like(x))), jnp.zeros_like(x))


def safe_norm(x, axis=None, keepdims: bool = False) -> jnp.ndarray:
  """ℓ2 norm √Σx² over ``axis`` (all axes when None), with gradient 0 at the zero vector.

  Args:
    x: real array of any shape.
    axis: int or tuple of ints to reduce; None reduces everything.
    keepdims: keep the reduced axes with size 1.

  Returns:
    The norms, shape of x without (or with size-1) ``axis``; equal to ``jnp.linalg.norm`` wherever it is
    defined, gradient x/‖x‖ away from 0 and 0 at 0.
  """
  return safe_sqrt(jnp.sum(jnp.square(x), axis=axis, keepdims=keepdims))


def safe_divide(numerator, denominator, fill=0.0) -> jnp.ndarray:
  """numerator / denominator where denominator ≠ 0, else ``fill``; derivatives finite everywhere.

  Broadcasts numerator, denominator and fill. The derivative of the filled entries is 0.
  """
  denominator = jnp.asarray(denominator)
  nonzero = denominator != 0
  ratio = numerator / jnp.where(nonzero, denominator, jnp.ones_like(denominator))
  return jnp.where(nonzero, ratio, fill)


def safe_arccos(c) -> jnp.ndarray:
  """arccos of c clipped to [−1, 1], with derivative −1/√(1 − c²) inside and 0 at or beyond ±1.

  Args:
    c: cosines (rounding may push them a little past ±1), any shape, floating.

  Returns:
    Angles in [0, π], shape and dtype of c.
  """
  c = jnp.asarray(c)
  inside = jnp.abs(c) < 1
  boundary = jax.lax.stop_gradient(jnp.arccos(jnp.clip(c, -1.0, 1.0)))
  return jnp.where(inside, jnp.arccos(jnp.where(inside, c, jnp.zeros_like(c))), boundary)


def pow2_row_scale(x, axis: int = -1):
  """(x / 2^k, 2^k) with one power of two per row (along ``axis``), chosen so the row's largest |entry| of
  x / 2^k lies in [1, 2) (so 2^k ≤ the largest entry and is representable, float16 included). Multiplying by a power of two is exact in floating point (short of subnormals),
  so anything scale-invariant computed from the scaled rows (a unit row, a cosine) is bit-identical to the
  unscaled computation, and squares of the scaled rows cannot overflow. The scale carries no gradient.

  Args:
    x: real array of any shape with at least one axis.
    axis: the axis that makes a row.

  Returns:
    (scaled, scale): scaled with the shape of x; scale with x's shape and ``axis`` of size 1 (1 for zero rows).
  """
  x = jnp.asarray(x)
  largest = jax.lax.stop_gradient(jnp.max(jnp.abs(x), axis=axis, keepdims=True))
  _, exponent = jnp.frexp(largest)  # largest = m·2^e, m ∈ [0.5, 1): scale by 2^(e − 1)
  scale = jnp.ldexp(jnp.ones_like(largest), jnp.where(largest > 0, exponent - 1, 0))
  return x / scale, scale
