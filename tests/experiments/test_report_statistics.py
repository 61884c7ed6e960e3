"""The statistics the experiments' summary tables compute from their records, each against an independent
computation from the same hand-built records (numpy / scipy brute force or a closed form; never a number
copied from the report's own output).

Pinned here:
  flip_rate   the rate table's mean ± 95 % t half-width over seeds and widths (converged trainings only), its
              ρ (nan-mean), ‖δ‖∞/ε, ε = 0 flip count and accuracy columns; the attack − random-sign gap (mean
              paired by seed, inverted exact sign-flip interval by enumeration of the sign patterns); the
              pooled flip-count ratio MLP-Attn / 2L-ReLU with its floored delta-t interval and ceiling; the
              training-criterion line (mean final loss, converged trainings, median iterations).
  width_sweep the log-log fits (slope, its standard error, intercept, R², width where the fit reaches 1) and
              the initialisation table's means at the largest width; the mean per-seed slopes of the distance
              to K∞ / K₀ and their seed-paired difference; the converged-distance table (mean ± population
              std over converged seeds, mean loss over every seed, k/n).
  cubing      the table's mean ± population std over subsets and the stacking table's means.
  certify     the headline's Clopper–Pearson interval (scipy's exact binomial interval).
  diff_attention  the ASR table per seed, the alignment table's mean |cos θ| and constant-guess agreement,
              the zero-gradient total and the depth crossover of seed 0 (log2-linear interpolation by hand).
  dual_implications  the cells' mean ± population std over draws and the measurement-choice rows' means and
              paired difference with its inverted sign-flip interval.
  landscape   the sharpness table's mean ± population std of the eigenvalues, adaptive λ₁ and the loss rise.
"""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import scipy.stats

from experiments.certify import report as certify_report
from experiments.cubing import report as cubing_report
from experiments.diff_attention import report as diff_attention_report
from experiments.dual_implications import report as dual_report
from experiments.flip_rate import report as flip_rate_report
from experiments.landscape import report as landscape_report
from experiments.width_sweep import report as width_sweep_report


# ------------------------------------------------------------------------------------------------ helpers


def _row(text: str, *prefix: str) -> list[str]:
  """The cells of the one markdown table row that starts with the cells ``prefix``."""
  head = "| " + " | ".join(prefix) + " |"
  found = [line for line in text.splitlines() if line.startswith(head)]
  assert len(found) == 1, (head, found)
  return [c.strip() for c in found[0].strip().strip("|").split("|")]


def _t_half(values, level=0.95) -> float:
  v = np.asarray(values, float)
  return float(scipy.stats.t.ppf((1 + level) / 2, v.size - 1) * np.std(v, ddof=1) / math.sqrt(v.size))


def _sign_flip_p(d, mu) -> float:
  """Exact two-sided sign-flip p-value of H₀: mean = mu, enumerating all 2^n sign patterns."""
  x = np.asarray(d, float) - mu
  observed = abs(x.sum())
  signs = np.array(list(itertools.product((1.0, -1.0), repeat=x.size)))
  tol = 1e-9 * (np.abs(x).sum() + 1.0)
  return float(np.mean(np.abs(signs @ x) >= observed - tol))


def _sign_flip_ends(d, level=0.95) -> tuple[float, float]:
  """The ends of the inverted sign-flip interval by brute force: p(μ) only changes where μ is the mean of a
  subset of the differences (a pattern's |Σ s(d − μ)| meets |Σ(d − μ)| there), so the accepted set {μ: p > α}
  has subset means as its ends."""
  d = np.asarray(d, float)
  candidates = sorted({float(np.mean(d[list(c)])) for k in range(1, d.size + 1)
                       for c in itertools.combinations(range(d.size), k)})
  accepted = [mu for mu in candidates if _sign_flip_p(d, mu) > 1 - level]
  return min(accepted), max(accepted)


def _slope(x, y) -> float:
  """The least-squares slope Sxy/Sxx by hand."""
  x, y = np.asarray(x, float), np.asarray(y, float)
  return float(np.sum((x - x.mean()) * (y - y.mean())) / np.sum((x - x.mean()) ** 2))


def _ols(x, y):
  """Least squares y = a + b·x by hand: (slope, its standard error, intercept, R²)."""
  x, y = np.asarray(x, float), np.asarray(y, float)
  sxx = np.sum((x - x.mean()) ** 2)
  b = np.sum((x - x.mean()) * (y - y.mean())) / sxx
  a = y.mean() - b * x.mean()
  sse = np.sum((y - a - b * x) ** 2)
  return b, math.sqrt(sse / (x.size - 2) / sxx), a, 1 - sse / np.sum((y - y.mean()) ** 2)


