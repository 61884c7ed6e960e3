"""A tiny ViT laid out as big_vision builds its encoder with ``scan=True`` (written here, not copied): patch
embedding by ``nn.Conv``, a class token, the encoder blocks (LayerNorm, ``nn.MultiHeadDotProductAttention``,
LayerNorm, MLP) under ``nn.scan(nn.remat(Block, prevent_cse=False, static_argnums=(2,), policy=...),
variable_axes={"params": 0}, split_rngs={"params": True, "dropout": True}, in_axes=nn.broadcast,
length=depth)(name="encoderblock")(x, deterministic)``, a final LayerNorm and a linear head. The stacked
parameters have a leading axis of size depth. Used by tests/test_capture.py and tests/test_report.py (also
as a ``--model tests/scanned_vit.py:spec(depth=3)`` file)."""
from typing import Any, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from attention.model_spec import ModelSpec

ATTENTION_PATH = "Transformer/encoderblock/MultiHeadDotProductAttention_0"


class Mlp(nn.Module):
  hidden: int

  @nn.compact
  def __call__(self, x, deterministic: bool = True):
    y = nn.gelu(nn.Dense(self.hidden)(x))
    y = nn.Dropout(rate=0.0)(y, deterministic)
    return nn.Dense(x.shape[-1])(y)


class Block(nn.Module):
  """Pre-norm encoder block: x + MHA(LN(x)), then + MLP(LN(·)); returns (x, None) as a scan body."""
  num_heads: int
  mlp_dim: int

  @nn.compact
  def __call__(self, x, deterministic: bool = True):
    y = nn.LayerNorm()(x)
    y = nn.MultiHeadDotProductAttention(num_heads=self.num_heads, deterministic=deterministic)(y, y)
    x = x + nn.Dropout(rate=0.0)(y, deterministic)
    x = x + Mlp(self.mlp_dim)(nn.LayerNorm()(x), deterministic)
    return x, None


class Encoder(nn.Module):
  depth: int
  num_heads: int
  mlp_dim: int
  remat: bool = True
  policy: Optional[str] = None   # a name in jax.checkpoint_policies, given as nn.remat's policy=

  @nn.compact
  def __call__(self, x, train: bool = False):
    block = Block
    if self.remat:
      policy = None if self.policy is None else getattr(jax.checkpoint_policies, self.policy)
      block = nn.remat(Block, prevent_cse=False, static_argnums=(2,), policy=policy)
    x, _ = nn.scan(block, variable_axes={"params": 0}, split_rngs={"params": True, "dropout": True},
                   in_axes=nn.broadcast, length=self.depth)(
                       name="encoderblock", num_heads=self.num_heads, mlp_dim=self.mlp_dim)(x, not train)
    return nn.LayerNorm(name="encoder_norm")(x)


class ScannedViT(nn.Module):
  num_classes: int = 3
  patch: int = 4
  width: int = 8
  depth: int = 3
  num_heads: int = 2
  remat: bool = True
  policy: Optional[str] = None
  pool: str = "tok"   # "tok": class token, "gap": mean over patches

  @nn.compact
  def __call__(self, images, train: bool = False):
    x = nn.Conv(self.width, (self.patch, self.patch), strides=(self.patch, self.patch), padding="VALID",
                name="embedding")(images)
    b, h, w, c = x.shape
    x = x.reshape(b, h * w, c)
    x = x + self.param("pos_embedding", nn.initializers.normal(0.02), (1, h * w, c))
    if self.pool == "tok":
      cls = self.param("cls", nn.initializers.zeros, (1, 1, c))
      x = jnp.concatenate([jnp.tile(cls, (b, 1, 1)), x], axis=1)
    x = Encoder(self.depth, self.num_heads, 2 * self.width, self.remat, self.policy, name="Transformer")(x, train)
    x = x[:, 0] if self.pool == "tok" else x.mean(axis=1)
    return nn.Dense(self.num_classes, name="head")(x)


def jiggled_params(model: nn.Module, x, seed: int) -> Any:
  """Parameters on ``model.init``'s shapes, drawn with numpy (nothing compiled): kernels ~ N(0, 1/fan_in), norm
  scales ~ 1 + 0.3·N(0, 1), every other leaf ~ 0.3·N(0, 1), so biases, positions and the class token are
  nonzero and each of the depth stacked blocks differs."""
  rng = np.random.default_rng(seed)

  def draw(path, leaf):
    name, shape = str(getattr(path[-1], "key", path[-1])), leaf.shape
    stacked = any(str(getattr(k, "key", k)) == "encoderblock" for k in path)
    fan_shape = shape[1:] if stacked else shape
    if name == "scale":
      value = 1.0 + 0.3 * rng.normal(size=shape)
    elif len(fan_shape) >= 2 and name == "kernel":
      value = rng.normal(size=shape) / np.sqrt(np.prod(fan_shape[:-1]))
    else:
      value = 0.3 * rng.normal(size=shape)
    return jnp.asarray(value, jnp.float32)

  shapes = jax.eval_shape(model.init, jax.random.key(0), x)["params"]
  return jax.tree_util.tree_map_with_path(draw, shapes)


def data(n_train: int = 16, n_test: int = 4, seed: int = 0) -> dict:
  rng = np.random.default_rng(seed)
  x = rng.uniform(size=(n_train + n_test, 8, 8, 3)).astype(np.float32)
  y = rng.integers(0, 3, n_train + n_test)
  return dict(x_train=x[:n_train], y_train=y[:n_train], x_test=x[n_train:], y_test=y[n_train:])


def spec(depth: int = 3, remat: bool = True, policy: Optional[str] = "nothing_saveable", pool: str = "tok"):
  """A ``--model`` callable: (ModelSpec, data) of a ScannedViT on 8×8 RGB images, 3 classes."""
  model = ScannedViT(depth=depth, remat=remat, policy=policy, pool=pool)
  d = data()
  params = jiggled_params(model, d["x_train"][:2], 0)
  name = f"scanned_d{depth}" + ("_remat" if remat else "") + (f"_{policy}" if remat and policy else "")
  return ModelSpec(name, lambda p, v: model.apply({"params": p}, v), params, 3,
                   init_params=jiggled_params(model, d["x_train"][:2], 1)), d
