"""Local sensitivity bounds for one dot-product self-attention head at a fixed input (LoFAST).

The head (multi-head attention is a sum of heads, each with W_V := W_V^h W_O^h; the output bias cancels):

  F(X) = P(X) X W_V,   P(X) = rowsoftmax(S(X)),   S(X) = X A Xᵀ,   A = W_Q W_Kᵀ / √d_h,

with tokens X [n, d], A [d, d], W_V [d, e]. For a perturbation Δ [n, d] with ‖Δ‖_F ≤ ε, X' = X + Δ,
P' = P(X'), we bound ‖F(X') − F(X)‖_F by a function B(ε) of ε that holds for EVERY ε: nothing of higher
order is dropped. Source: Havens et al., "Fine-grained local sensitivity analysis of standard dot-product
self-attention" (ICML 2024), decomposition as in docs/theory.md#local-sensitivity-of-self-attention; the steps
below are derived here, not taken from the paper's code, and each is tested (tests/test_sensitivity_bounds.py).

Derivation. Notation: p_i = row i of P (a probability vector), s_i, d_i rows of S and D, J_i = diag(p_i) −
p_i p_iᵀ the softmax Jacobian of row i (symmetric, J_i 1 = 0, ‖J_i‖₂ ≤ ½), V = X W_V, v̄ its mean row,
R_V = max_k ‖v_k − v̄‖₂, μ the mean token, X_c = X − 1μᵀ, δ_i the rows of Δ and δ̄ their mean.

(0) F(X') − F(X) = P'ΔW_V  [value term]  +  (P' − P) X W_V  [softmax term].
(1) The logits move by D = S(X') − S(X) = ΔAXᵀ [query side] + XAΔᵀ [key side] + ΔAΔᵀ [second order].
    Softmax is invariant to a constant added to a row, so every row d_i may be replaced by d̃_i = d_i − m_i1
    for any m_i. Shifting row i by δ_iAμᵀ + x_iAδ̄ᵀ + δ_iAδ̄ᵀ gives D̃ = ΔAX_cᵀ + XA(Δ − 1δ̄ᵀ)ᵀ +
    ΔA(Δ − 1δ̄ᵀ)ᵀ, and since ‖Δ − 1δ̄ᵀ‖_F ≤ ‖Δ‖_F and ‖Δ‖₂ ≤ ‖Δ‖_F,
        ‖D̃‖_F ≤ D̃(ε) := (‖X_cAᵀ‖₂ + ‖XA‖₂) ε + ‖A‖₂ ε².
(2) Along the segment s_i + t d_i the probabilities q(t) obey q_k(t) ≤ p_k e^{range(d_i)} and
    range(d_i) ≤ √2‖d̃_i‖₂ ≤ √2 D̃(ε), so max_k q_k(t) ≤ p* e^{√2D̃(ε)} with p* = max_ik P_ik. Since
    0 ⪯ J(q) ⪯ diag(q), ‖J(q)‖₂ ≤ min(½, max_k q_k) ≤ c(ε) := min(½, p* e^{√2D̃(ε)}), and the mean value
    theorem gives ‖p'_i − p_i‖₂ ≤ c(ε)‖d̃_i‖₂, so ‖P' − P‖₂ ≤ ‖P' − P‖_F ≤ c(ε) D̃(ε).
(3) Value term: ‖P'ΔW_V‖_F ≤ ‖P'‖₂‖Δ‖_F‖W_V‖₂ ≤ (‖P‖₂ + c(ε)D̃(ε)) ‖W_V‖₂ ε.
(4) Softmax term, Taylor with integral remainder along s_i + t d_i, t ∈ [0, 1]:
        p'_i − p_i = J_i d_i + ρ_i,   ρ_i = ∫₀¹ (1 − t) ∇²σ(s_i + t d_i)[d_i, d_i] dt,
    and for any probability vector q = σ(s): ∇²σ(s)[d, d] = q ⊙ ((d − qᵀd)² − Var_q(d)). Its entries sum to
    0 and their absolute values to ≤ 2 Var_q(d), with Var_q(d) ≤ Σ_k q_k d̃_k² ≤ max_k q_k ‖d̃‖² and
    Var_q(d) ≤ ¼ range(d)² ≤ ½‖d̃‖²; so Var_{q(t)}(d_i) ≤ c(ε)‖d̃_i‖² on the whole segment (step 2).
    Because ρ_i sums to 0, ρ_iᵀV = ρ_iᵀ(V − 1v̄ᵀ), so ‖ρ_iᵀV‖ ≤ ∫₀¹(1 − t)dt · 2c(ε)‖d̃_i‖² R_V and
        ‖[ρ_iᵀV]_i‖_F ≤ c(ε) R_V Σ_i ‖d̃_i‖² ≤ c(ε) R_V D̃(ε)²                 [remainder term].
    The linear part, row i: (J_i d_i)ᵀV = d_iᵀ J_i V, split along (1):
    query side  δ_i A Xᵀ J_i V: a block-diagonal operator in Δ, norm σ_Q = max_i ‖A Xᵀ J_i V‖₂ (exact);
    key side    x_i A Δᵀ J_i V =: K(Δ)_i: a dense operator. In column-major vec, vec(XAΔᵀ) = (I_n ⊗ XA)
                vec(Δᵀ), the row Jacobians act as 𝒥 = Σ_i J_i ⊗ e_ie_iᵀ, and the values as Vᵀ ⊗ I_n, so
                vec(K(Δ)) = (Vᵀ ⊗ I_n) 𝒥 (I_n ⊗ XA) vec(Δᵀ). Alone, (I_n ⊗ XA) has norm ‖XA‖₂; the
                useful norm is that of the composition, σ_K = σ_max(K), computed by power iteration
                applying K and Kᵀ matrix-free, accelerated by Lanczos on the same Krylov space
                (``attention.operator_norm``), never forming a Kronecker product. Rigorous closed-form upper bounds (used by ``key_norm="closed_form"``), with
                a_iᵀ = x_iA and B_i = J_iV: σ_K ≤ ‖diag(‖B_i‖₂) XA‖₂ and σ_K ≤ √λ_max(Σ_i ‖a_i‖² B_iB_iᵀ).
    second order δ_i A Δᵀ J_i V: ≤ ‖δ_i‖ ‖A‖₂ ε ‖J_iV‖₂, so ≤ ‖A‖₂ max_i ‖J_iV‖₂ ε².
(5) Fine-grained bound (sum of (3), (4)):
        B_fine(ε) = (‖P‖₂ + c(ε)D̃(ε))‖W_V‖₂ε + (σ_Q + σ_K)ε + ‖A‖₂ max_i‖J_iV‖₂ ε² + c(ε)R_V D̃(ε)².
    Its ε-coefficient ‖P‖₂‖W_V‖₂ + σ_Q + σ_K bounds the Jacobian norm of F at X (first order); the other
    terms are the exact price of finite ε.
(5') Multi-head layer G(X) = Σ_h F_h(X) (W_V^h includes W_O^h): the per-head first-order terms add up by the
    triangle inequality, which is loose (heads partly cancel). The joint bound keeps the first order exact,
        B_joint(ε) = ‖∂G/∂X‖ ε + Σ_h [c(ε)D̃_h(ε)‖W_V^h‖₂ε + ‖A_h‖₂ max_i‖J_iV_h‖₂ ε² + c(ε)R_{V,h} D̃_h(ε)²],
    because G(X') − G(X) − ∂G/∂X[Δ] = Σ_h [(P'_h − P_h)ΔW_V^h + (J_i(ΔA_hΔᵀ)_i)ᵀV_h rows + ρ_h], each bounded
    in (3)–(4). ‖∂G/∂X‖ (Frobenius to Frobenius) comes from Lanczos through jvp/vjp, with the same
    caveat as σ_K; it has no closed-form counterpart here, so the rigorous mode does not use B_joint.
(6) Naive bound (global norms only): ‖P'‖₂ ≤ ‖P'‖_F ≤ √n, ‖XW_V‖₂ ≤ ‖X‖₂‖W_V‖₂ and (2) with the
    uncentred ‖D‖_F ≤ 2‖A‖₂‖X‖₂ε + ‖A‖₂ε², and the global ½ of step (2):
        B_naive(ε) = √n ‖W_V‖₂ ε + ½‖A‖₂(2‖X‖₂ε + ε²)‖X‖₂‖W_V‖₂.
    B_fine can exceed B_naive at large ε (its remainder is quadratic in ‖XA‖₂ε); certify with the minimum
    (for a layer: min(Σ_h min(B_naive,h, B_fine,h), B_joint), ``layer_bound(mode="min")``).

Soundness caveats: σ_K and ‖∂G/∂X‖ are Krylov (power/Lanczos) estimates, lower estimates that are sound
up to their convergence, whose residual is reported (standard in the literature, e.g. Tsuzuku et al.
2018). Plain power iteration with 50 steps was observed ~1 % low on trained ViT layers with clustered top
singular values (an attack then exceeded B_joint); Lanczos, the default, converges far faster on the same
budget. ``key_norm="closed_form"`` is rigorous. Floating-point rounding is not accounted for.
"""
from __future__ import annotations

