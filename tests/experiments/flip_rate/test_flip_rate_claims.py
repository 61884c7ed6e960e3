"""The flip-rate claim rows (experiments.flip_rate.claims) from synthetic records: the pooled ratio and its
interval, the seed rules, the calibrated ε, the ratio curve and the excess over the random-sign control."""
import math

import numpy as np
import pytest
import scipy.stats
from claim_sources import claim_rows_of, flip_records, main_row

from experiments.flip_rate import claims as flip_rate_claims


def _pooled_delta_t(a, b, ta, tb, level=0.95):
  """The delta-t interval of the pooled-rate ratio, recomputed from its stated formula
  (experiments.core.intervals.pooled_ratio_interval, no zero counts): θ = log(A/T_A) − log(B/T_B), seed-level
  z_s = a_s/A − ta_s/T_A − b_s/B + tb_s/T_B, V = n/(n − 1)·Σ z_s², floored at the binomial
  (1 − A/T_A)/A + (1 − B/T_B)/B, ends exp(θ ∓ t_{1−α/2, n−1}·√V).
  Returns (estimate, low, high, V_seed, V_binomial)."""
  a, b, ta, tb = (np.asarray(x, float) for x in (a, b, ta, tb))
  n, A, B, TA, TB = len(a), a.sum(), b.sum(), ta.sum(), tb.sum()
  theta = math.log(A / TA) - math.log(B / TB)
  z = a / A - ta / TA - b / B + tb / TB
  v_seed, v_binom = n / (n - 1) * float((z ** 2).sum()), (1 - A / TA) / A + (1 - B / TB) / B
  half = scipy.stats.t.ppf(0.5 + level / 2, n - 1) * math.sqrt(max(v_seed, v_binom))
  return (A / TA) / (B / TB), math.exp(theta - half), math.exp(theta + half), v_seed, v_binom

def test_flip_ratio_holds_and_matches_when_every_seed_gives_7x(tmp_path):
  """Every seed flips 21 of 26 for MLP-Attn and 3 of 26 for 2L-ReLU: the pooled ratio is exactly 7. The seeds
  agree exactly (every z_s = 0), so the interval is the binomial floor's, not a point: it holds above 1 with
  10 seeds, lies inside the band [4, 13.5], and narrows as seeds are added (more flips pooled)."""
  widths = {}
  for n in (10, 20, 40):
    row = main_row(claim_rows_of(tmp_path, f"fr{n}", flip_records([3] * n, [21] * n)), "flip_ratio_mnist_pgd")
    assert row["estimate"] == (21 * n / (26 * n)) / (3 * n / (26 * n)) == pytest.approx(7.0, rel=1e-15)
    est, low, high, v_seed, v_binom = _pooled_delta_t([21] * n, [3] * n, [26] * n, [26] * n)
    assert v_seed == pytest.approx(0.0, abs=1e-25) and v_binom > 0  # the floor binds: no zero-width interval
    assert row["low"] == pytest.approx(low, rel=1e-12) and row["high"] == pytest.approx(high, rel=1e-12)
    assert row["low"] < 7.0 < row["high"]
    assert math.log(row["high"] / 7.0) == pytest.approx(math.log(7.0 / row["low"]), rel=1e-9)  # symmetric in log
    assert row["direction"] == "holds" and row["magnitude"] == "matches" and row["n"] == n
    assert row["method"] == "pooled_ratio_delta_t" and row["unit"] == "seeds"
    widths[n] = math.log(row["high"] / row["low"])
  assert widths[10] > widths[20] > widths[40]

def test_flip_ratio_fails_when_relu_flips_more(tmp_path):
  row = main_row(claim_rows_of(tmp_path, "fr", flip_records([10, 12, 9, 11, 10, 13, 11, 9, 12, 10],
                                                  [2, 3, 1, 2, 4, 2, 3, 2, 1, 3])), "flip_ratio_mnist_fgsm")
  assert row["n"] == 10 and row["high"] < 1 and row["direction"] == "fails"
  # 2L-ReLU flips so much of its top set that no ratio could reach 6×: the magnitude is not read
  assert row["magnitude"] is None and "the ceiling rule" in row["note"]

