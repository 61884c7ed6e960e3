"""Sharpness of the trained minima of 2L-ReLU and MLP-Attn: top Hessian eigenvalues of the training loss
(Lanczos on Hessian-vector products) and 1-D / 2-D filter-normalised loss landscapes (Li et al. 2018).

Usage:
  python -m experiments.landscape --workdir runs/landscape [--full] [field=value ...]

Tests arXiv 2603.13085's claim that 2L-ReLU sits in sharper minima and MLP-Attn in wider, flatter basins.
The networks are trained as in the flip-rate experiment (``experiments.trainers.network``: full-batch
L-BFGS to a train-loss target in the quick and full configs), with this experiment's own recorded ``train``
fields, so both models are measured at (about) the same train loss, at or below ``train.loss_target``;
records carry the final loss and ``converged``. Beside the raw top eigenvalues of the paper's fixed-readout
network (Hessian w.r.t. W), each record holds the elementwise adaptive sharpness, the top eigenvalues of
diag|θ| H diag|θ| (Kwon et al. 2021, arXiv 2102.11600), and, with ``readouts`` holding 'trained', the same
numbers (``trained_*`` fields) for the trained-readout network (Hessian w.r.t. W and V), where a layer
rescaling changes the raw eigenvalue but not the adaptive sharpness. L-BFGS stops both models at or below the
target, not at one loss, so each fixed-readout record also holds its numbers at the other model's train loss
(``rescaled_*``: the lower-loss model's first layer scaled until the two losses are equal, activation patterns
unchanged) and the filter-normalised ±1-step loss rise (Li et al. 2018).
Each seed trains on its own training subset (``experiments.core.seed_subsets.seed_splits``: block s of a
partition of the full training files, disjoint across seeds; from the embedded subsets an independent draw
with seed s, two seeds sharing n/N of their images in expectation), so the seed intervals cover the data.
Quick config: embedded MNIST, n = 256, width 256, 3 seeds. Writes config.json,
results.jsonl (top eigenvalues and landscape arrays per (task, model, width, seed)), and landscape_1d.png,
landscape_2d.png and summary.md (``experiments.landscape.report``, which redraws them from the records).
"""
from __future__ import annotations

import dataclasses
import math
import time

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

import ntk
from influence import filter_normalized_direction, hessian_top_eigenvalues, loss_landscape
from influence.sharpness import adaptive_sharpness, filter_normalized_rise, matched_loss_scale
from ntk.training import LOSSES
from experiments.core import distributed
from experiments.trainers import network as network_training
from experiments.core import seed_subsets, verdicts
from experiments.core.workdir import Workdir
from experiments.landscape.config import LandscapeConfig

KEY_FIELDS = ("task", "model", "width", "seed")


