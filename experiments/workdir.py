"""A run's workdir: ``config.json``, ``results.jsonl`` (one record per measured point), and arrays.

Every record carries the point's key fields, the wall time, the seed and the library versions, and is
appended (and flushed) as soon as the point finishes, so a killed run loses nothing; restarting with the
same workdir skips the keys already recorded (STYLE.md §5–6; big_vision's workdir convention).
Arrays are saved with orbax under ``arrays/<key>/``.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import platform
import shutil
import time
import weakref
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

try:
  import fcntl
except ImportError:  # not POSIX: no lock
  fcntl = None

LOCK_NAME = ".lock"
_HELD: dict[Path, list] = {}  # resolved workdir -> [its open, flock-ed lock file, live Workdir objects]


def _acquire(path: Path) -> Path:
  """Takes the workdir's lock for this process (shared by every Workdir object of the process).

  Raises:
    ValueError: another process holds it: two jobs appending to one results.jsonl would duplicate points.
  """
  key = path.resolve()
  if key in _HELD:
    _HELD[key][1] += 1
    return key
  lock = open(path / LOCK_NAME, "a+")
  if fcntl is not None:
    try:
      fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      lock.close()
      raise ValueError(f"workdir {path} is in use by another running job (it holds {path / LOCK_NAME}); "
                       "wait for it to finish or use another workdir") from None
    except OSError:  # a file system without flock (some network mounts): run unlocked
      pass
  _HELD[key] = [lock, 1]
  return key


def _release(key: Path) -> None:
  entry = _HELD.get(key)
  if entry is not None:
    entry[1] -= 1
    if entry[1] == 0:
      entry[0].close()  # releases the flock
      del _HELD[key]


@functools.lru_cache(maxsize=1)
def versions() -> dict[str, str]:
  """Versions of the libraries that produce the numbers (recorded in every record)."""
  import flax
  import jax
  import neural_tangents
  out = {"python": platform.python_version(), "jax": jax.__version__, "numpy": np.__version__,
         "neural_tangents": getattr(neural_tangents, "__version__", "unknown"), "flax": flax.__version__,
         "backend": jax.default_backend(), "devices": str(jax.device_count())}
  return out


def _jsonable(value: Any) -> Any:
  if dataclasses.is_dataclass(value):
    return _jsonable(dataclasses.asdict(value))
  if isinstance(value, dict):
    return {str(k): _jsonable(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_jsonable(v) for v in value]
  if isinstance(value, np.ndarray):
    return _jsonable(value.tolist())
  if isinstance(value, np.generic):
    value = value.item()
  if isinstance(value, float) and not np.isfinite(value):
    return str(value)  # 'inf' / '-inf' / 'nan' as strings: JSON has no literal for them
  return value


_NON_FINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def _decode(value: Any) -> Any:
  """Inverse of the non-finite encoding of ``_jsonable``: 'nan' / 'inf' / '-inf' strings back to floats."""
  if isinstance(value, dict):
    return {k: _decode(v) for k, v in value.items()}
  if isinstance(value, list):
    return [_decode(v) for v in value]
  if isinstance(value, str):
    return _NON_FINITE.get(value, value)
  return value


class Workdir:
  """Append-only results store for one run.

  Args:
    path: directory (created if missing).
    key_fields: the record fields that identify a sweep point, e.g. ("dataset", "model", "width", "seed").
    config: the run's config (dataclass or dict); written to ``config.json``. A workdir that already
      holds results of a different config is refused (``ValueError``): resuming would mix incompatible
      results. Results are everything in the workdir besides ``config.json`` and ``previous-*/``: records,
      arrays, model checkpoints (``models/``), plots. With ``overwrite_config`` they are moved with the old
      config, not deleted, into ``previous-<time>/`` and the run starts afresh. A config.json without
      results (a run that failed before writing anything, e.g. on a typo) is simply replaced.

  One process at a time may use a workdir: a second job on it gets a ``ValueError`` (an advisory ``flock``
  on ``.lock``, POSIX only; Workdir objects of one process share it).
  """

  def __init__(self, path, key_fields: Sequence[str], config=None, *, overwrite_config: bool = False):
    self.path = Path(path)
    if self.path.exists() and not self.path.is_dir():
      raise ValueError(f"workdir {self.path} exists and is not a directory")
    self.path.mkdir(parents=True, exist_ok=True)
    weakref.finalize(self, _release, _acquire(self.path))  # released when the last Workdir of it goes
    self.key_fields = tuple(key_fields)
    self.results_path = self.path / "results.jsonl"
    if config is not None:
      cfg = _jsonable(config)
      cfg_path = self.path / "config.json"
      old = _read_config(cfg_path) if cfg_path.exists() else cfg
      if old != cfg and self._results():
        changed = sorted(k for k in set(old) | set(cfg) if old.get(k) != cfg.get(k))
        if not overwrite_config:
          raise ValueError(
              f"{cfg_path} belongs to results of a different config (fields {changed} differ); use a new "
              "workdir, or --overwrite_config to move the old results aside and start afresh")
        self._move_aside()
      cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")

  def _results(self) -> list[Path]:
    """What a run has written besides its config (and the results of earlier configs)."""
    return [p for p in self.path.iterdir()
            if p.name not in ("config.json", LOCK_NAME) and not p.name.startswith("previous-")]

  def _move_aside(self) -> Path:
    stamp = time.strftime("previous-%Y%m%d-%H%M%S")
    backup, i = self.path / stamp, 1
    while backup.exists():  # two overwrites within one second
      backup, i = self.path / f"{stamp}-{i}", i + 1
    backup.mkdir()
    for path in [self.path / "config.json", *self._results()]:
      if path.exists():
        shutil.move(str(path), str(backup / path.name))
    return backup

  def key(self, record: dict) -> tuple:
    return tuple(record[f] for f in self.key_fields)

  def records(self) -> list[dict]:
    """All complete records so far (a truncated last line from a killed run is ignored)."""
    return read_records(self.path)

  def done(self) -> set[tuple]:
    """Keys of the points already recorded."""
    return {self.key(r) for r in self.records() if all(f in r for f in self.key_fields)}

  def append(self, record: dict) -> dict:
    """Adds versions, writes one JSON line and flushes it to disk. Returns the stored record."""
    missing = [f for f in self.key_fields if f not in record]
    if missing:
      raise ValueError(f"record lacks key fields {missing}")
    stored = _jsonable({**record, "versions": versions()})
    with open(self.results_path, "ab+") as f:
      # A killed run may have left a partial line: start on a fresh line (reads only the last byte).
      if f.seek(0, 2) > 0:
        f.seek(-1, 2)
        if f.read(1) != b"\n":
          f.write(b"\n")
      f.write((json.dumps(stored, sort_keys=True) + "\n").encode())
      f.flush()
    return stored

  def save_arrays(self, record_key: Iterable, arrays: dict[str, np.ndarray]) -> Path:
    """Saves a dict of arrays with orbax under ``arrays/<key>``; returns that path."""
    import orbax.checkpoint as ocp
    name = "_".join(str(k) for k in record_key).replace("/", "-")
    path = (self.path / "arrays" / name).resolve()
    if path.exists():
      shutil.rmtree(path)
    ocp.PyTreeCheckpointer().save(path, {k: np.asarray(v) for k, v in arrays.items()})
    return path

  def load_arrays(self, record_key: Iterable) -> dict[str, np.ndarray]:
    import orbax.checkpoint as ocp
    name = "_".join(str(k) for k in record_key).replace("/", "-")
    return ocp.PyTreeCheckpointer().restore((self.path / "arrays" / name).resolve())


def _read_config(path: Path) -> dict:
  try:
    return json.loads(path.read_text())
  except json.JSONDecodeError as e:
    raise ValueError(f"{path} is not valid JSON ({e}); delete it or use a new workdir") from None


def read_records(workdir) -> list[dict]:
  """Records of a finished or partial run, for plotting without recomputing.

  A truncated last line (from a killed run) is skipped. Non-finite numbers (stored as the strings 'nan',
  'inf', '-inf') come back as floats; so would a string field whose value is literally one of those.
  """
  path = Path(workdir) / "results.jsonl"
  if not path.exists():
    return []
  out = []
  for line in path.read_text().splitlines():
    try:
      out.append(_decode(json.loads(line)))
    except json.JSONDecodeError:
      continue
  return out
