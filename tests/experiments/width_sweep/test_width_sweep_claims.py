"""The NTK-distance and feature-learning claim rows (experiments.width_sweep.claims) from synthetic records:
per-seed slopes, paired differences, unconverged points and the kernel-movement measures."""
import math

import numpy as np
import pytest
from claim_sources import claim_rows_of, main_row

from experiments.core import rows as core_rows
from experiments.width_sweep import claims as width_sweep_claims


def test_ntk_distance_slopes_per_seed(tmp_path):
  """Distances ∝ m^(−1/2) for 2L-ReLU and ∝ m^(+0.3) for MLP-Attn with small noise, 10 seeds: both rows hold,
  and the mean slope (Student's t interval over seeds) lies near the exponents; the init-kernel variant comes
  from kind 'init'."""
  rng = np.random.default_rng(1)
  records = []
  for seed in range(10):
    for width in (16, 64, 256, 1024):
      for model, power in (("relu", -0.5), ("mlp_attn", 0.3)):
        noise = math.exp(rng.normal(0, 0.02))
        records.append(dict(dataset="mnist", model=model, readout="fixed", width=width, seed=seed, kind="train",
                            kernel_path="fast", function_distance=3.0 * width ** power * noise))
        records.append(dict(dataset="mnist", model=model, readout="fixed", width=width, seed=seed, kind="init",
                            kernel_path="fast", rel_frobenius_train=width ** -0.5 * noise))
  rows = claim_rows_of(tmp_path, "ws", records)
  relu, attn = main_row(rows, "ntk_distance_relu"), main_row(rows, "ntk_distance_mlp_attn")
  assert relu["n"] == attn["n"] == 10 and relu["method"] == attn["method"] == "student_t"
  assert relu["direction"] == "holds" and relu["low"] < -0.5 < relu["high"] + 0.02
  assert attn["direction"] == "holds" and abs(attn["estimate"] - 0.3) < 0.02
  init = [r for r in rows if r["claim_id"] == "ntk_distance_mlp_attn" and r["variant"]]
  assert init and "initialisation" in init[0]["variant"] and init[0]["direction"] == "fails"
  assert [c["direction"] for c in attn["protocol"]] == ["fails"]

def test_ntk_distance_at_convergence_leaves_out_unconverged_points_and_names_the_unreachable(tmp_path):
  """Width-16 points whose readout floor lies above the target and a width-64 point that stopped short are
  left out and counted; the slope comes from the converged widths only."""
  records = []
  for seed in range(5):
    for width in (16, 64, 256, 1024):
      reached = width > 64 or (width == 64 and seed > 0)
      records.append(dict(dataset="mnist", model="relu", readout="fixed", width=width, seed=seed, kind="converged",
                          kernel_path="fast", function_distance=3.0 * width ** -0.5, converged=reached,
                          loss_target=1e-3, loss_floor=0.015 if width == 16 else 0.0))
  for width in (16, 64, 256, 1024):  # MLP-Attn: nothing converged
    records.append(dict(dataset="mnist", model="mlp_attn", readout="fixed", width=width, seed=0, kind="converged",
                        kernel_path="fast", function_distance=1.0, converged=False, loss_target=1e-3,
                        loss_floor=0.015 if width == 16 else 0.0))
  rows = claim_rows_of(tmp_path, "ws", records)
  (attn,) = [r for r in rows if r["claim_id"] == "ntk_distance_mlp_attn"]
  assert attn["status"] == "not measured" and attn["reason"] == (
      "no width converged: 4 unconverged points left out; for 1 the target is below the fixed readout's loss "
      "floor (unreachable)")
  (row,) = [r for r in rows if r["claim_id"] == "ntk_distance_relu"]
  assert row["note"] == ("6 unconverged points left out; for 5 the target is below the fixed readout's loss floor "
                         "(unreachable)")
  assert "64–1024" in row["setting"] and row["estimate"] == pytest.approx(-0.5, abs=1e-9)

