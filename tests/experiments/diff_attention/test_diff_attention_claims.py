"""Differential-attention claim rows on constructed records (``experiments.diff_attention.claims``): each
verdict can come out either way, models below the accuracy target are left out, and the intervals are over
training seeds (images averaged within a seed first), with fewer than 10 seeds inconclusive by design."""
import math

import numpy as np
import pytest
from claim_sources import claim_rows_of, main_row

from attention import da_theory
from experiments.claims import job as claims
from experiments.core import rows as core_rows
from experiments.core.rows import Source
from experiments.diff_attention import claims as dc


def _train(model, depth, lam, seed, accuracy=0.9):
  name = f"{model}_d{depth}" + ("" if model == "vit" else f"_lam{lam}") + (f"_s{seed}" if seed else "")
  return dict(kind="train", model=model, depth=depth, lambda_init=lam, seed_index=seed, name=name,
              dataset="fashion_mnist", clean_accuracy=accuracy, meets_target=accuracy >= 0.85)


def _attack(train, attack, eps_255, successes, counted=400):
  return dict(kind="attack", model=train["model"], depth=train["depth"], lambda_init=train["lambda_init"],
              seed_index=train["seed_index"], name=train["name"], attack=attack, eps=eps_255 / 255,
              eps_255=eps_255, asr=successes / counted, n_success=successes, n_counted=counted)


JITTER = (0.03, -0.02, 0.01, -0.04, 0.02, 0.0, -0.01, 0.04, -0.03, 0.015)  # seed-to-seed spread of an ASR


def _asr_records(asr_diff: float, asr_vit: float, seeds=10, vit_accuracy=0.9):
  """Depth-1 pairs attacked at 1/255, each seed's ASRs moved by its own jitter (the DiffViT's by another
  seed's), so that the per-seed differences spread by about 0.04 around asr_diff − asr_vit."""
  recs = []
  for s in range(seeds):
    vit, diff = _train("vit", 1, "-", s, vit_accuracy), _train("diffvit", 1, "0.8", s)
    recs += [vit, diff]
    a_vit, a_diff = asr_vit + JITTER[s % 10], asr_diff + JITTER[(s + 3) % 10]
    for attack in ("pgd", "apgd"):
      recs += [_attack(vit, attack, 1.0, round(a_vit * 400)), _attack(diff, attack, 1.0, round(a_diff * 400))]
  return recs


@pytest.mark.parametrize("asr_diff, asr_vit, expected", [(0.7, 0.4, "holds"), (0.3, 0.6, "fails"),
                                                          (0.5, 0.5, "inconclusive")])
def test_asr_row_verdict_goes_either_way(asr_diff, asr_vit, expected):
  rows = dc.asr_rows(Source("diff_attention", "wd", {}, _asr_records(asr_diff, asr_vit)))
  assert [r["claim_id"] for r in rows] == ["da_asr_pgd", "da_asr_apgd"]
  for row in rows:
    assert row["direction"] == expected
    assert row["estimate"] == pytest.approx(asr_diff - asr_vit, abs=1e-2)
    assert row["n"] == 10 and row["unit"] == "seeds"


def test_asr_interval_is_the_sign_flip_interval_of_the_per_seed_differences():
  """Independent computation: the per-seed ASR differences by hand from the counts, and the inverted
  sign-flip interval of those 10 values; the images of a seed enter only through its ASR."""
  from experiments.core import intervals
  recs = _asr_records(0.55, 0.45)
  row = dc.asr_rows(Source("diff_attention", "wd", {}, recs))[0]
  by = {(r["model"], r["seed_index"]): r["n_success"] / r["n_counted"] for r in recs
        if r.get("kind") == "attack" and r["attack"] == "pgd"}
  d = np.array([by["diffvit", s] - by["vit", s] for s in range(10)])
  expected = intervals.sign_flip_interval(d, level=0.95, unit="seeds")
  assert (row["estimate"], row["low"], row["high"]) == pytest.approx((d.mean(), expected.low, expected.high),
                                                                     abs=1e-12)


def test_three_seeds_are_inconclusive_by_design_however_large_the_effect():
  for claim_row in dc.asr_rows(Source("diff_attention", "wd", {}, _asr_records(0.9, 0.1, seeds=3))):
    assert claim_row["direction"] == "inconclusive" and "by design" in claim_row["reason"]


