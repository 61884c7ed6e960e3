"""Largest singular value of a matrix-free linear operator by power iteration on its Gram operator.

For a linear map K: R^{shape_in} -> R^{shape_out} given as a JAX function, σ_max(K)² = λ_max(KᵀK). The
adjoint Kᵀ comes from ``jax.linear_transpose``, so the operator is never formed: one iteration costs one
application of K and one of Kᵀ. Used for the key-side operator of the attention sensitivity bound
(``attention.sensitivity``), whose Kronecker form (n²·d² entries) is never built.

Power iteration approaches σ_max from below: every value it returns is a lower estimate,
``‖K v‖ ≤ σ_max`` and ``√‖KᵀK v‖ ≤ σ_max`` for unit v, and the gap between the two is reported so a
caller can see whether the iteration converged. No Krylov method can certify an upper bound
deterministically (a start vector orthogonal to the top singular vector would never see it); callers
that need a rigorous upper bound use a closed-form one (``attention.sensitivity`` has two).

Source: Golub & Van Loan, Matrix Computations (4th ed.), §8.2.1 (power method); the use for layer
spectral norms follows Tsuzuku, Sato & Sugiyama (NeurIPS 2018), §4.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp


class SingularValueEstimate(NamedTuple):
  """Result of ``top_singular_value``.

  Attributes:
    sigma: scalar, the estimate max(‖K v‖, √‖KᵀK v_prev‖) ≤ σ_max(K) (a lower estimate).
    vector: the last unit-norm iterate v, shape of the operator's input (the top right singular vector
      estimate).
    gap: scalar ≥ 0, |√‖KᵀK v_prev‖ − ‖K v‖| / sigma; it goes to 0 as the iteration converges.
  """
  sigma: jnp.ndarray
  vector: jnp.ndarray
  gap: jnp.ndarray


def _unit(v, tiny):
  norm = jnp.sqrt(jnp.sum(v * v))
  return v / jnp.maximum(norm, tiny), norm


def top_singular_value(linear_fn: Callable, example_input, *, key, iters: int = 100) -> SingularValueEstimate:
  """Power iteration v ← KᵀK v / ‖KᵀK v‖ from a Gaussian start, through the operator only.

  Args:
    linear_fn: a function that is linear in its one array argument (the operator K); it may close over
      constants. Must be traceable (jit, vmap, linear_transpose).
    example_input: an array with the input's shape and dtype (its values are not used).
    key: PRNG key for the random start.
    iters: number of iterations, ≥ 1 (static).

  Returns:
    ``SingularValueEstimate``. The zero operator gives sigma = 0 without NaN.

  Raises:
    ValueError: iters < 1.
  """
  if not isinstance(iters, int) or iters < 1:
    raise ValueError(f"iters must be an integer ≥ 1, got {iters!r}")
  example_input = jnp.asarray(example_input)
  tiny = jnp.finfo(example_input.dtype).tiny
  adjoint = jax.linear_transpose(linear_fn, example_input)
  v0, _ = _unit(jax.random.normal(key, example_input.shape, example_input.dtype), tiny)

  def gram(v):
    (w,) = adjoint(linear_fn(v))
    return w

  def body(_, carry):
    v, _ = carry
    w, norm = _unit(gram(v), tiny)
    return w, norm

  v, gram_norm = jax.lax.fori_loop(0, iters, body, (v0, jnp.zeros((), example_input.dtype)))
  out_norm = jnp.sqrt(jnp.sum(linear_fn(v) ** 2))
  prev = jnp.sqrt(gram_norm)
  sigma = jnp.maximum(out_norm, prev)
  gap = jnp.abs(prev - out_norm) / jnp.maximum(sigma, tiny)
  return SingularValueEstimate(sigma, v, gap)


def spectral_norm(m_AxB: jnp.ndarray) -> jnp.ndarray:
  """Exact largest singular value of a small dense matrix (LAPACK SVD), shape [..., a, b] -> [...]."""
  return jnp.linalg.svd(m_AxB, compute_uv=False)[..., 0]
