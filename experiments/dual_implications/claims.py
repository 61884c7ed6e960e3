"""Claim rows of the dual implications: kernel fits of top- and bottom-mode targets (arXiv 2603.13085), from the
records of an ``experiments.dual_implications`` workdir (``experiments.core.rows.Source``); the row primitives and
intervals are ``experiments.core.rows``."""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from experiments.core import seed_subsets
from experiments.core.claim import Claim, ExperimentClaims, direction_cases
from experiments.core.rows import (
  ARXIV_NTK,
  MODEL_NAMES,
  Source,
  make_row,
  not_run,
  paired_interval,
)


def dual_differences(records, dataset: str, target: str, kind: str, field: str) -> tuple[list, list]:
  """(2L-ReLU values, MLP-Attn values) of ``field`` paired by (draw, seed)."""
  by = {}
  for r in records:
    if (r["dataset"], r["target"], r["kind"]) == (dataset, target, kind) and r.get(field) is not None:
      by.setdefault((r["draw"], r["seed"]), {})[r["model"]] = float(r[field])
  pairs = [v for _, v in sorted(by.items(), key=lambda kv: (kv[0][0], -1 if kv[0][1] is None else kv[0][1]))
           if set(v) >= {"relu", "mlp_attn"}]
  return [v["relu"] for v in pairs], [v["mlp_attn"] for v in pairs]


# (record field, measurement, primary) of the kernel rows: the kernels on the unit-norm feature rows the networks
# see (primary) or on the raw features, each at the run's fixed ridge scale or at the scale chosen on a validation
# split of the training rows (never the test targets; issue 27, item 4).
DUAL_MEASUREMENTS = (
    ("kernel_error", "unit-norm feature rows, ridge {ridge}·tr(K)/n", True),
    ("kernel_error_validated", "unit-norm feature rows, ridge chosen on a validation split", False),
    ("raw_kernel_error", "raw features, ridge {ridge}·tr(K)/n", False),
    ("raw_kernel_error_validated", "raw features, ridge chosen on a validation split", False),
)


def _ridge_choice_text(records, dataset: str, target: str, kind: str, field: str) -> str:
  """How a validated row's ridge was chosen: the grid, the held-out rows and the scales picked per model."""
  chosen_field = field.replace("kernel_error_validated", "ridge_scale_validated")
  sel = [r for r in records if (r["dataset"], r["target"], r["kind"]) == (dataset, target, kind)
         and r.get(chosen_field) is not None]
  if not sel:
    return ""
  grid = sel[0].get("ridge_grid") or []
  picked = {m: sorted({float(r[chosen_field]) for r in sel if r["model"] == m}) for m in ("relu", "mlp_attn")}
  return (f"; ridge scale chosen per draw from {{{', '.join(f'{g:g}' for g in grid)}}} by the relative error on "
          f"{sel[0].get('n_validation', '?')} held-out training rows (chosen: "
          + ", ".join(f"{MODEL_NAMES[m]} {'/'.join(f'{v:g}' for v in vs)}" for m, vs in picked.items() if vs) + ")")


