"""Dual implications, the benefit half: does MLP-Attn's data-dependent kernel fit targets along the data's
dominant modes better than 2L-ReLU's, and targets in its weak modes worse? (arXiv 2603.13085 §1, §4;
docs/theory.md#dual-implications)

Usage:
  python -m experiments.dual_implications --workdir runs/dual [--full] [field=value ...]

For each data set, target kind (``ntk.approximation.TARGET_KINDS``: top-k / bottom-k non-zero / random
directions of the training matrix, plus the real one-hot labels), target draw and model it records, on the
test split:
  * kind "kinf": the relative error of kernel ridge regression with the model's infinite-width NTK K∞, and
    the kernel–target alignment of K∞;
  * kind "finite" (one per seed): the same with the empirical NTK at initialisation K₀ (width ``width``),
    and, for ``network_seeds``, the relative error of the network itself trained to ``train``'s ½·MSE
    criterion (fixed ±1 readout, full-batch L-BFGS).
Kernel regression starts from f₀ = 0 with ridge ρ = ridge_scale·tr(K)/n. Targets are scaled to unit variance
on the training split. Quick config: MNIST and CIFAR-10 embedded subsets, n = 256 train and test, k = 10,
5 draws, K₀ at 3 seeds, networks at 1 seed (a few minutes on 2 CPU cores). ``--full``: full files, n = 512,
3 network seeds. Writes config.json, results.jsonl, summary.md and errors.png
(``experiments.dual_implications_report``).
"""
from __future__ import annotations

import dataclasses
import math
import time

import jax
import numpy as np
from tqdm.auto import tqdm

import ntk
from ntk import approximation
from ntk.criterion import train_to_criterion
from ntk.distance import kernel_regression
from ntk.sweep import finite_width_kernel, infinite_width_kernels
from experiments import config as config_lib
from experiments import distributed
from experiments.workdir import Workdir

KEY_FIELDS = ("dataset", "target", "draw", "model", "kind", "seed")
TARGETS = approximation.TARGET_KINDS + ("labels",)
MODELS = ("relu", "mlp_attn")


@dataclasses.dataclass(frozen=True)
class DualImplicationsConfig:
  """datasets; data: the images (n_train, n_test; raw pixels only); targets: of ``TARGETS``; k: directions per
  target (≥ 1); draws: one target draw per entry (c ~ N(0, I_k); the labels are drawn once); models: of
  ``MODELS``; seeds: initialisations for K₀; network_seeds: those (a subset of seeds) at which the network
  is also trained; width: the networks' width m ≥ 1; ridge_scale: ρ/(tr(K)/n) > 0; train: the networks'
  criterion (loss ½·MSE; ``experiments.config.TrainConfig``)."""
  datasets: tuple[str, ...] = ("mnist", "cifar10")
  data: config_lib.DataConfig = config_lib.DataConfig(n_train=256, n_test=256)
  targets: tuple[str, ...] = TARGETS
  k: int = 10
  draws: tuple[int, ...] = (0, 1, 2, 3, 4)
  models: tuple[str, ...] = MODELS
  seeds: tuple[int, ...] = (0, 1, 2)
  network_seeds: tuple[int, ...] = (0,)
  width: int = 256
  ridge_scale: float = 1e-3
  train: config_lib.TrainConfig = config_lib.TrainConfig(
      learning_rates=(1e-3,), loss_target=1e-3, max_epochs=300, check_every=1, optimizer="lbfgs")

  def validate(self) -> None:
    """Raises ValueError naming the field and its allowed values."""
    config_lib.check_common(self, nonempty=("datasets", "targets", "draws", "models", "seeds"))
    if not self.data.n_train or self.data.n_train < 2 or not self.data.n_test or self.data.n_test < 2:
      raise ValueError(f"data.n_train and data.n_test must be ≥ 2, got {self.data.n_train}, {self.data.n_test}")
    bad = [t for t in self.targets if t not in TARGETS]
    if bad:
      raise ValueError(f"targets must be drawn from {TARGETS}, got {bad}")
    bad = [m for m in self.models if m not in MODELS]
    if bad:
      raise ValueError(f"models must be drawn from {MODELS}, got {bad}")
    if self.k < 1 or self.width < 1:
      raise ValueError(f"k and width must be ≥ 1, got k={self.k}, width={self.width}")
    if not (math.isfinite(self.ridge_scale) and self.ridge_scale > 0):
      raise ValueError(f"ridge_scale must be finite and > 0, got {self.ridge_scale!r}")
    if not set(self.network_seeds) <= set(self.seeds):
      raise ValueError(f"network_seeds {self.network_seeds} must be a subset of seeds {self.seeds}")
    if self.train.optimizer == "gauss_newton":
      raise ValueError("train.optimizer must be 'lbfgs' or 'adam' here (targets are regression, C ≥ 1)")


def get_config(full: bool = False) -> DualImplicationsConfig:
  if not full:
    return DualImplicationsConfig()
  return DualImplicationsConfig(data=config_lib.DataConfig(n_train=512, n_test=512, source="dir"),
                                network_seeds=(0, 1, 2))


