"""attacks.chunking: per-sample work in cache-sized batch chunks equals one pass over the whole batch, the
chunk size follows from the model's largest intermediate, and a model that mixes samples is caught."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attacks
from attacks import chunking
from attacks.losses import objective_and_grad
from attention.vit import ViTConfig, VisionTransformer, init_params

_TINY = ViTConfig(image_size=8, patch_size=4, dim=8, depth=1, num_heads=2, num_classes=3)


@functools.lru_cache(maxsize=None)
def _tiny_vit():
  params = init_params(_TINY, key=jax.random.PRNGKey(0))
  return jax.tree_util.Partial(lambda p, x: VisionTransformer(_TINY).apply({"params": p}, x), params)


def _images(batch, seed=0):
  return jnp.asarray(np.random.default_rng(seed).uniform(0.1, 0.9, (batch, 8, 8, 3)), jnp.float32)


@pytest.mark.parametrize("batch, chunk", [(10, 3), (10, 4), (12, 4), (7, 1), (5, 8)])
def test_map_chunks_restores_order_and_drops_padding(batch, chunk):
  """Identity and an index-dependent function come back in the original order, padding removed."""
  x = jnp.arange(batch * 2, dtype=jnp.float32).reshape(batch, 2)
  labels = jnp.arange(batch)
  out_x, out_scaled = chunking.map_chunks(lambda a, l: (a, a * l[:, None]), chunk, x, labels)
  np.testing.assert_array_equal(out_x, x)
  np.testing.assert_array_equal(out_scaled, x * labels[:, None])


def test_map_chunks_calls_fn_on_chunks_of_at_most_chunk_samples():
  """10 samples, chunk 4: ⌈10/4⌉ = 3 chunks of ⌈10/3⌉ = 4, chunk j holding samples j, j+3, j+6, j+9."""
  seen = []
  chunking.map_chunks(lambda a: (seen.append(a.shape), a)[1], 4, jnp.zeros((10, 2)))
  assert seen == [(4, 2)]
  first = chunking.map_chunks(lambda a: jnp.broadcast_to(a[:1], a.shape), 4, jnp.arange(10.0))
  # sample i lies in chunk i mod 3, whose first sample is i mod 3
  np.testing.assert_array_equal(first, np.arange(10) % 3)


def test_map_chunks_passes_none_through():
  out = chunking.map_chunks(lambda a, t: a if t is None else a + 1, 2, jnp.ones(5), None)
  np.testing.assert_array_equal(out, jnp.ones(5))


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "fast", np.float32(2)])
def test_bad_chunk_is_refused_naming_chunk(bad):
  with pytest.raises(ValueError, match="chunk"):
    chunking.map_chunks(lambda a: a, bad, jnp.ones(4))
  with pytest.raises(ValueError, match="chunk"):
    objective_and_grad(_tiny_vit(), _images(4), jnp.zeros(4, jnp.int32), chunk=bad)


def test_map_chunks_refuses_arrays_of_different_batch_sizes():
  with pytest.raises(ValueError, match="batch size"):
    chunking.map_chunks(lambda a, b: a, 2, jnp.ones(4), jnp.ones(5))


@pytest.mark.parametrize("loss, targeted", [("ce", False), ("dlr", False), ("ce", True)])
@pytest.mark.parametrize("chunk", [1, 3, 4])
def test_chunked_gradient_equals_whole_batch_to_float32_rounding(loss, targeted, chunk):
  """Objective, logits and input gradient of a ViT: chunked vs one pass, 10 images (padding for 3 and 4)."""
  x, y = _images(10), jnp.asarray(np.arange(10) % 3)
  target = (y + 1) % 3 if targeted else None
  whole = objective_and_grad(_tiny_vit(), x, y, target_B=target, loss=loss, chunk=None)
  chunked = jax.jit(lambda x: objective_and_grad(_tiny_vit(), x, y, target_B=target, loss=loss, chunk=chunk))(x)
  for a, b in zip(whole, chunked):
    np.testing.assert_allclose(b, a, rtol=2e-5, atol=2e-6 * float(jnp.max(jnp.abs(a))))


def test_a_model_that_mixes_samples_is_not_chunk_invariant():
  """The check above can fail: batch-norm-like mixing across samples changes the chunked gradient."""
  base = _tiny_vit()

  def mixing(x):
    logits = base(x)
    return logits - jnp.mean(logits, axis=0, keepdims=True) * 3.0

  x, y = _images(10), jnp.asarray(np.arange(10) % 3)
  whole = objective_and_grad(mixing, x, y, chunk=None)[2]
  chunked = objective_and_grad(mixing, x, y, chunk=4)[2]
  assert float(jnp.max(jnp.abs(chunked - whole))) > 1e-3 * float(jnp.max(jnp.abs(whole)))


def test_chunk_size_of_the_small_vit_is_32():
  """Largest intermediate: one attention map, 4 heads × 65 × 65 float32 = 67,600 B per image; 2 MiB / 67,600 B
  = 31.0, nearest power of two 32."""
  config = ViTConfig()
  params = init_params(config, key=jax.random.PRNGKey(0))
  fn = functools.partial(lambda p, x: VisionTransformer(config).apply({"params": p}, x), params)
  x = jax.ShapeDtypeStruct((256, 32, 32, 3), jnp.float32)
  assert chunking.largest_intermediate_bytes(fn, x) == 4 * 65 * 65 * 4
  assert chunking.chunk_size(fn, x) == 32
  assert chunking.chunk_size(fn, jax.ShapeDtypeStruct((32, 32, 32, 3), jnp.float32)) is None  # one chunk


def test_chunk_size_keeps_a_small_models_batch_whole():
  """An MLP 784-1024-10: 4 kB per image, 2 MiB / 4 kB = 512 images per chunk, more than the batch."""
  w1, w2 = jnp.zeros((784, 1024)), jnp.zeros((1024, 10))
  mlp = lambda x: jax.nn.relu(x @ w1) @ w2  # noqa: E731
  x = jax.ShapeDtypeStruct((256, 784), jnp.float32)
  assert chunking.largest_intermediate_bytes(mlp, x) == 1024 * 4
  assert chunking.chunk_size(mlp, x) is None
  assert chunking.chunk_size(mlp, jax.ShapeDtypeStruct((2048, 784), jnp.float32)) == 512


def test_arrays_of_the_weights_alone_do_not_set_the_chunk():
  """An MLP with [out, in] kernels: the transposed kernels (3.2 MB) are computed once, not per sample."""
  w1, w2 = jnp.zeros((1024, 784)), jnp.zeros((10, 1024))
  mlp = lambda x: jax.nn.relu(x @ w1.T) @ w2.T  # noqa: E731
  x = jax.ShapeDtypeStruct((256, 784), jnp.float32)
  assert chunking.largest_intermediate_bytes(mlp, x) == 1024 * 4
  assert chunking.chunk_size(mlp, x) is None
  # the same product with the weight transposed after it meets the input is per sample
  big = lambda x: jnp.sum(x[:, :, None] * w1.T[None], axis=1)  # noqa: E731
  assert chunking.largest_intermediate_bytes(big, x) == 784 * 1024 * 4


def test_largest_intermediate_is_found_inside_nested_jaxprs():
  """An outer product hidden in a jitted, scanned inner function still sets the size (d² floats)."""
  inner = jax.jit(lambda v: jax.lax.scan(lambda c, _: (c, jnp.outer(v, v)), 0.0, None, length=1)[1])

  def fn(x):
    return jnp.sum(jax.vmap(inner)(x), axis=(1, 2, 3))[:, None]

  assert chunking.largest_intermediate_bytes(fn, jax.ShapeDtypeStruct((8, 100), jnp.float32)) == 100 * 100 * 4


def test_chunk_size_is_none_on_an_accelerator(monkeypatch):
  monkeypatch.setattr(chunking.jax, "default_backend", lambda: "gpu")
  x = jax.ShapeDtypeStruct((4096, 784), jnp.float32)
  assert chunking.chunk_size(lambda x: x, x) is None


@pytest.mark.parametrize("attack, kwargs", [
    (attacks.pgd_linf, dict(eps=8 / 255, steps=3, key=jax.random.PRNGKey(1))),
    (attacks.apgd, dict(eps=8 / 255, steps=4, key=jax.random.PRNGKey(1))),
    (attacks.cw_l2, dict(steps=6, search_steps=2)),
])
def test_attacks_agree_chunked_and_whole(monkeypatch, attack, kwargs):
  """The same attack with chunking forced on (chunks of 3 for 10 images) and off gives the same result."""
  x, y = _images(10, seed=3), jnp.asarray(np.arange(10) % 3)

  def run(chunk):
    monkeypatch.setattr(chunking, "chunk_size", lambda fn, x: chunk)
    params = init_params(_TINY, key=jax.random.PRNGKey(0))
    fresh = jax.tree_util.Partial(lambda p, x: VisionTransformer(_TINY).apply({"params": p}, x), params)
    return attack(fresh, x, y, **kwargs)   # a new function object: compiled afresh under the patch

  whole, chunked = run(None), run(3)
  np.testing.assert_allclose(chunked.x_adv, whole.x_adv, atol=1e-5)
  np.testing.assert_array_equal(chunked.success, whole.success)


def test_a_position_dependent_function_is_kept_whole():
  """Row i reads clean row i (as influence.malleability.row_logits): its one-sample trace returns all N rows,
  so the batch is not chunked; a function whose shapes fix the batch is not chunked either."""
  clean = jnp.asarray(np.random.default_rng(0).standard_normal((40, 6)), jnp.float32)
  w = jnp.ones((6, 3))
  by_row = lambda x: (x * clean) @ w  # noqa: E731
  fixed = lambda x: x.reshape(40, 6) @ w  # noqa: E731
  x = jax.ShapeDtypeStruct((40, 6), jnp.float32)
  assert chunking.chunk_size(by_row, x) is None
  assert chunking.chunk_size(fixed, x) is None
  with pytest.raises(ValueError, match="one sample"):
    chunking.largest_intermediate_bytes(fixed, x)
  y = jnp.zeros(40, jnp.int32)
  np.testing.assert_array_equal(objective_and_grad(by_row, jnp.ones((40, 6)), y)[2],
                                objective_and_grad(by_row, jnp.ones((40, 6)), y, chunk=None)[2])
