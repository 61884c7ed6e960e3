"""Gradient alignment of the two maps of a differential head, Lemma 1 and Theorem 3 of arXiv 2510.00517.

For one sample x and one differential head with maps A₁(x), A₂(x) ∈ R^{n×n} and their full input
Jacobians J₁ = ∂A₁/∂x, J₂ = ∂A₂/∂x (λ held constant, before the RMSNorm; REFERENCE.md §4):

  cos θ = ⟨J₁, J₂⟩_F / (‖J₁‖_F ‖J₂‖_F),   ρ = ‖J₂‖_F / ‖J₁‖_F,   γ = ‖J₁‖_F / ‖J_std‖_F,

with J_std the Jacobian of the matched ViT's head at the same layer. Lemma 1 (exact):
‖J_DA‖² = ‖J₁‖²(1 + λ²ρ² − 2λρ cos θ) for A_DA = A₁ − λA₂. Theorem 3: DA is more sensitive than the
standard head, ‖J_DA‖ > ‖J_std‖, iff cos θ < (1 + λ²ρ² − γ⁻²)/(2λρ) when λρ > 0; the inequality reverses
when λρ < 0, and at λρ = 0 it reads γ > 1.

All three quantities come from the Gram matrix of the Jacobians, ⟨J_a, J_b⟩_F = Σᵢ ⟨J_a eᵢ, J_b eᵢ⟩ over the
standard basis eᵢ of the input, computed with forward-mode products in chunks (``jacobian_gram``), so the
[n², d] Jacobians are never held in memory at once.

The matched head of differential head h is the ViT's head 2h (its query/key columns are those of A₁ under
the reference interleaved layout, ``attention.differential``); the two models are trained separately, so
this pairing is by position only.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Callable, NamedTuple

import jax
import jax.experimental
import jax.numpy as jnp
import numpy as np

from attention.vit import ViTConfig, attention_maps


def cosine_alignment(j1, j2) -> tuple[jnp.ndarray, jnp.ndarray]:
  """cos θ and ρ of two explicit Jacobians of the same shape (Frobenius inner product).

  Args:
    j1, j2: arrays of equal shape [..., ] (any rank; all axes are flattened).

  Returns:
    (cos θ, ρ = ‖j2‖_F / ‖j1‖_F) as scalars.

  Raises:
    ValueError: shapes differ.
  """
  j1, j2 = jnp.asarray(j1), jnp.asarray(j2)
  if j1.shape != j2.shape:
    raise ValueError(f"j1 and j2 must have the same shape, got {j1.shape} and {j2.shape}")
  n1, n2 = jnp.linalg.norm(j1.ravel()), jnp.linalg.norm(j2.ravel())
  return jnp.vdot(j1.ravel(), j2.ravel()) / (n1 * n2), n2 / n1


def lemma1_norm(norm_a1, rho, cos_theta, lam) -> jnp.ndarray:
  """‖∇A_DA‖ = ‖∇A₁‖·sqrt(1 + λ²ρ² − 2λρ cos θ) (arXiv 2510.00517, Lemma 1); broadcasts elementwise."""
  return norm_a1 * jnp.sqrt(jnp.maximum(1 + (lam * rho) ** 2 - 2 * lam * rho * cos_theta, 0.0))


def theorem3_threshold(lam, rho, gamma) -> jnp.ndarray:
  """(1 + λ²ρ² − γ⁻²) / (2λρ), the cos θ threshold of Theorem 3 (±inf where λρ = 0)."""
  return (1 + (lam * rho) ** 2 - gamma ** -2.0) / (2 * lam * rho)


def theorem3_predicts_da_more_sensitive(cos_theta, lam, rho, gamma) -> jnp.ndarray:
  """Theorem 3's condition for ‖∇A_DA‖ > ‖∇A_std‖, with the reversal for λρ < 0; elementwise bool.

  Written without dividing by λρ: 2λρ cos θ < 1 + λ²ρ² − γ⁻² covers both signs and λρ = 0 (γ > 1).
  """
  return 2 * lam * rho * cos_theta < 1 + (lam * rho) ** 2 - gamma ** -2.0


def jacobian_gram(maps_fn: Callable, x, *, chunk_size: int = 256) -> jnp.ndarray:
  """Per-group Gram matrices of the full input Jacobians of maps, for one sample.

  Args:
    maps_fn: x (one sample, any shape) -> maps with shape [G, M, ...]: G groups of M maps each.
    x: one input (e.g. an image [H, W, C]); the Jacobians are taken with respect to all its entries.
    chunk_size: basis directions pushed forward per step (memory ∝ chunk_size · size of the maps).

  Returns:
    [G, M, M] with entry [g, a, b] = ⟨∂maps[g, a]/∂x, ∂maps[g, b]/∂x⟩_F, in the dtype of the maps
    (float64 whenever x64 is enabled).
  """
  if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
    raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
  x = jnp.asarray(x)
  d = x.size
  maps, push_forward = jax.linearize(maps_fn, x)
  if maps.ndim < 2:
    raise ValueError(f"maps_fn must return maps with shape [groups, members, ...], got {maps.shape}")
  g, m = maps.shape[:2]
  n_chunks = -(-d // chunk_size)

  def body(gram_GxMxM, start):
    idx_C = start + jnp.arange(chunk_size)
    basis_CxD = jax.nn.one_hot(idx_C, d, dtype=x.dtype)  # rows past d are all zero
    t = jax.vmap(lambda v: push_forward(v.reshape(x.shape)))(basis_CxD).reshape(chunk_size, g, m, -1)
    return gram_GxMxM + jnp.einsum("cgai,cgbi->gab", t, t, preferred_element_type=acc_dtype), None

  # Accumulate in float64 when x64 is enabled (e.g. under jax.experimental.enable_x64), even for a
  # float32 model: the Gram sums d·n² products and Lemma 1 subtracts nearly equal terms.
  acc_dtype = jnp.float64 if jax.config.jax_enable_x64 else maps.dtype
  gram, _ = jax.lax.scan(body, jnp.zeros((g, m, m), acc_dtype), jnp.arange(n_chunks) * chunk_size)
  return gram


class HeadAlignment(NamedTuple):
  """Alignment of every differential head of one sample; arrays [layers, H] unless noted.

  Attributes:
    cos_theta: cos θ between J₁ and J₂.
    rho: ρ = ‖J₂‖/‖J₁‖.
    norm_a1, norm_a2: ‖J₁‖_F, ‖J₂‖_F.
    norm_da: ‖J_DA‖_F computed directly from A_DA = A₁ − λA₂ (forward-mode).
    norm_da_lemma1: ‖J_DA‖_F from Lemma 1 with the measured ‖J₁‖, ρ, cos θ, λ.
    lam: λ of each layer, [layers].
    norm_std: ‖J_std‖_F of the matched ViT's head 2h (NaN without a ViT).
    gamma: γ = ‖J₁‖/‖J_std‖ (NaN without a ViT).
    predicted_da_more_sensitive: Theorem 3's condition (bool).
  """
  cos_theta: np.ndarray
  rho: np.ndarray
  norm_a1: np.ndarray
  norm_a2: np.ndarray
  norm_da: np.ndarray
  norm_da_lemma1: np.ndarray
  lam: np.ndarray
  norm_std: np.ndarray
  gamma: np.ndarray
  predicted_da_more_sensitive: np.ndarray


def _differential_maps_fn(config: ViTConfig, params):
  def maps_fn(x_HxWxC):
    layers = attention_maps(config, params, x_HxWxC[None])
    # [layers, H, 3, n, n]: A₁, A₂ and A_DA = A₁ − λA₂ (λ held constant: it does not depend on x).
    per_layer = [jnp.stack([a.a1[0], a.a2[0], a.a1[0] - jax.lax.stop_gradient(a.lam) * a.a2[0]], axis=1)
                 for a in layers]
    stacked = jnp.stack(per_layer)
    return stacked.reshape((-1,) + stacked.shape[2:])
  return maps_fn


def _standard_maps_fn(config: ViTConfig, params):
  def maps_fn(x_HxWxC):
    stacked = jnp.stack([a.a1[0] for a in attention_maps(config, params, x_HxWxC[None])])  # [L, 2H, n, n]
    return stacked.reshape((-1, 1) + stacked.shape[2:])
  return maps_fn


@functools.partial(jax.jit, static_argnames=("config", "chunk_size"))
def differential_gram(config: ViTConfig, params, x_HxWxC, *, chunk_size: int = 256):
  """[layers, H, 3, 3] Gram of (J₁, J₂, J_DA) per differential head, and λ per layer [layers]."""
  gram = jacobian_gram(_differential_maps_fn(config, params), x_HxWxC, chunk_size=chunk_size)
  lam = jnp.stack([a.lam for a in attention_maps(config, params, x_HxWxC[None])])
  return gram.reshape(config.depth, config.num_heads // 2, 3, 3), lam


@functools.partial(jax.jit, static_argnames=("config", "chunk_size"))
def standard_head_norms(config: ViTConfig, params, x_HxWxC, *, chunk_size: int = 256):
  """‖J_std‖_F of every standard head, [layers, num_heads]."""
  gram = jacobian_gram(_standard_maps_fn(config, params), x_HxWxC, chunk_size=chunk_size)
  return jnp.sqrt(gram[:, 0, 0]).reshape(config.depth, config.num_heads)


def _maybe_x64(enabled: bool):
  return jax.experimental.enable_x64() if enabled else contextlib.nullcontext()


def head_alignment(diff_config: ViTConfig, diff_params, x_HxWxC, *, vit_config: ViTConfig | None = None,
                   vit_params=None, chunk_size: int = 256, float64_gram: bool = True) -> HeadAlignment:
  """cos θ, ρ, γ, Lemma 1 and Theorem 3 for every differential head of one sample.

  Args:
    diff_config, diff_params: a DiffViT (``attention.vit``), attention="differential".
    x_HxWxC: one image [H, W, C] in [0, 1]; Jacobians are taken w.r.t. all its pixels.
    vit_config, vit_params: the matched ViT (same depth, num_heads = 2H), for γ and Theorem 3; optional.
    chunk_size: forward-mode directions per step.
    float64_gram: accumulate the Gram matrices in float64 (``jax.experimental.enable_x64`` around the
      Jacobian products; the model still runs in its own dtype). With float32 accumulation Lemma 1's
      two sides differ by ~1e-4 relative, from the d·n² = 13·10⁶-term sums, not from the identity.

  Returns:
    ``HeadAlignment`` with numpy arrays.

  Raises:
    ValueError: wrong attention kinds, mismatched depth or head counts, or x not of rank 3.
  """
  if diff_config.attention != "differential":
    raise ValueError(f"diff_config.attention must be 'differential', got {diff_config.attention!r}")
  if jnp.ndim(x_HxWxC) != 3:
    raise ValueError(f"x_HxWxC must be one image [H, W, C], got shape {jnp.shape(x_HxWxC)}")
  x_HxWxC = jnp.asarray(x_HxWxC)
  with _maybe_x64(float64_gram):
    gram, lam = differential_gram(diff_config, diff_params, x_HxWxC, chunk_size=chunk_size)
    gram, lam = np.asarray(gram, np.float64), np.asarray(lam, np.float64)
  norm_a1, norm_a2 = np.sqrt(gram[..., 0, 0]), np.sqrt(gram[..., 1, 1])
  cos_theta = gram[..., 0, 1] / (norm_a1 * norm_a2)
  rho = norm_a2 / norm_a1
  lam_LxH = np.broadcast_to(lam[:, None], cos_theta.shape)
  with _maybe_x64(float64_gram):  # the formulas in float64 too, else their float32 rounding shows
    norm_da_lemma1 = np.asarray(lemma1_norm(norm_a1, rho, cos_theta, lam_LxH), np.float64)
  shape = cos_theta.shape
  norm_std = gamma = np.full(shape, np.nan)
  predicted = np.zeros(shape, bool)
  if vit_config is not None:
    if vit_config.attention != "standard" or vit_config.depth != diff_config.depth or \
        vit_config.num_heads != diff_config.num_heads:
      raise ValueError("vit_config must be the standard-attention twin of diff_config "
                       f"(same depth and num_heads), got {vit_config}")
    with _maybe_x64(float64_gram):
      std = np.asarray(standard_head_norms(vit_config, vit_params, x_HxWxC, chunk_size=chunk_size), np.float64)
    norm_std = std[:, 0::2]
    gamma = norm_a1 / norm_std
    with _maybe_x64(float64_gram):
      predicted = np.asarray(theorem3_predicts_da_more_sensitive(cos_theta, lam_LxH, rho, gamma))
  return HeadAlignment(cos_theta, rho, norm_a1, norm_a2, np.sqrt(gram[..., 2, 2]), norm_da_lemma1, lam,
                       norm_std, gamma, predicted)
