"""Benchmark: empirical NTK of the 2-layer ReLU net, closed-form fast path vs neural-tangents.

  python benchmarks/ntk_fast_path.py [--n 1000] [--widths 256,1024,4096] [--nt_max_n 1000]

For each width, times (after a warm-up call that compiles) the fast path ``ntk.two_layer_relu_ntk`` and
neural-tangents' two working implementations (NTK_VECTOR_PRODUCTS, JACOBIAN_CONTRACTION) on n unit-norm
MNIST images from the embedded subset, checks they agree, and prints seconds, kernel entries per second,
the speed-up and the fraction of this machine's measured float32 matmul FLOP/s the fast path reaches.
A benchmark, not a test: the numbers depend on the machine.
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import ntk
import record  # benchmarks/ is sys.path[0] when this runs as a script
from experiments.data import load_dataset


def _best_time(fn, repeats: int) -> float:
  fn()  # compile / warm up
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn())
    best = min(best, time.perf_counter() - start)
  return best


def matmul_flops_per_s(size: int = 2048) -> float:
  a = jax.random.normal(jax.random.PRNGKey(0), (size, size))
  f = jax.jit(lambda a: a @ a)
  return 2 * size ** 3 / _best_time(lambda: f(a), 5)


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[1])
  parser.add_argument("--n", type=int, default=1000)
  parser.add_argument("--widths", default="256,1024,4096")
  parser.add_argument("--nt_max_n", type=int, default=1000, help="skip neural-tangents above this n")
  parser.add_argument("--skip_jacobian", action="store_true", help="skip JACOBIAN_CONTRACTION (slowest)")
  args = parser.parse_args(argv)
  try:
    widths = [int(w) for w in args.widths.split(",")]
  except ValueError:
    parser.error(f"--widths must be comma-separated integers, got {args.widths!r}")
  if args.n < 2 or any(w < 1 for w in widths):
    parser.error(f"--n must be >= 2 and every width >= 1, got n={args.n}, widths={widths}")
  x = load_dataset("mnist", "train", n=args.n, seed=0, flatten=True).x
  x = np.asarray(ntk.model_features("relu", x)[0])
  n, d = x.shape
  peak = matmul_flops_per_s()
  print(f"devices: {jax.devices()}; n = {n}, d = {d}; measured matmul peak {peak / 1e9:.1f} GFLOP/s")
  print(f"{'width':>6} {'path':>22} {'seconds':>9} {'entries/s':>11} {'speed-up':>9} {'% peak':>7} "
        f"{'max rel diff':>12}")
  for width in widths:
    model = ntk.two_layer_relu(width, d)
    _, params = model.init_fn(jax.random.PRNGKey(0), x.shape)
    xj = jnp.asarray(x)
    t_fast = _best_time(lambda: ntk.two_layer_relu_ntk(model, params, xj), 3)
    k_fast = np.asarray(ntk.two_layer_relu_ntk(model, params, xj))
    flops = 2 * n * d * width + 2 * n * n * width + 2 * n * n * d
    print(f"{width:>6} {'fast (closed form)':>22} {t_fast:>9.4f} {n * n / t_fast:>11.3g} {1:>9} "
          f"{100 * flops / t_fast / peak:>6.1f}% {'–':>12}")
    if n > args.nt_max_n:
      continue
    impls = ["ntk_vector_products"] + ([] if args.skip_jacobian else ["jacobian_contraction"])
    for impl in impls:
      start = time.perf_counter()
      k_nt = ntk.empirical_ntk(model.apply_fn, params, x, implementation=impl, memory_bytes=2 << 30)
      t_nt = time.perf_counter() - start  # one call; compile included in the first block only
      diff = float(np.max(np.abs(k_nt - k_fast)) / np.max(np.abs(k_nt)))
      print(f"{width:>6} {'nt ' + impl:>22} {t_nt:>9.2f} {n * n / t_nt:>11.3g} {t_nt / t_fast:>8.0f}x "
            f"{'':>7} {diff:>12.2e}")
      record.emit("ntk", width=width, implementation=impl, fast_s=t_fast, nt_s=t_nt, ratio=t_nt / t_fast)


if __name__ == "__main__":
  main()
