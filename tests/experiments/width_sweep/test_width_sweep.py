"""Width sweep runner: record schema, resume after an interruption, the kernel distance of both models
falls with width and agrees with an independent computation."""
import json

import numpy as np
import pytest

from experiments.core.config import apply_overrides
from experiments.core.workdir import read_records
from experiments.width_sweep import config as width_sweep_config
from experiments.width_sweep import report as width_sweep_report
from experiments.width_sweep import run as width_sweep

SMALL = ["datasets=mnist", "widths=16,256,2048", "seeds=0,1", "data.n_train=48", "data.n_test=16",
         "train.max_width=256", "train.seeds=0", "train.steps=20", "converged.enabled=false"]


@pytest.fixture(scope="module")
def small_config():
  return apply_overrides(width_sweep_config.get_config(), SMALL)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, small_config):
  workdir = tmp_path_factory.mktemp("sweep")
  return workdir, width_sweep.run(small_config, workdir)


def test_record_schema(finished_run, small_config):
  workdir, records = finished_run
  init = [r for r in records if r["kind"] == "init"]
  train = [r for r in records if r["kind"] == "train"]
  assert len(init) == 2 * 3 * 2 and len(train) == 2 * 2 * 1  # models × widths × seeds
  for r in records:
    for field in width_sweep.KEY_FIELDS + ("wall_time_s", "versions", "n_train", "n_test"):
      assert field in r, field
    assert r["versions"]["jax"] and r["versions"]["neural_tangents"] == "0.6.5"
  for r in init:
    for field in ("rel_frobenius_train", "rel_frobenius_test_train", "spectral_ratio", "lambda_min_inf"):
      assert np.isfinite(float(r[field])) and float(r[field]) > 0
  for r in train:
    for field in ("function_distance", "kernel_movement", "test_accuracy_network", "test_accuracy_ntk",
                  "kernel_movement_centred", "kernel_movement_one_minus_cka", "kernel_movement_top_k",
                  "function_distance_k0", "function_distance_k0_relative"):
      assert np.isfinite(r[field]), field
    assert r["time"] == pytest.approx(r["learning_rate"] * r["steps"]) and r["kernel_movement_k"] == 10
  for r in records:  # each seed its own independent draw from the embedded pool (data_seed_follows_seed)
    assert r["data_draw"] == "independent" and r["data_seed"] == r["seed"] and r["train_pool"] == 2000
    assert 0 < r["expected_seed_overlap"] < 0.05  # 48 of 2,000: ≈ 48/2000
  assert json.loads((workdir / "config.json").read_text())["widths"] == [16, 256, 2048]
  assert (workdir / "arrays").is_dir()


def test_kernel_distance_falls_with_width_for_both_models(finished_run):
  """E‖K_m − K∞‖²_F ∝ 1/m for the empirical NTK of a width-m network (Jacot et al. 2018, arXiv 1806.07572):
  for 2L-ReLU and for MLP-Attn (the same network on the linearized-attention rows) the mean distance over
  seeds falls from width to width, and its RMS falls from width 16 to 2048 by well over a third of
  √(2048/16) ≈ 11."""
  _, records = finished_run
  for model in ("relu", "mlp_attn"):
    by_width = {}
    for r in records:
      if r["kind"] == "init" and r["model"] == model:
        by_width.setdefault(r["width"], []).append(r["rel_frobenius_train"])
    assert sorted(by_width) == [16, 256, 2048] and all(len(v) == 2 for v in by_width.values())
    means = [np.mean(by_width[w]) for w in sorted(by_width)]
    rms = [np.sqrt(np.mean(np.square(by_width[w]))) for w in sorted(by_width)]
    assert means[0] > means[1] > means[2], (model, means)
    assert rms[0] / rms[2] > 4, (model, rms)


