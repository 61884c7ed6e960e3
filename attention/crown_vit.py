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

import jax
import jax.numpy as jnp
import numpy as np

from attention import crown
from attention.certified_vit import CertifiedViTConfig, head_matrices, patchify
from attention.lipschitz_layers import sll_scaling, spectral_normalized


def certified_vit_graph(config: CertifiedViTConfig, params) -> tuple[crown.Graph, dict]:
  """(graph, graph params) of ``CertifiedViT(config)`` with ``params`` (its Flax params), on patches
  [num_tokens, patch_size²·channels]; its output is the logits [num_classes]."""
  c = config
  n, d = c.num_tokens, c.dim
  b = crown.Builder((n, c.patch_size ** 2 * c.channels))
  gp = {"embed.W": spectral_normalized(params["embed"]["kernel"]), "embed.b": params["embed"]["bias"],
        "pos": params["pos_embed"]}
  x = b.offset(b.linear(0, "embed", d), "pos")
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
    x = b.add(x, b.offset(heads, f"{name}.b_o"))
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
  return b.graph(), {k: jnp.asarray(v) for k, v in gp.items()}


def margin_lower_bounds(config: CertifiedViTConfig, params, x_BxHxWxC, labels_B, eps, *, norm: str = "2",
                        intermediate: str = "crown") -> jnp.ndarray:
  """CROWN lower bounds [B, C − 1] of f_y − f_j (j ≠ y, in class order) over the ``norm`` ball of radius ε
  around each image, intersected with the pixel box [0, 1]; an image is certified when all are > 0.

  Args:
    x_BxHxWxC: images in [0, 1]; labels_B: int labels [B]; eps: the radius on the [0, 1] pixel scale (≥ 0).

  Raises:
    ValueError: as ``attention.crown.spec_bounds``.
  """
  graph, gp = certified_vit_graph(config, params)
  patches = patchify(jnp.asarray(x_BxHxWxC), config.patch_size)
  return _margins(graph, gp, patches, jnp.asarray(labels_B), float(eps), norm, intermediate)


@functools.partial(jax.jit, static_argnames=("graph", "eps", "norm", "intermediate"))
def _margins(graph, gp, patches, labels, eps, norm, intermediate):
  c = int(np.prod(graph.nodes[-1].shape))

  def one(x, y):
    eye = jnp.eye(c, dtype=x.dtype)
    spec = eye[y][None, :] - eye                           # row j: f_y − f_j (row y is 0 and dropped)
    lower, _ = crown.spec_bounds(graph, gp, x, spec, eps, norm, (0.0, 1.0), intermediate=intermediate)
    others = jnp.arange(c - 1)
    return lower[others + (others >= y)]                    # the C − 1 margins j ≠ y, in class order
  return jax.vmap(one)(patches, labels)
