"""The certification experiment (experiments.certify): the validation split and α selection before any test
image is read, resume, the standard config, and the report's tables and marks."""

import jax
import numpy as np
import pytest
from certify_records import cert_record, selection_record

from experiments import registry
from experiments.certify import config as certify_config
from experiments.core.cli import experiment_main
from experiments.first_try import SETTINGS


def _split(n_per_class=10, classes=3, seed=0):
  from experiments.data.loader import Split, SplitInfo
  rng = np.random.default_rng(seed)
  y = np.repeat(np.arange(classes), n_per_class).astype(np.int32)
  x = rng.uniform(size=(y.size, 4, 4, 1)).astype(np.float32)
  info = SplitInfo("mnist", "train", "embedded", "-", tuple(range(classes)), tuple("abc"[:classes]),
                   np.arange(100, 100 + y.size, dtype=np.int64), False)
  return Split(x, y, info)

def test_validation_split_is_stratified_disjoint_and_deterministic():
  from experiments.certify.run import validation_split
  train = _split()
  fit, val = validation_split(train, 0.2, seed=0)
  assert len(fit.x) == 24 and len(val.x) == 6 and np.bincount(val.y).tolist() == [2, 2, 2]
  assert not set(fit.info.indices) & set(val.info.indices)
  assert sorted(set(fit.info.indices) | set(val.info.indices)) == list(train.info.indices)
  np.testing.assert_array_equal(val.x, train.x[np.isin(train.info.indices, val.info.indices)])
  again = validation_split(train, 0.2, seed=0)[1]
  assert again.info.indices.tolist() == val.info.indices.tolist()
  assert validation_split(train, 0.01, seed=0)[1].y.size == 3   # at least one image per class
  with pytest.raises(ValueError, match="validation_fraction"):
    validation_split(train, 0.0, seed=0)

def _val(alpha, cert, clean, eps=0.02, dataset="cifar10", n=100):
  return dict(dataset=dataset, attention_bound=alpha, kind="validation", eps=eps, layer=-1, n_validation=n,
              validation_certified_rigorous=cert, validation_certified_krylov=cert + 0.05,
              validation_clean_accuracy=clean, validation_indices=list(range(n)))

def test_selection_rule_ties_and_refusal_of_test_records():
  from experiments.certify.run import select_attention_bound
  best = select_attention_bound([_val(0.0625, 0.20, 0.30), _val(0.25, 0.25, 0.31), _val(1.0, 0.0, 0.36)])
  assert best["attention_bound"] == 0.25                                        # highest rigorous certified
  tie = [_val(0.0625, 0.0, 0.30), _val(0.25, 0.0, 0.33), _val(1.0, 0.0, 0.33)]
  assert select_attention_bound(tie)["attention_bound"] == 0.25                 # then clean, then smaller α
  test_record = dict(_val(1.0, 0.9, 0.9), kind="certify")
  with pytest.raises(ValueError, match="validation records only"):
    select_attention_bound([_val(0.25, 0.2, 0.3), test_record])
  with pytest.raises(ValueError, match="same validation images"):
    select_attention_bound([_val(0.25, 0.2, 0.3), _val(1.0, 0.2, 0.3, n=50)])

