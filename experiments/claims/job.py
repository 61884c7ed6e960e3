"""Claims under test: every headline claim of the three papers as a measured value with a 95 % interval and a
verdict, and the protocol choices that change the verdict.

Usage:
  python -m experiments.claims --workdir DIR [--from WORKDIR ...] [--no_run] [--overwrite_config] [--stability]
                               [--stability_modes MODE,...] [--standard]

Reads the workdirs of the other experiments — every subdirectory of DIR and every ``--from`` directory,
each identified by its config.json (or, lacking one, its records) — and runs only the quick CPU experiments
that are missing into DIR/<experiment>: the condition-number cubing check (MNIST and CIFAR-10, n ≤ 256, 10
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
(``experiments.claims.stability``, ``--stability_modes``) — into DIR/<name>_stability[_<mode>], and marks each
verdict that changes under any of them "unstable" with every outcome.

Writes DIR/claims.jsonl (one record per row, rebuilt on every run), and DIR/summary.md and
DIR/claims_forest.png (``experiments.claims.report``, which redraws them from claims.jsonl alone).
Experiments are found only through ``experiments.registry``: each one's row builders are ``experiments.<name>.claims``,
the row primitives ``experiments.core.rows``, the statistics ``experiments.core.verdicts``.
Source: arXiv 2603.13085, arXiv 2510.00517, Havens et al. ICML 2024 (docs/theory.md#reported-figures).
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Optional, Sequence

from experiments import registry
from experiments.claims import protocol, stability
from experiments.core import cli, distributed
from experiments.core import config as config_lib
from experiments.core.claim import judge
from experiments.core.rows import Source, not_run_reason
from experiments.core.spec import ExperimentSpec
from experiments.core.workdir import jsonable, read_records, removed_if_unused

ROWS_NAME = "claims.jsonl"


def claim_experiments() -> list[ExperimentSpec]:
  """The registered experiments that have claims, in registry order."""
  return [spec for spec, _ in registry.with_claims()]


def runs_in_claims_job(experiment: str) -> bool:
  """Whether the claims job runs ``experiment``'s quick config when it is missing (its claims'
  ``claims_config``)."""
  claims = registry.claims_of(experiment)
  return claims is not None and claims.claims_config is not None


def run_here() -> list[ExperimentSpec]:
  """The experiments the claims job runs when their quick-setting workdir is missing (``claims_config``)."""
  return [s for s in registry.experiments() if runs_in_claims_job(s.name)]


def experiment_of(claim_id: str) -> str:
  """The experiment whose records a claim row is built from: the one that declares it
  (``experiments.registry.declaration``).

  Raises:
    ValueError: no registered experiment declares it.
  """
  return registry.declaration(claim_id)[0]


def quick_config(experiment: str):
  """The config the claims job runs for ``experiment`` (its claims' ``claims_config``), or that
  experiment's quick config (``get_config()``) when the claims job does not run it."""
  claims = registry.claims_of(experiment)
  if claims is not None and claims.claims_config is not None:
    return claims.claims_config()
  return registry.get(experiment).get_config()


def identify(path) -> Optional[str]:
  """The experiment whose workdir ``path`` is (by its config.json's fields against each spec's
  ``config_signature``, else its records' fields against ``record_signature``, in registry order), or None
  for a directory that is no experiment's workdir.

  Raises:
    ValueError: config.json is not valid JSON.
  """
  path = Path(path)
  specs = [s for s in registry.experiments() if s.config_signature]
  cfg_path = path / "config.json"
  if cfg_path.exists():
    try:
      cfg = json.loads(cfg_path.read_text())
    except json.JSONDecodeError as e:
      raise ValueError(f"{cfg_path} is not valid JSON ({e})") from None
    for spec in specs:
      if isinstance(cfg, dict) and all(f in cfg for f in spec.config_signature):
        return spec.name
  records = read_records(path) if path.is_dir() else []
  for spec in specs:
    if records and all(f in records[0] for f in spec.record_signature):
      return spec.name
  return None


def load_source(path, experiment: Optional[str] = None) -> Source:
  """Reads one workdir as a ``Source``: its experiment, config, records, protocol variant (the non-grid
  fields that differ from ``quick_config``) and the command that reproduces it.

  Raises:
    ValueError: the directory does not exist, or is no experiment's workdir.
  """
  path = Path(path)
  if not path.is_dir():
    raise ValueError(f"--from {path}: " + ("is a file, not a workdir (a directory)" if path.exists()
                                           else "no such directory"))
  experiment = experiment or identify(path)
  if experiment is None:
    names = ", ".join(s.name for s in registry.experiments() if s.config_signature)
    raise ValueError(f"--from {path}: not a workdir of any experiment (no config.json or results.jsonl of "
                     f"{names})")
  spec = registry.get(experiment)
  cfg_path = path / "config.json"
  config = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
  records = read_records(path)
  variant, overrides = (), []
  if runs_in_claims_job(experiment) and config:
    variant = (tuple(protocol.diffs(config, quick_config(experiment), spec.grid_fields | spec.bookkeeping))
               or _standard_label(experiment, config))
    overrides = protocol.diffs(config, spec.get_config())
  elif spec.variant_of is not None and config:
    variant = spec.variant_of(config)
  command = spec.command(path) + "".join(f" {o}" for o in overrides if "(" not in o)
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
  """The experiments of ``run_here()`` without a workdir at the quick setting among ``sources``."""
  return [spec.name for spec in run_here()
          if not any(s.experiment == spec.name and is_quick(s) for s in sources)]


def _run_into(root: Path, todo: Sequence[tuple[str, str, object]], what: str, *,
              overwrite_config: bool) -> list[Source]:
  """Runs (or resumes) each (sub-workdir, experiment, config) of ``todo`` into ``root/<sub-workdir>`` with
  its report; returns their sources."""
  for _, _, config in todo:
    config_lib.check_data_available(config)
  for i, (name, experiment, config) in enumerate(todo):
    spec = registry.get(experiment)
    print(f"[{i + 1}/{len(todo)}] {name} ({what}) -> {root / name}", flush=True)
    start = time.perf_counter()
    spec.run(config, root / name, overwrite_config=overwrite_config)
    spec.write_report(root / name)
    print(f"  {name} done in {time.perf_counter() - start:.0f} s", flush=True)
  return [load_source(root / name, experiment) for name, experiment, _ in todo]


def _replace_sources(sources: Sequence[Source], root: Path, names: Sequence[str], fresh: list[Source]):
  gone = {str((root / name).resolve()) for name in names}
  return [s for s in sources if str(Path(s.path).resolve()) not in gone] + fresh


def run_missing(root, sources: Sequence[Source], *, overwrite_config: bool = False) -> list[Source]:
  """Runs (or resumes) each missing quick experiment into ``root/<name>`` with ``quick_config``, and each
  claims' ``extra_runs`` that no source holds (e.g. the adversarially trained flip-rate run), with its report;
  returns the sources with the new workdirs read in."""
  root = Path(root)
  todo = [(name, name, quick_config(name)) for name in missing_experiments(sources)]
  extra = [(name, spec.name, make()) for spec, claims in registry.with_claims() for name, make in claims.extra_runs]
  todo += [(name, experiment, config) for name, experiment, config in extra
           if not any(_holds(experiment, config)(s) for s in sources)]
  fresh = _run_into(root, todo, "quick config", overwrite_config=overwrite_config)
  return _replace_sources(sources, root, [name for name, _, _ in todo], fresh)


def build_rows(sources: Sequence[Source], root: str = "DIR", *, include_not_run: bool = True) -> list[dict]:
  """All claim rows from ``sources`` (``discover``), experiment by experiment in registry order: the quick
  setting's rows first, each followed by its variants; a main row's ``protocol`` lists the variants whose
  verdict differs from it. Experiments without a source give 'not run' rows with their command (unless
  ``include_not_run`` is false); each spec's ``joint_rows`` come last."""
  by_exp: dict = {}
  for s in sorted(sources, key=lambda s: (not is_quick(s), s.path)):
    by_exp.setdefault(s.experiment, []).append(s)
  rows: list[dict] = []
  for spec, claims in registry.with_claims():
    srcs = by_exp.get(spec.name, [])
    if srcs:
      rows += claims.claim_rows(srcs, root, include_not_run)
    elif include_not_run and claims.not_run_rows is not None:
      rows += claims.not_run_rows(root, not_run_reason(spec.name, run_here=runs_in_claims_job(spec.name)))
  for spec, claims in registry.with_claims():
    if claims.joint_rows is not None:
      rows += claims.joint_rows(by_exp)
  rows = [judge(r, registry.declaration(r["claim_id"])[1]) for r in rows]
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
  lines = [json.dumps(jsonable(dict(r, kind="claim")), sort_keys=True) for r in rows]
  lines.append(json.dumps(jsonable(dict(kind="protocol_choices", choices=list(choices))), sort_keys=True))
  if times:
    lines.append(json.dumps(jsonable(dict(kind="compute_times", seconds=dict(times))), sort_keys=True))
  tmp.write_text("\n".join(lines) + "\n")
  tmp.replace(path)
  return path


def standard_runs() -> list[tuple]:
  """(sub-workdir, experiment, config, matches) of every registered experiment's standard grids (its spec's
  ``standard_runs``: e.g. the differential-attention, certification and flip-rate grids) that
  ``--standard`` runs when missing; ``matches(source)`` says whether a source already holds it."""
  import warnings
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)  # the missing-ATTN_DATA_DIR warning comes when it runs
    out = [(name, spec.name, make()) for spec in registry.experiments() for name, make in spec.standard_runs]

  return [(name, experiment, config, _holds(experiment, config)) for name, experiment, config in out]