def test_mlp_attn_record_agrees_with_the_neural_tangents_kernel(finished_run):
  """The recorded MLP-Attn distance (closed-form kernel path) is ‖K_m − K∞‖_F/‖K∞‖_F recomputed here from
  the data: neural-tangents' empirical NTK of the seeded width-16 network on the linearized-attention rows
  against the float64 arc-cosine kernel."""
  import jax

  import ntk
  from experiments.data import load_dataset
  _, records = finished_run
  (rec,) = [r for r in records if (r["kind"], r["model"], r["width"], r["seed"]) == ("init", "mlp_attn", 16, 1)]
  train = load_dataset("mnist", "train", n=rec["n_train"], seed=rec["data_seed"], flatten=True)
  f_train, _ = ntk.model_features("mlp_attn", train.x)
  f_train = np.asarray(f_train)
  model = ntk.two_layer_relu(16, f_train.shape[1], out_dim=int(train.y.max()) + 1, readout="fixed")
  _, params = model.init_fn(jax.random.fold_in(jax.random.PRNGKey(1), 16), f_train.shape)
  k_m = np.asarray(ntk.empirical_ntk(model.apply_fn, params, f_train), np.float64)
  with jax.enable_x64(True):
    k_inf = np.asarray(ntk.arccos_ntk(jax.numpy.asarray(f_train, np.float64), readout="fixed"))
  expected = np.linalg.norm(k_m - k_inf) / np.linalg.norm(k_inf)
  assert rec["rel_frobenius_train"] == pytest.approx(expected, rel=1e-3)