import functools
from typing import Callable, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attention._checks import check_matrix
from attention.operator_norm import spectral_norm, top_singular_value

KeyNorm = Literal["power", "closed_form"]
KEY_NORMS = ("power", "closed_form")


class HeadConstants(NamedTuple):
  """ε-independent quantities of one head at its input X; every field is a scalar (or, vmapped, [...]).

  Attributes:
    n_tokens: n, the number of tokens (float).
    p_norm: ‖P‖₂ of the attention matrix at X.
    p_max: p* = max_ik P_ik, the largest attention weight.
    wv_norm: ‖W_V‖₂.
    a_norm: ‖A‖₂.
    x_norm: ‖X‖₂.
    xa_norm: ‖XA‖₂ (key-side logit sensitivity).
    xca_norm: ‖X_c Aᵀ‖₂ with centred tokens (query-side logit sensitivity).
    query_norm: σ_Q = max_i ‖A Xᵀ J_i V‖₂, exact norm of the query-side operator.
    key_norm: σ_K by Lanczos/power iteration (a converged lower estimate of the key-side norm).
    key_norm_upper: rigorous closed-form upper bound on σ_K (module docstring, step 4).
    key_gap: relative residual of the Krylov estimate (0 when converged).
    jv_norm: max_i ‖J_i V‖₂.
    value_radius: R_V = max_k ‖v_k − v̄‖₂, radius of the value rows about their mean.
  """
  n_tokens: jnp.ndarray
  p_norm: jnp.ndarray
  p_max: jnp.ndarray
  wv_norm: jnp.ndarray
  a_norm: jnp.ndarray
  x_norm: jnp.ndarray
  xa_norm: jnp.ndarray
  xca_norm: jnp.ndarray
  query_norm: jnp.ndarray
  key_norm: jnp.ndarray
  key_norm_upper: jnp.ndarray
  key_gap: jnp.ndarray
  jv_norm: jnp.ndarray
  value_radius: jnp.ndarray


