"""Claim rows of sharpness of the minima (arXiv 2603.13085), from the records of an ``experiments.landscape`` workdir
(``experiments.core.rows.Source``); the row primitives and intervals are ``experiments.core.rows``."""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np

from experiments.core import seed_subsets, tolerance, verdicts
from experiments.core.claim import Claim, ExperimentClaims, ratio_cases
from experiments.core.rows import (
  ARXIV_NTK,
  Source,
  make_row,
  not_measured,
  not_run,
  ratio_interval,
)
from experiments.flip_rate.claims import flip_width


MATCH_RTOL = verdicts.MATCH_RTOL  # the two train losses agree within 2 % of the larger


def _matched_pair(a: dict, b: dict, prefix: str = "", field: str = "top_eigenvalues") -> bool:
  """Two landscape records of one seed are compared only at one train loss: their losses (at the rescaled
  point for ``rescaled_*`` fields, as trained otherwise) differ by at most ``MATCH_RTOL`` of the larger.
  Both reaching the loss target is not enough: L-BFGS stops at the first iterate at or below it, and one
  model can end far below (2L-ReLU 0.035 against MLP-Attn 0.0496 on the quick grid)."""
  key = prefix + ("rescaled_train_loss" if field.startswith("rescaled_") else "train_loss")
  if key not in a or key not in b:
    return False
  la, lb = float(a[key]), float(b[key])
  return math.isfinite(la) and math.isfinite(lb) and abs(la - lb) <= MATCH_RTOL * max(abs(la), abs(lb))


def _first(value) -> float:
  """The top value of a record field: the first of a list of eigenvalues, or the number itself."""
  return float(value[0] if isinstance(value, (list, tuple)) else value)


def _sharpness_data(records) -> str:
  """The seeds' training data in a sharpness row: per-seed subsets (``experiments.core.seed_subsets``) or, for
  records written before them (no data_draw field), one subset for every seed, so the seed interval covers
  initialisation only."""
  return (seed_subsets.overlap_text(records) or "one training subset for every seed (records before per-seed "
          "subsets): the interval covers initialisation, not the data")