def _holds(experiment: str, config):
  """``source -> bool``: a source holds a run when its config equals ``config`` in every field but the data's
  location and the experiment's bookkeeping fields (``ExperimentSpec.bookkeeping``)."""
  bookkeeping = registry.get(experiment).bookkeeping
  return lambda s: s.experiment == experiment and bool(s.config) and not [
      d for d in protocol.diffs(s.config, config, bookkeeping) if not d.startswith(("data.source=", "data.dir="))]


def run_standard(root, sources: Sequence[Source], *, overwrite_config: bool = False) -> list[Source]:
  """Runs (or resumes) each standard grid of ``standard_runs`` that no source holds into ``root/<name>``,
  with its report; returns the sources with the new workdirs read in."""
  root = Path(root)
  todo = [(name, exp, cfg) for name, exp, cfg, matches in standard_runs() if not any(matches(s) for s in sources)]
  fresh = _run_into(root, todo, "standard grid", overwrite_config=overwrite_config)
  return _replace_sources(sources, root, [name for name, _, _ in todo], fresh)


def run_claims(workdir, from_dirs: Sequence = (), *, run: bool = True, overwrite_config: bool = False,
               stability_modes: Sequence[str] = (), standard: bool = False) -> str:
  """The whole job: discover, run the missing quick experiments (``run``), build and write the rows, and
  the report; returns the summary text.

  Raises:
    ValueError: ``workdir`` is a file, a ``--from`` entry is no workdir, or an experiment refuses its
      workdir (e.g. another config's results: rerun with ``overwrite_config``).
  """
  from experiments.claims import report as claims_report
  root = cli.check_workdir(workdir)
  root.mkdir(parents=True, exist_ok=True)
  sources = discover(root, from_dirs)
  if run:
    sources = run_missing(root, sources, overwrite_config=overwrite_config)
  if run and standard:
    sources = run_standard(root, sources, overwrite_config=overwrite_config)
  rows = build_rows(sources, str(root))
  # Every run reruns its L-BFGS experiments under the perturb and isa modes (always_modes); --stability adds the
  # other modes. Reruns found on disk (under DIR from an earlier --stability, or beside a --from workdir) are read too.
  to_run = tuple(dict.fromkeys(stability.always_modes() + tuple(stability_modes)))
  on_disk = tuple(m for m in stability.MODE_NAMES if any(stability.rerun_dir(root, s, m) is not None for s in
                                                        sources if s.experiment in stability.stability_experiments()))
  modes = tuple(m for m in stability.MODE_NAMES if m in to_run or m in on_disk)
  if run:
    stability.run_reruns(root, sources, to_run, overwrite_config=overwrite_config)
  rows = stability.apply_stability(rows, root, sources, rerun_rows=rerun_rows, run=False, modes=modes)
  write_rows(root, rows, protocol.protocol_choices(sources, str(root)), compute_times(sources))
  return claims_report.write_report(root)


