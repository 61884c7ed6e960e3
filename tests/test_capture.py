"""Attention capture (attention.capture): layers found by method interception in a model the package does not
know and in our ViT / DiffViT / CertifiedViT; the rebuilt heads reproduce each layer's output, at the
captured tokens and at fresh ones; layers the bound does not cover are listed with their reason."""
import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention.capture import (KIND_CERTIFIED, KIND_DIFFERENTIAL, KIND_FLAX, KIND_SELF, DifferentialHeads,
                               SoftmaxHeads, capture_attention, head_probs, layer_output)
from attention.certified_vit import CertifiedViT, CertifiedViTConfig
from attention.vit import ViTConfig, VisionTransformer, attention_maps

TOL = dict(rtol=1e-5, atol=1e-5)


class ForeignTransformer(nn.Module):
  """A small transformer written only with flax.linen layers: 4 patch tokens of an 8×8 image."""
  num_classes: int = 3
  dim: int = 8
  variant: str = "plain"   # "plain", "mask", "normalize_qk", "cross", "remat", "vmap"

  @nn.compact
  def __call__(self, x):
    b = x.shape[0]
    t = nn.Dense(self.dim)(x.reshape(b, 4, 16)) + self.param("pos", nn.initializers.normal(0.5), (1, 4, self.dim))
    t = t + nn.MultiHeadDotProductAttention(num_heads=2, name="attn_0")(nn.LayerNorm()(t))
    if self.variant == "plain":
      t = t + nn.SelfAttention(num_heads=2, name="attn_1")(nn.LayerNorm()(t))
    elif self.variant == "mask":
      t = t + nn.MultiHeadDotProductAttention(num_heads=2, name="attn_1")(t, mask=nn.make_causal_mask(t[..., 0]))
    elif self.variant == "normalize_qk":
      t = t + nn.MultiHeadDotProductAttention(num_heads=2, normalize_qk=True, name="attn_1")(t)
    elif self.variant == "cross":
      memory = nn.Dense(self.dim)(x.reshape(b, 4, 16))
      t = t + nn.MultiHeadDotProductAttention(num_heads=2, name="attn_1")(t, memory)
    elif self.variant == "remat":
      t = t + nn.remat(nn.MultiHeadDotProductAttention)(num_heads=2, name="attn_1")(t)
    elif self.variant == "vmap":   # a transformation that traces even with jit disabled (batch tracers)
      t = t + nn.vmap(nn.MultiHeadDotProductAttention, variable_axes={"params": None},
                      split_rngs={"params": False}, in_axes=0)(num_heads=2, name="attn_1")(t)
    t = t + nn.Dense(self.dim)(nn.gelu(nn.Dense(2 * self.dim)(nn.LayerNorm()(t))))
    return nn.Dense(self.num_classes)(t.mean(axis=1))


def init_jiggled(model, x, seed, scale=0.3):
  """Random parameters of ``model`` with nonzero biases, drawn with numpy on the shapes of ``model.init``
  (nothing compiled: initialising eagerly or under jit costs seconds). Kernels ~ N(0, 1/fan_in),
  norm scales and gains ~ 1 + scale·N(0, 1), every other leaf ~ scale·N(0, 1)."""
  rng = np.random.default_rng(seed)

  def draw(path, leaf):
    name = str(getattr(path[-1], "key", path[-1]))
    shape = leaf.shape
    if name in ("scale", "norm_gain"):
      value = 1.0 + scale * rng.normal(size=shape)
    elif len(shape) >= 2:
      value = rng.normal(size=shape) / np.sqrt(np.prod(shape[:-1]))
    else:
      value = scale * rng.normal(size=shape)
    return jnp.asarray(value, jnp.float32)

  shapes = jax.eval_shape(model.init, jax.random.key(0), x)["params"]
  return jax.tree_util.tree_map_with_path(draw, shapes)


def _images(n, size=8, channels=1, seed=1):
  return jax.random.uniform(jax.random.key(seed), (n, size, size, channels))


def foreign_model(variant="plain", seed=0):
  model = ForeignTransformer(variant=variant)
  x = _images(3)
  params = init_jiggled(model, x, seed)
  return model, params, x


