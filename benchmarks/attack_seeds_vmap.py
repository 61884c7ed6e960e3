"""Times PGD-L∞ on S training seeds of the small ViT as one program (``attacks.over_models``, vmapped and
mapped with lax.map, ``vectorize=False``) against the same S attacks one after another.

  python benchmarks/attack_seeds_vmap.py                       # S = 10, ViT, batch 128, 10 steps
  python benchmarks/attack_seeds_vmap.py --seeds 10 --batch 128 --repeats 3 --model diffvit

The ViT is ``attention.vit.VisionTransformer`` with its default CPU config (CIFAR-10 32×32, patch 4, width 64,
depth 2, 4 heads; DiffViT its parameter-matched differential twin), S random initialisations, random images.
Each timing follows a compiling call. Printed: seconds for all S models (median and range over ``--repeats``),
whether the vmapped and mapped adversarial images equal the sequential ones, and last

  vmapped speed-up at 10 seeds (sequential time / vmapped time): N.NN×

A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
  parser.add_argument("--model", choices=("vit", "diffvit"), default="vit")
  parser.add_argument("--seeds", type=int, default=10)
  parser.add_argument("--batch", type=int, default=128)
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args(argv)
  if args.seeds < 1 or args.batch < 1 or args.repeats < 1:
    parser.error("--seeds, --batch and --repeats must be ≥ 1")
  import jax
  import jax.numpy as jnp
  import numpy as np
  import attacks
  from attention.vit import ViTConfig, VisionTransformer, matched_configs
  from experiments.core.machine import one_line
  from experiments.trainers.vit import apply_fns
  vit, diff = matched_configs(ViTConfig())
  config = vit if args.model == "vit" else diff
  apply = apply_fns(config)
  x = jax.random.uniform(jax.random.key(0), (args.batch, config.image_size, config.image_size, 3))
  y = jnp.arange(args.batch) % config.num_classes
  models = [VisionTransformer(config).init(jax.random.key(s), x[:1])["params"] for s in range(args.seeds)]
  stacked = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *models)
  kwargs = dict(eps=4 / 255, alpha=1 / 255, steps=10, key=jax.random.key(1))

  def sequential():
    return [attacks.pgd_linf(jax.tree_util.Partial(apply, p), x, y, **kwargs).x_adv.block_until_ready()
            for p in models]

  def vmapped():
    return attacks.over_models(attacks.pgd_linf, apply, stacked, x, y, vectorize=True,
                               **kwargs).x_adv.block_until_ready()

  def mapped():
    return attacks.over_models(attacks.pgd_linf, apply, stacked, x, y, vectorize=False,
                               **kwargs).x_adv.block_until_ready()

  alone = np.stack([np.asarray(a) for a in sequential()])
  equal = np.array_equal(alone, np.asarray(vmapped()))
  map_equal = np.array_equal(alone, np.asarray(mapped()))
  times = {}
  for name, fn in (("sequential", sequential), ("vmapped", vmapped), ("mapped", mapped)):
    runs = []
    for _ in range(args.repeats):
      start = time.perf_counter()
      fn()
      runs.append(time.perf_counter() - start)
    times[name] = runs
  seq, vm, mp = (statistics.median(times[k]) for k in ("sequential", "vmapped", "mapped"))
  print(f"{args.model}, {args.seeds} seeds, batch {args.batch}, PGD-L∞ 10 steps; {one_line()}")
  print("; ".join(f"{k} {statistics.median(v):.3f} s [{min(v):.3f}, {max(v):.3f}]" for k, v in times.items())
        + f"; adversarial images equal to sequential: vmapped {equal}, mapped {map_equal}")
  import record
  record.emit("attack_seeds", model=args.model, seeds=args.seeds, sequential_s=seq, vmapped_s=vm, ratio=seq / vm,
              mapped_s=mp, map_ratio=seq / mp, equal=bool(equal), map_equal=bool(map_equal))
  print(f"mapped (lax.map) speed-up at {args.seeds} seeds (sequential time / mapped time): {seq / mp:.2f}×")
  print(f"vmapped speed-up at {args.seeds} seeds (sequential time / vmapped time): {seq / vm:.2f}×")
  return dict(sequential=seq, vmapped=vm, mapped=mp, equal=equal, map_equal=map_equal)


if __name__ == "__main__":
  main()