def test_flip_ratio_is_inconclusive_when_seeds_disagree(tmp_path):
  row = main_row(claim_rows_of(tmp_path, "fr", flip_records([10, 0] * 5, [0, 10] * 5)), "flip_ratio_mnist_mim")
  assert row["n"] == 10 and row["low"] < 1 < row["high"] and row["direction"] == "inconclusive"
  assert "by design" not in row["reason"] and "contains" in row["reason"]  # the interval's, not the seed count's

def test_flip_ratio_with_three_seeds_is_too_few_whatever_the_effect(tmp_path):
  row = main_row(claim_rows_of(tmp_path, "fr", flip_records([1, 1, 1], [20, 21, 22])), "flip_ratio_mnist_pgd")
  assert row["low"] > 1  # the interval alone would say holds
  assert row["direction"] == "inconclusive" and row["n"] == 3
  assert row["reason"].startswith("inconclusive by design") and "3 seeds (< 10)" in row["reason"]

def test_flip_ratio_from_one_seed_is_an_estimate_without_an_interval(tmp_path):
  row = main_row(claim_rows_of(tmp_path, "fr", flip_records([3], [21])), "flip_ratio_mnist_pgd")
  assert row["n"] == 1 and row["estimate"] == pytest.approx(7.0) and (row["low"], row["high"]) == (-math.inf, math.inf)
  assert row["direction"] == "inconclusive" and row["reason"].startswith("inconclusive by design")

def test_flip_ratio_interval_is_the_pooled_count_ratio_delta_t_over_seeds(tmp_path):
  """Recomputed by hand from the stated method: the ratio of pooled rates (not a mean of per-seed ratios),
  with the delta-t interval on the log ratio; here the seeds disagree more than binomial counts would, so the
  seed-level (cluster) variance, not the binomial floor, sets the width."""
  relu, attn = [1, 4, 0, 2, 6, 3, 2, 5, 1, 3], [4, 22, 5, 20, 6, 24, 7, 21, 3, 19]
  tops = [26, 30, 26, 28, 26, 30, 27, 29, 26, 28]
  row = main_row(claim_rows_of(tmp_path, "fr", flip_records(relu, attn, n_top=tops)), "flip_ratio_mnist_pgd")
  a, b, t = np.array(attn, float), np.array(relu, float), np.array(tops, float)
  assert row["estimate"] == (a.sum() / t.sum()) / (b.sum() / t.sum())  # pooled, exactly
  assert row["estimate"] != pytest.approx(np.mean(a[b > 0] / b[b > 0]))  # not a mean of per-seed ratios
  est, low, high, v_seed, v_binom = _pooled_delta_t(a, b, t, t)
  assert v_seed > v_binom  # the seed-level variance binds here
  assert row["low"] == pytest.approx(low, rel=1e-12) and row["high"] == pytest.approx(high, rel=1e-12)
  assert row["low"] < row["estimate"] < row["high"]
  assert math.log(row["high"] / row["estimate"]) == pytest.approx(math.log(row["estimate"] / row["low"]), rel=1e-9)
  assert row["unit"] == "seeds" and row["method"] == "pooled_ratio_delta_t" and row["n"] == 10
  assert row["direction"] == "holds"

def test_unconverged_seeds_are_left_out_and_counted(tmp_path):
  """Seed 0's MLP-Attn run did not converge: seed 0 leaves the main row (its 26 flips would move the ratio off
  7) and is counted; a variant row keeps it."""
  bad = lambda seed, model: not (seed == 0 and model == "mlp_attn")  # noqa: E731
  rows = claim_rows_of(tmp_path, "fr", flip_records([3] * 11, [26] + [21] * 10, converged=bad))
  row = main_row(rows, "flip_ratio_mnist_pgd")
  assert row["n"] == 10 and row["estimate"] == pytest.approx(7.0, rel=1e-15) and "1 seeds left out" in row["note"]
  assert row["direction"] == "holds"
  kept = next(r for r in rows if r["claim_id"] == "flip_ratio_mnist_pgd" and "not required" in r["variant"])
  assert kept["n"] == 11 and kept["estimate"] == pytest.approx((26 + 210) / 33)