@pytest.mark.long
@pytest.mark.slow
def test_certify_experiment_selects_alpha_before_reading_test_images_and_resumes(tmp_path, monkeypatch):
  """The entry point with two α: both models train on the training images less a validation split, are
  certified there, and the α selected at each ε is recorded before the test images are first read (a spy on
  ``load_test`` finds the selection already in results.jsonl); the selection sees validation records only,
  and the validation images are training images. It writes config.json, results.jsonl, plots and summary.md
  (headline: the rigorous figure of the selected α); a rerun adds nothing and reads no test image; a fresh
  run with the same models whose test images are NaN records the same selection, then fails on them."""
  import shutil

  from experiments.certify import config as certify_config
  from experiments.certify import run as certify
  from experiments.core import config as config_lib
  from experiments.core import workdir
  from experiments.core.workdir import read_records
  # Library versions are recorded by Workdir (tested with it); skip importing neural_tangents/TF here.
  monkeypatch.setattr(workdir, "versions", lambda: {"jax": jax.__version__})
  seen, test_loads, val_images = [], [], []
  real_select, real_load_test, real_validation = (certify.select_attention_bound, certify.load_test,
                                                  certify.validation_records)
  monkeypatch.setattr(certify, "select_attention_bound", lambda c: seen.append(list(c)) or real_select(c))

  def load_test(config, dataset):
    test_loads.append([r["kind"] for r in read_records(tmp_path / "run")])
    return real_load_test(config, dataset)
  monkeypatch.setattr(certify, "load_test", load_test)
  monkeypatch.setattr(certify, "validation_records", lambda config, mc, p, validation, *a: val_images.append(
      validation) or real_validation(config, mc, p, validation, *a))
  overrides = list(SETTINGS["certify"])  # the first-try setting (experiments.first_try)
  experiment_main(registry.get('certify'), ["--workdir", str(tmp_path / "run"), *overrides])
  records = read_records(tmp_path / "run")
  assert sorted(r["kind"] for r in records) == sorted(
      ["train", "radius", "certify", "tightness", "validation"] * 2 + ["selection"])
  assert len(test_loads) == 1 and "selection" in test_loads[0] and "certify" not in test_loads[0]
  assert seen and all(r["kind"] == "validation" for batch in seen for r in batch)
  train = config_lib.load_splits(config_lib.DataConfig(n_train=40, n_test=0), "mnist")[0]
  assert len(val_images) == 2
  for v in val_images:
    assert len(v.x) == 10 and set(v.info.indices) < set(train.info.indices)
    np.testing.assert_array_equal(v.x, train.x[np.isin(train.info.indices, v.info.indices)])
  assert {(r["n_train"], r["n_validation"]) for r in records if r["kind"] == "train"} == {(30, 10)}
  cert = [r for r in records if r["kind"] == "certify"]
  for r in cert:
    assert r["pgd_violations"] == 0 and len(r["certified_rigorous_images"]) == 10
    assert r["certified_rigorous"] <= r["pgd_accuracy"] + 1e-12 and r["certified_accuracy"] <= r["pgd_accuracy"] + 1e-12
    assert r["pgd_accuracy"] <= r["clean_accuracy"] + 1e-12
  for name in ("config.json", "summary.md", "certified_accuracy.png", "tightness.png"):
    assert (tmp_path / "run" / name).exists(), name
  sel = [r for r in records if r["kind"] == "selection"][0]
  chosen = next(r for r in cert if r["attention_bound"] == sel["attention_bound"])
  text = (tmp_path / "run" / "summary.md").read_text()
  headline = text.split("## Headline")[1].splitlines()[6]
  assert headline.startswith(f"| mnist | 0.05 | {sel['attention_bound']:g} | validation | "
                             f"**{100 * chosen['certified_rigorous']:.1f} [")
  assert "## α selection on the validation split" in text and "Certified (rigorous) / PGD-L2 / clean" in text

  experiment_main(registry.get('certify'), ["--workdir", str(tmp_path / "run"), *overrides])
  assert len(read_records(tmp_path / "run")) == len(records) and len(test_loads) == 1

  shutil.copytree(tmp_path / "run" / "models", tmp_path / "nan" / "models")

  def nan_test(config, dataset):
    test = real_load_test(config, dataset)
    return test._replace(x=np.full_like(test.x, np.nan))
  monkeypatch.setattr(certify, "load_test", nan_test)
  config = config_lib.apply_overrides(certify_config.get_config(), overrides)
  with pytest.raises(ValueError, match="radius"):
    certify.run(config, tmp_path / "nan")
  strip = lambda rs: [{k: v for k, v in r.items() if k != "wall_time_s"} for r in rs  # noqa: E731
                      if r["kind"] in ("validation", "selection")]
  assert strip(read_records(tmp_path / "nan")) == strip(records)
  with pytest.raises(SystemExit):
    experiment_main(registry.get('certify'), ["--workdir", str(tmp_path / "run"), "attention_bounds=-1"])