def _movement_records(seeds, kinds=("common", "train")):
  """MLP-Attn's kernel moves about 0.02 and 2L-ReLU's 0.10, the difference varying with the width and the seed
  (MLP-Attn − 2L-ReLU = −0.08 + 0.004·(width index) − 0.002·(seed mod 4) + 0.0005·seed)."""
  recs = []
  for kind in kinds:
    for w_i, width in enumerate((64, 256)):
      for seed in seeds:
        for model, move in (("relu", 0.10), ("mlp_attn", 0.02 + 0.004 * w_i - 0.002 * (seed % 4) + 0.0005 * seed)):
          recs.append(dict(dataset="mnist", model=model, width=width, seed=seed, kind=kind, readout="fixed",
                           kernel_path="fast", kernel_movement=move + 0.001 * seed, common_target=0.035,
                           function_distance=1.0, function_distance_relative=0.5, converged=True,
                           kinf_modes_fitted=245 if model == "relu" else 4, kinf_modes=256))
  return recs

def test_feature_learning_row_compares_kernel_movement_at_the_common_target(tmp_path):
  """MLP-Attn's kernel moves less than 2L-ReLU's at every (width, seed): the claim fails there, with the seed
  as the unit (the difference averaged over widths per seed, 10 seeds, not 20 (width, seed) pairs); the
  fixed-time variant is labelled with the K∞ modes fitted."""
  recs = _movement_records(range(10))
  rows = claim_rows_of(tmp_path, "ws", recs)
  main = main_row(rows, "feature_learning")
  per_seed = [np.mean([-0.08 + 0.004 * w_i - 0.002 * (s % 4) + 0.0005 * s for w_i in (0, 1)]) for s in range(10)]
  assert main["direction"] == "fails" and main["n"] == 10 and main["unit"] == "seeds"
  assert main["estimate"] == pytest.approx(np.mean(per_seed), rel=1e-9) and main["method"] == "sign_flip_exact"
  assert main["low"] < main["estimate"] < main["high"] < 0
  assert "10 seeds (20 (width, seed) pairs)" in main["setting"]
  variant = [r for r in rows if r["claim_id"] == "feature_learning" and r["variant"]][0]
  assert "2L-ReLU 245 of 256, MLP-Attn 4 of 256" in variant["variant"]

def test_feature_learning_interval_is_the_sign_flip_interval_of_per_seed_means():
  """With 6 seeds the inverted sign-flip interval of the per-seed differences (averaged over widths) is
  exactly [min, max] of them (p just outside is 2/64 ≤ 0.05), and 6 seeds are too few for a direction."""
  rows = width_sweep_claims.feature_learning_rows(_sweep_source(_movement_records(range(6), kinds=("common",))))
  (row,) = [r for r in rows if r["primary"]]
  per_seed = [np.mean([-0.08 + 0.004 * w_i - 0.002 * (s % 4) + 0.0005 * s for w_i in (0, 1)]) for s in range(6)]
  assert len(set(np.round(per_seed, 12))) > 2  # distinct per-seed values: min and max are not the mean ± 0
  assert (row["low"], row["high"]) == pytest.approx((min(per_seed), max(per_seed)), rel=1e-9)
  assert row["n"] == 6 and row["direction"] == "inconclusive" and row["reason"].startswith("inconclusive by design")

def _sweep_source(records, variant=()):
  return core_rows.Source("width_sweep", "ws", {}, records, variant, "python -m experiments.width_sweep")

