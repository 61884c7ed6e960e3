"""Training of the 2-layer networks that the influence experiments measure (``experiments.flip_rate.run``,
``experiments.landscape.run``): one place, so both train exactly as their own recorded ``train`` fields say.

The network is ``ntk.two_layer_relu`` on the model's features (``ntk.model_features``: the raw rows for
2L-ReLU, the linearized-attention rows X Xᵀ X for MLP-Attn; of centred rows when
``data.preprocessing = 'centered'``), trained with minibatch Adam to a stated criterion
(``ntk.criterion.train_to_criterion``: learning rate chosen on a validation split of the training split,
then a train-loss target or an epoch cap): softmax cross-entropy for more than 2 classes, ½·MSE for binary
tasks (arXiv 2603.13085 §5).
"""
from __future__ import annotations


import jax
import numpy as np

import ntk
from ntk.criterion import CriterionResult, train_to_criterion
from experiments.core.config import TrainConfig
from experiments.data import scales


def loss_for(n_classes: int) -> str:
  """'ce' for more than 2 classes, 'mse' for binary tasks (the paper's choice)."""
  return "ce" if n_classes > 2 else "mse"


def split_key(key):
  """(init_key, train_key, adversarial_key): the three keys one trained network uses, in this order."""
  return jax.random.split(key, 3)


def channel_stats(split) -> scales.ChannelStats:
  """Per-channel scalar mean and std of a flattened training ``Split`` (``experiments.data.scales``)."""
  from experiments.data import get_spec
  return scales.channel_stats(split.x, channels=get_spec(split.info.name).image_shape[-1])


def mean_row(stats: scales.ChannelStats, d: int) -> np.ndarray:
  """The per-channel means laid out as one flattened HWC row [d], float32: what 'centered' preprocessing
  subtracts from every pixel row inside the feature map (attacks perturb the pixels, in [0, 1])."""
  return np.tile(np.asarray(stats.mean, np.float32), d // stats.channels)


def init_network(model, model_name: str, x_NxD, key):
  """(features [n, d'], initial params) of ``model`` on the features of x [n, d] (the feature map's rows)."""
  feats, _ = ntk.model_features(model_name, x_NxD)
  _, params = model.init_fn(key, feats.shape)
  return feats, params


def perturb_initial(params, relative: float, key):
  """θ·(1 + relative·ξ) leaf by leaf, ξ ~ N(0, 1) drawn from ``fold_in(key, 7)``; params unchanged at 0.

  The stability pass (``python -m experiments.claims --stability``) uses relative = 1e-7, the size of float32
  rounding: a verdict that moves under it is an artefact of the last bits (docs/theory.md#intervals-and-verdicts).
  """
  if relative == 0:
    return params
  leaves, treedef = jax.tree_util.tree_flatten(params)
  keys = jax.random.split(jax.random.fold_in(key, 7), len(leaves))
  return jax.tree_util.tree_unflatten(treedef, [
      leaf * (1 + relative * jax.random.normal(k, np.shape(leaf), np.asarray(leaf).dtype))
      for leaf, k in zip(leaves, keys)])


def train_network(train: TrainConfig, model, model_name: str, x_NxD, y_NxC, n_classes: int, key, *,
                  learning_rates=None) -> CriterionResult:
  """Initialises ``model`` on the features of x and trains it to ``train``'s criterion.

  Args:
    train: ``experiments.core.config.TrainConfig`` (learning-rate grid, loss target, epoch cap, batch, l2).
    model: an ``ntk.two_layer_relu`` triple; model_name: 'relu' or 'mlp_attn' (``ntk.MODEL_NAMES``).
    x_NxD: the feature map's input rows [n, d] (``feature_inputs``), float32; y_NxC: one-hot targets [n, C].
    n_classes: C; key: PRNG key, split by ``split_key`` (the training key also draws the validation split).
    learning_rates: overrides ``train.learning_rates`` (e.g. one rate chosen once per model and data set).

  Returns:
    ``ntk.criterion.CriterionResult`` (params, chosen rate, final train loss and accuracy, reached, ...).

  Raises:
    ValueError: as ``ntk.criterion.train_to_criterion``.
  """
  init_key, train_key, _ = split_key(key)
  feats, params = init_network(model, model_name, x_NxD, init_key)
  params = perturb_initial(params, train.init_perturbation, init_key)
  return train_to_criterion(model.apply_fn, params, np.asarray(feats), y_NxC, key=train_key,
                            learning_rates=train.learning_rates if learning_rates is None else learning_rates,
                            loss=loss_for(n_classes), **train.criterion_kwargs())


class RateCache:
  """Trains each point under ``train.lr_selection``.

  'per_point': every point searches the grid. 'per_model_dataset': the grid is searched once per group
  (task, model, width, ...), on the group's first seed (a process that meets another seed first computes
  the same search), and the chosen rate is reused as a one-entry grid for the other seeds.
  """

  def __init__(self, train: TrainConfig, first_seed: int):
    self.train, self.first_seed, self.rates = train, first_seed, {}

  def train_point(self, group, seed: int, train_fn) -> CriterionResult:
    """``train_fn(seed, learning_rates)`` → ``CriterionResult`` (learning_rates None: the config's grid)."""
    if self.selection() != "per_model_dataset":
      return train_fn(seed, None)
    if group not in self.rates:
      searched = train_fn(self.first_seed, None)
      self.rates[group] = (searched.learning_rate,)
      if seed == self.first_seed:
        return searched
    return train_fn(seed, self.rates[group])

  def selection(self) -> str:
    """The record's lr_selection (``TrainConfig.selection``)."""
    return self.train.selection()


def criterion_fields(result: CriterionResult, train: TrainConfig) -> dict:
  """The training-criterion fields of a record: optimizer, learning_rate (chosen; None for L-BFGS),
  lr_selection, train_loss (final mean data loss, no L2), train_accuracy, converged (loss target reached),
  epochs_trained (L-BFGS: iterations), loss_target, max_epochs, lr_candidates (one dict per grid entry
  searched for this point; empty otherwise), and stop_reason (why it stopped short, where known; "")."""
  rate = None if result.learning_rate is None else float(result.learning_rate)
  return dict(optimizer=train.optimizer, learning_rate=rate, lr_selection=train.selection(),
              train_loss=float(result.train_loss), train_accuracy=float(result.train_accuracy),
              converged=bool(result.reached), epochs_trained=int(result.epochs),
              loss_target=float(result.target_loss), max_epochs=int(result.max_epochs),
              lr_candidates=[c._asdict() for c in result.candidates], stop_reason=result.stop_reason)