def test_foreign_model_layers_are_found_and_rebuilt():
  model, params, x = foreign_model()
  apply_fn = jax.jit(lambda p, v: model.apply({"params": p}, v))   # a jitted apply_fn is captured too
  cap = capture_attention(apply_fn, params, x)
  np.testing.assert_allclose(np.asarray(cap.logits), np.asarray(apply_fn(params, x)), **TOL)
  # SelfAttention.__call__ calls its parent's __call__: recorded once, not twice.
  assert [(l.path, l.kind) for l in cap.layers] == [("attn_0", KIND_FLAX), ("attn_1", KIND_FLAX)]
  for layer in cap.layers:
    assert layer.bound_applicable and layer.reason == "" and layer.augmented
    assert isinstance(layer.heads, SoftmaxHeads)
    assert layer.tokens.shape == (3, 4, 8) and layer.heads.a.shape == (2, 9, 9)
    np.testing.assert_allclose(np.asarray(layer_output(layer)), np.asarray(layer.output), **TOL)
    probs = np.asarray(head_probs(layer))
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-6)
    # The heads are the layer as a function: fresh tokens through the real Flax layer agree too.
    fresh = 2.0 * jax.random.normal(jax.random.key(5), (2, 4, 8))
    real = nn.MultiHeadDotProductAttention(num_heads=2).apply({"params": params[layer.path]}, fresh)
    np.testing.assert_allclose(np.asarray(layer_output(layer, fresh)), np.asarray(real), **TOL)


def test_biases_are_needed_by_the_rebuild():
  """Dropping the augmented row and the folded value bias breaks the reconstruction: the biases count."""
  model, params, x = foreign_model()
  layer = capture_attention(lambda p, v: model.apply({"params": p}, v), params, x).layers[0]
  stripped = layer._replace(heads=SoftmaxHeads(layer.heads.a[:, :-1, :-1], layer.heads.w_vo[:, :-1]),
                            augmented=False, output_bias=params["attn_0"]["out"]["bias"])
  assert float(jnp.max(jnp.abs(layer_output(stripped) - layer.output))) > 1e-2


@pytest.mark.parametrize("variant, reason", [
    ("mask", "attention mask"),
    ("normalize_qk", "normalize_qk"),
    ("cross", "cross-attention"),
    ("vmap", "unreadable layer"),
])
def test_uncovered_layers_are_listed_with_their_reason(variant, reason):
  model, params, x = foreign_model(variant)
  cap = capture_attention(lambda p, v: model.apply({"params": p}, v), params, x)
  first, second = cap.layers
  assert first.bound_applicable and first.path == "attn_0"
  assert not second.bound_applicable and second.heads is None and reason in second.reason
  np.testing.assert_allclose(np.asarray(cap.logits), np.asarray(model.apply({"params": params}, x)), **TOL)
  with pytest.raises(ValueError, match="no rebuilt heads"):
    layer_output(second)


def test_a_rematerialised_layer_is_read():
  """nn.remat (jax.checkpoint) traces its function even with jit disabled; it changes only what the backward
  pass stores, so the capture runs it as the plain function: the layer is read and rebuilt, the logits are
  the model's, and jax.checkpoint / jax.remat are themselves again afterwards."""
  checkpoint, remat = jax.checkpoint, jax.remat
  model, params, x = foreign_model("remat")
  cap = capture_attention(lambda p, v: model.apply({"params": p}, v), params, x)
  assert jax.checkpoint is checkpoint and jax.remat is remat
  assert [(l.path, l.bound_applicable) for l in cap.layers] == [("attn_0", True), ("attn_1", True)]
  np.testing.assert_allclose(np.asarray(cap.logits), np.asarray(model.apply({"params": params}, x)), **TOL)
  for layer in cap.layers:
    np.testing.assert_allclose(np.asarray(layer_output(layer)), np.asarray(layer.output), **TOL)


VIT_TINY = ViTConfig(num_classes=3, image_size=8, patch_size=4, dim=8, depth=2, num_heads=2, lambda_init=0.8)


