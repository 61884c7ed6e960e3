"""Simulated coverage of the interval methods of ``experiments.core.intervals`` (and, as baselines, the bootstrap
intervals of ``experiments.core.verdicts`` that the claim rows use today) at the numbers of seeds the claims job
uses, on named populations with known parameters.

  .venv/bin/python scripts/interval_coverage.py --out /tmp/interval_coverage.md

Prints a markdown table (method, population, n, coverage, miss below, miss above, median width / t width,
pass) and writes it, with the settings, to ``--out``. docs/theory.md#interval-methods-and-their-coverage holds
the table of the default run (2,000 replications, 2,000 resamples, seed 0; 9–10 minutes on 2 shared cores).

Definitions, per (method, population, n), over ``--replications`` samples drawn from numpy's PCG64 seeded
with (``--seed``, population index, n), so every cell is reproducible on its own:
  * coverage: the fraction of intervals [low, high] with low ≤ θ ≤ high, θ the population's value of the
    method's estimand (the arithmetic mean; the geometric mean exp(E log X) for the log-scale t interval; the
    ratio of the two models' rates for the pooled ratio);
  * miss below / miss above: where θ falls when the interval misses it: the fraction with θ < low (θ below
    the interval) / with θ > high (θ above it: an upper end too low, the typical miss on right-skewed data);
  * width / t width: the median width over replications divided by the median width of the reference on the
    same samples: for means, Student's t interval on the identity scale; for ratios, widths on the log scale,
    and the reference is the t interval of the log ratio with the seed-level delta-method standard error
    *without* the binomial floor (``experiments.core.intervals._log_ratio_se(floor=False)``);
  * pass: coverage ≥ 0.92, each miss ≤ 0.04 (the point estimates; a Monte-Carlo standard error of about
    0.005 for coverage at 2,000 replications), and width / t width ≤ 1.3 *on normal data at the same n* for
    the mean methods (a method cannot pass by being wide), on the row's own population for the ratio methods;
    the log-scale t interval is the reference on its own scale (no width condition). A failed row names the
    conditions it misses.

Populations for means (of per-seed values, or of paired differences): normal N(0, 1); lognormal exp(N(0, σ²))
for σ = 1 and 1.5; gamma(2) (shape 2, scale 1); Student's t with 3 degrees of freedom; the bimodal mixture
0.5·N(−2, 1) + 0.5·N(2, 1). For ratios, paired beta-binomial flip counts: per seed one total N_s uniform on
48–56 (the top images) shared by both models; model A's and B's per-seed rates are Beta(p(1 − ρ)/ρ,
(1 − p)(1 − ρ)/ρ) (mean p, intra-seed correlation ρ) coupled by a Gaussian copula with correlation 0.5 (one
seed trains both models); counts are binomial(N_s, rate). Rates 0.45 / 0.30 (ratio 1.5; the brief's rate
0.3) and 0.06 / 0.03 (ratio 2; the flip rates the paper reports are a few per cent), ρ = 0.05 and 0.2.
"""
from __future__ import annotations

import argparse
import math
import pathlib
import sys
import time

import numpy as np
import scipy.special
import scipy.stats

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from experiments.core import intervals
from experiments.core import verdicts

NS = (5, 10, 15, 30, 35)
LEVEL = 0.95
MIN_COVERAGE, MAX_MISS, MAX_WIDTH = 0.92, 0.04, 1.3


def _lognormal(sigma):
  return lambda rng, r, n: np.exp(sigma * rng.standard_normal((r, n)))


# name -> (draw(rng, replications, n) -> [replications, n], mean, geometric mean or None if not positive)
MEAN_POPULATIONS = {
    "normal": (lambda rng, r, n: rng.standard_normal((r, n)), 0.0, None),
    "lognormal σ=1": (_lognormal(1.0), math.exp(0.5), 1.0),
    "lognormal σ=1.5": (_lognormal(1.5), math.exp(1.125), 1.0),
    "gamma(2)": (lambda rng, r, n: rng.gamma(2.0, 1.0, (r, n)), 2.0, math.exp(scipy.special.digamma(2.0))),
    "t₃": (lambda rng, r, n: rng.standard_t(3, (r, n)), 0.0, None),
    "bimodal ±2": (lambda rng, r, n: rng.standard_normal((r, n)) + np.where(rng.random((r, n)) < 0.5, -2.0, 2.0),
                   0.0, None),
}
# name -> (rate of model A, rate of model B, intra-seed correlation ρ)
RATIO_POPULATIONS = {
    "beta-binomial 0.45/0.30, ρ=0.05": (0.45, 0.30, 0.05),
    "beta-binomial 0.45/0.30, ρ=0.2": (0.45, 0.30, 0.2),
    "beta-binomial 0.06/0.03, ρ=0.05": (0.06, 0.03, 0.05),
    "beta-binomial 0.06/0.03, ρ=0.2": (0.06, 0.03, 0.2),
}
PAIR_CORRELATION = 0.5


