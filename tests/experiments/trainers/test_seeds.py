"""experiments.trainers.seeds: S seeds as one vmapped program equal the same seeds trained alone.

Tolerances: after one step, float32 rounding of a batched matmul (relative 1e-5 on every parameter, absolute
1e-6 near 0); after three epochs (12 steps) the seeds are still equal to 1e-3 absolute on every parameter and
predict the same labels on the training images (12 Adam steps amplify rounding but do not change a model).
"""
import dataclasses

import jax
import numpy as np
import pytest

from attention.vit import ViTConfig, VisionTransformer
from experiments.core.config import ClassifierTrainConfig
from experiments.trainers.classifier import train_classifier
from experiments.trainers.seeds import train_classifier_seeds

MODULES = {"vit": VisionTransformer(ViTConfig(num_classes=3, image_size=8, patch_size=4, dim=8, depth=1, num_heads=2)),
           "diffvit": VisionTransformer(ViTConfig(num_classes=3, image_size=8, patch_size=4, dim=8, depth=1,
                                                  num_heads=2, attention="differential", lambda_init=0.8))}
RNG = np.random.default_rng(0)
X = RNG.uniform(0, 1, (64, 8, 8, 3)).astype(np.float32)
Y = RNG.integers(0, 3, 64)


def _configs(epochs, batch_size, seeds=(0, 1, 2)):
  base = ClassifierTrainConfig(epochs=epochs, batch_size=batch_size, learning_rate=1e-2, l2=1e-4, warmup_epochs=0,
                               seed=0, augment="crop_flip", max_to_keep=3)
  return [dataclasses.replace(base, seed=s) for s in seeds]


def _close(a, b, **tol):
  for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
    np.testing.assert_allclose(np.asarray(u), np.asarray(v), **tol)


@pytest.mark.parametrize("model", ["vit", pytest.param("diffvit", marks=pytest.mark.long)])
def test_one_step_equals_each_seed_trained_alone(model):
  configs = _configs(epochs=1, batch_size=64)          # one step
  together = train_classifier_seeds(MODULES[model], X, Y, configs)
  for c, result in zip(configs, together):
    alone = train_classifier(MODULES[model], X, Y, c)
    _close(result.params, alone.params, rtol=1e-5, atol=1e-6)
    assert result.history[0].loss == pytest.approx(alone.history[0].loss, rel=1e-5)
  # the seeds differ from one another (each got its own init and data order)
  assert not np.allclose(jax.tree_util.tree_leaves(together[0].params)[0], jax.tree_util.tree_leaves(together[1].params)[0])


@pytest.mark.long
def test_training_agrees_with_seeds_alone_and_resumes_from_the_same_checkpoints(tmp_path):
  configs = _configs(epochs=3, batch_size=16)
  dirs = [tmp_path / f"s{c.seed}" for c in configs]
  together = train_classifier_seeds(MODULES["vit"], X, Y, configs, dirs)
  apply = jax.jit(lambda p, x: MODULES["vit"].apply({"params": p}, x))
  for c, d, result in zip(configs, dirs, together):
    alone = train_classifier(MODULES["vit"], X, Y, c)
    _close(result.params, alone.params, atol=1e-3, rtol=0)
    np.testing.assert_array_equal(np.argmax(apply(result.params, X), 1), np.argmax(apply(alone.params, X), 1))
    loaded = train_classifier(MODULES["vit"], X, Y, c, d)     # finished: loaded from its checkpoint, not retrained
    _close(loaded.params, result.params, rtol=0, atol=0)
    assert [h.epoch for h in loaded.history] == [1, 2, 3]
  again = train_classifier_seeds(MODULES["vit"], X, Y, configs, dirs)   # and the vmapped one loads too
  _close(again[1].params, together[1].params, rtol=0, atol=0)


@pytest.mark.long
def test_seeds_at_different_epochs_finish_alone(tmp_path):
  import shutil
  configs = _configs(epochs=2, batch_size=32, seeds=(0, 1))
  dirs = [tmp_path / "a", tmp_path / "b"]
  train_classifier(MODULES["vit"], X, Y, configs[0], dirs[0])
  shutil.rmtree(dirs[0] / "checkpoints" / "2")              # seed 0 stopped after epoch 1, seed 1 not started
  results = train_classifier_seeds(MODULES["vit"], X, Y, configs, dirs)
  for c, r in zip(configs, results):
    _close(r.params, train_classifier(MODULES["vit"], X, Y, c).params, atol=1e-5, rtol=0)


@pytest.mark.parametrize("configs, workdirs, message", [
    ([], None, "at least one"),
    ([ClassifierTrainConfig(seed=0), ClassifierTrainConfig(seed=1, learning_rate=0.5)], None, "every field but seed"),
    ([ClassifierTrainConfig(seed=0), ClassifierTrainConfig(seed=0)], None, "distinct"),
    ([ClassifierTrainConfig(seed=0)], ["a", "b"], "one directory per config"),
    ([ClassifierTrainConfig(seed=0), ClassifierTrainConfig(seed=1)], ["a", "a"], "distinct"),
    ([ClassifierTrainConfig(seed=0), ClassifierTrainConfig(seed=1)], "ab", "sequence of directories"),
    (ClassifierTrainConfig(seed=0), None, "list of ClassifierTrainConfig"),
])
def test_bad_input_is_refused(configs, workdirs, message):
  with pytest.raises(ValueError, match=message):
    train_classifier_seeds(MODULES["vit"], X, Y, configs, workdirs)
