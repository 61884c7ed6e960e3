"""Multi-process runs on JAX's own distributed runtime (``jax.distributed``), and CPU device setup.

A sweep runs as P processes (one per host, or several on one host) started with the same command plus
``--coordinator_address host:port --num_processes P --process_id i``, or under an environment that
``jax.distributed.initialize()`` detects by itself (Slurm, Open MPI, Cloud TPU pods). ``initialize`` calls
``jax.distributed.initialize`` only when there is more than one process. Each process then runs the points
``shard`` gives it: the runner's full, ordered list of points (before skipping those already recorded), dealt
round-robin, so a restart of the whole job gives every process the same points again and the workdir's
records of any earlier process count are skipped (``experiments.core.workdir.Workdir`` keeps one results file per
process and reads all of them).

``--global_mesh`` instead runs every point on all processes together: the rows of the empirical NTK's fast
path (``ntk.empirical.global_row_mesh``) are sharded over the devices of all processes, and only process 0
writes records. Points are then not split across processes.

``configure_cpu_devices`` (called by ``experiments/__init__.py`` when a module of this package is run with
``python -m``, before JAX is imported) splits the CPU into per-core XLA devices where that pays, and keeps
several processes on one host from oversubscribing its cores.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
from typing import Optional, Sequence, TypeVar

T = TypeVar("T")

_STATE = {"initialized": False, "global_mesh": False}

# Environment variable for the CPU device split: 'off' (or 0) keeps XLA's single multi-threaded CPU device,
# an integer N ≥ 1 asks for N devices, 'auto' for one per core (divided among the processes on this host).
CPU_DEVICES_ENV = "ATTN_CPU_DEVICES"
# The CLIs (modules of ``experiments`` run with -m) that use per-core devices by default: those where a
# benchmark showed a gain (README "Running the full grid on a cluster"; empty: none did here).
PER_CORE_DEFAULT: frozenset[str] = frozenset()


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """Adds ``--coordinator_address``, ``--num_processes``, ``--process_id`` and ``--global_mesh``."""
  group = parser.add_argument_group("multi-process runs (jax.distributed; omit under Slurm / TPU pods, "
                                    "where they are detected)")
  group.add_argument("--coordinator_address", default=None,
                     help="host:port of process 0's coordinator (the same on every process)")
  group.add_argument("--num_processes", type=int, default=None, help="the number of processes (≥ 1)")
  group.add_argument("--process_id", type=int, default=None, help="this process's index in [0, num_processes)")
  group.add_argument("--global_mesh", action="store_true",
                     help="run every point on all processes together, the empirical NTK's rows sharded over "
                          "all their devices (for points too large for one device); only process 0 writes")


def _detected_process_count() -> Optional[int]:
  """The process count of a cluster environment that ``jax.distributed.initialize()`` detects, or None."""
  try:
    from jax._src import clusters  # the detection jax.distributed.initialize() itself runs
    env = next((e for e in clusters.ClusterEnv._cluster_types
                if not e.opt_in_only_method and e.is_env_present()), None)
    return None if env is None else int(env.get_process_count())
  except Exception:  # noqa: BLE001 - a detection failure means: no cluster, run as one process
    return None


def initialize(coordinator_address: Optional[str] = None, num_processes: Optional[int] = None,
               process_id: Optional[int] = None, *, global_mesh: bool = False) -> int:
  """Joins the job's processes with ``jax.distributed.initialize`` when there is more than one.

  Must run before any JAX computation. On CPU it selects the gloo collectives
  (``jax_cpu_collectives_implementation``), without which CPU processes cannot form a global mesh.

  Args:
    coordinator_address: 'host:port' of process 0 (None: detected, or ``JAX_COORDINATOR_ADDRESS``).
    num_processes: P ≥ 1 (None: detected; 1 without a cluster environment).
    process_id: in [0, P) (None: detected).
    global_mesh: run each point over all processes' devices (see the module docstring).

  Returns:
    The process count.

  Raises:
    ValueError: num_processes < 1, process_id outside [0, num_processes), or several processes without a
      coordinator address or process id where none can be detected.
  """
  import jax
  if num_processes is not None and num_processes < 1:
    raise ValueError(f"--num_processes must be an integer >= 1, got {num_processes}")
  count = num_processes if num_processes is not None else (_detected_process_count() or 1)
  if process_id is not None and not 0 <= process_id < count:
    raise ValueError(f"--process_id must be in [0, {count}) (--num_processes {count}), got {process_id}")
  _STATE["global_mesh"] = bool(global_mesh)
  if count > 1 and not _STATE["initialized"]:
    if num_processes is not None and (process_id is None or (coordinator_address is None and
                                                            "JAX_COORDINATOR_ADDRESS" not in os.environ)):
      if _detected_process_count() is None:
        raise ValueError("--num_processes > 1 needs --process_id and --coordinator_address host:port "
                         "(or a Slurm / MPI / TPU-pod environment that provides them)")
    if not os.environ.get("JAX_PLATFORMS") or "cpu" in os.environ["JAX_PLATFORMS"]:
      jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address, num_processes, process_id)
    _STATE["initialized"] = True
  return count


def process_index() -> int:
  """This process's index (0 in a single-process run)."""
  import jax
  return jax.process_index()


def process_count() -> int:
  """The number of processes of the job (1 in a single-process run)."""
  import jax
  return jax.process_count()


def global_mesh() -> bool:
  """Whether every point runs on all processes together (``--global_mesh``)."""
  return _STATE["global_mesh"]


def writes_records() -> bool:
  """Whether this process appends records: every process, except under ``--global_mesh`` (process 0)."""
  return not _STATE["global_mesh"] or process_index() == 0