@pytest.mark.parametrize("attention, use_bias", [("standard", False), ("standard", True), ("differential", True)])
def test_vit_and_diffvit_heads_reproduce_every_layer(attention, use_bias):
  cfg = dataclasses.replace(VIT_TINY, attention=attention, use_bias=use_bias, lambda_init=None)
  model = VisionTransformer(cfg)
  x = _images(3)
  params = init_jiggled(model, x, 3, scale=0.2)
  cap = capture_attention(lambda p, v: model.apply({"params": p}, v), params, x)
  assert [l.path for l in cap.layers] == ["block_0/attention", "block_1/attention"]
  sown = attention_maps(cfg, params, x)
  for layer, maps in zip(cap.layers, sown):
    assert layer.augmented == use_bias and layer.tokens.shape == (3, 5, 8)
    np.testing.assert_allclose(np.asarray(layer_output(layer)), np.asarray(layer.output), **TOL)
    if attention == "standard":
      assert layer.kind == KIND_SELF and layer.bound_applicable
      np.testing.assert_allclose(np.asarray(head_probs(layer)), np.asarray(maps.a1), **TOL)
    else:
      assert layer.kind == KIND_DIFFERENTIAL and isinstance(layer.heads, DifferentialHeads)
      assert not layer.bound_applicable and "differential" in layer.reason
      p1, p2 = head_probs(layer)
      np.testing.assert_allclose(np.asarray(p1), np.asarray(maps.a1), **TOL)
      np.testing.assert_allclose(np.asarray(p2), np.asarray(maps.a2), **TOL)
      np.testing.assert_allclose(float(layer.heads.lam), float(maps.lam), rtol=1e-6)
      assert layer.heads.lambda_init == maps.lambda_init


@pytest.mark.parametrize("bounds", [dict(attention_bound=1.0, value_bound=1.0),
                                    dict(attention_bound=None, value_bound=None)])
def test_certified_vit_heads_reproduce_every_layer(bounds):
  cfg = CertifiedViTConfig(num_classes=3, image_size=8, channels=1, patch_size=4, dim=8, depth=2, num_heads=2,
                           sll_hidden=12, **bounds)
  model = CertifiedViT(cfg)
  x = _images(3)
  params = init_jiggled(model, x, 4, scale=0.2)
  cap = capture_attention(lambda p, v: model.apply({"params": p}, v), params, x)
  assert [(l.path, l.kind) for l in cap.layers] == [(f"block_{i}/attention", KIND_CERTIFIED) for i in range(2)]
  for layer in cap.layers:
    assert layer.bound_applicable and not layer.augmented and layer.tokens.shape == (3, 4, 8)
    np.testing.assert_allclose(np.asarray(layer_output(layer)), np.asarray(layer.output), **TOL)


def test_capture_leaves_a_model_without_attention_alone():
  model = nn.Dense(3)
  params = {"kernel": jnp.ones((4, 3)), "bias": jnp.zeros(3)}
  cap = capture_attention(lambda p, v: model.apply({"params": p}, v), params, jnp.ones((2, 4)))
  assert cap.layers == () and cap.logits.shape == (2, 3)


def _nnx_layer(**kwargs):
  from flax import nnx
  return nnx.MultiHeadAttention(num_heads=2, in_features=6, decode=False, rngs=nnx.Rngs(3), **kwargs)


@pytest.mark.parametrize("use_bias", [True, False])
def test_nnx_attention_is_found_by_path_and_rebuilt(use_bias):
  """An NNX model's layers: found through ModelSpec.from_nnx's apply_fn, with State or pure-dict params,
  named by their params path, and their rebuilt heads reproduce the layer's output (float32 rounding)."""
  from flax import nnx
  from attention.capture import KIND_NNX
  from attention.model_spec import ModelSpec

  class Two(nnx.Module):
    def __init__(self):
      self.first, self.second = _nnx_layer(use_bias=use_bias), _nnx_layer(use_bias=use_bias)

    def __call__(self, x):
      h = x + self.first(x)
      return (h + self.second(h)).mean(axis=1)[:, :3]

  spec = ModelSpec.from_nnx("two", Two(), num_classes=3)
  x = jax.random.normal(jax.random.PRNGKey(0), (2, 5, 6))
  for params in (nnx.split(spec.module, nnx.Param, ...)[1], spec.params):  # an nnx.State, a pure dict
    cap = capture_attention(spec.apply_fn, params, x)
    assert [(l.path, l.kind, l.bound_applicable, l.augmented) for l in cap.layers] == [
        ("first", KIND_NNX, True, use_bias), ("second", KIND_NNX, True, use_bias)]
    for layer in cap.layers:
      np.testing.assert_allclose(layer_output(layer), layer.output, atol=2e-5)
  assert nnx.MultiHeadAttention.__call__.__name__ == "__call__" and \
      not hasattr(nnx.MultiHeadAttention.__call__, "__wrapped__")  # the wrapper is gone after capture


