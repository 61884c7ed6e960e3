"""``python -m experiments.first_try [NAME ...] [--root DIR]``: each named experiment (all by default) at
its first-try setting (``experiments.first_try.SETTINGS``), into DIR/<NAME>, with its wall time."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from experiments import registry
from experiments.core.cli import experiment_main
from experiments.first_try import SETTINGS


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(prog="python -m experiments.first_try", allow_abbrev=False,
                                   description="Each experiment at a small first-try setting (seconds to a minute).")
  parser.add_argument("names", nargs="*", choices=[[]] + sorted(SETTINGS), metavar="NAME",
                      help=f"experiments to run (default: all): {', '.join(SETTINGS)}")
  parser.add_argument("--root", default="runs/first_try", help="where the workdirs go (default runs/first_try)")
  args = parser.parse_args(argv)
  for name in args.names or list(SETTINGS):
    workdir = Path(args.root) / name
    start = time.perf_counter()
    print(f"== {name}: python -m experiments.{name} --workdir {workdir} {' '.join(SETTINGS[name])}", flush=True)
    experiment_main(registry.get(name), ["--workdir", str(workdir), *SETTINGS[name]])
    print(f"== {name}: {time.perf_counter() - start:.0f} s; see {workdir / 'summary.md'}", flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
