"""Gradient alignment of the two maps of a differential head, Lemma 1 and Theorem 3 of arXiv 2510.00517.

For one sample x and one differential head with maps A₁(x), A₂(x) ∈ R^{n×n} and their full input
Jacobians J₁ = ∂A₁/∂x, J₂ = ∂A₂/∂x (λ held constant, before the RMSNorm; docs/theory.md#gradient-alignment):

  cos θ = ⟨J₁, J₂⟩_F / (‖J₁‖_F ‖J₂‖_F),   ρ = ‖J₂‖_F / ‖J₁‖_F,   γ = ‖J₁‖_F / ‖J_std‖_F,

with J_std the Jacobian of the matched ViT's head at the same layer. Lemma 1 (exact):
‖J_DA‖² = ‖J₁‖²(1 + λ²ρ² − 2λρ cos θ) for A_DA = A₁ − λA₂. Theorem 3: DA is more sensitive than the
standard head, ‖J_DA‖ > ‖J_std‖, iff cos θ < (1 + λ²ρ² − γ⁻²)/(2λρ) when λρ > 0; the inequality reverses
when λρ < 0, and at λρ = 0 it reads γ > 1.

All three quantities come from the Gram matrix of the Jacobians, ⟨J_a, J_b⟩_F = Σᵢ ⟨J_a eᵢ, J_b eᵢ⟩ over the
standard basis eᵢ of the input, computed with forward-mode products in chunks (``jacobian_gram``), so the
[n², d] Jacobians are never held in memory at once.

γ compares each differential head with *all* heads of the matched ViT layer (``matched_head_norms``): the two
models are trained separately, so no ViT head corresponds to a differential head, and pairing head h with
ViT head 2h by position (as an earlier version did) left the odd ViT heads unused and the choice arbitrary.
‖J_std‖ of differential head h is the root-mean-square of the layer's standard-head norms, so γ is
invariant to any permutation of the ViT's heads, and Σ_h ‖J_std‖² over the H differential heads is half the
standard layer's Σ_j ‖J_std,j‖² over its 2H heads (the share of H heads in expectation; Theorem 2's layer
ratio sums these squares). The spread of γ against the single heads, ‖J₁‖/max_j ‖J_std,j‖ to
‖J₁‖/min_j ‖J_std,j‖, is kept beside it. Lemma 1, cos θ and ρ do not involve the ViT at all.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attention.safe_math import safe_divide, safe_norm, safe_sqrt
from attention.vit import ViTConfig, attention_maps


@jax.default_matmul_precision("highest")
def cosine_alignment(j1, j2) -> tuple[jnp.ndarray, jnp.ndarray]:
  """cos θ and ρ of two explicit Jacobians of the same shape (Frobenius inner product).

  Args:
    j1, j2: arrays of equal shape [..., ] (any rank; all axes are flattened).

  Returns:
    (cos θ, ρ = ‖j2‖_F / ‖j1‖_F) as scalars. A zero Jacobian has no direction: cos θ = 0 when either is
    zero; ρ = 0 when j2 = 0 and +inf when only j1 = 0. Gradients are finite everywhere (0 at those
    boundaries; ``attention.safe_math``).

  Raises:
    ValueError: shapes differ.
  """
  j1, j2 = jnp.asarray(j1), jnp.asarray(j2)
  if j1.shape != j2.shape:
    raise ValueError(f"j1 and j2 must have the same shape, got {j1.shape} and {j2.shape}")
  n1, n2 = safe_norm(j1.ravel()), safe_norm(j2.ravel())
  rho = jnp.where(n2 > 0, safe_divide(n2, n1, jnp.inf), 0.0)
  return safe_divide(jnp.vdot(j1.ravel(), j2.ravel()), n1 * n2, 0.0), rho


def lemma1_norm(norm_a1, rho, cos_theta, lam) -> jnp.ndarray:
  """‖∇A_DA‖ = ‖∇A₁‖·sqrt(1 + λ²ρ² − 2λρ cos θ) (arXiv 2510.00517, Lemma 1); broadcasts elementwise."""
  return norm_a1 * safe_sqrt(1 + (lam * rho) ** 2 - 2 * lam * rho * cos_theta)


def theorem3_threshold(lam, rho, gamma) -> jnp.ndarray:
  """(1 + λ²ρ² − γ⁻²) / (2λρ), the cos θ threshold of Theorem 3 (±inf where λρ = 0)."""
  return (1 + (lam * rho) ** 2 - gamma ** -2.0) / (2 * lam * rho)


def theorem3_predicts_da_more_sensitive(cos_theta, lam, rho, gamma) -> jnp.ndarray:
  """Theorem 3's condition for ‖∇A_DA‖ > ‖∇A_std‖, with the reversal for λρ < 0; elementwise bool.

  Written without dividing by λρ: 2λρ cos θ < 1 + λ²ρ² − γ⁻² covers both signs and λρ = 0 (γ > 1).
  """
  return 2 * lam * rho * cos_theta < 1 + (lam * rho) ** 2 - gamma ** -2.0


@jax.default_matmul_precision("highest")
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

  # Accumulate in float64 when x64 is enabled (e.g. under jax.enable_x64), even for a
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
    norm_std: ‖J_std‖_F of the matched ViT layer: the root-mean-square over all its heads
      (``matched_head_norms``; NaN without a ViT), the same for every differential head of the layer.
    gamma: γ = ‖J₁‖/‖J_std‖ (NaN without a ViT).
    predicted_da_more_sensitive: Theorem 3's condition (bool).
    norm_std_heads: ‖J_std,j‖_F of every head j of the matched ViT layer, [layers, 2H] (NaN without a ViT).
    gamma_min, gamma_max: the spread of γ over those heads, ‖J₁‖/max_j ‖J_std,j‖ and ‖J₁‖/min_j ‖J_std,j‖.
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
  norm_std_heads: np.ndarray = None
  gamma_min: np.ndarray = None
  gamma_max: np.ndarray = None


def matched_head_norms(norm_a1_LxH, std_LxK) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
  """(‖J_std‖, γ, γ_min, γ_max), each [L, H], of differential heads with ‖J₁‖ = norm_a1 [L, H] against all
  K heads of the matched standard layer with norms std [L, K]: ‖J_std‖ = √(mean_j ‖J_std,j‖²) for every head
  of the layer, γ = ‖J₁‖/‖J_std‖, γ_min = ‖J₁‖/max_j ‖J_std,j‖, γ_max = ‖J₁‖/min_j ‖J_std,j‖ (module
  docstring). Invariant to permutations of the K standard heads. float64 numpy.

  Raises:
    ValueError: arrays not of rank 2, or different numbers of layers.
  """
  n1, std = np.asarray(norm_a1_LxH, np.float64), np.asarray(std_LxK, np.float64)
  if n1.ndim != 2 or std.ndim != 2 or n1.shape[0] != std.shape[0]:
    raise ValueError(f"norm_a1_LxH [L, H] and std_LxK [L, K] must be rank 2 with the same L, got {n1.shape} and "
                     f"{std.shape}")
  rms = np.sqrt(np.mean(std ** 2, axis=1, keepdims=True))
  norm_std = np.broadcast_to(rms, n1.shape).copy()
  return norm_std, n1 / norm_std, n1 / std.max(axis=1, keepdims=True), n1 / std.min(axis=1, keepdims=True)


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
@jax.default_matmul_precision("highest")
def differential_gram(config: ViTConfig, params, x_HxWxC, *, chunk_size: int = 256):
  """[layers, H, 3, 3] Gram of (J₁, J₂, J_DA) per differential head, and λ per layer [layers]."""
  gram = jacobian_gram(_differential_maps_fn(config, params), x_HxWxC, chunk_size=chunk_size)
  lam = jnp.stack([a.lam for a in attention_maps(config, params, x_HxWxC[None])])
  return gram.reshape(config.depth, config.num_heads // 2, 3, 3), lam


@functools.partial(jax.jit, static_argnames=("config", "chunk_size"))
@jax.default_matmul_precision("highest")
def standard_head_norms(config: ViTConfig, params, x_HxWxC, *, chunk_size: int = 256):
  """‖J_std‖_F of every standard head, [layers, num_heads]."""
  gram = jacobian_gram(_standard_maps_fn(config, params), x_HxWxC, chunk_size=chunk_size)
  return jnp.sqrt(gram[:, 0, 0]).reshape(config.depth, config.num_heads)


def _maybe_x64(enabled: bool):
  return jax.enable_x64(True) if enabled else contextlib.nullcontext()


def head_alignment(diff_config: ViTConfig, diff_params, x_HxWxC, *, vit_config: ViTConfig | None = None,
                   vit_params=None, chunk_size: int = 256, float64_gram: bool = True) -> HeadAlignment:
  """cos θ, ρ, γ, Lemma 1 and Theorem 3 for every differential head of one sample.

  Args:
    diff_config, diff_params: a DiffViT (``attention.vit``), attention="differential".
    x_HxWxC: one image [H, W, C] in [0, 1]; Jacobians are taken w.r.t. all its pixels.
    vit_config, vit_params: the matched ViT (same depth, num_heads = 2H), for γ and Theorem 3; optional.
    chunk_size: forward-mode directions per step.
    float64_gram: accumulate the Gram matrices in float64 (``jax.enable_x64`` around the
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
  norm_std = gamma = gamma_min = gamma_max = np.full(shape, np.nan)
  std = np.full((shape[0], 2 * shape[1]), np.nan)
  predicted = np.zeros(shape, bool)
  if vit_config is not None:
    if vit_config.attention != "standard" or vit_config.depth != diff_config.depth or \
        vit_config.num_heads != diff_config.num_heads:
      raise ValueError("vit_config must be the standard-attention twin of diff_config "
                       f"(same depth and num_heads), got {vit_config}")
    with _maybe_x64(float64_gram):
      std = np.asarray(standard_head_norms(vit_config, vit_params, x_HxWxC, chunk_size=chunk_size), np.float64)
    norm_std, gamma, gamma_min, gamma_max = matched_head_norms(norm_a1, std)
    with _maybe_x64(float64_gram):
      predicted = np.asarray(theorem3_predicts_da_more_sensitive(cos_theta, lam_LxH, rho, gamma))
  return HeadAlignment(cos_theta, rho, norm_a1, norm_a2, np.sqrt(gram[..., 2, 2]), norm_da_lemma1, lam,
                       norm_std, gamma, predicted, std, gamma_min, gamma_max)


class LayerAlignmentStatistics(NamedTuple):
  """Gradient alignment, Lemma 1 and Theorem 3 of one layer over S samples (``layer_alignment_statistics``).
  Per-sample arrays are [S, H] (H differential heads) or [S]; the rest are Python scalars.

  Attributes:
    n_samples: S; heads: H; lam: λ of the layer (of the first sample; λ does not depend on x).
    cos_theta, rho, gamma: cos θ, ρ = ‖J₂‖/‖J₁‖, γ = ‖J₁‖/‖J_std‖, [S, H].
    negative_alignment_frequency: share of (sample, head) with cos θ < 0.
    cos_theta_mean, rho_median, gamma_median: over all (sample, head).
    lambda_rho_negative_frequency: share with λρ < 0 (where Theorem 3's inequality reverses).
    lemma1_max_relative_error: max |‖J_DA‖_Lemma1 − ‖J_DA‖| / ‖J_DA‖ (0 up to rounding: Lemma 1 is exact).
    norm_da, norm_da_lemma1, norm_std: ‖J_DA‖ direct and by Lemma 1, ‖J_std‖ of the matched layer (RMS over its
      heads), [S, H].
    gamma_min_median, gamma_max_median: medians of γ's spread over the matched layer's heads (``HeadAlignment``).
    theorem3_predicted: Theorem 3's condition ‖J_DA‖ > ‖J_std‖, bool [S, H].
    theorem3_predicted_frequency: its share of (sample, head).
    theorem3_matches_map_norms: share where the condition agrees with the measured ‖J_DA‖ > ‖J_std‖ (1 up to
      rounding at the threshold: the theorem is an equivalence).
    diffvit_more_sensitive: per sample, the DiffViT's local Lipschitz estimate exceeds the ViT's, bool [S].
    diffvit_more_sensitive_frequency: its share of the samples.
    theorem3_agreement: share of (sample, head) where the head-level prediction equals the model-level
      outcome (the theorem is about one head's map, not about the network; this measures how far it carries).
    lipschitz_diffvit, lipschitz_vit: the per-sample local Lipschitz estimates compared, [S].
  """
  n_samples: int
  heads: int
  lam: float
  cos_theta: np.ndarray
  rho: np.ndarray
  gamma: np.ndarray
  negative_alignment_frequency: float
  cos_theta_mean: float
  rho_median: float
  gamma_median: float
  lambda_rho_negative_frequency: float
  lemma1_max_relative_error: float
  norm_da: np.ndarray
  norm_da_lemma1: np.ndarray
  norm_std: np.ndarray
  theorem3_predicted: np.ndarray
  theorem3_predicted_frequency: float
  theorem3_matches_map_norms: float
  diffvit_more_sensitive: np.ndarray
  diffvit_more_sensitive_frequency: float
  theorem3_agreement: float
  lipschitz_diffvit: np.ndarray
  lipschitz_vit: np.ndarray
  gamma_min_median: float = float("nan")
  gamma_max_median: float = float("nan")


def layer_alignment_statistics(alignments, layer: int, lipschitz_diff_S, lipschitz_vit_S) -> LayerAlignmentStatistics:
  """Aggregates ``head_alignment`` of S samples at one layer: cos θ, ρ, γ, Lemma 1's error and Theorem 3's
  prediction against the model that is measurably more sensitive (arXiv 2510.00517, Lemma 1 and
  Theorem 3; docs/theory.md#lemma-1, docs/theory.md#theorem-3).

  Args:
    alignments: S ``HeadAlignment`` (one per sample, each computed with the matched ViT, fields [L, H]).
    layer: 0-based layer index, in [0, L).
    lipschitz_diff_S, lipschitz_vit_S: per-sample local Lipschitz estimates of the DiffViT and of the
      matched ViT on the same samples, float [S] (e.g. ``attention.local_lipschitz``).

  Returns:
    ``LayerAlignmentStatistics`` (numpy arrays and Python scalars).

  Raises:
    ValueError: no alignments, alignments of different shapes, layer out of range, or Lipschitz
      estimates not of shape [S].
  """
  alignments = list(alignments)
  if not alignments:
    raise ValueError("alignments must hold at least one HeadAlignment")
  shape = np.shape(alignments[0].cos_theta)
  if any(np.shape(a.cos_theta) != shape for a in alignments) or len(shape) != 2:
    raise ValueError(f"every alignment must have fields of the same shape [L, H], got "
                     f"{sorted({np.shape(a.cos_theta) for a in alignments})}")
  if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 0 <= layer < shape[0]:
    raise ValueError(f"layer must be an integer in [0, {shape[0]}), got {layer!r}")
  lip_diff, lip_vit = np.asarray(lipschitz_diff_S), np.asarray(lipschitz_vit_S)
  s = len(alignments)
  if lip_diff.shape != (s,) or lip_vit.shape != (s,):
    raise ValueError(f"lipschitz_diff_S and lipschitz_vit_S must have shape [S] = [{s}], got "
                     f"{lip_diff.shape} and {lip_vit.shape}")
  field = lambda name: np.stack([getattr(a, name) for a in alignments])[:, layer]  # noqa: E731  [S, H]
  cos, rho, gamma = field("cos_theta"), field("rho"), field("gamma")
  lam = np.stack([a.lam for a in alignments])[:, layer]  # [S]
  norm_da, lemma, norm_std = field("norm_da"), field("norm_da_lemma1"), field("norm_std")
  predicted = field("predicted_da_more_sensitive")
  actual = lip_diff > lip_vit  # [S]
  spread = {}
  if all(a.gamma_min is not None for a in alignments):
    spread = dict(gamma_min_median=float(np.median(field("gamma_min"))),
                  gamma_max_median=float(np.median(field("gamma_max"))))
  return LayerAlignmentStatistics(
      n_samples=s, heads=int(cos.shape[1]), lam=float(lam[0]), cos_theta=cos, rho=rho, gamma=gamma,
      negative_alignment_frequency=float((cos < 0).mean()), cos_theta_mean=float(cos.mean()),
      rho_median=float(np.median(rho)), gamma_median=float(np.median(gamma)),
      lambda_rho_negative_frequency=float((lam[:, None] * rho < 0).mean()),
      lemma1_max_relative_error=float(np.max(np.abs(lemma - norm_da) / norm_da)),
      norm_da=norm_da, norm_da_lemma1=lemma, norm_std=norm_std, theorem3_predicted=predicted,
      theorem3_predicted_frequency=float(predicted.mean()),
      theorem3_matches_map_norms=float((predicted == (norm_da > norm_std)).mean()),
      diffvit_more_sensitive=actual, diffvit_more_sensitive_frequency=float(actual.mean()),
      theorem3_agreement=float((predicted == actual[:, None]).mean()),
      lipschitz_diffvit=lip_diff, lipschitz_vit=lip_vit, **spread)
