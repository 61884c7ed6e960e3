"""experiments.core.rows: the claim-row primitives, each against an independent computation (closed forms,
scipy, a hand-worked case)."""
import math

import numpy as np
import pytest
import scipy.stats

from experiments.core import rows


def test_mean_interval_is_students_t_by_hand():
  v = np.array([0.1, 0.4, 0.35, 0.2, 0.3, 0.25, 0.15, 0.45, 0.05, 0.3])
  iv = rows.mean_interval(v)
  half = scipy.stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size)
  assert (iv.estimate, iv.low, iv.high) == pytest.approx((v.mean(), v.mean() - half, v.mean() + half), rel=1e-12)
  assert (iv.n, iv.unit, iv.level) == (10, "seeds", 0.95)


def test_ratio_interval_is_students_t_of_the_logs():
  r = np.array([0.5, 0.8, 0.6, 1.1, 0.7, 0.9, 0.55, 0.65, 0.75, 0.85])
  iv = rows.ratio_interval(r)
  logs = np.log(r)
  half = scipy.stats.t.ppf(0.975, r.size - 1) * logs.std(ddof=1) / math.sqrt(r.size)
  assert (iv.estimate, iv.low, iv.high) == pytest.approx(np.exp([logs.mean(), logs.mean() - half,
                                                                 logs.mean() + half]), rel=1e-12)


def test_paired_interval_at_six_seeds_is_the_range_of_the_differences():
  # The 95 % sign-flip interval at n = 6 is exactly [min d, max d] (p = 2/64 just outside).
  a, b = np.array([1.0, 2.0, 3.5, 0.5, 2.5, 1.5]), np.array([0.5, 1.0, 1.0, 0.0, 1.0, 1.5])
  iv = rows.paired_interval(a, b)
  assert (iv.estimate, iv.low, iv.high) == pytest.approx(((a - b).mean(), (a - b).min(), (a - b).max()))


def test_one_seed_gives_its_value_and_no_interval():
  for iv in (rows.mean_interval([0.3]), rows.paired_interval([0.5], [0.2]), rows.ratio_interval([2.0]),
             rows.pooled_interval([3], [1], [10], [10])):
    assert iv.n == 1 and iv.low == -math.inf and iv.high == math.inf
  assert rows.pooled_interval([3], [1], [10], [20]).estimate == pytest.approx((3 / 10) / (1 / 20))


def test_pooled_interval_is_the_ratio_of_pooled_rates():
  a, b, ta, tb = [3, 5, 4, 6, 2, 5, 4, 3, 6, 5], [1, 2, 2, 3, 1, 2, 1, 2, 3, 2], [52] * 10, [52] * 10
  iv = rows.pooled_interval(a, b, ta, tb)
  assert iv.estimate == pytest.approx((sum(a) / sum(ta)) / (sum(b) / sum(tb)), rel=1e-12)
  assert iv.low < iv.estimate < iv.high


def test_make_row_reads_the_verdict_from_its_interval_and_keeps_what_the_stability_pass_needs():
  iv = rows.mean_interval(np.linspace(0.1, 0.3, 10))    # all above 0
  row = rows.make_row("c", "claim", "src", "p", interval=iv, paper_sign=+1, null=0.0, scale="difference")
  assert (row["direction"], row["estimate"], row["paper_sign"]) == ("holds", iv.estimate, 1)
  against = rows.make_row("c", "claim", "src", "p", interval=iv, paper_sign=-1, null=0.0, scale="difference")
  assert against["direction"] == "fails"
  ruled = rows.make_row("c", "claim", "src", "p", interval=iv, paper_sign=+1, direction="inconclusive",
                        reason="the grid cannot reach the paper's setting")
  assert ruled["direction"] == "inconclusive" and ruled["paper_sign"] is None   # a rule, not the interval
  named = rows.make_row("c", "claim", "src", "p", measurement="ε calibrated (ε* = 0.0573)",
                        measurement_id="ε calibrated")
  assert named["measurement_id"] == "ε calibrated"
  assert rows.make_row("c", "claim", "src", "p", measurement="ε = 0.3")["measurement_id"] == "ε = 0.3"


def test_not_run_and_not_measured_rows():
  r = rows.not_run("c", "claim", "src", "p", "python -m experiments.x --workdir DIR", "no workdir")
  assert (r["status"], r["direction"], r["command"], r["reason"]) == ("not run", "not run",
                                                                      "python -m experiments.x --workdir DIR",
                                                                      "no workdir")
  m = rows.not_measured("c", "claim", "src", "p", "ε = 0.3 is not in the grid", variant="v")
  assert (m["status"], m["variant"], m["estimate"]) == ("not measured", "v", None)
  assert "--no_run" in rows.not_run_reason("flip_rate", run_here=True)
  assert "--standard" in rows.not_run_reason("certify", run_here=False)


def test_reached_criterion_reads_the_flag_or_the_loss_within_float32_rounding():
  assert rows.reached_criterion(dict(converged=True, train_loss=0.2, loss_target=0.05))
  assert rows.reached_criterion(dict(converged=False, train_loss=0.05 * (1 + 1e-7), loss_target=0.05))
  assert not rows.reached_criterion(dict(converged=False, train_loss=0.051, loss_target=0.05))


