"""Width sweep: finite- vs infinite-width NTK of 2L-ReLU and MLP-Attn on real images.

Usage:
  python -m experiments.width_sweep --workdir runs/width_sweep [--full] [field=value ...]

Quick config (default): MNIST, Fashion-MNIST and CIFAR-10 from the embedded subsets, n = 256 train /
100 test, widths 16 … 4096, 3 seeds for the kernels at initialisation; gradient-descent training and
function distance on MNIST only, widths ≤ 1024, 3 seeds. About 2 minutes on 2 CPU cores.
``--full``: 1,000 train / 500 test images from the full files (``data.source=dir``, ``ATTN_DATA_DIR``),
training on all data sets up to width 4096, 5 seeds — sized for an accelerator or a long CPU run.

Writes config.json, results.jsonl (one record per (dataset, model, readout, width, seed, kind)), orbax
arrays of the test predictions, and plots + summary.md (``experiments.width_sweep_report``).
A killed run restarted with the same workdir skips the recorded points.

Source: arXiv 2603.13085 (docs/theory.md#kernel-distance).
"""
from __future__ import annotations

import dataclasses
import time
import jax
import numpy as np
from tqdm.auto import tqdm

import ntk
from ntk.sweep import default_learning_rate, infinite_width_kernels, kernel_distance, train_and_compare
from experiments import config as config_lib
from experiments import distributed
from experiments.workdir import Workdir

KEY_FIELDS = ("dataset", "model", "readout", "width", "seed", "kind")


@dataclasses.dataclass(frozen=True)
class SweepTrainConfig:
  """Full-batch gradient descent and the function-distance comparison (``ntk.sweep.train_and_compare``).

  enabled: run it. datasets, max_width, seeds: where it runs (widths ≤ max_width).
  steps, lr_scale: GD steps; η = lr_scale · nC/λ_max(K∞) (half the stability limit at 1).
  """
  enabled: bool = True
  datasets: tuple[str, ...] = ("mnist",)
  max_width: int = 1024
  seeds: tuple[int, ...] = (0, 1, 2)
  steps: int = 400
  lr_scale: float = 1.0

  def validate(self, group: str = "train") -> None:
    """Raises ValueError naming the dotted field and its allowed range."""
    from experiments.data import get_spec
    for name in self.datasets:
      try:
        get_spec(name)
      except ValueError as e:
        raise ValueError(f"{group}.datasets: {e}") from None
    if self.max_width < 1:
      raise ValueError(f"{group}.max_width must be >= 1, got {self.max_width}")
    if self.steps < 0 or not self.lr_scale > 0:
      raise ValueError(f"{group}.steps must be ≥ 0 and {group}.lr_scale > 0, got {self.steps}, "
                       f"{self.lr_scale}")


@dataclasses.dataclass(frozen=True)
class WidthSweepConfig:
  """Fields (all overridable as field=value; a group's fields as group.field).

  datasets, models: what to sweep (models: 'relu' = 2L-ReLU, 'mlp_attn' = MLP-Attn).
  widths, seeds: hidden widths and init seeds for the kernels at initialisation.
  data: ``DataConfig`` (n_train, n_test class-balanced images drawn with data.seed; data.source 'embedded',
    'dir' (full files; data.dir or ATTN_DATA_DIR) or 'tfds').
  readout: 'fixed' (the paper's ±1 readout) or 'trained' (stax; adds the NNGP term).
  kernel_path: 'fast' (closed form) or 'neural_tangents' (reference, much slower).
  train: ``SweepTrainConfig``, gradient descent and the function distance.
  save_arrays: save test predictions of each trained point with orbax.
  """
  datasets: tuple[str, ...] = ("mnist", "fashion_mnist", "cifar10")
  models: tuple[str, ...] = ("relu", "mlp_attn")
  widths: tuple[int, ...] = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
  seeds: tuple[int, ...] = (0, 1, 2)
  data: config_lib.DataConfig = config_lib.DataConfig(n_train=256, n_test=100)
  readout: str = "fixed"
  kernel_path: str = "fast"
  train: SweepTrainConfig = SweepTrainConfig()
  save_arrays: bool = True

  def validate(self) -> None:
    """Raises ValueError naming the field and its allowed range."""
    config_lib.check_common(self, dataset_fields=("datasets",), nonempty=("datasets", "models", "widths", "seeds"))
    if not self.widths or any(w < 1 for w in self.widths):
      raise ValueError(f"widths must be integers ≥ 1, got {self.widths}")
    if self.data.n_train is None or self.data.n_train < 2 or self.data.n_test is None or self.data.n_test < 1:
      raise ValueError(f"data.n_train must be ≥ 2 and data.n_test ≥ 1, got {self.data.n_train}, "
                       f"{self.data.n_test}")
    if self.readout not in ntk.READOUTS:
      raise ValueError(f"readout must be one of {ntk.READOUTS}, got {self.readout!r}")
    bad = [m for m in self.models if m not in ntk.MODEL_NAMES]
    if bad:
      raise ValueError(f"models must be among {ntk.MODEL_NAMES}, got {bad}")
    if self.kernel_path not in ("fast", "neural_tangents"):
      raise ValueError(f"kernel_path must be 'fast' or 'neural_tangents', got {self.kernel_path!r}")


