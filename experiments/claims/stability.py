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
import contextlib
import json
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Mapping, NamedTuple, Optional, Sequence

SUFFIX = "_stability"
PERTURBATION = 1e-7  # relative, float32 rounding level


ISA_FLAG = "--xla_cpu_max_isa"  # its value is computed at run time (``lower_isa``)
# x86 instruction sets from oldest, with the OpenBLAS kernels that use no more than each.
ISA_LADDER = (("SSE4_2", "Nehalem"), ("AVX", "Sandybridge"), ("AVX2", "Haswell"), ("AVX512", "SkylakeX"))


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
    Mode("isa", "an older instruction set than this process runs: XLA's code generation capped at AVX (no AVX2, "
         "FMA or AVX-512) and OpenBLAS's Sandy Bridge kernels, or, where this process is already at AVX or below, "
         "at SSE4.2 with OpenBLAS's Nehalem kernels; numpy's run-time SIMD dispatch off",
         (ISA_FLAG,), (("OPENBLAS_CORETYPE", None), ("NPY_DISABLE_CPU_FEATURES", None))),
    Mode("devices", "two XLA host devices: batched kernels and attacks split over them, so their reductions "
         "split too", ("--xla_force_host_platform_device_count=2",)),
)
MODE_NAMES = tuple(m.name for m in MODES)
# Run on every main job and claims job, not only with --stability: one rerun from perturbed initial parameters
# and one under an older instruction set are the rounding band every verdict built on L-BFGS networks needs
# (docs/stability.md: a perturbed rerun alone moved an interval end 9× less than another ISA did).
ALWAYS_MODES = ("perturb", "isa")


def always_modes() -> tuple[str, ...]:
  """``ALWAYS_MODES`` as this machine can run them: where the isa mode has no older instruction set to use
  (``lower_isa``: not x86, or SSE4.2 already), the serial mode stands in for it, with a warning."""
  try:
    lower_isa(os.environ.get("XLA_FLAGS", ""))
  except ValueError as e:
    import warnings
    warnings.warn(f"{e}; the rounding band uses the serial mode instead", stacklevel=2)
    return tuple("serial" if m == "isa" else m for m in ALWAYS_MODES)
  return ALWAYS_MODES


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


def _cpu_flags() -> Optional[set]:
  """The CPU's feature flags from /proc/cpuinfo (lower case), or None where there is no such file."""
  try:
    text = Path("/proc/cpuinfo").read_text()
  except OSError:
    return None
  return next((set(line.split(":", 1)[1].split()) for line in text.splitlines() if line.startswith("flags")), set())


def current_isa(xla_flags: str = "", cpu_flags: Optional[set] = None) -> Optional[str]:
  """The x86 instruction set (a name of ``ISA_LADDER``) that XLA generates code for here: the CPU's newest
  (``cpu_flags``, default /proc/cpuinfo), capped by a ``--xla_cpu_max_isa`` already in ``xla_flags``; None
  where it cannot be told (not x86, no /proc/cpuinfo)."""
  flags = _cpu_flags() if cpu_flags is None else cpu_flags
  if not flags or "sse4_2" not in flags:
    return None
  names = [name for name, _ in ISA_LADDER]
  have = {"SSE4_2": True, "AVX": "avx" in flags, "AVX2": {"avx2", "fma"} <= flags, "AVX512": "avx512f" in flags}
  level = max(i for i, name in enumerate(names) if have[name])
  for item in xla_flags.split():
    if item.startswith(ISA_FLAG + "="):
      cap = item.split("=", 1)[1].strip("'\"").upper()
      # XLA's names: SSE4_2, AVX, AVX2, AVX512 and its extensions (AVX512_VNNI, AVX512_BF16, AMX, ...); it
      # ignores any other value, and so does this
      capped = [names.index(cap)] if cap in names else [3] if cap.startswith(("AVX512_", "AMX")) else []
      level = min(level, max(capped)) if capped else level
  return names[level]