def test_feature_learning_has_one_row_per_kernel_movement_measure_and_the_raw_one_is_primary():
  """MLP-Attn's raw movement is below 2L-ReLU's (its top eigenvalue dominates ‖K₀‖_F) while its centred
  movement, 1 − CKA and top-k eigenspace movement are above: the raw row fails and the other three hold,
  each a measurement choice of the same claim and variant; only the raw one is the paper's (primary)."""
  recs = []
  for width in (64, 256, 1024):
    for seed in range(10):
      for model, raw, other in (("relu", 0.4, 0.3), ("mlp_attn", 0.1, 0.7)):
        recs.append(dict(dataset="mnist", model=model, width=width, seed=seed, kind="common", converged=True,
                         kernel_movement=raw + 0.01 * seed, kernel_movement_centred=other + 0.01 * seed,
                         kernel_movement_one_minus_cka=other / 2 + 0.01 * seed,
                         kernel_movement_top_k=other / 3 + 0.01 * seed, kernel_movement_k=10,
                         data_draw="independent", expected_seed_overlap=0.128, train_pool=2000))
  rows = width_sweep_claims.feature_learning_rows(_sweep_source(recs))
  assert [r["measurement"].split()[0] for r in rows] == ["raw", "centred", "1", "top-10"]
  assert [r["primary"] for r in rows] == [True, False, False, False]
  assert {r["variant"] for r in rows} == {""} and {r["claim_id"] for r in rows} == {"feature_learning"}
  assert [r["direction"] for r in rows] == ["fails", "holds", "holds", "holds"]
  assert [r["estimate"] for r in rows] == pytest.approx([-0.3, 0.4, 0.2, 0.4 / 3])
  assert all(r["n"] == 10 and r["unit"] == "seeds" for r in rows)  # the seed is the unit, its widths averaged
  assert "10 seeds (30 (width, seed) pairs)" in rows[0]["setting"]
  assert "seeds share ≈ 13 % of their training images" in rows[0]["setting"]
  assert "2,000-image" in rows[0]["setting"]
  recs[0]["kernel_movement_one_minus_cka"] = float("nan")  # a dead network: CKA undefined there
  cka = width_sweep_claims.feature_learning_rows(_sweep_source(recs))[2]
  assert cka["n"] == 10 and "10 seeds (29 (width, seed) pairs)" in cka["setting"]  # the seed keeps 2 widths
  assert cka["note"].startswith("1 (width, seed) pair left out: the measure is undefined")

def _distance_records(kinf_slopes, k0_slopes, *, kind="common", seeds=range(5), noise=0.02):
  """Records whose K∞ and K₀ distances grow as m^slope per model, with seed noise of the slope."""
  rng = np.random.default_rng(0)
  kinf_field, k0_field, _, _ = width_sweep_claims.DISTANCE_FIELDS[kind]
  out = []
  for seed in seeds:
    jitter = {m: rng.normal(0, noise, 2) for m in ("relu", "mlp_attn")}
    for width in (64, 256, 1024):
      for model in ("relu", "mlp_attn"):
        out.append({"dataset": "mnist", "model": model, "width": width, "seed": seed, "kind": kind,
                    "converged": True, "common_target": 0.035, "data_draw": "disjoint",
                    kinf_field: 2.0 * width ** (kinf_slopes[model] + jitter[model][0]),
                    k0_field: 0.5 * width ** (k0_slopes[model] + jitter[model][1])})
  return out

def _sign_flip_p(d, mu):
  """Two-sided sign-flip p-value of H0: the differences d are symmetric about mu, by enumerating all 2^n
  sign patterns: the share with |Σ s_i (d_i − mu)| at least the observed |Σ (d_i − mu)| (ties within 1e-12)."""
  x = np.asarray(d, float) - mu
  signs = 1 - 2 * ((np.arange(2 ** len(x))[:, None] >> np.arange(len(x))) & 1)
  stats = np.abs(signs @ x)
  return float(np.mean(stats >= abs(x.sum()) - 1e-12 * np.abs(x).sum()))

