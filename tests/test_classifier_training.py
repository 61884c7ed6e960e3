"""Classifier training: learns on real MNIST, checkpoints round-trip bit-exactly, resume continues."""
import shutil

import flax.linen as nn
import jax
import numpy as np
import pytest

from experiments.classifier_training import accuracy, train_classifier
from experiments.config import ClassifierTrainConfig
from experiments.data import load_dataset


class _MLP(nn.Module):
  @nn.compact
  def __call__(self, x, train=False):
    return nn.Dense(10)(nn.relu(nn.Dense(64)(x.reshape(x.shape[0], -1))))


def _leaves_equal(a, b):
  return all(np.array_equal(np.asarray(u), np.asarray(v))
             for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))


def test_training_learns_and_checkpoint_round_trips_bit_exactly(tmp_path):
  train = load_dataset("mnist", "train", n=600, seed=0)
  test = load_dataset("mnist", "test", n=200, seed=0)
  config = ClassifierTrainConfig(epochs=3, batch_size=50, learning_rate=3e-3)
  first = train_classifier(_MLP(), train.x, train.y, config, tmp_path)
  acc = accuracy(lambda p, x: _MLP().apply({"params": p}, x), first.params, test.x, test.y)
  assert acc > 0.6  # chance is 0.1
  reloaded = train_classifier(_MLP(), train.x, train.y, config, tmp_path)  # finished: loaded, not retrained
  assert _leaves_equal(first.params, reloaded.params)
  assert reloaded.history == first.history


def test_resume_from_an_interrupted_run_equals_an_uninterrupted_one(tmp_path):
  train = load_dataset("mnist", "train", n=200, seed=1)
  full = train_classifier(_MLP(), train.x, train.y, ClassifierTrainConfig(epochs=2, batch_size=50), tmp_path / "a")
  # Simulate a run killed after epoch 1 by deleting the epoch-2 checkpoint, then resume.
  partial_dir = tmp_path / "b"
  train_classifier(_MLP(), train.x, train.y, ClassifierTrainConfig(epochs=2, batch_size=50), partial_dir)
  shutil.rmtree(partial_dir / "checkpoints" / "2")
  resumed = train_classifier(_MLP(), train.x, train.y, ClassifierTrainConfig(epochs=2, batch_size=50), partial_dir)
  assert _leaves_equal(full.params, resumed.params)
  assert [h.epoch for h in resumed.history] == [1, 2]


def test_resume_skips_an_empty_newest_step_directory_and_moves_it_aside(tmp_path):
  train = load_dataset("mnist", "train", n=100, seed=2)
  config = ClassifierTrainConfig(epochs=2, batch_size=50)
  full = train_classifier(_MLP(), train.x, train.y, config, tmp_path / "a")
  # A partial copy: the epoch-2 step directory exists but is empty; a stray file marks it.
  work = tmp_path / "b"
  train_classifier(_MLP(), train.x, train.y, config, work)
  shutil.rmtree(work / "checkpoints" / "2")
  (work / "checkpoints" / "2").mkdir()
  with pytest.warns(RuntimeWarning, match=r"checkpoints/2 is unreadable .* moved it to .*checkpoints-skipped/2"):
    resumed = train_classifier(_MLP(), train.x, train.y, config, work)
  assert (work / "checkpoints-skipped" / "2").is_dir()  # kept, not deleted
  assert (work / "checkpoints" / "2").is_dir()  # epoch 2 retrained from epoch 1 and saved again
  assert _leaves_equal(full.params, resumed.params)
  assert [h.epoch for h in resumed.history] == [1, 2]


def test_bad_arguments():
  with pytest.raises(ValueError, match="rows"):
    train_classifier(_MLP(), np.zeros((4, 28, 28, 1), np.float32), np.zeros(3, np.int32), ClassifierTrainConfig())
  with pytest.raises(ValueError, match="learning_rate"):
    train_classifier(_MLP(), np.zeros((4, 28, 28, 1), np.float32), np.zeros(4, np.int32),
                     ClassifierTrainConfig(learning_rate=-1.0))