def _targets(config, x_train, x_test, labels, target: str, draw: int, dataset_index: int):
  """(y_train [n, C], y_test [t, C]) scaled to unit variance on the training split, and the record fields."""
  if target == "labels":
    y_tr, y_te = labels
    extra = {}
  else:
    key = jax.random.fold_in(jax.random.PRNGKey(1000 * dataset_index + draw), TARGETS.index(target))
    t = approximation.mode_targets(x_train, x_test, kind=target, k=config.k, key=key)
    y_tr, y_te = t.train, t.test
    extra = dict(singular_values=[float(s) for s in t.singular_values if np.isfinite(s)])
  scale = float(np.sqrt(np.mean((y_tr - y_tr.mean(axis=0)) ** 2)))
  return y_tr / scale, y_te / scale, extra


def _kernel_fields(k_train, k_test_train, k_test, y_train, y_test, ridge_scale: float) -> dict:
  if not np.abs(k_train).max(initial=0) > 0:  # e.g. every ReLU of a tiny network inactive at init
    return dict(kernel_error=None, kernel_train_error=None, alignment=None, ridge=0.0,
                note="zero kernel: no kernel regression or alignment (every unit inactive on every input?)")
  zeros = np.zeros_like
  reg = kernel_regression(k_train, k_test_train, y_train, fx_train_0=zeros(y_train), fx_test_0=zeros(y_test),
                          ridge_scale=ridge_scale)
  return dict(kernel_error=approximation.relative_error(reg.test, y_test),
              kernel_train_error=approximation.relative_error(reg.train, y_train),
              alignment=approximation.kernel_target_alignment(k_test, y_test), ridge=reg.ridge)


def run(config: DualImplicationsConfig, workdir, *, overwrite_config: bool = False) -> list[dict]:
  """Runs (or resumes) every (data set, target, draw, model, kind, seed) point; returns all records."""
  config.validate()
  wd = Workdir(workdir, KEY_FIELDS, config, overwrite_config=overwrite_config)
  done = wd.done()
  points = []
  for dataset in config.datasets:
    for target in config.targets:
      for draw in (config.draws[:1] if target == "labels" else config.draws):
        for model in config.models:
          points.append((dataset, target, draw, model, "kinf", None))
          points += [(dataset, target, draw, model, "finite", s) for s in config.seeds]
  todo = [p for p in distributed.shard(points) if p not in done]
  cache: dict = {}    # data set -> (train rows, test rows, one-hot labels, {model: features})
  kernels: dict = {}  # (data set, model, kind, seed, outputs) -> (K_train, K_test_train, K_test)
  for point in tqdm(todo, desc="dual implications", unit="point"):
    dataset, target, draw, model_name, kind, seed = point
    start = time.perf_counter()
    if dataset not in cache:
      train, test = config_lib.load_splits(config.data, dataset, flatten=True)
      n_classes = int(max(train.y.max(), test.y.max())) + 1
      onehot = lambda y: np.eye(n_classes)[np.asarray(y)]  # noqa: E731
      cache[dataset] = (np.asarray(train.x, np.float32), np.asarray(test.x, np.float32),
                        (onehot(train.y), onehot(test.y)), {})
    x_tr, x_te, labels, feats = cache[dataset]
    if model_name not in feats:
      f_tr, f_te = ntk.model_features(model_name, x_tr, x_te)
      feats[model_name] = (np.asarray(f_tr), np.asarray(f_te))
    f_tr, f_te = feats[model_name]
    y_tr, y_te, extra = _targets(config, x_tr, x_te, labels, target, draw, config.datasets.index(dataset))
    record = dict(dataset=dataset, target=target, draw=draw, model=model_name, kind=kind, seed=seed,
                  n_train=len(x_tr), n_test=len(x_te), k=config.k, outputs=int(y_tr.shape[1]), **extra)
    if kind == "finite":
      model = ntk.two_layer_relu(config.width, f_tr.shape[1], out_dim=y_tr.shape[1], readout="fixed")
      init_key, train_key = jax.random.split(jax.random.PRNGKey(seed))
      _, params = model.init_fn(init_key, f_tr.shape)
    # The kernels depend on (data set, model, kind, seed, outputs), not on the target draw: computed once each.
    kernel_key = (dataset, model_name, kind, seed, y_tr.shape[1])
    if kernel_key not in kernels:
      if kind == "kinf":
        inf = infinite_width_kernels(f_tr, f_te, readout="fixed")
        kernels[kernel_key] = (inf.train, inf.test_train,
                               infinite_width_kernels(f_te, f_te[:1], readout="fixed").train)
      else:
        kernels[kernel_key] = tuple(finite_width_kernel(model, params, a, b)
                                    for a, b in ((f_tr, None), (f_te, f_tr), (f_te, None)))
    record.update(_kernel_fields(*kernels[kernel_key], y_tr, y_te, config.ridge_scale))
    if kind == "finite":
      record["width"] = config.width
      if seed in config.network_seeds:
        result = train_to_criterion(model.apply_fn, params, f_tr, np.asarray(y_tr, np.float32), key=train_key,
                                    learning_rates=config.train.learning_rates, loss="mse",
                                    **config.train.criterion_kwargs())
        pred = np.asarray(model.apply_fn(result.params, f_te), np.float64)
        record.update(network_error=approximation.relative_error(pred, y_te), network_train_loss=float(
            result.train_loss), network_converged=bool(result.reached), network_iterations=int(result.epochs))
    record["wall_time_s"] = time.perf_counter() - start
    wd.append(record)
  return wd.records()


def main(argv=None) -> None:
  from experiments import dual_implications_report
  config_lib.experiment_main("Dual implications: kernel fit of top- vs bottom-mode targets.", get_config, run,
                             dual_implications_report.write_report, argv)


if __name__ == "__main__":
  main()
