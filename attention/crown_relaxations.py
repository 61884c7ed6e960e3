"""Linear relaxations for backward linear bound propagation (CROWN, ``attention.crown``): for each
nonlinear operation, a lower and an upper line (or plane) valid on the box of its inputs' intermediate
bounds.

Every relaxation here returns coefficients of lines a·x + b with a_L·x + b_L ≤ f(x) ≤ a_U·x + b_U for every
x in [l, u] (elementwise), or planes for a product x·y on [l_x, u_x] × [l_y, u_y]. Where l = u (a
zero-width bound) both lines pass through (l, f(l)) with slope f'(l), exact at the one point allowed.

Sources: Zhang et al., "Efficient Neural Network Robustness Certification with General Activation
Functions" (CROWN, NeurIPS 2018, §3.2: the adaptive ReLU lower slope; tangent and chord lines of convex
activations); Shi et al., "Robustness Verification for Transformers" (ICLR 2020, §3.2–3.3: products of two
bounded variables by McCormick planes, softmax through exp, sum and reciprocal); McCormick, "Computability of
global solutions to factorable nonconvex programs" (Math. Programming 10, 1976) for the planes.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp


class Lines(NamedTuple):
  """a_L·x + b_L ≤ f(x) ≤ a_U·x + b_U on [l, u], elementwise; every field has the shape of l."""
  a_lower: jnp.ndarray
  b_lower: jnp.ndarray
  a_upper: jnp.ndarray
  b_upper: jnp.ndarray


def _narrow(l, u):
  """Where the bound has (nearly) zero width: a chord through two equal points is undefined there."""
  return (u - l) <= 1e-12 * jnp.maximum(1.0, jnp.maximum(jnp.abs(l), jnp.abs(u)))


def relu_lines(l, u) -> Lines:
  """ReLU on [l, u].

  Stable inputs are exact: l ≥ 0 gives relu(x) = x, u ≤ 0 gives 0. Crossing inputs (l < 0 < u): the upper
  line is the chord through (l, 0) and (u, u), slope s = u/(u − l), intercept −s·l (it lies above the convex
  ReLU on [l, u] because a convex function lies below its chords); the lower line is relu(x) ≥ α·x with the
  adaptive slope α = 1 if u ≥ −l else 0 (CROWN §3.2: either slope in [0, 1] is valid, relu(x) ≥ 0 and
  relu(x) ≥ x; the one whose line is closer to the ReLU over most of [l, u] is chosen).
  """
  active, inactive = l >= 0, u <= 0
  crossing = ~(active | inactive)
  width = jnp.where(crossing, u - l, 1.0)
  s = jnp.where(crossing, u / width, jnp.where(active, 1.0, 0.0))
  b_upper = jnp.where(crossing, -s * l, 0.0)
  alpha = jnp.where(crossing, (u >= -l).astype(l.dtype), jnp.where(active, 1.0, 0.0))
  return Lines(alpha, jnp.zeros_like(l), s, b_upper)


def _convex_lines(f, df, l, u, t) -> Lines:
  """A convex f on [l, u]: the tangent at t ∈ [l, u] below (a convex function lies above its tangents), the
  chord through (l, f(l)) and (u, f(u)) above (and below its chords)."""
  narrow = _narrow(l, u)
  fl, fu = f(l), f(u)
  slope = jnp.where(narrow, df(l), (fu - fl) / jnp.where(narrow, 1.0, u - l))
  a_upper, b_upper = slope, fl - slope * l
  a_lower = df(t)
  b_lower = f(t) - a_lower * t
  a_lower, b_lower = jnp.where(narrow, df(l), a_lower), jnp.where(narrow, fl - df(l) * l, b_lower)
  return Lines(a_lower, b_lower, a_upper, b_upper)


def exp_lines(l, u) -> Lines:
  """exp on [l, u] (convex): tangent at the midpoint t = (l + u)/2 below, chord above.

  For a wide bound the chord's slope (e^u − e^l)/(u − l) and e^u are computed as they are; inputs of exp in
  ``attention.crown`` are differences of attention logits minus their own row's logit, bounded in practice.
  """
  return _convex_lines(jnp.exp, jnp.exp, l, u, 0.5 * (l + u))


def reciprocal_lines(l, u) -> Lines:
  """1/x on [l, u] with l > 0 (convex and decreasing there): tangent at the midpoint t below,
  1/x ≥ 1/t − (x − t)/t², and the chord through (l, 1/l) and (u, 1/u) above, slope −1/(l·u).

  The caller guarantees l > 0 (the softmax denominators of ``attention.crown`` are ≥ 1: the row's own term
  exp(0) is in the sum).
  """
  return _convex_lines(lambda x: 1.0 / x, lambda x: -1.0 / (x * x), l, u, 0.5 * (l + u))


class Planes(NamedTuple):
  """Two planes bounding x·y on [l_x, u_x] × [l_y, u_y], each given by the box corner (x_a, y_a) it is
  anchored at: the plane y_a·x + x_a·y − x_a·y_a. ``lower`` planes lie below x·y on the box, ``upper`` ones
  above. Fields broadcast like the operands (for a matrix product, x-anchors have the left factor's shape and
  y-anchors the right factor's)."""
  x_lower: jnp.ndarray
  y_lower: jnp.ndarray
  x_upper: jnp.ndarray
  y_upper: jnp.ndarray


def plane(anchor_x, anchor_y, x, y):
  """The value of the plane anchored at (anchor_x, anchor_y) at (x, y): y_a·x + x_a·y − x_a·y_a."""
  return anchor_y * x + anchor_x * y - anchor_x * anchor_y


def mccormick_planes(lx, ux, ly, uy) -> Planes:
  """McCormick's planes of the product x·y on a box (x ∈ [l_x, u_x], y ∈ [l_y, u_y]).

  Derivation: (x − l_x)(y − l_y) ≥ 0 on the box gives x·y ≥ l_y·x + l_x·y − l_x·l_y, the plane anchored at
  the corner (l_x, l_y), below; (x − l_x)(y − u_y) ≤ 0 gives x·y ≤ u_y·x + l_x·y − l_x·u_y, anchored at
  (l_x, u_y), above. The other two planes (anchored at (u_x, u_y) below and (u_x, l_y) above) are as valid;
  one of each is used, as in Shi et al. (ICLR 2020, eq. 7), so that the backward pass stays linear (the
  plane does not depend on the sign of the coefficient that multiplies it). Each plane is exact on the two
  edges through its anchor.
  """
  del ux  # the planes chosen are anchored at l_x (the other pair would use u_x)
  return Planes(lx, ly, lx, uy)


class VectorLines(NamedTuple):
  """Lines of a function of a vector c [..., d] to a scalar per row [...]: a_L·c + b_L ≤ f(c) ≤ a_U·c + b_U,
  with a_* [..., d] and b_* [...]."""
  a_lower: jnp.ndarray
  b_lower: jnp.ndarray
  a_upper: jnp.ndarray
  b_upper: jnp.ndarray


def norm_lines(l, u) -> VectorLines:
  """The ℓ2 norm of each row c [..., d] of the box [l, u] (l, u [..., d]).

  Lower: ‖c‖ ≥ c₀·c/‖c₀‖ for any c₀ ≠ 0 (Cauchy–Schwarz; the supporting hyperplane of the convex norm at
  c₀), with c₀ the box's center; ‖c‖ ≥ 0 where the center is 0.
  Upper: two steps, each an upper bound. Each square is below its chord on [l_i, u_i] (convex):
  c_i² ≤ (l_i + u_i)·c_i − l_i·u_i, so s = ‖c‖² ≤ Σ_i ((l_i + u_i)c_i − l_i u_i) =: ŝ(c). The square root is
  increasing and concave, so √s ≤ √ŝ ≤ √s₀ + (ŝ − s₀)/(2√s₀) for any s₀ > 0 (its tangent at s₀); s₀ is ŝ at
  the center, Σ (l_i² + u_i²)/2 (floored at 1e-30: a box that is the single point 0).
  """
  center = 0.5 * (l + u)
  size = jnp.sqrt(jnp.sum(center * center, axis=-1, keepdims=True))
  a_lower = jnp.where(size > 0, center / jnp.where(size > 0, size, 1.0), 0.0)
  s0 = jnp.maximum(0.5 * jnp.sum(l * l + u * u, axis=-1), 1e-30)
  root = jnp.sqrt(s0)
  a_upper = (l + u) / (2.0 * root[..., None])
  b_upper = root - s0 / (2.0 * root) - jnp.sum(l * u, axis=-1) / (2.0 * root)
  return VectorLines(a_lower, jnp.zeros(l.shape[:-1], l.dtype), a_upper, b_upper)


def bounded_scale(n, radius):
  """g(n) = min(1, r/n) for n ≥ 0: the scale of the bounded normalisation N(c) = c·g(‖c‖)."""
  return jnp.minimum(1.0, radius / jnp.maximum(n, 1e-30))


def bounded_scale_lines(l, u, radius) -> Lines:
  """g(n) = min(1, r/n) on [l, u] ⊂ [0, ∞), decreasing: 1 up to r, then the convex r/n.

  u ≤ r: g = 1, exact. l ≥ r: g = r/n, convex: tangent at the midpoint below, chord above. l < r < u (the
  kink inside): above, the chord of r/n through (r, 1) and (u, r/u), extended (it is ≥ 1 left of r, where
  g = 1, and above the convex r/n on [r, u]); below, the constant r/u (g is decreasing, so g ≥ g(u)).
  """
  one = jnp.ones_like(l)
  flat = u <= radius
  convex = _convex_lines(lambda n: radius / n, lambda n: -radius / (n * n), jnp.maximum(l, radius),
                         jnp.maximum(u, radius), 0.5 * (jnp.maximum(l, radius) + jnp.maximum(u, radius)))
  kink = ~flat & (l < radius)
  # The chord's slope (r/u − 1)/(u − r) is exactly −1/u: written so, it stays exact when u is within rounding of r.
  slope = jnp.where(kink, -1.0 / jnp.where(kink, u, 1.0), 0.0)
  a_upper = jnp.where(flat, 0.0, jnp.where(kink, slope, convex.a_upper))
  b_upper = jnp.where(flat, one, jnp.where(kink, 1.0 - slope * radius, convex.b_upper))
  a_lower = jnp.where(flat, 0.0, jnp.where(kink, 0.0, convex.a_lower))
  b_lower = jnp.where(flat, one, jnp.where(kink, radius / jnp.where(kink, u, 1.0), convex.b_lower))
  return Lines(a_lower, b_lower, a_upper, b_upper)
