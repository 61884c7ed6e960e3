"""The benefit half of the "dual implications" claim: a data-dependent kernel approximates targets aligned
with the data's dominant modes better, and targets in its weak modes worse (arXiv 2603.13085, §1 and §4;
docs/theory.md#dual-implications).

Targets are linear in the raw pixels, y(x) = Σᵢ cᵢ vᵢᵀx with c ~ N(0, I_k), for three kinds of directions
vᵢ: the top-k right singular vectors of the training matrix X ("top"), the bottom k of its non-zero ones
("bottom"), and k random unit vectors ("random"). The same directions define the targets on test points.
MLP-Attn's features X Xᵀ X amplify X's top singular directions by σ² (X Xᵀ X = U Σ³ Vᵀ), so its kernel
should fit "top" targets better than 2L-ReLU's and "bottom" targets worse.

In closed form, for kernel ridge regression on the training points with K = Σ λⱼ uⱼuⱼᵀ and y = uᵢ, the
prediction is λᵢ/(λᵢ + ρ)·uᵢ, so the squared error is (ρ/(λᵢ + ρ))²: a kernel whose eigenvalue on the
target's direction is larger fits it better (``tests/test_dual_implications.py`` checks this exactly).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

TARGET_KINDS = ("top", "bottom", "random")


class ModeTargets(NamedTuple):
  """Regression targets y = X V c on the training and test rows.

  Fields:
    train: [n, 1] float64; test: [t, 1] float64.
    directions: V, [d, k] float64 with orthonormal columns (random: unit columns).
    coefficients: c, [k] float64.
    singular_values: the singular values of X behind the directions, [k] (nan for random).
  """
  train: np.ndarray
  test: np.ndarray
  directions: np.ndarray
  coefficients: np.ndarray
  singular_values: np.ndarray


def _float64(x, name: str) -> np.ndarray:
  """x as a float64 array; ValueError naming ``name`` where it is not numeric (strings, None, objects)."""
  try:
    if x is None:
      raise TypeError
    return np.asarray(x, np.float64)
  except (TypeError, ValueError):
    raise ValueError(f"{name} must be a numeric array, got {type(x).__name__} {x!r:.60}") from None


def mode_targets(x_train_NxD, x_test_TxD, *, kind: str, k: int, key, rtol: float | None = None) -> ModeTargets:
  """Targets along the top-k, the bottom-k non-zero, or k random directions of the training matrix.

  Args:
    x_train_NxD: raw flattened training images [n, d] (pixels on [0, 1], not centred).
    x_test_TxD: test images [t, d].
    kind: one of ``TARGET_KINDS``.
    k: the number of directions, 1 ≤ k ≤ rank(X).
    key: a JAX PRNG key (draws c ~ N(0, I_k), and the random directions).
    rtol: in (0, 1); singular values at or below rtol·σ₁ count as zero (default max(n, d)·eps64).

  Returns:
    ``ModeTargets``.

  Raises:
    ValueError: naming the argument: unknown kind, k not an integer in [1, rank] (also a string or None),
      rtol outside (0, 1), key not a PRNG key, inputs that are not numeric, shapes that do not line up,
      non-finite inputs.
  """
  if not isinstance(kind, str) or kind not in TARGET_KINDS:
    raise ValueError(f"kind must be one of {TARGET_KINDS}, got {kind!r}")
  if isinstance(k, bool) or not isinstance(k, (int, float, np.integer, np.floating)) or not (
      np.isfinite(k) and int(k) == k and k >= 1):
    raise ValueError(f"k must be an integer in [1, rank(x_train_NxD)], got {k!r}")
  try:
    key_c, key_v = jax.random.split(key)
  except (TypeError, ValueError):
    raise ValueError(f"key must be a JAX PRNG key (jax.random.PRNGKey(seed) or jax.random.key(seed)), got "
                     f"{key!r:.60}") from None
  x = _float64(x_train_NxD, "x_train_NxD")
  xt = _float64(x_test_TxD, "x_test_TxD")
  if x.ndim != 2 or xt.ndim != 2 or x.shape[1] != xt.shape[1]:
    raise ValueError(f"x_train_NxD [n, d] and x_test_TxD [t, d] must share d, got {x.shape} and {xt.shape}")
  if not (np.isfinite(x).all() and np.isfinite(xt).all()):
    raise ValueError("x_train_NxD and x_test_TxD must be finite")
  if rtol is not None and (isinstance(rtol, bool) or not (
      isinstance(rtol, (int, float, np.integer, np.floating)) and 0 < float(rtol) < 1)):
    raise ValueError(f"rtol must be a number in (0, 1) or None, got {rtol!r}")
  _, s, vt = np.linalg.svd(x, full_matrices=False)
  rtol = max(x.shape) * np.finfo(np.float64).eps if rtol is None else float(rtol)
  rank = int(np.sum(s > rtol * s[0])) if s.size and s[0] > 0 else 0
  if not k <= rank:
    raise ValueError(f"k must be an integer in [1, rank(X) = {rank}], got {k!r}")
  k = int(k)
  c = np.asarray(jax.random.normal(key_c, (k,)), np.float64)
  if kind == "top":
    v, sv = vt[:k].T, s[:k]
  elif kind == "bottom":
    v, sv = vt[rank - k:rank].T, s[rank - k:rank]
  else:
    g = np.asarray(jax.random.normal(key_v, (x.shape[1], k)), np.float64)
    v, sv = g / np.linalg.norm(g, axis=0, keepdims=True), np.full(k, np.nan)
  return ModeTargets((x @ v @ c)[:, None], (xt @ v @ c)[:, None], v, c, sv)


def kernel_target_alignment(k_NxN, y_NxC) -> float:
  """⟨K, Y Yᵀ⟩_F / (‖K‖_F ‖Y Yᵀ‖_F) = tr(Yᵀ K Y) / (‖K‖_F ‖YᵀY‖_F), in [−1, 1] (1: K ∝ Y Yᵀ).

  Source: Cristianini et al., "On kernel-target alignment", NeurIPS 2001.

  Raises:
    ValueError: naming the argument: not numeric, K not [n, n], Y not [n, C], non-finite entries, or a zero
      K or Y.
  """
  kk = _float64(k_NxN, "k_NxN")
  y = _float64(y_NxC, "y_NxC")
  if y.ndim == 1:
    y = y[:, None]
  if kk.ndim != 2 or kk.shape[0] != kk.shape[1] or y.ndim != 2 or y.shape[0] != kk.shape[0]:
    raise ValueError(f"k_NxN must be [n, n] and y_NxC [n, C] with the same n, got {kk.shape} and {y.shape}")
  if not (np.isfinite(kk).all() and np.isfinite(y).all()):
    raise ValueError("k_NxN and y_NxC must be finite")
  if not (np.abs(kk).max(initial=0) > 0 and np.abs(y).max(initial=0) > 0):
    raise ValueError("kernel-target alignment is undefined for a zero kernel or zero targets")
  kk, y = kk / np.abs(kk).max(), y / np.abs(y).max()  # scale-invariant: no overflow or underflow at 1e±200
  return float(np.trace(y.T @ kk @ y) / (np.linalg.norm(kk) * np.linalg.norm(y.T @ y)))


def relative_error(prediction_NxC, y_NxC) -> float:
  """Σ‖f − y‖² / Σ‖y − ȳ‖² (ȳ the column means): 0 is exact, 1 is no better than predicting the mean.

  Raises:
    ValueError: naming the argument: not numeric, shapes that differ, non-finite entries, or constant
      targets.
  """
  f, y = _float64(prediction_NxC, "prediction_NxC"), _float64(y_NxC, "y_NxC")
  if f.shape != y.shape:
    raise ValueError(f"prediction and targets must have the same shape, got {f.shape} and {y.shape}")
  if not (np.isfinite(f).all() and np.isfinite(y).all()):
    raise ValueError("prediction and targets must be finite")
  scale = float(np.abs(y - y.mean(axis=0)).max(initial=0))
  if scale == 0:
    raise ValueError("the relative error is undefined for constant targets")
  f, y = f / scale, y / scale  # scale-invariant: no overflow or underflow at 1e±200
  return float(np.sum((f - y) ** 2) / np.sum((y - y.mean(axis=0)) ** 2))
