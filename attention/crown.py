"""Backward linear bound propagation (CROWN) in JAX, for networks of dense layers, ReLUs and softmax
self-attention: sound lower and upper bounds of every output (or of any linear function of the outputs, e.g.
the margins f_y − f_j) over an ℓ2 or ℓ∞ ball of radius ε around an input, optionally intersected with a
pixel box.

  python -m attention.crown --net NET.npz --x X.npy --eps E --norm {2,inf} [--box 0,1] [--intermediate crown]

prints one JSON line ``{"lower": [...], "upper": [...]}``: the bounds of every output, flattened (the
network file's format is in docs/certification.md#crown).

How: a network is a graph of primitive operations (``Graph``: linear maps, ReLU, exp, reciprocal and the
bilinear product of two computed matrices). Interval bound propagation (IBP) gives every node a box;
then, node by node, CROWN's backward pass bounds each node a later relaxation needs (intermediate bounds,
``intermediate='crown'``; or the IBP boxes alone, ``'ibp'``, the cheaper option), and every box is the
intersection of the two, so the result is never looser than IBP. A backward pass carries the coefficients
Λ of a linear function of a node back to the input through each operation's linear relaxation
(``attention.crown_relaxations``), then minimises (maximises) the final linear function of x over the input
set exactly.

Softmax over the keys is written as p_i = 1 / Σ_j exp(s_j − s_i) (Shi et al., ICLR 2020, §3.3): a linear map
to the differences, exp, a sum, and the reciprocal of a denominator that is at least 1; the products with
the values V (and the attention logits Q Kᵀ) are bilinear in the input and relaxed by McCormick planes.

Sources: Zhang et al., NeurIPS 2018 (CROWN); Shi et al., ICLR 2020 (transformers); Gowal et al., 2018
(IBP). The certified ViT of ``attention.certified_vit`` is bounded by ``attention.crown_vit``.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import sys
from typing import NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from attention import crown_relaxations as relax

NORMS = ("2", "inf")
INTERMEDIATE = ("crown", "ibp")
KINDS = ("dense", "relu", "attention")


@dataclasses.dataclass(frozen=True)
class Node:
  """One operation of a ``Graph``: ``op`` on the nodes ``inputs`` (indices of earlier nodes), with
  ``params`` (names into the graph's parameter dict) and static ``attrs``; ``shape`` is its output's."""
  op: str
  inputs: tuple[int, ...]
  shape: tuple[int, ...]
  params: tuple[str, ...] = ()
  attrs: tuple = ()


OPS = ("input", "linear", "transpose", "scale", "pairdiff", "sum_last", "relu", "exp", "reciprocal", "matmul",
       "add", "offset", "row_mean", "rownorm", "bscale", "rowscale")


@dataclasses.dataclass(frozen=True)
class Graph:
  """A network as primitive operations in topological order; node 0 is the input, the last node the output.

  Operations (x, y the input nodes' values):
    linear: x W + b on the last axis (W [d, e], b [e]; params ('name.W', 'name.b')).
    transpose: xᵀ of a matrix.          scale: c·x (attrs (c,)).
    pairdiff: D[..., i, j] = x[..., j] − x[..., i] (the softmax's logit differences).
    sum_last: Σ over the last axis.      add: x + y (residual connections).
    relu, exp, reciprocal: elementwise.  matmul: x @ y of two computed matrices (bilinear).
    offset: x + P (a constant P of x's shape, params ('name',)).   row_mean: the mean over the first axis.
    rownorm: ‖x‖₂ over the last axis.    bscale: min(1, r/x) elementwise (attrs (r,)).
    rowscale: x ⊙ y[..., None] (each row of x times its own scalar, bilinear).
  """
  nodes: tuple[Node, ...]

  def __post_init__(self):
    for i, node in enumerate(self.nodes):
      if node.op not in OPS:
        raise ValueError(f"node {i}: unknown operation {node.op!r}; expected one of {OPS}")
      if any(j >= i or j < 0 for j in node.inputs):
        raise ValueError(f"node {i}: inputs {node.inputs} must be earlier nodes")
    if not self.nodes or self.nodes[0].op != "input":
      raise ValueError("a Graph starts with its input node")


class Builder:
  """Appends nodes to a graph under construction; each method returns the new node's index."""

  def __init__(self, input_shape: Sequence[int]):
    self.nodes: list[Node] = [Node("input", (), tuple(input_shape))]

  def _add(self, op, inputs, shape, params=(), attrs=()) -> int:
    self.nodes.append(Node(op, tuple(inputs), tuple(shape), tuple(params), tuple(attrs)))
    return len(self.nodes) - 1

  def shape(self, i: int) -> tuple[int, ...]:
    return self.nodes[i].shape

  def linear(self, x: int, name: str, out_dim: int) -> int:
    return self._add("linear", (x,), self.shape(x)[:-1] + (out_dim,), (f"{name}.W", f"{name}.b"))

  def relu(self, x: int) -> int:
    return self._add("relu", (x,), self.shape(x))

  def add(self, x: int, y: int) -> int:
    if self.shape(x) != self.shape(y):
      raise ValueError(f"add: shapes {self.shape(x)} and {self.shape(y)} differ")
    return self._add("add", (x, y), self.shape(x))

  def attention(self, x: int, name: str, d_k: int, d_v: int) -> int:
    """One-head softmax self-attention over the rows of x [T, d]: softmax(x W_q (x W_k)ᵀ/√d_k) x W_v, no biases
    (params '<name>.Wq', '.Wk', '.Wv'; zero biases are added as '<name>.bq' ... by ``load_network``)."""
    t = self.shape(x)[0]
    q = self._add("linear", (x,), (t, d_k), (f"{name}.Wq", f"{name}.bq"))
    k = self._add("linear", (x,), (t, d_k), (f"{name}.Wk", f"{name}.bk"))
    v = self._add("linear", (x,), (t, d_v), (f"{name}.Wv", f"{name}.bv"))
    kt = self._add("transpose", (k,), (d_k, t))
    s = self._add("scale", (self._add("matmul", (q, kt), (t, t)),), (t, t), attrs=(1.0 / math.sqrt(d_k),))
    return self._add("matmul", (self.softmax_rows(s), v), (t, d_v))

  def bilinear_attention(self, x: int, name: str, d_v: int) -> int:
    """One head of the certified ViT's attention, softmax(x A xᵀ) x W_V over the rows of x [T, d] (params
    '<name>.A' [d, d] and '<name>.V' [d, d_v], with zero biases '<name>.b0' [d] and '<name>.b1' [d_v])."""
    t, d = self.shape(x)
    q = self._add("linear", (x,), (t, d), (f"{name}.A", f"{name}.b0"))
    s = self._add("matmul", (q, self._add("transpose", (x,), (d, t))), (t, t))
    v = self._add("linear", (x,), (t, d_v), (f"{name}.V", f"{name}.b1"))
    return self._add("matmul", (self.softmax_rows(s), v), (t, d_v))

  def softmax_rows(self, s: int) -> int:
    """softmax over the last axis of s [T, T] as p_i = 1/Σ_j exp(s_j − s_i): differences, exp, a sum (≥ 1: the
    row's own term is exp(0)) and its reciprocal (Shi et al., ICLR 2020, §3.3)."""
    t = self.shape(s)
    diff = self._add("pairdiff", (s,), t + t[-1:])
    z = self._add("sum_last", (self._add("exp", (diff,), t + t[-1:]),), t)
    return self._add("reciprocal", (z,), t)

  def offset(self, x: int, name: str) -> int:
    return self._add("offset", (x,), self.shape(x), (name,))

  def row_mean(self, x: int) -> int:
    return self._add("row_mean", (x,), self.shape(x)[1:])

  def bounded_norm(self, x: int, name: str, radius: float) -> int:
    """N(x) = c·min(1, r/‖c‖), c = x − mean(x) on the last axis (``attention.lipschitz_layers.bounded_norm``):
    the centring is a linear map (params '<name>.W' = I − 11ᵀ/d and a zero '<name>.b', ``centring_params``),
    then the product of c with the scale of its norm, relaxed as a product (``rowscale``)."""
    c = self.linear(x, name, self.shape(x)[-1])
    n = self._add("rownorm", (c,), self.shape(c)[:-1])
    g = self._add("bscale", (n,), self.shape(n), attrs=(float(radius),))
    return self._add("rowscale", (c, g), self.shape(c))

  def graph(self) -> Graph:
    return Graph(tuple(self.nodes))


def centring_params(name: str, d: int) -> dict:
  """The params of ``Builder.bounded_norm``'s centring map x ↦ x − mean(x) on d features."""
  return {f"{name}.W": np.eye(d) - np.full((d, d), 1.0 / d), f"{name}.b": np.zeros(d)}


# ----------------------------------------------------------------------------------------------- forward


def _linear_params(params, node):
  w, b = params[node.params[0]], params[node.params[1]]
  return w, b


def _affine(x, w, b):
  """x W + b on the last axis of x (b broadcast over the leading axes explicitly)."""
  y = x @ w
  return y + b.reshape((1,) * (y.ndim - 1) + b.shape)


def forward(graph: Graph, params, x) -> list:
  """Every node's value at input x (shape ``graph.nodes[0].shape``)."""
  vals = [jnp.asarray(x)]
  for node in graph.nodes[1:]:
    a = [vals[j] for j in node.inputs]
    if node.op == "linear":
      vals.append(_affine(a[0], *_linear_params(params, node)))
    elif node.op == "transpose":
      vals.append(a[0].T)
    elif node.op == "scale":
      vals.append(node.attrs[0] * a[0])
    elif node.op == "pairdiff":
      vals.append(a[0][..., None, :] - a[0][..., :, None])
    elif node.op == "sum_last":
      vals.append(a[0].sum(-1))
    elif node.op == "add":
      vals.append(a[0] + a[1])
    elif node.op == "relu":
      vals.append(jax.nn.relu(a[0]))
    elif node.op == "exp":
      vals.append(jnp.exp(a[0]))
    elif node.op == "reciprocal":
      vals.append(1.0 / a[0])
    elif node.op == "matmul":
      vals.append(a[0] @ a[1])
    elif node.op == "offset":
      vals.append(a[0] + params[node.params[0]])
    elif node.op == "row_mean":
      vals.append(a[0].mean(0))
    elif node.op == "rownorm":
      vals.append(jnp.sqrt(jnp.sum(a[0] * a[0], axis=-1)))
    elif node.op == "bscale":
      vals.append(relax.bounded_scale(a[0], node.attrs[0]))
    elif node.op == "rowscale":
      vals.append(a[0] * a[1][..., None])
  return vals


# ------------------------------------------------------------------------------------------------- IBP


class Box(NamedTuple):
  lower: jnp.ndarray
  upper: jnp.ndarray


def input_box(x0, eps, norm: str, box=None) -> Box:
  """The smallest box holding the input set: x0 ± ε (either norm: an ℓ2 ball lies in the ℓ∞ ball of the same
  radius), intersected with the pixel box [lo, hi] when given."""
  lo, hi = x0 - eps, x0 + eps
  if box is not None:
    lo, hi = jnp.maximum(lo, box[0]), jnp.minimum(hi, box[1])
  return Box(lo, hi)


def _rounding_slack(magnitude, terms: int):
  """A bound on the rounding error of a floating-point sum of ``terms`` products whose absolute values sum to
  ``magnitude``: γ_k · magnitude with γ_k = k·u/(1 − k·u), u the unit roundoff (Higham, "Accuracy and Stability of
  Numerical Algorithms", 2nd ed., §3.1, eq. (3.4)); k counts the products, the additions and the bias."""
  u = float(jnp.finfo(magnitude.dtype).eps) / 2
  k = terms + 2
  return (k * u / (1 - k * u)) * magnitude


def _ibp_node(node, boxes, params) -> Box:
  """Interval bounds of one node from its inputs' boxes. The linear and bilinear maps take each end from the
  matching end of each input (lower = l W⁺ + u W⁻ + b for x W + b); they and the sums are widened by a bound on
  their own rounding error (``_rounding_slack``): the center-radius form c ± r lost the bias and more to
  cancellation when an earlier box had grown to 1e16–1e230 (a deep attention stack's first interval sweep),
  giving ends inside the true range. Single additions and products round relative to their result and need no
  widening."""
  ins = [boxes[j] for j in node.inputs]
  if node.op == "linear":
    w, b = _linear_params(params, node)
    (lo, hi), wp, wn = ins[0], jnp.maximum(w, 0), jnp.minimum(w, 0)
    ab = jnp.abs(b).reshape((1,) * (lo.ndim - 1) + b.shape)   # each end's error from its own terms only
    low_slack = _rounding_slack(jnp.abs(lo) @ wp - jnp.abs(hi) @ wn + ab, w.shape[0])
    high_slack = _rounding_slack(jnp.abs(hi) @ wp - jnp.abs(lo) @ wn + ab, w.shape[0])
    return Box(_affine(lo, wp, b) + hi @ wn - low_slack, _affine(hi, wp, b) + lo @ wn + high_slack)
  if node.op == "transpose":
    return Box(ins[0].lower.T, ins[0].upper.T)
  if node.op == "scale":
    s = node.attrs[0]
    lo, hi = s * ins[0].lower, s * ins[0].upper
    return Box(jnp.minimum(lo, hi), jnp.maximum(lo, hi))
  if node.op == "pairdiff":   # D[..., i, j] = x_j − x_i: exactly 0 on the diagonal, whatever the box
    lo, hi = ins[0]
    diagonal = jnp.eye(lo.shape[-1], dtype=bool)
    return Box(jnp.where(diagonal, 0.0, lo[..., None, :] - hi[..., :, None]),
               jnp.where(diagonal, 0.0, hi[..., None, :] - lo[..., :, None]))
  if node.op == "sum_last":
    lo, hi = ins[0]
    return Box(lo.sum(-1) - _rounding_slack(jnp.abs(lo).sum(-1), lo.shape[-1]),
               hi.sum(-1) + _rounding_slack(jnp.abs(hi).sum(-1), hi.shape[-1]))
  if node.op == "add":
    return Box(ins[0].lower + ins[1].lower, ins[0].upper + ins[1].upper)
  if node.op in ("relu", "exp"):
    f = jax.nn.relu if node.op == "relu" else jnp.exp
    return Box(f(ins[0].lower), f(ins[0].upper))
  if node.op == "reciprocal":
    return Box(1.0 / ins[0].upper, 1.0 / ins[0].lower)
  if node.op == "matmul":
    (la, ua), (lb, ub) = ins
    ca, ra, cb, rb = 0.5 * (la + ua), 0.5 * (ua - la), 0.5 * (lb + ub), 0.5 * (ub - lb)
    c = ca @ cb
    r = jnp.abs(ca) @ rb + ra @ jnp.abs(cb) + ra @ rb
    # c ± r cancels when c and r are huge: widened by the rounding error of both sums (each ≤ γ·(|a| @ |b|),
    # |a| the larger end's magnitude) and of the final c ± r
    big = jnp.maximum(jnp.abs(la), jnp.abs(ua)) @ jnp.maximum(jnp.abs(lb), jnp.abs(ub))
    slack = _rounding_slack(4 * big, la.shape[-1] + 2)
    return Box(c - r - slack, c + r + slack)
  if node.op == "offset":
    p = params[node.params[0]]
    return Box(ins[0].lower + p, ins[0].upper + p)
  if node.op == "row_mean":
    lo, hi = ins[0]
    return Box(lo.mean(0) - _rounding_slack(jnp.abs(lo).mean(0), lo.shape[0]),
               hi.mean(0) + _rounding_slack(jnp.abs(hi).mean(0), hi.shape[0]))
  if node.op == "rownorm":     # the box's nearest point to 0, and its farthest corner
    lo, hi = ins[0]
    nearest = jnp.clip(jnp.zeros_like(lo), lo, hi)
    return Box(jnp.sqrt(jnp.sum(nearest ** 2, axis=-1)), jnp.sqrt(jnp.sum(jnp.maximum(lo ** 2, hi ** 2), axis=-1)))
  if node.op == "bscale":       # decreasing
    r = node.attrs[0]
    return Box(relax.bounded_scale(ins[0].upper, r), relax.bounded_scale(ins[0].lower, r))
  if node.op == "rowscale":     # the extremes of a product on a box are at its corners
    (la, ua), (lg, ug) = ins
    corners = jnp.stack([la * lg[..., None], la * ug[..., None], ua * lg[..., None], ua * ug[..., None]])
    return Box(corners.min(0), corners.max(0))
  raise ValueError(f"no interval rule for {node.op!r}")


def _sane(box: Box) -> Box:
  """A box whose undefined ends (NaN: inf·0 where an overflowed exp met a zero) are the whole line: −∞ below,
  +∞ above, so that intersecting it with a finite bound keeps the finite one."""
  return Box(jnp.where(jnp.isnan(box.lower), -jnp.inf, box.lower), jnp.where(jnp.isnan(box.upper), jnp.inf,
                                                                            box.upper))


def ibp(graph: Graph, params, first: Box, *, within: Optional[Sequence[Box]] = None, cuts=None) -> list[Box]:
  """Interval bound propagation: a box for every node from the input's box ``first`` (deep attention stacks
  overflow it to ±∞, which later bounds intersect away; ``_sane``).

  ``within`` (boxes known to hold the nodes, e.g. another method's bounds of the same input set) and ``cuts``
  ({node: (center, Frobenius radius)}: each coordinate within ± radius of the center) are intersected with each
  node's box as the sweep reaches it, so the nodes after it start from the tighter one.
  """
  cuts = cuts or {}
  boxes = [first if within is None else _intersect(first, within[0])]
  for j, node in enumerate(graph.nodes[1:], start=1):
    box = _sane(_ibp_node(node, boxes, params))
    if within is not None and j < len(within):
      box = _intersect(box, within[j])
    if j in cuts:
      center, radius = cuts[j]
      box = _intersect(box, Box(center - radius, center + radius))
    boxes.append(box)
  return boxes


def _intersect(a: Box, b: Box) -> Box:
  return Box(jnp.fmax(a.lower, b.lower), jnp.fmin(a.upper, b.upper))


# -------------------------------------------------------------------------------------- backward (CROWN)


def _backward(graph: Graph, params, boxes: Sequence[Box], target: int, spec, cuts=None):
  """Λ·node_target bounded below and above by linear functions of the input.

  Args:
    spec: [m, *shape(target)] coefficients of m linear functions of the target node.

    cuts: {node: (center, radius)}: nodes known to lie in the Frobenius ball ‖z − center‖ ≤ radius whatever
      the input (e.g. an attention block's output under LoFAST's bound); the pass stops there and adds the
      exact extreme of Λ·z over that ball, Λ·center ∓ radius·‖Λ‖.

  Returns:
    ((Λ_L [m, *input shape], c_L [m]), (Λ_U, c_U)): spec·node ≥ Λ_L·x + c_L and ≤ Λ_U·x + c_U for every input
    x whose intermediate values lie in ``boxes`` (and in the cuts' balls).
  """
  cuts = cuts or {}
  m = spec.shape[0]
  # node -> Λ [2, m, *shape(node)]: [0] the coefficients of the lower bound, [1] those of the upper one. Every rule
  # is applied to both at once (one operation on the stacked pair: half the operations of a pass per bound).
  lam = {target: jnp.stack([spec, spec])}
  const = jnp.zeros((2, m), spec.dtype)
  sign = jnp.asarray([-1.0, 1.0], spec.dtype)[:, None]     # [2, 1]: the lower bound's end is −, the upper's +

  def push(j, value):
    lam[j] = lam[j] + value if j in lam else value

  def sides(lower, upper):
    """(for positive coefficients, for negative ones), each [2, 1, ...] over (bound, function): the lower bound
    takes the lower line where its coefficient is positive and the upper line where negative, the upper bound
    the reverse."""
    lower, upper = jnp.broadcast_arrays(lower, upper)
    return jnp.stack([lower, upper])[:, None], jnp.stack([upper, lower])[:, None]

  for i in range(target, 0, -1):
    if i not in lam:
      continue
    node = graph.nodes[i]
    L = lam.pop(i)
    axes = tuple(range(2, L.ndim))
    if i in cuts:
      center, radius = cuts[i]
      size = jnp.sqrt(jnp.sum(L * L, axis=axes))
      const = const + jnp.einsum("km...,...->km", L, center) + sign * radius * size
    elif node.op == "linear":
      w, b = _linear_params(params, node)
      push(node.inputs[0], jnp.einsum("km...e,de->km...d", L, w))
      const = const + jnp.einsum("km...e,e->km", L, b)
    elif node.op == "transpose":
      push(node.inputs[0], jnp.swapaxes(L, 2, 3))
    elif node.op == "scale":
      push(node.inputs[0], node.attrs[0] * L)
    elif node.op == "pairdiff":       # D[.., i, j] = x[.., j] − x[.., i]
      push(node.inputs[0], L.sum(-2) - L.sum(-1))
    elif node.op == "sum_last":
      push(node.inputs[0], jnp.broadcast_to(L[..., None], L.shape + graph.nodes[node.inputs[0]].shape[-1:]))
    elif node.op == "add":
      push(node.inputs[0], L)
      push(node.inputs[1], L)
    elif node.op in ("relu", "exp", "reciprocal", "bscale"):
      lo, hi = boxes[node.inputs[0]]
      lines = (relax.bounded_scale_lines(lo, hi, node.attrs[0]) if node.op == "bscale" else
               {"relu": relax.relu_lines, "exp": relax.exp_lines, "reciprocal": relax.reciprocal_lines}[node.op](lo, hi))
      pos, neg = jnp.maximum(L, 0), jnp.minimum(L, 0)
      (a_pos, a_neg), (b_pos, b_neg) = sides(lines.a_lower, lines.a_upper), sides(lines.b_lower, lines.b_upper)
      push(node.inputs[0], pos * a_pos + neg * a_neg)
      const = const + (pos * b_pos + neg * b_neg).sum(axes)
    elif node.op == "matmul":       # Y = A B, Y[t, s] = Σ_r A[t, r] B[r, s]: one product A[t, r]·B[r, s] per term
      (la, ua), (lb, ub) = boxes[node.inputs[0]], boxes[node.inputs[1]]
      planes = relax.mccormick_planes(la, ua, lb, ub)
      pos, neg = jnp.maximum(L, 0), jnp.minimum(L, 0)
      # A plane anchored at (x_a, y_a) is y_a·A + x_a·B − x_a·y_a (``relax.plane``); ``sides`` picks each
      # bound's plane by the sign of its coefficient.
      (xa_pos, xa_neg), (ya_pos, ya_neg) = sides(planes.x_lower, planes.x_upper), sides(planes.y_lower, planes.y_upper)
      # Per bound: with the bound index as a batch dimension of the product, XLA:CPU took 25.4 s per image on the
      # standard certified ViT against 17.6 s so (benchmarks/crown_vit_speed.py).
      for coeff, xa, ya in ((pos, xa_pos[:, 0], ya_pos[:, 0]), (neg, xa_neg[:, 0], ya_neg[:, 0])):
        push(node.inputs[0], jnp.stack([jnp.einsum("mts,rs->mtr", coeff[k], ya[k]) for k in (0, 1)]))
        push(node.inputs[1], jnp.stack([jnp.einsum("mts,tr->mrs", coeff[k], xa[k]) for k in (0, 1)]))
        const = const - jnp.stack([jnp.einsum("mts,tr,rs->m", coeff[k], xa[k], ya[k]) for k in (0, 1)])
    elif node.op == "offset":
      push(node.inputs[0], L)
      const = const + jnp.einsum("km...,...->km", L, params[node.params[0]])
    elif node.op == "row_mean":
      t = graph.nodes[node.inputs[0]].shape[0]
      push(node.inputs[0], jnp.broadcast_to(L[:, :, None], L.shape[:2] + (t,) + L.shape[2:]) / t)
    elif node.op == "rownorm":
      lo, hi = boxes[node.inputs[0]]
      lines = relax.norm_lines(lo, hi)
      pos, neg = jnp.maximum(L, 0), jnp.minimum(L, 0)
      (a_pos, a_neg), (b_pos, b_neg) = sides(lines.a_lower, lines.a_upper), sides(lines.b_lower, lines.b_upper)
      push(node.inputs[0], pos[..., None] * a_pos + neg[..., None] * a_neg)
      const = const + (pos * b_pos + neg * b_neg).sum(axes)
    elif node.op == "rowscale":     # N[.., i] = c[.., i]·g[..]: one product per entry
      (lc, uc), (lg, ug) = boxes[node.inputs[0]], boxes[node.inputs[1]]
      planes = relax.mccormick_planes(lc, uc, lg[..., None], ug[..., None])
      pos, neg = jnp.maximum(L, 0), jnp.minimum(L, 0)
      full = lambda v: jnp.broadcast_to(v, lc.shape)  # noqa: E731
      (xa_pos, xa_neg) = sides(full(planes.x_lower), full(planes.x_upper))
      (ya_pos, ya_neg) = sides(full(planes.y_lower), full(planes.y_upper))
      for coeff, xa, ya in ((pos, xa_pos, ya_pos), (neg, xa_neg, ya_neg)):
        push(node.inputs[0], coeff * ya)
        push(node.inputs[1], (coeff * xa).sum(-1))
        const = const - (coeff * xa * ya).sum(axes)
    else:
      raise ValueError(f"no backward rule for {node.op!r}")
  final = lam.get(0)
  if final is None:
    zero = jnp.zeros((m,) + graph.nodes[0].shape, spec.dtype)
    return ((zero, const[0]), (zero, const[1]))
  return ((final[0], const[0]), (final[1], const[1]))


def concretize(coeff, const, x0, eps, norm: str, box=None, *, upper: bool = False):
  """min (or max, ``upper``) of Λ·x + c over {‖x − x0‖ ≤ ε} ∩ box.

  ℓ∞: the set is the box [max(x0 − ε, lo), min(x0 + ε, hi)] and the optimum is exact (each coordinate at
  the end its coefficient's sign picks). ℓ2 alone: Λ·x0 ∓ ε‖Λ‖₂ (exact, Cauchy–Schwarz). ℓ2 with the box:
  the better of the ℓ2 bound and the bound over the box that holds the intersection (both sets contain the
  intersection, so both bounds are valid; their max (min) is the tighter valid one).
  """
  flat = coeff.reshape(coeff.shape[0], -1)
  x = jnp.ravel(x0)
  sign = 1.0 if upper else -1.0
  lo, hi = (jnp.ravel(v)[None, :] for v in input_box(x0, eps, norm, box))
  over_box = jnp.where((flat > 0) == upper, flat * hi, flat * lo).sum(-1) + const
  if norm == "inf":
    return over_box
  ball = flat @ x + sign * eps * jnp.linalg.norm(flat, axis=-1) + const
  if box is None:
    return ball
  return jnp.minimum(ball, over_box) if upper else jnp.maximum(ball, over_box)


NONLINEAR = ("relu", "exp", "reciprocal", "matmul", "rownorm", "bscale", "rowscale")


def needed(graph: Graph) -> frozenset:
  """The nodes whose bounds some relaxation reads: the inputs of the nonlinear operations."""
  return frozenset(j for node in graph.nodes if node.op in NONLINEAR for j in node.inputs)


def live(graph: Graph, cuts=()) -> frozenset:
  """The nodes the output's backward pass reaches without passing through a cut node (cuts included)."""
  seen, todo = set(), [len(graph.nodes) - 1]
  while todo:
    i = todo.pop()
    if i in seen:
      continue
    seen.add(i)
    if i not in cuts:
      todo.extend(graph.nodes[i].inputs)
  return frozenset(seen)


def node_bounds(graph: Graph, params, x0, eps, norm: str = "2", box=None, *, intermediate: str = "crown",
                upto: Optional[int] = None, cuts=None, within: Optional[Sequence[Box]] = None) -> list[Box]:
  """Bounds of every node (up to ``upto``, default all) over the input set: IBP, and with
  ``intermediate='crown'`` CROWN for every node a relaxation reads (``needed``) and for the last one, each
  intersected with the other and with the interval bound from its inputs' tightened boxes. A cut node's box is
  its ball's intersected with IBP's; ``within`` (boxes known to hold the nodes over the same input set, e.g.
  CROWN's without the cuts) is intersected with every box, so no box is looser than it.

  Raises:
    ValueError: an unknown norm or intermediate mode, ε not one finite number ≥ 0, or a non-finite x0 (concrete
      values; traced ones are the caller's to check)."""
  _check(norm, intermediate, eps)
  x0 = jnp.asarray(x0)
  _check_point(x0)
  cuts = cuts or {}
  boxes = ibp(graph, params, input_box(x0, eps, norm, box), within=within, cuts=cuts)
  last = len(graph.nodes) - 1 if upto is None else upto
  if intermediate == "ibp":
    return boxes[:last + 1]
  reached = live(graph, tuple(cuts))
  for i in range(1, last + 1):
    # The interval bound again from the inputs' boxes as CROWN has tightened them (the first sweep saw only the
    # interval boxes): e.g. a softmax's exp(s_i − s_i) is [1, 1] once the difference is CROWN's exact [0, 0], so
    # its denominator stays ≥ 1 instead of inheriting the first sweep's exp([lo_i − hi_i, hi_i − lo_i]).
    boxes[i] = _intersect(boxes[i], _sane(_ibp_node(graph.nodes[i], boxes, params)))
    if i in cuts or i not in reached or (i not in needed(graph) and i != last):
      continue   # no relaxation on the output's path reads this node's bounds: its box is kept
    n = int(np.prod(graph.nodes[i].shape))
    spec = jnp.eye(n, dtype=x0.dtype).reshape((n,) + graph.nodes[i].shape)
    (cl, kl), (cu, ku) = _backward(graph, params, boxes, i, spec, cuts)
    lo = concretize(cl, kl, x0, eps, norm, box).reshape(graph.nodes[i].shape)
    hi = concretize(cu, ku, x0, eps, norm, box, upper=True).reshape(graph.nodes[i].shape)
    # fmax/fmin: a NaN end of CROWN's bound (inf·0 past an overflowed box) keeps the interval's end
    boxes[i] = Box(jnp.fmax(lo, boxes[i].lower), jnp.fmin(hi, boxes[i].upper))
  return boxes


def spec_bounds(graph: Graph, params, x0, spec, eps, norm: str = "2", box=None, *,
                intermediate: str = "crown", cuts=None) -> tuple[jnp.ndarray, jnp.ndarray]:
  """Lower and upper bounds [m] of spec·f(x) over the input set (spec [m, *output shape]), never looser than
  IBP's bounds of the same linear functions (``ibp_spec``). ``cuts`` ({node: (center, Frobenius radius)})
  replace those nodes' bounds by balls known to hold them (``_backward``; CROWN + LoFAST).

  Raises:
    ValueError: an unknown norm or intermediate mode, a negative or non-finite ε.
  """
  boxes = node_bounds(graph, params, x0, eps, norm, box, intermediate=intermediate, upto=len(graph.nodes) - 2,
                      cuts=cuts)
  return spec_bounds_from(graph, params, boxes, x0, spec, eps, norm, box, cuts=cuts)


def spec_bounds_from(graph: Graph, params, boxes: Sequence[Box], x0, spec, eps, norm: str = "2", box=None, *,
                     cuts=None) -> tuple[jnp.ndarray, jnp.ndarray]:
  """``spec_bounds``' last backward pass on given bounds of the nodes before the output (``boxes``, e.g. from
  ``node_bounds(..., upto=len(graph.nodes) − 2)``): one set of intermediate bounds can serve passes with and
  without ``cuts``."""
  last = len(graph.nodes) - 1
  boxes = list(boxes[:last]) + [_sane(_ibp_node(graph.nodes[last], boxes, params))]
  (cl, kl), (cu, ku) = _backward(graph, params, boxes, last, spec, cuts)
  lo = concretize(cl, kl, jnp.asarray(x0), eps, norm, box)
  hi = concretize(cu, ku, jnp.asarray(x0), eps, norm, box, upper=True)
  ilo, ihi = ibp_spec(spec, boxes[last])
  return jnp.fmax(lo, ilo), jnp.fmin(hi, ihi)   # a NaN from CROWN (inf·0 past an overflowed box) keeps IBP's


def ibp_spec(spec, out: Box):
  """Bounds of spec·y over the box of y (a linear function of a box: exact)."""
  flat = spec.reshape(spec.shape[0], -1)
  lo, hi = jnp.ravel(out.lower)[None, :], jnp.ravel(out.upper)[None, :]
  low = jnp.where(flat > 0, flat * lo, jnp.where(flat < 0, flat * hi, 0.0))   # a zero coefficient adds 0, also
  high = jnp.where(flat > 0, flat * hi, jnp.where(flat < 0, flat * lo, 0.0))  # against an infinite end
  return low.sum(-1), high.sum(-1)


def output_bounds(graph: Graph, params, x0, eps, norm: str = "2", box=None, *, intermediate: str = "crown"):
  """Lower and upper bounds of every output (flattened [n_out]) over the input set (jitted; the graph, norm,
  box and intermediate mode are static). The two bounds come from separate backward passes; where they meet
  (ε = 0, or an output that does not depend on the input) rounding can leave the lower one a step above the
  upper one, so each output's pair is returned in order (min, max): both are bounds up to that rounding.

  Raises:
    ValueError: an unknown norm or intermediate mode, ε not one finite number ≥ 0, or a non-finite x0 (concrete
      values).
  """
  _check(norm, intermediate, eps)
  _check_point(jnp.asarray(x0))
  return _output_bounds(graph, params, x0, eps, norm, box, intermediate=intermediate)


@functools.partial(jax.jit, static_argnames=("graph", "norm", "box", "intermediate"))
def _output_bounds(graph: Graph, params, x0, eps, norm: str = "2", box=None, *, intermediate: str = "crown"):
  shape = graph.nodes[-1].shape
  n = int(np.prod(shape))
  spec = jnp.eye(n, dtype=jnp.asarray(x0).dtype).reshape((n,) + shape)
  lower, upper = spec_bounds(graph, params, x0, spec, eps, norm, box, intermediate=intermediate)
  return jnp.minimum(lower, upper), jnp.maximum(lower, upper)


def margin_bounds(graph: Graph, params, x0, label: int, eps, norm: str = "2", box=None, *,
                  intermediate: str = "crown"):
  """Lower bounds [C − 1] of the margins f_y − f_j, j ≠ y (label y), of a network with C outputs; the input
  is certified when all are > 0 (jitted; the graph, label, norm, box and intermediate mode are static).

  Raises:
    ValueError: an unknown norm or intermediate mode, ε not one finite number ≥ 0, or a non-finite x0 (concrete
      values).
  """
  _check(norm, intermediate, eps)
  _check_point(jnp.asarray(x0))
  return _margin_bounds(graph, params, x0, label, eps, norm, box, intermediate=intermediate)


@functools.partial(jax.jit, static_argnames=("graph", "label", "norm", "box", "intermediate"))
def _margin_bounds(graph: Graph, params, x0, label: int, eps, norm: str = "2", box=None, *,
                   intermediate: str = "crown"):
  c = int(np.prod(graph.nodes[-1].shape))
  others = [j for j in range(c) if j != label]
  spec = (jnp.eye(c)[label][None, :] - jnp.eye(c)[jnp.array(others)]).astype(jnp.asarray(x0).dtype)
  return spec_bounds(graph, params, x0, spec.reshape((len(others),) + graph.nodes[-1].shape), eps, norm, box,
                     intermediate=intermediate)[0]


def _check(norm, intermediate, eps):
  if norm not in NORMS:
    raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
  if intermediate not in INTERMEDIATE:
    raise ValueError(f"intermediate must be one of {INTERMEDIATE}, got {intermediate!r}")
  if isinstance(eps, jax.core.Tracer):
    return   # a traced ε (one compiled program for every radius) is the caller's to check
  e = np.asarray(eps)
  if e.ndim != 0 or not np.issubdtype(e.dtype, np.number) or np.iscomplexobj(e):
    raise ValueError(f"eps must be one real number (the radius), got {eps!r}")
  if not (math.isfinite(float(e)) and float(e) >= 0):
    raise ValueError(f"eps must be finite and >= 0, got {eps!r}")


def _check_point(x0):
  """x0 finite (a traced x0 is the caller's to check)."""
  if not isinstance(x0, jax.core.Tracer) and not bool(jnp.all(jnp.isfinite(x0))):
    raise ValueError("x0 must be finite (no NaN or inf): the bounds of a NaN input are meaningless")


# ------------------------------------------------------------------------------------- network files


def load_network(path, input_shape: Sequence[int]) -> tuple[Graph, dict]:
  """A network file (docs/certification.md#crown) as (graph, params) for inputs of ``input_shape``.

  The file is an npz holding ``kinds`` (strings from ``KINDS``) and, for layer i, ``i.W`` and ``i.b``
  (dense: x W + b on each row) or ``i.Wq``, ``i.Wk``, ``i.Wv`` (one-head softmax self-attention over the rows
  of a [T, d] input).

  Raises:
    ValueError: a missing or unreadable file, an unknown kind, a missing or mis-shaped array.
  """
  try:
    data = np.load(path, allow_pickle=False)
  except (OSError, ValueError) as e:
    raise ValueError(f"--net {path}: not a readable npz network file ({e})") from None
  if "kinds" not in data.files:
    raise ValueError(f"--net {path}: no 'kinds' array (docs/certification.md#crown gives the format)")
  builder = Builder(tuple(input_shape))
  params, x = {}, 0
  for i, kind in enumerate(str(k) for k in data["kinds"]):
    def need(name):
      if f"{i}.{name}" not in data.files:
        raise ValueError(f"--net {path}: layer {i} ({kind}) needs the array '{i}.{name}'")
      return np.asarray(data[f"{i}.{name}"], np.float64)
    width = builder.shape(x)[-1]
    if kind == "dense":
      w, b = need("W"), need("b")
      if w.ndim != 2 or w.shape[0] != width or b.shape != (w.shape[1],):
        raise ValueError(f"--net {path}: layer {i} dense: W must be [{width}, e] and b [e], got {w.shape}, {b.shape}")
      params[f"{i}.W"], params[f"{i}.b"] = w, b
      x = builder.linear(x, str(i), w.shape[1])
    elif kind == "relu":
      x = builder.relu(x)
    elif kind == "attention":
      if len(builder.shape(x)) != 2:
        raise ValueError(f"--net {path}: layer {i} attention needs a [T, d] input, got shape {builder.shape(x)}")
      wq, wk, wv = need("Wq"), need("Wk"), need("Wv")
      if wq.shape[0] != width or wk.shape != wq.shape or wv.shape[0] != width:
        raise ValueError(f"--net {path}: layer {i} attention: Wq, Wk must be [{width}, d_k] and Wv [{width}, d_v]")
      params.update({f"{i}.Wq": wq, f"{i}.Wk": wk, f"{i}.Wv": wv, f"{i}.bq": np.zeros(wq.shape[1]),
                     f"{i}.bk": np.zeros(wk.shape[1]), f"{i}.bv": np.zeros(wv.shape[1])})
      x = builder.attention(x, str(i), wq.shape[1], wv.shape[1])
    else:
      raise ValueError(f"--net {path}: layer {i} has kind {kind!r}; expected one of {KINDS}")
  return builder.graph(), params


def _parse_box(text: str):
  try:
    lo, hi = (float(v) for v in text.split(","))
  except ValueError:
    raise ValueError(f"--box {text!r}: expected two numbers lo,hi (e.g. 0,1)") from None
  if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
    raise ValueError(f"--box {text!r}: expected finite lo <= hi")
  return lo, hi


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(allow_abbrev=False, prog="python -m attention.crown", description=__doc__.splitlines()[0])
  parser.add_argument("--net", required=True, help="network file (npz; docs/certification.md#crown)")
  parser.add_argument("--x", required=True, help="the input, an .npy array [d] or [T, d]")
  parser.add_argument("--eps", required=True, type=float, help="radius of the input ball (>= 0)")
  parser.add_argument("--norm", required=True, choices=NORMS)
  parser.add_argument("--box", default=None, help="intersect the ball with the box lo,hi (e.g. 0,1)")
  parser.add_argument("--intermediate", default="crown", choices=INTERMEDIATE,
                      help="intermediate bounds by CROWN (default) or by interval propagation alone")
  args = parser.parse_args(argv)
  try:
    if not (math.isfinite(args.eps) and args.eps >= 0):
      raise ValueError(f"--eps must be finite and >= 0, got {args.eps}")
    try:
      x = np.load(args.x, allow_pickle=False)
    except (OSError, ValueError) as e:
      raise ValueError(f"--x {args.x}: not a readable .npy array ({e})") from None
    if x.ndim not in (1, 2) or not np.all(np.isfinite(x)):
      raise ValueError(f"--x {args.x}: expected a finite array [d] or [T, d], got shape {x.shape}")
    box = None if args.box is None else _parse_box(args.box)
    if box is not None:
      gap = x - np.clip(x, *box)            # from x to the nearest point of the box
      dist = float(np.abs(gap).max() if args.norm == "inf" else np.linalg.norm(gap))
      if dist > args.eps:
        raise ValueError(f"--box {args.box}: the {args.norm}-ball of radius {args.eps} around --x does not reach "
                         f"the box (distance {dist:.4g}); the input set is empty")
    graph, params = load_network(args.net, x.shape)
    with jax.enable_x64(True):
      p64 = {k: jnp.asarray(v, jnp.float64) for k, v in params.items()}
      lower, upper = output_bounds(graph, p64, jnp.asarray(x, jnp.float64), args.eps, args.norm, box,
                                   intermediate=args.intermediate)
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(json.dumps({"lower": np.asarray(lower).tolist(), "upper": np.asarray(upper).tolist()}))
  return 0


if __name__ == "__main__":
  sys.exit(main())
