"""Times each section of the sensitivity report (``experiments.report.run``) on the project's small ViT.

  python benchmarks/report_sections.py                        # trains a ViT briefly, then times the report
  python benchmarks/report_sections.py --vit-workdir runs/vit # a train_vit workdir's ViT (depth 1) instead

The ViT is ``experiments.train_vit.run``'s default CPU architecture (CIFAR-10 32×32, patch 4, width 64, 4
heads, depth 1); without ``--vit-workdir`` it is trained for ``--epochs`` epochs on 256 embedded CIFAR-10
images first (the section times hardly depend on how well it is trained). The report runs with its quick
defaults — 256 CIFAR-10 test images (attacks), 128 training images (NTK and influence pool; an NTK sample
of 128 train / 64 test), ε ∈ {1, 2, 4, 8}/255, CW-L2 on 50 images, bounds on 16 images — and this prints
each section's wall time (compilation included) and the total. The issue's target: at most 5 minutes on 2
CPU cores. A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
  parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--vit-workdir", default=None, help="a train_vit workdir holding a depth-1 ViT")
  parser.add_argument("--epochs", type=int, default=1, help="training epochs when no workdir is given")
  parser.add_argument("--workdir", default=None, help="report workdir (default: a temporary directory)")
  parser.add_argument("overrides", nargs="*", help="report config field=value overrides")
  args = parser.parse_args()

  from experiments.report import run as report
  from experiments.report import config as report_config
  from experiments.train_vit import run as train_vit
  from experiments.train_vit import config as train_vit_config
  from experiments.core.config import apply_overrides

  tmp = tempfile.TemporaryDirectory()
  vit_dir = args.vit_workdir
  if vit_dir is None:
    vit_dir = str(Path(tmp.name) / "vit")
    start = time.perf_counter()
    train_vit.run(apply_overrides(train_vit_config.get_config(), [
        "models=vit", "depths=1", "data.n_train=256", "data.n_test=256", f"train.epochs={args.epochs}"]), vit_dir)
    print(f"trained the ViT ({args.epochs} epoch(s), 256 images) in {time.perf_counter() - start:.1f} s")
  workdir = args.workdir or str(Path(tmp.name) / "report")
  config = apply_overrides(report_config.get_config(), args.overrides)
  start = time.perf_counter()
  records = report.run_report([f"experiments.report.adapters:vit(workdir={vit_dir!r})"], config, workdir)
  total = time.perf_counter() - start
  print(f"\n{'section':<12} {'status':<8} {'seconds':>8}")
  for r in records:
    print(f"{r['section']:<12} {r['status']:<8} {r['wall_time_s']:>8.1f}")
  print(f"{'total':<12} {'':<8} {total:>8.1f}   (sections {sum(r['wall_time_s'] for r in records):.1f} s; "
        f"data {config.data.n_test} test / {config.data.n_train} train images)")


if __name__ == "__main__":
  main()
