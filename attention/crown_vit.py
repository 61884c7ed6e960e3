"""The certified ViT (``attention.certified_vit.CertifiedViT``) as a CROWN graph (``attention.crown``), and its
margin lower bounds over an ℓ2 or ℓ∞ ball around an image, intersected with the pixel box [0, 1].

The graph's input is the image's patches [n, p²C] (``certified_vit.patchify``: a permutation of the pixels,
so the ball, its radius and the pixel box are the same as on the image). Every operation of the model is an
exact linear map or a relaxed one:

  tokens = patches W̃_E + b_E + pos                    linear, offset (exact)
  X ← X + Σ_h softmax(N(X) A_h N(X)ᵀ) N(X) W_V^h + b_o  N relaxed as a product of the centred input with the
                                                       scale of its norm; the logits and the products with
                                                       the values by McCormick planes; softmax through exp,
                                                       sum and reciprocal; the residual exact
  X ← X − 2 (relu(X Wᵀ + b) ⊙ t) W                     SLL: linear, ReLU (adaptive CROWN lines), linear, add
  z = N(mean_i X_i); logits = z W_head + b_head        mean pooling exact; N relaxed again; the head exact

Sources: Zhang et al., NeurIPS 2018; Shi et al., ICLR 2020; Havens et al., ICML 2024 (the model).
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attention import crown
from attention.certified_vit import CertifiedViTConfig, embedding_lipschitz, head_matrices, patchify
from attention.lipschitz_layers import sll_scaling, spectral_normalized


class VitGraph(NamedTuple):
  """``CertifiedViT`` as a CROWN graph: the graph, its params, the node of each attention block's output (the
  heads' sum with the output bias, before the residual addition) and of its input (the residual stream the
  block's normalisation reads)."""
  graph: crown.Graph
  params: dict
  attention_outputs: tuple[int, ...]
  attention_inputs: tuple[int, ...]


def certified_vit_graph(config: CertifiedViTConfig, params) -> VitGraph:
  """``VitGraph`` of ``CertifiedViT(config)`` with ``params`` (its Flax params), on patches
  [num_tokens, patch_size²·channels]; its output is the logits [num_classes]."""
  c = config
  n, d = c.num_tokens, c.dim
  b = crown.Builder((n, c.patch_size ** 2 * c.channels))
  gp = {"embed.W": spectral_normalized(params["embed"]["kernel"]), "embed.b": params["embed"]["bias"],
        "pos": params["pos_embed"]}
  x = b.offset(b.linear(0, "embed", d), "pos")
  outputs, inputs = [], []
  for layer in range(c.depth):
    name = f"block_{layer}"
    inputs.append(x)
    gp.update(crown.centring_params(f"{name}.norm", d))
    y = b.bounded_norm(x, f"{name}.norm", c.radius)
    a_h, wv_h = head_matrices(c, params[name]["attention"])
    heads = None
    for h in range(c.num_heads):
      gp.update({f"{name}.h{h}.A": a_h[h], f"{name}.h{h}.V": wv_h[h], f"{name}.h{h}.b0": jnp.zeros(d),
                 f"{name}.h{h}.b1": jnp.zeros(d)})
      out = b.bilinear_attention(y, f"{name}.h{h}", d)
      heads = out if heads is None else b.add(heads, out)
    gp[f"{name}.b_o"] = jnp.broadcast_to(params[name]["attention"]["b_o"], (n, d))
    outputs.append(b.offset(heads, f"{name}.b_o"))
    x = b.add(x, outputs[-1])
    sll = params[f"sll_{layer}"]
    t = sll_scaling(sll["w"], sll["q_log"])
    gp.update({f"sll_{layer}.in.W": sll["w"].T, f"sll_{layer}.in.b": sll["b"],
               f"sll_{layer}.out.W": -2.0 * t[:, None] * sll["w"], f"sll_{layer}.out.b": jnp.zeros(d)})
    hidden = b.relu(b.linear(x, f"sll_{layer}.in", c.sll_hidden))
    x = b.add(x, b.linear(hidden, f"sll_{layer}.out", d))
  gp.update(crown.centring_params("pool.norm", d))
  z = b.bounded_norm(b.row_mean(x), "pool.norm", c.radius)
  gp.update({"head.W": params["head"]["kernel"], "head.b": params["head"]["bias"]})
  b.linear(z, "head", c.num_classes)
  return VitGraph(b.graph(), {k: jnp.asarray(v) for k, v in gp.items()}, tuple(outputs), tuple(inputs))