def sharpness_rows(src: Source) -> list[dict]:
  """Claim: 2L-ReLU sits in sharper minima than MLP-Attn (arXiv 2603.13085).

  Statistic: per seed, log(λ₁(2L-ReLU) / λ₁(MLP-Attn)) of the top Hessian eigenvalue of the training loss
  (paired by seed); Student's t on the log scale, shown as the geometric-mean ratio. Holds if the interval
  lies above 1. Variants: the adaptive sharpness (top eigenvalue of diag|θ| H diag|θ|, Kwon et al. 2021,
  invariant under the ReLU rescaling) and the trained readout (landscape fields prefixed ``trained_``).
  A seed counts only when both models' train losses agree within ``MATCH_RTOL`` = 2 % (``_matched_pair``).
  The primary measurement is λ₁ at equal train loss: the lower-loss model's first layer scaled until its loss
  equals the other's (``rescaled_*`` record fields, ``experiments.landscape.run``); the as-trained λ₁, the
  adaptive sharpness and the filter-normalised ±1-step loss rise (Li et al. 2018) are measurement choices
  beside it. The paper gives no number. Both models of a seed
  train on that seed's training subset (disjoint blocks of the full files, or independent draws from the
  embedded pool, ``experiments.core.seed_subsets``; the setting says which).
  """
  rows = []
  recs = src.records
  claim = "2L-ReLU sits in sharper minima than MLP-Attn (top Hessian eigenvalue)"
  prefixes = [p for p in ("", "trained_") if any(p + "top_eigenvalues" in r for r in recs)]
  for task in sorted({r["task"] for r in recs}, key=lambda t: (t != "mnist", t)):
    for prefix in prefixes:
      readout = "trained" if prefix else "fixed"
      fields = (("top_eigenvalues", "raw λ₁ of the Hessian, as trained"),
                ("adaptive_sharpness", "adaptive sharpness λ₁(diag|θ| H diag|θ|), as trained"),
                ("loss_rise", "filter-normalised ±1-step loss rise, as trained"),
                ("rescaled_top_eigenvalues", "raw λ₁ at equal train loss (the lower-loss model's first layer "
                 "rescaled)"),
                ("rescaled_adaptive_sharpness", "adaptive sharpness at equal train loss"),
                ("rescaled_loss_rise", "filter-normalised ±1-step loss rise at equal train loss"))
      primary_field = ("rescaled_top_eigenvalues" if any(prefix + "rescaled_top_eigenvalues" in r for r in recs)
                       else "top_eigenvalues")
      for field, label in fields:
        key = prefix + field
        sel = [r for r in recs if r["task"] == task and key in r]
        if not sel:
          continue
        width = flip_width(sel)
        sel = [r for r in sel if r["width"] == width]
        by = {(r["model"], r["seed"]): r for r in sel}
        seeds = sorted({s for (m, s) in by if (("relu", s) in by and ("mlp_attn", s) in by)})
        kept = [s for s in seeds if _matched_pair(by["relu", s], by["mlp_attn", s], prefix, field)
                and _first(by["relu", s][key]) > 0 and _first(by["mlp_attn", s][key]) > 0]
        main = task == "mnist" and prefix == prefixes[0] and field == primary_field and not src.variant
        variant = "; ".join(([] if task == "mnist" else [f"task={task}"])
                            + ([] if prefix == prefixes[0] else [f"readout={readout}"])
                            + ([] if field == primary_field else [label]) + list(src.variant))
        left = len(seeds) - len(kept)
        if not kept:
          rows.append(not_measured("sharpness", claim, ARXIV_NTK, "2L-ReLU sharper (no number)",
                                   f"no seed with both models at one train loss (within {100 * MATCH_RTOL:g} %) "
                                   "and a positive value",
                                   variant=variant, produced_by=src.command))
          continue
        logs_r = [math.log(_first(by["relu", s][key])) for s in kept]
        logs_m = [math.log(_first(by["mlp_attn", s][key])) for s in kept]
        interval = ratio_interval(np.exp(np.subtract(logs_r, logs_m)))
        loss_key = prefix + ("rescaled_train_loss" if field.startswith("rescaled_") else "train_loss")
        loss = {m: np.mean([float(by[m, s][loss_key]) for s in kept]) for m in ("relu", "mlp_attn")}
        rows.append(make_row("sharpness", claim, ARXIV_NTK, "2L-ReLU sharper (no number)", interval=interval,
                             paper_sign=+1, null=1.0, scale="ratio", variant="" if main else variant,
                             produced_by=src.command,
                             note=f"{left} seeds left out (train losses differ by more than {100 * MATCH_RTOL:g} %, "
                                  "or a value ≤ 0)" if left else "",
                             setting=f"{task}, width {width}, {readout} readout, {label}; ratio 2L-ReLU / MLP-Attn "
                                 f"(geometric mean over seeds); train loss {loss['relu']:.3g} / "
                                 f"{loss['mlp_attn']:.3g}; "
                                 f"{_sharpness_data([by[m, s] for m in ('relu', 'mlp_attn') for s in kept])}"))
  return rows


# ----------------------------------------------------------------------------- the claims job's hooks (SPEC)


def claims_config():
  """The sharpness config the claims job runs: the quick config with 10 seeds."""
  from experiments.landscape.config import get_config
  return dataclasses.replace(get_config(), seeds=tuple(range(10)))


def claim_rows(sources: Sequence[Source], root: str, include_not_run: bool) -> list[dict]:
  """The sharpness rows of every landscape source."""
  return [row for s in sources for row in sharpness_rows(s)]


def not_run_rows(root: str, why: str) -> list[dict]:
  """The sharpness row when there is no landscape workdir."""
  return [not_run("sharpness", "2L-ReLU sits in sharper minima than MLP-Attn", ARXIV_NTK,
                  "see docs/theory.md#reported-figures", f"python -m experiments.landscape --workdir {root}/landscape",
                  why)]


# ----------------------------------------------------------------------------- declared claims

CLAIMS = ExperimentClaims(
    claims=(
        Claim("sharpness", "2L-ReLU sits in sharper minima; MLP-Attn in wider, flatter basins",
              f"{ARXIV_NTK}, the loss-landscape comparison", "per seed, 2L-ReLU's top Hessian eigenvalue over "
              "MLP-Attn's at a common train loss (geometric mean)", "direction",
              "Student's t interval of the log ratio excludes 0 above, i.e. the ratio's excludes 1 (10 seeds)",
              interval="ratio", paper_sign=+1, null=1.0, scale="ratio", cases=ratio_cases()),
    ),
    claim_rows=claim_rows, not_run_rows=not_run_rows, claims_config=claims_config)
