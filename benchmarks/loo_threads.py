"""The float64 NTK leave-one-out solve (``influence.ntk_loo``, the flip-rate study's per-point cost) on one
BLAS thread against OpenBLAS's default thread count, at n = 512, 1,024, 2,048 (100 test points, 10 classes).

  python benchmarks/loo_threads.py [--sizes 512 1024 2048] [--repeats 7]

Prints the median and minimum seconds per solve of each. ``ntk_loo_influence`` runs its float64 path on one
thread (``threadpoolctl``); this measures that choice on the machine at hand (idle or busy cores: say which).
A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import threadpoolctl  # noqa: E402

from influence.ntk_loo import _loo_float64_serial  # noqa: E402


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
  parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048])
  parser.add_argument("--repeats", type=int, default=7)
  args = parser.parse_args(argv)
  blas = [(i["internal_api"], i["num_threads"]) for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
  print(f"BLAS libraries (api, default threads): {blas}")
  for n in args.sizes:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(n, 300))
    k, k_test = a @ a.T, rng.normal(size=(100, n))
    y, y_test = np.eye(10)[rng.integers(0, 10, n)], np.eye(10)[rng.integers(0, 10, 100)]
    for limit in (None, 1):
      times = []
      for _ in range(args.repeats):
        t0 = time.perf_counter()
        with threadpoolctl.threadpool_limits(limits=limit, user_api="blas"):
          _loo_float64_serial(k, k_test, y, y_test, 1e-3)
        times.append(time.perf_counter() - t0)
      label = "default threads" if limit is None else "one thread"
      print(f"n = {n:5d}  {label:16s} median {statistics.median(times):.3f} s  min {min(times):.3f} s")


if __name__ == "__main__":
  main()