def get_config(full: bool = False) -> WidthSweepConfig:
  """The quick CPU config, or with ``full`` the full-size one (see the module docstring)."""
  if not full:
    return WidthSweepConfig()
  return WidthSweepConfig(data=config_lib.DataConfig(n_train=1000, n_test=500, source="dir"),
                          seeds=(0, 1, 2, 3, 4),
                          train=SweepTrainConfig(datasets=("mnist", "fashion_mnist", "cifar10"), max_width=4096,
                                                 seeds=(0, 1, 2), steps=1000))


def _points(config: WidthSweepConfig):
  for dataset in config.datasets:
    for model_name in config.models:
      for width in config.widths:
        for seed in config.seeds:
          yield dataset, model_name, width, seed, "init"
        if config.train.enabled and dataset in config.train.datasets and width <= config.train.max_width:
          for seed in config.train.seeds:
            yield dataset, model_name, width, seed, "train"


def run(config: WidthSweepConfig, workdir, *, overwrite_config: bool = False) -> list[dict]:
  """Runs (or resumes) the sweep; returns all records in the workdir.

  Args:
    config: a validated ``WidthSweepConfig``.
    workdir: output directory.
    overwrite_config: resume although config.json differs.
  """
  config.validate()
  wd = Workdir(workdir, KEY_FIELDS, config, overwrite_config=overwrite_config)
  done = wd.done()
  # This process's share (all points in a single-process run): kernel and training points dealt separately.
  todo = [p for p in distributed.shard(list(_points(config)), by=lambda p: p[4])
          if (p[0], p[1], config.readout, p[2], p[3], p[4]) not in done]
  cache: dict = {}
  for dataset, model_name, width, seed, kind in tqdm(todo, desc="width sweep", unit="point"):
    if (dataset, model_name) not in cache:
      if dataset not in cache:
        cache[dataset] = config_lib.load_splits(config.data, dataset, flatten=True)
      train, test = cache[dataset]
      f_train, f_test = ntk.model_features(model_name, train.x, test.x)
      f_train, f_test = np.asarray(f_train), np.asarray(f_test)
      cache[dataset, model_name] = (f_train, f_test,
                                    infinite_width_kernels(f_train, f_test, readout=config.readout))
    train, test = cache[dataset]
    f_train, f_test, inf = cache[dataset, model_name]
    n_classes = int(train.y.max()) + 1
    start = time.perf_counter()
    model = ntk.two_layer_relu(width, f_train.shape[1], out_dim=n_classes, readout=config.readout)
    init_key = jax.random.fold_in(jax.random.PRNGKey(seed), width)
    _, params = model.init_fn(init_key, f_train.shape)
    record = dict(dataset=dataset, model=model_name, readout=config.readout, width=width, seed=seed,
                  kind=kind, n_train=len(f_train), n_test=len(f_test), kernel_path=config.kernel_path)
    if kind == "init":
      record.update(kernel_distance(model, params, f_train, f_test, inf, path=config.kernel_path)._asdict())
    else:
      y_onehot = np.eye(n_classes, dtype=np.float32)[train.y]
      lr = default_learning_rate(inf, n_classes, config.train.lr_scale)
      result = train_and_compare(model, params, f_train, f_test, y_onehot, test.y, inf,
                                 learning_rate=lr, steps=config.train.steps, path=config.kernel_path)
      record.update(result.metrics._asdict())
      if config.save_arrays:
        wd.save_arrays(wd.key(record), result.arrays)
    record["wall_time_s"] = time.perf_counter() - start
    wd.append(record)
  return wd.records()


def main(argv=None) -> None:
  from experiments import width_sweep_report
  config_lib.experiment_main("NTK width sweep (finite vs infinite width).", get_config, run,
                             width_sweep_report.write_report, argv)


if __name__ == "__main__":
  main()
