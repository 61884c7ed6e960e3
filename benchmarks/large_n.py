"""Benchmark: the fast-path empirical NTK and the float64 NTK leave-one-out influence at large n.

  python benchmarks/large_n.py [--ns 2000,5000,10000] [--width 1024] [--test 100] [--data-dir DIR]

Each (n, task) runs in its own subprocess, so its peak resident memory (``resource.getrusage``
ru_maxrss, which also sees XLA's buffers, unlike tracemalloc) is its own. Tasks:
  kernel  ``ntk.two_layer_relu_ntk`` on n unit-norm rows (fixed readout, float32, default 2 GiB budget),
          the [n, n] kernel included;
  loo     ``influence.ntk_loo_influence`` (float64) on a [n, n] kernel against ``--test`` test rows: the
          kernel X Xᵀ of unit rows is built in numpy first, so the RSS before the call is printed too and the
          increment is the leave-one-out's own (the caller's K is already counted in the "before" figure).
Rows are synthetic (uniform [0, 1] pixels, dimension 784, then unit-normalised) unless ``--data-dir`` names
the full MNIST files (``experiments.data.load_dataset(source="dir")``, docs/data.md). A benchmark, not a
test: the figures depend on the machine and its load.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time


def _rss_mb() -> float:
  with open("/proc/self/statm") as f:
    return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def _peak_mb() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _rows(n: int, d: int, data_dir: str | None, seed: int):
  import numpy as np
  if data_dir:
    from experiments.data import load_dataset
    x = load_dataset("mnist", "train", source="dir", data_dir=data_dir, n=n, seed=seed, flatten=True).x
  else:
    x = np.random.default_rng(seed).random((n, d), dtype=np.float32)
  x = np.asarray(x, np.float64)
  return x / np.linalg.norm(x, axis=1, keepdims=True)


def _child(task: str, n: int, args) -> dict:
  import numpy as np
  if task == "kernel":
    import jax
    import ntk
    x = _rows(n, args.dim, args.data_dir, 0).astype(np.float32)
    model = ntk.two_layer_relu(args.width, x.shape[1])
    _, params = model.init_fn(jax.random.PRNGKey(0), (-1, x.shape[1]))
    ntk.two_layer_relu_ntk(model, params, x[:64])  # compile the one-block path outside the timing
    before = _rss_mb()
    start = time.perf_counter()
    k = np.asarray(ntk.two_layer_relu_ntk(model, params, x))
    seconds = time.perf_counter() - start
    assert k.shape == (n, n) and np.isfinite(k).all()
  else:
    from influence import ntk_loo_influence
    x = _rows(n + args.test, args.dim, args.data_dir, 0)
    k_train = x[:n] @ x[:n].T
    k_test = x[n:] @ x[:n].T
    labels = np.random.default_rng(1).integers(0, 10, n + args.test)
    y = np.eye(10)[labels]
    del x
    before = _rss_mb()
    start = time.perf_counter()
    out = ntk_loo_influence(k_train, k_test, y[:n], y[n:])
    seconds = time.perf_counter() - start
    assert np.isfinite(out.scores).all()
  return {"task": task, "n": n, "seconds": seconds, "rss_before_mb": before, "peak_mb": _peak_mb(),
          "n2_float64_mb": 8 * n * n / 2 ** 20}


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
  parser.add_argument("--ns", default="2000,5000,10000", help="comma-separated training-set sizes")
  parser.add_argument("--width", type=int, default=1024, help="hidden width of the fast-path kernel")
  parser.add_argument("--dim", type=int, default=784, help="dimension of the synthetic rows")
  parser.add_argument("--test", type=int, default=100, help="test rows of the leave-one-out")
  parser.add_argument("--tasks", default="kernel,loo")
  parser.add_argument("--data-dir", dest="data_dir", default=None,
                      help="directory holding mnist/ (the full files); default: synthetic rows")
  parser.add_argument("--_child", dest="child", default=None, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  try:
    ns = [int(v) for v in args.ns.split(",")]
  except ValueError:
    parser.error(f"--ns must be comma-separated integers, got {args.ns!r}")
  tasks = args.tasks.split(",")
  if any(n < 2 for n in ns) or args.width < 1 or args.dim < 1 or args.test < 1:
    parser.error("--ns entries must be >= 2 and --width, --dim, --test >= 1")
  if any(t not in ("kernel", "loo") for t in tasks):
    parser.error(f"--tasks must be a subset of kernel,loo, got {args.tasks!r}")
  if args.child:
    print(json.dumps(_child(args.child, ns[0], args)))
    return
  source = f"MNIST from {args.data_dir}" if args.data_dir else f"synthetic unit rows, d = {args.dim}"
  print(f"{source}; kernel width {args.width}; leave-one-out against {args.test} test rows; "
        f"{os.cpu_count()} CPUs")
  print(f"{'task':>6} {'n':>6} {'seconds':>8} {'RSS before MB':>13} {'peak RSS MB':>11} {'increment/n²':>12}")
  for n in ns:
    for task in tasks:
      cmd = [sys.executable, __file__, "--_child", task, "--ns", str(n), "--width", str(args.width),
             "--dim", str(args.dim), "--test", str(args.test)] + (["--data-dir", args.data_dir] if args.data_dir else [])
      env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                         os.environ.get("PYTHONPATH", "")]))
      proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
      if proc.returncode != 0:
        print(f"{task:>6} {n:>6} failed: {proc.stderr.strip().splitlines()[-1:]}")
        continue
      r = json.loads(proc.stdout.strip().splitlines()[-1])
      growth = (r["peak_mb"] - r["rss_before_mb"]) / r["n2_float64_mb"]
      print(f"{task:>6} {n:>6} {r['seconds']:>8.2f} {r['rss_before_mb']:>13.0f} {r['peak_mb']:>11.0f} "
            f"{growth:>12.2f}", flush=True)


if __name__ == "__main__":
  main()
