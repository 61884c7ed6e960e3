"""Claims under test: every headline claim of the three papers as a measured value with a 95 % interval and a
verdict, and the protocol choices that change the verdict.

Usage:
  python -m experiments.claims --workdir DIR [--from WORKDIR ...] [--no_run] [--overwrite_config] [--stability]
                               [--stability_modes MODE,...] [--standard]

Reads the workdirs of the other experiments — every subdirectory of DIR and every ``--from`` directory,
each identified by its config.json (or, lacking one, its records) — and runs only the quick CPU experiments
that are missing into DIR/<experiment>: the condition-number cubing check (MNIST and CIFAR-10, n ≤ 256, 5
subsets per n), the width sweep on MNIST, the flip-rate study, the sharpness study and the dual-implications
study (MNIST and CIFAR-10, n = 256; each experiment
resumes itself; Ctrl-C keeps the finished points and rerunning the command resumes). It never runs the
differential-attention or certification grids unless ``--standard`` is given: without it their rows say "not
run" and give the command that fills them. ``--standard`` runs the missing standard grids into
DIR/diff_attention (Fashion-MNIST: ViT / DiffViT at depths 1–8, λ_init 0.5 / 0.8 / 0.95, 3 seeds at depth 1),
DIR/diff_attention_cifar10 (the CIFAR-10 depth-1 pair) and DIR/certify; a standard workdir run elsewhere is
read with ``--from``.

A workdir whose protocol fields (``data.*``, ``train.*``, readout, adversarial training, ...) differ from
the quick config is a *variant*: its rows are listed under the quick setting's row, and the choices whose
variant changes the verdict are named there; variants not yet run are listed with their commands.

``--stability`` (outside the job's time budget) reruns the experiments whose networks full-batch L-BFGS trains
(width sweep, flip rate, sharpness, dual implications) under numerics another machine would bring —
perturbed initial parameters, one-threaded reductions, an older instruction set, two host devices
(``experiments.stability``, ``--stability_modes``) — into DIR/<name>_stability[_<mode>], and marks each
verdict that changes under any of them "unstable" with every outcome.

Writes DIR/claims.jsonl (one record per row, rebuilt on every run), and DIR/summary.md and
DIR/claims_forest.png (``experiments.claims_report``, which redraws them from claims.jsonl alone).
Row builders and the verdict rules: ``experiments.claim_rows``; statistics: ``experiments.verdicts``.
Source: arXiv 2603.13085, arXiv 2510.00517, Havens et al. ICML 2024 (docs/theory.md#reported-figures).
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import time
from pathlib import Path
from typing import Optional, Sequence

from experiments import claim_rows, diff_attention_claims, stability
from experiments import config as config_lib
from experiments.claim_rows import Source
from experiments.workdir import _jsonable, _leaves, read_records

ROWS_NAME = "claims.jsonl"
RUN_HERE = ("cubing", "width_sweep", "flip_rate", "landscape", "dual_implications")  # quick CPU experiments the job runs if missing
NEVER_RUN = ("diff_attention", "certify")
# config.json fields that identify each experiment (checked in this order: diff_attention before train_vit).
SIGNATURES = (("dual_implications", ("targets", "network_seeds")), ("flip_rate", ("attacks", "top_fraction")), ("landscape", ("lanczos_iters",)),
              ("width_sweep", ("kernel_path",)), ("cubing", ("ns", "layers")),
              ("diff_attention", ("eps_255", "lipschitz_samples")), ("certify", ("attention_bounds",)),
              ("train_vit", ("depths",)))
# Record fields that identify each experiment when config.json is absent.
RECORD_SIGNATURES = (("dual_implications", ("kernel_error", "alignment")), ("flip_rate", ("flip_rate", "attack")), ("landscape", ("top_eigenvalues",)),
                     ("width_sweep", ("kernel_path",)), ("cubing", ("log10_kappa_G",)),
                     ("diff_attention", ("kind", "lambda_init", "attack")), ("certify", ("attention_bound",)),
                     ("train_vit", ("kind", "lambda_init")))
# Sweep grids and bookkeeping: a workdir that differs from the quick config only here is the quick setting.
GRID_FIELDS = frozenset({
    "seeds", "widths", "tasks", "datasets", "eps", "attacks", "models", "ns", "layers", "save_arrays", "top_k",
    "grid_1d", "grid_2d", "span", "lanczos_iters", "data.source", "data.dir", "train.seeds", "train.datasets",
    "train.max_width", "kernel_path", "seed_floor", "converged.common", "train.matched_fraction", "targets", "draws", "network_seeds"})
# Protocol choices flipped one at a time from the quick setting: (choice, experiment, overrides). A choice
# whose fields the experiment's config lacks is reported as not available in this version.
PROTOCOL_CHOICES = (
    ("preprocessing: centred inputs", "flip_rate", ("data.preprocessing=centered",)),
    ("training: Adam 1e-3 for at most 500 epochs, no L2 (the paper's recipe without its L2)", "flip_rate",
     ("train.optimizer=adam", "train.learning_rates=0.001", "train.max_epochs=500")),
    ("training: the paper's recipe, Adam 1e-3, L2 1e-3, at most 500 epochs", "flip_rate",
     ("train.optimizer=adam", "train.learning_rates=0.001", "train.max_epochs=500", "train.l2=0.001")),
    ("training: L-BFGS with L2 1e-3 (the paper's penalty)", "flip_rate", ("train.l2=0.001",)),
    ("data: one training subset for every seed", "flip_rate", ("data_seed_follows_seed=false",)),
    ("influence kernel: K₀ (initial parameters)", "flip_rate", ("influence_kernel=init",)),
    ("influence kernel: K∞ (infinite width, analytic)", "flip_rate", ("influence_kernel=infinite",)),
    ("ridge: λ = 1e-5·tr(K)/n (×0.01)", "flip_rate", ("ridge_scale=1e-05",)),
    ("ridge: λ = 1e-1·tr(K)/n (×100)", "flip_rate", ("ridge_scale=0.1",)),
    ("n: 1,000 training images", "flip_rate", ("data.n_train=1000",)),
    ("adversarial training (PGD, ε = 0.3)", "flip_rate", ("adversarial_training=true",)),
    ("task: CIFAR-10", "flip_rate", ("tasks=cifar10",)),
    ("preprocessing: centred inputs", "landscape", ("data.preprocessing=centered",)),
    ("training: Adam 1e-3 for at most 500 epochs, no L2 (the paper's recipe without its L2)", "landscape",
     ("train.optimizer=adam", "train.learning_rates=0.001", "train.max_epochs=500")),
    ("training: L-BFGS with L2 1e-3 (the paper's penalty)", "landscape", ("train.l2=0.001",)),
    ("n: 1,000 training images", "width_sweep", ("data.n_train=1000",)),
    ("ridge: λ = 1e-4·tr(K₀)/n", "width_sweep", ("ridge_scale=0.0001",)),
)
CLAIM_EXPERIMENTS = {  # claim_id prefix -> experiment
    "ntk_distance": "width_sweep", "cubing": "cubing", "implied_width": "cubing", "flip_ratio": "flip_rate",
    "adv_training": "flip_rate", "sharpness": "landscape", "da_": "diff_attention",
    "lambda_peak": "diff_attention", "depth_crossover": "diff_attention", "certified": "certify",
    "kernel_conditioning": "cubing", "dual": "dual_implications", "flip_excess": "flip_rate",
    "feature_learning": "width_sweep", "implied_vs_measured": "width_sweep"}


def experiment_of(claim_id: str) -> str:
  """The experiment whose records a claim row is built from (by the claim_id's prefix)."""
  return next(e for prefix, e in CLAIM_EXPERIMENTS.items() if claim_id.startswith(prefix))


def quick_config(experiment: str):
  """The config the claims job runs for ``experiment`` (one of ``RUN_HERE``), or that experiment's quick
  config: cubing on MNIST and CIFAR-10 (the papers' data sets) at n ∈ {50, 100, 256} with 10 subsets each,
  the width sweep on MNIST only with 10 seeds for the kernels, the fixed-time training and the converged
  points, the sharpness study with 10 seeds, dual implications with 10 target draws, the others as
  ``get_config()``: a direction is read only from at least ``verdicts.MIN_SEEDS`` = 10 seeds or draws."""
  module = importlib.import_module(f"experiments.{experiment}")
  config = module.get_config()
  ten = tuple(range(10))
  if experiment == "cubing":
    return dataclasses.replace(config, datasets=("mnist", "cifar10"), ns=(50, 100, 256), seeds=ten)
  if experiment == "width_sweep":
    return dataclasses.replace(config, datasets=("mnist",), seeds=ten,
                               train=dataclasses.replace(config.train, seeds=ten, matched_fraction=0.5),
                               converged=dataclasses.replace(config.converged, seeds=ten, common=True))
  if experiment == "landscape":
    return dataclasses.replace(config, seeds=ten)
  if experiment == "dual_implications":
    return dataclasses.replace(config, draws=ten)
  if experiment == "flip_rate":
    from experiments.flip_rate import CLAIMS_EPS
    return dataclasses.replace(config, eps=CLAIMS_EPS, seed_floor=True, data_seed_follows_seed=True)
  return config


def identify(path) -> Optional[str]:
  """The experiment whose workdir ``path`` is (by its config.json's fields, else its records' fields), or
  None for a directory that is no experiment's workdir.

  Raises:
    ValueError: config.json is not valid JSON.
  """
  path = Path(path)
  cfg_path = path / "config.json"
  if cfg_path.exists():
    try:
      cfg = json.loads(cfg_path.read_text())
    except json.JSONDecodeError as e:
      raise ValueError(f"{cfg_path} is not valid JSON ({e})") from None
    for name, fields in SIGNATURES:
      if isinstance(cfg, dict) and all(f in cfg for f in fields):
        return name
  records = read_records(path) if path.is_dir() else []
  for name, fields in RECORD_SIGNATURES:
    if records and all(f in records[0] for f in fields):
      return name
  return None


def _format_value(value) -> str:
  if isinstance(value, bool):
    return str(value).lower()
  if isinstance(value, (list, tuple)):
    return ",".join(_format_value(v) for v in value)
  return "none" if value is None else str(value)


def _diffs(config: dict, reference, *, protocol_only: bool) -> list[str]:
  """'field=value' for every leaf of ``config`` that differs from ``reference`` (a config dataclass);
  ``protocol_only`` skips the sweep grids (``GRID_FIELDS``)."""
  ref, mine = _leaves(_jsonable(reference)), _leaves(config)
  out = []
  for key in sorted(set(ref) | set(mine)):
    if protocol_only and key in GRID_FIELDS:
      continue
    if key not in mine:
      out.append(f"{key}=(absent: written by another version)")
    elif key not in ref:
      out.append(f"{key}={_format_value(mine[key])} (not a field of this version)")
    elif mine[key] != ref[key]:
      out.append(f"{key}={_format_value(mine[key])}")
  return out


def load_source(path, experiment: Optional[str] = None) -> Source:
  """Reads one workdir as a ``Source``: its experiment, config, records, protocol variant (the non-grid
  fields that differ from ``quick_config``) and the command that reproduces it.

  Raises:
    ValueError: the directory does not exist, or is no experiment's workdir.
  """
  path = Path(path)
  if not path.is_dir():
    raise ValueError(f"--from {path}: no such directory")
  experiment = experiment or identify(path)
  if experiment is None:
    raise ValueError(f"--from {path}: not a workdir of any experiment (no config.json or results.jsonl of "
                     "cubing, width_sweep, flip_rate, landscape, diff_attention, certify or train_vit)")
  cfg_path = path / "config.json"
  config = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
  records = read_records(path)
  if experiment in RUN_HERE and config:
    reference = quick_config(experiment)
    variant = tuple(_diffs(config, reference, protocol_only=True)) or _standard_label(experiment, config)
    overrides = _diffs(config, importlib.import_module(f"experiments.{experiment}").get_config(),
                       protocol_only=False)
  elif experiment == "diff_attention" and config.get("dataset", "fashion_mnist") != "fashion_mnist":
    variant, overrides = (f"dataset={config['dataset']}",), []  # the standard grid is on Fashion-MNIST
  else:
    variant, overrides = (), []
  command = f"python -m experiments.{experiment} --workdir {path}" + "".join(f" {o}" for o in overrides
                                                                                if "(" not in o)
  return Source(experiment, str(path), config, records, variant, command)


def _standard_label(experiment: str, config: dict) -> tuple:
  """(label,) when ``config`` is one of ``standard_runs``' grids (same protocol as the quick config, more
  seeds or other data), so that its rows stand beside the quick rows as a variant; () otherwise."""
  for name, exp, cfg, matches in standard_runs():
    if exp == experiment and matches(Source(experiment, "", config, [])):
      data = ("disjoint subsets of the full training files" if config.get("data", {}).get("source") == "dir"
              else "the embedded subsets")
      return (f"standard grid ({name}: {len(cfg.seeds)} seeds, {data})",)
  return ()


def discover(root=None, from_dirs: Sequence = ()) -> list[Source]:
  """The sources of the claims: every subdirectory of ``root`` that is an experiment's workdir (others are
  skipped), then every ``from_dirs`` entry (each must be one); a directory named twice is read once.

  Raises:
    ValueError: a ``from_dirs`` entry is missing or is no experiment's workdir.
  """
  seen, out = set(), []
  candidates = []
  if root is not None and Path(root).is_dir():
    candidates += [(p, False) for p in sorted(Path(root).iterdir()) if p.is_dir() and not p.name.startswith(".")
                   and not stability.is_rerun_dir(p.name)]  # the stability pass's reruns are read apart
  candidates += [(Path(p), True) for p in from_dirs]
  for path, required in candidates:
    if not required and identify(path) is None:
      continue
    key = path.resolve()
    if key in seen:
      continue
    seen.add(key)
    source = load_source(path)
    if source.records or required:
      out.append(source)
  return out


def is_quick(source: Source) -> bool:
  """Whether ``source`` is at the quick setting (no protocol variant)."""
  return not source.variant


def missing_experiments(sources: Sequence[Source]) -> list[str]:
  """The experiments of ``RUN_HERE`` without a workdir at the quick setting among ``sources``."""
  return [name for name in RUN_HERE if not any(s.experiment == name and is_quick(s) for s in sources)]


def run_missing(root, sources: Sequence[Source], *, overwrite_config: bool = False) -> list[Source]:
  """Runs (or resumes) each missing quick experiment into ``root/<name>`` with ``quick_config`` and its
  report; returns the sources with the new workdirs read in."""
  root = Path(root)
  todo = missing_experiments(sources)
  for i, name in enumerate(todo):
    module = importlib.import_module(f"experiments.{name}")
    report = importlib.import_module(f"experiments.{name}_report")
    print(f"[{i + 1}/{len(todo)}] {name} (quick config) -> {root / name}", flush=True)
    start = time.perf_counter()
    module.run(quick_config(name), root / name, overwrite_config=overwrite_config)
    report.write_report(root / name)
    print(f"  {name} done in {time.perf_counter() - start:.0f} s", flush=True)
  fresh = {str((root / name).resolve()) for name in todo}
  kept = [s for s in sources if str(Path(s.path).resolve()) not in fresh]
  return kept + [load_source(root / name, name) for name in todo]


def _not_run_rows(experiment: str, root: str) -> list[dict]:
  cmd = f"python -m experiments.{experiment} --workdir {root}/{experiment}"
  why = (f"no {experiment} workdir; the claims job runs it unless --no_run is given" if experiment in RUN_HERE
         else f"no {experiment} workdir; the claims job runs it only with --standard (see the command)")
  nr = claim_rows.not_run
  if experiment == "diff_attention":
    cmd = f"python -m experiments.claims --workdir {root} --standard"
    why += (" (the standard grids: Fashion-MNIST 3,616 s of CPU time, so about 30 min on 2 idle cores by that; "
            "the CIFAR-10 pair 39 min on 2 shared CPU cores; ATTN_DATA_DIR set)")
    return [nr(cid, claim, claim_rows.ARXIV_DA, paper, cmd, why)
            for cid, claim, paper in diff_attention_claims.DA_CLAIMS]
  if experiment == "certify":
    cmd = f"python -m experiments.claims --workdir {root} --standard"
    why += (" (the standard grid: CIFAR-10, α ∈ {1/16, 1/4, 1}, each trained to a validation plateau in 10–20 "
            "epochs; measured 43 min on 2 CPU cores shared for most of it, about 14 s per epoch alone)")
    return [nr(f"certified_{eps:g}_{c.split()[0].lower()}", f"certified ℓ2 accuracy at ε = {eps:g} ({c})",
               claim_rows.LOFAST, f"{100 * claim_rows.PAPER_CERTIFIED[eps]:.1f} % (CIFAR-10, LoFAST)", cmd, why)
            for eps in (0.02, 0.05) for c in ("rigorous", "Krylov estimate")] + [
        nr("certified_alpha_tradeoff", "a strict attention-norm bound (the smallest α, ≤ 0.25) certifies less "
           "than a looser α (rigorous certificate)", claim_rows.LOFAST,
           "‖A_h‖₂ ≤ 0.25 hurts clean accuracy more than it helps (no number)", cmd, why)]
  labels = {"width_sweep": [("ntk_distance_difference", "MLP-Attn's NTK distance falls less with width than "
                             "2L-ReLU's (paired slope difference)"),
                            ("ntk_distance_relu", "NTK distance falls with width for 2L-ReLU"),
                            ("ntk_distance_mlp_attn", "NTK distance does not fall with width for MLP-Attn")],
            "cubing": [("cubing", "κ(G̃) = κ(G)³"), ("implied_width", "the width κ(G)³ implies")],
            "flip_rate": [("flip_ratio_mnist", "MLP-Attn's flip rate is 6–9× 2L-ReLU's (MNIST)")],
            "landscape": [("sharpness", "2L-ReLU sits in sharper minima than MLP-Attn")],
            "dual_implications": [("dual_top", "MLP-Attn fits top-mode targets better than 2L-ReLU"),
                                  ("dual_bottom", "MLP-Attn fits bottom-mode targets worse than 2L-ReLU")]}
  return [nr(cid, claim, claim_rows.ARXIV_NTK, "see docs/theory.md#reported-figures", cmd, why)
          for cid, claim in labels[experiment]]


def _resolve(experiment: str, overrides: Sequence[str]) -> Optional[tuple]:
  """``overrides`` with each field named as the experiment's config names it (a field not found under its
  dotted name is looked up by its last part, if exactly one field ends so); None if one is not a field."""
  fields = config_lib.fields_of(quick_config(experiment))
  out = []
  for o in overrides:
    name, value = o.split("=", 1)
    if name not in fields:
      matches = [f for f in fields if f.split(".")[-1] == name.split(".")[-1]]
      if len(matches) != 1:
        return None
      name = matches[0]
    out.append(f"{name}={value}")
  return tuple(out)


def protocol_choices(sources: Sequence[Source], root: str) -> list[dict]:
  """Every protocol choice of ``PROTOCOL_CHOICES``: measured (a variant workdir carries its overrides),
  not run (with the command that runs it into ``root``), or not available in this version."""
  out = []
  for choice, experiment, overrides in PROTOCOL_CHOICES:
    overrides = _resolve(experiment, overrides) or overrides
    quick = {k: _format_value(v) for k, v in config_lib.fields_of(quick_config(experiment)).items()}
    overrides = tuple(o for o in overrides if quick.get(o.split("=", 1)[0]) != o.split("=", 1)[1]) or overrides
    found = [s for s in sources if s.experiment == experiment and all(
        o in s.variant or (o.startswith("tasks=") and any(r.get("task") == o[6:] for r in s.records))
        for o in overrides)]
    if found:
      status, command = "measured", found[0].command
    elif _resolve(experiment, overrides) is None:
      status, command = "not available", ""
    else:
      slug = "_".join(o.split("=", 1)[0].split(".")[-1] for o in overrides)
      base = _diffs(_jsonable(quick_config(experiment)),
                    importlib.import_module(f"experiments.{experiment}").get_config(), protocol_only=False)
      command = (f"python -m experiments.{experiment} --workdir {root}/{experiment}_{slug} "
                 + " ".join([*base, *overrides]))
      status = "not run"
    out.append(dict(choice=choice, experiment=experiment, overrides=list(overrides), status=status,
                    command=command))
  return out


def build_rows(sources: Sequence[Source], root: str = "DIR", *, include_not_run: bool = True) -> list[dict]:
  """All claim rows from ``sources`` (``discover``): the quick setting's rows first, each followed by its
  variants; a main row's ``protocol`` lists the variants whose verdict differs from it. Experiments
  without a source give 'not run' rows with their command (unless ``include_not_run`` is false)."""
  by_exp: dict = {}
  for s in sorted(sources, key=lambda s: (not is_quick(s), s.path)):
    by_exp.setdefault(s.experiment, []).append(s)
  rows: list[dict] = []
  for experiment in ("width_sweep", "cubing", "flip_rate", "landscape", "dual_implications", "diff_attention",
                     "certify"):
    srcs = by_exp.get(experiment, [])
    if not srcs:
      if include_not_run:
        rows += _not_run_rows(experiment, root)
      continue
    if experiment == "diff_attention" and include_not_run and all(s.variant for s in srcs):
      rows += _not_run_rows(experiment, root)  # no standard (Fashion-MNIST) grid yet: its rows say how to run it
    for s in srcs:
      if experiment == "width_sweep":
        rows += claim_rows.ntk_distance_rows(s) + claim_rows.feature_learning_rows(s)
      elif experiment == "cubing":
        rows += claim_rows.cubing_rows(s)
      elif experiment == "flip_rate":
        if any(not r.get("adversarial_training") for r in s.records):
          rows += claim_rows.flip_ratio_rows(s) + claim_rows.flip_excess_rows(s)
        if any(r.get("adversarial_training") for r in s.records):
          standard = next((t for t in srcs if any(not r.get("adversarial_training") for r in t.records)), None)
          rows += claim_rows.adversarial_training_rows(s, standard)
      elif experiment == "landscape":
        rows += claim_rows.sharpness_rows(s)
      elif experiment == "dual_implications":
        rows += claim_rows.dual_implication_rows(s)
      elif experiment == "diff_attention":
        found = diff_attention_claims.rows(s)
        if s.variant:  # a variant's rows carry its label; the claims it cannot measure are left to the main grid
          found = [dict(r, variant="; ".join([v for v in (r["variant"],) if v]
                                             + [v for v in s.variant if v not in r["variant"]]))
                   for r in found if r["status"] != "not measured"]
        rows += found
      else:
        rows += claim_rows.certify_rows(s)
    if experiment == "flip_rate":
      if include_not_run and not any(r.get("adversarial_training") for s in srcs for r in s.records):
        rows.append(claim_rows.not_run(
            "adv_training", "adversarial training raises 2L-ReLU's flip rate to MLP-Attn's level (PGD)",
            claim_rows.ARXIV_NTK, "43.4 / 3.3 = 13.2× (MNIST)",
            f"python -m experiments.flip_rate --workdir {root}/flip_rate_adversarial_training "
            "adversarial_training=true", "no adversarially trained flip-rate workdir (about 3.5 minutes)"))
      if include_not_run and not any(r.get("task") == "cifar10" for s in srcs for r in s.records):
        rows.append(claim_rows.not_run(
            "flip_ratio_cifar10", "MLP-Attn's flip rate is 6–9× 2L-ReLU's (CIFAR-10)", claim_rows.ARXIV_NTK,
            "8.0× / 6.2× / 6.4× (FGSM / PGD / MIM)",
            f"python -m experiments.flip_rate --workdir {root}/flip_rate_tasks tasks=cifar10",
            "no CIFAR-10 flip-rate workdir"))
  cub = next((s for s in by_exp.get("cubing", []) if is_quick(s)), None)
  sweep = next((s for s in by_exp.get("width_sweep", []) if is_quick(s)), None)
  if cub is not None and sweep is not None:
    rows += claim_rows.implied_width_rows(cub, sweep)
  return _order(rows)


def _order(rows: list[dict]) -> list[dict]:
  """Each claim's primary row, then its other measurement choices, then its protocol variants, with the
  variants that change the primary's verdict noted on it (a variant is compared with the primary row when it
  is measured the same way). Rows of a claim with no primary row keep their order at the end."""
  mains = [r for r in rows if not r["variant"] and r.get("primary", True)]
  out, placed = [], set()
  for m in mains:
    mine = [r for r in rows if r["claim_id"] == m["claim_id"] and id(r) not in placed and r is not m]
    choices = [r for r in mine if not r["variant"] and not r.get("primary", True)]
    variants = [r for r in mine if r["variant"]]
    m["protocol"] = [dict(variant=v["variant"], direction=v["direction"], magnitude=v["magnitude"])
                     for v in variants if v["status"] == "measured" and m["status"] == "measured"
                     and v.get("measurement", "") in ("", m.get("measurement", ""))
                     and (v["direction"], v["magnitude"]) != (m["direction"], m["magnitude"])]
    out += [m] + [dict(r, protocol=[]) for r in choices + variants]
    placed |= {id(r) for r in [m, *choices, *variants]}
  return out + [dict(r, protocol=[]) for r in rows if id(r) not in placed]


def compute_times(sources: Sequence[Source]) -> dict[str, float]:
  """{experiment: seconds} of the quick-setting sources: the sum of their records' per-point wall times
  (the compute each experiment's results cost, whatever ran beside it; resumed points count once)."""
  out: dict[str, float] = {}
  for s in sources:
    if is_quick(s):
      out[s.experiment] = out.get(s.experiment, 0.0) + sum(float(r.get("wall_time_s", 0.0) or 0.0)
                                                           for r in s.records)
  return out


def write_rows(root, rows: Sequence[dict], choices: Sequence[dict] = (), times: Optional[dict] = None) -> Path:
  """Writes ``root/claims.jsonl`` (one record per row; then a record of kind 'protocol_choices' listing the
  choices and, where given, one of kind 'compute_times': {experiment: seconds}), replacing the previous file
  atomically: rows are rebuilt from the workdirs on every run."""
  root = Path(root)
  root.mkdir(parents=True, exist_ok=True)
  path = root / ROWS_NAME
  tmp = path.with_name(f".{ROWS_NAME}.{os.getpid()}")
  lines = [json.dumps(_jsonable(dict(r, kind="claim")), sort_keys=True) for r in rows]
  lines.append(json.dumps(_jsonable(dict(kind="protocol_choices", choices=list(choices))), sort_keys=True))
  if times:
    lines.append(json.dumps(_jsonable(dict(kind="compute_times", seconds=dict(times))), sort_keys=True))
  tmp.write_text("\n".join(lines) + "\n")
  tmp.replace(path)
  return path


def standard_runs() -> list[tuple]:
  """(sub-workdir, experiment, config, matches) of the standard differential-attention, certification and
  flip-rate grids (MNIST, 30 seeds; CIFAR-10, 10 seeds: ``flip_rate.standard_config``) that ``--standard``
  runs when missing; ``matches(source)`` says whether a source already holds it."""
  import warnings
  from experiments import certify, diff_attention, flip_rate
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)  # the missing-ATTN_DATA_DIR warning comes when it runs
    out = [(name, "diff_attention", diff_attention.standard_config(dataset))
           for name, dataset in (("diff_attention", "fashion_mnist"), ("diff_attention_cifar10", "cifar10"))]
    out.append(("certify", "certify", certify.get_config(standard=True)))
    out += [(name, "flip_rate", flip_rate.standard_config(dataset))
            for name, dataset in (("flip_rate_standard", "mnist"), ("flip_rate_standard_cifar10", "cifar10"))]

  def holds(experiment, config):
    """A source holds a standard grid when its config equals it in every field but the data's location."""
    return lambda s: s.experiment == experiment and bool(s.config) and not [
        d for d in _diffs(s.config, config, protocol_only=False) if not d.startswith(("data.source=", "data.dir="))]
  return [(name, experiment, config, holds(experiment, config)) for name, experiment, config in out]


