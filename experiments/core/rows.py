"""Claim rows: the primitives every experiment's row builders share.

A row is a plain dict with the claim, the paper's value, our setting, our value with its 95 % interval and the
number of units behind it, and the verdict of ``experiments.core.verdicts`` (direction and magnitude). Each
experiment's builders live in ``experiments.<name>.claims``; ``experiments.claims.job`` finds the workdirs,
builds the rows through ``experiments.registry`` and writes them; ``experiments.claims.report`` renders them.

Intervals (``INTERVAL_METHODS``, ``experiments.core.intervals``): the inverted sign-flip test for paired per-seed
differences, Student's t for one model's per-seed statistic (on the log scale for ratios), the delta-t interval
on the log ratio of pooled flip counts for flip-rate ratios; Clopper–Pearson over images for
single-model accuracies and attack success rates. The differential-attention rows take the training seed as
the unit (each seed's images averaged first): the same sign-flip and t intervals for means of per-seed values,
a one-level percentile bootstrap over seeds (``seed_bootstrap``) for the other statistics.
Points whose training did not reach the criterion (record field ``converged`` false) are left out of every
comparison, and the row says how many.

Sources: arXiv 2603.13085 (NTK non-convergence, flip rates, sharpness), arXiv 2510.00517 (differential
attention), Havens et al. ICML 2024 (certification); the papers' numbers as in docs/theory.md#reported-figures.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple, Optional, Sequence

import numpy as np

from experiments.core import intervals
from experiments.core import tolerance
from experiments.core import verdicts
from experiments.core.verdicts import Interval

LEVEL = 0.95


# Interval methods, stated before the numbers and validated by simulation at the n the claims job uses
# (experiments.core.intervals; docs/theory.md#interval-methods-and-their-coverage): paired per-seed differences by
# the inverted exact sign-flip test, one model's per-seed statistic by Student's t, positive per-seed ratios by
# Student's t on the log scale, and ratios of pooled flip counts by the seed-level delta-t interval on the log
# ratio. Part of the rules version (experiments.core.rules_version).
INTERVAL_METHODS = {"paired difference": "sign_flip_interval", "mean": "t_interval (identity)",
                    "ratio": "t_interval (log)", "pooled ratio": "pooled_ratio_interval (delta_t)"}


def _single(values, method: str) -> Optional[Interval]:
  """One seed gives an estimate but no interval: (−∞, ∞), so no verdict is read from it."""
  v = np.asarray(values, float).ravel()
  if v.size == 1 and math.isfinite(v[0]):
    return Interval(float(v[0]), -math.inf, math.inf, LEVEL, 1, "seeds", f"{method} (one seed: no interval)")
  return None


def paired_interval(a, b, *, level: float = LEVEL) -> Interval:
  """Interval of the mean paired difference a − b over seeds (the inverted sign-flip test; one seed: (−∞, ∞)),
  at ``level`` (0.95; a family's Bonferroni level where one is read as a family)."""
  d = np.asarray(a, float) - np.asarray(b, float)
  return _single(d, "sign_flip") or intervals.sign_flip_interval(d, level=level)


def mean_interval(values) -> Interval:
  """Interval of the mean of one per-seed statistic (Student's t; one seed: (−∞, ∞))."""
  return _single(values, "student_t") or intervals.t_interval(values, level=LEVEL)


def ratio_interval(ratios) -> Interval:
  """Interval of the geometric mean of positive per-seed ratios (Student's t on the log scale; one seed:
  (−∞, ∞))."""
  return _single(ratios, "student_t_log") or intervals.t_interval(ratios, scale="log", level=LEVEL)


def pooled_interval(counts_a, counts_b, totals_a, totals_b, *, level: float = LEVEL) -> "verdicts.Interval":
  """Interval of the ratio of pooled rates of model A over model B across seeds (delta-t on the log ratio;
  one seed: its ratio with (−∞, ∞)), at ``level`` (0.95; a family's Bonferroni level)."""
  if len(counts_a) == 1 and min(float(counts_b[0]), float(totals_a[0]), float(totals_b[0])) > 0:
    return _single([(float(counts_a[0]) / float(totals_a[0])) / (float(counts_b[0]) / float(totals_b[0]))],
                   "pooled_ratio_delta_t")
  return intervals.pooled_ratio_interval(counts_a, counts_b, totals_a, totals_b, level=level)


MODEL_NAMES = {"relu": "2L-ReLU", "mlp_attn": "MLP-Attn"}


ARXIV_NTK, ARXIV_DA, LOFAST = "arXiv 2603.13085", "arXiv 2510.00517", "Havens et al., ICML 2024"


class Source(NamedTuple):
  """One experiment's workdir: experiment (e.g. 'flip_rate'), path, config (config.json as a dict, {} if
  absent), records (``experiments.core.workdir.read_records``), variant (the protocol fields that differ from
  the quick config, as 'field=value' strings; empty for the quick setting itself) and command (the command
  line that reproduces the workdir)."""
  experiment: str
  path: str
  config: dict
  records: list
  variant: tuple = ()
  command: str = ""


def make_row(claim_id: str, claim: str, source: str, paper_value: str, *, setting: str = "", interval=None,
             paper_sign: Optional[int] = None, null: float = 0.0, paper_range=None, scale: str = "difference",
             variant: str = "", status: str = "measured", command: str = "", produced_by: str = "",
             note: str = "", direction: Optional[str] = None, reason: str = "", measurement: str = "",
             primary: bool = True, measurement_id: str = "") -> dict:
  """A claims row. With an ``interval`` and a ``paper_sign`` the verdict comes from
  ``experiments.core.verdicts.verdict``; ``direction``/``reason`` override the direction (e.g. a grid that cannot
  reach the paper's setting).

  ``measurement`` names the measurement choice behind the row (e.g. "centred: ‖H(K_T − K₀)H‖_F/‖HK₀H‖_F");
  rows of one claim (same claim_id and variant) that differ only in it are that claim's measurement choices,
  and the claims report summarises them ("holds under every choice", "depends on: …"). ``primary`` marks the
  one read first: the paper's own quantity, or where a rule stated before the numbers puts another first
  (the differential-attention rows' ε*, with the paper's 1/255 beside it); "" and True for a claim with a
  single measurement. ``measurement_id`` names the choice where ``measurement`` embeds a measured value
  (e.g. "ε calibrated by interpolation" for "… (ε* = 0.0573)"): the stability pass matches rows across reruns
  by it, so a row whose ε* moves under other numerics is still compared (default: ``measurement``).

  ``paper_sign`` is kept in the row when the verdict came from it (``direction`` not overridden), so that
  the stability pass can read the verdict of a widened interval (``verdicts.band_verdict``)."""
  row = dict(claim_id=claim_id, claim=claim, source=source, paper_value=paper_value, setting=setting,
             variant=variant, measurement=measurement, measurement_id=measurement_id or measurement,
             primary=primary, status=status, command=command, produced_by=produced_by, note=note, scale=scale,
             null=null, paper_range=None if paper_range is None else [float(v) for v in paper_range],
             paper_sign=paper_sign if direction is None else None,
             estimate=None, low=None, high=None, level=LEVEL, n=0, unit=None, method=None, direction=status,
             magnitude=None, reason=reason or status)
  if interval is not None:
    row.update(estimate=interval.estimate, low=interval.low, high=interval.high, level=interval.level,
               n=interval.n, unit=interval.unit, method=interval.method)
    if paper_sign is not None:
      v = verdicts.verdict(interval, paper_sign, paper_range=paper_range, null=null, scale=scale)
      row.update(direction=v.direction, magnitude=v.magnitude, reason=v.reason)
  if direction is not None:
    row.update(direction=direction, reason=reason)
  return row


def not_run(claim_id: str, claim: str, source: str, paper_value: str, command: str, why: str) -> dict:
  """The row of a claim whose experiment is absent: status 'not run', with the command that fills it."""
  return make_row(claim_id, claim, source, paper_value, status="not run", command=command, reason=why)


def not_measured(claim_id: str, claim: str, source: str, paper_value: str, why: str, *, variant: str = "",
                 command: str = "", produced_by: str = "") -> dict:
  """The row of a claim whose workdir exists but lacks the points it needs (says which)."""
  return make_row(claim_id, claim, source, paper_value, status="not measured", reason=why, variant=variant,
                  command=command, produced_by=produced_by)


def reached_criterion(r: dict) -> bool:
  """Whether a record's training reached its loss criterion: the flag, or the final loss on the target within
  float32 rounding (``experiments.core.tolerance.reached_target``)."""
  return tolerance.reached_target(r)


# Differential-attention rows: the training seed is the unit. Each seed's per-image values are averaged within
# the seed first; the interval is then over seeds (images are nested in seeds: the depth-1 ViT's ASR at ε* was
# 0.435, 0.485, 0.580 on the 3 exploratory seeds, against an image-level error ≈ 0.017; docs/diff_attention.md).
N_BOOT = 4000
BOOT_SEED = 0
METHOD = "seed_bootstrap"
UNIT = "seeds"


def seed_means(groups: Sequence[Sequence[np.ndarray]]) -> np.ndarray:
  """Per training seed s and model m, the mean over images of x[s][m]: shape [n_seeds, n_models], float64.

  Args:
    groups: per seed, per model, the per-image values (1-D arrays; models of one seed that share images may be
      passed already paired, e.g. as one array of differences).

  Raises:
    ValueError: no seeds, models of different counts across seeds, an empty or non-1-D image array, or a
      non-finite value.
  """
  if not groups:
    raise ValueError("seed_means needs at least one seed")
  n_models = len(groups[0])
  if any(len(g) != n_models for g in groups):
    raise ValueError("every seed must hold the same models")
  arrays = [[np.asarray(x, np.float64) for x in g] for g in groups]
  if any(a.ndim != 1 or a.size == 0 for g in arrays for a in g):
    raise ValueError("every model of every seed needs a 1-D array of at least one image value")
  if not all(np.all(np.isfinite(a)) for g in arrays for a in g):
    raise ValueError("seed_means got non-finite image values (a diverged model or a broken record)")
  return np.array([[a.mean() for a in g] for g in arrays])


def seed_bootstrap(groups: Sequence[Sequence[np.ndarray]], statistic: Callable, *, n_resamples: int = N_BOOT,
                   seed: int = BOOT_SEED, level: float = LEVEL):
  """One-level percentile bootstrap over training seeds of a statistic of the per-seed image means
  (``seed_means``): ``scipy.stats.bootstrap`` resampling the seeds with replacement, method 'percentile'.
  For statistics that are not a mean of one value per seed (e.g. the largest of several models' mean ASRs);
  a mean of per-seed values takes ``intervals.t_interval`` / ``intervals.sign_flip_interval`` instead.
  At 10 seeds a percentile interval covers somewhat less than its level (about 0.91 for a normal mean).

  Args:
    groups: as ``seed_means``.
    statistic: maps per-seed means [n_seeds_drawn, n_models] to a number.
    n_resamples, seed, level: replicates, RNG seed, coverage.

  Returns:
    (estimate, low, high): the statistic on the observed means and the percentile interval; one seed gives
    (estimate, −inf, +inf) (the seed-to-seed spread is unknown). A statistic that is not finite on some
    replicate makes the interval undefined (NaN, NaN): dropping those replicates would bias it.

  Raises:
    ValueError: as ``seed_means``.
  """
  import scipy.stats
  means = seed_means(groups)
  estimate = float(statistic(means))
  if len(means) < 2:
    return estimate, -math.inf, math.inf
  result = scipy.stats.bootstrap((np.arange(len(means)),), lambda index: float(statistic(means[index.astype(int)])),
                                 n_resamples=n_resamples, vectorized=False, confidence_level=level,
                                 method="percentile", rng=np.random.default_rng(seed))
  if not np.all(np.isfinite(result.bootstrap_distribution)):
    return estimate, math.nan, math.nan
  return estimate, float(result.confidence_interval.low), float(result.confidence_interval.high)


def seed_mean_interval(values, *, paired: bool) -> Interval:
  """The interval of the mean over training seeds of one value per seed: ``paired_interval`` (the inverted
  sign-flip test) for a paired difference (``paired``), ``mean_interval`` (Student's t) otherwise; unit
  'seeds'. One seed gives the whole line (the spread is unknown).

  Raises:
    ValueError: non-finite or empty ``values``.
  """
  x = np.asarray(values, np.float64)
  if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
    raise ValueError(f"seed_mean_interval needs finite per-seed values, got {x!r}")
  interval = paired_interval(x, np.zeros_like(x)) if paired else mean_interval(x)
  return interval._replace(unit=UNIT)


def not_run_reason(experiment: str, *, run_here: bool) -> str:
  """Why an experiment's rows are 'not run': the claims job runs the experiment unless ``--no_run``
  (``run_here``), or only with ``--standard``."""
  return (f"no {experiment} workdir; the claims job runs it unless --no_run is given" if run_here
          else f"no {experiment} workdir; the claims job runs it only with --standard (see the command)")
