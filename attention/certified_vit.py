"""A small ViT built from Lipschitz-controlled layers, for local-sensitivity certification (LoFAST).

  images [B, H, W, C] in [0, 1]
    -> patches [B, n, p²C]                                  (a permutation of pixels: ‖·‖ preserved)
    -> tokens = patches W̃_E + pos                           (‖W̃_E‖₂ ≤ 1, spectral normalisation)
    -> depth × [ X ← X + MHA(N(X));  X ← SLL(X) ]           (N bounded normalisation, SLL 1-Lipschitz)
    -> z = N(mean_i X_i)                                    (mean pooling: ‖Δz‖ ≤ ‖ΔX‖_F / √n)
    -> logits = z W_head + b                                 (unconstrained; per-pair rows used exactly)

The attention is the one layer without a global Lipschitz constant: its local sensitivity at the input
being certified is bounded by ``attention.sensitivity``. It has no query/key/value biases, so each head
is exactly F_h(X) = rowsoftmax(X A_h Xᵀ) X W_V^h (``head_matrices``; the output bias cancels in
differences). Its weights can be norm-bounded, ‖A_h‖₂ ≤ ``attention_bound`` and ‖W_V^h‖₂ ≤
``value_bound``/H, by spectral normalisation of the factors. Havens et al. (ICML 2024) report that
constraining attention weight norms hurts clean accuracy more than it helps
(docs/theory.md#lipschitz-constrained-vit); on the small data used here an unconstrained model is too sensitive for any of the bounds to certify anything
(experiments/certify/run.py sweeps the bound).

The inputs of the attention layers are sown as ``intermediates`` (``forward_with_intermediates``).

Example:
  >>> config = CertifiedViTConfig(num_classes=10, image_size=32, channels=3)
  >>> model = CertifiedViT(config)
  >>> params = model.init(jax.random.key(0), jnp.zeros((1, 32, 32, 3)))["params"]
  >>> logits = model.apply({"params": params}, x_BxHxWxC)            # [B, 10]
"""
from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from attention.lipschitz_layers import SLL, SpectralDense, bounded_norm, spectral_normalized