def test_seed_bootstrap_averages_images_within_a_seed_then_resamples_seeds():
  # The images of a seed enter only through their mean: spreading each seed's images around the same mean
  # leaves the interval unchanged, and it equals a direct percentile bootstrap of the seed means.
  values = [0.1, 0.5, 0.2, 0.4, 0.3, 0.35, 0.15, 0.45, 0.25, 0.05]
  flat = [[np.full(7, v)] for v in values]
  spread = [[v + np.array([-0.3, 0.3, -0.1, 0.1, 0.0, 0.2, -0.2])] for v in values]
  stat = lambda m: float(m[:, 0].mean())  # noqa: E731
  est, low, high = rows.seed_bootstrap(flat, stat, n_resamples=4000)
  assert (est, low, high) == pytest.approx(rows.seed_bootstrap(spread, stat, n_resamples=4000), abs=1e-12)
  rng = np.random.default_rng(1)
  direct = np.array(values)[rng.integers(10, size=(200_000, 10))].mean(axis=1)
  assert est == pytest.approx(np.mean(values))
  assert (low, high) == pytest.approx(tuple(np.quantile(direct, [0.025, 0.975])), abs=0.01)
  # One seed: its spread is unknown, whatever its images say.
  assert rows.seed_bootstrap([[np.array([0.1, 0.9])]], stat) == (0.5, -np.inf, np.inf)


def test_seed_bootstrap_refuses_bad_groups():
  with pytest.raises(ValueError, match="at least one seed"):
    rows.seed_bootstrap([], lambda m: 0.0)
  with pytest.raises(ValueError, match="non-finite"):
    rows.seed_bootstrap([[np.array([np.nan])]], lambda m: 0.0)


def test_seed_mean_interval_is_the_t_or_sign_flip_interval_of_the_per_seed_values():
  import scipy.stats
  x = np.array([0.057, 0.151, 0.226, 0.1, -0.02, 0.08, 0.12, 0.05, 0.19, 0.03])
  t = rows.seed_mean_interval(x, paired=False)
  half = scipy.stats.t.ppf(0.975, 9) * x.std(ddof=1) / np.sqrt(10)
  assert (t.estimate, t.low, t.high, t.n, t.unit) == pytest.approx((x.mean(), x.mean() - half, x.mean() + half, 10,
                                                                    "seeds"))
  s = rows.seed_mean_interval(x, paired=True)
  assert s.method.startswith("sign_flip") and s.unit == "seeds" and s.low < x.mean() < s.high
  # 3 seeds: the sign-flip test can never reject at 5 %, so the interval is the whole line.
  three = rows.seed_mean_interval(x[:3], paired=True)
  assert (three.low, three.high) == (-np.inf, np.inf)
  with pytest.raises(ValueError, match="finite per-seed"):
    rows.seed_mean_interval([np.nan, 1.0], paired=False)


def test_seed_bootstrap_of_two_seeds_is_bounded_and_reads_its_level():
  """Catches a moved one-seed rule (``len(means) < 2`` as ``<= 2``) or a level that does not reach scipy: the mean
  of two resampled seeds is m₁, (m₁ + m₂)/2 or m₂ with probabilities 1/4, 1/2, 1/4, so the 95 % percentile
  interval is [m₁, m₂] and the 40 % one (quantiles 0.3 and 0.7) the single point (m₁ + m₂)/2. Each seed enters
  by the mean of its own images (0.2 from two images, 0.9 from one), not by a mean pooled over images."""
  groups = [[np.array([0.1, 0.3])], [np.array([0.9])]]
  stat = lambda m: float(m[:, 0].mean())  # noqa: E731
  assert rows.seed_bootstrap(groups, stat) == pytest.approx((0.55, 0.2, 0.9), rel=1e-12)
  assert rows.seed_bootstrap(groups, stat, level=0.4) == pytest.approx((0.55, 0.55, 0.55), rel=1e-12)
  np.testing.assert_allclose(rows.seed_means([[np.array([0.1, 0.3]), np.array([1.0])],
                                              [np.array([0.9]), np.array([2.0, 4.0, 6.0])]]), [[0.2, 1.0], [0.9, 4.0]])
  # A statistic that is not finite on some resample (a seed whose mean is 0 in a ratio) makes it undefined.
  with np.errstate(divide="ignore", invalid="ignore"):
    est, low, high = rows.seed_bootstrap([[np.array([0.0])], [np.array([1.0])]], lambda m: float(1 / m[:, 0].mean()))
  assert est == 2.0 and math.isnan(low) and math.isnan(high)


def test_pooled_interval_passes_its_level_to_the_delta_t_interval():
  """Catches a family's Bonferroni level dropped on the way to ``intervals.pooled_ratio_interval``: the 90 % ends are
  exp(θ ∓ t_{0.95, n−1}·se), se the seed-level delta-method standard error written out (the floor inactive)."""
  a, b = np.array([5.0, 30.0, 9.0, 22.0, 40.0]), np.array([10.0, 11.0, 8.0, 6.0, 14.0])
  ta, tb = np.array([50.0, 52.0, 48.0, 55.0, 51.0]), np.array([50.0, 53.0, 47.0, 55.0, 52.0])
  A, B, TA, TB = a.sum(), b.sum(), ta.sum(), tb.sum()
  se = math.sqrt(5 / 4 * np.sum((a / A - ta / TA - b / B + tb / TB) ** 2))
  theta = math.log((A / TA) / (B / TB))
  for level in (0.9, 0.99):
    iv = rows.pooled_interval(a, b, ta, tb, level=level)
    half = scipy.stats.t.ppf((1 + level) / 2, 4) * se
    assert iv.level == level and iv.n == 5
    assert (iv.low, iv.high) == pytest.approx((math.exp(theta - half), math.exp(theta + half)), rel=1e-12)
