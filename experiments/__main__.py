"""The main job: a quick reproduction of the NTK non-convergence results on the embedded real subsets.

  python -m experiments [--workdir runs/quick] [--full] [--overwrite_config] [<experiment>.<field>=value ...]

Runs the experiments the registry marks ``main_job`` (``experiments.registry``), in registry order: the width
sweep (``experiments.width_sweep``), the condition-number cubing check (``experiments.cubing``) and the
influence flip-rate study (``experiments.flip_rate``), with their quick configs, into ``<workdir>/<name>``;
and reruns those whose networks full-batch L-BFGS trains (width sweep, flip rate) under an older instruction set
into ``<workdir>/<name>_stability_isa`` (child processes, started at once and run beside the experiments; each
one's output in its ``rerun.log``) and, after the experiments, from initial parameters perturbed at float32
rounding level into ``<workdir>/<name>_stability`` (the rounding band that decides which verdicts another machine
could change: ``experiments.claims.stability``, docs/stability.md); then
writes ``<workdir>/summary.md`` joining their summaries, with every verdict that moves marked *unstable*. ``--full`` uses the full-size configs (full data files via ATTN_DATA_DIR; hours on a CPU).
Restarting with the same workdir resumes. Overrides name their experiment: ``width_sweep.widths=16,64``
sets the width sweep's ``widths``, ``flip_rate.data.n_train=256`` the flip-rate study's ``data.n_train``
(``python -m experiments.<experiment> --help`` lists each one's fields).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from experiments import registry
from experiments.claims import stability
from experiments.core import cli, distributed
from experiments.core import config as config_lib
from experiments.core.workdir import read_records, removed_if_unused


def main_job_experiments() -> list:
  """The registered experiments of the main job, in registry order."""
  return [s for s in registry.experiments() if s.main_job]


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(allow_abbrev=False, prog="python -m experiments", description=__doc__.splitlines()[0])
  parser.add_argument("--workdir", default="runs/quick", help="output directory (default runs/quick)")
  parser.add_argument("--full", action="store_true", help="full-size configs instead of the quick ones")
  parser.add_argument("--overwrite_config", action="store_true",
                      help="a sub-workdir holds results of another config (e.g. quick vs --full): move them "
                           "into its previous-<time>/ and start afresh")
  names = [s.name for s in main_job_experiments()]
  parser.add_argument("overrides", nargs="*", metavar="<experiment>.<field>=value",
                      help=f"a field of one experiment's config, <experiment> one of {', '.join(names)} (e.g. "
                           "width_sweep.widths=16,64; python -m experiments.<experiment> --help lists the fields)")
  distributed.add_arguments(parser)
  args = parser.parse_args(argv)
  start = time.perf_counter()
  with cli.user_errors():
    root = cli.check_workdir(args.workdir)
    configs = main_job_configs(args.full, args.overrides)
    distributed.initialize(args.coordinator_address, args.num_processes, args.process_id,
                           global_mesh=args.global_mesh)
    with distributed.point_context(), removed_if_unused(root):
      texts = _run_all(root, configs, args.overwrite_config)
  if texts is None:
    return
  elapsed = time.perf_counter() - start
  computed = sum(float(r.get("wall_time_s", 0.0)) for sub in names for r in read_records(root / sub))
  summary = (f"# Quick reproduction: linearized attention vs the NTK regime\n\n"
             f"Compute time recorded in the results: {computed:.0f} s (sum of per-point wall times; this "
             f"invocation took {elapsed:.0f} s, resumed points are not recomputed).\n"
             f"Figures: cubing/kappa_vs_n.png, width_sweep/*.png, flip_rate/*.png.\n\n"
             + "\n".join(t.replace("# ", "## ", 1) for t in texts))
  from experiments.claims import job as claims
  subs = [root / s for s in names]
  with cli.user_errors():
    summary += ("\n## Claims these runs support\n\nVerdict rules and the other claims: `python -m experiments.claims "
                f"--workdir {root / 'claims'} --from {' '.join(map(str, subs))}`\n\n"
                + claims.supported_rows_markdown(subs, root=root))
  from experiments.core.rules_version import stamp
  (root / "summary.md").write_text(stamp(summary))
  print(f"done in {elapsed:.0f} s: {root / 'summary.md'}")


def main_job_configs(full: bool, overrides=()) -> dict:
  """{experiment: config} of the main job: each experiment's quick (or ``full``) config with the
  ``<experiment>.<field>=value`` overrides that name it, checked (values and data files) before any work.

  Raises:
    ValueError: an override that names no main-job experiment, a bad field or value (named with its
      experiment), or full data files that are not there.
  """
  specs = main_job_experiments()
  names = [s.name for s in specs]
  mine: dict = {n: [] for n in names}
  for item in overrides:
    head = item.split("=", 1)[0]
    experiment, _, field = head.partition(".")
    if "=" not in item or experiment not in mine or not field:
      raise ValueError(f"python -m experiments: override {item!r} must name its experiment, as "
                       f"<experiment>.<field>=value with <experiment> one of {', '.join(names)} (e.g. "
                       "width_sweep.widths=16,64)")
    mine[experiment].append(item[len(experiment) + 1:])
  configs = {}
  for spec in specs:
    try:
      configs[spec.name] = config_lib.apply_overrides(spec.get_config(full=full), mine[spec.name])
      config_lib.check_data_available(configs[spec.name])
    except ValueError as e:
      raise ValueError(f"{spec.name}: {e}") from None
  return configs


def _run_all(root: Path, configs: dict, overwrite_config: bool) -> list[str] | None:
  """Runs the main job's experiments (this process's share of each) with ``configs`` ({name: config}) and,
  on process 0 once every process has finished, their reports; returns their summaries (None on the other
  processes). The reruns under another environment (the older instruction set: child processes that read
  nothing of this process's records) run in the background beside the experiments on a single process
  (``stability.BackgroundReruns``, output in each rerun's ``rerun.log``), the perturbed reruns here after the
  experiments. Prints each phase's wall time at the end (``phase_times_text``)."""
  specs = main_job_experiments()
  phases: list[tuple[str, float]] = []
  reruns = [(spec.name, name, root / stability.workdir_name(spec.name, name))
            for spec in specs if spec.stability for name in stability.always_modes()]
  beside = [job for job in reruns if not stability.in_process(stability.mode(job[1]))] \
      if distributed.process_count() == 1 else []
  background = stability.BackgroundReruns([(e, m, p, configs[e]) for e, m, p in beside],
                                          overwrite_config=overwrite_config)
  for experiment, name, path in beside:
    print(f"[rounding band] {experiment} rerun under {name} ({stability.mode(name).description}) -> {path}, in the "
          f"background (its output: {path / stability.RERUN_LOG})")
  background.start()
  try:
    for i, spec in enumerate(specs):
      print(f"[{i + 1}/{len(specs)}] {spec.description} -> {root / spec.name}")
      t0 = time.perf_counter()
      spec.run(configs[spec.name], root / spec.name, overwrite_config=overwrite_config)
      phases.append((spec.name, time.perf_counter() - t0))
    for experiment, name, path in reruns:  # the rounding band of the verdicts built on L-BFGS networks
      if (experiment, name, path) in beside:
        continue
      print(f"[rounding band] {experiment} rerun under {name} ({stability.mode(name).description}) -> {path}")
      t0 = time.perf_counter()
      stability.run_mode(experiment, name, path, overwrite_config=overwrite_config, config=configs[experiment])
      phases.append((f"{experiment} rerun ({name})", time.perf_counter() - t0))
  except BaseException:
    background.stop()
    raise
  if beside:
    print("[rounding band] waiting for the background reruns ...", flush=True)
  t0 = time.perf_counter()
  behind = background.join()
  if beside:
    phases.append(("waiting for the background reruns", time.perf_counter() - t0))
  distributed.barrier("experiments: all points done")
  if distributed.process_index() > 0:
    return None
  t0 = time.perf_counter()
  texts = [spec.write_report(root / spec.name) for spec in specs]
  phases.append(("reports", time.perf_counter() - t0))
  print(phase_times_text(phases, behind))
  return texts


def phase_times_text(phases, background=()) -> str:
  """The main job's per-phase wall times ([(phase, seconds)], in the order run) as printed at its end: one line
  per phase with its share of their sum (a resumed phase's time is that of the points it had left), then the
  ``background`` phases ([(phase, seconds)], run beside them: not in the sum)."""
  total = sum(s for _, s in phases) or 1.0
  width = max([len("sum")] + [len(name) for name, _ in list(phases) + list(background)])
  lines = (["wall time per phase (this invocation):"]
           + [f"  {name:<{width}}  {s:7.1f} s  {100 * s / total:5.1f} %" for name, s in phases]
           + [f"  {'sum':<{width}}  {total:7.1f} s"])
  if background:
    lines += ["in the background, beside the phases above:"] + [f"  {name:<{width}}  {s:7.1f} s" for name, s in background]
  return "\n".join(lines)


if __name__ == "__main__":
  main()
