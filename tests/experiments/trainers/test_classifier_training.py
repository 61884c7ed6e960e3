"""Classifier training: learns on real MNIST, checkpoints round-trip bit-exactly, resume continues."""
import shutil

import flax.linen as nn
import jax
import numpy as np
import pytest

from experiments.core.config import ClassifierTrainConfig
from experiments.data import load_dataset
from experiments.trainers.classifier import accuracy, train_classifier


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
  x = np.zeros((4, 28, 28, 1), np.float32)
  with pytest.raises(ValueError, match="integer class labels"):
    train_classifier(_MLP(), x, np.zeros(4, np.float32), ClassifierTrainConfig(epochs=1))
  with pytest.raises(ValueError, match=r"labels in \[0, 10\).*\[-1, 10\]"):
    train_classifier(_MLP(), x, np.asarray([0, 10, -1, 3]), ClassifierTrainConfig(epochs=1))
  with pytest.raises(ValueError, match=r"vector of labels \[n\], got shape \(4, 1\)"):
    train_classifier(_MLP(), x, np.zeros((4, 1), np.int32), ClassifierTrainConfig(epochs=1))
  with pytest.raises(ValueError, match="validation labels must hold labels in"):
    train_classifier(_MLP(), x, [0, 1, 2, 3], ClassifierTrainConfig(epochs=1), validation=(x, np.full(4, 12)))
  with pytest.raises(ValueError, match="no images"):
    train_classifier(_MLP(), x[:0], np.zeros(0, np.int32), ClassifierTrainConfig(epochs=1))



def test_plateau_rule_by_hand():
  from experiments.core.config import PlateauRule
  from experiments.trainers.classifier import plateau_reached
  rule = PlateauRule(min_epochs=4, window=2, min_gain=0.005)   # compares the last epoch with the one 2 before
  assert not plateau_reached([0.30, 0.40, 0.40], rule)             # flat, but fewer than min_epochs = 4
  assert not plateau_reached([0.30, 0.40, 0.45, 0.45], rule)       # 0.45 − 0.40 = 0.05 over 2 epochs
  assert plateau_reached([0.30, 0.40, 0.45, 0.403], rule)          # 0.403 − 0.40 = 0.003 < 0.005
  assert plateau_reached([0.30, 0.40, 0.50, 0.39], rule)           # a fall is a plateau too
  assert not plateau_reached([0.30, 0.40, 0.45, 0.45, 0.45, 0.60], rule)  # only the last epoch counts
  # Exactly the minimum gain (k/n fractions: 5/1000 over 1,000 images) is not "less than" it, at any rounding:
  # 0.009 − 0.004 = 0.004999999999999999 in float64, which a plain `<` would call a plateau.
  assert 0.009 - 0.004 < 0.005
  assert not plateau_reached([0.1, 0.2, 0.004, 0.3, 0.009], rule)
  assert not plateau_reached([0.1, 0.2, 0.305, 0.307, 0.310], rule)
  assert not plateau_reached([0.3, 0.3, 0.3, 0.3, 0.3], PlateauRule(min_epochs=1, window=0))   # off
  assert not plateau_reached([0.3, None, 0.3, 0.3], rule)
  assert not plateau_reached([0.3, 0.3, 0.3, None, 0.3], PlateauRule(min_epochs=1, window=1))
  with pytest.raises(ValueError, match="validation_accuracies"):
    plateau_reached([0.3, float("nan"), 0.3, 0.3], rule)
  with pytest.raises(ValueError, match="plateau.window"):
    PlateauRule(window=-1).validate()


def test_training_stops_on_a_validation_plateau_and_stays_stopped_on_resume(tmp_path):
  from experiments.core.config import PlateauRule
  train = load_dataset("mnist", "train", n=300, seed=3)
  val = load_dataset("mnist", "test", n=100, seed=3)
  config = ClassifierTrainConfig(epochs=6, batch_size=50, learning_rate=3e-3, warmup_epochs=0)
  # A gain of 1 (100 points) per epoch is never reached: the rule stops at exactly min_epochs = 2.
  rule = PlateauRule(min_epochs=2, window=1, min_gain=1.0)
  first = train_classifier(_MLP(), train.x, train.y, config, tmp_path, validation=(val.x, val.y), plateau=rule)
  assert first.stop_reason == "plateau" and [h.epoch for h in first.history] == [1, 2]
  # The recorded validation accuracy is the trained parameters' (after the epoch), computed independently.
  direct = accuracy(lambda p, x: _MLP().apply({"params": p}, x), first.params, val.x, val.y)
  assert first.history[-1].validation_accuracy == direct and direct > 0.5   # chance is 0.1
  again = train_classifier(_MLP(), train.x, train.y, config, tmp_path, validation=(val.x, val.y), plateau=rule)
  assert again.stop_reason == "plateau" and len(again.history) == 2 and _leaves_equal(first.params, again.params)
  # A history that does not match the newest checkpoint is refused, not read shifted by an epoch.
  (tmp_path / "history.json").write_text("[]")
  with pytest.raises(ValueError, match="history.json holds 0 epochs but the newest checkpoint is epoch 2"):
    train_classifier(_MLP(), train.x, train.y, config, tmp_path, validation=(val.x, val.y), plateau=rule)
  # Without the rule the cap is trained; an active rule needs a validation split.
  capped = train_classifier(_MLP(), train.x, train.y, config, None, validation=(val.x, val.y))
  assert capped.stop_reason == "cap" and len(capped.history) == 6
  with pytest.raises(ValueError, match="validation split"):
    train_classifier(_MLP(), train.x, train.y, config, None, plateau=rule)