def test_models_below_the_accuracy_target_are_left_out():
  recs = _asr_records(0.7, 0.4, vit_accuracy=0.5)  # every ViT misses the target: no pair is left
  row = dc.asr_rows(Source("diff_attention", "wd", {}, recs))[0]
  assert row["status"] == "not measured"


def test_lambda_peak_row_both_ways():
  def records(asr):
    recs = []
    for s in range(10):
      for k, (lam, a) in enumerate(asr.items()):
        t = _train("diffvit", 1, lam, s)
        recs += [t, _attack(t, "pgd", 1.0, round((a + JITTER[(s + k) % 10]) * 400))]
    return recs
  peak = dc.lambda_peak_rows(Source("diff_attention", "wd", {}, records({"0.5": 0.4, "0.8": 0.85, "0.95": 0.42})))[0]
  assert peak["direction"] == "holds" and peak["magnitude"] == "matches"
  flat = dc.lambda_peak_rows(Source("diff_attention", "wd", {}, records({"0.5": 0.7, "0.8": 0.5, "0.95": 0.6})))[0]
  assert flat["direction"] == "fails"


def _alignment_records(negative_share_by_seed):
  """Depth-1 DiffViT alignment records: per seed, 20 images × 2 heads with the given share of cos θ < 0."""
  recs = []
  for s, share in enumerate(negative_share_by_seed):
    t = _train("diffvit", 1, "0.8", s)
    k = round(share * 40)
    cos = np.where(np.arange(40) < k, -0.2, 0.3).reshape(20, 2)
    recs += [t, dict(kind="alignment", model="diffvit", depth=1, lambda_init="0.8", seed_index=s, name=t["name"],
                     layer=1, cos_theta=cos.tolist())]
  return recs


@pytest.mark.parametrize("share, expected", [(0.0, "fails"), (0.35, "fails"), (0.5, "inconclusive"),
                                             (0.8, "holds")])
def test_negative_alignment_at_depth_one_is_tested_against_one_half(share, expected):
  """Under no alignment either way the share of cos θ < 0 is about ½: "occurs" holds only above ½. A share of
  0.35 (above 0, which a test against 0 read as holds) fails."""
  shares = [share + (JITTER[s] / 2 if 0 < share else 0.0) for s in range(10)]
  row = dc.alignment_rows(Source("diff_attention", "wd", {}, _alignment_records(shares)))[0]
  assert row["claim_id"] == "da_negative_alignment_d1" and row["direction"] == expected, row.get("reason")
  assert row["estimate"] == pytest.approx(np.mean([round(v * 40) / 40 for v in shares]), abs=1e-12)


def _corollary1_records(asr_by_depth, r1=2.0, alpha_bar=0.25, seeds=10):
  """ASR records per depth {depth: (ASR DiffViT, ASR ViT)} and ``seeds`` depth-8 pairs (the same images' L̂ on
  every seed) whose token L̂ ratios are r1·alpha_bar^(l−1) per layer, so that D* = 1 + ln r1 / ln(1/alpha_bar)
  (1.5 for the defaults) on every seed and every bootstrap replicate."""
  recs = []
  for depth, (a_diff, a_vit) in asr_by_depth.items():
    vit, diff = _train("vit", depth, "-", 0), _train("diffvit", depth, "0.8", 0)
    recs += [vit, diff, _attack(vit, "pgd", 1.0, int(a_vit * 400)), _attack(diff, "pgd", 1.0, int(a_diff * 400))]
  rng = np.random.default_rng(1)
  base = rng.uniform(1.0, 2.0, 50)
  for seed in range(seeds):
    for layer in range(1, 9):
      for t, scale in ((_train("vit", 8, "-", seed), 1.0),
                       (_train("diffvit", 8, "0.8", seed), r1 * alpha_bar ** (layer - 1))):
        recs.append(dict(kind="lipschitz", model=t["model"], depth=8, lambda_init=t["lambda_init"], seed_index=seed,
                         name=t["name"], layer=layer, eps=1 / 255, eps_255=1.0, values=(base * scale).tolist()))
  return recs


def _corollary1(recs):
  rows = dc._corollary1_rows(dc._Records(recs), "0.8", Source("diff_attention", "wd", {}, []))
  assert rows[0]["claim_id"] == "da_corollary1_premise" and rows[1]["primary"]
  return rows[1]


