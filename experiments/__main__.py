"""The main job: a quick reproduction of the NTK non-convergence results on the embedded real subsets.

  python -m experiments [--workdir runs/quick] [--full]

Runs the condition-number cubing check (``experiments.cubing``), the width sweep
(``experiments.width_sweep``) and the influence flip-rate study (``experiments.flip_rate``) with their quick
configs — about 5 minutes on 2 CPU cores — into ``<workdir>/{cubing,width_sweep,flip_rate}``, then writes
``<workdir>/summary.md`` joining their summaries. ``--full`` uses the full-size configs (full data files via ATTN_DATA_DIR; hours on a CPU).
Restarting with the same workdir resumes.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from experiments import cubing, flip_rate, flip_rate_report, width_sweep, width_sweep_report


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(prog="python -m experiments", description=__doc__.splitlines()[0])
  parser.add_argument("--workdir", default="runs/quick", help="output directory (default runs/quick)")
  parser.add_argument("--full", action="store_true", help="full-size configs instead of the quick ones")
  args = parser.parse_args(argv)
  root = Path(args.workdir)
  start = time.perf_counter()
  print(f"[1/3] condition-number cubing -> {root / 'cubing'}")
  cub_records = cubing.run(cubing.get_config(full=args.full), root / "cubing")
  cub_text = cubing.write_report(root / "cubing", cub_records)
  print(f"[2/3] width sweep -> {root / 'width_sweep'}")
  ws_records = width_sweep.run(width_sweep.get_config(full=args.full), root / "width_sweep")
  ws_text = width_sweep_report.write_report(root / "width_sweep", ws_records)
  print(f"[3/3] influence flip rates -> {root / 'flip_rate'}")
  fr_records = flip_rate.run(flip_rate.get_config(full=args.full), root / "flip_rate")
  fr_text = flip_rate_report.write_report(root / "flip_rate", fr_records)
  elapsed = time.perf_counter() - start
  summary = (f"# Quick reproduction: linearized attention vs the NTK regime\n\n"
             f"Wall time of this invocation: {elapsed:.0f} s (resumed points not recomputed).\n"
             f"Figures: cubing/kappa_vs_n.png, width_sweep/*.png, flip_rate/*.png.\n\n"
             + "\n".join(t.replace("# ", "## ", 1) for t in (ws_text, cub_text, fr_text)))
  (root / "summary.md").write_text(summary)
  print(f"done in {elapsed:.0f} s: {root / 'summary.md'}")


if __name__ == "__main__":
  main()