# ------------------------------------------------------------------------------------------------ flip rate


def _flip(model, width, seed, attack, eps, k, n_top=50, **extra):
  r = dict(task="mnist_3v8", model=model, width=width, seed=seed, adversarial_training=False, attack=attack,
           eps=eps, n_flipped=int(k), n_top=n_top, flip_rate=int(k) / n_top, spearman=0.5, mean_linf_over_eps=1.0,
           train_accuracy=1.0, test_accuracy=0.9, converged=True, train_loss=0.01, loss_target=0.05,
           learning_rate=0.01)
  r.update(extra)
  return r


ATTACKS = ("fgsm", "pgd", "mim", "random_sign")


def test_flip_rate_table_is_the_t_interval_over_converged_seeds_and_widths():
  """Each rate cell is mean ± t_{0.975, n−1}·s/√n (s with ddof 1) of 100·rate over every converged (width,
  seed) at that ε; an unconverged training (seed 4) enters no cell. ρ is the nan-mean over the PGD runs, the
  accuracies the means over the converged runs, the ε = 0 column the total flips there."""
  rng = np.random.default_rng(0)
  records = []
  for model in ("relu", "mlp_attn"):
    for width in (64, 256):
      for seed in range(5):
        ok = seed < 4
        for attack in ATTACKS:
          for eps in (0.0, 0.3):
            k = 0 if eps == 0 else rng.integers(0, 30)
            if eps == 0 and seed == 1 and width == 64:
              k = 2  # ε = 0 flips to count
            records.append(_flip(model, width, seed, attack, eps, 49 if not ok else k, converged=ok,
                                 train_loss=0.01 if ok else 0.9, spearman=rng.uniform(0.2, 0.9),
                                 mean_linf_over_eps=rng.uniform(0.8, 1.0), train_accuracy=rng.uniform(0.9, 1),
                                 test_accuracy=rng.uniform(0.6, 0.9)))
  pgd_nan = next(r for r in records if (r["model"], r["attack"], r["eps"], r["seed"], r["width"]) ==
                 ("relu", "pgd", 0.3, 2, 256))
  pgd_nan["spearman"] = float("nan")  # a NaN ρ of a PGD run: left out of the mean
  derived = flip_rate_report.derive(records)
  text = flip_rate_report.summary_markdown(records, derived)
  for model, label in (("relu", "2L-ReLU"), ("mlp_attn", "MLP-Attn")):
    ok = [r for r in records if r["model"] == model and r["converged"]]
    cells = _row(text, "mnist_3v8", label)
    for i, attack in enumerate(ATTACKS):
      values = [100 * r["flip_rate"] for r in ok if r["attack"] == attack and r["eps"] == 0.3]
      assert len(values) == 8  # 2 widths × 4 converged seeds
      mean, half = np.mean(values), _t_half(values)
      (iv,) = [i for i in derived["intervals"] if (i["model"], i["attack"], i["eps"]) == (model, attack, 0.3)]
      assert iv["n_runs"] == 8
      assert iv["mean_pct"] == pytest.approx(mean, rel=1e-12) and iv["ci95_half_pct"] == pytest.approx(half, rel=1e-12)
      assert cells[2 + i] == f"{mean:.1f} ± {half:.1f}"
    pgd = [r for r in ok if r["attack"] == "pgd" and r["eps"] == 0.3]
    rho = [r["spearman"] for r in pgd if np.isfinite(r["spearman"])]
    assert cells[7] == f"{np.mean(rho):.2f}"
    assert cells[8] == f"{np.mean([r['mean_linf_over_eps'] for r in pgd]):.2f}"
    zero = [r for r in ok if r["eps"] == 0]
    assert cells[9] == f"{sum(r['n_flipped'] for r in zero)} flips in {len(zero)} runs"
    assert cells[10] == (f"{np.mean([r['train_accuracy'] for r in ok]):.2f} / "
                         f"{np.mean([r['test_accuracy'] for r in ok]):.2f}")


