"""Flip-rate and landscape runners on real MNIST rows: controls, schema, resume, report."""
import dataclasses

import numpy as np
import pytest

from experiments import registry
from experiments.core.cli import experiment_main
from experiments.core.config import apply_overrides, merge_overrides
from experiments.flip_rate import config as flip_rate_config
from experiments.flip_rate import report as flip_rate_report
from experiments.flip_rate import run as flip_rate
from experiments.landscape import config as landscape_config
from experiments.landscape import report as landscape_report
from experiments.landscape import run as landscape

SMALL = ["models=relu,mlp_attn", "widths=64", "seeds=0", "eps=0,0.3", "data.n_train=40", "data.n_test=10",
         "train.learning_rates=0.001", "train.max_epochs=20", "train.check_every=10",
         "pgd_steps=5", "mim_steps=3"]


@pytest.fixture(scope="module")
def run_records(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("flip")
  config = apply_overrides(flip_rate_config.get_config(), SMALL)
  return workdir, config, flip_rate.run(config, workdir)


def test_controls_and_schema(run_records):
  _, config, records = run_records
  assert len(records) == 2 * len(flip_rate_config.ATTACKS) * 2
  for r in records:
    for f in flip_rate.KEY_FIELDS + ("flip_rate", "spearman", "n_top", "mean_linf_over_eps", "versions"):
      assert f in r, f
    assert r["n_top"] == 4  # ⌈0.1 · 40⌉
    if r["eps"] == 0:  # the ε = 0 control: identical inputs, identical influence, no flips
      assert r["flip_rate"] == 0.0 and r["spearman"] == pytest.approx(1.0)
    else:
      assert 0 < r["mean_linf_over_eps"] <= 1 + 1e-6
  fgsm = [r for r in records if r["attack"] == "fgsm" and r["eps"] == 0.3]
  assert all(r["mean_linf_over_eps"] > 0.9 for r in fgsm)  # sign steps use the budget (clipping aside)


def test_resume_skips_recorded_points(run_records):
  workdir, config, records = run_records
  again = flip_rate.run(config, workdir)
  assert len(again) == len(records)


def test_report(run_records):
  workdir, _, _ = run_records
  text = flip_rate_report.write_report(workdir)
  assert "| mnist | MLP-Attn |" in text and "34.6 / 28.9 / 21.9" in text
  assert (workdir / "flip_rate_vs_eps.png").stat().st_size > 0


def test_mean_ci():
  m, h = flip_rate_report.mean_ci([1.0, 2.0, 3.0])
  assert m == 2.0 and h == pytest.approx(4.302652729911275 * 1.0 / np.sqrt(3))  # t₀.₉₇₅(2) = 4.3027
  assert flip_rate_report.mean_ci([5.0]) == (5.0, 0.0)


def test_cli_prints_one_line_errors(tmp_path, capsys):
  with pytest.raises(SystemExit) as exit_info:
    experiment_main(registry.get('flip_rate'), ["--workdir", str(tmp_path), "eps=0,5"])
  assert exit_info.value.code == 2 and "eps must be in [0, 1]" in capsys.readouterr().err


def test_adversarial_training_makes_the_training_rows_robust_to_pgd(tmp_path):
  """At the same tiny config (30 Adam epochs in all, both fit the clean rows), the network trained on PGD
  rows at ε = 0.3 keeps far more of its training rows under a fresh PGD attack at ε = 0.3 than the
  standard one (0.75 vs 0.3 at seed 0; ≥ 0.2 apart at seeds 0–2); the ε = 0 control still has no flips."""
  common = merge_overrides(SMALL, ["models=relu", "attacks=pgd", "eps=0,0.3", "train.max_epochs=30",
                                   "train.optimizer=adam", "train.learning_rates=0.01", "train.batch_size=10",
                                   "at_eps=0.3", "at_rounds=2", "at_epochs_per_round=10"])
  runs = {}
  for at in (False, True):
    config = apply_overrides(flip_rate_config.get_config(), merge_overrides(common, [
        f"adversarial_training={str(at).lower()}"]))
    records = flip_rate.run(config, tmp_path / str(at))
    assert len(records) == 2 and all(r["adversarial_training"] == at for r in records)
    runs[at] = {r["eps"]: r for r in records}
    assert runs[at][0.0]["flip_rate"] == 0.0 and runs[at][0.0]["train_accuracy"] == 1.0
    assert runs[at][0.0]["attacked_row_accuracy"] == runs[at][0.0]["train_accuracy"]   # ε = 0 moves nothing
  assert runs[True][0.3]["attacked_row_accuracy"] > runs[False][0.3]["attacked_row_accuracy"] + 0.2


FLOOR = merge_overrides(SMALL, ["models=relu", "attacks=random_sign", "eps=0", "seeds=0,1", "seed_floor=true",
                                "top_fraction=1.0", "train.max_epochs=10"])


def _floors(records):
  return {r["seed"]: r for r in records if r["attack"] == flip_rate.SEED_FLOOR}


def test_seed_floor_is_zero_for_identical_initialisations_and_positive_for_two_seeds(tmp_path, monkeypatch):
  """The seed floor compares the influence of two networks trained on the same data from different seeds.
  From the same seed (offset 0) the second network is the first, bit for bit: floor 0. From two seeds it
  flips some of the top set at one seed or the other. With the infinite-width kernel, which no
  initialisation enters, two seeds again give 0."""
  records = flip_rate.run(apply_overrides(flip_rate_config.get_config(), FLOOR), tmp_path / "two")
  floors = _floors(records)
  assert set(floors) == {0, 1} and all(f["second_seed"] == f["seed"] + flip_rate.SEED_FLOOR_OFFSET
                                       for f in floors.values())
  assert max(f["flip_rate"] for f in floors.values()) > 0 and min(f["spearman"] for f in floors.values()) < 1
  infinite = flip_rate.run(apply_overrides(flip_rate_config.get_config(), FLOOR + ["influence_kernel=infinite"]),
                           tmp_path / "inf")
  assert all(f["flip_rate"] == 0.0 and f["spearman"] == pytest.approx(1.0) for f in _floors(infinite).values())
  monkeypatch.setattr(flip_rate, "SEED_FLOOR_OFFSET", 0)
  same = flip_rate.run(apply_overrides(flip_rate_config.get_config(), FLOOR), tmp_path / "same")
  assert all(f["flip_rate"] == 0.0 and f["spearman"] == pytest.approx(1.0) for f in _floors(same).values())


def test_data_seed_follows_the_seed_when_asked(tmp_path):
  records = flip_rate.run(apply_overrides(flip_rate_config.get_config(), merge_overrides(FLOOR, [
      "seed_floor=false", "data_seed_follows_seed=true", "data.seed=7", "top_fraction=0.1",
      "train.max_epochs=20"])), tmp_path)
  assert {(r["seed"], r["data_seed"]) for r in records} == {(0, 0), (1, 1)}
  assert all(r["influence_kernel"] == "trained" and r["ridge_scale"] == 1e-3 for r in records)


def test_landscape_runner(tmp_path):
  config = apply_overrides(landscape_config.get_config(), [
      "models=relu", "widths=32", "seeds=0", "data.n_train=30", "train.learning_rates=0.001",
      "train.max_epochs=5", "readouts=fixed", "top_k=2", "lanczos_iters=6",
      "grid_1d=5", "grid_2d=3"])
  records = landscape.run(config, tmp_path)
  assert len(records) == 1 and len(records[0]["top_eigenvalues"]) == 2
  assert records[0]["top_eigenvalues"][0] >= records[0]["top_eigenvalues"][1]
  line = records[0]["landscape_1d"]
  assert line[2] == pytest.approx(records[0]["train_loss"], rel=1e-5)  # the centre of the grid is θ̂
  assert "| mnist | 2L-ReLU | 32 |" in landscape_report.write_report(tmp_path)


@pytest.mark.parametrize("override,match", [("eps=-0.1", "eps"), ("eps=0,5", r"\[0, 1\]"), ("eps=nan", "finite"),
                                            ("attacks=cw", "attacks"), ("top_fraction=0", "top_fraction"),
                                            ("tasks=mnist_3v9", "unknown dataset"), ("models=", "empty")])
def test_bad_config(override, match):
  with pytest.raises(ValueError, match=match):
    apply_overrides(flip_rate_config.get_config(), [override])


def test_random_sign_control_is_plus_minus_eps_everywhere_with_both_signs_and_its_own_key_per_seed(tmp_path, monkeypatch):
  """The random-sign control moves every coordinate by ±ε (clipped to the [0, 1] box): where the pixel is at
  least ε from both edges |δ| = ε exactly, both signs occur about equally, and two seeds (here on the same
  training rows) draw different sign patterns. Fails if the control draws one fixed key for every seed, or
  no sign flip at all."""
  from influence import malleability
  calls = []
  original = malleability.perturb_rows

  def spy(attack, logits_fn, x, y, *, eps, key, **kw):
    out = original(attack, logits_fn, x, y, eps=eps, key=key, **kw)
    calls.append((attack, eps, np.asarray(x), np.asarray(out)))
    return out
  monkeypatch.setattr(malleability, "perturb_rows", spy)
  eps = 0.05
  config = apply_overrides(flip_rate_config.get_config(), merge_overrides(SMALL, [
      "models=relu", "attacks=random_sign", f"eps={eps}", "seeds=0,1", "data_seed_follows_seed=false",
      "train.max_epochs=5"]))
  flip_rate.run(config, tmp_path)
  deltas = []
  for attack, e, x, x_adv in calls:
    assert attack == "random_sign" and e == eps
    delta = x_adv - x
    inside = (x >= eps + 1e-6) & (x <= 1 - eps - 1e-6)
    assert inside.sum() > 1000
    np.testing.assert_allclose(np.abs(delta[inside]), eps, rtol=0, atol=1e-6)  # ±ε in every coordinate
    assert np.abs(delta).max() <= eps + 1e-6
    still = delta == 0
    assert np.all((x[still] <= 1e-6) | (x[still] >= 1 - 1e-6))  # only the box edge keeps a pixel in place
    positive = np.mean(delta[inside] > 0)
    assert 0.4 < positive < 0.6  # both signs, about half each
    deltas.append((x, np.sign(delta)))
  (x0, s0), (x1, s1) = deltas
  np.testing.assert_array_equal(x0, x1)  # one training subset for both seeds here
  inside = (x0 >= eps + 1e-6) & (x0 <= 1 - eps - 1e-6)
  assert np.mean(s0[inside] == s1[inside]) < 0.6  # the seeds' sign patterns are independent, not one key's


def test_standard_config_and_cli(monkeypatch, recwarn, tmp_path):
  """--standard [mnist|cifar10]: n = 512, m = 256, the claims job's whole ε grid, the seed floor, per-seed
  subsets, 30 (MNIST) or 10 (CIFAR-10) seeds, the full files from ATTN_DATA_DIR; registered in the claims
  job's standard runs."""
  from experiments.claims import job as claims
  from experiments.core.cli import cli
  monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path))  # the command line checks that the directory exists
  config, _ = cli(registry.get('flip_rate'), ["--workdir", "w", "--standard"])
  assert config == flip_rate_config.standard_config("mnist")
  assert (config.tasks, config.widths, config.seeds, config.eps) == (("mnist",), (256,), tuple(range(30)),
                                                                    flip_rate_config.CLAIMS_EPS)
  assert (config.data.n_train, config.data.source, config.data.dir) == (512, "dir", str(tmp_path))
  assert config.seed_floor and config.data_seed_follows_seed
  cifar, _ = cli(registry.get('flip_rate'), ["--workdir", "w", "--standard", "cifar10", "seeds=0"])
  assert cifar.tasks == ("cifar10",) and cifar.seeds == (0,)
  assert len(flip_rate_config.standard_config("cifar10").seeds) == 10
  runs = {name: (exp, cfg) for name, exp, cfg, _ in claims.standard_runs()}
  assert runs["flip_rate_standard"] == ("flip_rate", flip_rate_config.standard_config("mnist"))
  assert runs["flip_rate_standard_cifar10"] == ("flip_rate", flip_rate_config.standard_config("cifar10"))
  with pytest.raises(ValueError, match="standard config's data set"):
    flip_rate_config.standard_config("svhn")
  monkeypatch.delenv("ATTN_DATA_DIR")
  with pytest.warns(RuntimeWarning, match="ATTN_DATA_DIR is not set"):
    assert flip_rate_config.standard_config().data.source == "embedded"