@pytest.mark.parametrize("kind", ["common", "matched", "train"])
def test_ntk_distance_difference_is_the_paired_per_seed_slope_difference_against_k_inf(kind):
  """Per seed, MLP-Attn's slope of log distance on log width minus 2L-ReLU's is the unit: with K∞ slopes
  +0.1 and −0.4 the primary row's mean difference is 0.5 over 10 seeds and holds; against K₀ (laziness,
  slopes −0.1 and −0.05) the difference is −0.05 and fails. The interval is the inverted sign-flip test's: at
  its ends the exact test (all 2^10 sign patterns) does not reject, just beyond them it does. Each model's own
  slope is its own row under both references. The same for every training criterion (a variant beside the
  common target)."""
  recs = _distance_records({"relu": -0.4, "mlp_attn": 0.1}, {"relu": -0.05, "mlp_attn": -0.1}, kind=kind,
                           seeds=range(10))
  rows = width_sweep_claims.ntk_distance_rows(_sweep_source(recs))
  diff = [r for r in rows if r["claim_id"] == "ntk_distance_difference"]
  assert [(r["primary"], r["measurement"].split()[3]) for r in diff] == [(True, "K∞"), (False, "K₀")]
  kinf, k0 = diff
  assert kinf["n"] == 10 and kinf["unit"] == "seeds" and kinf["direction"] == "holds"
  assert kinf["estimate"] == pytest.approx(0.5, abs=0.05) and kinf["scale"] == "slope"
  field = width_sweep_claims.DISTANCE_FIELDS[kind][0]
  slopes = {m: width_sweep_claims.per_seed_slopes([r for r in recs if r["model"] == m], field)
            for m in ("relu", "mlp_attn")}
  d = [slopes["mlp_attn"][s] - slopes["relu"][s] for s in range(10)]
  assert kinf["estimate"] == pytest.approx(np.mean(d), rel=1e-12)
  step = 1e-7 * np.ptp(d)
  assert min(d) < kinf["low"] < kinf["estimate"] < kinf["high"] < max(d)
  assert _sign_flip_p(d, kinf["low"]) > 0.05 and _sign_flip_p(d, kinf["high"]) > 0.05
  assert _sign_flip_p(d, kinf["low"] - step) <= 0.05 and _sign_flip_p(d, kinf["high"] + step) <= 0.05
  assert k0["direction"] == "fails" and k0["estimate"] == pytest.approx(-0.05, abs=0.05)
  assert kinf["paper_range"] == [pytest.approx(width_sweep_claims.paper_slope_difference("mnist"))] * 2
  assert "disjoint per-seed training subsets" in kinf["setting"]
  per_model = {(r["claim_id"], r["primary"]): r for r in rows if r["claim_id"] != "ntk_distance_difference"}
  assert per_model["ntk_distance_relu", True]["direction"] == "holds"
  assert per_model["ntk_distance_mlp_attn", True]["direction"] == "holds"
  assert per_model["ntk_distance_mlp_attn", False]["direction"] == "fails"
  assert {r["variant"] for r in rows} == {""}  # the first criterion present is the main one
  if kind != "common":
    both = width_sweep_claims.ntk_distance_rows(_sweep_source(recs + _distance_records(
        {"relu": -0.4, "mlp_attn": 0.1}, {"relu": -0.4, "mlp_attn": 0.1}, kind="common")))
    variants = {r["variant"] for r in both if r["claim_id"] == "ntk_distance_difference"}
    assert len(variants) == 2 and "" in variants  # the common target main, this criterion a variant

def test_ntk_distance_difference_pairs_only_seeds_both_models_measured():
  """A seed whose MLP-Attn points did not converge is left out of the paired difference and counted."""
  recs = _distance_records({"relu": -0.4, "mlp_attn": 0.1}, {"relu": -0.4, "mlp_attn": 0.1})
  for r in recs:
    if r["seed"] == 4 and r["model"] == "mlp_attn":
      r.update(converged=False, loss_target=0.035, train_loss=0.05)
  rows = width_sweep_claims.ntk_distance_rows(_sweep_source(recs))
  kinf = next(r for r in rows if r["claim_id"] == "ntk_distance_difference" and r["primary"])
  assert kinf["n"] == 4 and "MLP-Attn: 3 unconverged points left out" in kinf["note"]
  relu = next(r for r in rows if r["claim_id"] == "ntk_distance_relu" and r["primary"])
  assert relu["n"] == 5


