"""The NTK regime of any model: its empirical NTK traced over the logits, under a memory budget.

For a model f(θ, x) ∈ R^C (any pytree θ, any input shape), the empirical NTK on a sample is
Θ(x, x') = (1/C) Σ_c ∂f_c(x)/∂θ · ∂f_c(x')/∂θ, neural-tangents' ``trace_axes=(-1,)`` convention (as
``ntk.empirical``). Two of neural-tangents' implementations work with ntk/_nt_compat.py (STRUCTURED_DERIVATIVES and
AUTO do not): JACOBIAN_CONTRACTION, which materialises the Jacobians of a block of rows, and
NTK_VECTOR_PRODUCTS, which never does (one VJP per column, then JVPs). ``plan_kernel`` picks between them
from a memory budget, with this accounting (float32, P parameters, C outputs, b rows per block):

  JACOBIAN_CONTRACTION holds the Jacobians of two blocks, 2·b·C·P·4 bytes;
  NTK_VECTOR_PRODUCTS holds one parameter-sized cotangent per row of a block, b·P·4 bytes, plus the
  activations of one forward pass (not counted).

Contraction is chosen when a block of at least min(n, ``MIN_CONTRACTION_ROWS``) rows fits, else vector
products with the largest block that fits. The kernel is assembled on the host in [b, b] blocks (only the
upper block triangle for a symmetric kernel).

Summaries (``kernel_statistics``): the condition number λ_max/λ_min (float64 eigenvalues), the effective
rank exp(H(p)) with p = λ/Σλ (Roy & Vetterli, "The effective rank: a measure of effective
dimensionality", EUSIPCO 2007), and the kernel movement ‖K_θ − K_θ₀‖_F / ‖K_θ₀‖_F between trained and
initial parameters, the lazy-training measure (Jacot et al., arXiv 1806.07572; Chizat et al., arXiv
1812.07956); docs/theory.md#kernel-distance.
"""
from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import neural_tangents as nt
import numpy as np

DEFAULT_MEMORY_BYTES = 2 * 1024 ** 3
MIN_CONTRACTION_ROWS = 16
IMPLEMENTATIONS = {
    "jacobian_contraction": nt.NtkImplementation.JACOBIAN_CONTRACTION,
    "ntk_vector_products": nt.NtkImplementation.NTK_VECTOR_PRODUCTS,
}


class KernelPlan(NamedTuple):
  """How a kernel is computed (print it: ``describe_plan``).

  Attributes:
    implementation: 'jacobian_contraction' or 'ntk_vector_products'.
    block_rows: rows per block b, 1 ≤ b ≤ n.
    n_params: P, the number of parameters.
    n_outputs: C, the number of logits.
    working_bytes: the accounted working set of one block pair (module docstring), bytes.
    memory_bytes: the budget, bytes.
  """
  implementation: str
  block_rows: int
  n_params: int
  n_outputs: int
  working_bytes: int
  memory_bytes: int


def _check_count(value, name: str, low: int = 1) -> int:
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
    raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
  return int(value)


