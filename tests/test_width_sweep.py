"""Width sweep runner: record schema, resume after an interruption, 2L-ReLU kernel distance falls."""
import json

import numpy as np
import pytest

from experiments import width_sweep, width_sweep_report
from experiments.config import apply_overrides
from experiments.workdir import read_records

SMALL = ["datasets=mnist", "widths=16,256,2048", "seeds=0,1", "n_train=48", "n_test=16",
         "train_max_width=256", "train_seeds=0", "steps=20"]


@pytest.fixture(scope="module")
def small_config():
  return apply_overrides(width_sweep.get_config(), SMALL)


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
    for field in ("function_distance", "kernel_movement", "test_accuracy_network", "test_accuracy_ntk"):
      assert np.isfinite(r[field])
    assert r["time"] == pytest.approx(r["learning_rate"] * r["steps"])
  assert json.loads((workdir / "config.json").read_text())["widths"] == [16, 256, 2048]
  assert (workdir / "arrays").is_dir()


def test_relu_kernel_distance_falls_with_width(finished_run):
  _, records = finished_run
  for model in ("relu", "mlp_attn"):
    by_width = {}
    for r in records:
      if r["kind"] == "init" and r["model"] == model:
        by_width.setdefault(r["width"], []).append(r["rel_frobenius_train"])
    means = [np.mean(by_width[w]) for w in sorted(by_width)]
    if model == "relu":
      assert means[0] > means[1] > means[2], means


def test_resume_after_interruption_reproduces_records(tmp_path, small_config, finished_run):
  _, full_records = finished_run
  config = apply_overrides(small_config, ["train=false"])
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
  first = apply_overrides(small_config, ["train=false", "widths=16", "seeds=0"])
  second = apply_overrides(small_config, ["train=false", "widths=32", "seeds=0"])
  old = width_sweep.run(first, tmp_path)
  with pytest.raises(ValueError, match="different config"):
    width_sweep.run(second, tmp_path)
  new = width_sweep.run(second, tmp_path, overwrite_config=True)
  assert {r["width"] for r in new} == {32}  # no mixing with the old config's records
  (backup,) = tmp_path.glob("previous-*")  # ... and nothing computed was lost
  assert len(read_records(backup)) == len(old)
  assert json.loads((backup / "config.json").read_text())["widths"] == [16]


def test_a_failed_start_does_not_lock_the_workdir(tmp_path, small_config):
  bad = apply_overrides(small_config, ["train=false", "widths=16", "seeds=0", "n_train=100000"])
  with pytest.raises(ValueError, match="exceeds"):
    width_sweep.run(bad, tmp_path)  # config.json written, no records
  good = apply_overrides(small_config, ["train=false", "widths=16", "seeds=0"])
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
    ("n_train=1", "n_train"), ("nonsense=3", "unknown config field"), ("train=maybe", "true or false"),
    ("datasets=mnst", "unknown dataset name"), ("models=", "must not be empty"),
    ("data_source=web", "data_source"),
])
def test_bad_config_values(override, match):
  with pytest.raises(ValueError, match=match):
    apply_overrides(width_sweep.get_config(), [override])