def test_eps_on_the_standardised_scale_is_a_variant_that_can_flip_the_verdict(tmp_path):
  """ε = 0.3 standardised is 0.3·σ = 0.092 on [0, 1] for σ = 0.3081: the nearest grid value is 0.1. The other
  grid ε are measurement choices of the main row, and so is the interpolated calibrated ε*."""
  extra = dict(channel_std=[0.3081], channel_mean=[0.1307])
  records = (flip_records([3] * 10, [21] * 10, eps=0.3, extra=extra)
             + flip_records([10] * 10, [10] * 10, eps=0.1, extra=extra)
             + flip_records([0] * 10, [0] * 10, eps=0.0, extra=extra))
  rows = claim_rows_of(tmp_path, "fr", records, claim_id="flip_ratio_mnist_pgd")
  main = main_row(rows, "flip_ratio_mnist_pgd")
  variant = next(r for r in rows if r["variant"].startswith("ε unit"))
  grid = next(r for r in rows if r["measurement"] == "ε = 0.1 on [0, 1]")
  calibrated = next(r for r in rows if r["measurement"].startswith("ε calibrated by interpolation"))
  assert main["direction"] == "holds" and "ε = 0.3 on [0, 1]" in main["setting"]
  assert main["measurement"] == "ε = 0.3 on [0, 1]" and main["primary"] and not grid["primary"]
  assert variant["variant"].startswith("ε unit") and "ε = 0.1 on [0, 1]" in variant["setting"]
  assert variant["estimate"] == 1.0 and variant["direction"] == "inconclusive" and variant["n"] == 10
  assert grid["estimate"] == 1.0 and grid["direction"] == "inconclusive"
  assert "by design" not in variant["reason"] and variant["low"] < 1 < variant["high"]  # the data's verdict
  # 2L-ReLU's PGD rate is 0 at ε = 0 and 10/26 at 0.1: 3.3 % is reached at ε* = 0.1·0.033·26/10 = 0.00858,
  # where both models' interpolated rates are equal (ratio 1 in every resample)
  assert "ε* = 0.00858" in calibrated["setting"] and not calibrated["primary"]
  assert calibrated["measurement"] == "ε calibrated by interpolation"  # ε* moves with the machine: not in the label
  assert (calibrated["estimate"], calibrated["low"], calibrated["high"]) == pytest.approx((1.0, 1.0, 1.0))
  assert [c["variant"] for c in main["protocol"]] == [variant["variant"]]

def _curve_records(relu_flips, attn_flips, eps_grid, n_top=52, attacks=("fgsm", "pgd", "mim")):
  """relu_flips / attn_flips: [seeds][ε] flip counts of n_top at each ε of eps_grid (every attack alike)."""
  out = []
  for e_i, eps in enumerate(eps_grid):
    out += flip_records([f[e_i] for f in relu_flips], [f[e_i] for f in attn_flips], eps=eps, n_top=n_top,
                         attacks=attacks)
  return out

