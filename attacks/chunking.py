"""Per-sample work over a batch in chunks that fit the CPU's caches, one compiled loop over the chunks.

On XLA:CPU the attacks' gradient steps are bound by memory traffic once the model's largest intermediate
array outgrows the caches: on the small ViT (65 tokens, 4 heads) each attention map is 67.6 kB per image,
17 MB for a batch of 256, and every elementwise pass of the softmax and its backward streams it from memory.
Computing the forward and backward pass for 32 images at a time (2.2 MB per map) keeps them in cache
(PGD-L∞ on a batch of 256, with and without: docs/performance.md). The samples of a chunk are strided
(sample i in chunk i mod n) so that a batch sharded over devices stays sharded.

The result is the same function of each sample (``logits_fn`` must treat samples independently, as every
attack requires); only the matrix products' blocking differs, so values agree with the unchunked pass to
float32 rounding (tested). Accelerators keep the whole batch.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jex_core

CHUNK_BYTES = 2 ** 21
"""Target size of the largest intermediate array of one chunk (2 MiB). On the 2-core AVX-512 machine of
docs/performance.md the chunk of 32 images (2.2 MB attention maps) was fastest for both the ViT and the
DiffViT, ahead of 16 and 64."""


def _nbytes(aval) -> int:
  if not (hasattr(aval, "shape") and hasattr(aval, "dtype")):
    return 0
  return math.prod(aval.shape) * np.dtype(aval.dtype).itemsize


def _sub_jaxprs(eqn):
  for param in eqn.params.values():
    for sub in param if isinstance(param, (tuple, list)) else (param,):
      if isinstance(sub, jex_core.ClosedJaxpr):
        yield sub.jaxpr
      elif isinstance(sub, jex_core.Jaxpr):
        yield sub


def _largest_output_bytes(jaxpr, depends) -> int:
  """The largest output of an equation that depends on the inputs flagged in ``depends`` (one bool per invar of
  jaxpr); arrays computed from the weights alone (a transposed kernel, say) do not grow with the chunk."""
  tainted = {v for v, d in zip(jaxpr.invars, depends) if d}
  largest = 0
  for eqn in jaxpr.eqns:
    flags = [not isinstance(v, jex_core.Literal) and v in tainted for v in eqn.invars]
    if not any(flags):
      continue
    for sub in _sub_jaxprs(eqn):  # arguments map one to one (pjit, custom_jvp, scan), else taint them all
      inner = flags if len(sub.invars) == len(flags) else [True] * len(sub.invars)
      largest = max(largest, _largest_output_bytes(sub, inner))
    tainted.update(eqn.outvars)
    largest = max([largest] + [_nbytes(v.aval) for v in eqn.outvars])
  return largest


def _one_sample_trace(fn, x):
  """(jaxpr, output shapes) of fn on one sample of x, or None when fn cannot take a batch of one."""
  one = jax.ShapeDtypeStruct((1,) + tuple(x.shape[1:]), x.dtype)
  try:
    closed, out = jax.make_jaxpr(fn, return_shape=True)(one)
  except (TypeError, ValueError):  # shapes fixed to the full batch
    return None
  return closed.jaxpr, [leaf.shape for leaf in jax.tree_util.tree_leaves(out)]


def largest_intermediate_bytes(fn, x) -> int:
  """Bytes of the largest array ``fn`` computes from one sample of x (nested jaxprs included; arrays computed
  from fn's weights alone, which do not grow with the batch, are left out).

  Args:
    fn: pure function of a batch [batch, ...] (for example a model's logits function).
    x: a batch [batch, ...] (concrete, traced or a ShapeDtypeStruct); only its per-sample shape and dtype
      are used.

  Raises:
    ValueError: fn cannot be traced on a batch of one sample.
  """
  traced = _one_sample_trace(fn, x)
  if traced is None:
    raise ValueError("fn cannot be traced on a batch of one sample")
  return _largest_output_bytes(traced[0], [True])


def chunk_size(fn, x) -> int | None:
  """Samples per chunk for per-sample work on the batch x, or None to keep the whole batch.

  The power of two nearest (in log scale) to CHUNK_BYTES / (largest intermediate of one sample), at least 1.
  None on an accelerator backend, when that chunk holds the whole batch, and when fn is not visibly a
  function of each sample alone: its trace on one sample fails or returns an output whose leading axis is not
  1 (as ``influence.malleability``'s row logits, where row i also reads clean training row i).

  Args:
    fn: the per-sample function of a batch whose intermediates set the chunk.
    x: the batch [batch, ...].
  """
  if jax.default_backend() != "cpu":
    return None
  traced = _one_sample_trace(fn, x)
  if traced is None or any(not shape or shape[0] != 1 for shape in traced[1]):
    return None
  largest = max(_largest_output_bytes(traced[0], [True]), 1)
  chunk = 2 ** max(0, round(math.log2(CHUNK_BYTES / largest)))
  return chunk if chunk < x.shape[0] else None


def _is_count(chunk) -> bool:
  return isinstance(chunk, (int, np.integer)) and not isinstance(chunk, bool) and chunk >= 1


def check_chunk(chunk) -> None:
  """Raises ValueError unless chunk is "auto", None or an integer >= 1."""
  if not (chunk is None or (isinstance(chunk, str) and chunk == "auto") or _is_count(chunk)):
    raise ValueError(f"chunk must be 'auto', None or an integer >= 1, got {chunk!r}")


def map_chunks(fn, chunk: int, *batched):
  """fn over the batch in chunks of at most ``chunk`` samples, under one ``lax.map``.

  The batch is split into n = ⌈B / chunk⌉ equal chunks of ⌈B / n⌉ samples, padded with copies of its first
  samples (fewer than n) and strided: chunk j holds samples j, j + n, j + 2n, ...

  Args:
    fn: function of per-sample arrays (fn(*chunks), each [c, ...]) returning a pytree whose leaves all have
      a leading axis of c samples.
    chunk: the largest number of samples per chunk, an integer >= 1.
    *batched: arrays with the same leading batch axis B, or None (passed to fn as None).

  Returns:
    fn's pytree with every leaf reassembled to [B, ...] in the original sample order.

  Raises:
    ValueError: chunk is not an integer >= 1, or no array is given, or the arrays' batch sizes differ.
  """
  if not _is_count(chunk):
    raise ValueError(f"map_chunks needs an integer chunk >= 1, got {chunk!r}")
  sizes = {a.shape[0] for a in batched if a is not None}
  if len(sizes) != 1:
    raise ValueError(f"map_chunks needs arrays with one common leading batch size, got {sorted(sizes)}")
  (b,) = sizes
  if b <= chunk:
    return fn(*batched)
  n = -(-b // chunk)
  size = -(-b // n)
  pad = n * size - b

  def split(a):
    if a is None:
      return None
    if pad:
      a = jnp.concatenate([a, a[:pad]], axis=0)
    return jnp.swapaxes(a.reshape((size, n) + a.shape[1:]), 0, 1)

  out = jax.lax.map(lambda args: fn(*args), tuple(split(a) for a in batched))
  return jax.tree_util.tree_map(lambda o: jnp.swapaxes(o, 0, 1).reshape((n * size,) + o.shape[2:])[:b], out)
