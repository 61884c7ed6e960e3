"""Condition-number cubing check κ(G̃) = κ(G)³ on real images, for several n and subsets.

Usage:
  python -m experiments.cubing --workdir runs/cubing [--full] [field=value ...]

Quick config: MNIST, Fashion-MNIST and CIFAR-10 embedded subsets, n ∈ {50, 100, 256, 500, 1000}, 3 random
subsets each (~1 minute on 2 CPU cores). ``--full``: the full files (ATTN_DATA_DIR), n up to 4,000.
Writes config.json, results.jsonl (one record per (dataset, n, seed)), and kappa_vs_n.png and summary.md
(``experiments.cubing.report``, which redraws them from the records).
Source: arXiv 2603.13085 (docs/theory.md#condition-number-cubing); ``ntk.cubing.cubing_check`` does the measurement.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Optional

from tqdm.auto import tqdm

from ntk.cubing import cubing_check
from experiments.core import config as config_lib
from experiments.data.catalog import SPLITS
from experiments.core import distributed
from experiments.data import load_dataset
from experiments.core.workdir import Workdir

KEY_FIELDS = ("dataset", "n", "seed")


@dataclasses.dataclass(frozen=True)
class CubingDataConfig:
  """Where the subsets come from: source and dir as in ``experiments.core.config.DataConfig``; split: 'train'
  or 'test'. (The subset sizes and seeds are the sweep's ``ns`` and ``seeds``.)"""
  source: str = config_lib.one_of("embedded", config_lib.SOURCES)
  dir: Optional[str] = None
  split: str = config_lib.one_of("train", SPLITS)

  def validate(self, group: str = "data") -> None:
    """Raises ValueError naming the dotted field and its allowed values."""
    if self.source not in config_lib.SOURCES:
      raise ValueError(f"{group}.source must be one of {config_lib.SOURCES}, got {self.source!r}")
    if self.split not in SPLITS:
      raise ValueError(f"{group}.split must be one of {SPLITS}, got {self.split!r}")


@dataclasses.dataclass(frozen=True)
class CubingConfig:
  """datasets; ns: subset sizes; seeds: one random class-balanced subset per seed; layers: stacking
  depths; eps: accuracies for the implied widths; data: source, dir and split of the subsets."""
  datasets: tuple[str, ...] = ("mnist", "fashion_mnist", "cifar10")
  ns: tuple[int, ...] = (50, 100, 256, 500, 1000)
  seeds: tuple[int, ...] = (0, 1, 2)
  layers: tuple[int, ...] = (1, 2, 3)
  eps: tuple[float, ...] = (0.1, 0.01)
  data: CubingDataConfig = CubingDataConfig()

  def validate(self) -> None:
    config_lib.check_common(self, nonempty=("datasets", "ns", "seeds", "layers", "eps"), finite=("eps",))
    if not self.ns or any(n < 2 for n in self.ns):
      raise ValueError(f"ns must be integers ≥ 2, got {self.ns}")
    if any(k < 1 for k in self.layers):
      raise ValueError(f"layers must be ≥ 1, got {self.layers}")
    if any(e <= 0 for e in self.eps):
      raise ValueError(f"eps must be > 0, got {self.eps}")


def get_config(full: bool = False) -> CubingConfig:
  if not full:
    return CubingConfig()
  return CubingConfig(ns=(50, 100, 256, 500, 1000, 2000, 4000), seeds=(0, 1, 2, 3, 4),
                      data=CubingDataConfig(source="dir"))


def run(config: CubingConfig, workdir, *, overwrite_config: bool = False) -> list[dict]:
  """Runs (or resumes) the check over data sets × n × seeds; returns all records."""
  config.validate()
  wd = Workdir(workdir, KEY_FIELDS, config, overwrite_config=overwrite_config)
  done = wd.done()
  points = [(ds, n, s) for ds in config.datasets for n in config.ns for s in config.seeds]
  todo = [p for p in distributed.shard(points) if p not in done]  # this process's share
  for dataset, n, seed in tqdm(todo, desc="cubing", unit="subset"):
    start = time.perf_counter()
    data = load_dataset(dataset, config.data.split, n=n, seed=seed, flatten=True, source=config.data.source,
                        data_dir=config.data.dir)
    record = dict(dataset=dataset, n=n, seed=seed, split=config.data.split)
    record.update(cubing_check(data.x, layers=config.layers, eps=config.eps))
    record["wall_time_s"] = time.perf_counter() - start
    wd.append(record)
  return wd.records()