EARLY = {1: (0.6, 0.4), 2: (0.3, 0.5), 8: (0.2, 0.5)}   # the ASR sign changes between depths 1 and 2
LATE = {1: (0.6, 0.4), 4: (0.6, 0.5), 8: (0.3, 0.5)}    # between 4 and 8
MIDDLE = {1: (0.6, 0.4), 2: (0.6, 0.5), 4: (0.3, 0.5), 8: (0.2, 0.5)}  # between 2 and 4


def test_corollary1_row_against_a_constructed_crossover():
  """Token L̂ ratios 2·0.25^(l−1) give D* = 1.5, well inside the window [1, 2] of an ASR sign change between
  depths 1 and 2 (holds) and well outside [4, 8] and [2, 4] (fails, D* below them); ratios 2·0.5^(l−1)
  give D* = 3, above [1, 2] (fails)."""
  early = _corollary1(_corollary1_records(EARLY))
  assert early["estimate"] == pytest.approx(1.5) and early["direction"] == "holds"
  assert "meets the measured window [1, 2]" in early["reason"]
  for window in (LATE, MIDDLE):
    late = _corollary1(_corollary1_records(window))
    assert late["direction"] == "fails" and "(below it)" in late["reason"]
  above = _corollary1(_corollary1_records(EARLY, r1=4.0, alpha_bar=0.5))
  assert above["estimate"] == pytest.approx(3.0)
  assert above["direction"] == "fails" and "misses the measured window [1, 2] (above it)" in above["reason"]


@pytest.mark.parametrize("asr, edge", [(EARLY, "upper"), (MIDDLE, "lower")])
def test_corollary1_decision_is_the_same_a_few_ulps_either_side_of_a_window_edge(monkeypatch, asr, edge):
  """D* = 2 sits on the upper edge of [1, 2] and on the lower edge of [2, 4]: with D* moved 0, ±1, ±2 and
  ±4 ulps (as another CPU's rounding did: 2.000000000000001) the row holds every time, and the reason never
  prints D* as a number that contradicts the verdict."""
  exact = da_theory.crossover_depth_estimate
  for k in (-4, -2, -1, 0, 1, 2, 4):
    def moved(r1, alpha_bar, k=k):
      d = exact(r1, alpha_bar)
      for _ in range(abs(k)):
        d = np.nextafter(d, np.inf if k > 0 else -np.inf)
      return float(d)
    monkeypatch.setattr(dc.da_theory, "crossover_depth_estimate", moved)
    row = _corollary1(_corollary1_records(asr, r1=2.0, alpha_bar=0.5))
    assert row["estimate"] == pytest.approx(2.0, abs=1e-14)
    assert row["direction"] == "holds", (k, row["reason"])
    assert "misses" not in row["reason"]
  # Clearly off the edge the decision is taken: D* = 2.01 is above [1, 2], 1.99 below [2, 4].
  monkeypatch.setattr(dc.da_theory, "crossover_depth_estimate",
                      lambda r1, a: exact(r1, a) + (0.01 if edge == "upper" else -0.01))
  row = _corollary1(_corollary1_records(asr, r1=2.0, alpha_bar=0.5))
  assert row["direction"] == "fails" and ("2.01" if edge == "upper" else "1.99") in row["reason"]


def test_d_star_tolerance_follows_the_fit_condition():
  """The tolerance grows as ᾱ → 1 (D* = 1 + ln r₁ / ln(1/ᾱ) divides by a small number) and with |D* − 1|."""
  from attention.da_theory import NoiseCancellationFit
  y = np.log(2.0 * 0.5 ** np.arange(8))
  well = dc.d_star_tolerance(NoiseCancellationFit(2.0, 0.5, 8), y, 2.0)
  assert 1e-15 < well < 1e-12
  ill = dc.d_star_tolerance(NoiseCancellationFit(2.0, 1 - 1e-6, 8), y, 1 + math.log(2.0) / 1e-6)
  assert ill > 1e3 * well
  assert dc.d_star_tolerance(NoiseCancellationFit(2.0, 1.2, 8), y, math.inf) < 1e-14  # ∞ compares exactly