def test_calibrated_eps_is_the_interpolated_crossing_with_a_seed_bootstrap(tmp_path):
  """The knife edge of the grid rule: 2L-ReLU's pooled PGD rate is 17/520 = 3.27 % at ε = 0.0625 (just short of
  3.3 %) and 36/520 = 6.9 % at 0.075, so the first grid ε reaching 3.3 % is 0.075. Interpolated linearly in ε:
  ε* = 0.0625 + 0.0125·(0.033 − 17/520)/((36 − 17)/520). The interval: resample the 10 seeds
  (numpy default_rng(0), 10,000 × 10 indices), recompute each resample's crossing and the ratio of both models'
  pooled curves interpolated there; 2.5 / 97.5 percentiles. Recomputed by hand."""
  grid = (0.0, 0.05, 0.0625, 0.075, 0.3)
  rng = np.random.default_rng(3)
  relu = [[0, int(v), 0, 0, 20] for v in rng.integers(0, 2, 10)]
  relu_0625 = [2, 1, 2, 2, 1, 2, 2, 2, 1, 2]   # 17 in all
  relu_075 = [4, 3, 4, 4, 3, 4, 4, 3, 3, 4]    # 36 in all
  for s in range(10):
    relu[s][1] = min(relu[s][1], relu_0625[s])
    relu[s][2], relu[s][3] = relu_0625[s], relu_075[s]
  attn = [[0, 2, 3 + s % 3, 5, 30] for s in range(10)]
  records = _curve_records(relu, attn, grid)
  assert flip_rate_claims.calibrated_eps(records, "mnist") == 0.075  # the grid rule jumps past the crossing
  cal = flip_rate_claims.interpolated_calibration(records, "mnist")
  counts_r = np.array(relu, float)
  counts_a = np.array(attn, float)
  eps = np.array(grid)

  def crossing(rate):
    i = int(np.argmax(rate >= 0.033))
    return eps[i - 1] + (0.033 - rate[i - 1]) / (rate[i] - rate[i - 1]) * (eps[i] - eps[i - 1])
  star = crossing(counts_r.sum(0) / 520)
  assert sum(relu_0625) == 17 and sum(relu_075) == 36
  assert star == pytest.approx(0.0625 + 0.0125 * (0.033 - 17 / 520) / (19 / 520))
  assert cal.eps == pytest.approx(star)
  idx = np.random.default_rng(0).integers(0, 10, size=(10_000, 10))
  stars, ratios = [], []
  for row in idx:
    r, a = counts_r[row].sum(0), counts_a[row].sum(0)
    e = crossing(r / 520) if (r / 520 >= 0.033).any() else np.inf
    stars.append(e)
    if np.isfinite(e):
      ratios.append(np.interp(e, eps, a) / np.interp(e, eps, r))
  assert (cal.eps_interval.low, cal.eps_interval.high) == pytest.approx(
      tuple(np.quantile(stars, [0.025, 0.975], method="nearest" if np.isinf(stars).any() else "linear")))
  assert cal.ratios["pgd"].estimate == pytest.approx(np.interp(star, eps, counts_a.sum(0))
                                                     / np.interp(star, eps, counts_r.sum(0)))
  assert (cal.ratios["pgd"].low, cal.ratios["pgd"].high) == pytest.approx(tuple(np.quantile(ratios, [0.025, 0.975])))
  assert cal.rates["relu", "pgd"] == pytest.approx(0.033)  # the calibration puts 2L-ReLU's PGD rate at 3.3 %
  rows = claim_rows_of(tmp_path, "fr", records)
  row = next(r for r in rows if r["claim_id"] == "flip_ratio_mnist_pgd" and "interpolation" in r["measurement"])
  assert row["estimate"] == pytest.approx(cal.ratios["pgd"].estimate) and row["low"] == pytest.approx(cal.ratios["pgd"].low)
  context = next(r for r in rows if r["claim_id"] == "flip_calibrated_eps_mnist")
  assert context["direction"] == "context" and context["estimate"] == pytest.approx(star)

def test_the_ratio_curve_has_a_row_at_every_grid_eps_and_names_the_ceiling(tmp_path):
  """One ratio row and one attack-minus-random-sign row per grid ε > 0 and attack, the ε = 0.3 one primary;
  at ε = 0.3 2L-ReLU flips 18/52 = 34.6 %, so no ratio can exceed 100/34.6 = 2.9×, below the paper's 6–9×, and
  its magnitude is not read (a ceiling at exactly the boundary is tested on ``ceiling_rule`` itself); an ε
  where 2L-ReLU flips nothing has no ratio."""
  grid = (0.0, 0.05, 0.1, 0.3)
  relu = [[0, 0, 4, 18]] * 6
  attn = [[0, 3, 8, 30]] * 6
  records = (_curve_records(relu, attn, grid)
             + _curve_records([[0, 1, 2, 10]] * 6, [[0, 1, 2, 10]] * 6, grid, attacks=("random_sign",)))
  rows = claim_rows_of(tmp_path, "fr", records)
  ratio = [r for r in rows if r["claim_id"] == "flip_ratio_mnist_pgd" and not r["variant"]]
  assert sorted(r["measurement"] for r in ratio if "interpolation" not in r["measurement"]) == [
      "ε = 0.05 on [0, 1]", "ε = 0.1 on [0, 1]", "ε = 0.3 on [0, 1]"]
  assert [r["primary"] for r in ratio].count(True) == 1
  main = main_row(rows, "flip_ratio_mnist_pgd")
  assert main["measurement"] == "ε = 0.3 on [0, 1]" and main["estimate"] == pytest.approx(30 / 18)
  assert "ceiling 100 %/rate(2L-ReLU) = 100/34.6 = 2.9×" in main["setting"] and "out of reach" in main["setting"]
  # the ceiling rule: below the paper's 6× no magnitude is read (its 'differs' would be built in); at ε = 0.1
  # (2L-ReLU 4/52 = 7.7 %, ceiling 13×) it is
  assert main["magnitude"] is None and "magnitude not read: 2L-ReLU flips 34.6 %" in main["note"]
  at_005 = next(r for r in ratio if r["measurement"] == "ε = 0.05 on [0, 1]")
  assert at_005["status"] == "not measured" and "flips none" in at_005["reason"]
  at_01 = next(r for r in ratio if r["measurement"] == "ε = 0.1 on [0, 1]")
  assert at_01["estimate"] == pytest.approx(2.0) and "= 13×" in at_01["setting"]
  assert at_01["magnitude"] is not None and "magnitude not read" not in at_01["note"]
  excess = [r for r in rows if r["claim_id"] == "flip_excess_mnist_pgd" and not r["variant"]]
  assert {r["measurement"] for r in excess} >= {"ε = 0.05 on [0, 1]", "ε = 0.1 on [0, 1]", "ε = 0.3 on [0, 1]"}
  assert main_row(rows, "flip_excess_mnist_pgd")["estimate"] == pytest.approx((30 - 10 - (18 - 10)) / 52)

