"""Training of ViT / DiffViT models, shared by the ViT experiments (``experiments.train_vit.run``,
``experiments.diff_attention.run``): their config (data, architecture grid, training), the grid of models,
training one model with resumable orbax checkpoints (``experiments.trainers.classifier``), and compiled
prediction. Models: ``attention.vit`` (arXiv 2510.00517).
"""
from __future__ import annotations

import dataclasses
import functools
import time
from pathlib import Path
from typing import Iterator, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from attention.differential import check_lambda_init
from attention.vit import ViTConfig, VisionTransformer, parameter_count
from experiments.core import config as config_lib
from experiments.trainers.classifier import train_classifier
from experiments.trainers.seeds import train_classifier_seeds

MODELS = ("vit", "diffvit")
DEPTH_SCHEDULE = "depth"  # λ_init value meaning the schedule 0.8 − 0.6·exp(−0.3·l)
NO_LAMBDA = "-"           # λ_init field of a standard ViT
# Config fields that change how models are computed, not which: a workdir resumes whatever their values.
BOOKKEEPING = frozenset({"seeds_per_program"})


@dataclasses.dataclass(frozen=True)
class TrainViTConfig:
  """Fields (all overridable as field=value).

  dataset: "cifar10", "mnist" or "fashion_mnist". data: ``DataConfig``: n_train, n_test class-balanced
    subsets drawn with data.seed (None: the whole split); data.source / data.dir: "embedded" (shipped
    subsets), "dir" (full files; data.dir or ATTN_DATA_DIR) or "tfds"; data.holdout: test images split off
    the training files (full CIFAR-10 npz has a partial test split).
  models: which of "vit", "diffvit" to train. depths: encoder depths. lambda_inits: DiffViT λ_init at every
    depth, each a float in [0, 1) or "depth" (the schedule). single_layer_lambda_inits: extra DiffViT
    λ_init values trained at depth 1 only (the paper's single-layer sweep).
  patch_size, dim, num_heads (standard heads 2H; DiffViT gets H), mlp_ratio, pool ("cls" / "mean"):
    architecture (``attention.vit.ViTConfig``).
  train: ``ClassifierTrainConfig`` (epochs, batch_size, learning_rate, l2, warmup_epochs, seed, augment,
    max_to_keep; ``experiments.trainers.classifier``).
  depth1_seeds: training seeds of every depth-1 model (train.seed, train.seed + 1, ...). Each seed is its own
    model (name suffix ``_s<k>`` for the k-th extra seed).
  deep_seeds: the same for the models of depth ≥ 2 (1: train.seed only).
  deep_epochs: epochs of the models of depth ≥ 2 (None: train.epochs); deeper models reach the accuracy
    target in fewer epochs.
  target_accuracy: the clean test accuracy a model must reach to enter the claims (0: no target); a model
    below it is recorded with ``meets_target = False`` and flagged in the report.
  seeds_per_program: training seeds of one model trained together as one vmapped program
    (``experiments.trainers.seeds``; 1: one after another). Bookkeeping: it bounds memory and changes no
    model beyond float32 rounding, so a workdir resumes under any value (``BOOKKEEPING``).
  """
  dataset: str = "cifar10"
  data: config_lib.DataConfig = config_lib.DataConfig()
  models: tuple[str, ...] = MODELS
  depths: tuple[int, ...] = (1,)
  lambda_inits: tuple[str, ...] = ("0.8",)
  single_layer_lambda_inits: tuple[str, ...] = ()
  patch_size: int = 4
  dim: int = 64
  num_heads: int = 4
  mlp_ratio: float = 2.0
  pool: str = "cls"
  train: config_lib.ClassifierTrainConfig = config_lib.ClassifierTrainConfig(
      epochs=15, batch_size=64, learning_rate=2e-3, l2=0.0, warmup_epochs=1, seed=0)
  depth1_seeds: int = 1
  deep_seeds: int = 1
  deep_epochs: Optional[int] = None
  target_accuracy: float = 0.0
  seeds_per_program: int = 1

  def validate(self) -> None:
    """Raises ValueError naming the field and its allowed values."""
    config_lib.check_common(self, dataset_fields=())
    if self.seeds_per_program < 1:
      raise ValueError(f"seeds_per_program must be >= 1, got {self.seeds_per_program}")
    if self.dataset not in ("cifar10", "mnist", "fashion_mnist"):
      raise ValueError(f"dataset must be 'cifar10', 'mnist' or 'fashion_mnist', got {self.dataset!r}")
    if self.data.n_test == 0:
      raise ValueError("data.n_test must be >= 1 or None (the whole split), got 0")
    bad = [m for m in self.models if m not in MODELS]
    if not self.models or bad:
      raise ValueError(f"models must be a non-empty subset of {MODELS}, got {self.models}")
    for name in ("depth1_seeds", "deep_seeds"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
    if self.deep_epochs is not None and self.deep_epochs < 1:
      raise ValueError(f"deep_epochs must be >= 1 or None (train.epochs), got {self.deep_epochs}")
    if not 0.0 <= self.target_accuracy <= 1.0:
      raise ValueError(f"target_accuracy must be in [0, 1], got {self.target_accuracy}")
    if not self.depths or any(d < 1 for d in self.depths):
      raise ValueError(f"depths must be integers >= 1, got {self.depths}")
    for field in ("lambda_inits", "single_layer_lambda_inits"):
      parsed = [parse_lambda_init(v) for v in getattr(self, field)]
      if len(set(parsed)) != len(parsed):
        raise ValueError(f"{field} names one λ_init twice (e.g. 0.8 and 0.80), got {getattr(self, field)}")
    if not self.lambda_inits:
      raise ValueError("lambda_inits must hold at least one value (a float in [0, 1) or 'depth')")
    self.vit_config(1, NO_LAMBDA).validate()
    if "diffvit" in self.models:
      self.vit_config(1, self.lambda_inits[0]).validate()

  def vit_config(self, depth: int, lambda_init: str) -> ViTConfig:
    """The architecture of point (depth, λ_init); λ_init "-" means the standard ViT."""
    image_size, num_classes = (32, 10) if self.dataset == "cifar10" else (28, 10)
    common = dict(num_classes=num_classes, image_size=image_size, patch_size=self.patch_size, dim=self.dim,
                  depth=depth, num_heads=self.num_heads, mlp_ratio=self.mlp_ratio, pool=self.pool)
    if lambda_init == NO_LAMBDA:
      return ViTConfig(attention="standard", **common)
    return ViTConfig(attention="differential", lambda_init=parse_lambda_init(lambda_init), **common)


def parse_lambda_init(value: str) -> Optional[float]:
  """"depth" -> None (the schedule); a number string -> float in [0, 1); anything else raises ValueError."""
  if value == DEPTH_SCHEDULE:
    return None
  try:
    number = float(value)
  except (TypeError, ValueError):
    raise ValueError(f"lambda_init must be a float in [0, 1) or {DEPTH_SCHEDULE!r}, got {value!r}") from None
  return check_lambda_init(number)


def full_config() -> TrainViTConfig:
  """The accelerator grid: the full CIFAR-10 files (45,000 train, 5,000 held out), width 192, 6 / 3 heads,
  depths {1, 2, 4, 8, 12}, λ_init ∈ {0.5, 0.8, 0.95} at depth 1, 100 epochs."""
  return TrainViTConfig(data=config_lib.DataConfig(source="dir", holdout=5000), depths=(1, 2, 4, 8, 12),
                        dim=192, num_heads=6, single_layer_lambda_inits=("0.5", "0.95"),
                        train=config_lib.ClassifierTrainConfig(epochs=100, batch_size=128, learning_rate=1e-3,
                                                               l2=5e-5, warmup_epochs=5, seed=0))


class Point(NamedTuple):
  """One model to train: model ("vit"/"diffvit"), depth, lambda_init ("-" for the ViT), seed_index (k: trained
  with train.seed + k)."""
  model: str
  depth: int
  lambda_init: str
  seed_index: int = 0

  @property
  def name(self) -> str:
    return (f"{self.model}_d{self.depth}" + ("" if self.model == "vit" else f"_lam{self.lambda_init}")
            + (f"_s{self.seed_index}" if self.seed_index else ""))

  def matched_vit(self) -> "Point":
    """The standard ViT this point is compared with: same depth and training seed."""
    return Point("vit", self.depth, NO_LAMBDA, self.seed_index)


def points(config: TrainViTConfig) -> list[Point]:
  """All models of a config: ViT and DiffViT at every depth, plus the single-layer λ_init sweep; depth-1
  models once per training seed (``depth1_seeds``), deeper ones once per ``deep_seeds``."""
  out = []
  for depth in config.depths:
    seeds = range(config.depth1_seeds if depth == 1 else config.deep_seeds)
    if "vit" in config.models:
      out += [Point("vit", depth, NO_LAMBDA, k) for k in seeds]
    if "diffvit" in config.models:
      out += [Point("diffvit", depth, lam, k) for k in seeds for lam in config.lambda_inits]
  if "diffvit" in config.models and 1 in config.depths:
    out += [Point("diffvit", 1, lam, k) for k in range(config.depth1_seeds)
            for lam in config.single_layer_lambda_inits if lam not in config.lambda_inits]
  return list(dict.fromkeys(out))


def point_train_config(config: TrainViTConfig, point: Point) -> config_lib.ClassifierTrainConfig:
  """The training config of one point: seed train.seed + seed_index, and deep_epochs at depth ≥ 2."""
  epochs = config.train.epochs if point.depth == 1 or config.deep_epochs is None else config.deep_epochs
  return dataclasses.replace(config.train, seed=config.train.seed + point.seed_index, epochs=epochs)


def load_data(config: TrainViTConfig):
  """(train, test) Splits of the config's data set (images [n, H, W, C] float32 in [0, 1])."""
  return config_lib.load_splits(config.data, config.dataset)


class TrainedModel(NamedTuple):
  """A trained point: its architecture, params, a jitted logits function and the training record."""
  point: Point
  vit_config: ViTConfig
  params: object
  logits_fn: object
  record: dict


def logits_function(vit_config: ViTConfig, params):
  """``jax.tree_util.Partial`` computing logits [B, classes] from images [B, H, W, C]; the params are
  its array leaves, so compiled attacks reuse their program across weights of the same shapes."""
  return jax.tree_util.Partial(apply_fns(vit_config), params)


@functools.lru_cache(maxsize=None)
def apply_fns(vit_config: ViTConfig):
  """(params, x) -> logits: one function object per architecture (the code base's one way to a stable jit
  identity, see ``attacks._driver``), so compiled code keyed on it is reused across weights."""
  module = VisionTransformer(vit_config)
  return lambda params, x: module.apply({"params": params}, x)


@jax.jit
def predict_labels(logits_fn, x_BxHxWxC):
  """argmax of ``logits_fn(x)``, int32 [B]; one compiled program per architecture and batch shape, shared by
  the accuracy of ``train_point`` and the clean predictions of ``experiments.diff_attention.run``."""
  return jnp.argmax(logits_fn(x_BxHxWxC), axis=-1)


def predict(logits_fn, x, batch_size: int = 500) -> np.ndarray:
  """Predicted labels [n] for numpy images x [n, H, W, C], in batches of ``batch_size``."""
  return np.concatenate([np.asarray(predict_labels(logits_fn, jnp.asarray(x[i:i + batch_size])))
                         for i in range(0, len(x), batch_size)])


def train_point(config: TrainViTConfig, point: Point, train, test, workdir) -> TrainedModel:
  """Trains (or resumes / loads) one model into ``<workdir>/models/<name>`` and measures test accuracy."""
  (trained,) = train_points(config, [point], train, test, workdir)
  return trained


def train_points(config: TrainViTConfig, points_: Sequence[Point], train, test, workdir) -> Iterator[TrainedModel]:
  """Trains (or resumes / loads) ``points_`` into ``<workdir>/models/<name>``, yielding each with its test
  accuracy as it finishes (in the order given, grouped): points that differ only in their seed go
  ``config.seeds_per_program`` at a time through one vmapped program (``experiments.trainers.seeds``)."""
  groups: dict = {}
  for point in points_:
    groups.setdefault(point._replace(seed_index=0), []).append(point)
  for members in groups.values():
    for i in range(0, len(members), config.seeds_per_program):
      chunk = members[i:i + config.seeds_per_program]
      vit_config = config.vit_config(chunk[0].depth, chunk[0].lambda_init)
      start = time.perf_counter()
      train_configs = [point_train_config(config, p) for p in chunk]
      dirs = [Path(workdir) / "models" / p.name for p in chunk]
      module = VisionTransformer(vit_config)
      results = ([train_classifier(module, train.x, train.y, train_configs[0], dirs[0])] if len(chunk) == 1 else
                 train_classifier_seeds(module, train.x, train.y, train_configs, dirs))
      wall = (time.perf_counter() - start) / len(chunk)
      for point, train_config, result in zip(chunk, train_configs, results):
        yield _trained(config, point, vit_config, train_config, result, train, test, wall, len(chunk))


def _trained(config, point, vit_config, train_config, result, train, test, wall, together) -> TrainedModel:
  fn = logits_function(vit_config, result.params)
  clean_accuracy = float(np.mean(predict(fn, test.x) == test.y))
  record = dict(kind="train", model=point.model, depth=point.depth, lambda_init=point.lambda_init,
                seed_index=point.seed_index, name=point.name, seed=train_config.seed, epochs=train_config.epochs,
                dataset=config.dataset, n_train=len(train.y),
                n_test=len(test.y), parameters=parameter_count(result.params),
                clean_accuracy=clean_accuracy, target_accuracy=config.target_accuracy,
                meets_target=clean_accuracy >= config.target_accuracy,
                train_accuracy_last_epoch=result.history[-1].train_accuracy if result.history else None,
                train_seconds=float(sum(h.seconds for h in result.history)), seeds_in_program=together,
                history=[h._asdict() for h in result.history], wall_time_s=wall)
  return TrainedModel(point, vit_config, result.params, fn, record)