def run_standard(root, sources: Sequence[Source], *, overwrite_config: bool = False) -> list[Source]:
  """Runs (or resumes) each standard grid of ``standard_runs`` that no source holds into ``root/<name>``,
  with its report; returns the sources with the new workdirs read in."""
  root = Path(root)
  todo = [(name, exp, cfg) for name, exp, cfg, matches in standard_runs() if not any(matches(s) for s in sources)]
  for i, (name, experiment, config) in enumerate(todo):
    module = importlib.import_module(f"experiments.{experiment}")
    report = importlib.import_module(f"experiments.{experiment}_report")
    print(f"[{i + 1}/{len(todo)}] {name} (standard grid) -> {root / name}", flush=True)
    start = time.perf_counter()
    module.run(config, root / name, overwrite_config=overwrite_config)
    report.write_report(root / name)
    print(f"  {name} done in {time.perf_counter() - start:.0f} s", flush=True)
  fresh = {str((root / name).resolve()) for name, _, _ in todo}
  kept = [s for s in sources if str(Path(s.path).resolve()) not in fresh]
  return kept + [load_source(root / name, experiment) for name, experiment, _ in todo]


def run_claims(workdir, from_dirs: Sequence = (), *, run: bool = True, overwrite_config: bool = False,
               stability_modes: Sequence[str] = (), standard: bool = False) -> str:
  """The whole job: discover, run the missing quick experiments (``run``), build and write the rows, and
  the report; returns the summary text.

  Raises:
    ValueError: ``workdir`` is a file, a ``--from`` entry is no workdir, or an experiment refuses its
      workdir (e.g. another config's results: rerun with ``overwrite_config``).
  """
  from experiments import claims_report
  root = Path(workdir)
  if root.exists() and not root.is_dir():
    raise ValueError(f"--workdir {root} exists and is not a directory")
  root.mkdir(parents=True, exist_ok=True)
  sources = discover(root, from_dirs)
  if run:
    sources = run_missing(root, sources, overwrite_config=overwrite_config)
  if run and standard:
    sources = run_standard(root, sources, overwrite_config=overwrite_config)
  rows = build_rows(sources, str(root))
  modes = stability_modes or stability.MODE_NAMES
  if stability_modes or any((root / stability.workdir_name(e, m)).is_dir()
                            for e in stability.STABILITY for m in modes):
    rows = stability.apply_stability(rows, root, sources, run=run and bool(stability_modes), modes=modes,
                                     overwrite_config=overwrite_config)
  write_rows(root, rows, protocol_choices(sources, str(root)), compute_times(sources))
  return claims_report.write_report(root)