def lower_isa(xla_flags: str = "", cpu_flags: Optional[set] = None) -> tuple[str, str]:
  """(XLA ISA cap, OPENBLAS_CORETYPE) of the isa mode: an instruction set older than this process's
  (``current_isa``), so that the rerun's rounding differs on every x86 machine: AVX (no FMA) from AVX2 or
  newer, SSE4.2 from AVX.

  Raises:
    ValueError: no older instruction set to run (not x86, or SSE4.2 already): the isa mode cannot change the
      numerics here (name the other modes with --stability_modes).
  """
  isa = current_isa(xla_flags, cpu_flags)
  names = [name for name, _ in ISA_LADDER]
  if isa is None or isa == "SSE4_2":
    raise ValueError(f"stability mode isa: this process runs {isa or 'a non-x86 or unknown'} instruction set, with "
                     "no older x86 set below it to rerun under; use the perturb, serial or devices modes")
  return ISA_LADDER[min(names.index(isa) - 1, names.index("AVX"))]


def mode_environment(m: Mode, base: Optional[Mapping[str, str]] = None,
                     cpu_flags: Optional[set] = None) -> dict[str, str]:
  """The child's environment for mode ``m``: ``base`` (default ``os.environ``) with ``m.xla_flags`` appended
  to XLA_FLAGS and ``m.env`` set; the isa mode's cap and OpenBLAS kernels are ``lower_isa``'s for ``base``'s
  XLA_FLAGS on this CPU (``cpu_flags``, default /proc/cpuinfo).

  Raises:
    ValueError: the isa mode where ``lower_isa`` finds no older instruction set.
  """
  env = dict(os.environ if base is None else base)
  isa = lower_isa(env.get("XLA_FLAGS", ""), cpu_flags) if ISA_FLAG in m.xla_flags else None
  if m.xla_flags:
    flags = [f"{f}={isa[0]}" if f == ISA_FLAG else f for f in m.xla_flags]
    env["XLA_FLAGS"] = " ".join([env.get("XLA_FLAGS", "")] + flags).strip()
  for key, value in m.env:
    if value is None:
      value = _dispatched_cpu_features() if key == "NPY_DISABLE_CPU_FEATURES" else isa[1]
    env[key] = value
  return env


def stability_experiments() -> tuple[str, ...]:
  """The registered experiments whose networks full-batch L-BFGS trains (their spec's ``stability``)."""
  from experiments import registry
  return tuple(s.name for s in registry.experiments() if s.stability)


def perturbed(config, perturbation: float):
  """``config`` with its L-BFGS networks' initial parameters perturbed by a relative ``perturbation``
  (every config field named ``init_perturbation``; 0 leaves the config unchanged)."""
  from experiments.core import config as config_lib
  if not perturbation:
    return config
  fields = [f for f in config_lib.fields_of(config) if f.split(".")[-1] == "init_perturbation"]
  return config_lib.apply_overrides(config, [f"{f}={perturbation!r}" for f in fields])


def stability_config(experiment: str, perturbation: float = PERTURBATION):
  """The config the claims job runs for ``experiment`` (its claims' ``claims_config``), ``perturbed``."""
  from experiments import registry
  return perturbed(registry.claims_of(experiment).claims_config(), perturbation)


def in_process(m: Mode) -> bool:
  """Whether mode ``m`` can run in this process: it changes no environment (XLA and OpenBLAS read theirs at
  start-up), only the initial parameters (``perturb``)."""
  return not m.xla_flags and not m.env