def test_resume_after_interruption_reproduces_records(tmp_path, small_config, finished_run):
  _, full_records = finished_run
  config = apply_overrides(small_config, ["train.enabled=false"])
  # Simulate a killed run: keep 3 complete records and half of a fourth line.
  width_sweep.run(config, tmp_path)
  lines = (tmp_path / "results.jsonl").read_text().splitlines()
  (tmp_path / "results.jsonl").write_text("\n".join(lines[:3]) + "\n" + lines[3][: len(lines[3]) // 2])
  resumed = width_sweep.run(config, tmp_path)
  assert len(resumed) == len(lines)
  keys = [tuple(r[f] for f in width_sweep.KEY_FIELDS) for r in resumed]
  assert len(set(keys)) == len(keys)
  ref = {tuple(r[f] for f in width_sweep.KEY_FIELDS): r for r in full_records}
  for r in resumed:  # recomputed points equal the uninterrupted run's exactly (same keys, same seeds)
    assert r["rel_frobenius_train"] == pytest.approx(ref[tuple(r[f] for f in width_sweep.KEY_FIELDS)]
                                                     ["rel_frobenius_train"], rel=1e-6)


def test_resume_with_another_config_is_refused_and_overwrite_moves_old_results_aside(tmp_path, small_config):
  first = apply_overrides(small_config, ["train.enabled=false", "widths=16", "seeds=0"])
  second = apply_overrides(small_config, ["train.enabled=false", "widths=32", "seeds=0"])
  old = width_sweep.run(first, tmp_path)
  with pytest.raises(ValueError, match="different config"):
    width_sweep.run(second, tmp_path)
  new = width_sweep.run(second, tmp_path, overwrite_config=True)
  assert {r["width"] for r in new} == {32}  # no mixing with the old config's records
  (backup,) = tmp_path.glob("previous-*")  # ... and nothing computed was lost
  assert len(read_records(backup)) == len(old)
  assert json.loads((backup / "config.json").read_text())["widths"] == [16]


def test_a_failed_start_does_not_lock_the_workdir(tmp_path, small_config):
  bad = apply_overrides(small_config, ["train.enabled=false", "widths=16", "seeds=0", "data.n_train=100000"])
  with pytest.raises(ValueError, match="exceeds"):
    width_sweep.run(bad, tmp_path)  # config.json written, no records
  good = apply_overrides(small_config, ["train.enabled=false", "widths=16", "seeds=0"])
  assert len(width_sweep.run(good, tmp_path)) == 2


def test_report_is_drawn_from_records(finished_run):
  workdir, _ = finished_run
  text = width_sweep_report.write_report(workdir)
  assert "2L-ReLU" in text and "MLP-Attn" in text
  for name in ("kernel_distance.png", "spectral_ratio.png", "function_distance.png", "summary.md"):
    assert (workdir / name).stat().st_size > 0
  assert len(read_records(workdir)) == 16


@pytest.mark.parametrize("override,match", [
    ("widths=-16", "widths"), ("readout=frozen", "readout"), ("models=cnn", "models"),
    ("data.n_train=1", "data.n_train"), ("nonsense=3", "unknown config field"), ("train.enabled=maybe", "true or false"),
    ("datasets=mnst", "unknown dataset name"), ("models=", "must not be empty"),
    ("data.source=web", "data.source"),
])
def test_bad_config_values(override, match):
  with pytest.raises(ValueError, match=match):
    apply_overrides(width_sweep_config.get_config(), [override])


def test_common_target_rule_is_fixed_before_the_common_points():
  """1.5 × MLP-Attn's largest converged ½·MSE at widths ≥ 64, per data set; width 16 and 2L-ReLU ignored."""
  recs = [dict(kind="converged", dataset="mnist", model="mlp_attn", width=w, train_loss=l)
          for w, l in ((16, 0.5), (64, 0.022), (256, 0.023), (1024, 0.021))]
  recs += [dict(kind="converged", dataset="mnist", model="relu", width=64, train_loss=0.9),
           dict(kind="train", dataset="mnist", model="mlp_attn", width=64, train_loss=0.9)]
  assert width_sweep.common_target(recs, "mnist") == pytest.approx(1.5 * 0.023)
  assert width_sweep.common_target(recs, "cifar10") is None


@pytest.mark.long
def test_common_points_train_both_models_to_one_target_and_record_kernel_movement(tmp_path):
  config = apply_overrides(width_sweep_config.get_config(), [
      "datasets=mnist", "widths=64", "seeds=0", "data.n_train=32", "data.n_test=8", "train.enabled=false",
      "converged.widths=16,64", "converged.seeds=0,1", "converged.common=true", "converged.train.max_epochs=20",
      "save_arrays=false"])
  records = width_sweep.run(config, tmp_path)
  common = [r for r in records if r["kind"] == "common"]
  target = width_sweep.common_target(records, "mnist")
  assert {(r["model"], r["width"], r["seed"]) for r in common} == {(m, 64, s) for m in ("relu", "mlp_attn")
                                                                    for s in (0, 1)}  # widths ≥ 64 only
  assert all(r["common_target"] == target and r["train_loss"] <= target and r["converged"] for r in common)
  assert all(r["kernel_movement"] > 0 and np.isfinite(r["function_distance_relative"]) for r in common)
  for r in common + [r for r in records if r["kind"] == "converged"]:
    for field in ("kernel_movement_centred", "kernel_movement_one_minus_cka", "kernel_movement_top_k",
                  "function_distance_kinf", "function_distance_kinf_relative", "kinf_ridge"):
      assert np.isfinite(r[field]) and r[field] >= 0, field


def test_k_inf_distance_is_the_k0_regression_with_k_inf_in_place_of_k0():
  """The distance to the K∞ predictor reuses the K₀ predictor's ridge rule and f₀: given the network's own
  float64 K₀ as 'K∞' it equals the recorded K₀ distance (all three forms); given the arc-cosine K∞ it
  differs."""
  import ntk
  from ntk.sweep import InfiniteWidthKernels, infinite_width_kernels
  config = apply_overrides(width_sweep_config.get_config(), [
      "datasets=mnist", "data.n_train=16", "data.n_test=8", "converged.widths=16", "converged.seeds=0",
      "converged.train.max_epochs=5"])
  train, test, _ = width_sweep.seed_data(config, "mnist", 0)
  f_train, f_test = (np.asarray(f) for f in ntk.model_features("relu", train.x, test.x))
  model = ntk.two_layer_relu(16, f_train.shape[1], out_dim=10, readout="fixed")
  import jax
  _, params = model.init_fn(jax.random.fold_in(jax.random.PRNGKey(0), 16), f_train.shape)
  own = InfiniteWidthKernels(width_sweep._ntk_float64(model, params, f_train, f_train),
                             width_sweep._ntk_float64(model, params, f_test, f_train))
  args = (config, model, f_train, f_test, train.y, test.y, 10, 0, {}, ("mnist", "relu"))
  rec = width_sweep.converged_distance(*args, inf=own)
  for suffix in ("", "_rms", "_relative"):
    assert rec["function_distance_kinf" + suffix] == pytest.approx(rec["function_distance" + suffix], rel=1e-9)
  assert rec["kinf_ridge"] == pytest.approx(rec["ridge"], rel=1e-12)
  real = width_sweep.converged_distance(*args, inf=infinite_width_kernels(f_train, f_test, readout="fixed"))
  assert real["function_distance"] == pytest.approx(rec["function_distance"], rel=1e-6)  # same training
  assert real["function_distance_kinf"] != pytest.approx(real["function_distance"], rel=1e-3)


def test_seeds_draw_their_own_subsets_unless_the_flag_is_off():
  """data_seed_follows_seed (default): seed s draws its own subset (data.seed = s) from the embedded pool;
  false: every seed uses data.seed's subset, the behaviour before (the golden records' setting)."""
  from experiments.data import load_dataset
  config = apply_overrides(width_sweep_config.get_config(), ["datasets=mnist", "data.n_train=40", "data.n_test=10"])
  a, b = (width_sweep.seed_data(config, "mnist", s) for s in (0, 1))
  assert set(a[0].info.indices) != set(b[0].info.indices) and set(a[1].info.indices) != set(b[1].info.indices)
  assert a[0].info.indices.tolist() == load_dataset("mnist", "train", n=40, seed=0).info.indices.tolist()
  pool = np.bincount(load_dataset("mnist", "train").y)  # 4 of each class's N_c: Σ 4²/N_c / 40
  assert a[2]["expected_seed_overlap"] == pytest.approx(np.sum(16 / pool) / 40, rel=1e-12)
  shared = apply_overrides(config, ["data_seed_follows_seed=false", "data.seed=3"])
  c, d = (width_sweep.seed_data(shared, "mnist", s) for s in (0, 1))
  assert c[0].info.indices.tolist() == d[0].info.indices.tolist() == load_dataset(
      "mnist", "train", n=40, seed=3).info.indices.tolist()
  assert c[2] == dict(data_draw="shared", data_seed=3, data_block=None, train_pool=None, expected_seed_overlap=1.0,
                      expected_test_overlap=1.0)


def test_full_files_give_each_seed_a_disjoint_block(full_data_dir):
  """With the full files each seed's training subset is its own block of one partition (no shared image)."""
  config = apply_overrides(width_sweep_config.get_config(),
                           ["datasets=mnist", "data.source=dir", f"data.dir={full_data_dir}"])
  blocks = [width_sweep.seed_data(config, "mnist", s) for s in range(3)]
  sets = [set(t.info.indices) for t, _, _ in blocks]
  assert not (sets[0] & sets[1] or sets[0] & sets[2] or sets[1] & sets[2])
  assert [f["data_block"] for _, _, f in blocks] == [0, 1, 2] and blocks[0][2]["expected_seed_overlap"] == 0.0


def test_matched_point_is_converged_when_t_star_is_within_rounding_of_a_multiple_of_the_step(tmp_path, monkeypatch):
  """t* = 10·η up to one ulp, where ceil(t*/η)·η = 0.8966196406950768 falls an ulp short of t*: the 10 steps
  that reach t* were run (not capped), so the point is converged; with a cap of 9 steps it is not."""
  lr, t_star = 0.08966196406950769, 0.8966196406950769
  assert np.ceil(t_star / lr) * lr < t_star  # the rounding the flag must not depend on
  monkeypatch.setattr(width_sweep, "default_learning_rate", lambda *a, **k: lr)
  monkeypatch.setattr(width_sweep, "matched_time", lambda *a, **k: t_star)
  for cap, converged in ((10, True), (9, False)):
    config = apply_overrides(width_sweep_config.get_config(), [
        "datasets=mnist", "widths=16", "seeds=0", "data.n_train=16", "data.n_test=8", "train.max_width=16",
        "train.seeds=0", "train.steps=2", "train.matched_fraction=0.5", f"train.max_steps={cap}",
        "converged.enabled=false"])
    records = width_sweep.run(config, tmp_path / f"cap{cap}")
    matched = [r for r in records if r["kind"] == "matched"]
    assert matched and all(r["converged"] is converged for r in matched), (cap, matched)


def test_a_kernel_movement_measure_undefined_for_every_seed_says_so():
  """The movement table never prints a bare '–': a measure undefined (NaN) for some seeds says of how many
  it is the mean, and one undefined for all says 'undefined (all k)' (the table's text gives the reasons)."""
  assert width_sweep_report._finite_mean([0.2, 0.4]) == "0.3"
  assert width_sweep_report._finite_mean([0.2, float("nan")]) == "0.2 (of 1)"
  assert width_sweep_report._finite_mean([float("nan")] * 3) == "undefined (all 3)"