def test_each_seed_draws_its_own_subset_disjoint_from_the_full_files(tmp_path, monkeypatch):
  """seed_splits: from the full files seed s takes block s of one partition (no image in two seeds; here the
  embedded files stand in for the full ones), from the embedded subsets an independent draw per seed whose
  expected overlap n/N is stated; flip_rate records say which."""
  from experiments.core import config as config_lib
  from experiments.core import seed_subsets
  real = config_lib.load_splits
  monkeypatch.setattr(seed_subsets.config_lib, "load_splits", lambda data, name, **kw: real(
      dataclasses.replace(data, source="embedded", dir=None), name, **kw))
  full = config_lib.DataConfig(n_train=200, n_test=20, source="dir", dir="/data/full")
  draws = [seed_subsets.seed_splits(full, "mnist", s) for s in range(3)]
  sets = [set(d[0].info.indices.tolist()) for d in draws]
  assert all(not sets[i] & sets[j] for i in range(3) for j in range(i + 1, 3))
  assert [d[2]["data_block"] for d in draws] == [0, 1, 2] and {d[2]["data_draw"] for d in draws} == {"disjoint"}
  assert all(d[2]["expected_seed_overlap"] == 0.0 for d in draws)
  embedded = config_lib.DataConfig(n_train=512, n_test=20)
  a, b = (seed_subsets.seed_splits(embedded, "mnist", s) for s in (0, 1))
  assert a[2]["data_draw"] == "independent" and a[2]["train_pool"] == 2000
  assert a[2]["expected_seed_overlap"] == pytest.approx(0.256)  # 51.2²/200 per class, summed over 10, / 512
  shared = len(set(a[0].info.indices.tolist()) & set(b[0].info.indices.tolist())) / 512
  assert 0.18 < shared < 0.33
  assert "share 25.6 %" in seed_subsets.overlap_text([a[2], b[2]])
  records = flip_rate.run(apply_overrides(flip_rate_config.get_config(), merge_overrides(
      FLOOR, ["seed_floor=false", "top_fraction=0.1", "train.max_epochs=20"])), tmp_path)
  assert {(r["seed"], r["data_draw"], r["data_seed"]) for r in records} == {(0, "independent", 0), (1, "independent", 1)}