def test_asr_sign_is_zero_within_rounding():
  assert dc.asr_sign(0.0) == 0 and dc.asr_sign((0.1 + 0.2 - 0.3) / 3) == 0 and dc.asr_sign(-1e-17) == 0
  assert dc.asr_sign(1 / 400) == 1 and dc.asr_sign(-1 / 160000) == -1


def test_corollary1_with_alpha_bar_within_rounding_of_one_is_inconclusive():
  """ᾱ = 1 − 1e-14: D* ≈ 7e13 is known only to far more than a depth (or comes out ∞): no decision."""
  row = _corollary1(_corollary1_records(EARLY, r1=2.0, alpha_bar=1 - 1e-14))
  assert row["direction"] == "inconclusive", row["reason"]


def _curve_records(vit_asr: dict, diff_asr: dict, seeds=10, counted=400):
  """Depth-1 ViT / DiffViT (λ_init 0.8) attacked with PGD and APGD at every ε of the dicts (ε in 1/255 → ASR)."""
  recs = []
  for s in range(seeds):
    vit, diff = _train("vit", 1, "-", s), _train("diffvit", 1, "0.8", s)
    recs += [vit, diff]
    for attack in ("pgd", "apgd"):
      for e, a in vit_asr.items():
        recs.append(_attack(vit, attack, e, round(a * counted), counted))
      for e, a in diff_asr.items():
        recs.append(_attack(diff, attack, e, round(a * counted), counted))
  return recs


def test_primary_eps_is_where_the_depth1_vit_reaches_half_interpolated_in_log_eps():
  recs = _curve_records({1.0: 0.1, 2.0: 0.3, 4.0: 0.7}, {1.0: 0.05, 2.0: 0.35, 4.0: 0.8})
  point = dc.primary_eps(dc._Records(recs))
  # 0.3 + w·(0.7 − 0.3) = 0.5 → w = ½, and ε* = exp(ln 2 + ½ ln 2) = 2√2 (by hand).
  assert point.eps_255 == pytest.approx(2 * math.sqrt(2), rel=1e-12)
  assert point.weights == ((2.0, pytest.approx(0.5)), (4.0, pytest.approx(0.5)))
  rows = [r for r in dc.asr_rows(Source("diff_attention", "wd", {}, recs)) if r["claim_id"] == "da_asr_pgd"]
  primary, secondary = rows
  assert primary["primary"] and not secondary["primary"] and "ε* = 2.83/255" in primary["measurement"]
  # At ε*: DiffViT ½(0.35 + 0.8) = 0.575 against ViT 0.5 → +0.075; at 1/255: 0.05 − 0.1 = −0.05.
  assert primary["estimate"] == pytest.approx(0.075, abs=1e-9) and primary["direction"] == "holds"
  assert secondary["estimate"] == pytest.approx(-0.05, abs=1e-9) and secondary["direction"] == "fails"
  assert secondary["measurement"].startswith("ε = 1/255")


def test_primary_eps_on_a_grid_value_and_when_the_curve_never_reaches_half():
  on_grid = dc.primary_eps(dc._Records(_curve_records({1.0: 0.1, 2.0: 0.5, 4.0: 0.7}, {1.0: 0.1})))
  assert on_grid.eps_255 == 2.0 and on_grid.weights == ((2.0, 1.0),)
  low = _curve_records({1.0: 0.1, 2.0: 0.2, 4.0: 0.4}, {1.0: 0.2, 2.0: 0.3, 4.0: 0.5})
  assert dc.primary_eps(dc._Records(low)) is None
  rows = [r for r in dc.asr_rows(Source("diff_attention", "wd", {}, low)) if r["claim_id"] == "da_asr_pgd"]
  assert len(rows) == 1 and rows[0]["primary"] and rows[0]["measurement"].startswith("ε = 1/255")
  # Above 0.5 already at the smallest ε: ε* lies below the grid and is not extrapolated.
  assert dc.primary_eps(dc._Records(_curve_records({1.0: 0.6, 2.0: 0.7}, {1.0: 0.1}))) is None
  # The first crossing counts: a curve that dips back below 0.5 later does not move ε*.
  wavy = dc.primary_eps(dc._Records(_curve_records({1.0: 0.1, 2.0: 0.6, 4.0: 0.4, 8.0: 0.9}, {1.0: 0.1})))
  assert 1.0 < wavy.eps_255 < 2.0