def test_standard_config_reads_the_data_directory_or_warns(monkeypatch, tmp_path):
  from experiments.core.cli import cli
  monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path))  # the command line checks that the directory exists
  config, _ = cli(registry.get('certify'), ["--workdir", "w", "--standard"])
  assert config.data.source == "dir" and config.data.n_train is None and config.data.n_test == 1000
  assert config.datasets == ("cifar10",) and config.attention_bounds == (0.0625, 0.25, 1.0) and config.selects
  assert config.validation_fraction == certify_config.STANDARD_VALIDATION_FULL
  assert config.train.epochs == certify_config.STANDARD_EPOCHS_FULL
  monkeypatch.delenv("ATTN_DATA_DIR")
  with pytest.warns(RuntimeWarning, match="ATTN_DATA_DIR is not set"):
    fallback = certify_config.get_config(standard="cifar10")
  assert fallback.data.source == "embedded" and fallback.validation_fraction == 0.1
  fallback.validate()
  with pytest.raises(ValueError, match="one of"):
    certify_config.get_config(standard="mnist")
  with pytest.raises(ValueError, match="exclusive"):
    certify_config.get_config(full=True, standard=True)
  assert certify_config.get_config().validation_fraction == 0.1 and certify_config.get_config().selects
  with pytest.raises(ValueError, match="validation_fraction"):
    dataclasses_replace(certify_config.get_config(), validation_fraction=1.0).validate()

def dataclasses_replace(config, **changes):
  import dataclasses
  return dataclasses.replace(config, **changes)

def test_report_leads_with_the_rigorous_certificate_and_shows_the_attack_gap():
  from experiments.certify.report import KRYLOV_LABEL, summary_markdown
  records = [cert_record(0.0625, 0.02, 0.328, 0.324, 0.26, 0.274), cert_record(1.0, 0.02, 0.356, 0.30, 0.0, 0.0)]
  text = summary_markdown(records)   # two α, no selection: no headline α
  assert "| cifar10 | 0.02 | – | none † |" in text and "† No α is the headline" in text
  assert f"| **certified (rigorous)** | {KRYLOV_LABEL} |" in text
  assert "| cifar10 | 0.0625 | 0.02 | 32.8 | 32.4 | 0.4 | 1.2 % ⚠ | **26.0** | 27.4 |" in text
  assert "| cifar10 | 1 | 0.02 | 35.6 | 30.0 | 5.6 | 15.7 % | **0.0** | 0.0 |" in text
  assert "| 0.02 | 26.0 / 32.4 / 32.8 ⚠ | 0.0 / 30.0 / 35.6 |" in text   # the triple per α
  text = summary_markdown(records + [selection_record(0.0625, 0.02)])
  assert "| cifar10 | 0.02 | 0.0625 | validation | **26.0 [17.7, 35.7]** | 27.4 | 32.4 | 32.8 | 0.4 ⚠ | 29.1 |" in text
  assert "| 0.02 | 26.0 / 32.4 / 32.8 ⚠ ✓ | 0.0 / 30.0 / 35.6 |" in text
  assert "| cifar10 | 0.02 | 0.0625 | 33.0 | 30.0 | 32.0 | **✓** |" in text

@pytest.mark.parametrize("n, clean_k, pgd_k, marked", [
    (1000, 20, 19, False),   # exactly 5 %: 0.04999999999999918 in float64 before the tolerance
    (100, 20, 19, False),    # exactly 5 %: 0.05000000000000032
    (1000, 20, 20, True), (1000, 40, 39, True),   # 0 % and 2.5 %: clearly fewer
    (1000, 20, 18, False),   # 10 %
])
def test_near_trivial_mark_at_exactly_five_percent_is_not_decided_by_rounding(n, clean_k, pgd_k, marked):
  from experiments.certify.report import _trivial_mark
  r = dict(clean_accuracy=clean_k / n, pgd_accuracy=1 - (n - pgd_k) / n)
  assert (_trivial_mark(r) == " ⚠") is marked

def test_report_training_table_and_learning_curves_from_the_histories(tmp_path):
  from experiments.certify.report import plot_learning_curves, summary_markdown
  hist = [dict(epoch=e, loss=2.0 - 0.1 * e, train_accuracy=0.3 + 0.05 * e, seconds=s, validation_accuracy=v)
          for e, s, v in ((1, 40.0, 0.30), (2, 14.0, 0.40), (3, 16.0, 0.402))]
  train = dict(dataset="cifar10", attention_bound=0.25, kind="train", eps=-1.0, layer=-1, n_train=100, n_test=10,
               n_validation=20, train_accuracy=0.5, clean_accuracy=0.45, train_seconds=75.0, epochs=3, epochs_cap=20,
               stop_reason="plateau", history=hist)
  text = summary_markdown([train])
  # 3 of at most 20 epochs, stopped by the plateau rule; median epoch 16 s; the sum 70 s; the last validation acc.
  assert "| cifar10 | 0.25 | 100 | 20 | 3 / 20 | plateau | 50.0 | 40.2 | 45.0 | 16 | 70 |" in text
  assert "trained for 3 epochs (until the validation accuracy plateaued; cap 20)" in text
  assert plot_learning_curves([train], tmp_path / "curves.png") and (tmp_path / "curves.png").stat().st_size > 0
  old = dict(train, history=[{k: v for k, v in h.items() if k != "validation_accuracy"} for h in hist])
  assert not plot_learning_curves([old], tmp_path / "none.png") and not (tmp_path / "none.png").exists()