def supported_rows_markdown(workdirs: Sequence) -> str:
  """The claims table of the rows that the given workdirs support (measured rows only; workdirs that do
  not exist or hold no records are skipped), for the main job's summary."""
  sources = [load_source(p) for p in workdirs if Path(p).is_dir() and identify(p) is not None]
  from experiments import claims_report
  rows = build_rows([s for s in sources if s.records], include_not_run=False)
  return claims_report.rows_markdown(rows, only_measured=True)


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(prog="python -m experiments.claims", description="Claims under test: the papers' headline claims as verdicts with 95 % intervals.",
                                   formatter_class=argparse.RawDescriptionHelpFormatter,
                                   epilog="\n".join(__doc__.splitlines()[4:]))
  parser.add_argument("--workdir", required=True, help="output directory; its subdirectories are read too")
  parser.add_argument("--from", dest="from_dirs", nargs="+", action="extend", default=[], metavar="WORKDIR",
                      help="workdirs of other experiments to read (each must be one)")
  parser.add_argument("--no_run", action="store_true", help="only read the workdirs; run nothing")
  parser.add_argument("--overwrite_config", action="store_true",
                      help="a sub-workdir the job runs holds another config's results: move them aside")
  parser.add_argument("--stability", action="store_true",
                      help="rerun the L-BFGS-trained experiments (width sweep, flip rate, sharpness, dual "
                           "implications) under each --stability_modes numerics and mark verdicts that change "
                           "'unstable' (each mode about as long again as those experiments)")
  parser.add_argument("--stability_modes", default="all", metavar="MODE[,MODE...]",
                      help="the stability pass's modes: " + "; ".join(f"{m.name}: {m.description}"
                                                                      for m in stability.MODES) + " (default all)")
  parser.add_argument("--standard", action="store_true",
                      help="also run the missing standard differential-attention (Fashion-MNIST grid and the "
                           "CIFAR-10 depth-1 pair) and certification grids (measured about 65 + 39 + 20 minutes "
                           "on 2 shared CPU cores; set ATTN_DATA_DIR to the full data files)")
  args = parser.parse_args(argv)
  start = time.perf_counter()
  with config_lib.user_errors():
    run_claims(args.workdir, args.from_dirs, run=not args.no_run, overwrite_config=args.overwrite_config,
               stability_modes=stability.parse_modes(args.stability_modes) if args.stability else (),
               standard=args.standard)
  plot = " and claims_forest.png" if (Path(args.workdir) / "claims_forest.png").exists() else (
      " (no plot: no row is measured; every row names the command that fills it)")
  print(f"wrote {Path(args.workdir) / ROWS_NAME}, summary.md{plot} in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
  main()
