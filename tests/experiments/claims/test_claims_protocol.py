"""Issue 12's protocol in the runners: the training criterion recorded per point, unconverged points left out
of the report's comparisons (with a note), ε on both scales, centring inside the feature map, the fixed
readout unpenalised, the converged-distance and adaptive-sharpness records."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ntk
from experiments.core.config import DataConfig, apply_overrides, load_splits
from experiments.flip_rate import config as flip_rate_config
from experiments.flip_rate import report as flip_rate_report
from experiments.flip_rate import run as flip_rate
from experiments.width_sweep import config as width_sweep_config
from experiments.width_sweep import report as width_sweep_report
from experiments.width_sweep import run as width_sweep
from ntk.training import train_adam

TINY_FLIP = ["models=relu", "widths=16", "seeds=0", "eps=0,0.1", "attacks=random_sign", "data.n_train=20",
             "data.n_test=8", "train.optimizer=adam", "train.learning_rates=0.01", "train.max_epochs=40", "train.check_every=20",
             "train.loss_target=1.5", "train.batch_size=10", "pgd_steps=2", "mim_steps=2"]

@pytest.fixture(scope="module")
def flip_records(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("flip")
  return workdir, flip_rate.run(apply_overrides(flip_rate_config.get_config(), TINY_FLIP), workdir)

def test_every_flip_rate_record_carries_the_criterion_and_eps_on_both_scales(flip_records):
  _, records = flip_records
  train, _ = load_splits(DataConfig(n_train=20, n_test=8), "mnist", flatten=True)
  std = np.asarray(train.x, np.float64).std()  # MNIST: one channel, population std over every pixel
  assert len(records) == 2
  for r in records:
    assert r["learning_rate"] == 0.01 and r["lr_selection"] == "fixed" and r["loss_target"] == 1.5
    assert r["converged"] == (r["train_loss"] <= 1.5) and r["epochs_trained"] in (20, 40)
    assert r["preprocessing"] == "raw"
    np.testing.assert_allclose(r["channel_std"], [std], rtol=1e-12)
    assert r["eps_standardized"] == [r["eps"] / r["channel_std"][0]]  # same float64 division: exact

def _record(seed, attack, eps, rate, converged=True, model="relu"):
  return dict(task="mnist", model=model, width=16, seed=seed, adversarial_training=False, attack=attack, eps=eps,
              flip_rate=rate, n_flipped=0, n_top=10, spearman=1.0, mean_linf_over_eps=1.0, train_accuracy=1.0,
              test_accuracy=0.9, converged=converged, train_loss=0.01 if converged else 0.9, loss_target=0.05,
              learning_rate=0.01)

def test_unconverged_points_are_left_out_of_the_gap_and_named_in_the_summary():
  records = []
  for seed in range(6):
    records += [_record(seed, "pgd", 0.1, 0.30), _record(seed, "random_sign", 0.1, 0.10)]
  records += [_record(6, "pgd", 0.1, 0.0, converged=False), _record(6, "random_sign", 0.1, 0.9, converged=False)]
  derived = flip_rate_report.derive(records)
  (gap,) = derived["gaps"]
  assert gap["n_seeds"] == 6 and gap["gap_pct"] == pytest.approx(20.0)  # seed 6 (gap −90 %) left out
  assert gap["low_pct"] == pytest.approx(20.0) and gap["high_pct"] == pytest.approx(20.0)  # no spread
  assert derived["unconverged"] == [dict(task="mnist", model="relu", width=16, seed=6)]
  text = flip_rate_report.summary_markdown(records, derived, eps=0.1)
  assert "Left out: 1 training(s)" in text and "seed 6" in text

def test_centring_happens_inside_the_feature_map():
  """At the clean rows, the row-replaced features of the centred maps equal the transductive features of
  the centred matrix (X − μ)(X − μ)ᵀ(X − μ), although the attacked inputs are the pixels."""
  rng = np.random.default_rng(0)
  x = rng.uniform(size=(6, 5)).astype(np.float32)
  mean = np.full(5, 0.4, np.float32)
  features_fn, _ = flip_rate.row_maps("mlp_attn", x, mean)
  expected, _ = ntk.model_features("mlp_attn", x - mean)
  np.testing.assert_allclose(features_fn(jnp.asarray(x)), expected, rtol=1e-5, atol=1e-6)
  raw_fn, _ = flip_rate.row_maps("mlp_attn", x, None)
  assert not np.allclose(raw_fn(jnp.asarray(x)), expected, atol=1e-3)  # centring changes the model

def test_the_l2_penalty_leaves_the_fixed_readout_alone():
  model = ntk.two_layer_relu(8, 4, out_dim=2)
  x = np.random.default_rng(1).normal(size=(16, 4)).astype(np.float32)
  y = np.eye(2, dtype=np.float32)[np.arange(16) % 2]
  _, params = model.init_fn(jax.random.PRNGKey(0), x.shape)
  trained = train_adam(model.apply_fn, params, x, y, key=jax.random.PRNGKey(1), l2=1.0, learning_rate=0.1,
                       epochs=20, batch_size=8)
  np.testing.assert_array_equal(trained["a"], params["a"])  # still exactly ±1
  assert not np.allclose(trained["W"], params["W"])

@pytest.mark.long
def test_converged_distance_points(tmp_path):
  config = apply_overrides(width_sweep_config.get_config(), [
      "datasets=mnist", "models=relu", "widths=64", "seeds=0", "data.n_train=16", "data.n_test=8",
      "train.enabled=false", "converged.widths=16,64", "converged.seeds=0", "converged.train.learning_rates=0.03",
      "converged.train.max_epochs=100", "converged.train.check_every=50", "converged.train.loss_target=0.01",
      "save_arrays=false"])
  records = {r["width"]: r for r in width_sweep.run(config, tmp_path) if r["kind"] == "converged"}
  r = records[64]
  assert r["converged"] and r["train_loss"] <= 0.01 and r["loss"] == "mse" and r["loss_floor"] < 1e-12
  assert r["function_distance"] > 0  # Adam to the target does not land on the initial kernel regression
  assert r["function_distance_rms"] == pytest.approx(r["function_distance"] / np.sqrt(8 * 10), rel=1e-12)
  # Width 16: the ±1 readout of this seed keeps the ½·MSE above the target for any first layer.
  narrow = records[16]
  assert narrow["loss_floor"] > 0.01 and not narrow["converged"]
  assert narrow["train_loss"] >= narrow["loss_floor"]
  summary = width_sweep_report.write_report(tmp_path)
  assert "Function distance at convergence" in summary
  assert "1 of them cannot reach it with any first layer" in summary and "(width 16;" in summary
  assert f"| unreachable (floor ≥ {narrow['loss_floor']:.3g}) |" in summary
