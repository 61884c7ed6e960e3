"""1-Lipschitz building blocks for a certifiable ViT: SLL residual layer, bounded normalisation, and a
spectrally normalised linear map.

* SLL (SDP-based Lipschitz Layer; Araujo, Havens, Delattre, Allauzen & Hu, ICLR 2023, Thm. 3):
      h(x) = x − 2 Wᵀ diag(t) relu(W x + b),   t_i = 1 / Σ_j |(W Wᵀ)_ij| q_j / q_i,   q = exp(q̃),
  W [m, d]. Its Jacobian I − 2WᵀTΛW (Λ = diag(relu') ∈ [0, 1]) is symmetric with eigenvalues in [−1, 1]
  whenever WᵀTΛW ⪯ I, which holds because T⁻¹ ⪰ WWᵀ by Gershgorin's theorem applied to Q⁻¹WWᵀQ. Hence
  ‖h(x) − h(y)‖₂ ≤ ‖x − y‖₂. Rows of W that are exactly zero get t_i = 0 (they contribute nothing).
  See docs/theory.md#lipschitz-constrained-vit.
* Bounded normalisation (a LayerNorm replacement): N(x) = c·min(1, r/‖c‖₂), c = x − mean(x)·1. Centring
  is an orthogonal projection and the ball projection is 1-Lipschitz, so N is 1-Lipschitz with output norm
  ≤ r, whereas LayerNorm's division by the standard deviation has no global Lipschitz constant.
* Spectrally normalised linear map: W̃ = W / max(1, σ_max(W)), σ_max by an exact SVD in the forward
  pass, so ‖W̃‖₂ ≤ 1 (Miyato et al., ICLR 2018, with the exact norm instead of one power step).

Every function acts on the last axis and maps a token-wise Frobenius perturbation to one at most as large.
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp


def sll_scaling(w_MxD, q_log_M) -> jnp.ndarray:
  """t_i = q_i / Σ_j |(WWᵀ)_ij| q_j with q = exp(q̃): the SLL diagonal, shape [m] (t_i = 0 for zero rows).

  Args:
    w_MxD: SLL weight W, shape [m, d].
    q_log_M: q̃, shape [m] (any real values).

  Returns:
    Array with shape [m], ≥ 0.
  """
  q_M = jnp.exp(q_log_M - jnp.max(q_log_M))  # t is invariant to rescaling q
  denom_M = jnp.abs(w_MxD @ w_MxD.T) @ q_M
  return jnp.where(denom_M > 0, q_M / jnp.where(denom_M > 0, denom_M, 1.0), 0.0)


def _last_axis(v_M, ndim: int) -> jnp.ndarray:
  """v [m] reshaped to [1, …, 1, m] with ``ndim`` axes (explicit broadcasting)."""
  return jnp.reshape(v_M, (1,) * (ndim - 1) + (-1,))


def sll(x_xD, w_MxD, b_M, q_log_M) -> jnp.ndarray:
  """SLL layer h(x) = x − 2 Wᵀ diag(t) relu(W x + b) on the last axis of x [..., d] (1-Lipschitz)."""
  x_xD = jnp.asarray(x_xD)
  t_M = sll_scaling(w_MxD, q_log_M)
  hidden = jax.nn.relu(x_xD @ w_MxD.T + _last_axis(b_M, x_xD.ndim)) * _last_axis(t_M, x_xD.ndim)
  return x_xD - 2.0 * hidden @ w_MxD


def bounded_norm(x_xD, radius) -> jnp.ndarray:
  """N(x) = (x − mean(x))·min(1, r/‖x − mean(x)‖₂) on the last axis of x [..., d]; 1-Lipschitz.

  Args:
    x_xD: array [..., d].
    radius: r > 0, the largest output norm (√d matches LayerNorm's output norm).

  Returns:
    Array with the shape of x.
  """
  c_xD = x_xD - jnp.mean(x_xD, axis=-1, keepdims=True)
  sq = jnp.sum(c_xD ** 2, axis=-1, keepdims=True)
  safe = jnp.sqrt(jnp.where(sq > radius ** 2, sq, radius ** 2))  # no NaN gradient at c = 0
  return c_xD * (radius / safe)


def spectral_normalized(w_AxB) -> jnp.ndarray:
  """W / max(1, σ_max(W)), so the result has spectral norm ≤ 1; shape [a, b]."""
  sigma = jnp.linalg.svd(w_AxB, compute_uv=False)[0]
  return w_AxB / jnp.maximum(1.0, sigma)


class SLL(nn.Module):
  """Token-wise SLL layer with ``hidden`` units on inputs [..., d] (1-Lipschitz; see module docstring).

  Attributes:
    hidden: m ≥ 1, rows of W.
  """
  hidden: int

  @nn.compact
  def __call__(self, x_xD):
    if self.hidden < 1:
      raise ValueError(f"SLL hidden must be ≥ 1, got {self.hidden}")
    d = x_xD.shape[-1]
    w = self.param("w", nn.initializers.glorot_normal(), (self.hidden, d))
    b = self.param("b", nn.initializers.zeros, (self.hidden,))
    q_log = self.param("q_log", nn.initializers.zeros, (self.hidden,))
    return sll(x_xD, w, b, q_log)


class SpectralDense(nn.Module):
  """Dense layer y = x W̃ + b with ‖W̃‖₂ ≤ 1 (W̃ = W/max(1, σ_max(W))); inputs [..., d_in].

  Attributes:
    features: output width ≥ 1.
  """
  features: int

  @nn.compact
  def __call__(self, x_xI):
    # Not orthogonal: an orthogonal W has all singular values 1, where W/max(1, σ_max(W)) is not
    # differentiable twice over (the kink of max(1, σ) and a repeated σ_max whose singular vectors LAPACK
    # picks arbitrarily), so the first gradient depended on the CPU's LAPACK rounding (README, "Supported
    # versions, and why"). A Gaussian W has a simple σ_max > 1 with probability one.
    kernel = self.param("kernel", nn.initializers.lecun_normal(), (x_xI.shape[-1], self.features))
    bias = self.param("bias", nn.initializers.zeros, (self.features,))
    return x_xI @ spectral_normalized(kernel) + _last_axis(bias, x_xI.ndim)