def check_head(x_NxD, a_DxD, w_v_DxE):
  """Validates one head's input and weights; returns them as float arrays.

  Raises:
    ValueError: naming the argument, for wrong ranks, mismatched dimensions or non-finite values.
  """
  x_NxD = check_matrix(x_NxD, "x")
  a_DxD = check_matrix(a_DxD, "a")
  w_v_DxE = check_matrix(w_v_DxE, "w_v")
  d = x_NxD.shape[1]
  if a_DxD.shape != (d, d):
    raise ValueError(f"a must have shape [d, d] = [{d}, {d}] to match x [n, d], got {tuple(a_DxD.shape)}")
  if w_v_DxE.shape[0] != d:
    raise ValueError(f"w_v must have shape [d, e] with d = {d}, got {tuple(w_v_DxE.shape)}")
  return x_NxD, a_DxD, w_v_DxE


def check_eps(eps, name: str = "eps"):
  """Returns eps as an array after checking it is finite and ≥ 0 (concrete values only).

  Raises:
    ValueError: naming ``name``, for a negative, NaN or infinite radius.
  """
  if isinstance(eps, jax.core.Tracer):
    return eps
  arr = np.asarray(eps, dtype=float)
  if not np.all(np.isfinite(arr)) or np.any(arr < 0):
    raise ValueError(f"{name} must be a finite radius ≥ 0 (Frobenius norm of the perturbation), got {eps!r}")
  return jnp.asarray(eps)


@jax.default_matmul_precision("highest")
def attention_probs(x_NxD, a_DxD) -> jnp.ndarray:
  """P = rowsoftmax(X A Xᵀ), shape [n, n]; row i attends from token i (query) to all keys."""
  return jax.nn.softmax(x_NxD @ a_DxD @ x_NxD.T, axis=-1)


@jax.default_matmul_precision("highest")
def self_attention(x_NxD, a_DxD, w_v_DxE) -> jnp.ndarray:
  """One head F(X) = rowsoftmax(X A Xᵀ) X W_V, shape [n, e] (docs/theory.md#local-sensitivity-of-self-attention)."""
  return attention_probs(x_NxD, a_DxD) @ (x_NxD @ w_v_DxE)


def softmax_jacobian_rows(p_NxN, u_NxN) -> jnp.ndarray:
  """Applies every row's softmax Jacobian to the same row of u: row i -> J_i u_i = p_i ⊙ (u_i − p_iᵀu_i).

  Args:
    p_NxN: attention probabilities, rows on the simplex.
    u_NxN: logit perturbations, row i perturbs row i's logits.

  Returns:
    Array with shape [n, n].
  """
  return p_NxN * (u_NxN - jnp.sum(p_NxN * u_NxN, axis=-1, keepdims=True))


@jax.default_matmul_precision("highest")
def value_operator(x_NxD, a_DxD, w_v_DxE) -> Callable:
  """Δ [n, d] -> P Δ W_V [n, e]: the value term's linear part (norm ‖P‖₂‖W_V‖₂)."""
  p_NxN = attention_probs(x_NxD, a_DxD)
  return jax.default_matmul_precision("highest")(lambda delta_NxD: p_NxN @ delta_NxD @ w_v_DxE)


