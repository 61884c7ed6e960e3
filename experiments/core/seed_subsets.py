"""Each seed of a seeded experiment its own training subset (issue 27, item 2).

``seed_splits(data, name, seed)`` is the per-seed draw of the flip-rate, sharpness (landscape) and
dual-implications experiments (there: one subset per target draw):

* with the full files (``data.source`` 'dir' or 'tfds', ``data.dir`` or ATTN_DATA_DIR) seed s takes block s
  of one class-balanced partition of the whole training split, drawn with ``data.seed``
  (``experiments.core.config.load_splits(..., block=s)``, ``experiments.data.class_balanced_block_indices``):
  no two seeds share a training image;
* from the embedded subsets (2,000 training images for MNIST and Fashion-MNIST, 1,500 for CIFAR-10) there is
  no room for many disjoint blocks, so seed s draws its own class-balanced subset with seed s (train and
  test), independently of the others: two seeds share a fraction ``expected_overlap`` of their training
  images in expectation (0.256 for n = 512 of the 2,000 MNIST images). Records and claim rows state it.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from experiments.core import config as config_lib

DRAWS = ("disjoint", "independent")


def expected_overlap(y_N, n: int) -> float:
  """The expected share of one class-balanced draw of n of the examples with labels y_N [N] that an
  independent second draw also holds: Σ_c t_c²/N_c / n, with t_c the draw's share of class c as
  ``experiments.data.class_balanced_indices`` allocates it, n/k each, a class smaller than its share taken
  whole and the shortfall shared among the others (about n/N for balanced classes).

  Raises:
    ValueError: n < 1 or no labels.
  """
  y_N = np.asarray(y_N)
  if n < 1 or y_N.size == 0:
    raise ValueError(f"n must be >= 1 and y_N non-empty, got n={n}, {y_N.size} labels")
  _, counts_K = np.unique(y_N, return_counts=True)
  if n > y_N.size:
    raise ValueError(f"n must be at most the {y_N.size} labels, got n={n}")
  take_K, remaining, open_K = np.zeros(counts_K.size), float(n), counts_K > 0
  while remaining > 1e-9 * n:   # water-filling: equal shares, capped at each class's size
    share = remaining / open_K.sum()
    take_K[open_K] += np.minimum(share, counts_K[open_K] - take_K[open_K])
    remaining = n - take_K.sum()
    open_K = take_K < counts_K
  return float(np.sum(take_K ** 2 / counts_K) / n)


def pool_overlap(name: str, n: int, *, source: str = "embedded", data_dir=None, holdout=None) -> tuple[int, float]:
  """(N, overlap): the size of the training split of data set or binary task ``name`` that independent draws
  of n come from, and their ``expected_overlap``."""
  from experiments.data import BINARY_TASKS, load_dataset
  dataset, classes = BINARY_TASKS.get(name, (name, None))
  everything = load_dataset(dataset, "train", source=source, data_dir=data_dir, holdout=holdout, classes=classes,
                            flatten=True)
  return int(everything.y.size), expected_overlap(everything.y, n)


def draw_kind(data) -> str:
  """'disjoint' (full files and a subset size: seed s takes block s) or 'independent' (embedded subsets,
  or the whole split, n_train None)."""
  return "disjoint" if data.source != "embedded" and data.n_train is not None else "independent"


def seed_splits(data, name: str, seed: int, *, flatten: bool = True):
  """(train, test, fields) of data set or binary task ``name`` for seed (or target draw) ``seed``.

  Args:
    data: a ``DataConfig``; data.seed is the partition's seed in the disjoint case (unused otherwise).
    name: a data set name or a ``BINARY_TASKS`` key.
    seed: the experiment seed ≥ 0 (the block index, or the seed of the independent draw).
    flatten: images as rows.

  Returns:
    (train, test, fields): the ``Split``s (test None when data.n_test = 0) and the record fields
    data_draw ('disjoint' / 'independent'), data_seed (the seed of the draw: data.seed for a block, else
    ``seed``), data_block (``seed`` or None), train_pool (images in the training split drawn from) and
    expected_seed_overlap (0 for disjoint blocks).

  Raises:
    ValueError: as ``experiments.core.config.load_splits``; a block past the end of the training split.
  """
  kind = draw_kind(data)
  if kind == "disjoint":
    train, test = config_lib.load_splits(data, name, flatten=flatten, block=seed)
    data_seed, block, overlap, pool = data.seed, seed, 0.0, None
  else:
    train, test = config_lib.load_splits(dataclasses.replace(data, seed=seed), name, flatten=flatten)
    data_seed, block = seed, None
    pool, overlap = pool_overlap(name, len(train.y), source=data.source, data_dir=data.dir, holdout=data.holdout)
    overlap = overlap if data.n_train is not None else 1.0
  return train, test, dict(data_draw=kind, data_seed=data_seed, data_block=block, train_pool=pool,
                           expected_seed_overlap=overlap)


def overlap_text(records) -> str:
  """How the seeds' training subsets relate, from records carrying ``seed_splits``'s fields: 'disjoint
  per-seed subsets of the full training files', 'independent per-seed subsets of the N-image pool (two seeds
  share 25.6 % of their images in expectation)', or, for records written before per-seed subsets (no
  data_draw field), '' (the caller says what it knows)."""
  kinds = {r.get("data_draw") for r in records}
  if kinds == {"disjoint"}:
    return "disjoint per-seed training subsets of the full training files"
  if kinds == {"independent"}:
    overlap = float(np.mean([r["expected_seed_overlap"] for r in records]))
    pools = sorted({r.get("train_pool") for r in records if r.get("train_pool")})
    pool = f"the {'/'.join(f'{p:,}' for p in pools)}-image" if pools else "the"
    return (f"independent per-seed training subsets of {pool} embedded pool (two seeds share "
            f"{100 * overlap:.1f} % of their images in expectation)")
  if kinds == {None}:
    return ""
  return "mixed per-seed data draws (" + ", ".join(sorted(str(k) for k in kinds)) + ")"

