"""Small Vision Transformer and DiffViT (Flax Linen): patch embedding, class token or mean pool,
pre-norm encoder blocks with an MLP, and standard or differential self-attention.

A matched pair (``matched_configs``) shares everything but the attention: the ViT has ``num_heads`` = 2H
standard heads of width d = dim / (2H), the DiffViT H differential heads with two maps of width d and a
value of width 2d, so the projections have identical shapes and the parameter counts differ only by λ's
four vectors and the RMSNorm gain per layer (6d parameters; arXiv 2510.00517 §5;
docs/theory.md#matched-vit-and-diffvit).

Example:
  >>> vit_cfg, diff_cfg = matched_configs(ViTConfig(depth=2, dim=64, num_heads=4, lambda_init=0.8))
  >>> model = VisionTransformer(diff_cfg)
  >>> params = model.init(jax.random.key(0), jnp.zeros((1, 32, 32, 3)))["params"]
  >>> logits = model.apply({"params": params}, x_BxHxWxC)   # [B, 10]
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from attention.differential import (
    AttentionMaps,
    DifferentialAttention,
    MultiHeadSelfAttention,
    check_lambda_init,
    lambda_init_schedule,
)

ATTENTION_KINDS = ("standard", "differential")
POOLS = ("cls", "mean")


def _is_int(v) -> bool:
  return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


@dataclasses.dataclass(frozen=True)
class ViTConfig:
  """Architecture of a (Diff)ViT.

  Attributes:
    num_classes: output classes ≥ 2.
    image_size: input height = width in pixels (32 for CIFAR-10, 28 for MNIST).
    patch_size: square patch side in pixels; must divide image_size.
    dim: token width; must be divisible by num_heads.
    depth: encoder blocks ≥ 1.
    num_heads: standard heads (2H). A differential model uses num_heads / 2 differential heads (so
      num_heads must be even there); head width d = dim / num_heads in both.
    mlp_ratio: MLP hidden width / dim, > 0.
    pool: "cls" (class token) or "mean" (mean over patch tokens).
    attention: "standard" or "differential".
    lambda_init: differential only: a fixed λ_init ∈ [0, 1) in every layer, or None for the depth
      schedule λ_init(l) = 0.8 − 0.6·exp(−0.3·l).
    learnable_gain: differential only: learnable RMSNorm gain (initialised to 1).
    dropout_rate: dropout after attention and MLP, in [0, 1).
    use_bias: biases in the attention projections.
  """
  num_classes: int = 10
  image_size: int = 32
  patch_size: int = 4
  dim: int = 64
  depth: int = 2
  num_heads: int = 4
  mlp_ratio: float = 2.0
  pool: str = "cls"
  attention: str = "standard"
  lambda_init: Optional[float] = None
  learnable_gain: bool = True
  dropout_rate: float = 0.0
  use_bias: bool = False

  def validate(self) -> None:
    """Raises ValueError naming the field and the allowed values."""
    for name in ("num_classes", "image_size", "patch_size", "dim", "depth", "num_heads"):
      value = getattr(self, name)
      if not _is_int(value) or value < 1:
        raise ValueError(f"ViTConfig.{name} must be an integer >= 1, got {value!r}")
    if self.num_classes < 2:
      raise ValueError(f"ViTConfig.num_classes must be >= 2, got {self.num_classes}")
    if self.image_size % self.patch_size:
      raise ValueError(f"ViTConfig.patch_size ({self.patch_size}) must divide image_size ({self.image_size})")
    if self.dim % self.num_heads:
      raise ValueError(f"ViTConfig.dim ({self.dim}) must be divisible by num_heads ({self.num_heads})")
    if self.attention not in ATTENTION_KINDS:
      raise ValueError(f"ViTConfig.attention must be one of {ATTENTION_KINDS}, got {self.attention!r}")
    if self.attention == "differential" and self.num_heads % 2:
      raise ValueError(f"ViTConfig.num_heads must be even for differential attention (H = num_heads/2 "
                       f"differential heads), got {self.num_heads}")
    if self.pool not in POOLS:
      raise ValueError(f"ViTConfig.pool must be one of {POOLS}, got {self.pool!r}")
    if not self.mlp_ratio > 0:
      raise ValueError(f"ViTConfig.mlp_ratio must be > 0, got {self.mlp_ratio}")
    if not 0.0 <= self.dropout_rate < 1.0:
      raise ValueError(f"ViTConfig.dropout_rate must lie in [0, 1), got {self.dropout_rate}")
    if self.lambda_init is not None:
      check_lambda_init(self.lambda_init, "ViTConfig.lambda_init")

  @property
  def head_dim(self) -> int:
    return self.dim // self.num_heads

  @property
  def num_tokens(self) -> int:
    return (self.image_size // self.patch_size) ** 2 + (1 if self.pool == "cls" else 0)

  def lambda_init_at(self, layer_index: int) -> float:
    """λ_init of 0-based layer ``layer_index``: the fixed value, or the depth schedule."""
    return lambda_init_schedule(layer_index) if self.lambda_init is None else float(self.lambda_init)


def matched_configs(config: ViTConfig) -> tuple[ViTConfig, ViTConfig]:
  """The matched (ViT, DiffViT) pair: same everything, 2H standard vs H differential heads."""
  vit = dataclasses.replace(config, attention="standard")
  diff = dataclasses.replace(config, attention="differential")
  vit.validate()
  diff.validate()
  return vit, diff


class EncoderBlock(nn.Module):
  """Pre-norm block: x + Attn(LN(x)), then x + MLP(LN(x)) with a GELU MLP."""
  config: ViTConfig
  layer_index: int

  @nn.compact
  def __call__(self, x_BxNxD, train: bool = False, mask_BxN=None):
    """x_BxNxD tokens; mask_BxN: optional bool [batch, n], False for padding tokens no token attends to."""
    c = self.config
    if c.attention == "standard":
      attn = MultiHeadSelfAttention(c.num_heads, c.head_dim, use_bias=c.use_bias, name="attention")
    else:
      attn = DifferentialAttention(c.num_heads // 2, c.head_dim, c.lambda_init_at(self.layer_index),
                                   use_bias=c.use_bias, learnable_gain=c.learnable_gain, name="attention")
    drop = nn.Dropout(c.dropout_rate, deterministic=not train)
    x_BxNxD = x_BxNxD + drop(attn(nn.LayerNorm(name="norm_attention")(x_BxNxD), mask_BxN=mask_BxN))
    hidden = max(1, int(round(c.mlp_ratio * c.dim)))
    y = nn.LayerNorm(name="norm_mlp")(x_BxNxD)
    y = nn.Dense(c.dim, name="mlp_out")(nn.gelu(nn.Dense(hidden, name="mlp_in")(y)))
    return x_BxNxD + drop(y)


class PatchEmbedding(nn.Module):
  """Non-overlapping p×p patches, each mapped linearly to ``features``: a strided p×p convolution with the
  parameters of ``nn.Conv`` (kernel [p, p, C, features], bias [features]), computed as one matrix product."""
  features: int
  patch_size: int
  param_dtype: Any = jnp.float32  # nn.Conv's default, also under jax.enable_x64

  @nn.compact
  def __call__(self, x_BxHxWxC):
    """x_BxHxWxC images [B, H, W, C] (p divides H and W) -> patch tokens [B, H/p, W/p, features].

    Raises ValueError on another rank, a side p does not divide, or a patch_size / features that is not an
    integer >= 1."""
    for name in ("patch_size", "features"):
      if not _is_int(getattr(self, name)) or getattr(self, name) < 1:
        raise ValueError(f"PatchEmbedding.{name} must be an integer >= 1, got {getattr(self, name)!r}")
    p = self.patch_size
    if x_BxHxWxC.ndim != 4 or x_BxHxWxC.shape[1] % p or x_BxHxWxC.shape[2] % p:
      raise ValueError(f"PatchEmbedding expects images [batch, H, W, channels] with H and W divisible by "
                       f"patch_size {p}, got shape {tuple(x_BxHxWxC.shape)}")
    b, h, w, c = x_BxHxWxC.shape
    kernel = self.param("kernel", nn.initializers.lecun_normal(), (p, p, c, self.features), self.param_dtype)
    bias = self.param("bias", nn.initializers.zeros, (self.features,), self.param_dtype)
    x_BxHxWxC, kernel, bias = nn.dtypes.promote_dtype(x_BxHxWxC, kernel, bias)  # as nn.Conv does
    patches = x_BxHxWxC.reshape(b, h // p, p, w // p, p, c).transpose(0, 1, 3, 2, 4, 5)
    patches = patches.reshape(b, h // p, w // p, p * p * c)
    return patches @ kernel.reshape(p * p * c, self.features) + bias.reshape(1, 1, 1, -1)


class VisionTransformer(nn.Module):
  """ViT / DiffViT classifier: images [B, H, W, C] in [0, 1] -> logits [B, num_classes]."""
  config: ViTConfig

  def setup(self):
    c = self.config
    c.validate()
    self.patch_embed = PatchEmbedding(c.dim, c.patch_size, name="patch_embed")
    if c.pool == "cls":
      self.cls_token = self.param("cls_token", nn.initializers.zeros, (1, 1, c.dim))
    self.pos_embed = self.param("pos_embed", nn.initializers.normal(0.02), (1, c.num_tokens, c.dim))
    self.blocks = [EncoderBlock(c, l, name=f"block_{l}") for l in range(c.depth)]
    self.final_norm = nn.LayerNorm(name="final_norm")
    self.head = nn.Dense(c.num_classes, name="head")

  def _embed(self, x_BxHxWxC):
    c = self.config
    if x_BxHxWxC.ndim != 4 or x_BxHxWxC.shape[1:3] != (c.image_size, c.image_size):
      raise ValueError(f"VisionTransformer expects images [batch, {c.image_size}, {c.image_size}, channels], "
                       f"got shape {tuple(x_BxHxWxC.shape)}")
    patches = self.patch_embed(x_BxHxWxC)
    b = patches.shape[0]
    tokens = patches.reshape(b, -1, c.dim)
    if c.pool == "cls":
      tokens = jnp.concatenate([jnp.broadcast_to(self.cls_token, (b, 1, c.dim)), tokens], axis=1)
    return tokens + jnp.broadcast_to(self.pos_embed, tokens.shape)

  def hidden_states(self, x_BxHxWxC, train: bool = False) -> tuple[jnp.ndarray, ...]:
    """Token states (embeddings, after block 1, …, after block L), each [B, num_tokens, dim]."""
    states = [self._embed(x_BxHxWxC)]
    for block in self.blocks:
      states.append(block(states[-1], train))
    return tuple(states)

  def __call__(self, x_BxHxWxC, train: bool = False):
    tokens = self.hidden_states(x_BxHxWxC, train)[-1]
    tokens = self.final_norm(tokens)
    pooled = tokens[:, 0] if self.config.pool == "cls" else jnp.mean(tokens, axis=1)
    return self.head(pooled)


def parameter_count(params) -> int:
  """Number of scalar parameters in a params pytree."""
  return int(sum(np.size(leaf) for leaf in jax.tree_util.tree_leaves(params)))


def init_params(config: ViTConfig, *, key, channels: int = 3):
  """Parameters of ``VisionTransformer(config)`` for images with ``channels`` channels."""
  x = jnp.zeros((1, config.image_size, config.image_size, channels), jnp.float32)
  return VisionTransformer(config).init(key, x)["params"]


def attention_maps(config: ViTConfig, params, x_BxHxWxC) -> tuple:
  """The attention maps of every layer, from the ``intermediates`` the layers sow.

  Returns:
    A tuple of ``AttentionMaps`` (one per layer, in order). Standard: a1 [B, num_heads, N, N].
    Differential: a1, a2 [B, num_heads/2, N, N] and the layer's λ (float32 scalar) and λ_init.
  """
  _, state = VisionTransformer(config).apply({"params": params}, x_BxHxWxC, mutable=["intermediates"])
  inter = state["intermediates"]
  out = []
  for layer in range(config.depth):
    found = inter[f"block_{layer}"]["attention"]
    maps = found["attention_maps"][0]
    if config.attention == "standard":
      out.append(AttentionMaps(maps))
    else:
      out.append(AttentionMaps(maps[:, :, 0], maps[:, :, 1], found["lambda"][0], config.lambda_init_at(layer)))
  return tuple(out)