@pytest.mark.parametrize("kwargs, call_kwargs, reason", [
    (dict(num_kv_heads=1), {}, "grouped-query"),
    ({}, dict(is_causal=True), "causal"),
    (dict(normalize_qk=True), {}, "normalize_qk"),
])
def test_uncovered_nnx_layers_are_listed_with_their_reason(kwargs, call_kwargs, reason):
  from flax import nnx
  layer = _nnx_layer(**kwargs)
  graphdef, params = nnx.split(layer)
  cap = capture_attention(lambda p, v: nnx.merge(graphdef, p)(v, **call_kwargs), params,
                          jax.random.normal(jax.random.PRNGKey(1), (2, 4, 6)))
  (captured,) = cap.layers
  assert not captured.bound_applicable and reason in captured.reason and captured.heads is None


class _ScannedBlock(nn.Module):
  @nn.compact
  def __call__(self, x, _):
    return x + nn.MultiHeadDotProductAttention(num_heads=2)(nn.LayerNorm()(x)), None


class _ScannedEncoder(nn.Module):
  """big_vision's layout: the encoder blocks under nn.scan (params stacked on a leading axis)."""
  depth: int

  @nn.compact
  def __call__(self, x):
    x = nn.Dense(8)(x)
    x, _ = nn.scan(_ScannedBlock, variable_axes={"params": 0}, split_rngs={"params": True},
                   length=self.depth)(name="blocks")(x, None)
    return nn.Dense(3)(x.mean(axis=1))


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_a_scanned_stack_of_d_layers_reports_d_layers(depth):
  """nn.scan traces its body once before running it d times: that tracing pass is not a layer (it was
  counted as an extra, unreadable one). Each of the d layers is rebuilt from its own slice of the weights."""
  model = _ScannedEncoder(depth)
  x = jax.random.normal(jax.random.PRNGKey(0), (2, 5, 6))
  params = model.init(jax.random.PRNGKey(1), x)["params"]
  cap = capture_attention(lambda p, v: model.apply({"params": p}, v), params, x)
  base = "blocks/MultiHeadDotProductAttention_0"
  assert [l.path for l in cap.layers] == [base] + [f"{base}#{k}" for k in range(2, depth + 1)]
  assert all(l.bound_applicable for l in cap.layers)
  for layer in cap.layers:
    np.testing.assert_allclose(layer_output(layer), layer.output, atol=2e-5)
  if depth > 1:
    assert not np.allclose(cap.layers[0].heads.a, cap.layers[1].heads.a)


@pytest.mark.parametrize("remat, policy", [(False, None), (True, None), (True, "nothing_saveable")],
                         ids=["scan", "scan_remat", "scan_remat_policy"])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_big_vision_scanned_encoder_reports_its_depth(depth, remat, policy):
  """big_vision's construction (tests/scanned_vit.py): nn.scan over nn.remat(Block, prevent_cse=False,
  static_argnums=(2,), policy=...), in_axes=nn.broadcast, the deterministic flag broadcast. Flax's scan runs
  one abstract pass over the body before its d steps, and under nn.remat every step was traced too, so the
  abstract pass could not be told from the steps by tracing: depth 3 reported 4 unreadable layers. Now: d
  layers, each rebuilt from its own slice of the stacked weights (leading axis of size d)."""
  from scanned_vit import ATTENTION_PATH, ScannedViT, jiggled_params
  from attention.capture import _softmax_heads
  model = ScannedViT(depth=depth, remat=remat, policy=policy)
  x = _images(2, channels=3)
  params = jiggled_params(model, x, 0)
  cap = capture_attention(lambda p, v: model.apply({"params": p}, v), params, x)
  assert [l.path for l in cap.layers] == [ATTENTION_PATH] + [f"{ATTENTION_PATH}#{k}" for k in range(2, depth + 1)]
  np.testing.assert_allclose(np.asarray(cap.logits), np.asarray(model.apply({"params": params}, x)), **TOL)
  stacked = params["Transformer"]["encoderblock"]["MultiHeadDotProductAttention_0"]
  assert stacked["query"]["kernel"].shape == (depth, 8, 2, 4)
  for k, layer in enumerate(cap.layers):
    assert layer.bound_applicable and layer.reason == "" and layer.augmented
    assert layer.tokens.shape == (2, 5, 8)   # class token + 4 patches
    np.testing.assert_allclose(np.asarray(layer_output(layer)), np.asarray(layer.output), atol=2e-5)
    p = jax.tree_util.tree_map(lambda a: a[k], stacked)   # step k's slice
    heads, bias = _softmax_heads(*(p[n][w] for n in ("query", "key", "value") for w in ("kernel", "bias")),
                                 p["out"]["kernel"], p["out"]["bias"], True)
    np.testing.assert_allclose(np.asarray(layer.heads.a), np.asarray(heads.a), **TOL)
    np.testing.assert_allclose(np.asarray(layer.output_bias), np.asarray(bias), **TOL)


