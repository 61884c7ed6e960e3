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

import time

from tqdm.auto import tqdm

from ntk.cubing import cubing_check
from experiments.core import distributed
from experiments.data import load_dataset
from experiments.core.workdir import Workdir
from experiments.cubing.config import CubingConfig

KEY_FIELDS = ("dataset", "n", "seed")


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