@jax.default_matmul_precision("highest")
def query_side_operator(x_NxD, a_DxD, w_v_DxE) -> Callable:
  """Δ [n, d] -> rows δ_i A Xᵀ J_i V [n, e]: softmax Jacobians applied to the query-side logits ΔAXᵀ."""
  p_NxN = attention_probs(x_NxD, a_DxD)
  v_NxE = x_NxD @ w_v_DxE
  return jax.default_matmul_precision("highest")(lambda delta_NxD: softmax_jacobian_rows(p_NxN, delta_NxD @ a_DxD @ x_NxD.T) @ v_NxE)


@jax.default_matmul_precision("highest")
def key_side_operator(x_NxD, a_DxD, w_v_DxE) -> Callable:
  """Δ [n, d] -> rows x_i A Δᵀ J_i V [n, e]: softmax Jacobians applied to the key-side logits XAΔᵀ.

  Matrix-free form of (Vᵀ ⊗ I_n)·(Σ_i J_i ⊗ e_ie_iᵀ)·(I_n ⊗ XA)·vec(Δᵀ) (column-major vec): costs
  O(n²(d + e)) per application instead of the O(n⁴de) of the Kronecker form.
  """
  p_NxN = attention_probs(x_NxD, a_DxD)
  v_NxE = x_NxD @ w_v_DxE
  xa_NxD = x_NxD @ a_DxD
  return jax.default_matmul_precision("highest")(lambda delta_NxD: softmax_jacobian_rows(p_NxN, xa_NxD @ delta_NxD.T) @ v_NxE)


def head_constants(x_NxD, a_DxD, w_v_DxE, *, key, power_iters: int = 100) -> HeadConstants:
  """The ε-independent constants of the naive and fine-grained bounds of one head at X.

  Args:
    x_NxD: the head's input tokens X (after normalisation), shape [n, d], float.
    a_DxD: A = W_Q W_Kᵀ/√d_h, shape [d, d].
    w_v_DxE: the value map (times the output projection), shape [d, e].
    key: PRNG key for the Krylov iteration's random start.
    power_iters: Krylov iterations (products with K and Kᵀ; Lanczos steps) for σ_K, ≥ 1.

  Returns:
    ``HeadConstants`` (jit/vmap friendly).

  Raises:
    ValueError: bad shapes or non-finite inputs (``check_head``), power_iters < 1.
  """
  x_NxD, a_DxD, w_v_DxE = check_head(x_NxD, a_DxD, w_v_DxE)
  if not isinstance(power_iters, int) or power_iters < 1:
    raise ValueError(f"power_iters must be an integer ≥ 1, got {power_iters!r}")
  return _head_constants(x_NxD, a_DxD, w_v_DxE, key, power_iters)


@functools.partial(jax.jit, static_argnums=4)
@jax.default_matmul_precision("highest")
def _head_constants(x_NxD, a_DxD, w_v_DxE, key, power_iters: int) -> HeadConstants:
  dtype = x_NxD.dtype
  n = x_NxD.shape[0]
  p_NxN = attention_probs(x_NxD, a_DxD)
  v_NxE = x_NxD @ w_v_DxE
  xa_NxD = x_NxD @ a_DxD
  xc_NxD = x_NxD - jnp.mean(x_NxD, axis=0, keepdims=True)
  # B_i = J_i V for every row i: [n, n, e].
  b_NxNxE = p_NxN[:, :, None] * (v_NxE[None, :, :] - (p_NxN @ v_NxE)[:, None, :])
  b_norm_N = spectral_norm(b_NxNxE)
  # Query side: M_i = A Xᵀ J_i V, [n, d, e].
  m_NxDxE = jnp.einsum("cd,kd,ike->ice", a_DxD, x_NxD, b_NxNxE)
  key_est = top_singular_value(key_side_operator(x_NxD, a_DxD, w_v_DxE), jnp.zeros_like(x_NxD), key=key,
                               iters=power_iters)
  return HeadConstants(
      n_tokens=jnp.asarray(n, dtype),
      p_norm=spectral_norm(p_NxN),
      p_max=jnp.max(p_NxN),
      wv_norm=spectral_norm(w_v_DxE),
      a_norm=spectral_norm(a_DxD),
      x_norm=spectral_norm(x_NxD),
      xa_norm=spectral_norm(xa_NxD),
      xca_norm=spectral_norm(xc_NxD @ a_DxD.T),
      query_norm=jnp.max(spectral_norm(m_NxDxE)),
      key_norm=key_est.sigma,
      key_norm_upper=_closed_form_key_norm(xa_NxD, b_NxNxE, b_norm_N),
      key_gap=key_est.gap,
      jv_norm=jnp.max(b_norm_N),
      value_radius=jnp.max(jnp.linalg.norm(v_NxE - jnp.mean(v_NxE, axis=0, keepdims=True), axis=1)),
  )