def test_excess_over_random_sign_and_the_floors_in_the_note(tmp_path):
  """Attack minus random sign per seed: MLP-Attn 21 − 3 flips, 2L-ReLU 3 − 2 (of 26); the difference of
  excesses is (18 − 1)/26 = 0.654 at every seed, so it holds (10 seeds; the sign-flip interval of equal
  differences is that value). The ratio row names both floors."""
  records = (flip_records([3] * 10, [21] * 10) + flip_records([2] * 10, [3] * 10, attacks=("random_sign",))
             + flip_records([1] * 10, [5] * 10, attacks=("seed_floor",), eps=0.0))
  rows = claim_rows_of(tmp_path, "fr", records)
  excess = main_row(rows, "flip_excess_mnist_pgd")
  assert excess["estimate"] == pytest.approx(17 / 26) and excess["direction"] == "holds" and excess["n"] == 10
  assert (excess["low"], excess["high"]) == pytest.approx((17 / 26, 17 / 26)) and excess["method"] == "sign_flip_exact"
  ratio = main_row(rows, "flip_ratio_mnist_pgd")
  assert "random sign at this ε: 2L-ReLU 7.7 %, MLP-Attn 11.5 %" in ratio["note"]
  assert "seed floor: 2L-ReLU 3.8 %, MLP-Attn 19.2 %" in ratio["note"]

def test_grid_eps_choices_are_not_decided_by_rounding():
  """The nearest grid ε: a target midway between two grid values goes to the smaller (0.55 between 0.5 and
  0.6, where 0.6 − 0.55 < 0.55 − 0.5 in float64), and a grid value exactly 25 % away is accepted on either
  side (|0.375 − 0.3| = 0.07500000000000001 > 0.25·0.3 in float64); clearly farther is not."""
  grid = lambda *eps: [dict(eps=e) for e in eps]  # noqa: E731
  assert flip_rate_claims._nearest_eps(grid(0.5, 0.6), 0.55) == 0.5
  assert flip_rate_claims._nearest_eps(grid(0.6, 0.5), 0.55) == 0.5
  nearest = flip_rate_claims._nearest_eps
  assert nearest(grid(0.375), 0.3) == 0.375 and nearest(grid(0.225), 0.3) == 0.225
  assert nearest(grid(0.38), 0.3) is None and nearest(grid(0.22), 0.3) is None
  assert flip_rate_claims._nearest_eps(grid(0.0, 0.3), 0.3) == 0.3 and flip_rate_claims._nearest_eps([], 0.3) is None

@pytest.mark.parametrize("flipped, top, reaches", [(33, 1000, True), (66, 2000, True), (3300, 100_000, True),
                                                   (32, 1000, False), (34, 1000, True)])
