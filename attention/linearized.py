"""Parameter-free linearized attention, f_att(X) = X Xᵀ X.

Source: Miñoza, Medina, Ibañez, "Influence malleability in linearized attention" (arXiv 2603.13085, 2026),
§3: scaled dot-product attention with W_Q = W_K = W_V = I and exp(A) ≈ 1 + A. The transform is
transductive: the training matrix X_tr supplies keys and values, and the rows being featurised are the
queries, so a training row becomes x_i X_trᵀ X_tr and a new (test) row x X_trᵀ X_tr.

Gram identity (before row normalisation): F = X Xᵀ X has F Fᵀ = (X Xᵀ)³ = G³, hence κ(F Fᵀ) = κ(G)³.
Stacking conventions (``stacked_linearized_attention``):
  * ``"values"`` – every layer re-uses the original X as queries and keys and takes the previous output
    as values, Z_k = X Xᵀ Z_{k-1}; Gram G^(2k+1) (the paper's statement).
  * ``"self"`` – each layer attends over its own input, Z_k = Z_{k-1} Z_{k-1}ᵀ Z_{k-1}; Gram G^(3^k).
"""
from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from attention._checks import check_matrix, check_no_overflow
from attention.safe_math import pow2_row_scale, safe_norm

Stacking = Literal["values", "self"]


def normalize_rows(x_NxD: jnp.ndarray, eps: float = 1e-12) -> jnp.ndarray:
  """Divides every row by its ℓ2 norm (rows of norm < eps are returned unchanged, so a zero row stays 0).

  Value and gradient are finite everywhere, the zero row included (its gradient is the identity: the
  norm goes through ``attention.safe_math.safe_norm``, whose gradient at 0 is 0).

  Args:
    x_NxD: array with shape [n, d].
    eps: ≥ 0; norms below this are treated as zero (the row is returned unchanged).

  Returns:
    Array with shape [n, d], rows of unit ℓ2 norm (or below eps).

  Raises:
    ValueError: eps < 0, or NaN/inf entries (concrete inputs).
  """
  # The norm of the row scaled by a power of two (exact, attention.safe_math.pow2_row_scale): the same unit
  # row, and no overflow of Σx² for rows of norm above √(dtype max), ≈ 1.8e19 in float32.
  if not eps >= 0:
    raise ValueError(f"eps must be ≥ 0 (rows of norm below it are left unchanged), got {eps!r}")
  if not isinstance(x_NxD, jax.core.Tracer) and not bool(np.isfinite(np.asarray(x_NxD)).all()):
    raise ValueError("x_NxD holds NaN or inf values; expected finite floats")
  scaled_NxD, scale_N = pow2_row_scale(x_NxD)
  scaled_norms_N = safe_norm(scaled_NxD, axis=-1, keepdims=True)
  # (a zero row is small whatever eps rounds to in x's dtype: 1e-12 is 0 in float16)
  small = (scaled_norms_N * scale_N < eps) | (scaled_norms_N == 0)
  return jnp.where(small, x_NxD, scaled_NxD / jnp.where(small, 1.0, scaled_norms_N))


def linearized_attention(x_NxD, *, normalize: bool = False) -> jnp.ndarray:
  """Linearized self-attention over the rows of x: X Xᵀ X.

  Args:
    x_NxD: the training matrix, shape [n, d], float (flattened pixels in [0, 1], not centred).
    normalize: if True, ℓ2-normalise each output row (what the MLP sees, docs/theory.md#mlp-attn-features). The Gram
      identity G̃ = G³ holds only without it.

  Returns:
    Attention features with shape [n, d], same dtype as x. Computed as X (Xᵀ X) when d < n and
    (X Xᵀ) X otherwise (same result, cheaper order).

  Raises:
    ValueError: if x is not rank 2 or holds NaN/inf.

  Source: arXiv 2603.13085, linearized attention f_att(X) = X Xᵀ X.
  """
  x_NxD = check_matrix(x_NxD, "x")
  return linearized_attention_transductive(x_NxD, x_NxD, normalize=normalize)


