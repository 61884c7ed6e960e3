"""``python -m experiments.paper_grid GRID [GRID ...] [--root DIR]``: the core paper's grids as the paper ran
them (``experiments.paper_grid``)."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from experiments.core import distributed
from experiments.core.config import check_data_available

DEFAULT_ROOT = Path("results") / "paper_grid"


def grids() -> dict:
  """{grid: [(workdir name, run function, config)]} of every paper grid (``experiments.paper_grid``)."""
  from experiments.flip_rate import config as flip_config, run as flip_run
  from experiments.landscape import config as landscape_config, run as landscape_run
  from experiments.width_sweep import config as sweep_config, run as sweep_run
  return {
      "width_sweep": [("width_sweep", sweep_run.run, sweep_config.paper_config())],
      "flip_rate": [(f"flip_rate/{task}", flip_run.run, flip_config.paper_config(task))
                    for task in flip_config.PAPER_TASKS],
      "adversarial": [("flip_rate_adversarial/mnist", flip_run.run,
                       flip_config.paper_config("mnist", adversarial_training=True))],
      "sharpness": [("landscape", landscape_run.run, landscape_config.paper_config())],
  }


def main(argv=None) -> int:
  table = grids()
  parser = argparse.ArgumentParser(prog="python -m experiments.paper_grid", allow_abbrev=False,
                                   description="The core paper's grids as the paper ran them; each resumes from its workdir's records.")
  parser.add_argument("grids", nargs="+", choices=sorted(table) + ["all"], metavar="GRID",
                      help=f"one or more of {', '.join(sorted(table))}, or all")
  parser.add_argument("--root", default=str(DEFAULT_ROOT), help=f"where the workdirs go (default {DEFAULT_ROOT})")
  args = parser.parse_args(argv)
  names = sorted(table) if "all" in args.grids else list(dict.fromkeys(args.grids))
  runs = [item for name in names for item in table[name]]
  try:
    for _, _, config in runs:
      config.validate()
      check_data_available(config)
  except ValueError as e:
    print(f"python -m experiments.paper_grid: {e}", file=sys.stderr)
    return 2
  times = []
  for workdir, run, config in runs:
    start = time.perf_counter()
    print(f"== paper grid {workdir} -> {Path(args.root) / workdir}", flush=True)
    with distributed.point_context():
      run(config, Path(args.root) / workdir)
    times.append((workdir, time.perf_counter() - start))
    print(f"== paper grid {workdir}: {times[-1][1]:.0f} s of wall time", flush=True)
  for workdir, seconds in times:
    print(f"{workdir}: {seconds / 60:.1f} min")
  return 0


if __name__ == "__main__":
  sys.exit(main())