def test_calibrated_eps_counts_a_rate_of_exactly_the_paper_value_as_reaching_it(flipped, top, reaches):
  """The paper's 2L-ReLU PGD rate on MNIST is 3.3 %: a pooled rate of exactly 3.3 % reaches it (whatever the
  last bits of k/n and 3.3/100), one count fewer does not and the next grid ε is taken."""
  rec = lambda eps, k, n: dict(task="mnist", model="relu", attack="pgd", eps=eps, n_flipped=k, n_top=n,  # noqa: E731
                               converged=True)
  records = [rec(0.1, flipped, top), rec(0.2, top, top)]
  assert flip_rate_claims.calibrated_eps(records, "mnist") == (0.1 if reaches else 0.2)

@pytest.mark.parametrize("loss, kept", [(0.05, True), (float(np.float32(0.05)), True), (0.05 * (1 + 4e-7), True),
                                        (0.0501, False), (0.051, False)])
def test_a_run_recorded_unconverged_a_float32_rounding_above_its_target_counts_as_converged(tmp_path, loss, kept):
  """The L-BFGS loop stops on float32(target) with the in-loop loss; the record's loss is re-evaluated on the
  host: a point recorded converged = false with a final loss on the target within float32 rounding reached
  it (kept), one clearly above it did not (left out and counted)."""
  def fields(seed, model):
    at_edge = seed == 0 and model == "mlp_attn"
    return dict(converged=not at_edge, train_loss=loss if at_edge else 0.04, loss_target=0.05)
  records = flip_records([3] * 6, [21] * 6)
  for r in records:
    r.update(fields(r["seed"], r["model"]))
  row = main_row(claim_rows_of(tmp_path, "fr", records), "flip_ratio_mnist_pgd")
  assert row["n"] == (6 if kept else 5) and ("1 seeds left out" in row["note"]) is (not kept)
  from experiments.core import tolerance
  assert tolerance.reached_target(dict(converged=False, train_loss=1e-30, loss_target=0.0)) is False  # target 0
  assert tolerance.reached_target(dict(converged=False)) is False and tolerance.reached_target({}) is True


def _paper_grid_records(mult_trained, mult_kinf, *, seeds=range(10), n_top=100):
  """Planted records of the paper-recipe flip-rate grid: 2L-ReLU flips a rate rising linearly in ε (3.3 % at
  ε = 0.1: the calibrated ε*), MLP-Attn ``mult`` times it under each kernel; the sign-randomised attack flips a
  third of the attack's rate for both models. Rates are realised as whole counts of ``n_top``."""
  rng = np.random.default_rng(0)
  recs = []
  for seed in seeds:
    for model in ("relu", "mlp_attn"):
      for attack in ("fgsm", "pgd", "mim", "random_sign", "interior_sign"):
        for eps in (0.0, 0.05, 0.1, 0.2, 0.3):
          base = 0.33 * eps * (1 + 0.05 * rng.normal())
          rates = {k: min(1.0, base * (m if model == "mlp_attn" else 1.0))
                   for k, m in (("", mult_trained), ("infinite", mult_kinf))}
          r = dict(task="mnist", model=model, width=256, seed=seed, adversarial_training=False, attack=attack,
                   eps=eps, converged=False, loss_target=0.0, epochs_trained=500, max_epochs=500, train_loss=0.1,
                   n_train=1000)
          for k, rate in rates.items():
            sfx = f"_{k}" if k else ""
            n = int(round(rate * n_top))
            r.update({f"n_flipped{sfx}": n, f"n_top{sfx}": n_top, f"flip_rate{sfx}": n / n_top})
            if attack in ("fgsm", "pgd", "mim") and eps > 0:
              c = int(round(rate * n_top / 3))
              r.update({f"control_n_flipped{sfx}": c, f"control_n_top{sfx}": n_top, f"control_flip_rate{sfx}": c / n_top})
          if attack in ("fgsm", "pgd", "mim") and eps > 0:
            r.update(delta_l2=5 * eps, control_delta_l2=4.9 * eps)
          recs.append(r)
  return recs


def _paper_rows(records):
  from experiments.core.rows import Source
  from experiments.flip_rate import paper_rows
  src = Source("flip_rate", "fr", {}, records, ("data.n_train=1000",), "python -m experiments.paper_grid flip_rate")
  assert paper_rows.has_paper_fields(records)
  return flip_rate_claims.claim_rows([src], "root", include_not_run=False)


