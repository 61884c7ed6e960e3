"""ViT / DiffViT: matched parameter counts, forward pass, maps for analysis, config errors, and a
trained-for-a-few-steps checkpoint that round-trips bit-exactly through orbax."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention.vit import (
  VisionTransformer,
  ViTConfig,
  attention_maps,
  init_params,
  matched_configs,
  parameter_count,
)
from experiments.core.config import ClassifierTrainConfig
from experiments.data import load_dataset
from experiments.trainers.classifier import train_classifier

MNIST_TINY = ViTConfig(num_classes=10, image_size=28, patch_size=7, dim=16, depth=2, num_heads=2, lambda_init=0.8)


@pytest.mark.parametrize("base", [
    ViTConfig(dim=64, depth=1, num_heads=4),
    ViTConfig(dim=64, depth=4, num_heads=4, lambda_init=0.5),
    ViTConfig(dim=192, depth=12, num_heads=6, pool="mean"),
])
def test_matched_parameter_counts(base):
  vit_cfg, diff_cfg = matched_configs(base)
  n_vit = parameter_count(jax.eval_shape(lambda: init_params(vit_cfg, key=jax.random.key(0))))
  n_diff = parameter_count(jax.eval_shape(lambda: init_params(diff_cfg, key=jax.random.key(0))))
  assert n_diff - n_vit == base.depth * 6 * base.head_dim  # λ's four vectors + RMSNorm gain per layer
  assert abs(n_diff - n_vit) / n_vit < 0.01


def test_forward_and_maps():
  vit_cfg, diff_cfg = matched_configs(MNIST_TINY)
  x = jax.random.uniform(jax.random.key(0), (3, 28, 28, 1))
  for cfg in (vit_cfg, diff_cfg):
    params = init_params(cfg, key=jax.random.key(1), channels=1)
    logits = VisionTransformer(cfg).apply({"params": params}, x)
    assert logits.shape == (3, 10) and np.isfinite(np.asarray(logits)).all()
    maps = attention_maps(cfg, params, x)
    assert len(maps) == cfg.depth
    heads = cfg.num_heads if cfg.attention == "standard" else cfg.num_heads // 2
    for m in maps:
      assert m.a1.shape == (3, heads, 17, 17)  # 16 patches + class token
      np.testing.assert_allclose(np.asarray(m.a1).sum(-1), 1.0, rtol=1e-5)
    if cfg.attention == "differential":
      assert [m.lambda_init for m in maps] == [0.8, 0.8]
      assert all(m.a2.shape == m.a1.shape and np.isfinite(float(m.lam)) for m in maps)
  states = VisionTransformer(diff_cfg).apply({"params": params}, x, method=VisionTransformer.hidden_states)
  assert len(states) == 3 and states[-1].shape == (3, 17, 16)


def test_depth_schedule_lambda_init():
  cfg = dataclasses.replace(MNIST_TINY, attention="differential", lambda_init=None, depth=3)
  maps = attention_maps(cfg, init_params(cfg, key=jax.random.key(0), channels=1), jnp.zeros((1, 28, 28, 1)))
  np.testing.assert_allclose([m.lambda_init for m in maps], [0.8 - 0.6 * np.exp(-0.3 * l) for l in range(3)])


@pytest.mark.parametrize("change, match", [
    (dict(dim=18, num_heads=3, attention="differential"), "even"),
    (dict(patch_size=5), "patch_size"),
    (dict(dim=18, num_heads=4), "divisible"),
    (dict(pool="max"), "pool"),
    (dict(attention="linear"), "attention"),
    (dict(depth=0), "depth"),
    (dict(lambda_init=1.2), "lambda_init"),
    (dict(dropout_rate=1.0), "dropout_rate"),
    (dict(num_classes=1), "num_classes"),
])
def test_bad_config_values_raise(change, match):
  with pytest.raises(ValueError, match=match):
    dataclasses.replace(MNIST_TINY, **change).validate()


def test_wrong_image_shape_raises():
  with pytest.raises(ValueError, match="expects images"):
    VisionTransformer(MNIST_TINY).init(jax.random.key(0), jnp.zeros((1, 32, 32, 1)))


def test_trained_diffvit_checkpoint_round_trips_bit_exactly(tmp_path):
  _, diff_cfg = matched_configs(dataclasses.replace(MNIST_TINY, depth=1))
  data = load_dataset("mnist", "train", n=64, seed=0)
  config = ClassifierTrainConfig(epochs=1, batch_size=16, learning_rate=3e-3, warmup_epochs=0)  # 4 steps
  module = VisionTransformer(diff_cfg)
  trained = train_classifier(module, data.x, data.y, config, tmp_path)
  init = init_params(diff_cfg, key=jax.random.split(jax.random.key(0), 3)[0], channels=1)
  assert not np.array_equal(np.asarray(init["block_0"]["attention"]["lambda_q1"]),
                            np.asarray(trained.params["block_0"]["attention"]["lambda_q1"]))  # it trained
  restored = train_classifier(module, data.x, data.y, config, tmp_path)  # finished: restored, not retrained
  leaves_a, tree_a = jax.tree_util.tree_flatten(trained.params)
  leaves_b, tree_b = jax.tree_util.tree_flatten(restored.params)
  assert tree_a == tree_b
  for a, b in zip(leaves_a, leaves_b):
    assert np.asarray(a).dtype == np.asarray(b).dtype and np.array_equal(np.asarray(a), np.asarray(b))
  apply = lambda p: np.asarray(module.apply({"params": p}, data.x[:8]))  # noqa: E731
  assert np.array_equal(apply(trained.params), apply(restored.params))
