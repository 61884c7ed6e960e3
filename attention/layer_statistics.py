"""Per-layer statistics of captured attention layers: entropy, largest weight, and differential alignment.

From a layer captured by ``attention.capture`` (its rebuilt heads at its own input tokens X):

  entropy:        H(P_t) = −Σ_s P_ts log P_ts of each attention row (nats), averaged over the rows t;
                  log T is its maximum (uniform attention), 0 a one-hot row;
  largest weight: max_s P_ts averaged over the rows (1/T uniform, 1 one-hot).
Differential heads report both maps P₁, P₂ (Ye et al., ICLR 2025).

Gradient alignment of a differential head (arXiv 2510.00517, §4; docs/theory.md#gradient-alignment), taken
here with respect to the layer's own input tokens X [T, D] (not the pixels): with J_j = ∂A_j/∂X,
cos θ = ⟨J₁, J₂⟩_F/(‖J₁‖‖J₂‖), ρ = ‖J₂‖/‖J₁‖, and Lemma 1's ‖J_DA‖² = ‖J₁‖²(1 + λ²ρ² − 2λρ cos θ) for
A_DA = A₁ − λA₂, checked against J_DA computed directly. Theorem 3 compares with a standard head of
sensitivity ‖J_std‖ = ‖J₁‖/γ; a single model has no matched standard head, so the condition is evaluated
at γ = 1 (a standard head as sensitive as the first map): the differential head is more sensitive iff
2λρ cos θ < λ²ρ², i.e. cos θ < λρ/2 when λρ > 0.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attention.alignment import jacobian_gram, theorem3_predicts_da_more_sensitive
from attention.capture import AttentionLayer, DifferentialHeads, augment_tokens, head_probs

HIGHEST = jax.lax.Precision.HIGHEST


class AttentionStatistics(NamedTuple):
  """Entropy and largest weight of one layer's maps.

  Attributes:
    maps: map names, ("softmax",) or ("map1", "map2") for differential heads.
    entropy: mean row entropy in nats, float [maps, batch, H].
    max_weight: mean row maximum, float [maps, batch, H].
    log_tokens: log T, the entropy of uniform attention.
  """
  maps: tuple
  entropy: np.ndarray
  max_weight: np.ndarray
  log_tokens: float


def attention_statistics(layer: AttentionLayer) -> AttentionStatistics:
  """Row entropy and largest weight of every head of a captured layer at its captured tokens.

  A layer whose heads cannot be rebuilt (masked, ``normalize_qk``, cross-attention) uses the weights it
  computed itself (``AttentionLayer.weights``); log_tokens is then log of its number of keys.

  Raises:
    ValueError: the layer has neither rebuilt heads nor recorded weights (its reason).
  """
  probs = head_probs(layer) if layer.heads is not None or layer.weights is None else jnp.asarray(layer.weights)
  maps = ("map1", "map2") if isinstance(layer.heads, DifferentialHeads) else ("softmax",)
  probs = probs if isinstance(probs, tuple) else (probs,)
  ent, top = [], []
  for p in probs:   # [batch, H, T, T]
    p = np.asarray(p, np.float64)
    ent.append(-np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=-1).mean(axis=-1))
    top.append(p.max(axis=-1).mean(axis=-1))
  return AttentionStatistics(maps, np.stack(ent), np.stack(top), float(np.log(probs[0].shape[-1])))


class DifferentialAlignment(NamedTuple):
  """Alignment of every differential head of a layer at each sample's tokens; arrays [batch, H].

  Attributes:
    cos_theta, rho: cos θ and ρ (module docstring).
    norm_a1, norm_da: ‖J₁‖_F and ‖J_DA‖_F (direct).
    lemma1_relative_error: |‖J_DA‖_Lemma1 − ‖J_DA‖| / ‖J_DA‖ (0 up to rounding).
    lam: λ of the layer (scalar).
    theorem3_gamma1: Theorem 3's condition at γ = 1, bool.
  """
  cos_theta: np.ndarray
  rho: np.ndarray
  norm_a1: np.ndarray
  norm_da: np.ndarray
  lemma1_relative_error: np.ndarray
  lam: float
  theorem3_gamma1: np.ndarray


def differential_alignment(layer: AttentionLayer, *, max_samples: int | None = None,
                           chunk_size: int = 256) -> DifferentialAlignment:
  """cos θ, ρ, Lemma 1 and Theorem 3 (at γ = 1) of a captured differential layer w.r.t. its tokens.

  Args:
    layer: a captured layer with ``DifferentialHeads``.
    max_samples: the first samples of the capture (None: all), ≥ 1.
    chunk_size: forward-mode directions per step (``attention.alignment.jacobian_gram``), ≥ 1.

  Returns:
    ``DifferentialAlignment`` (numpy; Gram matrices accumulated in float64).

  Raises:
    ValueError: not a differential layer, or max_samples < 1.
  """
  heads = layer.heads
  if not isinstance(heads, DifferentialHeads):
    raise ValueError(f"layer {layer.path!r} has no differential heads ({layer.reason or layer.kind})")
  tokens = layer.tokens
  if max_samples is not None:
    if isinstance(max_samples, bool) or not isinstance(max_samples, int) or max_samples < 1:
      raise ValueError(f"max_samples must be an integer >= 1 or None, got {max_samples!r}")
    tokens = tokens[:max_samples]
  lam = heads.lam

  def maps_fn(x_TxD):   # -> [H, 3, T, T]: A₁, A₂, A₁ − λA₂
    x = augment_tokens(x_TxD, layer.augmented)
    softmax = lambda a: jax.nn.softmax(jnp.einsum("td,hde,se->hts", x, a, x, precision=HIGHEST), axis=-1)  # noqa: E731
    a1, a2 = softmax(heads.a1), softmax(heads.a2)
    return jnp.stack([a1, a2, a1 - lam * a2], axis=1)

  with jax.enable_x64(True):
    grams = np.stack([np.asarray(jacobian_gram(maps_fn, x, chunk_size=chunk_size), np.float64) for x in tokens])
  n1, n2, nda = (np.sqrt(grams[..., i, i]) for i in range(3))
  cos = grams[..., 0, 1] / (n1 * n2)
  rho = n2 / n1
  lam_f = float(lam)
  lemma = n1 * np.sqrt(np.maximum(1 + (lam_f * rho) ** 2 - 2 * lam_f * rho * cos, 0.0))
  predicted = np.asarray(theorem3_predicts_da_more_sensitive(cos, lam_f, rho, 1.0))
  return DifferentialAlignment(cos, rho, n1, nda, np.abs(lemma - nda) / nda, lam_f, predicted)