def run_mode(experiment: str, mode_name: str, workdir, *, overwrite_config: bool = False, config=None,
             log: Optional[Path] = None, started: Optional[Callable[[subprocess.Popen], None]] = None) -> None:
  """Runs (or resumes) the rerun of ``experiment`` under ``mode_name`` into ``workdir``: in this process for a
  mode that changes no environment (``in_process``), else in a child Python process with the mode's
  environment, its output going to this process's (or, with ``log``, appended to that file).

  Args:
    config: the config to rerun (default: the claims job's, ``claims_config``); a child process gets it
      pickled in ``workdir/rerun_config.pickle`` (the same code reads it back).
    log: a child's output file (appended to); None: this process's output.
    started: called with the child's ``subprocess.Popen`` once it runs (``BackgroundReruns`` stops it there).

  Raises:
    ValueError: the isa mode where this machine has no older instruction set (``lower_isa``).
    RuntimeError: the child failed (its exit status is given, and ``log`` where there is one); KeyboardInterrupt
      stops the child too.
  """
  m = mode(mode_name)
  if in_process(m):
    _rerun(experiment, workdir, m, overwrite_config, config)
    return
  env = mode_environment(m)
  cmd = [sys.executable, "-m", "experiments.claims.stability", "--experiment", experiment, "--workdir", str(workdir),
         "--mode", mode_name] + (["--overwrite_config"] if overwrite_config else [])
  path = Path(workdir)
  if config is not None:
    path.mkdir(parents=True, exist_ok=True)
    (path / CONFIG_PICKLE).write_bytes(pickle.dumps(config))
    cmd.append("--config_pickle")
  if log is not None:
    Path(log).parent.mkdir(parents=True, exist_ok=True)
  with (open(log, "a") if log is not None else contextlib.nullcontext()) as out:
    child = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT if out else None)
    if started is not None:
      started(child)
    try:
      status = child.wait()
    except BaseException:
      child.terminate()
      child.wait()
      raise
  if status != 0:
    raise RuntimeError(f"stability pass: {experiment} under mode {mode_name} exited with status {status}"
                       + (f" (its output: {log})" if log is not None else "")
                       + f"; rerun the same command to resume ({' '.join(cmd)})")


CONFIG_PICKLE = "rerun_config.pickle"
RERUN_LOG = "rerun.log"   # a background rerun's output, in its workdir


class BackgroundReruns:
  """Reruns in child processes (modes that change the environment: ``in_process`` is false), one after
  another in a background thread, while this process does other work: the main job runs its older-instruction-
  set reruns beside its own experiments, since they read nothing of them (on 2 cores its wall time is then
  about its CPU time over two). Each child's output goes to ``<its workdir>/rerun.log``.

    background = BackgroundReruns([(experiment, mode, workdir, config), ...]).start()
    ...                                  # other work; on an exception: background.stop()
    times = background.join()            # [(label, seconds)], or the first child's failure raised

  Args:
    jobs: (experiment, mode name, workdir, config or None: the claims job's), run in this order.
    overwrite_config: passed to ``run_mode``.

  Raises (``start``):
    ValueError: a mode that runs in this process (``perturb``), or an unknown one.
  """

  def __init__(self, jobs: Sequence[tuple], *, overwrite_config: bool = False):
    self.jobs = [(e, m, Path(w), c) for e, m, w, c in jobs]
    for _, name, _, _ in self.jobs:
      if in_process(mode(name)):
        raise ValueError(f"BackgroundReruns: mode {name!r} runs in this process (it changes no environment); "
                         "run it with run_mode")
    self.overwrite_config = overwrite_config
    self.times: list[tuple[str, float]] = []
    self._error: Optional[BaseException] = None
    self._stopped = threading.Event()
    self._child: Optional[subprocess.Popen] = None
    self._thread = threading.Thread(target=self._run, name="background reruns", daemon=True)

  def start(self) -> "BackgroundReruns":
    self._thread.start()
    return self

  def _run(self) -> None:
    for experiment, name, path, config in self.jobs:
      if self._stopped.is_set():
        return
      t0 = time.perf_counter()
      try:
        run_mode(experiment, name, path, overwrite_config=self.overwrite_config, config=config,
                 log=path / RERUN_LOG, started=self._started)
      except BaseException as e:  # re-raised by join, in the main thread
        self._error = e
        return
      self.times.append((f"{experiment} rerun ({name})", time.perf_counter() - t0))

  def _started(self, child: subprocess.Popen) -> None:
    self._child = child
    if self._stopped.is_set():  # stop() came between the check in _run and the child's start
      child.terminate()

  def stop(self) -> None:
    """Starts no further child and ends the running one (its finished points stay in its records)."""
    self._stopped.set()
    child = self._child
    if child is not None and child.poll() is None:
      child.terminate()
    if self._thread.ident is not None:  # started
      self._thread.join()

  def join(self) -> list[tuple[str, float]]:
    """Waits for every child; returns [(label, wall seconds)] in the order run.

    Raises:
      RuntimeError: a child failed (``run_mode``'s message, naming its log).
    """
    self._thread.join()
    if self._error is not None:
      raise self._error
    return list(self.times)