def test_lambda_peak_and_crossover_are_read_at_the_primary_eps():
  recs = []
  for s in range(10):
    vit = _train("vit", 1, "-", s)
    recs += [vit] + [_attack(vit, "pgd", e, round(a * 400)) for e, a in {1.0: 0.1, 2.0: 0.3, 4.0: 0.7}.items()]
    for lam, curve in {"0.5": {1.0: 0.2, 2.0: 0.3, 4.0: 0.6}, "0.8": {1.0: 0.1, 2.0: 0.4, 4.0: 0.8},
                       "0.95": {1.0: 0.15, 2.0: 0.3, 4.0: 0.5}}.items():
      t = _train("diffvit", 1, lam, s)
      recs += [t] + [_attack(t, "pgd", e, round(a * 400)) for e, a in curve.items()]
  rows = dc.lambda_peak_rows(Source("diff_attention", "wd", {}, recs))
  primary = next(r for r in rows if r["primary"])
  # At ε* (w = ½ between 2 and 4): 0.5 → 0.45, 0.8 → 0.6, 0.95 → 0.4: the peak by 0.15; at 1/255 0.5 is highest.
  assert primary["estimate"] == pytest.approx(0.15, abs=1e-9) and primary["direction"] == "holds"
  secondary = next(r for r in rows if not r["primary"])
  assert secondary["estimate"] == pytest.approx(-0.1, abs=1e-9) and secondary["direction"] == "fails"


def test_primary_eps_with_an_asymmetric_bracket_and_the_weighted_per_image_values():
  """ViT 0.3 → 0.9 between 2/255 and 4/255: w = (0.5 − 0.3)/(0.9 − 0.3) = 1/3 and ε* = 2·2^(1/3) (swapped
  weights or w = (0.9 − 0.5)/0.6 would give 2·2^(2/3)). DiffViT 0.2 → 0.8 there: (2/3)·0.2 + (1/3)·0.8 = 0.4."""
  recs = _curve_records({1.0: 0.1, 2.0: 0.3, 4.0: 0.9}, {1.0: 0.1, 2.0: 0.2, 4.0: 0.8})
  point = dc.primary_eps(dc._Records(recs))
  assert point.eps_255 == pytest.approx(2 * 2 ** (1 / 3), rel=1e-12)
  assert point.weights[0][1] == pytest.approx(2 / 3) and point.weights[1][1] == pytest.approx(1 / 3)
  row = next(r for r in dc.asr_rows(Source("diff_attention", "wd", {}, recs)) if r["primary"])
  assert row["estimate"] == pytest.approx(0.4 - 0.5, abs=1e-9) and row["direction"] == "fails"
  # Per image, the two grid values of one image are added with the weights (comonotone: the images broken at
  # 2/255 are among those broken at 4/255), so the values are 1, 1/3 and 0, never resampled apart.
  d = [r for r in recs if r.get("kind") == "attack" and r["model"] == "diffvit" and r["attack"] == "pgd"
       and r["seed_index"] == 0 and r["eps_255"] in (2.0, 4.0)]
  values = dc.weighted_indicators(sorted(d, key=lambda r: r["eps_255"]), point)
  assert values.mean() == pytest.approx(0.4) and sorted(set(np.round(values, 12))) == [0.0, round(1 / 3, 12), 1.0]
  assert (values == 1.0).sum() == 80 and (values > 0).sum() == 320   # 0.2·400 broken at both, 0.8·400 at 4/255


