"""Multi-process runs on jax.distributed (experiments.core.distributed): two Python processes on localhost.

A 2-process run gives the records of a 1-process run, split over two disjoint, non-empty results files; a
job killed after a process's first record and restarted completes with every point exactly once; the
global-mesh kernel of 2 processes equals the single-process kernel. Plus the in-process rules: the
round-robin split is a partition, the per-process workdir files, and the CPU device split.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from experiments import registry
from experiments.core import distributed
from experiments.core.config import apply_overrides
from experiments.core.workdir import Workdir, read_records, results_files
from experiments.flip_rate import run as flip_rate
from experiments.width_sweep import run as width_sweep

ROOT = Path(__file__).resolve().parents[3]
RTOL = 1e-5
TIMEOUT_S = 300  # a guard only: the runs take seconds to a minute
# Not compared between runs: timings, library versions and device counts, which process wrote the record.
SKIPPED = {"wall_time_s", "setup_time_s", "versions", "process_index", "process_count"}
WIDTH_SWEEP = ["datasets=mnist", "models=relu", "widths=16,32", "seeds=0,1", "data.n_train=16", "data.n_test=8",
               "train.max_width=32", "train.seeds=0", "train.steps=5", "save_arrays=true", "converged.enabled=false"]
FLIP_RATE = ["tasks=mnist", "models=relu", "widths=16", "seeds=0,1", "eps=0.0,0.3", "attacks=fgsm,random_sign",
             "data.n_train=20", "data.n_test=8", "train.learning_rates=0.001", "train.max_epochs=2",
             "train.check_every=1", "train.batch_size=10", "pgd_steps=2"]


_LAUNCHED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _no_orphans():
  """Kills the processes a failed test left running (one waiting for a dead peer would wait minutes)."""
  yield
  while _LAUNCHED:
    p = _LAUNCHED.pop()
    if p.poll() is None:
      p.kill()
      p.wait()


def _popen(command, env) -> subprocess.Popen:
  """Starts a process whose output goes to a temporary file ``p.log`` (a full pipe would block it)."""
  log = tempfile.TemporaryFile()
  p = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
  p.log = log
  _LAUNCHED.append(p)
  return p


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def _launch(module: str, workdir: Path, overrides, n: int = 2, extra=()) -> list[subprocess.Popen]:
  """Starts the n processes of ``python -m experiments.<module>`` on localhost."""
  port = _free_port()
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
  env.pop(distributed.CPU_DEVICES_ENV, None)
  env.pop("XLA_FLAGS", None)
  return [_popen([sys.executable, "-m", f"experiments.{module}", "--workdir", str(workdir), *overrides, *extra,
                  "--coordinator_address", f"localhost:{port}", "--num_processes", str(n), "--process_id", str(i)],
                 env) for i in range(n)]


def _finish(procs, timeout=TIMEOUT_S) -> None:
  """Waits for every process (killing all of them past ``timeout``) and checks each exited with 0."""
  deadline = time.monotonic() + timeout
  try:
    for p in procs:
      p.wait(timeout=max(1.0, deadline - time.monotonic()))
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
        p.wait()
  for p in procs:
    p.log.seek(0)
    assert p.returncode == 0, p.log.read().decode(errors="replace")[-3000:]


def _config(name, overrides):
  return apply_overrides(registry.get(name).get_config(), overrides)


def _by_key(records, key_fields) -> dict:
  out = {}
  for r in records:
    key = tuple(json.dumps(r[f]) for f in key_fields)
    assert key not in out, f"point {key} recorded twice"
    out[key] = r
  return out


def _assert_records_equal(got, expected, key_fields) -> None:
  got, expected = _by_key(got, key_fields), _by_key(expected, key_fields)
  assert set(got) == set(expected)
  for key, e in expected.items():
    g = got[key]
    assert set(g) == set(e), key
    for field in set(e) - SKIPPED:
      if isinstance(e[field], (int, float)) and not isinstance(e[field], bool):
        np.testing.assert_allclose(g[field], e[field], rtol=RTOL, atol=1e-12, err_msg=f"{key} {field}")
      else:
        assert g[field] == e[field], (key, field)


def _assert_split(workdir: Path, key_fields) -> None:
  """Both processes wrote a non-empty results file of their own, with disjoint points."""
  files = results_files(workdir)
  assert [f.name for f in files] == ["results-00000-of-00002.jsonl", "results-00001-of-00002.jsonl"]
  keys = []
  for i, f in enumerate(files):
    records = [json.loads(line) for line in f.read_text().splitlines()]
    assert records and all(r["process_index"] == i and r["process_count"] == 2 for r in records)
    # the no-oversubscription guard: 2 processes on this host get cores // 2 devices each (≥ 1)
    assert all(r["versions"]["devices"] == str(2 * int(r["versions"]["local_devices"])) for r in records)
    keys.append({tuple(json.dumps(r[k]) for k in key_fields) for r in records})
  assert not keys[0] & keys[1]


@pytest.mark.long
def test_two_process_flip_rate_gives_the_records_of_one(tmp_path):
  procs = _launch("flip_rate", tmp_path / "two", FLIP_RATE)
  one = flip_rate.run(_config("flip_rate", FLIP_RATE), tmp_path / "one")  # meanwhile, the 1-process reference
  _finish(procs)
  _assert_split(tmp_path / "two", flip_rate.KEY_FIELDS)
  _assert_records_equal(read_records(tmp_path / "two"), one, flip_rate.KEY_FIELDS)
  assert (tmp_path / "two" / "summary.md").exists()  # process 0's report, over both processes' records


@pytest.mark.long
def test_two_process_width_sweep_killed_restarted_gives_the_records_of_one(tmp_path):
  """Process 1 is killed after its first record, so the job stops (JAX's runtime does not rejoin a process);
  restarting both completes the sweep: every point once, nothing recorded lost, the 1-process records."""
  two = tmp_path / "two"
  procs = _launch("width_sweep", two, WIDTH_SWEEP)
  victim = two / "results-00001-of-00002.jsonl"
  deadline = time.monotonic() + TIMEOUT_S
  while not (victim.exists() and victim.read_text().count("\n") >= 1):
    assert time.monotonic() < deadline and procs[1].poll() is None, "process 1 wrote no record"
    time.sleep(0.02)
  for p in procs[::-1]:
    p.send_signal(signal.SIGKILL)
    p.wait()
  before = _by_key(read_records(two), width_sweep.KEY_FIELDS)
  total = len(list(width_sweep._points(_config("width_sweep", WIDTH_SWEEP))))
  assert 1 <= len(before) < total
  procs = _launch("width_sweep", two, WIDTH_SWEEP)  # restart all processes
  one = width_sweep.run(_config("width_sweep", WIDTH_SWEEP), tmp_path / "one")  # meanwhile, 1 process
  _finish(procs)
  after = _by_key(read_records(two), width_sweep.KEY_FIELDS)  # every point exactly once
  assert len(after) == total and set(before) <= set(after)
  _assert_split(two, width_sweep.KEY_FIELDS)
  _assert_records_equal(read_records(two), one, width_sweep.KEY_FIELDS)
  assert (two / "summary.md").exists()
  trained = [r for r in one if r["kind"] == "train"]  # their arrays: each process saved its own (npz)
  assert len(list((two / "arrays").glob("*.npz"))) == len(trained)


_KERNEL_SCRIPT = """
import sys
import numpy as np
from experiments.core import distributed
distributed.initialize(sys.argv[1], 2, int(sys.argv[2]))
import jax, ntk
from ntk.empirical import global_row_mesh, two_layer_relu_ntk
x = np.random.default_rng(0).normal(size=(13, 6)).astype(np.float32)
x2 = np.random.default_rng(1).normal(size=(5, 6)).astype(np.float32)
out = {}
for readout in ("fixed", "trained"):
  model = ntk.two_layer_relu(32, 6, out_dim=3, readout=readout)
  _, params = model.init_fn(jax.random.PRNGKey(0), x.shape)
  with global_row_mesh():
    out[readout] = np.asarray(two_layer_relu_ntk(model, params, x))
    out[readout + "_blocks"] = two_layer_relu_ntk(model, params, x, x2, memory_bytes=3000)  # 3-row blocks
assert jax.device_count() == 2 and jax.local_device_count() == 1
np.savez(sys.argv[3] + f"/kernel{jax.process_index()}.npz", **out)
"""


def test_global_mesh_kernel_of_two_processes_equals_one_process(tmp_path):
  import jax

  import ntk
  from ntk.empirical import two_layer_relu_ntk
  port = _free_port()
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
  env.pop("XLA_FLAGS", None)
  procs = [_popen([sys.executable, "-c", _KERNEL_SCRIPT, f"localhost:{port}", str(i), str(tmp_path)], env)
           for i in range(2)]
  x = np.random.default_rng(0).normal(size=(13, 6)).astype(np.float32)
  x2 = np.random.default_rng(1).normal(size=(5, 6)).astype(np.float32)
  expected = {}
  for readout in ("fixed", "trained"):
    model = ntk.two_layer_relu(32, 6, out_dim=3, readout=readout)
    _, params = model.init_fn(jax.random.PRNGKey(0), x.shape)
    expected[readout] = np.asarray(two_layer_relu_ntk(model, params, x))
    expected[readout + "_blocks"] = np.asarray(two_layer_relu_ntk(model, params, x, x2))
  _finish(procs)
  for i in range(2):  # every process holds the whole gathered kernel
    with np.load(tmp_path / f"kernel{i}.npz") as got:
      for name, e in expected.items():
        np.testing.assert_allclose(got[name], e, rtol=RTOL, atol=1e-7, err_msg=f"process {i} {name}")


def test_shard_is_a_balanced_partition():
  points = [(w, s, kind) for w in range(5) for s, kind in ((0, "init"), (1, "init"), (0, "train"))]
  for count in (1, 2, 3, 4):
    shares = [distributed.shard(points, by=lambda p: p[2], index=i, count=count) for i in range(count)]
    assert sorted(sum(shares, [])) == sorted(points)  # a partition, nothing lost or repeated
    for kind in ("init", "train"):  # each class is dealt evenly
      sizes = [sum(p[2] == kind for p in share) for share in shares]
      assert max(sizes) - min(sizes) <= 1
    assert all(share == [p for p in points if p in share] for share in shares)  # original order kept
  with pytest.raises(ValueError, match="index"):
    distributed.shard(points, index=2, count=2)


def test_workdir_files_of_two_processes(tmp_path):
  w0 = Workdir(tmp_path, ("k",), {"lr": 1.0}, process_index=0, process_count=2)
  w1 = Workdir(tmp_path, ("k",), {"lr": 1.0}, process_index=1, process_count=2, config_wait_s=1)
  w0.append({"k": 1})
  w1.append({"k": 2})
  assert [r["k"] for r in read_records(tmp_path)] == [1, 2] and w0.done() == w1.done() == {(1,), (2,)}
  with pytest.raises(ValueError, match="in use"):  # process 1 of a second job (of 3 processes)
    Workdir(tmp_path, ("k",), {"lr": 1.0}, process_index=1, process_count=3)
  with pytest.raises(ValueError, match=r"differs in fields \['lr'\]"):  # process 0 wrote another config
    Workdir(tmp_path, ("k",), {"lr": 2.0}, process_index=2, process_count=3, config_wait_s=0.3)
  with pytest.raises(ValueError, match="in use"):  # a single-process job on it meanwhile
    Workdir(tmp_path, ("k",), {"lr": 1.0}, process_index=0, process_count=1)


def test_cpu_device_split():
  flags = ["--coordinator_address", "localhost:1234", "--num_processes", "2"]
  cores = len(os.sched_getaffinity(0))
  base = {"JAX_PLATFORMS": "cpu"}
  assert distributed.cpu_device_count("experiments.width_sweep", [], base) is None  # not in the default set
  assert distributed.cpu_device_count("x", flags, base) == max(1, cores // 2)  # no oversubscription
  assert distributed.cpu_device_count("x", [], {**base, distributed.CPU_DEVICES_ENV: "auto"}) == cores
  assert distributed.cpu_device_count("x", flags, {**base, distributed.CPU_DEVICES_ENV: "off"}) is None
  assert distributed.cpu_device_count("x", flags, {**base, distributed.CPU_DEVICES_ENV: "3"}) == 3
  assert distributed.cpu_device_count(
      "x", flags, {"XLA_FLAGS": "--xla_force_host_platform_device_count=5"}) is None  # the user's choice
  assert distributed.cpu_device_count("x", flags, {"JAX_PLATFORMS": "cuda"}) is None
  with pytest.raises(ValueError, match=distributed.CPU_DEVICES_ENV):
    distributed.cpu_device_count("x", [], {distributed.CPU_DEVICES_ENV: "many"})


def test_every_point_runs_numpys_blas_on_one_thread_and_the_setting_is_restored():
  """point_context (the main job, each experiment, the claims job, its reruns, the paper grids) runs numpy's and
  scipy's BLAS / LAPACK on one thread, and leaves the thread counts as it found them."""
  import threadpoolctl
  import scipy.linalg  # noqa: F401  (loads scipy's own OpenBLAS)
  def blas_threads():
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
  before = blas_threads()
  assert before
  with distributed.point_context():
    assert set(blas_threads()) == {1}
  assert blas_threads() == before