@pytest.mark.parametrize("depth", [1, 3])
def test_a_layer_still_traced_under_scan_is_counted_once_per_step(depth):
  """A layer that stays traced in every step (nn.vmap inside the scanned block) cannot be read, but Flax's
  abstract pass over the scan body is still not counted: d unreadable layers, not d + 1."""
  class Block(nn.Module):
    @nn.compact
    def __call__(self, x, _):
      attn = nn.vmap(nn.MultiHeadDotProductAttention, variable_axes={"params": None},
                     split_rngs={"params": False}, in_axes=0)(num_heads=2)
      return x + attn(nn.LayerNorm()(x)), None

  class Encoder(nn.Module):
    @nn.compact
    def __call__(self, x):
      x, _ = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True},
                     length=depth)(name="blocks")(x, None)
      return x.mean(axis=(1, 2))

  model = Encoder()
  x = jax.random.normal(jax.random.PRNGKey(0), (2, 5, 8))
  params = model.init(jax.random.PRNGKey(1), x)["params"]
  cap = capture_attention(lambda p, v: model.apply({"params": p}, v), params, x)
  base = "blocks/VmapMultiHeadDotProductAttention_0"
  assert [l.path for l in cap.layers] == [base] + [f"{base}#{k}" for k in range(2, depth + 1)]
  assert all(l.heads is None and l.reason.startswith("unreadable layer") for l in cap.layers)


@pytest.mark.parametrize("variant, reason", [
    ("mask", "attention mask"), ("normalize_qk", "normalize_qk"), ("cross", "cross-attention")])
def test_uncovered_layers_still_report_entropy_and_largest_weight(variant, reason):
  """A masked, normalize_qk or cross-attention layer has no bound, but the weights it computed are kept:
  rows sum to 1, masked keys get 0, and the entropy and largest weight follow from them."""
  from attention.layer_statistics import attention_statistics

  class Layer(nn.Module):
    @nn.compact
    def __call__(self, x):
      attn = nn.MultiHeadDotProductAttention(num_heads=2, normalize_qk=variant == "normalize_qk")
      if variant == "mask":
        return attn(x, mask=nn.make_causal_mask(x[..., 0]))
      if variant == "cross":
        return attn(x, x[:, :3] * 2.0)
      return attn(x)

  model = Layer()
  x = jax.random.normal(jax.random.PRNGKey(0), (2, 5, 6))
  params = model.init(jax.random.PRNGKey(1), x)["params"]
  (layer,) = capture_attention(lambda p, v: model.apply({"params": p}, v), params, x).layers
  assert not layer.bound_applicable and reason in layer.reason and layer.heads is None
  w = np.asarray(layer.weights)
  assert w.shape == (2, 2, 5, 3 if variant == "cross" else 5)
  np.testing.assert_allclose(w.sum(axis=-1), 1.0, atol=1e-5)
  if variant == "mask":
    assert np.all(np.triu(w[0, 0], k=1) == 0)  # causal: no weight on later keys
  stats = attention_statistics(layer)
  expected = -np.sum(np.where(w > 0, w * np.log(np.where(w > 0, w, 1)), 0), axis=-1).mean(axis=-1)
  np.testing.assert_allclose(stats.entropy[0], expected, rtol=1e-5)
  np.testing.assert_allclose(stats.max_weight[0], w.max(axis=-1).mean(axis=-1), rtol=1e-6)