def run(config: LandscapeConfig, workdir, *, overwrite_config: bool = False) -> list[dict]:
  config.validate()
  wd = Workdir(workdir, KEY_FIELDS, config, overwrite_config=overwrite_config)
  done = wd.done()
  points = [(t, m, w, s) for t in config.tasks for m in config.models for w in config.widths for s in config.seeds]
  todo = [p for p in distributed.shard(points) if p not in done]  # this process's share
  data = {}
  alphas = np.linspace(-config.span, config.span, config.grid_1d)
  alphas_2d = np.linspace(-config.span, config.span, config.grid_2d)
  rates = {r: network_training.RateCache(config.train, config.seeds[0]) for r in config.readouts}
  # Loss matching trains the other models of a seed too; keep those results for their own points (training
  # is deterministic given the key, so a cached result is the one the point would compute).
  trained = {}
  for task, model_name, width, seed in tqdm(todo, desc="landscape", unit="model"):
    start = time.perf_counter()
    if (task, seed) not in data:  # this seed's own training subset
      data[task, seed] = seed_subsets.seed_splits(config.data, task, seed)
    train, _, draw = data[task, seed]
    stats = network_training.channel_stats(train)
    x_in = train.x if config.data.preprocessing == "raw" else train.x - network_training.mean_row(
        stats, train.x.shape[1])
    n_classes = len(train.info.class_ids)
    y = np.eye(n_classes, dtype=np.float32)[train.y]
    key = jax.random.PRNGKey(seed)
    feats, _ = ntk.model_features(model_name, x_in)
    loss_fn = LOSSES[network_training.loss_for(n_classes)]
    record = dict(task=task, model=model_name, width=width, seed=seed, preprocessing=config.data.preprocessing,
                  n_train=len(train.y), **draw)
    for readout in config.readouts:
      model = ntk.two_layer_relu(width, train.x.shape[1], out_dim=n_classes, readout=readout)

      def train_as(name, train_cfg=config.train, grid=None):
        cache_key = (readout, task, name, width, seed, train_cfg, grid)
        if cache_key not in trained:
          trained[cache_key] = rates[readout].train_point((task, name, width), seed, lambda s, g: (
              network_training.train_network(train_cfg, model, name, x_in, y, n_classes,
                                             jax.random.fold_in(jax.random.PRNGKey(s), 0),
                                             learning_rates=g if grid is None else grid)))
        return trained[cache_key]

      result = train_as(model_name)
      matched = None
      if config.match_loss and result.reached:
        # Stop at the slowest model's final loss when that one missed the target (item: same train loss).
        slowest = max([train_as(m).train_loss for m in config.models if m != model_name], default=-1.0)
        if slowest > config.train.loss_target and math.isfinite(slowest):
          matched = slowest
          result = train_as(model_name, dataclasses.replace(config.train, loss_target=slowest, check_every=1),
                            grid=None if result.learning_rate is None else (result.learning_rate,))
      params = result.params
      if readout == "fixed":  # the fixed readout is not a parameter of the loss surface
        trainable = {"W": params["W"]}
        objective = lambda p: loss_fn(model.apply_fn({"W": p["W"], "a": params["a"]}, feats), jnp.asarray(y))
      else:
        trainable = params
        objective = lambda p: loss_fn(model.apply_fn(p, feats), jnp.asarray(y))
      eig = hessian_top_eigenvalues(objective, trainable, k=config.top_k, num_iters=config.lanczos_iters,
                                    key=jax.random.fold_in(key, 1))
      adaptive = adaptive_sharpness(objective, trainable, k=config.top_k, num_iters=config.lanczos_iters,
                                    key=jax.random.fold_in(key, 4))
      fields = dict(network_training.criterion_fields(result, config.train), matched_loss=matched,
                    top_eigenvalues=eig, adaptive_sharpness=adaptive, train_loss=float(objective(trainable)))
      if readout == "fixed":
        fields.update(_at_matched_loss(objective, trainable, fields, config, key,
                                       [train_as(m).train_loss for m in config.models if m != model_name]))
        d1 = filter_normalized_direction(trainable, jax.random.fold_in(key, 2))
        d2 = filter_normalized_direction(trainable, jax.random.fold_in(key, 3))
        fields.update(alphas=alphas, landscape_1d=loss_landscape(objective, trainable, [d1], alphas),
                      alphas_2d=alphas_2d, landscape_2d=loss_landscape(objective, trainable, [d1, d2], alphas_2d))
        record.update(fields)
      else:
        record.update({f"trained_{k}": v for k, v in fields.items()})
    record["wall_time_s"] = time.perf_counter() - start
    wd.append(record)
  return wd.records()


MATCH_RTOL = verdicts.MATCH_RTOL  # two train losses are equal when they differ by at most 2 % of the larger


def _at_matched_loss(objective, trainable, fields: dict, config, key, other_losses) -> dict:
  """The sharpness of this model at the other model's train loss: when this one's loss lies more than
  ``MATCH_RTOL`` below the other's, its first layer is scaled by c < 1 until the losses are equal
  (``influence.sharpness.matched_loss_scale``; the activation pattern is unchanged), else c = 1. Records the
  scale, the loss there, the top Hessian eigenvalues, the adaptive sharpness and the filter-normalised ±1-step
  loss rise at that point (``rescaled_*``), and the rise as trained (``loss_rise``); only the latter where no
  scale in [0, 1] reaches the other loss (it lies above the loss at zero output)."""
  own = fields["train_loss"]
  finite = [v for v in other_losses if math.isfinite(v)]
  target = max(finite) if finite else own
  scale = 1.0
  rise = filter_normalized_rise(objective, trainable, jax.random.fold_in(key, 5))
  if target > own * (1 + MATCH_RTOL) or (target > own and own <= 0):
    try:
      scale = matched_loss_scale(lambda c: objective({"W": c * trainable["W"]}), target)
    except ValueError:  # the other loss lies above this network's at zero output: no scale reaches it
      return dict(loss_rise=rise)
  point = {"W": scale * trainable["W"]}
  same = scale == 1.0
  return dict(
      loss_rise=rise, rescale_factor=scale, rescaled_train_loss=float(objective(point)),
      rescaled_top_eigenvalues=fields["top_eigenvalues"] if same else hessian_top_eigenvalues(
          objective, point, k=config.top_k, num_iters=config.lanczos_iters, key=jax.random.fold_in(key, 1)),
      rescaled_adaptive_sharpness=fields["adaptive_sharpness"] if same else adaptive_sharpness(
          objective, point, k=config.top_k, num_iters=config.lanczos_iters, key=jax.random.fold_in(key, 4)),
      rescaled_loss_rise=rise if same else filter_normalized_rise(objective, point, jax.random.fold_in(key, 5)))