@dataclasses.dataclass(frozen=True)
class CertifiedViTConfig:
  """Architecture of ``CertifiedViT``.

  Attributes:
    num_classes: output classes ≥ 2.
    image_size: input height = width in pixels (32 CIFAR-10, 28 MNIST).
    channels: input channels (3 CIFAR-10, 1 MNIST).
    patch_size: square patch side; must divide image_size.
    dim: token width d, divisible by num_heads.
    depth: attention blocks ≥ 1.
    num_heads: heads per attention layer ≥ 1 (head width d_h = dim / num_heads).
    sll_hidden: hidden units of each SLL layer ≥ 1.
    norm_radius: output radius r of the bounded normalisation; None means √dim.
    attention_bound: α > 0 bounds every head's ‖A_h‖₂ ≤ α (A_h = α·Ŵ_qŴ_kᵀ, spectrally normalised
      factors), so the attention logits satisfy |x_i A_h x_jᵀ| ≤ α‖x_i‖‖x_j‖; None: unconstrained.
    value_bound: v > 0 bounds every head's ‖W_V^h‖₂ ≤ v/H (so Σ_h ‖W_V^h‖₂ ≤ v); None: unconstrained.
    noise_std: std of Gaussian pixel noise added in training only (≥ 0; a cheap robustness prior).
  """
  num_classes: int = 10
  image_size: int = 32
  channels: int = 3
  patch_size: int = 8
  dim: int = 64
  depth: int = 3
  num_heads: int = 2
  sll_hidden: int = 128
  norm_radius: Optional[float] = None
  attention_bound: Optional[float] = 0.25
  value_bound: Optional[float] = 1.0
  noise_std: float = 0.0

  @property
  def num_tokens(self) -> int:
    return (self.image_size // self.patch_size) ** 2

  @property
  def head_dim(self) -> int:
    return self.dim // self.num_heads

  @property
  def radius(self) -> float:
    return math.sqrt(self.dim) if self.norm_radius is None else float(self.norm_radius)

  def validate(self) -> None:
    """Raises ValueError naming the field and its allowed range."""
    ints = dict(num_classes=2, image_size=1, channels=1, patch_size=1, dim=1, depth=1, num_heads=1,
                sll_hidden=1)
    for name, low in ints.items():
      value = getattr(self, name)
      if not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer ≥ {low}, got {value!r}")
    if self.image_size % self.patch_size:
      raise ValueError(f"patch_size {self.patch_size} must divide image_size {self.image_size}")
    if self.dim % self.num_heads:
      raise ValueError(f"dim {self.dim} must be divisible by num_heads {self.num_heads}")
    if self.norm_radius is not None and not self.norm_radius > 0:
      raise ValueError(f"norm_radius must be > 0 or None, got {self.norm_radius!r}")
    for name in ("attention_bound", "value_bound"):
      value = getattr(self, name)
      if value is not None and not value > 0:
        raise ValueError(f"{name} must be > 0 or None, got {value!r}")
    if not self.noise_std >= 0:
      raise ValueError(f"noise_std must be ≥ 0, got {self.noise_std!r}")


def patchify(x_BxHxWxC, patch_size: int) -> jnp.ndarray:
  """Non-overlapping p×p patches, row-major: [B, H, W, C] -> [B, (H/p)(W/p), p·p·C] (a permutation)."""
  b, h, w, c = x_BxHxWxC.shape
  p = patch_size
  x = x_BxHxWxC.reshape(b, h // p, p, w // p, p, c).transpose(0, 1, 3, 2, 4, 5)
  return x.reshape(b, (h // p) * (w // p), p * p * c)


def _normalized(w_HxAxB, bound) -> jnp.ndarray:
  """Per head W / max(1, σ_max(W)) (spectral norm ≤ 1), or W itself when bound is None."""
  if bound is None:
    return w_HxAxB
  return jax.vmap(spectral_normalized)(w_HxAxB)


def head_matrices(config: CertifiedViTConfig, attention_params) -> tuple[jnp.ndarray, jnp.ndarray]:
  """(A [H, d, d], W_V [H, d, d]) of every head of a ``MultiHeadAttention``'s params.

  Unconstrained: A_h = W_q^h W_k^hᵀ / √d_h and W_V^h = W_v^h W_o^h. With ``attention_bound`` α:
  A_h = α·Ŵ_q^h Ŵ_k^hᵀ, with ``value_bound`` v: W_V^h = (v/H)·Ŵ_v^h Ŵ_o^h, Ŵ = W/max(1, σ_max(W)).
  The layer is Σ_h rowsoftmax(X A_h Xᵀ) X W_V^h + b.
  """
  c = config
  w_q, w_k = (_normalized(attention_params[k], c.attention_bound) for k in ("w_q", "w_k"))
  w_v, w_o = (_normalized(attention_params[k], c.value_bound) for k in ("w_v", "w_o"))
  a_scale = 1.0 / jnp.sqrt(float(c.head_dim)) if c.attention_bound is None else c.attention_bound
  v_scale = 1.0 if c.value_bound is None else c.value_bound / c.num_heads
  a = a_scale * jnp.einsum("hdk,hek->hde", w_q, w_k)
  w_v = v_scale * jnp.einsum("hdk,hke->hde", w_v, w_o)
  return a, w_v


class MultiHeadAttention(nn.Module):
  """Bias-free multi-head dot-product self-attention on tokens [B, n, d] (output bias only).

  Params: w_q, w_k, w_v [H, d, d_h]; w_o [H, d_h, d]; b_o [d]; heads as in ``head_matrices``.
  """
  config: CertifiedViTConfig

  @nn.compact
  def __call__(self, x_BxNxD):
    c = self.config
    d = x_BxNxD.shape[-1]
    init = nn.initializers.lecun_normal(in_axis=1, out_axis=2, batch_axis=(0,))
    params = {name: self.param(name, init, (c.num_heads,) + shape) for name, shape in
              (("w_q", (d, c.head_dim)), ("w_k", (d, c.head_dim)), ("w_v", (d, c.head_dim)),
               ("w_o", (c.head_dim, d)))}
    b_o = self.param("b_o", nn.initializers.zeros, (d,))
    a_HxDxD, wv_HxDxD = head_matrices(c, params)
    logits = jnp.einsum("bnd,hde,bme->bhnm", x_BxNxD, a_HxDxD, x_BxNxD)
    probs = jax.nn.softmax(logits, axis=-1)
    return jnp.einsum("bhnm,bmd,hde->bne", probs, x_BxNxD, wv_HxDxD) + b_o[None, None, :]


class AttentionBlock(nn.Module):
  """X + MHA(N(X)); sows N(X) as ``intermediates/attention_input``."""
  config: CertifiedViTConfig

  @nn.compact
  def __call__(self, x_BxNxD):
    c = self.config
    y = bounded_norm(x_BxNxD, c.radius)
    self.sow("intermediates", "attention_input", y)
    return x_BxNxD + MultiHeadAttention(c, name="attention")(y)


class CertifiedViT(nn.Module):
  """Lipschitz-controlled ViT classifier: images [B, H, W, C] in [0, 1] -> logits [B, num_classes]."""
  config: CertifiedViTConfig

  @nn.compact
  def __call__(self, x_BxHxWxC, train: bool = False):
    c = self.config
    c.validate()
    if x_BxHxWxC.ndim != 4 or x_BxHxWxC.shape[1:] != (c.image_size, c.image_size, c.channels):
      raise ValueError(f"CertifiedViT expects images [batch, {c.image_size}, {c.image_size}, {c.channels}], "
                       f"got shape {tuple(x_BxHxWxC.shape)}")
    if train and c.noise_std > 0:
      noise_key = self.make_rng("dropout")
      x_BxHxWxC = x_BxHxWxC + c.noise_std * jax.random.normal(noise_key, x_BxHxWxC.shape, x_BxHxWxC.dtype)
    tokens = SpectralDense(c.dim, name="embed")(patchify(x_BxHxWxC, c.patch_size))
    tokens = tokens + self.param("pos_embed", nn.initializers.normal(0.02), (c.num_tokens, c.dim))[None]
    for layer in range(c.depth):
      tokens = AttentionBlock(c, name=f"block_{layer}")(tokens)
      tokens = SLL(c.sll_hidden, name=f"sll_{layer}")(tokens)
    pooled = bounded_norm(jnp.mean(tokens, axis=1), c.radius)
    self.sow("intermediates", "features", pooled)
    return nn.Dense(c.num_classes, name="head")(pooled)


class Intermediates(NamedTuple):
  """Clean forward pass quantities needed by the certificate.

  Attributes:
    logits: [B, num_classes].
    attention_inputs: [depth, B, n, d], N(X) at the input of each attention layer.
    features: [B, d], the pooled, normalised feature z that the linear head reads.
  """
  logits: jnp.ndarray
  attention_inputs: jnp.ndarray
  features: jnp.ndarray


def forward_with_intermediates(config: CertifiedViTConfig, params, x_BxHxWxC) -> Intermediates:
  """Logits and the attention layers' inputs of ``CertifiedViT(config)`` (eval mode)."""
  logits, state = CertifiedViT(config).apply({"params": params}, x_BxHxWxC, mutable=["intermediates"])
  inputs = [state["intermediates"][f"block_{l}"]["attention_input"][0] for l in range(config.depth)]
  return Intermediates(logits, jnp.stack(inputs), state["intermediates"]["features"][0])


def embedding_lipschitz(params) -> jnp.ndarray:
  """‖W̃_E‖₂ ≤ 1 of the patch embedding (the Lipschitz constant from pixels to tokens, Frobenius)."""
  return jnp.linalg.svd(spectral_normalized(params["embed"]["kernel"]), compute_uv=False)[0]