def margin_lower_bounds(config: CertifiedViTConfig, params, x_BxHxWxC, labels_B, eps, *, norm: str = "2",
                        intermediate: str = "crown", lofast: bool = False, key=None,
                        power_iters: int = 100) -> jnp.ndarray:
  """CROWN lower bounds [B, C − 1] of f_y − f_j (j ≠ y, in class order) over the ``norm`` ball of radius ε
  around each image, intersected with the pixel box [0, 1]; an image is certified when all are > 0.

  CROWN + LoFAST (``lofast=True``, ℓ2 only) is *LoFAST inside CROWN*, never looser than CROWN alone:
    1. CROWN's bounds of every node (``crown.node_bounds``) and its margin bounds m_CROWN, as without LoFAST.
    2. The deviation of block l's input X_l is bounded by r_l = min(LoFAST's chain r_{l−1} + B_{l−1}, the
       Frobenius radius of CROWN's box of X_l around its clean value) (r_0's chain term: ‖W̃_E‖₂ε), and the
       block's output lies within B_l(r_l) of its clean value in Frobenius norm (LoFAST's rigorous bound,
       ``attention.sensitivity.layer_bound`` with ``key_norm='closed_form'``; docs/certification.md, "CROWN +
       LoFAST: how they compose").
    3. Every node's bounds again, each intersected with CROWN's from step 1 and the block outputs' with their
       balls; on those, two final passes: m_cut stops at the block outputs and takes the exact extreme over
       the balls (the attention is never relaxed), m_through relaxes every node on the tighter bounds.
    4. The bound is max(m_CROWN, m_cut, m_through) per margin: each is sound, so their maximum is, and it is
       ≥ m_CROWN by construction (tighter boxes alone would not guarantee it: CROWN's adaptive ReLU lines
       change with the boxes). Its cost is CROWN's plus a second set of intermediate bounds.

  Args:
    x_BxHxWxC: images in [0, 1]; labels_B: int labels [B]; eps: the radius on the [0, 1] pixel scale (≥ 0).
    key, power_iters: LoFAST's layer constants (``certification.layer_constants``); key is required with lofast.

  ε is traced (one compilation serves every radius); the graph, norm and intermediate mode are static.

  Raises:
    ValueError: ε not a finite number ≥ 0; images not floating [B, H, W, C] of the config's size or not finite
      in [0, 1]; labels not integers [B] in [0, C); lofast with the ℓ∞ norm or without a key; and
      as ``attention.crown.spec_bounds``.
  """
  x, labels = _check_inputs(config, x_BxHxWxC, labels_B, eps, norm)
  vg = certified_vit_graph(config, params)
  patches = patchify(x, config.patch_size)
  if not lofast:
    return _margins(vg.graph, vg.params, patches, labels, None, jnp.asarray(eps, x.dtype), norm, intermediate, ())
  if norm != "2" or key is None:
    raise ValueError("lofast=True needs norm='2' (LoFAST bounds ℓ2 perturbations) and a PRNG key")
  from attention import certification
  _, consts = certification.layer_constants(config, params, x, key=key, power_iters=power_iters)
  lofast_in = (consts, jnp.asarray(embedding_lipschitz(params), x.dtype))
  return _margins(vg.graph, vg.params, patches, labels, lofast_in, jnp.asarray(eps, x.dtype), norm, intermediate,
                  (vg.attention_inputs, vg.attention_outputs))