def test_report_has_the_calibration_and_the_ceiling(tmp_path):
  """derived.json and the summary carry the interpolated ε* (2L-ReLU's pooled PGD rate 0 at ε = 0 and 6/60 at
  0.1: 3.3 % at ε* = 0.1·0.033/0.1 = 0.033; MLP-Attn's 18/60 there: ratio 3) with the ratio there, the grid
  rule's ε, and every ratio's ceiling 100 %/rate(2L-ReLU) (30/60 at ε = 0.3: 2×); the figure is drawn."""
  import json

  from experiments.core.workdir import Workdir
  wd = Workdir(tmp_path, flip_rate.KEY_FIELDS)
  for seed in range(6):
    for model, flips in (("relu", (0, 6, 30)), ("mlp_attn", (0, 18, 45))):
      for attack in ("fgsm", "pgd", "mim", "random_sign"):
        for eps, k in zip((0.0, 0.1, 0.3), flips):
          wd.append(dict(task="mnist", model=model, width=64, seed=seed, adversarial_training=False, attack=attack,
                         eps=eps, n_flipped=k, n_top=60, flip_rate=k / 60, spearman=0.9, mean_linf_over_eps=1.0,
                         train_accuracy=1.0, test_accuracy=0.8, converged=True))
  text = flip_rate_report.write_report(tmp_path)
  derived = json.loads((tmp_path / "derived.json").read_text())
  (cal,) = derived["calibration"]
  assert cal["eps"] == pytest.approx(0.033) and cal["grid_rule_eps"] == 0.1
  assert cal["ratios"]["pgd"]["ratio"] == pytest.approx(3.0) and cal["low"] == cal["high"] == pytest.approx(0.033)
  at_03 = next(c for c in derived["ratio_curve"] if c["attack"] == "pgd" and c["eps"] == 0.3)
  assert at_03["ratio"] == pytest.approx(1.5) and at_03["ceiling"] == pytest.approx(0.5 ** -1)
  assert "ε* = 0.033 [0.033, 0.033]" in text and "(≤ 2)" in text and "grid rule 0.1" in text
  assert (tmp_path / "flip_ratio_vs_eps.png").stat().st_size > 0


