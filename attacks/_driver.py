"""Calling a compiled attack: splitting logits_fn into static and traced parts, and sharding the batch.

A `logits_fn` is split like a pytree: its array leaves (for example the params inside a
`jax.tree_util.Partial(apply, params)`) are traced arguments of the compiled attack, so new weights of
the same shapes reuse the compiled program; everything else (the function itself) is a static argument,
hashed by identity.

Stable jit identity, the one way the code base uses: a function that jitted code takes as a static
argument comes from a ``functools.lru_cache``d factory keyed by the hashable architecture
(``ntk.models.two_layer_relu``, ``ntk.empirical._nt_kernel_fn``, ``experiments.trainers.vit.apply_fns``,
``experiments.diff_attention.run._layer_fn``), so equal architectures give the same function object; the
weights travel as array leaves of a ``jax.tree_util.Partial`` around it, which this module splits off as
traced arguments. New weights of the same shapes therefore reuse the compiled program.

Large batches are padded to a multiple of the local device count and sharded along the batch axis over all
local devices (jax.sharding); with one device nothing is moved.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

BATCH_AXIS = "batch"


def _is_array(leaf) -> bool:
  return isinstance(leaf, (jax.Array, np.ndarray))


def split_logits_fn(logits_fn):
  """Splits logits_fn into (static, dynamic): a hashable part and a tuple of its array leaves."""
  leaves, treedef = jax.tree_util.tree_flatten(logits_fn)
  dynamic = tuple(leaf if _is_array(leaf) else None for leaf in leaves)
  static = (treedef, tuple(None if _is_array(leaf) else leaf for leaf in leaves))
  try:
    hash(static)
  except TypeError:
    raise ValueError("logits_fn must be hashable (a function or a jax.tree_util.Partial whose "
                     "non-array arguments are hashable)") from None
  return static, dynamic


def merge_logits_fn(static, dynamic):
  """Inverse of `split_logits_fn`."""
  treedef, static_leaves = static
  leaves = [d if s is None else s for s, d in zip(static_leaves, dynamic)]
  return jax.tree_util.tree_unflatten(treedef, leaves)


def _traced(tree) -> bool:
  return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(tree))


def shard_batch(batched: dict, fn_dynamic: tuple):
  """Pads the batch to a multiple of the local device count and shards it along axis 0.

  Args:
    batched: name -> array with a leading batch axis (or None).
    fn_dynamic: the array leaves of logits_fn; replicated on every device.

  Returns:
    (batched, fn_dynamic, batch) with batch the size before padding. With one local device, or when
    any input is traced (the caller's jit decides placement), the inputs come back unchanged.
  """
  arrays = [a for a in batched.values() if a is not None]
  batch = arrays[0].shape[0]
  devices = jax.local_devices()
  if len(devices) == 1 or _traced((batched, fn_dynamic)):
    return batched, fn_dynamic, batch
  mesh = Mesh(np.asarray(devices), (BATCH_AXIS,))
  pad = (-batch) % len(devices)

  def place(a):
    if a is None:
      return None
    if pad:
      a = jnp.concatenate([a, jnp.repeat(a[:1], pad, axis=0)], axis=0)
    return jax.device_put(a, NamedSharding(mesh, PartitionSpec(BATCH_AXIS)))

  replicated = NamedSharding(mesh, PartitionSpec())
  fn_dynamic = tuple(None if d is None else jax.device_put(d, replicated) for d in fn_dynamic)
  return {k: place(a) for k, a in batched.items()}, fn_dynamic, batch


def run_attack(impl, logits_fn, batched: dict, **kwargs):
  """Calls a jitted attack implementation on a (possibly sharded) batch and trims the padding.

  Args:
    impl: jitted function impl(fn_static=, fn_dynamic=, **batched, **kwargs) returning a pytree whose
      leaves all have a leading batch axis.
    logits_fn: the model's logits function.
    batched: name -> per-sample array with leading axis [batch] (x, labels, keys, ...), or None.
    **kwargs: scalars (traced) and static options of impl.

  Returns:
    impl's output with the padding rows removed.

  Raises:
    ValueError: the adversarial examples hold NaN or inf (a model with non-finite logits or gradients).
  """
  fn_static, fn_dynamic = split_logits_fn(logits_fn)
  batched, fn_dynamic, batch = shard_batch(batched, fn_dynamic)
  out = impl(fn_static=fn_static, fn_dynamic=fn_dynamic, **batched, **kwargs)
  first = next(a for a in batched.values() if a is not None)
  if first.shape[0] != batch:
    out = jax.tree_util.tree_map(lambda a: a[:batch], out)
  if not _traced(out.x_adv) and not bool(jnp.all(jnp.isfinite(out.x_adv))):
    raise ValueError("the attack produced NaN or inf pixels: logits_fn returned non-finite logits or "
                     "gradients on the (finite, in-bounds) inputs; check the model and its parameters")
  return out
