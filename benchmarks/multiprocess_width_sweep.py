"""Wall time of the quick width sweep (or another runner) as 1 process vs 2 processes on this machine.

  python benchmarks/multiprocess_width_sweep.py [--runner width_sweep] [--modes 1,1-percore,2] [field=value ...]

Each mode runs ``python -m experiments.<runner>`` from scratch into a fresh temporary workdir, as real
users start it, and prints its wall time (imports, compilation, every point and the report):
  1          one process, XLA's default single multi-threaded CPU device (ATTN_CPU_DEVICES=off);
  1-percore  one process with per-core XLA devices (ATTN_CPU_DEVICES=auto);
  2          two processes on localhost (jax.distributed, gloo), the points split between them; each gets
             cores / 2 single-threaded devices (experiments.core.distributed.cpu_device_count).
Overrides (field=value) shrink the config for a quick check. Figures in README "Performance".
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def run_mode(runner: str, mode: str, overrides, timeout_s: float) -> float:
  """Seconds of wall time of one run of ``runner`` in ``mode`` ('1', '1-percore' or '2')."""
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
  env.pop("XLA_FLAGS", None)
  env["ATTN_CPU_DEVICES"] = {"1": "off", "1-percore": "auto", "2": ""}[mode]  # 2: the per-host split
  with tempfile.TemporaryDirectory() as tmp:
    base = [sys.executable, "-m", f"experiments.{runner}", "--workdir", tmp, *overrides]
    if mode == "2":
      port = _free_port()
      commands = [base + ["--coordinator_address", f"localhost:{port}", "--num_processes", "2",
                          "--process_id", str(i)] for i in range(2)]
    else:
      commands = [base]
    start = time.perf_counter()
    logs = [tempfile.TemporaryFile() for _ in commands]  # not pipes: a full pipe would block a process
    procs = [subprocess.Popen(c, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
             for c, log in zip(commands, logs)]
    for p, log in zip(procs, logs):
      p.wait(timeout=timeout_s)
      if p.returncode:
        log.seek(0)
        raise RuntimeError(f"{runner} mode {mode} failed:\n{log.read().decode(errors='replace')[-2000:]}")
    return time.perf_counter() - start


def main() -> None:
  parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
  parser.add_argument("--runner", default="width_sweep", help="an experiments module (default width_sweep)")
  parser.add_argument("--modes", default="1,1-percore,2", help="comma-separated among 1, 1-percore, 2")
  parser.add_argument("--rounds", type=int, default=1, help="repetitions of each mode (interleaved)")
  parser.add_argument("--timeout_s", type=float, default=1800.0)
  parser.add_argument("overrides", nargs="*", help="config overrides, field=value")
  args = parser.parse_args()
  modes = args.modes.split(",")
  bad = [m for m in modes if m not in ("1", "1-percore", "2")]
  if bad:
    raise SystemExit(f"--modes must be among 1, 1-percore, 2; got {bad}")
  print(f"{args.runner} {' '.join(args.overrides) or '(quick config)'}; {os.cpu_count()} cores "
        f"(load average {os.getloadavg()[0]:.1f} at start)")
  times: dict[str, list[float]] = {m: [] for m in modes}
  for r in range(args.rounds):
    for mode in modes:
      times[mode].append(run_mode(args.runner, mode, args.overrides, args.timeout_s))
      print(f"  round {r + 1}, mode {mode:>9}: {times[mode][-1]:7.1f} s", flush=True)
  ref = min(times[modes[0]])
  for mode in modes:
    print(f"mode {mode:>9}: best {min(times[mode]):7.1f} s  (speed-up vs mode {modes[0]}: "
          f"{ref / min(times[mode]):.2f}x)")


if __name__ == "__main__":
  main()