def draw_counts(rng, r: int, n: int, pa: float, pb: float, rho: float):
  """Paired beta-binomial counts: (a, b, totals, totals), each [r, n] float64."""
  totals = rng.integers(48, 57, size=(r, n))
  z1 = rng.standard_normal((r, n))
  z2 = PAIR_CORRELATION * z1 + math.sqrt(1 - PAIR_CORRELATION ** 2) * rng.standard_normal((r, n))
  rates = [scipy.stats.beta.ppf(scipy.stats.norm.cdf(z), p * (1 - rho) / rho, (1 - p) * (1 - rho) / rho)
           for z, p in ((z1, pa), (z2, pb))]
  a, b = (rng.binomial(totals, rate).astype(np.float64) for rate in rates)
  return a, b, totals.astype(np.float64), totals.astype(np.float64)


def summarize(low, high, truth, width, ref_width) -> dict:
  with np.errstate(invalid="ignore"):
    ratio = float(np.median(width) / np.median(ref_width)) if ref_width is not None else None
  return dict(coverage=float(np.mean((low <= truth) & (truth <= high))), below=float(np.mean(truth < low)),
              above=float(np.mean(truth > high)), width=ratio)


def mean_cells(name, draw, mean, geo, n, replications, resamples, rng):
  x = draw(rng, replications, n)
  _, lo_t, hi_t = intervals._t_ends(x, LEVEL)
  ref = hi_t - lo_t
  out = {"t, identity scale": summarize(lo_t, hi_t, mean, ref, ref)}
  if geo is not None:
    _, lo, hi = intervals._t_ends(np.log(x), LEVEL)
    out["t, log scale (geometric mean)"] = summarize(np.exp(lo), np.exp(hi), geo, hi - lo, None)
  _, lo, hi = intervals._sign_flip_ends(x, LEVEL, seed=0, n_resamples=resamples)
  out["sign-flip, inverted"] = summarize(lo, hi, mean, hi - lo, ref)
  ivs = [verdicts.bootstrap_mean(row, seed=0, n_resamples=resamples, level=LEVEL) for row in x]
  lo, hi = np.array([iv.low for iv in ivs]), np.array([iv.high for iv in ivs])
  out["baseline: verdicts.bootstrap_mean (bootstrap-t, tails 0.6·α/2)"] = summarize(lo, hi, mean, hi - lo, ref)
  return out


def ratio_cells(name, pa, pb, rho, n, replications, resamples, rng):
  a, b, ta, tb = draw_counts(rng, replications, n, pa, pb, rho)
  truth = math.log(pa / pb)
  theta, se0 = intervals._log_ratio_se(a, b, ta, tb, floor=False)
  ref = 2 * scipy.stats.t.ppf(0.5 + LEVEL / 2, n - 1) * se0
  out = {}
  for method, label in (("delta_t", "pooled ratio, delta-t on log (default)"),
                        ("bootstrap_t", "pooled ratio, bootstrap-t on log")):
    _, lo, hi = intervals._pooled_ratio_ends(a, b, ta, tb, LEVEL, method, seed=0, n_resamples=resamples)
    out[label] = summarize(lo, hi, truth, hi - lo, ref)
  ivs = [verdicts.pooled_ratio(a[i], b[i], totals_a=ta[i], totals_b=tb[i], seed=0, n_resamples=resamples,
                               level=LEVEL) for i in range(replications)]
  with np.errstate(divide="ignore"):
    lo, hi = np.log([iv.low for iv in ivs]), np.log([iv.high for iv in ivs])
  lo, hi = np.where(np.isnan(lo), np.inf, lo), np.where(np.isnan(hi), -np.inf, hi)  # undefined: covers nothing
  with np.errstate(invalid="ignore"):
    width = np.where(np.isnan(hi - lo), np.inf, hi - lo)
  out["baseline: verdicts.pooled_ratio (percentile)"] = summarize(lo, hi, truth, width, ref)
  return out


