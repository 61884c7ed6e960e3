"""Empirical (finite-width) NTKs: neural-tangents as the reference, and a closed-form fast path.

The empirical NTK of f with parameters θ is Θ(x, x') = (1/C) Σ_c ∂f_c(x)/∂θ · ∂f_c(x')/∂θ, the trace over
the C outputs divided by C (neural-tangents' ``trace_axes=(-1,)`` convention).

For the 2-layer ReLU network f(x) = (1/√m) aᵀ relu(Wᵀx) the Jacobian has the closed form
∂f_c/∂w_r = a_rc 1(w_rᵀx > 0) x / √m, so with S = 1[X W > 0] ∈ {0, 1}^(n×m) and D = diag(mean_c a_rc²):
  Θ_W = (X₁ X₂ᵀ) ∘ (S₁ D S₂ᵀ) / m,
and a trained readout adds Θ_a = relu(X₁W) relu(X₂W)ᵀ / m. That costs two matmuls instead of n·m·d
Jacobian entries per row (docs/theory.md#empirical-ntk-fast-path; measured ≥ 100× faster,
see benchmarks/ntk_fast_path.py).
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
from typing import Literal

import jax
import jax.numpy as jnp
import neural_tangents as nt
import numpy as np

from ntk._checks import as_float, check_inputs
from ntk.models import Model, first_layer_weights, readout_weights

Implementation = Literal["jacobian_contraction", "ntk_vector_products"]
_IMPLEMENTATIONS = {
    "jacobian_contraction": nt.NtkImplementation.JACOBIAN_CONTRACTION,
    "ntk_vector_products": nt.NtkImplementation.NTK_VECTOR_PRODUCTS,
}


@functools.lru_cache(maxsize=64)
def _nt_kernel_fn(apply_fn, implementation: str):
  # Highest matmul precision inside the kernel: float32 Jacobian contractions on GPUs would use TF32.
  return jax.jit(jax.default_matmul_precision("highest")(nt.empirical_ntk_fn(
      apply_fn, trace_axes=(-1,), vmap_axes=0, implementation=_IMPLEMENTATIONS[implementation])))


def _block_rows(n_params: int, n_rows: int, memory_bytes: int) -> int:
  # Two Jacobian blocks of shape [rows, n_params] float32 live at once.
  return int(max(1, min(n_rows, memory_bytes // max(1, 8 * n_params))))


def empirical_ntk(
    apply_fn,
    params,
    x1_NxD,
    x2_MxD=None,
    *,
    implementation: Implementation = "jacobian_contraction",
    memory_bytes: int = 1 << 30,
) -> np.ndarray:
  """Empirical NTK through neural-tangents, computed in row blocks that fit ``memory_bytes``.

  Args:
    apply_fn: ``apply_fn(params, x) -> [batch, C]``, pure.
    params: parameters (a pytree).
    x1_NxD: inputs, shape [n, d].
    x2_MxD: inputs, shape [m, d]; defaults to x1 (then only the upper block triangle is computed).
    implementation: ``'jacobian_contraction'`` (neural-tangents' default) or ``'ntk_vector_products'``.
      STRUCTURED_DERIVATIVES and AUTO need more of JAX's internals than ntk/_nt_compat.py supplies and
      are not offered.
    memory_bytes: budget for the two Jacobian blocks held at once (float32); sets the block size.

  Returns:
    numpy array with shape [n, m] (float32), the output-averaged empirical NTK.

  Raises:
    ValueError: unknown implementation, bad input shapes or NaN inputs, NaN / inf outputs of apply_fn on x1,
      or a kernel with NaN / inf entries (its Jacobian non-finite at params).
  """
  if implementation not in _IMPLEMENTATIONS:
    raise ValueError(f"implementation must be one of {tuple(_IMPLEMENTATIONS)}, got {implementation!r}")
  x1_NxD = check_inputs(x1_NxD, "x1")
  symmetric = x2_MxD is None
  x2_MxD = x1_NxD if symmetric else check_inputs(x2_MxD, "x2", x1_NxD.shape[1])
  outputs = np.asarray(apply_fn(params, jnp.asarray(x1_NxD)))
  if not np.all(np.isfinite(outputs)):
    raise ValueError(f"apply_fn(params, x1) has {int(np.sum(~np.isfinite(outputs)))} non-finite outputs: the "
                     "empirical NTK of a model with NaN / inf outputs is not defined (check params)")
  kernel = _nt_kernel_fn(apply_fn, implementation)
  n_params = sum(int(np.size(p)) for p in jax.tree_util.tree_leaves(params))
  block = _block_rows(n_params, max(len(x1_NxD), len(x2_MxD)), memory_bytes)
  x1_NxD, x2_MxD = jnp.asarray(x1_NxD), jnp.asarray(x2_MxD)
  out_NxM = np.zeros((len(x1_NxD), len(x2_MxD)), np.float32)
  for i in range(0, len(x1_NxD), block):
    for j in range(i if symmetric else 0, len(x2_MxD), block):
      k_ij = np.asarray(kernel(x1_NxD[i:i + block], x2_MxD[j:j + block], params))
      out_NxM[i:i + block, j:j + block] = k_ij
      if symmetric and j > i:
        out_NxM[j:j + block, i:i + block] = k_ij.T
  if not np.all(np.isfinite(out_NxM)):
    raise ValueError(f"the empirical NTK has {int(np.sum(~np.isfinite(out_NxM)))} non-finite entries: apply_fn's "
                     "outputs or their Jacobian at params are NaN or inf (check params and apply_fn on x1)")
  return out_NxM


@functools.partial(jax.jit, static_argnames=("trained_readout",))
@jax.default_matmul_precision("highest")  # float32 kernels: no TF32 on GPUs (~1e-3 relative otherwise)
def _two_layer_relu_ntk(w_DxM, a_MxC, x1_NxD, x2_KxD, trained_readout: bool):
  m = w_DxM.shape[1]
  pre1_NxM, pre2_KxM = x1_NxD @ w_DxM, x2_KxD @ w_DxM
  s1_NxM = (pre1_NxM > 0).astype(x1_NxD.dtype)
  s2_KxM = (pre2_KxM > 0).astype(x1_NxD.dtype)
  d_M = jnp.mean(a_MxC ** 2, axis=1)
  k_NxK = (x1_NxD @ x2_KxD.T) * ((s1_NxM * d_M[None, :]) @ s2_KxM.T) / m
  if trained_readout:
    k_NxK = k_NxK + jax.nn.relu(pre1_NxM) @ jax.nn.relu(pre2_KxM).T / m
  return k_NxK


def shard_rows(x_NxD) -> jnp.ndarray:
  """Places the rows of x across all local devices (``jax.sharding``) when there are several and n
  divides evenly; otherwise returns x on the default device. Jitted kernels then run row-parallel."""
  devices = jax.local_devices()
  x_NxD = jnp.asarray(x_NxD)
  if len(devices) == 1 or x_NxD.shape[0] % len(devices):
    return x_NxD
  mesh = jax.sharding.Mesh(np.array(devices), ("rows",))
  return jax.device_put(x_NxD, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("rows", None)))


_GLOBAL_ROWS = contextvars.ContextVar("ntk_global_rows", default=False)


@contextlib.contextmanager
def global_row_mesh():
  """Within this context ``two_layer_relu_ntk`` shards the rows of x₁ over the devices of every process of
  a ``jax.distributed`` job (``jax.devices()``, not only the local ones) and gathers the kernel back on
  every process: one point's kernel computed by the whole job. Every process must make the same calls
  with the same inputs (they are collective). With one process it shards over the local devices."""
  token = _GLOBAL_ROWS.set(True)
  try:
    yield
  finally:
    _GLOBAL_ROWS.reset(token)


def _global_rows(fn, x_BxD) -> np.ndarray:
  """``fn(x)`` with the rows of x sharded over all processes' devices (zero-padded to a multiple of their
  number), gathered on every process as a numpy array with the rows of x (the padding dropped). ``fn``
  must be row-wise (row i of the output depends on row i of x only) and close over host (numpy) arrays."""
  from jax.experimental import multihost_utils
  devices = jax.devices()
  x_BxD = np.asarray(x_BxD)
  n = x_BxD.shape[0]
  padded = np.pad(x_BxD, ((0, (-n) % len(devices)), (0, 0)))
  sharding = jax.sharding.NamedSharding(jax.sharding.Mesh(np.array(devices), ("rows",)),
                                        jax.sharding.PartitionSpec("rows", None))
  x_global = jax.make_array_from_callback(padded.shape, sharding, lambda index: padded[index])
  return np.asarray(multihost_utils.process_allgather(fn(x_global), tiled=True))[:n]


DEFAULT_MEMORY_BYTES = 2 << 30


def fast_path_block_rows(n_rows: int, n_cols: int, d: int, width: int, *, memory_bytes: int = DEFAULT_MEMORY_BYTES,
                         itemsize: int = 4) -> int:
  """Rows of x₁ per block of the fast-path kernel so that its working set fits ``memory_bytes``.

  Working set (``itemsize`` bytes per entry): the x₂ side, held for the whole call, is x₂ [m, d] and
  relu(X₂W), 1[X₂W > 0] and their scaled copy [m, width] each, so m·(d + 3·width) entries; each block of b
  rows holds b·(d + 3·width) entries for its own side and at most 4 [b, m] products (X₁X₂ᵀ, S₁DS₂ᵀ,
  the readout term and their sum), so b·(d + 3·width + 4m). The block size is
  b = min(n, ⌊(memory_bytes − fixed) / per-row⌋). The returned [n, m] kernel is not counted.

  Args:
    n_rows, n_cols: n (rows of x₁) and m (rows of x₂), ≥ 1.
    d: input dimension ≥ 1; width: hidden width ≥ 1.
    memory_bytes: the budget in bytes (default 2 GiB).
    itemsize: bytes per entry (4 for float32, 8 for float64).

  Returns:
    The block size b, 1 ≤ b ≤ n.

  Raises:
    ValueError: non-positive sizes, or a budget below the x₂ side plus one row (naming the minimum).
  """
  for name, value in (("n_rows", n_rows), ("n_cols", n_cols), ("d", d), ("width", width), ("itemsize", itemsize)):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
      raise ValueError(f"{name} must be an integer ≥ 1, got {value!r}")
  fixed = itemsize * n_cols * (d + 3 * width)
  per_row = itemsize * (d + 3 * width + 4 * n_cols)
  if isinstance(memory_bytes, bool) or not isinstance(memory_bytes, (int, np.integer)) or \
      memory_bytes < fixed + per_row:
    raise ValueError(f"memory_bytes must be an integer ≥ {fixed + per_row} (the x2 side plus one row of the "
                     f"fast-path kernel at m = {n_cols}, d = {d}, width = {width}), got {memory_bytes!r}")
  return int(min(n_rows, (memory_bytes - fixed) // per_row))


@functools.partial(jax.jit, static_argnames=("trained_readout",))
@jax.default_matmul_precision("highest")
def _right_side(w_DxM, a_MxC, x2_KxD, trained_readout: bool):
  pre2_KxM = x2_KxD @ w_DxM
  s2d_KxM = (pre2_KxM > 0).astype(x2_KxD.dtype) * jnp.mean(a_MxC ** 2, axis=1)[None, :]
  return s2d_KxM, (jax.nn.relu(pre2_KxM) if trained_readout else None)


@jax.jit
@jax.default_matmul_precision("highest")
def _left_block(w_DxM, x1_BxD, x2_KxD, s2d_KxM, relu2_KxM):
  m = w_DxM.shape[1]
  pre1_BxM = x1_BxD @ w_DxM
  k_BxK = (x1_BxD @ x2_KxD.T) * ((pre1_BxM > 0).astype(x1_BxD.dtype) @ s2d_KxM.T) / m
  if relu2_KxM is not None:
    k_BxK = k_BxK + jax.nn.relu(pre1_BxM) @ relu2_KxM.T / m
  return k_BxK


def two_layer_relu_ntk(model: Model, params, x1_NxD, x2_MxD=None, *,
                       memory_bytes: int = DEFAULT_MEMORY_BYTES) -> jnp.ndarray:
  """Empirical NTK of ``ntk.models.two_layer_relu`` in closed form (the fast path).

  Θ = (X₁X₂ᵀ) ∘ (S₁ D S₂ᵀ)/m [+ relu(X₁W) relu(X₂W)ᵀ/m for a trained readout], S = 1[XW > 0],
  D = diag(mean over outputs of a_rc²). Equal to ``empirical_ntk`` up to float rounding (tested).
  Matrix products run at the highest precision (no TF32 on GPUs). When the working set exceeds
  ``memory_bytes``, the rows of x1 are processed in blocks of ``fast_path_block_rows`` rows (the last one
  zero-padded, so one compiled shape) and the kernel is assembled on the host.

  Args:
    model: a ``two_layer_relu`` model (either readout).
    params: its parameters.
    x1_NxD: shape [n, d]; x2_MxD: shape [m, d] or None for x1.
    memory_bytes: budget in bytes for the working set, not counting the returned kernel (default 2 GiB;
      ``fast_path_block_rows`` states the accounting).

  Returns:
    Kernel with shape [n, m], dtype of the inputs: a JAX array when it is computed in one block (with
    several local devices the rows of x1 are sharded across them, ``shard_rows``; inside
    ``global_row_mesh`` across the devices of all processes), else a numpy array.

  Raises:
    ValueError: bad input shapes, NaN inputs, or a budget too small for one row (``fast_path_block_rows``).
  """
  w_DxM = first_layer_weights(model, params)
  x1_NxD, x2_MxD = as_float(x1_NxD), None if x2_MxD is None else as_float(x2_MxD)
  if x2_MxD is not None:
    check_inputs(x2_MxD, "x2", w_DxM.shape[0])
  x1_NxD = check_inputs(x1_NxD, "x1", w_DxM.shape[0], kernel=True, partner=x2_MxD)
  x2_MxD = x1_NxD if x2_MxD is None else check_inputs(x2_MxD, "x2", w_DxM.shape[0], kernel=True, partner=x1_NxD)
  n, m = np.shape(x1_NxD)[0], np.shape(x2_MxD)[0]
  block = fast_path_block_rows(n, m, w_DxM.shape[0], w_DxM.shape[1], memory_bytes=memory_bytes,
                               itemsize=np.dtype(jnp.result_type(x1_NxD)).itemsize)
  a_MxC, trained = readout_weights(model, params), model.readout == "trained"
  global_rows = _GLOBAL_ROWS.get()
  if global_rows:  # host copies: every process passes the same values, replicated over the global mesh
    w_DxM, a_MxC, x2_MxD = np.asarray(w_DxM), np.asarray(a_MxC), np.asarray(x2_MxD)
  if block >= n:
    if global_rows:
      return jnp.asarray(_global_rows(lambda x: _two_layer_relu_ntk(w_DxM, a_MxC, x, x2_MxD, trained), x1_NxD))
    return _two_layer_relu_ntk(w_DxM, a_MxC, shard_rows(x1_NxD), jnp.asarray(x2_MxD), trained)
  x1_NxD = np.asarray(x1_NxD)
  x2_MxD = x2_MxD if global_rows else jnp.asarray(x2_MxD)
  s2d_KxM, relu2_KxM = _right_side(w_DxM, a_MxC, x2_MxD, trained)
  if global_rows:
    s2d_KxM, relu2_KxM = np.asarray(s2d_KxM), None if relu2_KxM is None else np.asarray(relu2_KxM)
  out_NxM = np.empty((n, m), x1_NxD.dtype)
  for start in range(0, n, block):
    rows = x1_NxD[start:start + block]
    padded = np.pad(rows, ((0, block - len(rows)), (0, 0)))
    if global_rows:
      out_NxM[start:start + len(rows)] = _global_rows(
          lambda x: _left_block(w_DxM, x, x2_MxD, s2d_KxM, relu2_KxM), padded)[:len(rows)]
      continue
    out_NxM[start:start + len(rows)] = np.asarray(
        _left_block(w_DxM, shard_rows(padded), x2_MxD, s2d_KxM, relu2_KxM))[:len(rows)]
  return out_NxM
