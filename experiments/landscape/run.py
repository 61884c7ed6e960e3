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
rescaling changes the raw eigenvalue but not the adaptive sharpness.
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
from influence.sharpness import adaptive_sharpness
from ntk.training import LOSSES
from experiments.core import config as config_lib
from experiments.core import distributed
from experiments.trainers import network as network_training
from experiments.core import seed_subsets
from experiments.core.workdir import Workdir

KEY_FIELDS = ("task", "model", "width", "seed")


@dataclasses.dataclass(frozen=True)
class LandscapeConfig:
  """tasks, models, widths, seeds; data: ``DataConfig`` (n_train images; no test split: data.n_test = 0);
  train: ``TrainConfig`` of the Adam training to a criterion (``experiments.trainers.network``);
  readouts: 'fixed' (always; the paper's ±1 readout) and optionally 'trained'; match_loss: when another model
  of ``models`` (same task, width, seed, readout) misses the loss target, a model that reached it is
  retrained (same rate) to stop at the first epoch where its loss is at or below that model's final loss
  (recorded as matched_loss; None otherwise), so both are measured at the same train loss; top_k eigenvalues from
  lanczos_iters HVPs; grid points and span of the filter-normalised plots (step sizes in units of the
  per-filter weight norm)."""
  tasks: tuple[str, ...] = ("mnist",)
  models: tuple[str, ...] = config_lib.one_of(("relu", "mlp_attn"), ntk.MODEL_NAMES)
  widths: tuple[int, ...] = (256,)
  seeds: tuple[int, ...] = (0, 1, 2)
  data: config_lib.DataConfig = config_lib.DataConfig(n_train=256, n_test=0)
  # L-BFGS checks the loss at every iterate, so both models stop at the first iterate at or below the target.
  train: config_lib.TrainConfig = config_lib.TrainConfig(optimizer="lbfgs", max_epochs=2000)
  readouts: tuple[str, ...] = ("fixed", "trained")
  match_loss: bool = True
  top_k: int = 3
  lanczos_iters: int = 30
  grid_1d: int = 41
  grid_2d: int = 21
  span: float = 1.0

  def validate(self) -> None:
    config_lib.check_common(self, dataset_fields=("tasks",), binary_tasks=True, centering=True,
                            nonempty=("tasks", "models", "widths", "seeds"))
    if self.data.n_train is None or self.data.n_train < 2 or self.data.n_test != 0:
      raise ValueError(f"data.n_train must be ≥ 2 and data.n_test = 0 (no test split is used), got "
                       f"{self.data.n_train}, {self.data.n_test}")
    bad = [m for m in self.models if m not in ntk.MODEL_NAMES]
    if bad:
      raise ValueError(f"models must be among {ntk.MODEL_NAMES}, got {bad}")
    if any(w < 1 for w in self.widths):
      raise ValueError(f"widths must be ≥ 1, got {self.widths}")
    if "fixed" not in self.readouts or any(r not in ntk.READOUTS for r in self.readouts):
      raise ValueError(f"readouts must hold 'fixed' and may hold 'trained', got {self.readouts}")
    from experiments.data import BINARY_TASKS
    config_lib.check_gauss_newton(self.train, "train", mse=all(t in BINARY_TASKS for t in self.tasks),
                                  fixed_readout=self.readouts == ("fixed",))
    if self.top_k < 1 or self.lanczos_iters < self.top_k:
      raise ValueError(f"need 1 ≤ top_k ≤ lanczos_iters, got {self.top_k}, {self.lanczos_iters}")
    if self.grid_1d < 3 or self.grid_2d < 3 or self.span <= 0:
      raise ValueError("grid_1d and grid_2d must be ≥ 3 and span > 0")


def get_config(full: bool = False) -> LandscapeConfig:
  if not full:
    return LandscapeConfig()
  return LandscapeConfig(tasks=("mnist", "fashion_mnist", "cifar10"), widths=(256, 1024, 4096),
                         train=config_lib.TrainConfig(optimizer="lbfgs"),
                         seeds=(0, 1, 2, 3, 4), data=config_lib.DataConfig(n_train=1000, n_test=0, source="dir"))


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
