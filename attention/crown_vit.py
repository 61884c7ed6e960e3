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
  """``CertifiedViT`` as a CROWN graph: the graph, its params, and the node of each attention block's output
  (the heads' sum with the output bias, before the residual addition)."""
  graph: crown.Graph
  params: dict
  attention_outputs: tuple[int, ...]


def certified_vit_graph(config: CertifiedViTConfig, params) -> VitGraph:
  """``VitGraph`` of ``CertifiedViT(config)`` with ``params`` (its Flax params), on patches
  [num_tokens, patch_size²·channels]; its output is the logits [num_classes]."""
  c = config
  n, d = c.num_tokens, c.dim
  b = crown.Builder((n, c.patch_size ** 2 * c.channels))
  gp = {"embed.W": spectral_normalized(params["embed"]["kernel"]), "embed.b": params["embed"]["bias"],
        "pos": params["pos_embed"]}
  x = b.offset(b.linear(0, "embed", d), "pos")
  outputs = []
  for layer in range(c.depth):
    name = f"block_{layer}"
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
  return VitGraph(b.graph(), {k: jnp.asarray(v) for k, v in gp.items()}, tuple(outputs))


def margin_lower_bounds(config: CertifiedViTConfig, params, x_BxHxWxC, labels_B, eps, *, norm: str = "2",
                        intermediate: str = "crown", lofast: bool = False, key=None,
                        power_iters: int = 100) -> jnp.ndarray:
  """CROWN lower bounds [B, C − 1] of f_y − f_j (j ≠ y, in class order) over the ``norm`` ball of radius ε
  around each image, intersected with the pixel box [0, 1]; an image is certified when all are > 0.

  CROWN + LoFAST (``lofast=True``, ℓ2 only): each attention block's output is known to lie within LoFAST's
  rigorous bound B_l(r_l) of its clean value in Frobenius norm (``attention.sensitivity.layer_bound`` with
  ``key_norm='closed_form'``, at the radius r_l of LoFAST's own Lipschitz chain, ``certification.layer_radii``).
  That ball *replaces* CROWN's bounds of the block's output (a cut: the backward pass stops there and takes
  the exact extreme over the ball), so the attention's internals are never relaxed: sound because the true
  output lies in the ball for every input of the ε-ball (LoFAST's theorem), whatever CROWN would have said.

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
  radii = certification.layer_radii(consts, eps, embed_lipschitz=embedding_lipschitz(params), mode="min",
                                    key_norm="closed_form")                       # [L + 1, B]
  return _margins(vg.graph, vg.params, patches, labels, (radii[1:] - radii[:-1]).T, jnp.asarray(eps, x.dtype), norm,
                  intermediate, vg.attention_outputs)


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


@functools.partial(jax.jit, static_argnames=("graph", "norm", "intermediate", "cut_nodes"))
def _margins(graph, gp, patches, labels, deviations, eps, norm, intermediate, cut_nodes):
  """The margins of every image (one at a time); ``deviations`` [B, L]: LoFAST's bound of each attention block's
  output deviation, a cut at ``cut_nodes`` (None: CROWN alone)."""
  c = int(np.prod(graph.nodes[-1].shape))

  def one(x, y, deviations=None):
    eye = jnp.eye(c, dtype=x.dtype)
    spec = eye[y][None, :] - eye                           # row j: f_y − f_j (row y is 0 and dropped)
    balls = None
    if deviations is not None:
      values = crown.forward(graph, gp, x)
      balls = {node: (values[node], deviations[l]) for l, node in enumerate(cut_nodes)}
    lower, _ = crown.spec_bounds(graph, gp, x, spec, eps, norm, (0.0, 1.0), intermediate=intermediate, cuts=balls)
    others = jnp.arange(c - 1)
    return lower[others + (others >= y)]                    # the C − 1 margins j ≠ y, in class order
  # One image at a time (lax.map, not vmap): an image's backward passes carry coefficient tensors of
  # thousands of rows through every layer (~4 GB at the CIFAR-10 certified ViT's size); vmapping a batch
  # multiplies that memory by the batch without making the matmuls larger than the rows already do.
  if deviations is None:
    return jax.lax.map(lambda a: one(*a), (patches, labels))
  return jax.lax.map(lambda a: one(*a), (patches, labels, deviations))
