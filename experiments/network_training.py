"""Training of the 2-layer networks that the influence experiments measure (``experiments.flip_rate``,
``experiments.landscape``): one place, so both train exactly as their own recorded ``train`` fields say.

The network is ``ntk.two_layer_relu`` on the model's features (``ntk.model_features``: the raw rows for
2L-ReLU, the linearized-attention rows X Xᵀ X for MLP-Attn), trained with minibatch Adam
(``ntk.training.train_adam``): softmax cross-entropy for more than 2 classes, ½·MSE for binary tasks
(arXiv 2603.13085 §5).
"""
from __future__ import annotations

import jax

import ntk
from ntk.training import train_adam
from experiments.config import TrainConfig


def loss_for(n_classes: int) -> str:
  """'ce' for more than 2 classes, 'mse' for binary tasks (the paper's choice)."""
  return "ce" if n_classes > 2 else "mse"


def split_key(key):
  """(init_key, train_key, adversarial_key): the three keys one trained network uses, in this order."""
  return jax.random.split(key, 3)


def adam_kwargs(train: TrainConfig, n_classes: int, key) -> dict:
  """Keyword arguments of ``train_adam`` for ``train`` (all but epochs), with minibatch order ``key``."""
  return dict(key=key, loss=loss_for(n_classes), learning_rate=train.learning_rate, l2=train.l2,
              batch_size=train.batch_size)


def init_network(model, model_name: str, x_NxD, key):
  """(features [n, d'], initial params) of ``model`` on the features of x [n, d] (float32 in [0, 1])."""
  feats, _ = ntk.model_features(model_name, x_NxD)
  _, params = model.init_fn(key, feats.shape)
  return feats, params


def train_network(train: TrainConfig, model, model_name: str, x_NxD, y_NxC, n_classes: int, key):
  """Initialises and trains ``model`` on the features of x with Adam as ``train`` says; returns params.

  Args:
    train: ``experiments.config.TrainConfig`` (epochs, batch_size, learning_rate, l2).
    model: an ``ntk.two_layer_relu`` triple; model_name: 'relu' or 'mlp_attn' (``ntk.MODEL_NAMES``).
    x_NxD: training rows [n, d], float32 in [0, 1]; y_NxC: one-hot targets [n, C], float32.
    n_classes: C; key: PRNG key, split by ``split_key``.

  Raises:
    ValueError: as ``ntk.training.train_adam`` (learning rate, l2, epochs, batch size out of range).
  """
  init_key, train_key, _ = split_key(key)
  feats, params = init_network(model, model_name, x_NxD, init_key)
  return train_adam(model.apply_fn, params, feats, y_NxC, epochs=train.epochs,
                    **adam_kwargs(train, n_classes, train_key))