def _recipe_records(attn_power, *, seeds=range(10), lin=True):
  """Fixed-budget records of the paper's recipe (loss target 0, the whole 500-epoch budget run, never
  'converged'): 2L-ReLU's distances ∝ m^(−0.5), MLP-Attn's ∝ m^(attn_power), to every reference."""
  rng = np.random.default_rng(3)
  recs = []
  for seed in seeds:
    for width in (16, 64, 256, 1024, 4096):
      for model, power in (("relu", -0.5), ("mlp_attn", attn_power)):
        d = 3.0 * width ** power * math.exp(rng.normal(0, 0.02))
        recs.append(dict(dataset="cifar10", model=model, readout="fixed", width=width, seed=seed, kind="converged",
                         function_distance=d, function_distance_kinf=2 * d,
                         **(dict(function_distance_linearized=d / 2) if lin else {}),
                         converged=False, loss_target=0.0, epochs_trained=500, max_epochs=500, optimizer="adam",
                         learning_rate=1e-3, loss="ce", n_train=1000,
                         train_loss=2.30 if model == "mlp_attn" else 1.99,
                         train_accuracy=0.10 if model == "mlp_attn" else 0.38))
  return recs


_RECIPE_CONFIG = {"converged": {"train": {"l2": 0.001, "batch_size": 128}}}


@pytest.mark.parametrize("attn_power, verdict", [(0.3, "holds"), (-0.3, "fails")])
def test_paper_recipe_rows_come_from_fixed_budget_points_and_fail_when_the_distance_falls(attn_power, verdict):
  """The paper's recipe trains a fixed budget, so no point 'converges': its points are trained points, not
  left out, and MLP-Attn's row reads holds when its distance rises with width and fails when it falls (planted
  records through the real builder). Each reference is a measurement choice, the linearisation trained by the
  same recipe among them, and the setting names the recipe and the final train loss and accuracy."""
  src = core_rows.Source("width_sweep", "ws", _RECIPE_CONFIG, _recipe_records(attn_power), (),
                         "python -m experiments.paper_grid width_sweep")
  rows = [r for r in width_sweep_claims.ntk_distance_rows(src) if r["claim_id"] == "ntk_distance_mlp_attn"]
  assert [r["status"] for r in rows] == ["measured"] * 3
  assert [r["measurement"].split()[3] for r in rows] == ["K∞", "K₀", "linearisation"]
  assert {r["direction"] for r in rows} == {verdict} and all(r["n"] == 10 for r in rows)
  assert all(abs(r["estimate"] - attn_power) < 0.02 for r in rows)
  setting = rows[0]["setting"]
  assert "fixed-budget recipe (Adam 0.001, L2 0.001, batch 128, 500 epochs, cross-entropy, n = 1,000)" in setting
  assert "2L-ReLU 1.99 / 0.38, MLP-Attn 2.3 / 0.10" in setting and not rows[0]["note"]


def test_a_fixed_budget_point_that_stopped_short_or_diverged_is_left_out():
  recs = _recipe_records(0.3, seeds=range(2), lin=False)
  recs[0]["epochs_trained"] = 250  # a point killed before its budget was spent
  recs[2]["train_loss"] = float("nan")
  src = core_rows.Source("width_sweep", "ws", _RECIPE_CONFIG, recs, (), "")
  (row,) = [r for r in width_sweep_claims.ntk_distance_rows(src) if r["claim_id"] == "ntk_distance_relu"
            and r.get("primary", True)]
  assert row["note"] == "2 unconverged points left out"