def verdict_text(cell: dict, width) -> str:
  missed = []
  if cell["coverage"] < MIN_COVERAGE:
    missed.append("coverage")
  if cell["below"] > MAX_MISS:
    missed.append("miss below")
  if cell["above"] > MAX_MISS:
    missed.append("miss above")
  if width is not None and not width <= MAX_WIDTH:
    missed.append("width")
  return "pass" if not missed else "**fail** (" + ", ".join(missed) + ")"


def _width_text(w) -> str:
  if w is None:
    return "–"
  return "∞" if math.isinf(w) else f"{w:.2f}"


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
  parser.add_argument("--replications", type=int, default=2000, help="samples per cell (default 2000)")
  parser.add_argument("--resamples", type=int, default=2000,
                      help="bootstrap resamples and Monte-Carlo sign patterns (n > 20) per interval (default 2000)")
  parser.add_argument("--seed", type=int, default=0, help="numpy seed of the simulated samples (default 0)")
  parser.add_argument("--ns", type=int, nargs="+", default=list(NS), help="numbers of seeds (default 5 10 15 30 35)")
  parser.add_argument("--out", type=pathlib.Path, required=True, help="markdown file to write the table to")
  args = parser.parse_args(argv)
  if args.replications < 1 or args.resamples < 1 or min(args.ns) < 2:
    parser.error("--replications and --resamples must be ≥ 1 and every n ≥ 2")
  start = time.time()
  cells = []  # (method, population, n, summary)
  for index, (name, (draw, mean, geo)) in enumerate(MEAN_POPULATIONS.items()):
    for n in args.ns:
      rng = np.random.default_rng([args.seed, index, n])
      for method, cell in mean_cells(name, draw, mean, geo, n, args.replications, args.resamples, rng).items():
        cells.append((method, name, n, cell))
      print(f"[{time.time() - start:6.0f} s] {name}, n = {n}", file=sys.stderr, flush=True)
  offset = len(MEAN_POPULATIONS)
  for index, (name, (pa, pb, rho)) in enumerate(RATIO_POPULATIONS.items()):
    for n in args.ns:
      rng = np.random.default_rng([args.seed, offset + index, n])
      for method, cell in ratio_cells(name, pa, pb, rho, n, args.replications, args.resamples, rng).items():
        cells.append((method, name, n, cell))
      print(f"[{time.time() - start:6.0f} s] {name}, n = {n}", file=sys.stderr, flush=True)
  normal_width = {(m, n): c["width"] for m, p, n, c in cells if p == "normal"}
  order = {m: i for i, m in enumerate(dict.fromkeys(m for m, _, _, _ in cells))}
  cells.sort(key=lambda c: order[c[0]])
  lines = ["| method | population | n | coverage | miss below | miss above | width / t width | pass |",
           "|---|---|---:|---:|---:|---:|---:|---|"]
  for method, population, n, cell in cells:
    ratio_method = population in RATIO_POPULATIONS
    width_rule = cell["width"] if ratio_method else normal_width.get((method, n))
    lines.append(f"| {method} | {population} | {n} | {cell['coverage']:.3f} | {cell['below']:.3f} | "
                 f"{cell['above']:.3f} | {_width_text(cell['width'])} | {verdict_text(cell, width_rule)} |")
  elapsed = time.time() - start
  header = (f"Coverage at level {LEVEL} over {args.replications} replications per cell; {args.resamples} "
            f"bootstrap resamples / Monte-Carlo sign patterns per interval; seed {args.seed}; "
            f"n ∈ {{{', '.join(map(str, args.ns))}}}; {elapsed:.0f} s.\n"
            f"Command: `.venv/bin/python scripts/interval_coverage.py --replications {args.replications} "
            f"--resamples {args.resamples} --seed {args.seed} --ns {' '.join(map(str, args.ns))} --out PATH`\n")
  text = header + "\n" + "\n".join(lines) + "\n"
  print(text)
  args.out.write_text(text)
  return 0


if __name__ == "__main__":
  sys.exit(main())
