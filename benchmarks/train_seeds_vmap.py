"""Times S training seeds of the small ViT / DiffViT as one vmapped program (``experiments.trainers.seeds``)
against the same S seeds trained one after another (``experiments.trainers.classifier.train_classifier``).

  python benchmarks/train_seeds_vmap.py                    # S = 1, 5, 10; ViT; 1,024 embedded CIFAR-10 images
  python benchmarks/train_seeds_vmap.py --model diffvit --seeds 1 5 10 --images 1024 --repeats 3

The ViT is ``attention.vit.VisionTransformer`` with its default CPU config (CIFAR-10 32×32, patch 4, width 64,
depth 2, 4 heads; DiffViT: the parameter-matched differential twin of ``experiments.trainers.vit``), batch 64,
Adam, crop-and-flip augmentation, on the embedded CIFAR-10 subset. Each run trains 2 epochs; the time is the
second epoch's (the first compiles), per model: vmapped epoch time / S against the sum of the sequential seeds'
epoch times / S. Printed per S: seconds per model (median and range over ``--repeats``), and last

  vmapped speed-up at 10 seeds (sequential time / vmapped time): N.NN×

A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))



def models(name: str):
  from attention.vit import ViTConfig, VisionTransformer, matched_configs
  vit, diff = matched_configs(ViTConfig())
  return VisionTransformer(vit if name == "vit" else diff)


def epoch_seconds(module, x, y, seeds: int, vmapped: bool) -> float:
  """Seconds of the second epoch for ``seeds`` models (vmapped: one program; else one after another)."""
  from experiments.core.config import ClassifierTrainConfig
  from experiments.trainers.classifier import train_classifier
  from experiments.trainers.seeds import train_classifier_seeds
  base = ClassifierTrainConfig(epochs=2, batch_size=64, learning_rate=1e-3, l2=0.0, warmup_epochs=0, seed=0,
                               augment="crop_flip")
  configs = [dataclasses.replace(base, seed=s) for s in range(seeds)]
  if vmapped:
    results = train_classifier_seeds(module, x, y, configs)
    return sum(r.history[1].seconds for r in results)      # each seed's history holds the epoch's time / S
  return sum(train_classifier(module, x, y, c).history[1].seconds for c in configs)


def main(argv=None) -> list[dict]:
  parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
  parser.add_argument("--model", choices=("vit", "diffvit"), default="vit")
  parser.add_argument("--seeds", type=int, nargs="+", default=[1, 5, 10])
  parser.add_argument("--images", type=int, default=1024)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--xla-cpu-tuned", action="store_true", help="add xla_cpu.TUNED_FLAGS to XLA_FLAGS")
  args = parser.parse_args(argv)
  if min(args.seeds) < 1 or args.images < 64 or args.repeats < 1:
    parser.error("--seeds must be ≥ 1, --images ≥ 64 (one batch) and --repeats ≥ 1")
  import xla_cpu  # benchmarks/ is on sys.path (above)
  if args.xla_cpu_tuned:
    xla_cpu.add_flags(*xla_cpu.TUNED_FLAGS)
  from experiments.core.machine import one_line
  from experiments.data import load_dataset
  train = load_dataset("cifar10", "train", n=args.images, source="embedded")
  module = models(args.model)
  print(f"{args.model}, {args.images} images, batch 64, second epoch timed; {one_line()}")
  rows = []
  for s in args.seeds:
    seq = [epoch_seconds(module, train.x, train.y, s, False) / s for _ in range(args.repeats)]
    vm = [epoch_seconds(module, train.x, train.y, s, True) / s for _ in range(args.repeats)]
    row = dict(seeds=s, sequential=statistics.median(seq), sequential_range=(min(seq), max(seq)),
               vmapped=statistics.median(vm), vmapped_range=(min(vm), max(vm)))
    row["speedup"] = row["sequential"] / row["vmapped"]
    rows.append(row)
    print(f"S = {s:2d}: sequential {row['sequential']:.3f} s per model [{min(seq):.3f}, {max(seq):.3f}], vmapped "
          f"{row['vmapped']:.3f} s [{min(vm):.3f}, {max(vm):.3f}]: {row['speedup']:.2f}×", flush=True)
  import record
  for row in rows:
    record.emit("train_seeds", model=args.model, tuned=xla_cpu.tuned(), seeds=row["seeds"], sequential_s=row["sequential"],
                vmapped_s=row["vmapped"], ratio=row["speedup"])
  last = rows[-1]
  print(f"vmapped speed-up at {last['seeds']} seeds (sequential time / vmapped time): {last['speedup']:.2f}×")
  return rows


if __name__ == "__main__":
  main()
