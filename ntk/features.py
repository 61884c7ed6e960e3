"""Input features of the paper's two models: ℓ2-normalised pixels (2L-ReLU) and ℓ2-normalised
linearized-attention rows (MLP-Attn).

Source: arXiv 2603.13085 §3 (REFERENCE §1): MLP-Attn applies the 2-layer ReLU network to the rows of
f_att(X) = X Xᵀ X, transductively (the training matrix supplies keys and values; test rows are queries).
"""
from __future__ import annotations

from typing import Literal

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