def _rerun(experiment: str, workdir, m: Mode, overwrite_config: bool, config=None) -> None:
  """One rerun: records its numerics (``numerics.json``), then runs ``config`` (default: the claims job's)
  with the mode's perturbation into ``workdir``."""
  from experiments import registry
  from experiments.core.workdir import versions
  path = Path(workdir)
  path.mkdir(parents=True, exist_ok=True)
  keys = ("XLA_FLAGS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES")
  (path / "numerics.json").write_text(json.dumps(dict(
      mode=m.name, description=m.description, perturbation=m.perturbation,
      environment={k: os.environ.get(k) for k in keys}, versions=versions()), indent=1, sort_keys=True) + "\n")
  spec = registry.get(experiment)
  config = config if config is not None else registry.claims_of(experiment).claims_config()
  spec.run(perturbed(config, m.perturbation), path,
           overwrite_config=overwrite_config)


def row_key(row: Mapping) -> tuple:
  """What identifies a claim row across runs: its claim, protocol variant and measurement choice, by the
  choice's ``measurement_id`` (stable where the measurement text embeds a measured value, e.g. the calibrated
  ε*, which moves with the numerics; rows of older claims.jsonl files without it fall back to the text)."""
  return row["claim_id"], row["variant"], row.get("measurement_id") or row.get("measurement", "")


def _interval(row: Mapping):
  from experiments.core import verdicts
  return verdicts.Interval(row["estimate"], row["low"], row["high"], row["level"], row["n"], row["unit"],
                           row["method"])


def band_verdict(row: Mapping, reruns: Mapping[str, Mapping]):
  """The verdict of ``row`` (a measured row whose verdict came from its interval) once its interval is
  widened by the rounding band of its ``reruns`` ({mode: the same row rerun}; ``verdicts.stability_band``),
  or None where no band applies (no interval, a verdict that a rule set after the interval's, no measured
  rerun)."""
  from experiments.core import verdicts
  measured = [r for r in reruns.values() if r["status"] == "measured" and r.get("low") is not None]
  if row["status"] != "measured" or row.get("paper_sign") is None or row.get("low") is None or not measured:
    return None
  def read(interval):
    return verdicts.verdict(interval, row["paper_sign"], paper_range=row.get("paper_range"), null=row["null"],
                            scale=row.get("scale") or "ratio")
  own = read(_interval(row))
  if (own.direction, own.magnitude) != (row["direction"], row.get("magnitude")):
    return None   # a rule set this row's verdict after its interval (e.g. a window test): no band to read
  widened, _, _ = verdicts.stability_band(_interval(row), [_interval(r) for r in measured], row.get("scale") or "")
  return read(widened), widened


def rerun_source(sources: Sequence, experiment: str):
  """The source of ``experiment`` that the stability pass reruns: its quick-setting one, else its only one
  (the main job's, whose width sweep differs from the claims job's config); None when there is neither."""
  mine = [s for s in sources if s.experiment == experiment]
  quick = [s for s in mine if not s.variant]
  return quick[0] if quick else (mine[0] if len(mine) == 1 else None)