def test_corollary1_pools_seeds_and_lists_d_star_per_seed():
  """Three depth-8 seeds with r₁ = 2 and ᾱ = 0.25, 0.5, 0.125 per seed (D* = 1.5, 2, 4/3 alone); the pooled D*
  comes from the mean ratios over all seeds' images, the interval is over seeds (n = 3: inconclusive by design,
  though D* meets the window)."""
  recs = _corollary1_records(EARLY, seeds=1)
  rng = np.random.default_rng(2)
  for seed, alpha_bar in ((1, 0.5), (2, 0.125)):
    base = rng.uniform(1.0, 2.0, 50)
    for layer in range(1, 9):
      for model, lam, scale in (("vit", "-", 1.0), ("diffvit", "0.8", 2.0 * alpha_bar ** (layer - 1))):
        t = _train(model, 8, lam, seed)
        recs.append(dict(kind="lipschitz", model=model, depth=8, lambda_init=lam, seed_index=seed, name=t["name"],
                         layer=layer, eps=1 / 255, eps_255=1.0, values=(base * scale).tolist()))
  row = _corollary1(recs)
  assert row["n"] == 3 and row["unit"] == dc.UNIT and row["method"] == dc.METHOD
  assert "D* per seed 0: 1.5, 1: 2, 2: 1.33" in row["setting"]
  # The pooled estimate by hand: per layer, the mean DiffViT L̂ over all 150 (seed, image) pairs over the ViT's.
  lip = lambda model, layer: np.concatenate([r["values"] for r in recs if r.get("kind") == "lipschitz"  # noqa: E731
                                             and r["model"] == model and r["layer"] == layer])
  ratio = np.array([lip("diffvit", l).mean() / lip("vit", l).mean() for l in range(1, 9)])
  fit = da_theory.noise_cancellation_fit(ratio)
  assert row["estimate"] == pytest.approx(da_theory.crossover_depth_estimate(fit.r1, fit.alpha_bar), rel=1e-12)
  assert row["low"] <= row["estimate"] <= row["high"]
  assert row["direction"] == "inconclusive" and "by design" in row["reason"]
  one = _corollary1(_corollary1_records(EARLY, seeds=1))
  assert one["n"] == 1 and one["unit"] == "seeds" and (one["low"], one["high"]) == (-np.inf, np.inf)


# ----------------------------------------------------------------------------- through the claims job


def _da_records(depths=(1, 2, 4), asr=None, lam_asr=None, seeds=10):
  """Differential-attention records, the same on each of ``seeds`` training seeds: PGD attack records at
  ε = 1/255 and logits Lipschitz values."""
  return [dict(r, seed_index=s) for s in range(seeds) for r in _da_seed_records(depths, asr, lam_asr)]


def _da_seed_records(depths, asr, lam_asr):
  out = []
  rng = np.random.default_rng(2)
  vit_values = rng.uniform(1, 2, size=40)
  for depth in depths:
    for model, lam in (("vit", "-"), ("diffvit", "0.8")):
      out.append(dict(kind="train", model=model, depth=depth, lambda_init=lam, attack="-", eps=0.0, layer=-1))
      n_success = (asr or {}).get((model, depth), 100)
      out.append(dict(kind="attack", model=model, depth=depth, lambda_init=lam, attack="pgd", eps=1 / 255,
                      eps_255=1.0, layer=-1, n_success=n_success, n_counted=200, asr=n_success / 200))
      values = vit_values + (0.5 if model == "diffvit" else 0.0)
      out.append(dict(kind="lipschitz", model=model, depth=depth, lambda_init=lam, attack="-", eps=1 / 255,
                      eps_255=1.0, layer=-1, values=list(values), mean=float(values.mean())))
  for lam, k in (lam_asr or {}).items():
    out.append(dict(kind="attack", model="diffvit", depth=1, lambda_init=lam, attack="pgd", eps=1 / 255,
                    eps_255=1.0, layer=-1, n_success=k, n_counted=200, asr=k / 200))
  return out

def test_diff_attention_rows(tmp_path):
  asr = {("vit", 4): 150, ("diffvit", 4): 60}
  rows = claim_rows_of(tmp_path, "da", _da_records(asr=asr, lam_asr={"0.5": 80, "0.95": 82}))
  lip = main_row(rows, "da_lipschitz")  # 10 identical seeds: the interval over seeds is the point
  assert (lip["estimate"], lip["low"], lip["high"]) == pytest.approx((0.5, 0.5, 0.5))
  assert lip["n"] == 10 and lip["direction"] == "holds"
  peak = main_row(rows, "lambda_peak")  # ASR(0.8) = 100/200 vs 82/200
  assert peak["estimate"] == pytest.approx((100 - 82) / 200) and peak["low"] <= peak["estimate"] <= peak["high"]
  cross = main_row(rows, "depth_crossover")
  assert cross["high"] < 0  # DiffViT is far below ViT at depth 4 ...
  assert cross["direction"] == "inconclusive" and "depth 4 < 8" in cross["reason"]  # ... but 8 is not measured

