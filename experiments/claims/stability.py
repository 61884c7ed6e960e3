"""The claims job's stability pass: the L-BFGS-trained experiments rerun under numerics another machine
would bring, and every verdict that moves marked *unstable* with both outcomes.

Another CPU does not change a run's seeds or initial parameters; it changes the order of floating-point
reductions (thread count, how a batch is split over devices) and the instruction set (FMA or not, vector
width), in XLA's generated code and in numpy / OpenBLAS / LAPACK. Full-batch L-BFGS amplifies such
rounding-level differences, so a verdict built on its networks can move from one machine to the next. Each
``MODE`` changes one group of these, in a child process (XLA and OpenBLAS read their settings once, at
start-up), and reruns the quick configs of ``stability_experiments()`` into ``DIR/<experiment>_stability_<mode>``
(``DIR/<experiment>_stability`` for ``perturb``, the name earlier versions used); each rerun resumes itself.

  python -m experiments.claims --workdir DIR --stability [--stability_modes perturb,serial,isa,devices]

A child writes ``numerics.json`` beside its records: the mode, its environment and the versions it ran.
Source of the concern: two CPU types gave different verdicts from the same code (docs/stability.md).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Mapping, NamedTuple, Optional, Sequence

SUFFIX = "_stability"
PERTURBATION = 1e-7  # relative, float32 rounding level


class Mode(NamedTuple):
  """One change of numerics: ``xla_flags`` appended to XLA_FLAGS, ``env`` set in the child's environment
  (a value None means "computed at run time", see ``mode_environment``), ``perturbation`` the relative
  perturbation of the initial parameters (``TrainConfig.init_perturbation``)."""
  name: str
  description: str
  xla_flags: tuple[str, ...] = ()
  env: tuple[tuple[str, Optional[str]], ...] = ()
  perturbation: float = 0.0


MODES = (
    Mode("perturb", f"initial parameters perturbed by a relative {PERTURBATION:g} (float32 rounding level)",
         perturbation=PERTURBATION),
    Mode("serial", "reductions on one thread: XLA's multi-threaded Eigen off, OpenBLAS on one thread",
         ("--xla_cpu_multi_thread_eigen=false",), (("OPENBLAS_NUM_THREADS", "1"), ("OMP_NUM_THREADS", "1"))),
    Mode("isa", "an older instruction set: XLA's code generation capped at AVX (no AVX2, FMA or AVX-512), "
         "OpenBLAS's Sandy Bridge kernels, numpy's run-time SIMD dispatch off",
         ("--xla_cpu_max_isa=AVX",), (("OPENBLAS_CORETYPE", "Sandybridge"), ("NPY_DISABLE_CPU_FEATURES", None))),
    Mode("devices", "two XLA host devices: batched kernels and attacks split over them, so their reductions "
         "split too", ("--xla_force_host_platform_device_count=2",)),
)
MODE_NAMES = tuple(m.name for m in MODES)


def mode(name: str) -> Mode:
  """The ``MODES`` entry called ``name``.

  Raises:
    ValueError: ``name`` is not one of ``MODE_NAMES``.
  """
  for m in MODES:
    if m.name == name:
      return m
  raise ValueError(f"stability mode {name!r}: expected one of {', '.join(MODE_NAMES)}")


def parse_modes(text: str) -> tuple[str, ...]:
  """'perturb,serial' -> ('perturb', 'serial'), each checked with ``mode``; 'all' gives every mode.

  Raises:
    ValueError: an unknown or repeated mode name, or none.
  """
  names = MODE_NAMES if text.strip() == "all" else tuple(n.strip() for n in text.split(",") if n.strip())
  if not names or len(set(names)) != len(names):
    raise ValueError(f"--stability_modes {text!r}: expected distinct names from {', '.join(MODE_NAMES)}, or all")
  for n in names:
    mode(n)
  return names


def workdir_name(experiment: str, mode_name: str) -> str:
  """The rerun's sub-workdir: '<experiment>_stability' for perturb, '<experiment>_stability_<mode>' else."""
  return f"{experiment}{SUFFIX}" if mode_name == "perturb" else f"{experiment}{SUFFIX}_{mode_name}"


