"""Size of the installed environment and the cost of ``import neural_tangents`` (docs/versions.md).

  python benchmarks/install_footprint.py            # this interpreter's environment, 5 cold imports

Prints the Python, JAX, Flax and neural-tangents versions, the size of the environment's site-packages
(and of its TensorFlow, if any), and the wall time and peak resident memory of a fresh interpreter that
imports ``ntk`` (which runs the compatibility layer and then imports neural-tangents), median of the runs.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
from pathlib import Path

_IMPORT = r"""
import resource, time
t = time.perf_counter()
import ntk, neural_tangents
elapsed = time.perf_counter() - t
import json, sys
print(json.dumps({"seconds": elapsed, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "tensorflow_loaded": "tensorflow" in sys.modules}))
"""


def _tree_bytes(path: Path) -> int:
  total = 0
  for root, _, files in os.walk(path):
    for name in files:
      try:
        total += os.lstat(os.path.join(root, name)).st_size
      except OSError:
        pass
  return total


def main() -> None:
  parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
  parser.add_argument("--runs", type=int, default=5, help="fresh interpreters to time (≥ 1)")
  args = parser.parse_args()
  if args.runs < 1:
    parser.error(f"--runs must be ≥ 1, got {args.runs}")
  import flax
  import jax
  import ntk  # noqa: F401  (the compatibility layer, before neural-tangents)
  import neural_tangents
  site = Path(sysconfig.get_paths()["purelib"])
  tf = site / "tensorflow"
  print(f"python {sys.version.split()[0]}, jax {jax.__version__}, flax {flax.__version__}, "
        f"neural-tangents {neural_tangents.__version__}")
  print(f"site-packages {site}: {_tree_bytes(site) / 1e9:.2f} GB; tensorflow: "
        f"{f'{_tree_bytes(tf) / 1e9:.2f} GB' if tf.exists() else 'not installed'}")
  runs = []
  for _ in range(args.runs):
    out = subprocess.run([sys.executable, "-c", _IMPORT], capture_output=True, text=True, check=True)
    runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
  seconds = [r["seconds"] for r in runs]
  peaks = [r["peak_mb"] for r in runs]
  print(f"import ntk + neural_tangents, fresh interpreter, {args.runs} runs: median {statistics.median(seconds):.2f} s "
        f"[{min(seconds):.2f}, {max(seconds):.2f}], peak RSS median {statistics.median(peaks):.0f} MB; "
        f"TensorFlow loaded: {any(r['tensorflow_loaded'] for r in runs)}")


if __name__ == "__main__":
  main()