def _split_of(counts, seed=0):
  """A training split with counts[c] images of class c (classes in blocks), indices 100, 101, ..."""
  from experiments.data.loader import Split, SplitInfo
  y = np.repeat(np.arange(len(counts)), counts).astype(np.int32)
  x = np.random.default_rng(seed).uniform(size=(y.size, 2, 2, 1)).astype(np.float32)
  info = SplitInfo("mnist", "train", "embedded", "-", tuple(range(len(counts))), tuple("abcd"[:len(counts)]),
                   np.arange(100, 100 + y.size, dtype=np.int64), False)
  return Split(x, y, info)


def test_validation_split_holds_out_the_rounded_share_of_each_class_clamped_to_leave_one():
  """Catches a truncated share (int for round) or a clamp that can take a whole class (n_c for n_c − 1): at 0.26,
  classes of 10, 2 and 1 give round(2.6) = 3, round(0.52) = 1 and 0 (a class of one row stays whole); at 0.9 a
  class of 2 gives 1, not 2, and one of 10 gives 9."""
  from experiments.certify.run import validation_split
  fit, val = validation_split(_split_of([10, 2, 1]), 0.26, seed=1)
  assert np.bincount(val.y, minlength=3).tolist() == [3, 1, 0]
  assert np.bincount(fit.y, minlength=3).tolist() == [7, 1, 1]
  fit, val = validation_split(_split_of([10, 2]), 0.9, seed=1)
  assert np.bincount(val.y, minlength=2).tolist() == [9, 1] and np.bincount(fit.y).tolist() == [1, 1]
  with pytest.raises(ValueError, match="leaves 1 to train on and 0 to validate on"):
    validation_split(_split_of([1]), 0.5, seed=0)


def test_chunks_cover_every_image_once_up_to_the_last_partial_chunk():
  """Catches an off-by-one at the chunk edge: chunks are [i, min(i + size, n)), the last one partial."""
  from experiments.certify.run import _chunks
  assert _chunks(10, 3) == [(0, 3), (3, 6), (6, 9), (9, 10)]
  assert _chunks(9, 3) == [(0, 3), (3, 6), (6, 9)]
  assert _chunks(2, 5) == [(0, 2)] and _chunks(1, 1) == [(0, 1)]


def test_selection_records_pick_by_the_rule_at_each_eps_and_wait_for_every_alpha():
  """Catches a selection read before every α's validation records are in, an ε matched exactly instead of within
  rounding, or candidates kept unsorted: at ε = 0.02 α = 1 certifies most on the validation split; at ε = 0.3
  (recorded as 0.1 + 0.2) the two certify equally and the higher clean accuracy decides; without α = 1's record at
  one ε nothing is selected."""
  import types

  from experiments.certify.run import selection_records
  config = types.SimpleNamespace(epsilons=(0.02, 0.3), attention_bounds=(0.25, 1.0), validation_fraction=0.1,
                                 train=types.SimpleNamespace(seed=4))
  recs = [_val(1.0, 0.30, 0.50), _val(0.25, 0.20, 0.60), _val(0.25, 0.10, 0.40, eps=0.1 + 0.2),
          _val(1.0, 0.10, 0.45, eps=0.1 + 0.2), _val(1.0, 0.9, 0.9, dataset="mnist")]
  out = selection_records(config, recs, "cifar10")
  assert [(r["eps"], r["attention_bound"], r["kind"]) for r in out] == [(0.02, 1.0, "selection"),
                                                                         (0.3, 1.0, "selection")]
  assert [c["attention_bound"] for c in out[0]["candidates"]] == [0.25, 1.0]
  assert out[0]["candidates"][1]["validation_certified_rigorous"] == 0.30 and out[0]["seed"] == 4
  assert selection_records(config, recs[:3], "cifar10") == []
