"""Times CROWN and CROWN + LoFAST (``attention.crown_vit``) on the certified ViT of the standard certification grid
(CIFAR-10, patch 8, 16 tokens, width 64, depth 3, 2 heads, SLL hidden 128), and LoFAST's certificate alone.

  python benchmarks/crown_vit_speed.py [--images 2] [--eps 0.02] [--methods CROWN]

Weights: the model at initialisation (seed 0), α = 1/16; the time of a backward pass does not depend on the
weights' values (the relaxations' work is the same), only the certified share does. Printed: seconds per image
after compilation (median and range over the images), compile seconds, and the process's peak resident memory
after each method (cumulative: the second method's figure is the peak of both; ``--methods`` runs some of them,
e.g. one per process). A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
  parser.add_argument("--images", type=int, default=2, help="images timed after the compiling one (default 2)")
  parser.add_argument("--eps", type=float, default=0.02, help="ℓ2 radius on the [0, 1] pixel scale (default 0.02)")
  parser.add_argument("--methods", default="LoFAST,CROWN + LoFAST,CROWN",
                      help="comma-separated, among LoFAST, 'CROWN + LoFAST', CROWN (default: all three, in that order)")
  args = parser.parse_args(argv)
  if args.images < 1 or not args.eps > 0:
    parser.error("--images must be ≥ 1 and --eps > 0")
  chosen = [m.strip() for m in args.methods.split(",") if m.strip()]
  if not chosen or any(m not in ("LoFAST", "CROWN + LoFAST", "CROWN") for m in chosen):
    parser.error(f"--methods must name LoFAST, 'CROWN + LoFAST' or CROWN, got {args.methods!r}")
  import jax
  import jax.numpy as jnp

  import record
  from attention import certification, crown_vit
  from attention.certified_vit import CertifiedViT, CertifiedViTConfig, embedding_lipschitz
  from experiments.core.machine import one_line
  from experiments.data import load_dataset
  cfg = CertifiedViTConfig(num_classes=10, image_size=32, channels=3, patch_size=8, dim=64, depth=3, num_heads=2,
                           sll_hidden=128, attention_bound=0.0625, value_bound=1.0)
  params = CertifiedViT(cfg).init(jax.random.PRNGKey(0), jnp.zeros((1, 32, 32, 3)))["params"]
  data = load_dataset("cifar10", "test", n=args.images + 1, source="embedded")
  x, y = jnp.asarray(data.x), jnp.asarray(data.y)
  key = jax.random.PRNGKey(1)

  def lofast(xb, yb):
    logits, consts = certification.layer_constants(cfg, params, xb, key=key, power_iters=50)
    r = certification.feature_radius(consts, args.eps, embed_lipschitz=embedding_lipschitz(params),
                                     key_norm="closed_form")
    return certification.margin_certificate(logits, yb, certification.head_kernel(params), r)

  methods = {"LoFAST": lofast,
             "CROWN + LoFAST": lambda xb, yb: crown_vit.margin_lower_bounds(cfg, params, xb, yb, args.eps, lofast=True,
                                                                           key=key, power_iters=50),
             "CROWN": lambda xb, yb: crown_vit.margin_lower_bounds(cfg, params, xb, yb, args.eps)}
  print(f"certified ViT (standard grid size), ε = {args.eps:g}, {args.images} timed images; {one_line()}")
  for name, fn in ((m, methods[m]) for m in chosen):
    t0 = time.perf_counter()
    jax.block_until_ready(fn(x[:1], y[:1]))
    compile_s = time.perf_counter() - t0
    times = []
    for i in range(1, args.images + 1):
      t0 = time.perf_counter()
      jax.block_until_ready(fn(x[i:i + 1], y[i:i + 1]))
      times.append(time.perf_counter() - t0)
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
    print(f"{name:>15}: {statistics.median(times):.3f} s per image [{min(times):.3f}, {max(times):.3f}], first call "
          f"(compiling) {compile_s:.1f} s; peak resident memory so far {peak_gb:.2f} GB", flush=True)
    record.emit("crown_vit", method=name, seconds=statistics.median(times), compile_s=compile_s, peak_gb=peak_gb)


if __name__ == "__main__":
  main()