def test_flip_rate_gap_is_the_seed_paired_mean_with_the_inverted_sign_flip_interval():
  """gap = mean over seeds of 100·(rate(attack) − rate(random sign)) at the same seed; its interval is the set
  of means the exact sign-flip test does not reject at 5 %, found here by enumerating the 2^7 sign patterns at
  every subset mean."""
  records = []
  for seed, (control, extra) in enumerate(zip((3, 5, 1, 8, 2, 6, 4), (7, -2, 11, 0, 10, 1, 2))):
    records += [_flip("relu", 64, seed, "pgd", 0.1, control + extra),
                _flip("relu", 64, seed, "random_sign", 0.1, control)]
  # seed 7 has no control: it is in no pair
  records.append(_flip("relu", 64, 7, "pgd", 0.1, 40))
  derived = flip_rate_report.derive(records)
  (gap,) = derived["gaps"]
  rate = {(r["seed"], r["attack"]): r["flip_rate"] for r in records}
  d = [100 * (rate[s, "pgd"] - rate[s, "random_sign"]) for s in range(7)]
  low, high = _sign_flip_ends(d)
  assert gap["n_seeds"] == 7 and gap["gap_pct"] == pytest.approx(np.mean(d), rel=1e-12)
  assert gap["low_pct"] == pytest.approx(low, rel=1e-9, abs=1e-9) and gap["high_pct"] == pytest.approx(high, rel=1e-9)
  assert np.min(d) < low < np.mean(d) < high < np.max(d)  # n = 7: not just the range of the data
  text = flip_rate_report.summary_markdown(records, derived, eps=0.1)
  cells = _row(text, "False", "mnist_3v8", "2L-ReLU", "64", "pgd")
  assert cells[5] == f"{np.mean(d):.1f} [{low:.1f}, {high:.1f}] (n=7)"


def _pooled_ratio_by_hand(a, b, ta, tb, level=0.95):
  """(R, low, high) of the pooled ratio (ΣA/ΣT_A)/(ΣB/ΣT_B): Student's t on log R with the seed-level
  sandwich variance n/(n − 1)·Σz², floored at the binomial (1 − p̂_A)/A + (1 − p̂_B)/B."""
  a, b, ta, tb = (np.asarray(x, float) for x in (a, b, ta, tb))
  A, B, TA, TB = a.sum(), b.sum(), ta.sum(), tb.sum()
  z = a / A - ta / TA - b / B + tb / TB
  var = max(a.size / (a.size - 1) * np.sum(z ** 2), (1 - A / TA) / A + (1 - B / TB) / B)
  ratio = (A / TA) / (B / TB)
  half = scipy.stats.t.ppf((1 + level) / 2, a.size - 1) * math.sqrt(var)
  return ratio, ratio * math.exp(-half), ratio * math.exp(half)