def _closed_form_key_norm(xa_NxD, b_NxNxE, b_norm_N) -> jnp.ndarray:
  """min(‖diag(‖B_i‖₂) XA‖₂, √λ_max(Σ_i ‖a_i‖² B_iB_iᵀ)) ≥ σ_K (module docstring, step 4), from XA, the
  B_i = J_iV [n, n, e] and their norms ‖B_i‖₂ [n]."""
  upper_rows = spectral_norm(b_norm_N[:, None] * xa_NxD)
  gram_NxN = jnp.einsum("i,ike,ile->kl", jnp.sum(xa_NxD ** 2, axis=1), b_NxNxE, b_NxNxE)
  upper_cols = jnp.sqrt(jnp.maximum(jnp.linalg.eigvalsh(gram_NxN)[-1], 0.0))
  return jnp.minimum(upper_rows, upper_cols)


@jax.jit
@jax.default_matmul_precision("highest")
def _closed_form_key_norm_at(x_NxD, a_DxD, w_v_DxE) -> jnp.ndarray:
  p_NxN = attention_probs(x_NxD, a_DxD)
  v_NxE = x_NxD @ w_v_DxE
  b_NxNxE = p_NxN[:, :, None] * (v_NxE[None, :, :] - (p_NxN @ v_NxE)[:, None, :])
  return _closed_form_key_norm(x_NxD @ a_DxD, b_NxNxE, spectral_norm(b_NxNxE))


def closed_form_key_norm(x_NxD, a_DxD, w_v_DxE) -> jnp.ndarray:
  """Rigorous closed-form upper bound on the key-side norm σ_K of one head at X (module docstring, step 4;
  ``HeadConstants.key_norm_upper``, what ``key_norm="closed_form"`` certifies with): with a_iᵀ = x_iA and
  B_i = J_iV, σ_K ≤ min(‖diag(‖B_i‖₂) XA‖₂, √λ_max(Σ_i ‖a_i‖² B_iB_iᵀ)). No Krylov estimate.

  Args:
    x_NxD, a_DxD, w_v_DxE: as ``head_constants``.

  Returns:
    A scalar.

  Raises:
    ValueError: as ``check_head``.
  """
  return _closed_form_key_norm_at(*check_head(x_NxD, a_DxD, w_v_DxE))


def logit_shift_bound(c: HeadConstants, eps) -> jnp.ndarray:
  """D̃(ε) = (‖X_cAᵀ‖₂ + ‖XA‖₂)ε + ‖A‖₂ε² ≥ ‖D̃‖_F, the row-centred logit change (step 1)."""
  return (c.xca_norm + c.xa_norm) * eps + c.a_norm * eps ** 2


def softmax_jacobian_bound(c: HeadConstants, eps) -> jnp.ndarray:
  """c(ε) = min(½, p*·exp(√2 D̃(ε))) ≥ ‖J(q)‖₂ and ≥ Var_q(d)/‖d̃‖² on the whole segment (step 2)."""
  return jnp.minimum(0.5, c.p_max * jnp.exp(jnp.sqrt(2.0) * logit_shift_bound(c, eps)))


class BoundTerms(NamedTuple):
  """Every term of the fine-grained and naive bounds of one head at radius ε (module docstring, steps 3–6);
  each field is an array of the broadcast shape of ε and the constants' fields.

  Attributes:
    value: (‖P‖₂ + c(ε)D̃(ε))‖W_V‖₂ε, the value term (step 3).
    query: σ_Q ε, the query side of the linear softmax term (step 4).
    key: σ_K ε, the key side (Krylov estimate or its closed-form upper bound).
    second_order: ‖A‖₂ max_i‖J_iV‖₂ ε².
    remainder: c(ε) R_V D̃(ε)², the Taylor remainder.
    fine: B_fine(ε), the sum of the five terms above (step 5).
    first_order: (‖P‖₂‖W_V‖₂ + σ_Q + σ_K)ε, the part linear in ε.
    higher_order: fine − first_order.
    naive_value: √n ‖W_V‖₂ ε (step 6).
    naive_softmax: ½‖A‖₂(2‖X‖₂ε + ε²)‖X‖₂‖W_V‖₂.
    naive: B_naive(ε) = naive_value + naive_softmax.
  """
  value: jnp.ndarray
  query: jnp.ndarray
  key: jnp.ndarray
  second_order: jnp.ndarray
  remainder: jnp.ndarray
  fine: jnp.ndarray
  first_order: jnp.ndarray
  higher_order: jnp.ndarray
  naive_value: jnp.ndarray
  naive_softmax: jnp.ndarray
  naive: jnp.ndarray


