"""The main job: a quick reproduction of the NTK non-convergence results on the embedded real subsets.

  python -m experiments [--workdir runs/quick] [--full] [--overwrite_config]

Runs the experiments the registry marks ``main_job`` (``experiments.registry``), in registry order: the width
sweep (``experiments.width_sweep``), the condition-number cubing check (``experiments.cubing``) and the
influence flip-rate study (``experiments.flip_rate``), with their quick
configs — about 5–8 minutes on 2 CPU cores — into ``<workdir>/<name>``, then writes
``<workdir>/summary.md`` joining their summaries. ``--full`` uses the full-size configs (full data files via ATTN_DATA_DIR; hours on a CPU).
Restarting with the same workdir resumes.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from experiments import registry
from experiments.core import cli, distributed
from experiments.core.workdir import read_records


def main_job_experiments() -> list:
  """The registered experiments of the main job, in registry order."""
  return [s for s in registry.experiments() if s.main_job]


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(prog="python -m experiments", description=__doc__.splitlines()[0])
  parser.add_argument("--workdir", default="runs/quick", help="output directory (default runs/quick)")
  parser.add_argument("--full", action="store_true", help="full-size configs instead of the quick ones")
  parser.add_argument("--overwrite_config", action="store_true",
                      help="a sub-workdir holds results of another config (e.g. quick vs --full): move them "
                           "into its previous-<time>/ and start afresh")
  distributed.add_arguments(parser)
  args = parser.parse_args(argv)
  if not args.workdir:
    parser.error("--workdir must name a directory (got an empty string)")
  root = Path(args.workdir)
  start = time.perf_counter()
  with cli.user_errors():
    distributed.initialize(args.coordinator_address, args.num_processes, args.process_id,
                           global_mesh=args.global_mesh)
    with distributed.point_context():
      texts = _run_all(root, args.full, args.overwrite_config)
  if texts is None:
    return
  elapsed = time.perf_counter() - start
  names = [s.name for s in main_job_experiments()]
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
                + claims.supported_rows_markdown(subs))
  from experiments.core.rules_version import stamp
  (root / "summary.md").write_text(stamp(summary))
  print(f"done in {elapsed:.0f} s: {root / 'summary.md'}")


def _run_all(root: Path, full: bool, overwrite_config: bool) -> list[str] | None:
  """Runs the main job's experiments (this process's share of each) and, on process 0 once every process has
  finished, their reports; returns their summaries (None on the other processes)."""
  specs = main_job_experiments()
  for i, spec in enumerate(specs):
    print(f"[{i + 1}/{len(specs)}] {spec.description} -> {root / spec.name}")
    spec.run(spec.get_config(full=full), root / spec.name, overwrite_config=overwrite_config)
  distributed.barrier("experiments: all points done")
  if distributed.process_index() > 0:
    return None
  return [spec.write_report(root / spec.name) for spec in specs]


if __name__ == "__main__":
  main()