def plan_kernel(n_params: int, n_outputs: int, n_rows: int, *,
                memory_bytes: int = DEFAULT_MEMORY_BYTES) -> KernelPlan:
  """Chooses the neural-tangents implementation and the block size for a memory budget (module docstring).

  Args:
    n_params: P ≥ 1; n_outputs: C ≥ 1; n_rows: the largest side n ≥ 1 of the kernel.
    memory_bytes: the budget in bytes, ≥ 4·P (one parameter-sized float32 vector).

  Returns:
    ``KernelPlan``.

  Raises:
    ValueError: a count < 1, or a budget below one parameter vector (naming the minimum).
  """
  p = _check_count(n_params, "n_params")
  c = _check_count(n_outputs, "n_outputs")
  n = _check_count(n_rows, "n_rows")
  if isinstance(memory_bytes, bool) or not isinstance(memory_bytes, (int, np.integer)) or memory_bytes < 4 * p:
    raise ValueError(f"memory_bytes must be an integer >= {4 * p} (one float32 parameter vector of {p} "
                     f"parameters), got {memory_bytes!r}")
  contraction_rows = memory_bytes // (8 * c * p)
  if contraction_rows >= min(n, MIN_CONTRACTION_ROWS):
    b = int(min(n, contraction_rows))
    return KernelPlan("jacobian_contraction", b, p, c, 8 * b * c * p, int(memory_bytes))
  b = int(min(n, memory_bytes // (4 * p)))
  return KernelPlan("ntk_vector_products", b, p, c, 4 * b * p, int(memory_bytes))


def describe_plan(plan: KernelPlan) -> str:
  """One line: implementation, block size and memory, e.g. for the report runner to print."""
  return (f"NTK: {plan.implementation} in blocks of {plan.block_rows} rows ({plan.n_params:,} parameters, "
          f"{plan.n_outputs} outputs; working set {plan.working_bytes / 2 ** 20:.1f} MiB of a "
          f"{plan.memory_bytes / 2 ** 30:.2f} GiB budget)")


@functools.lru_cache(maxsize=32)
def _kernel_fn(apply_fn, implementation: str):
  # Highest matmul precision: float32 Jacobian contractions on GPUs would otherwise use TF32.
  return jax.jit(jax.default_matmul_precision("highest")(nt.empirical_ntk_fn(
      apply_fn, trace_axes=(-1,), vmap_axes=0, implementation=IMPLEMENTATIONS[implementation])))


def n_parameters(params) -> int:
  """Number of scalar parameters of a pytree."""
  return int(sum(np.size(leaf) for leaf in jax.tree_util.tree_leaves(params)))


def model_ntk(apply_fn: Callable, params, x1, x2=None, *, memory_bytes: int = DEFAULT_MEMORY_BYTES,
              plan: Optional[KernelPlan] = None) -> tuple[np.ndarray, KernelPlan]:
  """The empirical NTK of ``apply_fn`` over its logits between two samples, in blocks within a budget.

  Args:
    apply_fn: ``apply_fn(params, x) -> logits [batch, C]``, pure (the model, preprocessing included).
      Pass the same function object across calls to reuse the compiled kernel.
    params: the parameters (any pytree of float arrays).
    x1: inputs [n, ...]; x2: inputs [m, ...] of the same trailing shape, or None for x1 (symmetric).
    memory_bytes: the budget of ``plan_kernel`` (default 2 GiB).
    plan: a ``KernelPlan`` to use instead of planning (e.g. to force an implementation).

  Returns:
    (kernel float32 numpy [n, m], the ``KernelPlan`` used).

  Raises:
    ValueError: empty or mismatched inputs, non-finite inputs or kernel entries, and as ``plan_kernel``.
  """
  x1 = np.asarray(x1)
  symmetric = x2 is None
  x2 = x1 if symmetric else np.asarray(x2)
  if x1.ndim < 2 or x1.shape[0] < 1 or x2.ndim < 2 or x2.shape[0] < 1 or x1.shape[1:] != x2.shape[1:]:
    raise ValueError(f"x1 and x2 must be batches [n, ...] with n >= 1 and the same trailing shape, got "
                     f"{x1.shape} and {x2.shape}")
  if not (np.isfinite(x1).all() and np.isfinite(x2).all()):
    raise ValueError("x1 and x2 must hold finite values")
  if plan is None:
    n_out = int(jax.eval_shape(apply_fn, params, jax.ShapeDtypeStruct((1,) + x1.shape[1:], x1.dtype)).shape[-1])
    plan = plan_kernel(n_parameters(params), n_out, max(len(x1), len(x2)), memory_bytes=memory_bytes)
  if plan.implementation not in IMPLEMENTATIONS:
    raise ValueError(f"plan.implementation must be one of {tuple(IMPLEMENTATIONS)}, got {plan.implementation!r}")
  kernel = _kernel_fn(apply_fn, plan.implementation)
  b = plan.block_rows
  out = np.zeros((len(x1), len(x2)), np.float32)
  for i in range(0, len(x1), b):
    for j in range(i if symmetric else 0, len(x2), b):
      k_ij = np.asarray(kernel(jnp.asarray(x1[i:i + b]), jnp.asarray(x2[j:j + b]), params))
      out[i:i + b, j:j + b] = k_ij
      if symmetric and j > i:
        out[j:j + b, i:i + b] = k_ij.T
  if not np.isfinite(out).all():
    raise ValueError("the empirical NTK holds NaN or inf entries (non-finite gradients of the logits)")
  return out, plan


class KernelStatistics(NamedTuple):
  """Spectral summaries of a symmetric PSD kernel [n, n] (float64).

  Attributes:
    n: the sample size.
    lambda_max, lambda_min: extreme eigenvalues (λ_min may be ≤ 0 from rounding).
    condition_number: λ_max / λ_min (inf when λ_min ≤ 0).
    effective_rank: exp(−Σ p_i log p_i), p = max(λ, 0)/Σ max(λ, 0), in [1, n] (Roy & Vetterli 2007).
    trace: tr K.
  """
  n: int
  lambda_max: float
  lambda_min: float
  condition_number: float
  effective_rank: float
  trace: float


def kernel_statistics(kernel_NxN) -> KernelStatistics:
  """Condition number and effective rank of a kernel (module docstring), from its float64 eigenvalues.

  Raises:
    ValueError: not square, n < 2, not finite, or not symmetric to 1e-4 relative.
  """
  k = np.asarray(kernel_NxN, np.float64)
  if k.ndim != 2 or k.shape[0] != k.shape[1] or k.shape[0] < 2:
    raise ValueError(f"kernel must be square [n, n] with n >= 2, got {k.shape}")
  if not np.isfinite(k).all():
    raise ValueError("kernel holds NaN or inf")
  scale = max(np.abs(k).max(), np.finfo(float).tiny)
  if np.abs(k - k.T).max() > 1e-4 * scale:
    raise ValueError("kernel must be symmetric (to 1e-4 relative)")
  lam = np.linalg.eigvalsh(0.5 * (k + k.T))
  pos = np.clip(lam, 0.0, None)
  total = pos.sum()
  if total > 0:
    p = pos[pos > 0] / total
    erank = float(math.exp(-np.sum(p * np.log(p))))
  else:
    erank = float("nan")
  cond = float(lam[-1] / lam[0]) if lam[0] > 0 else float("inf")
  return KernelStatistics(int(k.shape[0]), float(lam[-1]), float(lam[0]), cond, erank, float(np.trace(k)))


def kernel_movement(kernel_NxN, initial_NxN) -> float:
  """‖K_θ − K_θ₀‖_F / ‖K_θ₀‖_F in float64 (module docstring).

  Raises:
    ValueError: shapes differ, non-finite entries, or ‖K_θ₀‖_F = 0.
  """
  k, k0 = np.asarray(kernel_NxN, np.float64), np.asarray(initial_NxN, np.float64)
  if k.shape != k0.shape or k.ndim != 2:
    raise ValueError(f"kernels must be 2-D of the same shape, got {k.shape} and {k0.shape}")
  if not (np.isfinite(k).all() and np.isfinite(k0).all()):
    raise ValueError("kernels hold NaN or inf")
  norm0 = np.linalg.norm(k0)
  if norm0 == 0:
    raise ValueError("the initial kernel is zero: the relative movement is undefined")
  return float(np.linalg.norm(k - k0) / norm0)