def bound_terms(c: HeadConstants, eps, *, key_norm: KeyNorm = "power") -> BoundTerms:
  """Every term of the fine-grained and naive bounds at radius ε (module docstring, steps 3–6).

  Args:
    c: ``HeadConstants`` of the head at X.
    eps: radius ε ≥ 0 of ‖Δ‖_F, scalar or array broadcastable against c's fields.
    key_norm: "power" (σ_K by Lanczos/power iteration) or "closed_form" (its rigorous upper bound).

  Returns:
    ``BoundTerms``: the fine-grained terms (value, query, key, second_order, remainder) and their sum
    fine, its split into first_order and higher_order, and naive_value, naive_softmax and their sum naive.

  Raises:
    ValueError: negative or non-finite eps, unknown key_norm.
  """
  if key_norm not in KEY_NORMS:
    raise ValueError(f"key_norm must be one of {KEY_NORMS}, got {key_norm!r}")
  eps = check_eps(eps)
  sigma_k = c.key_norm if key_norm == "power" else c.key_norm_upper
  shift = logit_shift_bound(c, eps)
  jac = softmax_jacobian_bound(c, eps)
  value = (c.p_norm + jac * shift) * c.wv_norm * eps
  query = c.query_norm * eps
  key = sigma_k * eps
  second_order = c.a_norm * c.jv_norm * eps ** 2
  remainder = jac * c.value_radius * shift ** 2
  fine = sum((value, query, key, second_order, remainder))
  first_order = value - jac * shift * c.wv_norm * eps + query + key
  naive_value = jnp.sqrt(c.n_tokens) * c.wv_norm * eps
  naive_softmax = 0.5 * c.a_norm * (2 * c.x_norm * eps + eps ** 2) * c.x_norm * c.wv_norm
  return BoundTerms(value=value, query=query, key=key, second_order=second_order, remainder=remainder,
                    fine=fine, first_order=first_order, higher_order=fine - first_order,
                    naive_value=naive_value, naive_softmax=naive_softmax, naive=naive_value + naive_softmax)


def naive_bound(c: HeadConstants, eps) -> jnp.ndarray:
  """B_naive(ε) ≥ ‖F(X + Δ) − F(X)‖_F for all ‖Δ‖_F ≤ ε, from global norms (step 6)."""
  return bound_terms(c, eps).naive


def fine_grained_bound(c: HeadConstants, eps, *, key_norm: KeyNorm = "power") -> jnp.ndarray:
  """B_fine(ε) ≥ ‖F(X + Δ) − F(X)‖_F for all ‖Δ‖_F ≤ ε, valid for every ε (step 5)."""
  return bound_terms(c, eps, key_norm=key_norm).fine


def local_bound(c: HeadConstants, eps, *, key_norm: KeyNorm = "power") -> jnp.ndarray:
  """min(B_naive(ε), B_fine(ε)): never looser than the naive bound, by construction."""
  terms = bound_terms(c, eps, key_norm=key_norm)
  return jnp.minimum(terms.naive, terms.fine)


class LayerConstants(NamedTuple):
  """ε-independent constants of a multi-head layer G(X) = Σ_h F_h(X) at X.

  Attributes:
    heads: ``HeadConstants`` whose fields have a leading head axis [H] (or [..., H] when vmapped).
    jacobian_norm: ‖∂G/∂X‖ by Lanczos (a converged lower estimate), scalar.
    jacobian_gap: its relative convergence gap.
  """
  heads: HeadConstants
  jacobian_norm: jnp.ndarray
  jacobian_gap: jnp.ndarray


LAYER_MODES = ("naive", "fine", "joint", "min")


@jax.default_matmul_precision("highest")
def multi_head_attention(x_NxD, a_HxDxD, w_v_HxDxE) -> jnp.ndarray:
  """G(X) = Σ_h rowsoftmax(X A_h Xᵀ) X W_V^h, shape [n, e] (output bias omitted: it cancels)."""
  probs_HxNxN = jax.nn.softmax(jnp.einsum("nd,hde,me->hnm", x_NxD, a_HxDxD, x_NxD), axis=-1)
  return jnp.einsum("hnm,md,hde->ne", probs_HxNxN, x_NxD, w_v_HxDxE)


