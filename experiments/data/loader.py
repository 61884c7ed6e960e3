"""``load_dataset``: one split of MNIST, Fashion-MNIST or CIFAR-10 as float32 numpy arrays.

Example:
  >>> from experiments.data import load_dataset
  >>> train = load_dataset("mnist", "train", classes=(3, 8), n=200, flatten=True, seed=0)
  >>> train.x.shape, train.x.dtype, train.y.shape, train.y.dtype  # 3 -> label 0, 8 -> label 1
  ((200, 784), dtype('float32'), (200,), dtype('int32'))

The default source is the small real subset shipped with the package (``source="embedded"``), so code
and tests run anywhere; ``source="dir"`` reads the full standard files from ``data_dir`` (or the
environment variable ``ATTN_DATA_DIR``), ``source="tfds"`` reads them through TensorFlow Datasets.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Literal, NamedTuple, Sequence

import numpy as np

from experiments.data import catalog, sources

DATA_DIR_ENV = "ATTN_DATA_DIR"
SOURCES = ("embedded", "dir", "tfds")
Source = Literal["embedded", "dir", "tfds"]

# Named binary tasks: task -> (dataset, classes); classes[0] becomes label 0, classes[1] label 1.
BINARY_TASKS: dict[str, tuple[str, tuple[int, int]]] = {
    "mnist_3v8": ("mnist", (3, 8)),
    "mnist_1v7": ("mnist", (1, 7)),
    "fashion_shirt_tshirt": ("fashion_mnist", (6, 0)),
    "cifar_cars_planes": ("cifar10", (1, 0)),
    "cifar_cats_dogs": ("cifar10", (3, 5)),
}


class SplitInfo(NamedTuple):
  """Where a Split came from.

  Attributes:
    name: canonical data set name ("mnist", "fashion_mnist", "cifar10").
    split: "train" or "test".
    source: "embedded", "dir" or "tfds".
    origin: the files or TFDS location read.
    class_ids: original class id of each new label: label j was class ``class_ids[j]``.
    class_names: the names of those classes, in the same order.
    indices: int64 [n], the row of each example in the split as stored (with ``holdout``: in the
      stored training split).
    partial: True if the stored split is a partial copy of the official one (CIFAR-10 npz test set:
      only the first 1,000 of 10,000 images; a ``PartialTestSetWarning`` is also issued).
  """
  name: str
  split: str
  source: str
  origin: str
  class_ids: tuple[int, ...]
  class_names: tuple[str, ...]
  indices: np.ndarray
  partial: bool


class Split(NamedTuple):
  """One split of a data set.

  Attributes:
    x: float32 images in [0, 1] with shape [n, height, width, channels] ([n, 28, 28, 1] for MNIST and
      Fashion-MNIST, [n, 32, 32, 3] for CIFAR-10), or [n, h * w * c] (HWC order) when flattened.
    y: int32 labels with shape [n], in 0..k-1 (k = number of classes kept).
    info: provenance, see SplitInfo.
  """
  x: np.ndarray
  y: np.ndarray
  info: SplitInfo


def class_balanced_indices(y_N: np.ndarray, n: int, *, seed: int) -> np.ndarray:
  """Draws n indices without replacement, as equal per class as the class sizes allow.

  Each class present in ``y_N`` gets ``n // k`` examples; a class with fewer gives all it has and the
  shortfall is shared among the others; the last ``n mod k`` places go to classes drawn at random.
  Within a class the examples are drawn uniformly without replacement. Deterministic given ``seed``
  (numpy ``default_rng(seed)``).

  Args:
    y_N: integer labels with shape [N].
    n: how many to draw, 0 < n <= N.
    seed: seed of the numpy Generator.

  Returns:
    int64 indices into y_N with shape [n], sorted ascending (stored order).

  Raises:
    ValueError: if n is not in 1..N.
  """
  y_N = np.asarray(y_N)
  if not 0 < n <= y_N.shape[0]:
    raise ValueError(f"n must be in 1..{y_N.shape[0]} (the examples available), got {n}")
  rng = np.random.default_rng(seed)
  labels_K, counts_K = np.unique(y_N, return_counts=True)
  take_K = np.zeros_like(counts_K)
  remaining = n
  while remaining:
    open_k = np.flatnonzero(take_K < counts_K)
    share, extra = divmod(remaining, open_k.size)
    if share == 0:
      take_K[rng.choice(open_k, extra, replace=False)] += 1
      break
    add = np.minimum(share, counts_K[open_k] - take_K[open_k])
    take_K[open_k] += add
    remaining -= int(add.sum())
  picked = [rng.choice(np.flatnonzero(y_N == c), t, replace=False)
            for c, t in zip(labels_K, take_K) if t]
  return np.sort(np.concatenate(picked)).astype(np.int64)


def class_balanced_block_indices(y_N: np.ndarray, n: int, *, block: int, seed: int) -> np.ndarray:
  """Block ``block`` (0, 1, 2, …) of a class-balanced partition of the examples: blocks share no example.

  Each class's examples are permuted once with numpy ``default_rng(seed)`` (the same permutation for every
  block) and cut into consecutive slots of q = ⌈n/k⌉ examples (k classes); block b takes its class-c
  examples from slot b of class c, as many as ``class_balanced_indices`` would (n // k each, the n mod k
  extra places to classes drawn with ``default_rng([seed, b])``). So seed s of an experiment can use block s
  of one permutation of the full training set: subsets of different seeds are disjoint.

  Args:
    y_N: integer labels with shape [N].
    n: examples per block, 0 < n <= N.
    block: the block index, >= 0.
    seed: seed of the permutation (the partition), >= 0.

  Returns:
    int64 indices into y_N with shape [n], sorted ascending (stored order).

  Raises:
    ValueError: n not in 1..N, a negative block, or a class with fewer than (block + 1)·q examples (names
      how many blocks the data allow).
  """
  y_N = np.asarray(y_N)
  if not 0 < n <= y_N.shape[0]:
    raise ValueError(f"n must be in 1..{y_N.shape[0]} (the examples available), got {n}")
  if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 0:
    raise ValueError(f"block must be an integer >= 0, got {block!r}")
  labels_K, counts_K = np.unique(y_N, return_counts=True)
  k = labels_K.size
  q = -(-n // k)
  available = int(counts_K.min() // q)
  if block >= available:
    raise ValueError(f"block {block} of {n} class-balanced examples needs {(block + 1) * q} examples of every "
                     f"class, but the smallest class has {int(counts_K.min())}: the data allow blocks "
                     f"0..{available - 1} (use fewer seeds, a smaller n or more data)")
  take_K = np.full(k, n // k)
  extra = n - int(take_K.sum())
  if extra:
    take_K[np.random.default_rng([seed, block]).choice(k, extra, replace=False)] += 1
  rng = np.random.default_rng(seed)
  picked = [rng.permutation(np.flatnonzero(y_N == c))[block * q:block * q + t] for c, t in zip(labels_K, take_K)]
  return np.sort(np.concatenate(picked)).astype(np.int64)


def _check_classes(classes: Sequence[int] | None, spec: catalog.DatasetSpec) -> tuple[int, ...]:
  if classes is None:
    return tuple(range(spec.num_classes))
  if isinstance(classes, (int, np.integer, str)):
    raise ValueError(f"classes must be a sequence of class ids in 0..{spec.num_classes - 1}, "
                     f"got {classes!r}")
  ids = tuple(classes)
  if not ids:
    raise ValueError(f"classes must be non-empty (class ids in 0..{spec.num_classes - 1}), got ()")
  for c in ids:
    if not isinstance(c, (int, np.integer)) or isinstance(c, bool) or not 0 <= c < spec.num_classes:
      raise ValueError(f"classes must hold class ids in 0..{spec.num_classes - 1} for {spec.name}, "
                       f"got {c!r} in {ids}")
  if len(set(ids)) != len(ids):
    raise ValueError(f"classes must not repeat a class id, got {ids}")
  return tuple(int(c) for c in ids)


def _read(spec, split, source, data_dir, download) -> sources.RawSplit:
  if source == "embedded":
    return sources.read_embedded(spec, split, data_dir or sources.EMBEDDED_DIR)
  if source == "tfds":
    return sources.read_tfds(spec, split, data_dir=data_dir, download=download)
  if data_dir is None:
    data_dir = os.environ.get(DATA_DIR_ENV)
    if not data_dir:
      raise ValueError(f"source='dir' needs data_dir or the environment variable {DATA_DIR_ENV} "
                       "naming a directory with mnist/, fashion_mnist/, cifar10/")
  return sources.read_dir(spec, split, data_dir)


def load_dataset(
    name: str,
    split: str = "train",
    *,
    source: Source = "embedded",
    data_dir: str | Path | None = None,
    n: int | None = None,
    classes: Sequence[int] | None = None,
    flatten: bool = False,
    seed: int = 0,
    holdout: int | None = None,
    download: bool = False,
    block: int | None = None,
) -> Split:
  """Loads one split as float32 images in [0, 1] and int32 labels.

  Args:
    name: "mnist", "fashion_mnist" or "cifar10" (aliases "fmnist", "fashion-mnist", "cifar-10", ...).
    split: "train" or "test".
    source: "embedded" (default; the class-balanced real subset shipped in the package: 2,000 train /
      500 test for MNIST and Fashion-MNIST, 1,500 / 500 for CIFAR-10), "dir" (the full standard files
      in ``data_dir``, see ``sources.read_dir``) or "tfds" (TensorFlow Datasets).
    data_dir: for "dir", the root with ``mnist/``, ``fashion_mnist/``, ``cifar10/`` (default: the
      environment variable ATTN_DATA_DIR); for "tfds", the TFDS data dir; for "embedded", a directory
      laid out like ``experiments/data/embedded/`` (default: the package's).
    n: if given, draw n examples without replacement, class-balanced as far as the class sizes allow
      (``class_balanced_indices``), reproducibly from ``seed``; None keeps all, in stored order.
    classes: if given, keep only these class ids and relabel them 0..k-1 in the order given, e.g.
      ``(3, 8)`` maps 3 -> 0 and 8 -> 1, ``(1, 0)`` maps CIFAR automobile -> 0 and airplane -> 1.
      See BINARY_TASKS.
    flatten: return x with shape [n, h * w * c] (pixels in HWC order) instead of [n, h, w, c].
    seed: seed of the subset draw (only used with n).
    holdout: if given, split the stored training set instead of using the stored test set: the last
      ``holdout`` training examples (stored order) form "test" and the rest form "train". Use this for
      full-size CIFAR-10 runs on the npz layout, whose stored test split has only 1,000 images.
    download: for source="tfds", let TFDS download missing data (off by default).
    block: with n, take block ``block`` of a class-balanced partition of the split drawn with ``seed``
      (``class_balanced_block_indices``) instead of an independent draw: different blocks share no
      example (one block per experiment seed on the full files). None: the independent draw.

  Returns:
    Split(x, y, info): x float32 [n, h, w, c] in [0, 1] (or [n, d] when flattened), y int32 [n].

  Raises:
    ValueError: naming the argument and the allowed values, for an unknown name, split or source,
      a seed that is not an integer >= 0, n <= 0 or n larger than the examples available, an empty or out-of-range ``classes``, a
      ``holdout`` outside 1..(train size - 1), or source="dir" with neither data_dir nor ATTN_DATA_DIR.
    DatasetFileNotFoundError: a needed file is missing (names the path and how to get it).
    DatasetFileError: a file is truncated, corrupt or has the wrong hash or shape (names the path and
      what was expected).

  Warns:
    PartialTestSetWarning: when the test split read is a partial copy (CIFAR-10 npz layout).
  """
  spec = catalog.get_spec(name)
  if split not in catalog.SPLITS:
    raise ValueError(f"split must be one of {catalog.SPLITS}, got {split!r}")
  if source not in SOURCES:
    raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
  if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
    raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
  if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0):
    raise ValueError(f"n must be a positive int (or None for all examples), got {n!r}")
  class_ids = _check_classes(classes, spec)

  raw = _read(spec, "train" if holdout is not None else split, source, data_dir, download)
  rows = np.arange(raw.y.shape[0])
  if holdout is not None:
    n_train = raw.y.shape[0]
    if isinstance(holdout, bool) or not isinstance(holdout, (int, np.integer)) or not (
        0 < holdout < n_train):
      raise ValueError(f"holdout must be an int in 1..{n_train - 1} (the stored train size minus "
                       f"one), got {holdout!r}")
    rows = rows[:n_train - holdout] if split == "train" else rows[n_train - holdout:]
  elif raw.partial:
    warnings.warn(
        f"{spec.name} test split from {raw.origin} holds only the first "
        f"{raw.y.shape[0]} of the {spec.num_examples['test']} official test images; pass "
        "holdout=... to hold out part of the training set instead", sources.PartialTestSetWarning,
        stacklevel=2)

  relabel = np.full(spec.num_classes, -1, np.int32)
  relabel[list(class_ids)] = np.arange(len(class_ids), dtype=np.int32)
  y_all = relabel[raw.y[rows]]
  keep = y_all >= 0
  rows, y_all = rows[keep], y_all[keep]
  if n is not None:
    if n > rows.size:
      raise ValueError(
          f"n={n} exceeds the {rows.size} examples available in {spec.name} {split} "
          f"(source={source!r}, classes={class_ids}); use a smaller n or source='dir'/'tfds'")
    pick = (class_balanced_indices(y_all, n, seed=seed) if block is None
            else class_balanced_block_indices(y_all, n, block=block, seed=seed))
    rows, y_all = rows[pick], y_all[pick]

  x = raw.x[rows].astype(np.float32) / np.float32(255.0)
  if flatten:
    x = x.reshape(x.shape[0], -1)
  info = SplitInfo(name=spec.name, split=split, source=source, origin=raw.origin,
                   class_ids=class_ids, class_names=tuple(spec.class_names[c] for c in class_ids),
                   indices=rows.astype(np.int64), partial=raw.partial and holdout is None)
  return Split(x, y_all.astype(np.int32), info)


def load_binary_task(task: str, split: str = "train", **kwargs) -> Split:
  """Loads a named binary task of BINARY_TASKS (labels 0/1 in the order listed there).

  Args:
    task: a key of BINARY_TASKS, e.g. "mnist_3v8" or "cifar_cars_planes".
    split: "train" or "test".
    **kwargs: any keyword argument of ``load_dataset`` except ``classes``.

  Returns:
    Split as from ``load_dataset(dataset, split, classes=classes, **kwargs)``.

  Raises:
    ValueError: if ``task`` is unknown (lists the valid tasks), plus those of ``load_dataset``.
  """
  if task not in BINARY_TASKS:
    raise ValueError(f"unknown binary task {task!r}; valid tasks: {sorted(BINARY_TASKS)}")
  if "classes" in kwargs:
    raise ValueError("classes is fixed by the task; call load_dataset to choose classes")
  dataset, classes = BINARY_TASKS[task]
  return load_dataset(dataset, split, classes=classes, **kwargs)
