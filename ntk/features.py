"""Input features of the paper's two models: ℓ2-normalised pixels (2L-ReLU) and ℓ2-normalised
linearized-attention rows (MLP-Attn).

Source: arXiv 2603.13085 §3 (docs/theory.md#mlp-attn-features): MLP-Attn applies the 2-layer ReLU network to the rows of
f_att(X) = X Xᵀ X, transductively (the training matrix supplies keys and values; test rows are queries).
"""
from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp

from attention import linearized_attention_transductive, normalize_rows

ModelName = Literal["relu", "mlp_attn"]
MODEL_NAMES = ("relu", "mlp_attn")


def model_features(model: ModelName, x_train_NxD, x_test_TxD=None):
  """Features the 2-layer network sees, for the training rows and (optionally) new rows.

  Args:
    model: ``'relu'`` (2L-ReLU: unit-norm pixel rows) or ``'mlp_attn'`` (unit-norm rows of
      X_tr Xᵀ_tr X_tr for training rows and x X_trᵀ X_tr for new rows).
    x_train_NxD: flattened training images, shape [n, d], in [0, 1] (not centred).
    x_test_TxD: flattened new images, shape [t, d], or None.

  Returns:
    ``(train_NxD, test_TxD)`` unit-norm feature rows (test is None when x_test is None).

  Raises:
    ValueError: unknown model name or bad input shapes.
  """
  if model not in MODEL_NAMES:
    raise ValueError(f"model must be one of {MODEL_NAMES}, got {model!r}")
  if model == "relu":
    train = normalize_rows(jnp.asarray(x_train_NxD))
    test = None if x_test_TxD is None else normalize_rows(jnp.asarray(x_test_TxD))
    return train, test
  train = linearized_attention_transductive(x_train_NxD, x_train_NxD, normalize=True)
  test = None if x_test_TxD is None else linearized_attention_transductive(
      x_test_TxD, x_train_NxD, normalize=True)
  return train, test


@jax.default_matmul_precision("highest")
def row_replaced_features(model: ModelName, x_rows_NxD, x_clean_NxD, gram_DxD=None):
  """Features of each row i of ``x_rows`` with only row i of the training matrix replaced by it.

  Used to attack each training row against its own loss with the other rows held fixed
  (arXiv 2603.13085 §5; docs/theory.md#attacking-training-rows). For MLP-Attn, replacing row i by x'_i changes the keys/values
  matrix to X'ᵀX' = M − x_iᵀx_i + x'_iᵀx'_i with M = X_cleanᵀX_clean, so
      φ(x'_i) = x'_i M − (x'_i·x_i) x_i + ‖x'_i‖² x'_i,
  then ℓ2-normalised. For 2L-ReLU the feature is the normalised row itself. Row i of the output depends
  only on row i of x_rows (and the clean matrix), so per-sample attacks stay per-sample.

  Args:
    model: ``'relu'`` or ``'mlp_attn'``.
    x_rows_NxD: candidate rows, shape [b, d] (b ≥ n is allowed: rows past n, e.g. padding, use x_i = 0).
    x_clean_NxD: the clean training matrix, shape [n, d].
    gram_DxD: precomputed X_cleanᵀX_clean, shape [d, d] (computed if None).

  Returns:
    Unit-norm features, shape [b, d].
  """
  if model not in MODEL_NAMES:
    raise ValueError(f"model must be one of {MODEL_NAMES}, got {model!r}")
  x_rows = jnp.asarray(x_rows_NxD)
  if model == "relu":
    return normalize_rows(x_rows)
  x_clean = jnp.asarray(x_clean_NxD)
  if x_rows.shape[0] > x_clean.shape[0]:  # padded batches (sharded attacks): extra rows see x_i = 0
    x_clean = jnp.pad(x_clean, ((0, x_rows.shape[0] - x_clean.shape[0]), (0, 0)))
  gram = x_clean.T @ x_clean if gram_DxD is None else jnp.asarray(gram_DxD)
  feats = (x_rows @ gram - jnp.sum(x_rows * x_clean, axis=1, keepdims=True) * x_clean
           + jnp.sum(x_rows ** 2, axis=1, keepdims=True) * x_rows)
  return normalize_rows(feats)
