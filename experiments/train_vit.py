"""Train matched ViT / DiffViT pairs on CIFAR-10 (or MNIST / Fashion-MNIST) with orbax checkpoints.

Usage:
  python -m experiments.train_vit --workdir /tmp/vit [--full] [field=value ...]

Quick config (default): the embedded CIFAR-10 subset (1,500 train / 500 test images), patch 4, width 64,
4 standard heads vs 2 differential heads (λ_init 0.8), depth 1, 15 epochs of Adam (batch 64, lr 2e-3,
warm-up then cosine). About a minute per model on 2 CPU cores; test accuracy about 0.35–0.40 (chance 0.10).
``--full``: the full CIFAR-10 files (``data_source=dir``, ATTN_DATA_DIR; 45,000 train, 5,000 held out),
width 192, 6 / 3 heads, depths {1, 2, 4, 8, 12}, λ_init ∈ {0.5, 0.8, 0.95} at depth 1, 100 epochs —
sized for an accelerator.

Writes config.json, results.jsonl (one record per trained model: clean accuracy, parameter count, training
history, wall time) and the checkpoints under ``models/<name>/checkpoints`` (``train_classifier``);
a restarted run resumes inside an unfinished model and skips finished ones.

Source: arXiv 2510.00517 (REFERENCE.md §4); models in ``attention.vit``.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from attention.differential import check_lambda_init
from attention.vit import ViTConfig, VisionTransformer, parameter_count
from experiments import config as config_lib
from experiments.classifier_training import TrainConfig, train_classifier
from experiments.data import load_dataset
from experiments.workdir import Workdir

KEY_FIELDS = ("kind", "model", "depth", "lambda_init")
MODELS = ("vit", "diffvit")
DEPTH_SCHEDULE = "depth"  # λ_init value meaning the schedule 0.8 − 0.6·exp(−0.3·l)
NO_LAMBDA = "-"           # λ_init field of a standard ViT


@dataclasses.dataclass(frozen=True)
class TrainViTConfig:
  """Fields (all overridable as field=value).

  dataset: "cifar10", "mnist" or "fashion_mnist". n_train, n_test: class-balanced subsets drawn with
    data_seed (None: the whole split). data_source / data_dir: "embedded" (shipped subsets), "dir" (full
    files; data_dir or ATTN_DATA_DIR) or "tfds"; holdout: test images split off the training files
    (full CIFAR-10 npz has a partial test split).
  models: which of "vit", "diffvit" to train. depths: encoder depths. lambda_inits: DiffViT λ_init at every
    depth, each a float in [0, 1) or "depth" (the schedule). single_layer_lambda_inits: extra DiffViT
    λ_init values trained at depth 1 only (the paper's single-layer sweep).
  patch_size, dim, num_heads (standard heads 2H; DiffViT gets H), mlp_ratio, pool ("cls" / "mean"):
    architecture (``attention.vit.ViTConfig``).
  epochs, batch_size, learning_rate, weight_decay, warmup_epochs, seed: training (``TrainConfig``).
  """
  dataset: str = "cifar10"
  n_train: Optional[int] = None
  n_test: Optional[int] = None
  data_source: str = "embedded"
  data_dir: Optional[str] = None
  data_seed: int = 0
  holdout: Optional[int] = None
  models: tuple[str, ...] = MODELS
  depths: tuple[int, ...] = (1,)
  lambda_inits: tuple[str, ...] = ("0.8",)
  single_layer_lambda_inits: tuple[str, ...] = ()
  patch_size: int = 4
  dim: int = 64
  num_heads: int = 4
  mlp_ratio: float = 2.0
  pool: str = "cls"
  epochs: int = 15
  batch_size: int = 64
  learning_rate: float = 2e-3
  weight_decay: float = 0.0
  warmup_epochs: int = 1
  seed: int = 0

  def validate(self) -> None:
    """Raises ValueError naming the field and its allowed values."""
    config_lib.check_common(self, dataset_fields=())
    if self.dataset not in ("cifar10", "mnist", "fashion_mnist"):
      raise ValueError(f"dataset must be 'cifar10', 'mnist' or 'fashion_mnist', got {self.dataset!r}")
    for name in ("n_train", "n_test"):
      value = getattr(self, name)
      if value is not None and value < 1:
        raise ValueError(f"{name} must be >= 1 or None (the whole split), got {value}")
    bad = [m for m in self.models if m not in MODELS]
    if not self.models or bad:
      raise ValueError(f"models must be a non-empty subset of {MODELS}, got {self.models}")
    if not self.depths or any(d < 1 for d in self.depths):
      raise ValueError(f"depths must be integers >= 1, got {self.depths}")
    for field in ("lambda_inits", "single_layer_lambda_inits"):
      parsed = [parse_lambda_init(v) for v in getattr(self, field)]
      if len(set(parsed)) != len(parsed):
        raise ValueError(f"{field} names one λ_init twice (e.g. 0.8 and 0.80), got {getattr(self, field)}")
    if not self.lambda_inits:
      raise ValueError("lambda_inits must hold at least one value (a float in [0, 1) or 'depth')")
    TrainConfig(self.epochs, self.batch_size, self.learning_rate, self.weight_decay, self.warmup_epochs,
                self.seed).validate()
    self.vit_config(1, NO_LAMBDA).validate()
    if "diffvit" in self.models:
      self.vit_config(1, self.lambda_inits[0]).validate()

  def train_config(self) -> TrainConfig:
    return TrainConfig(epochs=self.epochs, batch_size=self.batch_size, learning_rate=self.learning_rate,
                       weight_decay=self.weight_decay, warmup_epochs=self.warmup_epochs, seed=self.seed)

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


def get_config(full: bool = False) -> TrainViTConfig:
  """The quick CPU config, or with ``full`` the accelerator one (module docstring)."""
  if not full:
    return TrainViTConfig()
  return TrainViTConfig(data_source="dir", holdout=5000, depths=(1, 2, 4, 8, 12), dim=192, num_heads=6,
                        single_layer_lambda_inits=("0.5", "0.95"), epochs=100, batch_size=128,
                        learning_rate=1e-3, weight_decay=5e-5, warmup_epochs=5)


class Point(NamedTuple):
  """One model to train: model ("vit"/"diffvit"), depth, lambda_init ("-" for the ViT)."""
  model: str
  depth: int
  lambda_init: str

  @property
  def name(self) -> str:
    return f"{self.model}_d{self.depth}" + ("" if self.model == "vit" else f"_lam{self.lambda_init}")


def points(config: TrainViTConfig) -> list[Point]:
  """All models of a config: ViT and DiffViT at every depth, plus the single-layer λ_init sweep."""
  out = []
  for depth in config.depths:
    if "vit" in config.models:
      out.append(Point("vit", depth, NO_LAMBDA))
    if "diffvit" in config.models:
      out += [Point("diffvit", depth, lam) for lam in config.lambda_inits]
  if "diffvit" in config.models and 1 in config.depths:
    out += [Point("diffvit", 1, lam) for lam in config.single_layer_lambda_inits if lam not in config.lambda_inits]
  return list(dict.fromkeys(out))


def load_data(config: TrainViTConfig):
  """(train, test) Splits of the config's data set."""
  kw = dict(source=config.data_source, data_dir=config.data_dir, seed=config.data_seed, holdout=config.holdout)
  return (load_dataset(config.dataset, "train", n=config.n_train, **kw),
          load_dataset(config.dataset, "test", n=config.n_test, **kw))


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
  return jax.tree_util.Partial(_apply_fns(vit_config), params)


_APPLY_CACHE: dict = {}


def _apply_fns(vit_config: ViTConfig):
  # One function object per architecture, so jit caches keyed on it are reused.
  if vit_config not in _APPLY_CACHE:
    module = VisionTransformer(vit_config)
    _APPLY_CACHE[vit_config] = lambda params, x: module.apply({"params": params}, x)
  return _APPLY_CACHE[vit_config]


@jax.jit
def predict_labels(logits_fn, x_BxHxWxC):
  """argmax of ``logits_fn(x)``, int32 [B]; one compiled program per architecture and batch shape, shared by
  the accuracy here and the clean predictions of ``experiments.diff_attention``."""
  return jnp.argmax(logits_fn(x_BxHxWxC), axis=-1)


def predict(logits_fn, x, batch_size: int = 500) -> np.ndarray:
  """Predicted labels [n] for numpy images x [n, H, W, C], in batches of ``batch_size``."""
  return np.concatenate([np.asarray(predict_labels(logits_fn, jnp.asarray(x[i:i + batch_size])))
                         for i in range(0, len(x), batch_size)])


def train_point(config: TrainViTConfig, point: Point, train, test, workdir) -> TrainedModel:
  """Trains (or resumes / loads) one model into ``<workdir>/models/<name>`` and measures test accuracy."""
  vit_config = config.vit_config(point.depth, point.lambda_init)
  start = time.perf_counter()
  result = train_classifier(VisionTransformer(vit_config), train.x, train.y, config.train_config(),
                            Path(workdir) / "models" / point.name)
  fn = logits_function(vit_config, result.params)
  record = dict(kind="train", model=point.model, depth=point.depth, lambda_init=point.lambda_init,
                name=point.name, seed=config.seed, dataset=config.dataset, n_train=len(train.y),
                n_test=len(test.y), parameters=parameter_count(result.params),
                clean_accuracy=float(np.mean(predict(fn, test.x) == test.y)),
                train_accuracy_last_epoch=result.history[-1]["train_accuracy"] if result.history else None,
                train_seconds=float(sum(h["seconds"] for h in result.history)),
                history=result.history, wall_time_s=time.perf_counter() - start)
  return TrainedModel(point, vit_config, result.params, fn, record)


def run(config: TrainViTConfig, workdir, *, overwrite_config: bool = False) -> list[dict]:
  """Trains every point of the config (resuming), appending one record per finished model."""
  config.validate()
  wd = Workdir(workdir, KEY_FIELDS, config, overwrite_config=overwrite_config)
  done = wd.done()
  todo = [p for p in points(config) if ("train", p.model, p.depth, p.lambda_init) not in done]
  if todo:
    train, test = load_data(config)
    for point in tqdm(todo, desc="train (Diff)ViT", unit="model"):
      wd.append(train_point(config, point, train, test, workdir).record)
  return wd.records()


def main(argv=None) -> None:
  config, args = config_lib.cli("Train matched ViT / DiffViT pairs.", get_config, argv)
  with config_lib.user_errors():
    records = run(config, args.workdir, overwrite_config=args.overwrite_config)
  for r in records:
    print(f"{r['name']:>24}: {r['parameters']:>8} parameters, clean accuracy {r['clean_accuracy']:.3f}, "
          f"{r['train_seconds']:.0f} s")


if __name__ == "__main__":
  main()
