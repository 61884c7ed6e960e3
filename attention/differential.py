"""Differential attention and standard multi-head self-attention (Flax Linen), float32 softmax.

Differential attention (Ye et al., "Differential Transformer", ICLR 2025, eq. 1–3 and their reference code
``multihead_diffattn.py``) replaces each softmax map by the difference of two maps,

  A₁ = softmax(Q₁K₁ᵀ/√d),  A₂ = softmax(Q₂K₂ᵀ/√d),  head_h = (A₁ − λA₂) V,   V of width 2d,

then normalises every head with RMSNorm (eps 1e-5, gain initialised to 1), multiplies by (1 − λ_init) and
applies the output projection. λ is re-parameterised by four learnable vectors of size d,

  λ = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init,  λ_init(l) = 0.8 − 0.6·exp(−0.3·l)  (l 0-based),

one λ per layer, shared by its heads. Query/key heads are laid out as the reference code does: the 2H
query heads of width d are interleaved, so differential head h uses query heads 2h (A₁) and 2h + 1 (A₂);
a standard layer with 2H heads of width d has the same projection shapes (the paper's matched baseline).
Source of the sensitivity analysis: arXiv 2510.00517 (docs/theory.md#gradient-alignment).

Both layers sow their maps into the ``intermediates`` collection (and return them with
``return_maps=True``) for the gradient-alignment analysis (``attention.alignment``).
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

RMS_NORM_EPS = 1e-5
LAMBDA_VECTOR_STD = 0.1


class AttentionMaps(NamedTuple):
  """Attention maps of one layer for analysis.

  Attributes:
    a1: float32 [batch, heads, n, n]: the first softmax map of each differential head, or the map of each
      standard head (rows sum to 1).
    a2: float32 [batch, heads, n, n]: the second softmax map (differential attention only; None otherwise).
    lam: float32 scalar λ of the layer (differential only; None otherwise).
    lambda_init: the layer's λ_init (differential only; None otherwise).
  """
  a1: jnp.ndarray
  a2: Optional[jnp.ndarray] = None
  lam: Optional[jnp.ndarray] = None
  lambda_init: Optional[float] = None


def lambda_init_schedule(layer_index: int) -> float:
  """λ_init(l) = 0.8 − 0.6·exp(−0.3·l) for the 0-based layer index l (Ye et al. 2025, §2.1).

  Raises:
    ValueError: if layer_index is not an integer ≥ 0.
  """
  if isinstance(layer_index, bool) or not isinstance(layer_index, int) or layer_index < 0:
    raise ValueError(f"layer_index must be an integer >= 0, got {layer_index!r}")
  return 0.8 - 0.6 * math.exp(-0.3 * layer_index)


def check_lambda_init(lambda_init: float, name: str = "lambda_init") -> float:
  """Returns λ_init as float after checking 0 ≤ λ_init < 1 (at 1 the (1 − λ_init) scale zeroes the layer)."""
  try:
    value = float(lambda_init)
  except (TypeError, ValueError):
    raise ValueError(f"{name} must be a float in [0, 1), got {lambda_init!r}") from None
  if not (0.0 <= value < 1.0):
    raise ValueError(f"{name} must lie in [0, 1) (the output is scaled by 1 − λ_init), got {value}")
  return value


def reparameterized_lambda(lambda_q1_D, lambda_k1_D, lambda_q2_D, lambda_k2_D, lambda_init) -> jnp.ndarray:
  """λ = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init, in float32 or wider (Ye et al. 2025, eq. 2).

  Args:
    lambda_q1_D, lambda_k1_D, lambda_q2_D, lambda_k2_D: the four learnable vectors, shape [d].
    lambda_init: float in [0, 1).

  Returns:
    Scalar in float32 (float64 for float64 vectors).
  """
  dtype = _at_least_float32(lambda_q1_D.dtype)
  dot1 = jnp.sum(lambda_q1_D.astype(dtype) * lambda_k1_D.astype(dtype))
  dot2 = jnp.sum(lambda_q2_D.astype(dtype) * lambda_k2_D.astype(dtype))
  return jnp.exp(dot1) - jnp.exp(dot2) + jnp.asarray(lambda_init, dtype)


def _at_least_float32(dtype):
  """float32 for float32 and narrower floats (bf16, f16), float64 for float64."""
  return jnp.promote_types(dtype, jnp.float32)


def softmax_attention_map(q_BxHxNxD, k_BxHxMxD, mask_BxM=None) -> jnp.ndarray:
  """softmax(Q Kᵀ / √d) over the key axis, computed in float32 (float64 for float64 inputs).

  Args:
    q_BxHxNxD: queries [batch, heads, n, d]. k_BxHxMxD: keys [batch, heads, m, d].
    mask_BxM: optional bool [batch, m], True for the keys attended to (a padding mask: padded keys get
      weight exactly 0); None attends to every key, with today's numbers exactly.

  Returns:
    float32 (or float64) [batch, heads, n, m], rows summing to 1 (a row of a sample whose keys are all
    masked is all 0: it attends to nothing, and its output is 0).
  """
  dtype = _at_least_float32(jnp.result_type(q_BxHxNxD, k_BxHxMxD))
  scale = q_BxHxNxD.shape[-1] ** -0.5
  logits = jnp.einsum("bhnd,bhmd->bhnm", q_BxHxNxD.astype(dtype) * scale, k_BxHxMxD.astype(dtype))
  if mask_BxM is None:
    return jax.nn.softmax(logits, axis=-1)
  return jax.nn.softmax(logits, axis=-1, where=mask_BxM[:, None, None, :])


def head_rms_norm(x_BxHxNxE, eps: float = RMS_NORM_EPS) -> jnp.ndarray:
  """RMSNorm over the last axis (one head's features): x / sqrt(mean(x²) + eps), gain 1."""
  x32 = x_BxHxNxE.astype(_at_least_float32(x_BxHxNxE.dtype))
  return (x32 * jax.lax.rsqrt(jnp.mean(jnp.square(x32), axis=-1, keepdims=True) + eps)).astype(x_BxHxNxE.dtype)


def differential_combine(a1_BxHxNxM, a2_BxHxNxM, v_BxHxMxE, lam, lambda_init, gain_E=None) -> jnp.ndarray:
  """The differential heads before the output projection: (1 − λ_init)·RMSNorm((A₁ − λA₂) V)·gain.

  Args:
    a1_BxHxNxM, a2_BxHxNxM: the two softmax maps [batch, heads, n, m].
    v_BxHxMxE: values [batch, heads, m, 2d].
    lam: scalar λ (any real value; λ = 0 gives RMSNorm(A₁V)·(1 − λ_init)).
    lambda_init: the λ_init of the layer, in [0, 1).
    gain_E: optional RMSNorm gain [2d] (None = 1).

  Returns:
    [batch, heads, n, 2d] in the dtype of v.
  """
  diff = a1_BxHxNxM - lam * a2_BxHxNxM
  out = jnp.einsum("bhnm,bhme->bhne", diff.astype(v_BxHxMxE.dtype), v_BxHxMxE)
  out = head_rms_norm(out)
  if gain_E is not None:
    out = out * gain_E.reshape(1, 1, 1, -1)
  return out * (1.0 - lambda_init)


def _check_tokens(x_BxNxD, dim: int, layer: str):
  if x_BxNxD.ndim != 3:
    raise ValueError(f"{layer} input must have shape [batch, tokens, dim], got {tuple(x_BxNxD.shape)}")
  if x_BxNxD.shape[-1] != dim:
    raise ValueError(f"{layer} expects feature dim {dim} (= heads × head width), got {x_BxNxD.shape[-1]}")


def _check_mask(mask_BxN, batch: int, n: int):
  """The padding mask as bool [batch, n], or None; raises ValueError on another shape or a dtype that is not
  bool or integer (an integer mask is read as ≠ 0)."""
  if mask_BxN is None:
    return None
  if jnp.shape(mask_BxN) != (batch, n):
    raise ValueError(f"mask_BxN must have shape [batch, tokens] = ({batch}, {n}), got {jnp.shape(mask_BxN)}")
  dtype = getattr(mask_BxN, "dtype", None) or np.asarray(mask_BxN).dtype
  if not (jnp.issubdtype(dtype, jnp.bool_) or jnp.issubdtype(dtype, jnp.integer)):
    raise ValueError(f"mask_BxN must be bool (True: a real token) or 0/1 integers, got dtype {dtype}")
  return jnp.asarray(mask_BxN) != 0


def _check_heads(num_heads, head_dim, layer: str):
  for name, value in (("num_heads", num_heads), ("head_dim", head_dim)):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
      raise ValueError(f"{layer}.{name} must be an integer >= 1, got {value!r}")


class MultiHeadSelfAttention(nn.Module):
  """Standard multi-head self-attention, softmax(QKᵀ/√d)V per head, float32 softmax.

  Attributes:
    num_heads: heads (2H for the baseline matched to H differential heads).
    head_dim: d, the query/key/value width per head; the model width is num_heads·d.
    use_bias: biases in the q/k/v/out projections (the reference code has none).
  """
  num_heads: int
  head_dim: int
  use_bias: bool = False

  @nn.compact
  def __call__(self, x_BxNxD, *, return_maps: bool = False, mask_BxN=None):
    """Args: x_BxNxD tokens [batch, n, num_heads·head_dim]; mask_BxN: optional bool [batch, n], False for
    padding tokens, which no token attends to (``softmax_attention_map``). Returns [batch, n, dim] (and
    AttentionMaps)."""
    _check_heads(self.num_heads, self.head_dim, "MultiHeadSelfAttention")
    dim = self.num_heads * self.head_dim
    _check_tokens(x_BxNxD, dim, "MultiHeadSelfAttention")
    b, n, _ = x_BxNxD.shape
    dense = lambda name: nn.Dense(dim, use_bias=self.use_bias, name=name)  # noqa: E731
    split = lambda t: t.reshape(b, n, self.num_heads, self.head_dim).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = (split(dense(name)(x_BxNxD)) for name in ("q_proj", "k_proj", "v_proj"))
    a_BxHxNxN = softmax_attention_map(q, k, _check_mask(mask_BxN, b, n))
    self.sow("intermediates", "attention_maps", a_BxHxNxN)
    out = jnp.einsum("bhnm,bhme->bhne", a_BxHxNxN.astype(v.dtype), v)
    out = dense("out_proj")(out.transpose(0, 2, 1, 3).reshape(b, n, dim))
    return (out, AttentionMaps(a_BxHxNxN)) if return_maps else out


class DifferentialAttention(nn.Module):
  """Differential multi-head self-attention with the reference semantics (module docstring).

  Attributes:
    num_heads: H differential heads; each has two maps of query/key width d and a value of width 2d.
    head_dim: d; the model width is 2·H·d (the same as 2H standard heads of width d).
    lambda_init: λ_init ∈ [0, 1): a fixed value, or ``lambda_init_schedule(layer_index)``.
    use_bias: biases in the q/k/v/out projections (the reference code has none).
    learnable_gain: a learnable RMSNorm gain of size 2d shared by the heads, initialised to 1 (the
      reference code's ``elementwise_affine=True``); False fixes the gain at 1.
  """
  num_heads: int
  head_dim: int
  lambda_init: float
  use_bias: bool = False
  learnable_gain: bool = True

  @nn.compact
  def __call__(self, x_BxNxD, *, return_maps: bool = False, mask_BxN=None):
    """Args: x_BxNxD tokens [batch, n, 2·H·d]; mask_BxN: optional bool [batch, n], False for padding tokens
    (both maps ignore them). Returns [batch, n, dim] (and AttentionMaps with λ)."""
    _check_heads(self.num_heads, self.head_dim, "DifferentialAttention")
    lambda_init = check_lambda_init(self.lambda_init)
    h, d = self.num_heads, self.head_dim
    dim = 2 * h * d
    _check_tokens(x_BxNxD, dim, "DifferentialAttention")
    b, n, _ = x_BxNxD.shape
    dense = lambda name: nn.Dense(dim, use_bias=self.use_bias, name=name)  # noqa: E731
    # [b, n, 2H·d] -> [b, H, 2, n, d]: query/key head 2h + j is map j of differential head h.
    pairs = lambda t: t.reshape(b, n, h, 2, d).transpose(0, 2, 3, 1, 4)  # noqa: E731
    q, k = pairs(dense("q_proj")(x_BxNxD)), pairs(dense("k_proj")(x_BxNxD))
    v = dense("v_proj")(x_BxNxD).reshape(b, n, h, 2 * d).transpose(0, 2, 1, 3)
    mask = _check_mask(mask_BxN, b, n)
    a1 = softmax_attention_map(q[:, :, 0], k[:, :, 0], mask)
    a2 = softmax_attention_map(q[:, :, 1], k[:, :, 1], mask)
    init = nn.initializers.normal(LAMBDA_VECTOR_STD)
    vectors = [self.param(name, init, (d,), jnp.float32)
               for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2")]
    lam = reparameterized_lambda(*vectors, lambda_init)
    gain = self.param("norm_gain", nn.initializers.ones, (2 * d,), jnp.float32) if self.learnable_gain else None
    self.sow("intermediates", "attention_maps", jnp.stack([a1, a2], axis=2))  # [b, H, 2, n, n]
    self.sow("intermediates", "lambda", lam)
    out = differential_combine(a1, a2, v, lam, lambda_init, gain)
    out = dense("out_proj")(out.transpose(0, 2, 1, 3).reshape(b, n, dim))
    return (out, AttentionMaps(a1, a2, lam, lambda_init)) if return_maps else out