def _plot_records():
  recs = []
  for seed in range(3):
    for model in ("relu", "mlp_attn"):
      for eps in (0.0, 0.1):
        recs.append(dict(task="mnist", model=model, width=16, seed=seed, adversarial_training=False, attack="pgd",
                         eps=eps, flip_rate=0.0 if eps == 0 else 0.9 if seed == 2 else 0.1 * (model == "mlp_attn"),
                         converged=seed != 2, loss_target=0.05, train_loss=0.5 if seed == 2 else 0.01))
  return recs


def test_flip_rate_plot_draws_only_what_the_table_counts(monkeypatch, tmp_path):
  """The unconverged seed (flip rate 0.9) is left out of the drawn means, and the label says so."""
  from experiments.flip_rate import report
  figs = []
  monkeypatch.setattr(report, "save", lambda fig, path: figs.append(fig))
  report.plot_vs(_plot_records(), "eps", tmp_path / "p.png")
  (ax,) = [a for a in figs[0].axes if a.containers]
  drawn = {c.get_label(): c.lines[0].get_ydata() for c in ax.containers}
  (attn_label,) = [k for k in drawn if k.startswith("MLP-Attn")]
  assert "2 of 6 points left out" in attn_label
  np.testing.assert_allclose(drawn[attn_label], [0.0, 10.0])  # 0.9 of the unconverged seed would lift it


def test_flip_ratio_plot_says_why_it_is_not_drawn_and_a_single_eps_stays_on_its_tick(monkeypatch, tmp_path):
  from experiments.flip_rate import report
  assert "not drawn" in report.plot_ratio([], [], tmp_path / "r.png")
  figs = []
  monkeypatch.setattr(report, "save", lambda fig, path: figs.append(fig))
  curve = [dict(task="mnist", width=16, attack=a, eps=0.1, ratio=2.0, low=1.5, high=3.0, ceiling=10.0)
           for a in ("fgsm", "pgd")]
  assert report.plot_ratio(curve, [], tmp_path / "r.png") is None
  xs = {float(x) for c in figs[0].axes[0].containers for x in np.atleast_1d(c.lines[0].get_xdata())}
  assert xs == {0.1}