def is_rerun_dir(name: str) -> bool:
  """Whether a sub-workdir name is one of the stability pass's reruns (read apart from the sources)."""
  return name.endswith(SUFFIX) or any(name.endswith(f"{SUFFIX}_{m}") for m in MODE_NAMES)


def _dispatched_cpu_features() -> str:
  """numpy's run-time dispatched SIMD targets (e.g. 'X86_V3 X86_V4 ...' on numpy 2.5, 'AVX2 FMA3 ...' on
  2.4): disabling them all leaves numpy its compiled baseline."""
  try:
    from numpy._core._multiarray_umath import __cpu_dispatch__
  except ImportError:  # numpy < 2
    from numpy.core._multiarray_umath import __cpu_dispatch__
  return " ".join(__cpu_dispatch__)


def mode_environment(m: Mode, base: Optional[Mapping[str, str]] = None) -> dict[str, str]:
  """The child's environment for mode ``m``: ``base`` (default ``os.environ``) with ``m.xla_flags`` appended
  to XLA_FLAGS and ``m.env`` set."""
  env = dict(os.environ if base is None else base)
  if m.xla_flags:
    env["XLA_FLAGS"] = " ".join([env.get("XLA_FLAGS", "")] + list(m.xla_flags)).strip()
  for key, value in m.env:
    env[key] = _dispatched_cpu_features() if (key, value) == ("NPY_DISABLE_CPU_FEATURES", None) else value
  return env


def stability_experiments() -> tuple[str, ...]:
  """The registered experiments whose networks full-batch L-BFGS trains (their spec's ``stability``)."""
  from experiments import registry
  return tuple(s.name for s in registry.experiments() if s.stability)


def stability_config(experiment: str, perturbation: float = PERTURBATION):
  """The config the claims job runs for ``experiment`` (its spec's ``claims_config``) with its L-BFGS networks'
  initial parameters perturbed by a
  relative ``perturbation`` (every config field named ``init_perturbation``; 0 leaves the config unchanged)."""
  from experiments import registry
  from experiments.core import config as config_lib
  config = registry.get(experiment).claims_config()
  if not perturbation:
    return config
  fields = [f for f in config_lib.fields_of(config) if f.split(".")[-1] == "init_perturbation"]
  return config_lib.apply_overrides(config, [f"{f}={perturbation!r}" for f in fields])


def run_mode(experiment: str, mode_name: str, workdir, *, overwrite_config: bool = False) -> None:
  """Runs (or resumes) the rerun of ``experiment`` under ``mode_name`` into ``workdir``, in a child Python
  process with the mode's environment; its output goes to this process's.

  Raises:
    RuntimeError: the child failed (its exit status is given); KeyboardInterrupt stops the child too.
  """
  m = mode(mode_name)
  cmd = [sys.executable, "-m", "experiments.claims.stability", "--experiment", experiment, "--workdir", str(workdir),
         "--mode", mode_name] + (["--overwrite_config"] if overwrite_config else [])
  status = subprocess.run(cmd, env=mode_environment(m), check=False).returncode
  if status != 0:
    raise RuntimeError(f"stability pass: {experiment} under mode {mode_name} exited with status {status}; "
                       f"rerun the same command to resume ({' '.join(cmd)})")


def _child(experiment: str, workdir, mode_name: str, overwrite_config: bool) -> None:
  """The child process: records its numerics, then runs the experiment's stability config."""
  from experiments import registry
  from experiments.core.workdir import versions
  m = mode(mode_name)
  path = Path(workdir)
  path.mkdir(parents=True, exist_ok=True)
  keys = ("XLA_FLAGS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES")
  (path / "numerics.json").write_text(json.dumps(dict(
      mode=m.name, description=m.description, perturbation=m.perturbation,
      environment={k: os.environ.get(k) for k in keys}, versions=versions()), indent=1, sort_keys=True) + "\n")
  registry.get(experiment).run(stability_config(experiment, m.perturbation), path,
                               overwrite_config=overwrite_config)