def test_flip_rate_ratio_is_pooled_over_the_seeds_where_both_models_converged():
  """The ratio MLP-Attn / 2L-ReLU pools flip counts over the seeds where both converged (seed 5's 2L-ReLU did
  not: the seed leaves both sides), with the delta-t interval on log R (PGD: seed spread above the binomial
  floor; FGSM: proportional counts, the floor) and the ceiling 1/rate(2L-ReLU)."""
  rng = np.random.default_rng(2)
  records = []
  for seed in range(6):
    n_relu, n_attn = 40 + seed, 44 + 2 * seed
    relu_ok = seed != 5
    n_fgsm = 4 * (10 + seed)  # FGSM: 2L-ReLU flips 25 %, MLP-Attn 50 % at every seed (proportional counts)
    conv = dict(converged=relu_ok, train_loss=0.01 if relu_ok else 0.9)
    records += [_flip("relu", 64, seed, "pgd", 0.1, rng.integers(2, 12), n_relu, **conv),
                _flip("mlp_attn", 64, seed, "pgd", 0.1, rng.integers(5, 30), n_attn),
                _flip("relu", 64, seed, "fgsm", 0.1, n_fgsm // 4, n_fgsm, **conv),
                _flip("mlp_attn", 64, seed, "fgsm", 0.1, n_fgsm // 2, n_fgsm)]
  derived = flip_rate_report.derive(records)
  text = flip_rate_report.summary_markdown(records, derived, eps=0.1)
  for attack in ("pgd", "fgsm"):
    kept = range(5)
    def get(model, s, field):
      return next(r[field] for r in records if (r["model"], r["seed"], r["attack"]) == (model, s, attack))
    a = [get("mlp_attn", s, "n_flipped") for s in kept]
    ta = [get("mlp_attn", s, "n_top") for s in kept]
    b = [get("relu", s, "n_flipped") for s in kept]
    tb = [get("relu", s, "n_top") for s in kept]
    ratio, low, high = _pooled_ratio_by_hand(a, b, ta, tb)
    z = np.array(a) / sum(a) - np.array(ta) / sum(ta) - np.array(b) / sum(b) + np.array(tb) / sum(tb)
    floor = (1 - sum(a) / sum(ta)) / sum(a) + (1 - sum(b) / sum(tb)) / sum(b)
    assert bool(5 / 4 * np.sum(z ** 2) > floor) == (attack == "pgd")  # PGD: the seed spread; FGSM: the floor
    ceiling = sum(tb) / sum(b)
    (c,) = [c for c in derived["ratio_curve"] if c["attack"] == attack]
    assert c["n_seeds"] == 5
    np.testing.assert_allclose([c["ratio"], c["low"], c["high"], c["ceiling"]], [ratio, low, high, ceiling],
                               rtol=1e-12)
    cells = _row(text, "mnist_3v8", "64", attack)
    assert cells[3] == f"{ratio:.2f} [{low:.2f}, {high:.2f}] (≤ {ceiling:.2g})"


def test_flip_rate_criterion_line_means_counts_and_median_iterations():
  """Per model: the mean final train loss over its trainings, how many of the distinct (task, width, seed)
  trainings converged, and the median of the iterations (3 trainings: the middle one, not the mean)."""
  records = []
  spec = {"relu": ((0.01, 10, True), (0.02, 12, True), (0.30, 40, False)),
          "mlp_attn": ((0.04, 7, True), (0.03, 9, True), (0.045, 30, True))}
  for model, runs in spec.items():
    for seed, (loss, iters, ok) in enumerate(runs):
      for attack in ATTACKS:
        for eps in (0.0, 0.3):
          records.append(_flip(model, 64, seed, attack, eps, 3, converged=ok, train_loss=loss, optimizer="lbfgs",
                               epochs_trained=iters))
  line = next(l for l in flip_rate_report.summary_markdown(records, flip_rate_report.derive(records)).splitlines()
              if l.startswith("Training criterion"))
  for model, label in (("relu", "2L-ReLU"), ("mlp_attn", "MLP-Attn")):
    runs = spec[model]
    loss = np.mean([l for l, _, _ in runs])
    conv = sum(ok for _, _, ok in runs)
    median = int(np.median([i for _, i, _ in runs]))
    assert (f"{label}: train loss {loss:.3g}, {conv}/{len(runs)} converged (target 0.05), "
            f"L-BFGS, {median} iterations (median)") in line


def test_flip_rate_median_iterations_of_an_even_count_is_not_truncated():
  """Two trainings of 10 and 15 iterations: the median is 12.5, not int(12.5) = 12."""
  records = [_flip("mlp_attn", 64, seed, attack, eps, 3, converged=True, train_loss=0.04, optimizer="lbfgs",
                   epochs_trained=iters) for seed, iters in enumerate((10, 15)) for attack in ATTACKS
             for eps in (0.0, 0.3)]
  line = next(l for l in flip_rate_report.summary_markdown(records, flip_rate_report.derive(records)).splitlines()
              if l.startswith("Training criterion"))
  assert "L-BFGS, 12.5 iterations (median)" in line


# ------------------------------------------------------------------------------------------------ width sweep


def test_width_sweep_fits_and_initialisation_table_against_least_squares_by_hand():
  """Noisy power laws (so the standard error is not 0): slope, its standard error √(SSE/(n − 2)/Sxx),
  intercept, R² and the width exp(−a/b) where the fit reaches 1, over every seed's point; the table's
  rel. Frobenius and spectral ratio are the means over seeds at the largest width, λ_min the mean at the
  smallest."""
  rng = np.random.default_rng(3)
  widths, seeds = (16, 64, 256, 1024), range(3)
  records = []
  for model, scale in (("relu", 3.0), ("mlp_attn", 40.0)):
    for m in widths:
      for s in seeds:
        records.append(dict(dataset="mnist", model=model, readout="fixed", width=m, seed=s, kind="init",
                            n_train=8, n_test=4, kernel_path="fast",
                            rel_frobenius_train=scale * m ** -0.5 * math.exp(rng.normal(0, 0.2)),
                            spectral_ratio=10 * scale * m ** -0.4 * math.exp(rng.normal(0, 0.3)),
                            lambda_min_inf=0.1 + 0.01 * s))
  derived = width_sweep_report.derive(records)
  text = width_sweep_report.summary_markdown(records, derived)
  for model, label in (("relu", "2L-ReLU"), ("mlp_attn", "MLP-Attn")):
    sel = [r for r in records if r["model"] == model]
    by_hand = {}
    for quantity in ("rel_frobenius_train", "spectral_ratio"):
      b, se, a, r2 = _ols(np.log([r["width"] for r in sel]), np.log([r[quantity] for r in sel]))
      (fit,) = [f for f in derived["fits"] if (f["model"], f["quantity"]) == (model, quantity)]
      np.testing.assert_allclose([fit["slope"], fit["slope_stderr"], fit["intercept"], fit["r_squared"],
                                  fit["width_reaching_1"]], [b, se, a, r2, math.exp(-a / b)], rtol=1e-10)
      assert fit["n_points"] == 12 and se > 0.01
      by_hand[quantity] = (b, se, math.exp(-a / b))
    at_max = [r for r in sel if r["width"] == 1024]
    cells = _row(text, "mnist", label)
    b, se, _ = by_hand["rel_frobenius_train"]
    assert cells[2] == f"{b:.3g} ± {se:.2g}"
    assert cells[3] == f"{np.mean([r['rel_frobenius_train'] for r in at_max]):.3g} (m=1024)"
    assert cells[4] == f"{np.mean([r['spectral_ratio'] for r in at_max]):.3g}"
    assert cells[5] == f"{np.mean([r['lambda_min_inf'] for r in sel if r['width'] == 16]):.3g}"
    assert cells[6] == f"{by_hand['spectral_ratio'][0]:.3g}" and cells[7] == f"{by_hand['spectral_ratio'][2]:.2g}"


def _converged(model, width, seed, rng, ok=True, **extra):
  r = dict(dataset="mnist", model=model, readout="fixed", width=width, seed=seed, kind="converged",
           converged=ok, train_loss=0.01 if ok else 0.5, loss_target=0.05, loss_floor=0.0,
           function_distance=float(rng.uniform(1, 3) * width ** (0.3 if model == "mlp_attn" else -0.1)),
           function_distance_kinf=float(rng.uniform(1, 3) * width ** (0.2 if model == "mlp_attn" else -0.2)),
           function_distance_relative=float(rng.uniform(0.1, 0.5)), test_accuracy=float(rng.uniform(0.7, 0.9)),
           kernel_test_accuracy=float(rng.uniform(0.7, 0.9)), kinf_test_accuracy=float(rng.uniform(0.7, 0.9)))
  r.update(extra)
  return r


def test_width_sweep_distance_slopes_are_per_seed_least_squares_then_averaged_and_paired():
  """Each model's column is the mean over seeds of that seed's log-log slope over its converged widths (seed 1's
  unconverged 2L-ReLU point at width 64 is dropped from that seed's fit); the difference is the mean of
  MLP-Attn − 2L-ReLU over the seeds both have (MLP-Attn lacks seed 2: 2 pairs)."""
  rng = np.random.default_rng(4)
  widths = (16, 64, 1024)  # unequal steps in log m: the middle point moves the fit (not just the end points)
  records = [_converged("relu", m, s, rng, ok=not (s == 1 and m == 64)) for m in widths for s in range(3)]
  records += [_converged("mlp_attn", m, s, rng) for m in widths for s in range(2)]
  (line,) = width_sweep_report._distance_slope_lines(records)[-1:]
  cells = [c.strip() for c in line.strip().strip("|").split("|")]
  assert cells[:2] == ["mnist", "trained to the criterion"]
  for offset, field in ((2, "function_distance_kinf"), (5, "function_distance")):
    slopes = {}
    for model in ("relu", "mlp_attn"):
      for s in range(3):
        pts = [r for r in records if (r["model"], r["seed"]) == (model, s) and r["converged"]]
        if pts:
          slopes[model, s] = _slope(np.log([r["width"] for r in pts]), np.log([r[field] for r in pts]))
    relu = [v for (m, _), v in slopes.items() if m == "relu"]
    attn = [v for (m, _), v in slopes.items() if m == "mlp_attn"]
    diff = [slopes["mlp_attn", s] - slopes["relu", s] for s in (0, 1)]
    assert len(relu) == 3 and len(attn) == 2
    assert cells[offset:offset + 3] == [f"{np.mean(relu):+.3g}", f"{np.mean(attn):+.3g}", f"{np.mean(diff):+.3g} (2)"]


def test_width_sweep_converged_table_is_mean_and_std_over_the_converged_seeds():
  """Per (model, width): ‖f_m − f_K₀‖ and ‖f_m − f_K∞‖ as mean ± sample std (ddof = 1, as the summary says)
  over the converged seeds with their number, the relative distance and accuracies as means over them, the
  train loss as the mean over every seed, and the count k/n."""
  rng = np.random.default_rng(5)
  records = [_converged(model, 64, s, rng, ok=s != 3) for model in ("relu", "mlp_attn") for s in range(4)]
  text = "\n".join(width_sweep_report._converged_section(records))
  for model, label in (("relu", "2L-ReLU"), ("mlp_attn", "MLP-Attn")):
    every = [r for r in records if r["model"] == model]
    ok = [r for r in every if r["converged"]]
    d, kinf = (np.array([r[f] for r in ok]) for f in ("function_distance", "function_distance_kinf"))
    cells = _row(text, "mnist", label, "64")
    assert cells[3] == f"{d.mean():.3g} ± {d.std(ddof=1):.2g} (3)"
    assert cells[4] == f"{np.mean([r['function_distance_relative'] for r in ok]):.3g}"
    assert cells[5] == f"{kinf.mean():.3g} ± {kinf.std(ddof=1):.2g} (3)"
    assert cells[6] == f"{np.mean([r['train_loss'] for r in every]):.3g}" and cells[7] == "3/4"
    assert cells[8] == " / ".join(f"{np.mean([r[f] for r in ok]):.3f}"
                                  for f in ("test_accuracy", "kernel_test_accuracy", "kinf_test_accuracy"))


# ------------------------------------------------------------------------------------------------ cubing


def test_cubing_tables_are_mean_and_std_over_subsets_per_data_set_and_n():
  rng = np.random.default_rng(6)
  records = []
  for dataset in ("mnist", "cifar10"):
    for n in (30, 80):
      for seed in range(3):
        kg = rng.uniform(2, 4)
        r = dict(dataset=dataset, n=n, seed=seed, log10_kappa_G=kg, rank_G=n, full_rank=True,
                 log10_kappa_Gtilde=3 * kg, log10_kappa_Gtilde_direct=3 * kg + rng.normal(0, 0.1),
                 log10_kappa_Gtilde_normalised=rng.uniform(3, 8), explicit_identity_rel_error=rng.uniform(1e-15, 1e-13))
        r["cubing_deviation_direct"] = r["log10_kappa_Gtilde_direct"] - 3 * kg
        r["cubing_deviation_normalised"] = r["log10_kappa_Gtilde_normalised"] - 3 * kg
        for k in (1, 2):
          r[f"log10_kappa_values_k{k}"] = (2 * k + 1) * kg + rng.normal(0, 0.05)
          r[f"log10_kappa_self_k{k}"] = 3 ** k * kg + rng.normal(0, 0.05)
        r["log10_width_attn_eps0.1"] = 6 * kg + 2 + rng.normal(0, 0.05)
        r["log10_width_relu_eps0.1"] = 2.0
        records.append(r)
  text = cubing_report.summary_markdown(records)
  for dataset in ("mnist", "cifar10"):
    for n in (30, 80):
      rs = [r for r in records if (r["dataset"], r["n"]) == (dataset, n)]
      mean = lambda f: np.mean([r[f] for r in rs])  # noqa: E731
      kg = np.array([r["log10_kappa_G"] for r in rs])
      main, stack = (_row(part, dataset, str(n)) for part in text.split("## Stacking"))
      assert main[3:9] == [f"{kg.mean():.2f} ± {kg.std(ddof=0):.2f}", f"{3 * kg.mean():.2f}",
                           f"{mean('log10_kappa_Gtilde_direct'):.2f}", f"{mean('cubing_deviation_direct'):+.2f}",
                           f"{mean('log10_kappa_Gtilde_normalised'):.2f}",
                           f"{mean('cubing_deviation_normalised'):+.2f}"]
      assert main[9] == f"{mean('explicit_identity_rel_error'):.1e}"
      assert stack[2:] == [f"{mean(f):.1f}" for f in ("log10_kappa_values_k1", "log10_kappa_values_k2",
                                                      "log10_kappa_self_k1", "log10_kappa_self_k2",
                                                      "log10_width_attn_eps0.1", "log10_width_relu_eps0.1")]


# ------------------------------------------------------------------------------------------------ certify


@pytest.mark.parametrize("n, k", [(137, 41), (100, 29), (60, 0), (25, 25)])  # 0.29·100 = 28.999…: rounded
def test_certify_headline_interval_is_the_exact_binomial_interval(n, k):
  """The headline's [low, high] is the Clopper–Pearson interval of k certified of n test images (scipy's
  exact binomial interval), ends included at k = 0 and k = n."""
  from certify_records import cert_record, selection_record
  records = [cert_record(0.0625, 0.02, 1.0, 1.0, k / n, k / n, n=n, rigorous_k=k),
             cert_record(1.0, 0.02, 1.0, 1.0, 0.0, 0.0, n=n), selection_record(0.0625, 0.02)]
  ci = scipy.stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
  cells = _row(certify_report.summary_markdown(records), "cifar10", "0.02", "0.0625", "validation")
  assert cells[4] == f"**{100 * k / n:.1f} [{100 * ci.low:.1f}, {100 * ci.high:.1f}]**"


# ------------------------------------------------------------------------------------------------ diff attention


def _da_train(model, lam, seed, depth=1):
  name = f"{model}_d{depth}" + ("" if model == "vit" else f"_lam{lam}") + (f"_s{seed}" if seed else "")
  return dict(kind="train", model=model, depth=depth, lambda_init=lam, seed_index=seed, name=name,
              clean_accuracy=0.9, attack="-", eps=0.0, layer=-1, dataset="mnist", n_train=64, n_test=16,
              parameters=1000)


def test_diff_attention_asr_table_reads_each_seeds_own_records_and_its_derived_columns(tmp_path):
  """The ASR table has one row per (model, depth, λ_init, seed, attack) whose cells are that seed's ASR
  n_success/n_counted; the zero-gradient line is the total over the attack records; the alignment table's
  mean |cos θ| and constant-guess agreement max(p, 1 − p) are computed here from the records; derived.json's
  crossover (seed 0's ASRs, not seed 1's) is interpolated by hand in log2(depth)."""
  rng = np.random.default_rng(7)
  records, asr = [], {}
  for seed in (0, 1):
    for depth in (1, 2, 4):
      for model, lam in (("vit", "-"), ("diffvit", "0.8")):
        t = _da_train(model, lam, seed, depth)
        records.append(t)
        for attack in ("pgd", "apgd"):
          for e in (1.0, 4.0):
            counted = int(rng.integers(300, 400))
            k = int(rng.integers(0, counted))
            asr[model, depth, seed, attack, e] = k / counted
            records.append(dict(kind="attack", model=model, depth=depth, lambda_init=lam, seed_index=seed,
                                name=t["name"], attack=attack, eps=e / 255, eps_255=e, layer=-1, asr=k / counted,
                                n_success=k, n_counted=counted, clean_accuracy=0.9, n_zero_grad=int(rng.integers(3))))
  text = "\n".join(diff_attention_report._asr_section(records))
  for (model, depth, seed, attack, e), value in asr.items():
    lam = "-" if model == "vit" else "0.8"
    line = [l for l in text.splitlines() if l.startswith(f"| {model} | {depth} | {lam} | {seed} | ")
            and f" | {attack} | " in l]
    assert len(line) == 1
    cells = [c.strip() for c in line[0].strip().strip("|").split("|")]
    n = next(r["n_counted"] for r in records if r["kind"] == "attack" and (r["model"], r["depth"], r["seed_index"],
                                                                          r["attack"]) == (model, depth, seed, attack))
    assert cells[5] == str(n) and cells[7 + (0 if e == 1.0 else 1)] == f"{value:.3f}"
  zero = sum(r["n_zero_grad"] for r in records if r["kind"] == "attack")
  assert f"Zero input gradients at the attack start: {zero} image-attacks in total." in text
  (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
  diff_attention_report.write_report(tmp_path)
  (found,) = [c for c in json.loads((tmp_path / "derived.json").read_text())["crossovers"] if c["eps_255"] == 1.0]
  depths, vit, diff, cross = found["depths"], found["asr_vit"], found["asr_diffvit"], found["crossover_depth"]
  assert depths == [1, 2, 4]
  assert vit == [asr["vit", d, 0, "pgd", 1.0] for d in depths]
  assert diff == [asr["diffvit", d, 0, "pgd", 1.0] for d in depths]
  g = [asr["diffvit", d, 0, "pgd", 1.0] - asr["vit", d, 0, "pgd", 1.0] for d in depths]
  expected = None
  for i in (1, 2):
    if np.sign(g[i]) != np.sign(g[i - 1]):
      t = g[i - 1] / (g[i - 1] - g[i])
      expected = 2 ** (math.log2(depths[i - 1]) + t * (math.log2(depths[i]) - math.log2(depths[i - 1])))
      break
  assert expected is not None and cross == pytest.approx(expected, rel=1e-12)

  cos = rng.uniform(-1, 1, (6, 2))
  more = [True, False, False, False]  # DiffViT more sensitive on 1 of 4 images: guessing "never" agrees on 3
  align = dict(kind="alignment", model="diffvit", depth=1, lambda_init="0.8", seed_index=0, layer=1, lam=0.8,
               cos_theta=cos.tolist(), cos_theta_mean=float(cos.mean()),
               negative_alignment_frequency=float(np.mean(cos < 0)),
               rho_median=1.1, gamma_median=0.9, lambda_rho_negative_frequency=0.0, lemma1_max_relative_error=1e-9,
               theorem3_predicted_frequency=0.5, diffvit_more_sensitive_frequency=float(np.mean(more)),
               theorem3_agreement=0.5, theorem3_matches_map_norms=1.0)
  cells = _row("\n".join(diff_attention_report._alignment_section([align])), "1", "0.8", "0", "1")
  assert cells[6] == f"{np.mean(np.abs(cos)):.3f}" and cells[7] == f"{np.mean(cos < 0):.2f}"
  assert cells[14] == "0.25" and cells[16] == f"{max(np.mean(more), 1 - np.mean(more)):.2f}" == "0.75"


# ------------------------------------------------------------------------------------------------ dual implications


def test_dual_implications_cells_and_measurement_choice_differences():
  """Each cell is mean ± population std over draws; each measurement-choice row has the two models' mean
  errors and err(2L-ReLU) − err(MLP-Attn) paired by draw with its inverted sign-flip interval (7 draws:
  enumerated here)."""
  rng = np.random.default_rng(8)
  records = []
  for target in ("top", "bottom"):
    for draw in range(7):
      for model in ("relu", "mlp_attn"):
        for kind, seed in (("kinf", None), ("finite", 0)):
          r = dict(dataset="mnist", target=target, draw=draw, model=model, kind=kind, seed=seed,
                   kernel_error=float(rng.uniform(0.1, 0.9)), kernel_error_validated=float(rng.uniform(0.1, 0.9)),
                   alignment=float(rng.uniform(0, 1)), n_train=24, n_test=12, k=3, ridge_grid=[1e-3, 1e-1],
                   n_validation=6, ridge_scale=1e-3)
          if kind == "finite":
            r["network_error"] = float(rng.uniform(0.1, 0.9))
          records.append(r)
  text = dual_report.summary_markdown(records)
  for target in ("top", "bottom"):
    cells = _row(text, target)
    expected = []
    for kind, field in (("kinf", "kernel_error"), ("finite", "kernel_error"), ("finite", "network_error"),
                        ("kinf", "alignment")):
      for model in ("relu", "mlp_attn"):
        v = np.array([r[field] for r in records if (r["target"], r["model"], r["kind"]) == (target, model, kind)])
        assert v.size == 7
        expected.append(f"{v.mean():.3f} ± {v.std(ddof=0):.3f}")
    assert cells[1:] == expected
    for field, label in (("kernel_error", "unit-norm feature rows, ridge 0.001·tr(K)/n (primary)"),
                         ("kernel_error_validated", "unit-norm feature rows, ridge chosen on a validation split")):
      by = {(r["draw"], r["model"]): r[field] for r in records if (r["target"], r["kind"]) == (target, "kinf")}
      relu, attn = (np.array([by[d, m] for d in range(7)]) for m in ("relu", "mlp_attn"))
      low, high = _sign_flip_ends(relu - attn)
      cells = _row(text, "mnist", target, label)
      assert cells[3:6] == [f"{relu.mean():.4g}", f"{attn.mean():.4g}",
                            f"{np.mean(relu - attn):+.4g} [{low:+.4g}, {high:+.4g}]"]


# ------------------------------------------------------------------------------------------------ landscape


def test_landscape_table_is_mean_and_std_over_seeds_and_the_mean_loss_rise(tmp_path):
  """λ₁..λ₃ as mean ± population std over the comparable seeds, adaptive λ₁ and the train loss as means, the
  rise as the mean of ½(loss at −1 + loss at +1) − train loss; seed 3's unconverged point enters none."""
  rng = np.random.default_rng(9)
  records = []
  for model in ("relu", "mlp_attn"):
    for seed in range(4):
      ok = seed != 3
      loss = float(rng.uniform(0.01, 0.04))
      eig = sorted(rng.uniform(1, 50, 3), reverse=True)
      records.append(dict(task="mnist", model=model, width=32, seed=seed, top_eigenvalues=[float(e) for e in eig],
                          adaptive_sharpness=[float(rng.uniform(0.1, 2))], train_loss=loss if ok else 0.9,
                          converged=ok, loss_target=0.05, alphas=[-1.0, 0.0, 1.0],
                          landscape_1d=[loss + float(rng.uniform(0, 1)), loss, loss + float(rng.uniform(0, 1))],
                          alphas_2d=[-1.0, 0.0, 1.0], landscape_2d=rng.uniform(0, 1, (3, 3)).tolist()))
  (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
  text = landscape_report.write_report(tmp_path)
  for model, label in (("relu", "2L-ReLU"), ("mlp_attn", "MLP-Attn")):
    ok = [r for r in records if r["model"] == model and r["converged"]]
    eig = np.array([r["top_eigenvalues"] for r in ok])
    cells = _row(text, "mnist", label, "32")
    assert cells[3:6] == [f"{eig[:, i].mean():.3g} ± {eig[:, i].std(ddof=0):.2g}" for i in range(3)]
    assert cells[6] == f"{np.mean([r['adaptive_sharpness'][0] for r in ok]):.3g}"
    assert cells[7] == f"{np.mean([r['train_loss'] for r in ok]):.3g}"
    rise = [0.5 * (r["landscape_1d"][0] + r["landscape_1d"][2]) - r["train_loss"] for r in ok]
    assert cells[8] == f"{np.mean(rise):.3g}"