def run_reruns(root, sources: Sequence, modes: Sequence[str], *, overwrite_config: bool = False,
               configs: Optional[Mapping[str, object]] = None) -> None:
  """Runs (or resumes) every rerun of the stability pass: each mode of ``modes``, each experiment of
  ``stability_experiments()`` with a source to rerun (``rerun_source``), into ``root/workdir_name(experiment,
  mode)``; ``configs`` ({experiment: config}) reruns those configs instead of the claims job's. On a single
  process the child-process modes (isa, serial, devices) run in the background beside the in-process one
  (perturb; ``BackgroundReruns``, each child's output in its workdir's ``rerun.log``).

  Raises:
    ValueError: an unknown mode name.
    RuntimeError: a rerun failed (``run_mode``).
  """
  from experiments.core import distributed
  root = Path(root)
  for name in modes:
    mode(name)
  jobs = [(experiment, name, root / workdir_name(experiment, name)) for name in modes
          for experiment in stability_experiments() if rerun_source(sources, experiment) is not None]
  beside = [job for job in jobs if not in_process(mode(job[1]))] if distributed.process_count() == 1 else []
  background = BackgroundReruns([(e, n, p, (configs or {}).get(e)) for e, n, p in beside],
                                overwrite_config=overwrite_config)
  for experiment, name, path in beside:
    print(f"stability pass [{name}: {mode(name).description}]: {experiment} -> {path}, in the background (its "
          f"output: {path / RERUN_LOG})", flush=True)
  background.start()
  try:
    for experiment, name, path in jobs:
      if (experiment, name, path) in beside:
        continue
      print(f"stability pass [{name}: {mode(name).description}]: {experiment} -> {path}", flush=True)
      start = time.perf_counter()
      run_mode(experiment, name, path, overwrite_config=overwrite_config, config=(configs or {}).get(experiment))
      print(f"  {experiment} under {name} done in {time.perf_counter() - start:.0f} s", flush=True)
  except BaseException:
    background.stop()
    raise
  for label, seconds in background.join():
    print(f"  {label} done in {seconds:.0f} s (in the background)", flush=True)