def _key(row: Mapping) -> tuple:
  """What identifies a claim row across runs: its claim, protocol variant and measurement choice."""
  return row["claim_id"], row["variant"], row.get("measurement", "")


def apply_stability(rows: list[dict], root, sources: Sequence, *, rerun_rows: Callable[[Path, str], list[dict]],
                    run: bool, modes: Sequence[str] = MODE_NAMES, overwrite_config: bool = False) -> list[dict]:
  """The stability pass over the claim ``rows`` built from ``sources``; ``rerun_rows(path, experiment)``
  builds the rows of one rerun workdir, read as the quick setting (the claims job's ``build_rows``).

  For each mode in ``modes`` (names from ``MODE_NAMES``) and each experiment of ``stability_experiments()`` that has a
  quick-setting source: reruns it into ``root/workdir_name(experiment, mode)`` when ``run`` (resuming), and
  reads whatever rerun exists there. Every measured or not-measured row gets ``stability``: {mode: its
  direction there ('not measured' included), or None where the rerun has no such row}. A row whose direction
  or magnitude differs under any mode, or that is measured in one run and not in another, becomes direction
  "unstable" (magnitude None), its reason giving the original outcome and each differing one; its estimate
  and interval stay those of the first run.

  Raises:
    ValueError: an unknown mode name.
    RuntimeError: a rerun failed (``run_mode``).
  """
  from experiments.core import verdicts
  root = Path(root)
  for name in modes:
    mode(name)
  by_mode: dict[str, dict] = {}
  for name in modes:
    for experiment in stability_experiments():
      if not any(s.experiment == experiment and not s.variant for s in sources):
        continue
      path = root / workdir_name(experiment, name)
      if run:
        print(f"stability pass [{name}: {mode(name).description}]: {experiment} -> {path}", flush=True)
        start = time.perf_counter()
        run_mode(experiment, name, path, overwrite_config=overwrite_config)
        print(f"  {experiment} under {name} done in {time.perf_counter() - start:.0f} s", flush=True)
      if path.is_dir():
        rerun = rerun_rows(path, experiment)
        by_mode.setdefault(name, {}).update({_key(r): r for r in rerun})
  def as_verdict(row: Mapping):
    return verdicts.Verdict(row["direction"], row.get("magnitude"), row["reason"])
  compared = ("measured", "not measured")  # a row measured here and not under a mode (or back) has moved too
  for row in rows:
    if row["status"] not in compared:
      continue
    seen = {name: by_mode.get(name, {}).get(_key(row)) for name in modes}
    seen = {name: as_verdict(o) for name, o in seen.items() if o is not None and o["status"] in compared}
    if not seen:
      continue
    row["stability"] = {name: (seen[name].direction if name in seen else None) for name in modes}
    v = verdicts.stability_verdict(as_verdict(row), {f"{n} ({mode(n).description})": o for n, o in seen.items()})
    row.update(direction=v.direction, magnitude=v.magnitude, reason=v.reason)
  return rows


def main(argv=None) -> None:
  """The child entry point (``run_mode``); users run ``python -m experiments.claims --stability``."""
  parser = argparse.ArgumentParser(prog="python -m experiments.claims.stability",
                                   description="One rerun of the claims job's stability pass (run by it in a "
                                               "child process; use python -m experiments.claims --stability).")
  parser.add_argument("--experiment", required=True, choices=stability_experiments())
  parser.add_argument("--workdir", required=True)
  parser.add_argument("--mode", required=True, choices=MODE_NAMES)
  parser.add_argument("--overwrite_config", action="store_true")
  args = parser.parse_args(argv)
  from experiments.core import cli
  with cli.user_errors():
    _child(args.experiment, args.workdir, args.mode, args.overwrite_config)


if __name__ == "__main__":
  main()