def layer_constants(x_NxD, a_HxDxD, w_v_HxDxE, *, key, power_iters: int = 100) -> LayerConstants:
  """``HeadConstants`` of every head and the joint Jacobian norm of the layer at X.

  Args:
    x_NxD: the layer's input tokens X, shape [n, d].
    a_HxDxD: A_h of every head, shape [H, d, d].
    w_v_HxDxE: W_V^h (times W_O^h) of every head, shape [H, d, e].
    key: PRNG key; head h uses fold_in(key, h), the joint Jacobian fold_in(key, H).
    power_iters: Krylov iterations (≥ 1) for σ_K and for ‖∂G/∂X‖.

  Returns:
    ``LayerConstants``.

  Raises:
    ValueError: wrong ranks or mismatched head counts, and as ``head_constants``.
  """
  a_HxDxD, w_v_HxDxE = jnp.asarray(a_HxDxD), jnp.asarray(w_v_HxDxE)
  if a_HxDxD.ndim != 3 or w_v_HxDxE.ndim != 3 or a_HxDxD.shape[0] != w_v_HxDxE.shape[0]:
    raise ValueError(f"a must be [H, d, d] and w_v [H, d, e] with the same H, got {tuple(a_HxDxD.shape)} "
                     f"and {tuple(w_v_HxDxE.shape)}")
  check_head(x_NxD, a_HxDxD[0], w_v_HxDxE[0])
  return _layer_constants(jnp.asarray(x_NxD), a_HxDxD, w_v_HxDxE, key, power_iters)


@functools.partial(jax.jit, static_argnums=4)
@jax.default_matmul_precision("highest")
def _layer_constants(x_NxD, a_HxDxD, w_v_HxDxE, key, power_iters: int) -> LayerConstants:
  num_heads = a_HxDxD.shape[0]
  heads = jax.vmap(lambda h, a, w: head_constants(x_NxD, a, w, key=jax.random.fold_in(key, h),
                                                  power_iters=power_iters))(
      jnp.arange(num_heads), a_HxDxD, w_v_HxDxE)
  est = top_singular_value(
      lambda t: jax.jvp(lambda z: multi_head_attention(z, a_HxDxD, w_v_HxDxE), (x_NxD,), (t,))[1],
      jnp.zeros_like(x_NxD), key=jax.random.fold_in(key, num_heads), iters=power_iters)
  return LayerConstants(heads, est.sigma, est.gap)


class LayerBoundTerms(NamedTuple):
  """Bounds on ‖G(X + Δ) − G(X)‖_F over ‖Δ‖_F ≤ ε for a multi-head layer (steps 5', 6); each field is an
  array of the shape of ``LayerConstants.jacobian_norm``.

  Attributes:
    naive: Σ_h B_naive,h(ε).
    fine: Σ_h B_fine,h(ε).
    joint: B_joint(ε) (inf with key_norm="closed_form", which has no joint form).
    min: min(Σ_h min(B_naive,h, B_fine,h), B_joint), what the certificate uses.
  """
  naive: jnp.ndarray
  fine: jnp.ndarray
  joint: jnp.ndarray
  min: jnp.ndarray


def layer_bound_terms(lc: LayerConstants, eps, *, key_norm: KeyNorm = "power") -> LayerBoundTerms:
  """Bounds on ‖G(X + Δ) − G(X)‖_F over ‖Δ‖_F ≤ ε for the whole layer (steps 5', 6).

  Args:
    lc: ``LayerConstants`` (head fields [..., H], the rest [...]).
    eps: radius ε ≥ 0, broadcastable against lc.jacobian_norm (the head axis is added here).
    key_norm: as ``bound_terms``. With "closed_form" the joint bound (Krylov estimate only) is inf and
      "min" is min(Σ_h min(naive, fine)) alone, so the result is rigorous.

  Returns:
    ``LayerBoundTerms`` (naive, fine, joint, min), arrays of the shape of lc.jacobian_norm.

  Raises:
    ValueError: negative or non-finite eps, unknown key_norm.
  """
  eps = jnp.broadcast_to(check_eps(eps), jnp.shape(lc.jacobian_norm))
  terms = bound_terms(lc.heads, eps[..., None], key_norm=key_norm)
  naive, fine = jnp.sum(terms.naive, axis=-1), jnp.sum(terms.fine, axis=-1)
  per_head_min = jnp.sum(jnp.minimum(terms.naive, terms.fine), axis=-1)
  if key_norm == "power":
    joint = lc.jacobian_norm * eps + jnp.sum(terms.higher_order, axis=-1)
  else:
    joint = jnp.full_like(per_head_min, jnp.inf)
  return LayerBoundTerms(naive=naive, fine=fine, joint=joint, min=jnp.minimum(per_head_min, joint))


def layer_bound(lc: LayerConstants, eps, *, mode: str = "min", key_norm: KeyNorm = "power") -> jnp.ndarray:
  """One of ``layer_bound_terms``: mode in ("naive", "fine", "joint", "min").

  Raises:
    ValueError: unknown mode, "joint" with key_norm="closed_form", and as ``bound_terms``.
  """
  if mode not in LAYER_MODES:
    raise ValueError(f"mode must be one of {LAYER_MODES}, got {mode!r}")
  if mode == "joint" and key_norm != "power":
    raise ValueError("mode='joint' uses a Krylov estimate of ‖∂G/∂X‖; it has no key_norm='closed_form' form")
  return getattr(layer_bound_terms(lc, eps, key_norm=key_norm), mode)