def apply_stability(rows: list[dict], root, sources: Sequence, *,
                    rerun_rows: Callable[[Path, str, tuple], list[dict]], run: bool,
                    modes: Sequence[str] = MODE_NAMES, overwrite_config: bool = False) -> list[dict]:
  """The stability pass over the claim ``rows`` built from ``sources``; ``rerun_rows(path, experiment,
  variant)`` builds the rows of one rerun workdir, read as the source it reruns (the claims job's
  ``rerun_rows``).

  For each mode in ``modes`` (names from ``MODE_NAMES``) and each experiment of ``stability_experiments()`` that has a
  source to rerun (``rerun_source``): reruns it into ``root/workdir_name(experiment, mode)`` when ``run``
  (resuming), and reads whatever rerun exists there or beside the source's workdir (``rerun_dir``). Every measured or not-measured row gets ``stability``:
  {mode: its direction there ('not measured' included), or None where the rerun has no such row}. A row
  becomes direction "unstable" (magnitude None), its reason giving every outcome, when
  - its direction or magnitude differs under any mode, or it is measured in one run and not in another; or
  - its interval, widened by ``verdicts.BAND_FACTOR`` times the largest move of its ends under the reruns
    (``verdicts.stability_band``), would read another verdict (``band_verdict``; the widened ends are kept
    as ``stability_band``).
  Its estimate and interval stay those of the first run. Rows are matched by ``row_key``.

  Raises:
    ValueError: an unknown mode name.
    RuntimeError: a rerun failed (``run_mode``).
  """
  from experiments.core import verdicts
  root = Path(root)
  if run:
    run_reruns(root, sources, modes, overwrite_config=overwrite_config)
  for name in modes:
    mode(name)
  by_mode: dict[str, dict] = {}
  for name in modes:
    for experiment in stability_experiments():
      source = rerun_source(sources, experiment)
      if source is None:
        continue
      path = rerun_dir(root, source, name)
      if path is not None:
        rerun = rerun_rows(path, experiment, source.variant)
        by_mode.setdefault(name, {}).update({row_key(r): r for r in rerun})
  def as_verdict(row: Mapping):
    return verdicts.Verdict(row["direction"], row.get("magnitude"), row["reason"])
  compared = ("measured", "not measured")  # a row measured here and not under a mode (or back) has moved too
  for row in rows:
    if row["status"] not in compared:
      continue
    found = {name: by_mode.get(name, {}).get(row_key(row)) for name in modes}
    found = {name: o for name, o in found.items() if o is not None and o["status"] in compared}
    if not found:
      continue
    seen = {name: as_verdict(o) for name, o in found.items()}
    row["stability"] = {name: (seen[name].direction if name in seen else None) for name in modes}
    first = as_verdict(row)
    row["stability_outcomes"] = {"here": outcome(first), **{n: outcome(o) for n, o in seen.items()}}
    v = verdicts.stability_verdict(first, {f"{n} ({mode(n).description})": o for n, o in seen.items()})
    banded = band_verdict(row, found) if v.direction != "unstable" else None
    if banded is not None and (banded[0].direction, banded[0].magnitude) != (v.direction, v.magnitude):
      w, iv = banded
      row["stability_band"] = [iv.low, iv.high]
      row["stability_outcomes"]["rounding band"] = outcome(w)
      v = verdicts.Verdict("unstable", None, (
          f"the verdict sits inside the rounding band: {outcome(v)} ({v.reason}) here and under "
          f"{', '.join(seen)}, but the reruns move the interval's ends, and widened {verdicts.BAND_FACTOR:g}× "
          f"that move, [{iv.low:.4g}, {iv.high:.4g}], it reads {outcome(w)}; another machine's rounding can "
          "move it that far"))
    row.update(direction=v.direction, magnitude=v.magnitude, reason=v.reason)
  return rows


def rerun_dir(root, source, mode_name: str) -> Optional[Path]:
  """Where the rerun of ``source`` (a ``Source``) under ``mode_name`` lies, or None where it has none: under
  ``root`` (``root/workdir_name(experiment, mode)``, where the claims job and the main job write it), else beside
  the source's own workdir (``<its parent>/workdir_name(<its name>, mode)``), so that a table rebuilt with
  ``--from`` from committed workdirs reads their committed reruns too."""
  for path in (Path(root) / workdir_name(source.experiment, mode_name),
               Path(source.path).parent / workdir_name(Path(source.path).name, mode_name)):
    if path.is_dir():
      return path
  return None


def outcome(v) -> str:
  """'direction' or 'direction, magnitude' of a ``verdicts.Verdict``."""
  return v.direction if v.magnitude is None else f"{v.direction}, {v.magnitude}"


def main(argv=None) -> None:
  """The child entry point (``run_mode``); users run ``python -m experiments.claims --stability``."""
  parser = argparse.ArgumentParser(allow_abbrev=False, prog="python -m experiments.claims.stability",
                                   description="One rerun of the claims job's stability pass (run by it in a "
                                               "child process; use python -m experiments.claims --stability).")
  parser.add_argument("--experiment", required=True, choices=stability_experiments())
  parser.add_argument("--workdir", required=True)
  parser.add_argument("--mode", required=True, choices=MODE_NAMES)
  parser.add_argument("--overwrite_config", action="store_true")
  parser.add_argument("--config_pickle", action="store_true",
                      help=f"rerun the config that run_mode pickled into WORKDIR/{CONFIG_PICKLE}")
  args = parser.parse_args(argv)
  from experiments.core import cli, distributed
  with cli.user_errors(), distributed.point_context():
    config = pickle.loads((Path(args.workdir) / CONFIG_PICKLE).read_bytes()) if args.config_pickle else None
    _rerun(args.experiment, args.workdir, mode(args.mode), args.overwrite_config, config)


if __name__ == "__main__":
  main()