@jax.default_matmul_precision("highest")
def linearized_attention_transductive(
    queries_QxD, keys_values_NxD, *, normalize: bool = False
) -> jnp.ndarray:
  """Linearized attention of new rows against a training matrix: Q X_trᵀ X_tr.

  Queries are the rows being featurised; the training matrix provides keys and values. With
  queries = X_tr this is ``linearized_attention``.

  Args:
    queries_QxD: rows to featurise, shape [q, d].
    keys_values_NxD: the training matrix X_tr, shape [n, d].
    normalize: ℓ2-normalise each output row.

  Returns:
    Features with shape [q, d].

  Raises:
    ValueError: wrong ranks, mismatched feature dimension, or non-finite values.
  """
  q_QxD = check_matrix(queries_QxD, "queries")
  x_NxD = check_matrix(keys_values_NxD, "keys_values")
  if q_QxD.shape[1] != x_NxD.shape[1]:
    raise ValueError(
        f"queries has {q_QxD.shape[1]} features but keys_values has {x_NxD.shape[1]}; they must match")
  n, d = x_NxD.shape
  if normalize:  # scale-invariant: scale by powers of two (exact), so X Xᵀ X cannot overflow
    q_QxD = q_QxD / _pow2_global_scale(q_QxD)
    x_NxD = x_NxD / _pow2_global_scale(x_NxD)
  elif not isinstance(q_QxD, jax.core.Tracer):  # |(Q X_trᵀ X_tr)ᵢₖ| ≤ n·max‖q‖·max‖x‖²
    query_norm = float(np.max(np.linalg.norm(np.asarray(q_QxD, np.float64), axis=1), initial=0.0))
    check_no_overflow(x_NxD, "keys_values", degree=2, terms=n, factor=max(query_norm, 1.0),
                      what="linearized attention Q X_trᵀ X_tr")
  if d <= n:
    out_QxD = q_QxD @ (x_NxD.T @ x_NxD)
  else:
    out_QxD = (q_QxD @ x_NxD.T) @ x_NxD
  return normalize_rows(out_QxD) if normalize else out_QxD


def _pow2_global_scale(x) -> jnp.ndarray:
  """The power of two 2^k with max|x| / 2^k in [0.5, 1) (1 for a zero matrix); no gradient."""
  return pow2_row_scale(jnp.reshape(x, (1, -1)))[1][0, 0]


@jax.default_matmul_precision("highest")
def stacked_linearized_attention(
    x_NxD, *, layers: int, stacking: Stacking = "values", normalize: bool = False
) -> jnp.ndarray:
  """k layers of linearized attention under one of the two stacking conventions.

  Args:
    x_NxD: shape [n, d].
    layers: number of layers k ≥ 1.
    stacking: ``"values"`` (Z_k = X Xᵀ Z_{k-1}, Gram G^(2k+1)) or ``"self"``
      (Z_k = Z_{k-1} Z_{k-1}ᵀ Z_{k-1}, Gram G^(3^k)).
    normalize: ℓ2-normalise the rows of the final output only.

  Returns:
    Shape [n, d].

  Raises:
    ValueError: layers < 1, unknown stacking, bad x.
  """
  x_NxD = check_matrix(x_NxD, "x")
  if int(layers) != layers or layers < 1:
    raise ValueError(f"layers must be an integer ≥ 1, got {layers!r}")
  if stacking not in ("values", "self"):
    raise ValueError(f"stacking must be 'values' or 'self', got {stacking!r}")
  z_NxD = x_NxD
  for _ in range(int(layers)):
    keys_NxD = x_NxD if stacking == "values" else z_NxD
    z_NxD = (z_NxD @ keys_NxD.T) @ keys_NxD if stacking == "self" else (x_NxD @ x_NxD.T) @ z_NxD
  return normalize_rows(z_NxD) if normalize else z_NxD


def stacked_gram_power(layers: int, stacking: Stacking = "values") -> int:
  """The power p with Gram(Z_k) = G^p: 2k+1 for ``"values"``, 3^k for ``"self"``."""
  if int(layers) != layers or layers < 1:
    raise ValueError(f"layers must be an integer ≥ 1, got {layers!r}")
  if stacking == "values":
    return 2 * int(layers) + 1
  if stacking == "self":
    return 3 ** int(layers)
  raise ValueError(f"stacking must be 'values' or 'self', got {stacking!r}")