@pytest.mark.parametrize("mult_kinf, kinf_verdict", [(5.0, "holds"), (0.5, "fails")])
def test_paper_grid_ratio_is_read_at_the_calibrated_eps_for_both_kernels(mult_kinf, kinf_verdict):
  """The primary row is the calibrated ε* under the trained kernel (MLP-Attn 5×: holds); the K∞ row, a
  measurement choice of the same claim, holds when K∞'s ratio is 5× and fails when it is ½× (planted records
  through the real builders); ε = 0.3 is a measurement choice, never primary."""
  rows = [r for r in _paper_rows(_paper_grid_records(5.0, mult_kinf)) if r["claim_id"] == "flip_ratio_mnist_pgd"]
  (primary,) = [r for r in rows if r["primary"]]
  assert primary["measurement"].startswith("ε calibrated") and "empirical NTK" in primary["measurement"]
  assert primary["direction"] == "holds" and 4 < primary["estimate"] < 6
  (kinf,) = [r for r in rows if r["measurement"].startswith("ε calibrated") and "K∞" in r["measurement"]]
  assert kinf["direction"] == kinf_verdict and not kinf["primary"]
  assert any(r["measurement"].startswith("ε = 0.3") and not r["primary"] for r in rows)


@pytest.mark.parametrize("control_share, verdict", [(1 / 3, "holds"), (1.0, "inconclusive")])
def test_paper_grid_excess_is_over_the_sign_randomised_attack(control_share, verdict):
  """MLP-Attn's excess over the sign-randomised attack is larger when the control flips a third of the
  attack's rate (holds), and vanishes when the control flips as much as the attack (no effect of the attack's
  direction: the row can fail to hold)."""
  recs = _paper_grid_records(5.0, 5.0)
  for r in recs:
    for sfx in ("", "_infinite"):
      if f"control_n_flipped{sfx}" in r:
        r[f"control_n_flipped{sfx}"] = int(round(r[f"n_flipped{sfx}"] * control_share))
  rows = [r for r in _paper_rows(recs) if r["claim_id"] == "flip_excess_mnist_pgd"]
  (primary,) = [r for r in rows if r["primary"]]
  assert "sign-randomised" in primary["claim"] and primary["direction"] == verdict
  assert "mean ‖δ‖₂ at the grid ε next above ε*: attack 1, sign-randomised 0.98" in primary["setting"]


@pytest.mark.parametrize("flips, read", [(4, False), (5, True)])
def test_the_minimum_flips_rule_at_its_boundary(flips, read):
  """A ratio whose denominator rests on MIN_FLIPS − 1 = 4 2L-ReLU flips is not read; on exactly MIN_FLIPS = 5 it
  is (the rule is '≥ 5 flips', so a '>' in its place shows here)."""
  from experiments.core import verdicts
  assert verdicts.MIN_FLIPS == 5
  row = dict(status="measured", direction="holds", magnitude="differs", reason="the interval lies above 1")
  out = flip_rate_claims.few_flips(row, flips)
  assert (out["direction"] == "holds") is read
  assert read or (out["magnitude"] == "undetermined" and "rests on 4 2L-ReLU flips (< 5)" in out["reason"])


def test_the_ceiling_rule_reads_no_magnitude_only_strictly_below_the_papers_range():
  """Catches ``<=`` for ``<``, a ceiling from the wrong model, or a direction changed: 2L-ReLU at 1/6 has the
  ceiling 6× exactly (the paper's lower end, reachable: magnitude kept); just above 1/6 it is not read; the
  direction and an unmeasured row are untouched."""
  from experiments.flip_rate.claims import ceiling_rule
  row = dict(status="measured", direction="holds", magnitude="differs", note="")
  assert ceiling_rule(row, 1 / 6) == row
  above = ceiling_rule(row, 1 / 6 + 1e-9)
  assert above["magnitude"] is None and above["direction"] == "holds" and "16.7 %" in above["note"]
  assert ceiling_rule(dict(row, status="not measured"), 0.5)["magnitude"] == "differs"
  assert ceiling_rule(row, 0.0) == row   # 2L-ReLU flips nothing: no ceiling
