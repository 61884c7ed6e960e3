"""Largest singular value of a matrix-free linear operator: Lanczos (default) or plain power iteration.

For a linear map K: R^{shape_in} -> R^{shape_out} given as a JAX function, σ_max(K)² = λ_max(KᵀK). The
adjoint Kᵀ comes from ``jax.linear_transpose``, so the operator is never formed: one iteration costs one
application of K and one of Kᵀ. Used for the key-side operator of the attention sensitivity bound and for
the Jacobian of a whole attention layer (``attention.sensitivity``), whose Kronecker forms (n²·d²
entries) are never built.

``method="power"``: v ← KᵀKv/‖KᵀKv‖, estimate ‖Kv‖. ``method="lanczos"``: the same matrix-vector products,
but the estimate is the largest Ritz value of KᵀK over the whole Krylov space span{v, KᵀKv, …} (Lanczos with
full reorthogonalisation), which converges like exp(−2k√gap) instead of (σ₂/σ₁)^{2k}. With clustered top
singular values, 50 power iterations can still be ~1 % low (observed on trained ViT layers, where an attack
then exceeded the bound); Lanczos with the same budget is not.

Both approach σ_max from below: every value returned is a lower estimate (a Ritz value lies inside the
spectrum). The relative residual of the top Ritz pair is reported as ``gap``: some singular value of K lies
within it, and it goes to 0 as the iteration converges. No Krylov method can certify an upper bound
deterministically (a start orthogonal to the top singular vector never sees it); callers that need a
rigorous upper bound use a closed-form one (``attention.sensitivity`` has two for the key side).

Source: Golub & Van Loan, Matrix Computations (4th ed.), §8.2.1 (power method) and §10.1 (Lanczos); Kuczyński
& Woźniakowski, SIAM J. Matrix Anal. Appl. 13(4), 1992 (convergence from a random start); the use for layer
spectral norms follows Tsuzuku, Sato & Sugiyama (NeurIPS 2018), §4.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp


class SingularValueEstimate(NamedTuple):
  """Result of ``top_singular_value``.

  Attributes:
    sigma: scalar, the estimate of σ_max(K) (a lower estimate; see the module docstring).
    vector: unit-norm estimate of the top right singular vector, shape of the operator's input.
    gap: scalar ≥ 0, ‖KᵀKv − σ²v‖/σ², the relative residual of the top Ritz pair (0 when converged).
  """
  sigma: jnp.ndarray
  vector: jnp.ndarray
  gap: jnp.ndarray


METHODS = ("lanczos", "power")


def _norm(v):
  return jnp.sqrt(jnp.sum(v * v))


@jax.default_matmul_precision("highest")
def top_singular_value(linear_fn: Callable, example_input, *, key, iters: int = 50,
                       method: str = "lanczos") -> SingularValueEstimate:
  """Largest singular value of K through K and Kᵀ only, from a Gaussian start.

  Args:
    linear_fn: a function that is linear in its one array argument (the operator K); it may close over
      constants. Must be traceable (jit, vmap, linear_transpose).
    example_input: an array with the input's shape and dtype (its values are not used).
    key: PRNG key for the random start.
    iters: applications of KᵀK, ≥ 1 (static): Lanczos steps or power iterations.
    method: "lanczos" (Krylov space, full reorthogonalisation) or "power".

  Returns:
    ``SingularValueEstimate``. The zero operator gives sigma = 0 without NaN.

  Raises:
    ValueError: iters < 1 or an unknown method.
  """
  if not isinstance(iters, int) or iters < 1:
    raise ValueError(f"iters must be an integer ≥ 1, got {iters!r}")
  if method not in METHODS:
    raise ValueError(f"method must be one of {METHODS}, got {method!r}")
  example_input = jnp.asarray(example_input)
  dtype = example_input.dtype
  tiny = jnp.finfo(dtype).tiny
  adjoint = jax.linear_transpose(linear_fn, example_input)
  v0 = jax.random.normal(key, example_input.shape, dtype)
  v0 = v0 / jnp.maximum(_norm(v0), tiny)

  def gram(v):
    (w,) = adjoint(linear_fn(v))
    return w

  if method == "power":
    def power_step(_, v):
      w = gram(v)
      return w / jnp.maximum(_norm(w), tiny)
    v = jax.lax.fori_loop(0, iters, power_step, v0)
  else:
    v = _lanczos_top_vector(gram, v0, iters, tiny)
  gv = gram(v)
  theta = jnp.maximum(jnp.sum(v * gv), 0.0)
  sigma = jnp.maximum(jnp.sqrt(theta), _norm(linear_fn(v)))
  gap = _norm(gv - theta * v) / jnp.maximum(theta, tiny)
  return SingularValueEstimate(sigma, v, gap)


def _lanczos_top_vector(gram: Callable, v0, steps: int, tiny):
  """Top Ritz vector of the PSD operator ``gram`` on the Krylov space of v0 (``steps`` products).

  Lanczos with full reorthogonalisation (Gram–Schmidt, twice) against all previous basis vectors Q; the
  Ritz pair comes from the projected matrix H = Q G Qᵀ, formed from the stored products G q_j (so it is
  the exact Rayleigh–Ritz matrix even where the three-term recurrence has lost accuracy). On a breakdown
  (the residual vanishes: an invariant subspace was found) the remaining basis vectors are zero, which
  adds zero rows and columns to H and leaves its top eigenpair unchanged.
  """
  flat0 = v0.reshape(-1)
  op = lambda f: gram(f.reshape(v0.shape)).reshape(-1)

  def body(j, carry):
    basis, products, q, scale = carry
    basis = basis.at[j].set(q)
    w = op(q)
    products = products.at[j].set(w)
    scale = jnp.maximum(scale, _norm(w))
    w = w - basis.T @ (basis @ w)
    w = w - basis.T @ (basis @ w)
    beta = _norm(w)
    alive = beta > 1e-6 * jnp.maximum(scale, tiny)
    return basis, products, jnp.where(alive, w / jnp.maximum(beta, tiny), 0.0), scale

  zeros = jnp.zeros((steps, flat0.size), flat0.dtype)
  basis, products, _, _ = jax.lax.fori_loop(0, steps, body, (zeros, zeros, flat0, jnp.zeros((), flat0.dtype)))
  h = basis @ products.T
  _, vecs = jnp.linalg.eigh(0.5 * (h + h.T))
  top = basis.T @ vecs[:, -1]
  return (top / jnp.maximum(_norm(top), tiny)).reshape(v0.shape)


def spectral_norm(m_AxB: jnp.ndarray) -> jnp.ndarray:
  """Exact largest singular value of a small dense matrix (LAPACK SVD), shape [..., a, b] -> [...]."""
  return jnp.linalg.svd(m_AxB, compute_uv=False)[..., 0]