def rerun_rows(path, experiment: str, variant: tuple = ()) -> list[dict]:
  """The rows of a stability rerun, read as the source it reruns (protocol ``variant``): its perturbation is
  no protocol variant (reading it as one labelled every rerun row apart, so no row could ever be compared)."""
  source = load_source(path, experiment)._replace(variant=tuple(variant))
  return build_rows([source], str(Path(path).parent), include_not_run=False)


def supported_rows_markdown(workdirs: Sequence, root=None) -> str:
  """The claims table of the rows that the given workdirs support (measured rows only; workdirs that do
  not exist or hold no records are skipped), for the main job's summary; with ``root``, the stability
  reruns under it (``root/<experiment>_stability[_<mode>]``) mark the rows that move *unstable*."""
  sources = [s for s in (load_source(p) for p in workdirs if Path(p).is_dir() and identify(p) is not None)
             if s.records]
  from experiments.claims import report as claims_report
  rows = build_rows(sources, include_not_run=False)
  if root is not None:
    rows = stability.apply_stability(rows, root, sources, rerun_rows=rerun_rows, run=False)
  return claims_report.rows_markdown(rows, only_measured=True)


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(allow_abbrev=False, prog="python -m experiments.claims", description="Claims under test: the papers' headline claims as verdicts with 95 % intervals.",
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
                      help="also run the missing standard grids: differential attention (the Fashion-MNIST grid "
                           "and the CIFAR-10 depth-1 pair), CLIP / DiffCLIP (10 pairs), certification, and the "
                           "flip-rate grids (MNIST, 30 seeds; CIFAR-10, 10 seeds); hours on 2 CPU cores "
                           "(docs/claims.md); set ATTN_DATA_DIR to the full data files")
  args = parser.parse_args(argv)
  start = time.perf_counter()
  with cli.user_errors(), distributed.point_context(), removed_if_unused(cli.check_workdir(args.workdir)):
    run_claims(args.workdir, args.from_dirs, run=not args.no_run, overwrite_config=args.overwrite_config,
               stability_modes=stability.parse_modes(args.stability_modes) if args.stability else (),
               standard=args.standard)
  plot = " and claims_forest.png" if (Path(args.workdir) / "claims_forest.png").exists() else (
      " (no plot: no row is measured; every row names the command that fills it)")
  print(f"wrote {Path(args.workdir) / ROWS_NAME}, summary.md{plot} in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
  main()
