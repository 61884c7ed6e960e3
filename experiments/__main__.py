"""The main job: a quick reproduction of the NTK non-convergence results on the embedded real subsets.

  python -m experiments [--workdir runs/quick] [--full]

Runs the condition-number cubing check (``experiments.cubing``) and the width sweep
(``experiments.width_sweep``) with their quick configs — about 5 minutes on 2 CPU cores — into
``<workdir>/cubing`` and ``<workdir>/width_sweep``, then writes ``<workdir>/summary.md`` joining both
summaries. ``--full`` uses the full-size configs (full data files via ATTN_DATA_DIR; hours on a CPU).
Restarting with the same workdir resumes.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from experiments import cubing, width_sweep, width_sweep_report


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(prog="python -m experiments", description=__doc__.splitlines()[0])
  parser.add_argument("--workdir", default="runs/quick", help="output directory (default runs/quick)")
  parser.add_argument("--full", action="store_true", help="full-size configs instead of the quick ones")
  args = parser.parse_args(argv)
  root = Path(args.workdir)
  start = time.perf_counter()
  print(f"[1/2] condition-number cubing -> {root / 'cubing'}")
  cub_records = cubing.run(cubing.get_config(full=args.full), root / "cubing")
  cub_text = cubing.write_report(root / "cubing", cub_records)
  print(f"[2/2] width sweep -> {root / 'width_sweep'}")
  ws_records = width_sweep.run(width_sweep.get_config(full=args.full), root / "width_sweep")
  ws_text = width_sweep_report.write_report(root / "width_sweep", ws_records)
  elapsed = time.perf_counter() - start
  summary = (f"# Quick reproduction: linearized attention vs the NTK regime\n\n"
             f"Wall time of this invocation: {elapsed:.0f} s (resumed points not recomputed).\n"
             f"Figures: cubing/kappa_vs_n.png, width_sweep/*.png.\n\n"
             + ws_text.replace("# ", "## ", 1) + "\n" + cub_text.replace("# ", "## ", 1))
  (root / "summary.md").write_text(summary)
  print(f"done in {elapsed:.0f} s: {root / 'summary.md'}")


if __name__ == "__main__":
  main()
