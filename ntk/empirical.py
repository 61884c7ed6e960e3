"""Empirical (finite-width) NTKs: neural-tangents as the reference, and a closed-form fast path.

The empirical NTK of f with parameters θ is Θ(x, x') = (1/C) Σ_c ∂f_c(x)/∂θ · ∂f_c(x')/∂θ, the trace over
the C outputs divided by C (neural-tangents' ``trace_axes=(-1,)`` convention).

For the 2-layer ReLU network f(x) = (1/√m) aᵀ relu(Wᵀx) the Jacobian has the closed form
∂f_c/∂w_r = a_rc 1(w_rᵀx > 0) x / √m, so with S = 1[X W > 0] ∈ {0, 1}^(n×m) and D = diag(mean_c a_rc²):
  Θ_W = (X₁ X₂ᵀ) ∘ (S₁ D S₂ᵀ) / m,
and a trained readout adds Θ_a = relu(X₁W) relu(X₂W)ᵀ / m. That costs two matmuls instead of n·m·d
Jacobian entries per row (REFERENCE §2; measured ≥ 100× faster, see benchmarks/ntk_fast_path.py).
"""
from __future__ import annotations

import functools
from typing import Literal

import jax
import jax.numpy as jnp
import neural_tangents as nt
import numpy as np

from ntk._checks import check_inputs
from ntk.models import Model, first_layer_weights, readout_weights

Implementation = Literal["jacobian_contraction", "ntk_vector_products"]
_IMPLEMENTATIONS = {
    "jacobian_contraction": nt.NtkImplementation.JACOBIAN_CONTRACTION,
    "ntk_vector_products": nt.NtkImplementation.NTK_VECTOR_PRODUCTS,
}


@functools.lru_cache(maxsize=64)
def _nt_kernel_fn(apply_fn, implementation: str):
  return jax.jit(nt.empirical_ntk_fn(
      apply_fn, trace_axes=(-1,), vmap_axes=0, implementation=_IMPLEMENTATIONS[implementation]))


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
      STRUCTURED_DERIVATIVES and AUTO are broken in neural-tangents 0.6.5 on JAX 0.5 and not offered.
    memory_bytes: budget for the two Jacobian blocks held at once (float32); sets the block size.

  Returns:
    numpy array with shape [n, m] (float32), the output-averaged empirical NTK.

  Raises:
    ValueError: unknown implementation, bad input shapes or NaN inputs.
  """
  if implementation not in _IMPLEMENTATIONS:
    raise ValueError(f"implementation must be one of {tuple(_IMPLEMENTATIONS)}, got {implementation!r}")
  x1_NxD = check_inputs(x1_NxD, "x1")
  symmetric = x2_MxD is None
  x2_MxD = x1_NxD if symmetric else check_inputs(x2_MxD, "x2", x1_NxD.shape[1])
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
  return out_NxM


@functools.partial(jax.jit, static_argnames=("trained_readout",))
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


def two_layer_relu_ntk(model: Model, params, x1_NxD, x2_MxD=None) -> jnp.ndarray:
  """Empirical NTK of ``ntk.models.two_layer_relu`` in closed form (the fast path).

  Θ = (X₁X₂ᵀ) ∘ (S₁ D S₂ᵀ)/m [+ relu(X₁W) relu(X₂W)ᵀ/m for a trained readout], S = 1[XW > 0],
  D = diag(mean over outputs of a_rc²). Equal to ``empirical_ntk`` up to float rounding (tested).

  Args:
    model: a ``two_layer_relu`` model (either readout).
    params: its parameters.
    x1_NxD: shape [n, d]; x2_MxD: shape [m, d] or None for x1.

  Returns:
    Kernel with shape [n, m], dtype of the inputs; with several local devices the rows of x1 are
    sharded across them (``shard_rows``).

  Raises:
    ValueError: bad input shapes or NaN inputs.
  """
  w_DxM = first_layer_weights(model, params)
  x1_NxD = check_inputs(x1_NxD, "x1", w_DxM.shape[0])
  x2_MxD = x1_NxD if x2_MxD is None else check_inputs(x2_MxD, "x2", w_DxM.shape[0])
  return _two_layer_relu_ntk(w_DxM, readout_weights(model, params), shard_rows(x1_NxD),
                             jnp.asarray(x2_MxD), model.readout == "trained")