def shard(points: Sequence[T], by=None, *, index: Optional[int] = None, count: Optional[int] = None) -> list[T]:
  """This process's share of a runner's full, ordered list of points.

  Points are dealt round-robin, within each class of ``by(point)`` when given (e.g. cheap kernel points
  and costly training points dealt separately, so each process gets its share of both). Apply it to the
  full list, before skipping recorded points: then the assignment does not depend on what is done, and all
  processes of a restarted job agree on it. Under ``--global_mesh`` every process gets every point.

  Args:
    points: the points, in the runner's deterministic order.
    by: optional ``by(point) -> hashable`` class of a point.
    index, count: this process's index and the process count (default: the running job's).

  Returns:
    The points p_k with k ≡ index (mod count), k counted within p's class, in their original order.

  Raises:
    ValueError: index outside [0, count).
  """
  if _STATE["global_mesh"] and index is None:
    return list(points)
  index = process_index() if index is None else index
  count = process_count() if count is None else count
  if not 0 <= index < count:
    raise ValueError(f"index must be in [0, {count}), got {index}")
  seen: dict = {}
  out = []
  for point in points:
    cls = None if by is None else by(point)
    k = seen.get(cls, 0)
    seen[cls] = k + 1
    if k % count == index:
      out.append(point)
  return out


def barrier(name: str) -> None:
  """Waits until every process reaches ``barrier(name)`` (nothing in a single-process run)."""
  if process_count() > 1:
    from jax.experimental import multihost_utils
    multihost_utils.sync_global_devices(name)


@contextlib.contextmanager
def point_context():
  """The context every point runs in: numpy's and scipy's BLAS / LAPACK on one thread (``threadpoolctl``), and
  under ``--global_mesh`` ``ntk.empirical.global_row_mesh``.

  One BLAS thread: the points' float64 linear algebra (eigenvalues, Cholesky solves of kernels with n in the
  hundreds to thousands) ran 5–60× slower on OpenBLAS's default thread per core, whose threads spin against
  JAX's own (benchmarks/loo_threads.py; eigvalsh of the width sweep's kernels: 0.44 s a call)."""
  import threadpoolctl
  with contextlib.ExitStack() as stack:
    stack.enter_context(threadpoolctl.threadpool_limits(limits=1, user_api="blas"))
    if _STATE["global_mesh"]:
      from ntk.empirical import global_row_mesh
      stack.enter_context(global_row_mesh())
    yield


def _argv_value(argv: Sequence[str], flag: str) -> Optional[str]:
  for i, arg in enumerate(argv):
    if arg == flag and i + 1 < len(argv):
      return argv[i + 1]
    if arg.startswith(flag + "="):
      return arg.split("=", 1)[1]
  return None


def _local_process_count(argv: Sequence[str]) -> int:
  """How many processes of this job share this host (1 when unknown)."""
  for var in ("OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE", "LOCAL_WORLD_SIZE"):
    if os.environ.get(var, "").isdigit():
      return max(1, int(os.environ[var]))
  address, count = _argv_value(argv, "--coordinator_address"), _argv_value(argv, "--num_processes")
  if count and count.isdigit() and address:
    host = address.rsplit(":", 1)[0].strip("[]")
    if host in ("localhost", "127.0.0.1", "::1", socket.gethostname()):  # every process on this host
      return max(1, int(count))
  return 1


def cpu_device_count(module: str, argv: Sequence[str], environ=os.environ) -> Optional[int]:
  """The number of XLA CPU devices for ``python -m <module> <argv>``, or None to leave XLA's default.

  Per-core devices (``--xla_force_host_platform_device_count=N --xla_cpu_multi_thread_eigen=false``) are
  the default for the CLIs in ``PER_CORE_DEFAULT``; ``ATTN_CPU_DEVICES`` overrides ('off' or 0: never; N:
  N devices; 'auto': per core). With several processes on this host, each gets cores / processes devices
  (at least 1, single-threaded) whatever the default, so that the processes do not oversubscribe the cores;
  a process already pinned to a subset of cores (Slurm's CPU binding) splits only its own cores.

  Returns:
    N ≥ 1, or None (the user's XLA_FLAGS already set it, the opt-out, a non-CPU JAX_PLATFORMS, or one
    process that uses XLA's default).

  Raises:
    ValueError: ``ATTN_CPU_DEVICES`` is not 'off', 'auto' or an integer ≥ 0.
  """
  setting = environ.get(CPU_DEVICES_ENV, "").strip().lower()
  if setting not in ("", "off", "auto") and not setting.isdigit():
    raise ValueError(f"{CPU_DEVICES_ENV} must be 'off', 'auto' or an integer >= 0, got {setting!r}")
  platforms = environ.get("JAX_PLATFORMS", "")
  if setting in ("off", "0") or "xla_force_host_platform_device_count" in environ.get("XLA_FLAGS", "") or \
      (platforms and "cpu" not in platforms):
    return None
  if setting.isdigit():
    return int(setting)
  local = _local_process_count(argv)
  if local == 1 and setting != "auto" and module not in PER_CORE_DEFAULT:
    return None
  try:
    cores = len(os.sched_getaffinity(0))
  except AttributeError:  # not Linux
    cores = os.cpu_count() or 1
  pinned = cores < (os.cpu_count() or cores)
  return max(1, cores if pinned else cores // local)


def configure_cpu_devices(module: str, argv: Sequence[str]) -> Optional[int]:
  """Sets XLA_FLAGS for ``cpu_device_count`` devices; a no-op once JAX is imported (returns None then).

  Returns:
    The device count set, or None when XLA_FLAGS was left alone.
  """
  if "jax" in sys.modules:
    return None
  count = cpu_device_count(module, argv)
  if count is not None:
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count="
                               f"{count} --xla_cpu_multi_thread_eigen=false").strip()
  return count
