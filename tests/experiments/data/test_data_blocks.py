"""Disjoint class-balanced blocks (experiments.data.class_balanced_block_indices, load_dataset(block=...),
experiments.core.config.load_splits(block=...)): one block per experiment seed shares no example with another."""
import numpy as np
import pytest

from experiments.core import config as config_lib
from experiments.data import (
  class_balanced_block_indices,
  class_balanced_indices,
  load_dataset,
)


def test_blocks_are_disjoint_class_balanced_and_reproducible():
  y = np.repeat(np.arange(4), [30, 25, 40, 28])
  blocks = [class_balanced_block_indices(y, 10, block=b, seed=3) for b in range(8)]  # q = 3: 25 // 3 = 8 blocks
  flat = np.concatenate(blocks)
  assert flat.size == 80 and np.unique(flat).size == 80  # no example in two blocks
  for idx in blocks:
    counts = np.bincount(y[idx], minlength=4)
    assert counts.sum() == 10 and set(counts) <= {2, 3} and np.all(np.diff(idx) > 0)
  assert np.array_equal(class_balanced_block_indices(y, 10, block=5, seed=3), blocks[5])
  assert not np.array_equal(class_balanced_block_indices(y, 10, block=5, seed=4), blocks[5])  # seed: the partition
  with pytest.raises(ValueError, match=r"allow blocks 0\.\.7"):
    class_balanced_block_indices(y, 10, block=8, seed=3)
  with pytest.raises(ValueError, match="block must be"):
    class_balanced_block_indices(y, 10, block=-1, seed=3)


def test_load_dataset_block_and_load_splits_block():
  """Blocks of the embedded MNIST pool share no image; the counts per class are those of the independent
  draw; load_splits draws the test subset with seed data.seed + block."""
  a = load_dataset("mnist", "train", n=100, seed=0, block=0, flatten=True)
  b = load_dataset("mnist", "train", n=100, seed=0, block=1, flatten=True)
  assert not set(a.info.indices) & set(b.info.indices)
  assert sorted(np.bincount(a.y)) == sorted(np.bincount(y := load_dataset("mnist", "train", n=100, seed=0).y))
  data = config_lib.DataConfig(n_train=50, n_test=20, seed=1)
  train, test = config_lib.load_splits(data, "mnist", flatten=True, block=2)
  assert train.info.indices.tolist() == load_dataset("mnist", "train", n=50, seed=1, block=2).info.indices.tolist()
  assert test.info.indices.tolist() == load_dataset("mnist", "test", n=20, seed=3).info.indices.tolist()
  full = load_dataset("mnist", "train")
  assert np.array_equal(np.sort(class_balanced_indices(full.y, 50, seed=0)),
                        load_dataset("mnist", "train", n=50, seed=0).info.indices)  # block=None: unchanged
  assert len(y) == 100