@jax.default_matmul_precision("highest")
def jacobian_norm(layer_fn: Callable, x, *, key, iters: int = 100) -> jnp.ndarray:
  """‖∂F/∂X‖ at x (Frobenius to Frobenius) by Lanczos through jvp/vjp: the first-order local
  Lipschitz constant, which the ε-coefficient of B_fine bounds. Scalar (a lower estimate)."""
  x = jnp.asarray(x)
  return top_singular_value(lambda t: jax.jvp(layer_fn, (x,), (t,))[1], jnp.zeros_like(x), key=key,
                            iters=iters).sigma


def _project(delta, eps):
  norm = jnp.sqrt(jnp.sum(delta ** 2))
  return delta * jnp.minimum(1.0, eps / jnp.maximum(norm, jnp.finfo(delta.dtype).tiny))


@jax.default_matmul_precision("highest")
def max_deviation(layer_fn: Callable, x, eps, *, key, steps: int = 100, restarts: int = 4,
                  jacobian_start: bool = True) -> tuple[jnp.ndarray, jnp.ndarray]:
  """Largest ‖F(x + Δ) − F(x)‖_F found by projected gradient ascent over ‖Δ‖_F ≤ ε (an attack on the bound).

  Normalised-gradient steps of length η_t·ε (η decays linearly from 0.5 to 0.02), each followed by the
  projection Δ ← Δ·min(1, ε/‖Δ‖_F); starts on the sphere ‖Δ‖_F = ε: ``restarts`` Gaussian directions
  and, with ``jacobian_start``, ± the top right singular vector of ∂F/∂X (Lanczos). The best
  iterate over all starts and steps is returned, so the result is a lower bound on the true maximum.

  Args:
    layer_fn: F, a function of one array x (any shape) returning an array.
    x: the point X, float array.
    eps: radius ε ≥ 0 (Frobenius).
    key: PRNG key; split into the random starts and the power-iteration start.
    steps: ascent steps ≥ 0; restarts: random starts ≥ 0 (≥ 1 start in all).

  Returns:
    (deviation, delta): the best ‖F(x + Δ) − F(x)‖_F (scalar) and its Δ (shape of x, ‖Δ‖_F ≤ ε).

  Raises:
    ValueError: negative or non-finite eps, steps < 0, no start at all.
  """
  eps = check_eps(eps)
  if steps < 0 or restarts < 0 or (restarts == 0 and not jacobian_start):
    raise ValueError(f"need steps ≥ 0, restarts ≥ 0 and at least one start, got steps={steps}, "
                     f"restarts={restarts}, jacobian_start={jacobian_start}")
  x = jnp.asarray(x)
  f0 = layer_fn(x)
  start_key, power_key = jax.random.split(key)
  starts = [jax.random.normal(start_key, (restarts,) + x.shape, x.dtype)] if restarts else []
  if jacobian_start:
    v = top_singular_value(lambda t: jax.jvp(layer_fn, (x,), (t,))[1], jnp.zeros_like(x), key=power_key,
                           iters=30).vector
    starts.append(jnp.stack([v, -v]))
  starts = jnp.concatenate(starts)
  norms = jnp.sqrt(jnp.sum(starts ** 2, axis=tuple(range(1, starts.ndim)), keepdims=True))
  starts = eps * starts / jnp.maximum(norms, jnp.finfo(x.dtype).tiny)

  def deviation(delta):
    return jnp.sqrt(jnp.sum((layer_fn(x + delta) - f0) ** 2))

  grad_fn = jax.value_and_grad(lambda d: jnp.sum((layer_fn(x + d) - f0) ** 2))

  def ascend(delta0):
    def body(t, carry):
      delta, best, best_delta = carry
      value, g = grad_fn(delta)
      dev = jnp.sqrt(value)
      better = dev > best
      best, best_delta = jnp.where(better, dev, best), jnp.where(better, delta, best_delta)
      eta = 0.5 - 0.48 * t / jnp.maximum(steps - 1, 1)
      g_norm = jnp.sqrt(jnp.sum(g ** 2))
      step = eta * eps * g / jnp.maximum(g_norm, jnp.finfo(x.dtype).tiny)
      return _project(delta + step, eps), best, best_delta

    delta, best, best_delta = jax.lax.fori_loop(0, steps, body, (delta0, jnp.zeros((), x.dtype), delta0))
    last = deviation(delta)
    return jnp.where(last > best, last, best), jnp.where(last > best, delta, best_delta)

  devs, deltas = jax.vmap(ascend)(starts)
  i = jnp.argmax(devs)
  return devs[i], deltas[i]