def _check_inputs(config: CertifiedViTConfig, x_BxHxWxC, labels_B, eps, norm: str):
  """(images, labels) as arrays after checking them; ValueError naming the argument otherwise."""
  if isinstance(eps, (bool, np.bool_)) or not isinstance(eps, (int, float, np.floating, np.integer)) or not (
      np.isfinite(eps) and eps >= 0):
    raise ValueError(f"eps must be a finite number >= 0 (the ℓ{norm} radius on the [0, 1] pixel scale), got {eps!r}")
  x = jnp.asarray(x_BxHxWxC)
  want = (config.image_size, config.image_size, config.channels)
  if x.ndim != 4 or tuple(x.shape[1:]) != want or not jnp.issubdtype(x.dtype, jnp.floating):
    raise ValueError(f"x_BxHxWxC must be floating images [batch, {want[0]}, {want[1]}, {want[2]}], got shape "
                     f"{tuple(x.shape)} and dtype {x.dtype}")
  if not bool(jnp.all(jnp.isfinite(x))) or float(jnp.min(x)) < 0 or float(jnp.max(x)) > 1:
    raise ValueError("x_BxHxWxC must hold finite pixels in [0, 1] (the pixel box the bounds intersect)")
  labels = jnp.asarray(labels_B)
  if labels.shape != (x.shape[0],) or not jnp.issubdtype(labels.dtype, jnp.integer) or (
      labels.size and (int(labels.min()) < 0 or int(labels.max()) >= config.num_classes)):
    raise ValueError(f"labels_B must be integer labels [batch] = [{x.shape[0]}] in [0, {config.num_classes}), "
                     f"got shape {tuple(labels.shape)}, dtype {labels.dtype}")
  return x, labels


@functools.partial(jax.jit, static_argnames=("graph", "norm", "intermediate", "blocks"))
def _margins(graph, gp, patches, labels, lofast, eps, norm, intermediate, blocks):
  """The margins of every image (one at a time); ``lofast``: None (CROWN alone) or (LoFAST's layer constants
  with fields [B, L, …], ‖W̃_E‖₂) with ``blocks`` = (the attention blocks' input nodes, their output nodes)."""
  c = int(np.prod(graph.nodes[-1].shape))
  last = len(graph.nodes) - 1
  box = (0.0, 1.0)

  def one(x, y, consts=None):
    eye = jnp.eye(c, dtype=x.dtype)
    spec = eye[y][None, :] - eye                           # row j: f_y − f_j (row y is 0 and dropped)
    boxes = crown.node_bounds(graph, gp, x, eps, norm, box, intermediate=intermediate, upto=last - 1)
    lower, _ = crown.spec_bounds_from(graph, gp, boxes, x, spec, eps, norm, box)
    if consts is not None:
      lower = jnp.maximum(lower, _lofast_inside_crown(graph, gp, x, spec, eps, norm, intermediate, boxes, consts,
                                                      lofast[1], blocks))
    others = jnp.arange(c - 1)
    return lower[others + (others >= y)]                    # the C − 1 margins j ≠ y, in class order
  # One image at a time (lax.map, not vmap): an image's backward passes carry coefficient tensors of
  # thousands of rows through every layer (~4 GB at the CIFAR-10 certified ViT's size); vmapping a batch
  # multiplies that memory by the batch without making the matmuls larger than the rows already do.
  if lofast is None:
    return jax.lax.map(lambda a: one(*a), (patches, labels))
  return jax.lax.map(lambda a: one(*a), (patches, labels, lofast[0]))


def _lofast_inside_crown(graph, gp, x, spec, eps, norm, intermediate, boxes, consts, embed_lipschitz, blocks):
  """max(m_cut, m_through) of ``margin_lower_bounds``' steps 2–3 for one image, given CROWN's node bounds
  ``boxes`` and the image's LoFAST layer constants (fields [L, …])."""
  from attention import sensitivity
  values = crown.forward(graph, gp, x)
  radius = embed_lipschitz * eps
  balls = {}
  for layer, (node_in, node_out) in enumerate(zip(*blocks)):
    lo, hi = boxes[node_in]
    v = values[node_in]
    radius = jnp.minimum(radius, jnp.sqrt(jnp.sum(jnp.maximum(hi - v, v - lo) ** 2)))
    lc = jax.tree_util.tree_map(lambda f: f[layer], consts)
    deviation = sensitivity.layer_bound(lc, radius, mode="min", key_norm="closed_form")
    balls[node_out] = (values[node_out], deviation)
    radius = radius + deviation        # the residual adds the block's deviation; the SLL block is 1-Lipschitz
  last = len(graph.nodes) - 1
  tighter = crown.node_bounds(graph, gp, x, eps, norm, (0.0, 1.0), intermediate=intermediate, upto=last - 1,
                              cuts=balls, within=boxes)
  cut, _ = crown.spec_bounds_from(graph, gp, tighter, x, spec, eps, norm, (0.0, 1.0), cuts=balls)
  through, _ = crown.spec_bounds_from(graph, gp, tighter, x, spec, eps, norm, (0.0, 1.0))
  return jnp.maximum(cut, through)