def dual_implication_rows(src: Source) -> list[dict]:
  """The benefit half of "dual implications": MLP-Attn's kernel fits top-mode targets better (its test
  error is lower than 2L-ReLU's) and bottom-mode targets worse. Per data set and target kind, the paired
  difference err(2L-ReLU) − err(MLP-Attn) over target draws (K∞: the main row) or draws × seeds (K₀, the
  trained networks: variants), the inverted sign-flip interval; the paper's sign is + for top-mode targets and − for
  bottom-mode ones. The random-direction and real-label targets are context rows without a paper sign.
  Kernel rows come in the measurement choices of ``DUAL_MEASUREMENTS`` (unit-norm feature rows, primary, or
  raw features; the fixed ridge or one chosen on a validation split of the training rows), where the
  records hold them; the claims report says which choice flips a row."""
  rows = []
  datasets = sorted({r["dataset"] for r in src.records}, key=lambda d: (d != "mnist", d))
  sources = (("kinf", "kernel_error", "K∞ kernel regression", "draws"),
             ("finite", "kernel_error", "K₀ kernel regression", "draws × seeds"),
             ("finite", "network_error", "the trained networks", "draws × network seeds"))
  ridge = src.config.get("ridge_scale", 1e-3) if src.config else 1e-3
  for dataset in datasets:
    data = (seed_subsets.overlap_text([r for r in src.records if r["dataset"] == dataset])
            .replace("per-seed", "per-draw").replace("two seeds", "two draws")
            or "one data subset for every draw (records before per-draw subsets)")
    for target, sign in (("top", +1), ("bottom", -1), ("random", None), ("labels", None)):
      for j, (kind, base_field, what, units) in enumerate(sources):
        measurements = (DUAL_MEASUREMENTS if base_field == "kernel_error" else ((base_field, "", True),))
        present = [m for m in measurements if len(dual_differences(src.records, dataset, target, kind, m[0])[0]) >= 2]
        for field, measurement, primary in present:
          relu, attn = dual_differences(src.records, dataset, target, kind, field)
          measurement = measurement.format(ridge=f"{ridge:g}") if len(present) > 1 else ""
          variant = "; ".join(([] if dataset == datasets[0] else [f"dataset={dataset}"])
                              + ([] if j == 0 else [f"error of {what}"]) + list(src.variant))
          claim = {"top": "MLP-Attn fits top-mode targets better than 2L-ReLU (dual implications, benefit)",
                   "bottom": "MLP-Attn fits bottom-mode targets worse than 2L-ReLU (dual implications, cost)",
                   "random": "context: random-direction targets", "labels": "context: the real one-hot labels"}
          r0 = next(r for r in src.records if r["dataset"] == dataset)
          features = ("" if not measurement else f", {measurement}"
                      + (_ridge_choice_text(src.records, dataset, target, kind, field) if "validated" in field else ""))
          setting = (f"{dataset}, n = {r0['n_train']} / {r0['n_test']}, k = {r0['k']}, test relative error of "
                     f"{what}{features}, err(2L-ReLU) − err(MLP-Attn) over {len(relu)} {units}; 2L-ReLU "
                     f"{np.mean(relu):.4g}, MLP-Attn {np.mean(attn):.4g}; {data}")
          interval = paired_interval(relu, attn)
          if sign is None:
            rows.append(make_row(f"dual_{target}", claim[target], ARXIV_NTK, "– (no claim)", interval=interval,
                                 variant=variant, produced_by=src.command, setting=setting, direction="context",
                                 reason="no paper claim: where natural data sits between the two cases",
                                 measurement=measurement, primary=primary))
          else:
            rows.append(make_row(f"dual_{target}", claim[target], ARXIV_NTK,
                                 "lower error on top-mode, higher on bottom-mode targets (no number)",
                                 interval=interval, paper_sign=sign, null=0.0, variant=variant,
                                 produced_by=src.command, setting=setting, measurement=measurement, primary=primary))
  return rows


# ----------------------------------------------------------------------------- the claims job's hooks (SPEC)


def claims_config():
  """The dual-implications config the claims job runs: the quick config with 10 target draws."""
  from experiments.dual_implications.config import get_config
  return dataclasses.replace(get_config(), draws=tuple(range(10)))


def claim_rows(sources: Sequence[Source], root: str, include_not_run: bool) -> list[dict]:
  """The dual-implication rows of every dual-implications source."""
  return [row for s in sources for row in dual_implication_rows(s)]


def not_run_rows(root: str, why: str) -> list[dict]:
  """The dual-implication rows when there is no dual-implications workdir."""
  command = f"python -m experiments.dual_implications --workdir {root}/dual_implications"
  return [not_run(cid, claim, ARXIV_NTK, "see docs/theory.md#reported-figures", command, why) for cid, claim in (
      ("dual_top", "MLP-Attn fits top-mode targets better than 2L-ReLU"),
      ("dual_bottom", "MLP-Attn fits bottom-mode targets worse than 2L-ReLU"))]


# ----------------------------------------------------------------------------- declared claims

_DUAL = f"{ARXIV_NTK}, the dual implications of the cubed spectrum"
CLAIMS = ExperimentClaims(
    claims=(
        Claim("dual_top", "the cubed spectrum helps MLP-Attn fit targets in the top kernel modes", _DUAL,
              "per seed, 2L-ReLU's minus MLP-Attn's test relative error on top-mode targets", "direction",
              "the sign-flip interval of the paired differences excludes 0 above (10 seeds)", interval="paired",
              paper_sign=+1, null=0.0, cases=direction_cases()),
        Claim("dual_bottom", "the cubed spectrum costs MLP-Attn on targets in the bottom kernel modes", _DUAL,
              "per seed, 2L-ReLU's minus MLP-Attn's test relative error on bottom-mode targets", "direction",
              "the sign-flip interval of the paired differences excludes 0 below (10 seeds)", interval="paired",
              paper_sign=-1, null=0.0, cases=direction_cases(sign=-1)),
        Claim("dual_random", "no claim: random-direction targets", _DUAL, "the same difference on random targets",
              "context", "no test"),
        Claim("dual_labels", "no claim: the real one-hot labels", _DUAL, "the same difference on the labels",
              "context", "no test"),
    ),
    claim_rows=claim_rows, not_run_rows=not_run_rows, claims_config=claims_config)