def test_depth_crossover_fails_at_depth_8_when_diffvit_stays_above(tmp_path):
  rows = claim_rows_of(tmp_path, "da", _da_records(depths=(1, 8), asr={("vit", 8): 40, ("diffvit", 8): 160}))
  cross = main_row(rows, "depth_crossover")
  assert cross["low"] > 0 and cross["direction"] == "fails"

def test_depth_crossover_holds_at_depth_8_only_when_diffvit_falls_below_there(tmp_path):
  """Planted records through the real builder, depths 1, 4 and 8 (the confirmatory grids' depths): DiffViT above
  ViT at depth 1 and below at 8 holds (the row reads depth 8, the paper's); DiffViT below at depth 4 but equal at
  8 is not a crossover by depth 8 (inconclusive); and a grid whose deepest depth is 4 cannot hold however far
  below DiffViT is there."""
  below = {("vit", 1): 80, ("diffvit", 1): 120, ("vit", 4): 100, ("diffvit", 4): 100, ("vit", 8): 150,
           ("diffvit", 8): 60}
  cross = main_row(claim_rows_of(tmp_path / "a", "da", _da_records(depths=(1, 4, 8), asr=below)), "depth_crossover")
  assert cross["high"] < 0 and cross["direction"] == "holds" and "interval at depth 8" in cross["setting"]
  level = {**below, ("vit", 4): 150, ("diffvit", 4): 60, ("vit", 8): 100, ("diffvit", 8): 100}
  cross = main_row(claim_rows_of(tmp_path / "b", "da", _da_records(depths=(1, 4, 8), asr=level)), "depth_crossover")
  assert cross["direction"] == "inconclusive" and cross["estimate"] == pytest.approx(0.0)
  shallow = main_row(claim_rows_of(tmp_path / "c", "da", _da_records(depths=(1, 4), asr=below)), "depth_crossover")
  assert shallow["direction"] == "inconclusive" and "depth 4 < 8" in shallow["reason"]


def test_rows_of_a_differential_attention_variant_carry_its_label():
  """A CIFAR-10 workdir is a variant of the standard Fashion-MNIST grid: every row it measures carries
  'dataset=cifar10' (beside a row's own variant), and with no standard grid the 'not run' rows remain."""
  src = core_rows.Source("diff_attention", "c10", {"dataset": "cifar10"}, _da_records(depths=(1, 2)),
                         ("dataset=cifar10",))
  rows = claims.build_rows([src], "DIR")
  measured = [r for r in rows if r["status"] == "measured"]
  assert measured and all("dataset=cifar10" in r["variant"] for r in measured)
  assert any("depth=2" in r["variant"] and "dataset=cifar10" in r["variant"] for r in measured)
  assert any(r["status"] == "not run" and r["claim_id"] == "da_asr_pgd" for r in rows)


def test_the_d_star_interval_resamples_seeds():
  """Three depth-8 seeds whose images all share their seed's L̂ (no image-level spread) and whose D* alone are
  4/3, 1.5 and 2: only resampling the seeds can spread the bootstrap, so the interval covers the smallest
  and the largest seed's D* (a resample of one seed three times has probability 1/27 > 2.5 %; mixtures of
  seeds can fall outside that range, the fit being nonlinear in the pooled ratios). A bootstrap that
  iterated over the seeds instead of resampling them would give every replicate the pooled D*, an interval
  of width 0."""
  recs = [r for r in _corollary1_records(EARLY, seeds=1) if r.get("kind") != "lipschitz"]
  for seed, alpha_bar in ((0, 0.25), (1, 0.5), (2, 0.125)):
    for layer in range(1, 9):
      for model, lam, scale in (("vit", "-", 1.0), ("diffvit", "0.8", 2.0 * alpha_bar ** (layer - 1))):
        t = _train(model, 8, lam, seed)
        recs.append(dict(kind="lipschitz", model=model, depth=8, lambda_init=lam, seed_index=seed, name=t["name"],
                         layer=layer, eps=1 / 255, eps_255=1.0, values=np.full(20, scale).tolist()))
  row = _corollary1(recs)
  assert "D* per seed 0: 1.5, 1: 2, 2: 1.33" in row["setting"]
  assert row["low"] <= 4 / 3 + 1e-9 and row["high"] >= 2.0 - 1e-9
