"""A run's workdir: ``config.json``, ``results.jsonl`` (one record per measured point), and arrays.

Every record carries the point's key fields, the wall time, the seed and the library versions, and is
appended (and flushed) as soon as the point finishes, so a killed run loses nothing; restarting with the
same workdir skips the keys already recorded (results are data, long runs resume; big_vision's workdir convention).
Half a line left by a kill during an append is moved aside on resume (``repair_torn_tail``).
Arrays are saved with orbax under ``arrays/<key>/``.

In a multi-process run (``experiments.core.distributed``) process i of P appends to its own
``results-<i>-of-<P>.jsonl`` under its own lock; process 0 alone writes ``config.json`` (the others wait
for it and check it); every reader (``read_records``, resume, the reports) reads all results files, and
every record carries ``process_index`` and ``process_count``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import platform
import os
import shutil
import time
import warnings
import weakref
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

try:
  import fcntl
except ImportError:  # not POSIX: no lock
  fcntl = None

LOCK_NAME = ".lock"
RESULTS_NAME = "results.jsonl"
CONFIG_WAIT_S = 300.0  # how long processes > 0 wait for process 0's config.json
_HELD: dict[tuple, list] = {}  # (resolved workdir, process) -> [its open, flock-ed lock files, live Workdirs]


def results_name(index: int, count: int) -> str:
  """The results file of process ``index`` of ``count``: results.jsonl for a single process, else
  results-<index>-of-<count>.jsonl (5 digits each)."""
  return RESULTS_NAME if count == 1 else f"results-{index:05d}-of-{count:05d}.jsonl"


def _flock(path: Path, mode: int, workdir: Path, opened: list):
  lock = open(path, "a+")
  opened.append(lock)
  if fcntl is not None:
    try:
      fcntl.flock(lock, mode | fcntl.LOCK_NB)
    except BlockingIOError:
      for f in opened:
        f.close()
      raise ValueError(f"workdir {workdir} is in use by another running job (it holds {path}); "
                       "wait for it to finish or use another workdir") from None
    except OSError:  # a file system without flock (some network mounts): run unlocked
      pass


def _acquire(path: Path, index: int = 0, count: int = 1) -> tuple:
  """Takes the workdir's lock for this process (shared by every Workdir object of the process).

  A single-process run holds ``.lock`` exclusively; process i of a multi-process run holds ``.lock``
  shared and ``.lock-<i>`` exclusively, so two jobs never append to one results file.

  Raises:
    ValueError: another job holds it: two jobs appending to one results file would duplicate points.
  """
  key = (path.resolve(), index, count)
  if key in _HELD:
    _HELD[key][1] += 1
    return key
  opened: list = []
  if count == 1:
    _flock(path / LOCK_NAME, fcntl.LOCK_EX if fcntl else 0, path, opened)
  else:
    _flock(path / LOCK_NAME, fcntl.LOCK_SH if fcntl else 0, path, opened)
    _flock(path / f"{LOCK_NAME}-{index:05d}", fcntl.LOCK_EX if fcntl else 0, path, opened)
  _HELD[key] = [opened, 1]
  return key


def _release(key: tuple) -> None:
  entry = _HELD.get(key)
  if entry is not None:
    entry[1] -= 1
    if entry[1] == 0:
      for lock in entry[0]:
        lock.close()  # releases the flock
      del _HELD[key]


@functools.lru_cache(maxsize=1)
def versions() -> dict[str, str]:
  """Versions of the libraries that produce the numbers (recorded in every record)."""
  import flax
  import jax
  import ntk._nt_compat  # noqa: F401  (neural-tangents on current JAX)
  import neural_tangents
  out = {"python": platform.python_version(), "jax": jax.__version__, "numpy": np.__version__,
         "neural_tangents": getattr(neural_tangents, "__version__", "unknown"), "flax": flax.__version__,
         "backend": jax.default_backend(), "devices": str(jax.device_count()),
         "local_devices": str(jax.local_device_count())}
  return out


def jsonable(value: Any) -> Any:
  if dataclasses.is_dataclass(value):
    return jsonable(dataclasses.asdict(value))
  if isinstance(value, dict):
    return {str(k): jsonable(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [jsonable(v) for v in value]
  if isinstance(value, np.ndarray):
    return jsonable(value.tolist())
  if isinstance(value, np.generic):
    value = value.item()
  if isinstance(value, float) and not np.isfinite(value):
    return str(value)  # 'inf' / '-inf' / 'nan' as strings: JSON has no literal for them
  return value


_NON_FINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def decode(value: Any) -> Any:
  """Inverse of the non-finite encoding of ``jsonable``: 'nan' / 'inf' / '-inf' strings back to floats."""
  if isinstance(value, dict):
    return {k: decode(v) for k, v in value.items()}
  if isinstance(value, list):
    return [decode(v) for v in value]
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
    process_index, process_count: this process and the job's process count (default: the running JAX
      job's, ``experiments.core.distributed``). Process i > 0 does not write config.json: it waits up to
      ``config_wait_s`` seconds for process 0's to equal its own (``ValueError`` when it does not).
    bookkeeping: top-level config fields that change how results are computed, not which (e.g. how many
      seeds train as one program): a workdir whose config differs only in them, or lacks them, resumes.

  One job at a time may use a workdir: a second job on it gets a ``ValueError`` (an advisory ``flock``
  on ``.lock``, POSIX only; Workdir objects of one process share it). Each process of a job appends to its
  own results file (``results_name``).
  """

  def __init__(self, path, key_fields: Sequence[str], config=None, *, overwrite_config: bool = False,
               process_index: int | None = None, process_count: int | None = None,
               config_wait_s: float = CONFIG_WAIT_S, bookkeeping: frozenset = frozenset()):
    from experiments.core import distributed
    self.path = Path(path)
    if self.path.exists() and not self.path.is_dir():
      raise ValueError(f"workdir {self.path} exists and is not a directory")
    self.process_index = distributed.process_index() if process_index is None else process_index
    self.process_count = distributed.process_count() if process_count is None else process_count
    self.path.mkdir(parents=True, exist_ok=True)
    # released when the last Workdir of it goes
    weakref.finalize(self, _release, _acquire(self.path, self.process_index, self.process_count))
    self.key_fields = tuple(key_fields)
    self.results_path = self.path / results_name(self.process_index, self.process_count)
    repair_torn_tail(self.results_path)
    quarantine_unreadable(self.results_path)
    existing = self.records()
    if existing and not any(all(f in r for f in self.key_fields) for r in existing):  # none is one of our points
      missing = [f for f in self.key_fields if f not in existing[0]]
      raise ValueError(f"the records in {self.path} lack the field(s) {missing} of this experiment's points: it "
                       "holds another experiment's results; use a new workdir (nothing was run or written)")
    self.config_digest = None if config is None else config_digest(_without(jsonable(config), bookkeeping))
    if config is not None and self.process_index > 0:
      self._wait_for_config(jsonable(config), config_wait_s)
    elif config is not None:
      cfg = jsonable(config)
      cfg_path = self.path / "config.json"
      if not cfg_path.exists() and existing and {r.get("config_digest") for r in existing} != {self.config_digest}:
        # Records without their config.json (deleted, or never written) are adopted only when every one of
        # them was written under this config; otherwise they are moved aside, never mixed into new results.
        backup = self._move_aside()
        warnings.warn(f"{self.path} held {len(existing)} records but no config.json, and they were not written "
                      f"under this config (or by a version that did not stamp its config): moved them to {backup}",
                      RuntimeWarning, stacklevel=2)
      old = read_config(cfg_path) if cfg_path.exists() else cfg
      if _without(old, bookkeeping) != _without(cfg, bookkeeping) and self._results():
        if not overwrite_config:
          old_leaves, new_leaves = leaves(_without(old, bookkeeping)), leaves(_without(cfg, bookkeeping))
          if set(old_leaves) != set(new_leaves):  # another layout, e.g. flat fields before data.*/train.*
            only_old = sorted(set(old_leaves) - set(new_leaves))
            raise ValueError(
                f"{cfg_path} holds another experiment's config or another layout of this config (fields {only_old[:4]}{' ...' if len(only_old) > 4 else ''} are not "
                "fields of this one) and is not reinterpreted; use a new workdir, or --overwrite_config to move "
                "the old results aside and start afresh")
          changed = sorted(k for k in new_leaves if old_leaves[k] != new_leaves[k])
          raise ValueError(
              f"{cfg_path} belongs to results of a different config (fields {changed} differ); use a new "
              "workdir, or --overwrite_config to move the old results aside and start afresh")
        self._move_aside()
      tmp = cfg_path.with_name(f".config.json.{os.getpid()}")
      tmp.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
      tmp.replace(cfg_path)  # atomic: the other processes never read half a config

  def _wait_for_config(self, cfg: dict, timeout_s: float) -> None:
    """Waits for process 0 to write a config.json equal to ``cfg`` (polling every 0.2 s).

    Raises:
      ValueError: after ``timeout_s`` seconds it is still absent or different (names the differing fields).
    """
    cfg_path, deadline, old = self.path / "config.json", time.monotonic() + timeout_s, None
    while True:
      if cfg_path.exists():
        try:
          old = json.loads(cfg_path.read_text())
        except json.JSONDecodeError:
          old = None
        if old == cfg:
          return
      if time.monotonic() > deadline:
        break
      time.sleep(0.2)
    what = "is absent" if old is None else (
        f"differs in fields {sorted(k for k, v in leaves(cfg).items() if leaves(old).get(k) != v)}")
    raise ValueError(f"process {self.process_index} of {self.process_count}: {cfg_path} {what} after "
                     f"{timeout_s:.0f} s; process 0 writes it: were all processes started with the same "
                     "config (and --overwrite_config)? See process 0's error")

  def _results(self) -> list[Path]:
    """What a run has written besides its config (and the results of earlier configs)."""
    return [p for p in self.path.iterdir()
            if p.name != "config.json" and not p.name.startswith((LOCK_NAME, "previous-", ".config.json."))]

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
    """Adds versions, process_index and process_count, writes one JSON line and flushes it to disk.
    Returns the stored record. Under ``--global_mesh`` only process 0 writes (the others return it)."""
    from experiments.core import distributed
    missing = [f for f in self.key_fields if f not in record]
    if missing:
      raise ValueError(f"record lacks key fields {missing}")
    stored = jsonable({**record, "versions": versions(), "process_index": self.process_index,
                        "process_count": self.process_count}
                      | ({} if self.config_digest is None else {"config_digest": self.config_digest}))
    if not distributed.writes_records():
      return stored
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
    """Saves a dict of arrays with orbax under ``arrays/<key>``; returns that path.

    In a multi-process run (where orbax saves are collective over all processes) each process saves its
    own points' arrays with numpy instead, as ``arrays/<key>.npz``; ``load_arrays`` reads either.
    """
    import orbax.checkpoint as ocp
    from experiments.core import distributed
    name = "_".join(str(k) for k in record_key).replace("/", "-")
    if self.process_count > 1:
      if not distributed.writes_records():
        return self.path / "arrays" / f"{name}.npz"
      (self.path / "arrays").mkdir(exist_ok=True)
      tmp = self.path / "arrays" / f".{name}.{os.getpid()}.npz"
      np.savez(tmp, **{k: np.asarray(v) for k, v in arrays.items()})
      return tmp.replace(self.path / "arrays" / f"{name}.npz")
    path = (self.path / "arrays" / name).resolve()
    if path.exists():
      shutil.rmtree(path)
    ocp.PyTreeCheckpointer().save(path, {k: np.asarray(v) for k, v in arrays.items()})
    return path

  def load_arrays(self, record_key: Iterable) -> dict[str, np.ndarray]:
    import orbax.checkpoint as ocp
    name = "_".join(str(k) for k in record_key).replace("/", "-")
    npz = self.path / "arrays" / f"{name}.npz"
    if npz.exists():
      with np.load(npz) as data:
        return {k: data[k] for k in data.files}
    return ocp.PyTreeCheckpointer().restore((self.path / "arrays" / name).resolve())


def repair_torn_tail(path) -> Path | None:
  """Moves aside a last line cut off by a killed run, so that every line of ``path`` is a whole record.

  A run killed while appending leaves half a line at the end of its results file. Called when a Workdir is
  opened (resume), under the workdir's lock: the torn bytes go to ``<name>.torn-<time>`` next to the file
  (kept, not deleted; no reader reads it), the file is truncated to its last complete line, and a
  ``RuntimeWarning`` names the moved file. A last line that is a whole JSON object lacking only its
  newline gets the newline instead. A missing or empty file, or one ending in a newline, is left alone.

  Returns:
    The path of the moved-aside tail, or None when nothing was moved.
  """
  path = Path(path)
  if not path.is_file():
    return None
  data = path.read_bytes()
  if not data or data.endswith(b"\n"):
    return None
  cut = data.rfind(b"\n") + 1
  tail = data[cut:]
  try:
    whole = isinstance(json.loads(tail), dict)
  except (json.JSONDecodeError, UnicodeDecodeError):
    whole = False
  if whole:
    with open(path, "ab") as f:
      f.write(b"\n")
    return None
  stamp = time.strftime("%Y%m%d-%H%M%S")
  torn, i = path.with_name(f"{path.name}.torn-{stamp}"), 1
  while torn.exists():
    torn, i = path.with_name(f"{path.name}.torn-{stamp}-{i}"), i + 1
  torn.write_bytes(tail)
  os.truncate(path, cut)
  kept = len(parse_lines(data[:cut])[0])
  warnings.warn(f"{path} ended in an incomplete line ({len(tail)} bytes, as a run killed while writing leaves); "
                f"moved it to {torn}; {kept} records kept", RuntimeWarning, stacklevel=2)
  return torn


def config_digest(config: dict) -> str:
  """The first 16 hex digits of the SHA-256 of a config's canonical JSON: stamped on every record, so that
  records found without their config.json can be matched to the config that wrote them."""
  import hashlib
  return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


def _without(config: dict, fields: frozenset) -> dict:
  """``config`` less its top-level ``fields`` (bookkeeping fields that change no result)."""
  return {k: v for k, v in config.items() if k not in fields}


def leaves(config: dict, prefix: str = "") -> dict[str, Any]:
  """A config.json's leaf values by dotted name ({'data': {'n_train': 8}} -> {'data.n_train': 8})."""
  out = {}
  for key, value in config.items():
    if isinstance(value, dict):
      out.update(leaves(value, f"{prefix}{key}."))
    else:
      out[prefix + key] = value
  return out


def read_config(path) -> dict:
  """The config.json at ``path`` as a dict.

  Raises:
    ValueError: it is not valid UTF-8 JSON, or holds no JSON object (the message names the file).
  """
  path = Path(path)
  try:
    config = json.loads(path.read_text())
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise ValueError(f"{path} is not valid JSON ({e}); delete it or use a new workdir") from None
  if not isinstance(config, dict):
    raise ValueError(f"{path} holds a JSON {type(config).__name__}, not a config object; delete it or use a "
                     "new workdir")
  return config


def read_records(workdir) -> list[dict]:
  """Records of a finished or partial run, for plotting without recomputing.

  Reads every process's results file (``results.jsonl``, then ``results-<i>-of-<P>.jsonl`` in name order).
  A line that is not a JSON record object (a line torn by a kill, garbage, or JSON that is no object) is
  skipped with a ``RuntimeWarning`` that says how many records were kept; the next run on the workdir moves
  such lines aside (``quarantine_unreadable``). Non-finite numbers (stored as the strings 'nan', 'inf',
  '-inf') come back as floats; so would a string field whose value is literally one of those.

  Raises:
    ValueError: a results file that is a directory.
  """
  out = []
  for path in results_files(workdir):
    if not path.is_file():
      raise ValueError(f"{path} is not a file (a results file of one JSON record per line)")
    data = path.read_bytes()
    records, bad = parse_lines(data)
    if bad:
      warnings.warn(f"{path}: {len(bad)} unreadable line(s) skipped, {len(records)} records kept; the next run "
                    "of the experiment on this workdir moves them aside", RuntimeWarning, stacklevel=2)
    decoded = [decode(r) for r in records]
    check_field_types(path, data, decoded)
    out += decoded
  return out


def _is_number(v) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_field_types(path, data: bytes, records: list[dict]) -> None:
  """Raises ValueError naming the file, the line and the field when a top-level field holds a string in one
  record and a number in the file's other records (a hand edit or a foreign writer: readers would fail later
  with a message that names neither)."""
  numeric = {k for r in records for k, v in r.items() if _is_number(v)}
  suspects = {k for r in records for k, v in r.items() if isinstance(v, str) and k in numeric}
  if not suspects:
    return
  for number, line in enumerate(data.split(b"\n"), start=1):
    try:
      record = decode(json.loads(line.decode("utf-8")))
    except (json.JSONDecodeError, UnicodeDecodeError):
      continue
    if not isinstance(record, dict):
      continue
    for field in sorted(suspects):
      if isinstance(record.get(field), str):
        raise ValueError(f"{path}, line {number}: field {field!r} is {record[field]!r} where the file's other "
                         "records hold numbers; correct or delete that line")


def parse_lines(data: bytes) -> tuple[list, list[bytes]]:
  """(JSON objects, unreadable lines) of the lines of a JSON-lines file's bytes: a line that is not UTF-8 JSON,
  or JSON that is not an object, is unreadable; empty lines are ignored."""
  values, bad = [], []
  for line in data.split(b"\n"):
    if not line.strip():
      continue
    try:
      value = json.loads(line.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
      bad.append(line)
      continue
    (values if isinstance(value, dict) else bad).append(value if isinstance(value, dict) else line)
  return values, bad


def quarantine_unreadable(path) -> Path | None:
  """Moves every line of the results file ``path`` that is not a JSON record (garbage, binary bytes, a
  line cut off in the middle of the file) to ``<name>.corrupt-<time>`` beside it, keeping the readable
  records in their order, and says so in a ``RuntimeWarning``: how many records were kept, how many lines
  moved, and where. Called when a Workdir is opened (under its lock), after ``repair_torn_tail``.

  Returns:
    The path of the moved-aside lines, or None when every line was readable.
  """
  path = Path(path)
  if not path.is_file():
    return None
  data = path.read_bytes()
  values, bad = parse_lines(data)
  if not bad:
    return None
  stamp = time.strftime("%Y%m%d-%H%M%S")
  aside, i = path.with_name(f"{path.name}.corrupt-{stamp}"), 1
  while aside.exists():
    aside, i = path.with_name(f"{path.name}.corrupt-{stamp}-{i}"), i + 1
  aside.write_bytes(b"\n".join(bad) + b"\n")
  kept = [line for line in data.split(b"\n") if line.strip() and line not in set(bad)]
  tmp = path.with_name(f".{path.name}.{os.getpid()}")
  tmp.write_bytes(b"".join(line + b"\n" for line in kept))
  tmp.replace(path)
  warnings.warn(f"{path}: {len(bad)} unreadable line(s) ({sum(map(len, bad))} bytes) moved to {aside}; "
                f"{len(values)} records kept", RuntimeWarning, stacklevel=2)
  return aside


def _new_dirs(root: Path) -> set:
  """``root`` and its directories up to two levels down (the main and claims jobs' sub-workdirs)."""
  if not root.is_dir():
    return set()
  out = {root}
  for child in root.iterdir():
    if child.is_dir():
      out.add(child)
      out.update(g for g in child.iterdir() if g.is_dir())
  return out


_BOOKKEEPING = ("config.json", LOCK_NAME, ".config.json.")


@contextlib.contextmanager
def removed_if_unused(root):
  """On an exception (a user error, Ctrl-C), removes the directories under ``root`` (``root`` included, two
  levels down) that this block created and that hold nothing but bookkeeping (config.json, the lock):
  a run that fails before its first record leaves no workdir behind. Records, plots and anything else
  are never removed."""
  root = Path(root)
  before = _new_dirs(root)
  try:
    yield
  except BaseException:
    for d in sorted(_new_dirs(root) - before, key=lambda p: -len(p.parts)):
      entries = list(d.iterdir())
      if all(e.is_file() and e.name.startswith(_BOOKKEEPING) for e in entries):
        for e in entries:
          e.unlink()
        d.rmdir()
    raise


def results_files(workdir) -> list[Path]:
  """The results files of ``workdir``: results.jsonl and every process's results-<i>-of-<P>.jsonl."""
  path = Path(workdir)
  single = [path / RESULTS_NAME] if (path / RESULTS_NAME).exists() else []
  return single + sorted(path.glob("results-*-of-*.jsonl"))


DERIVED_NAME = "derived.json"


def write_derived(workdir, derived: dict) -> Path:
  """Writes the numbers a report derives from the records (fits, intervals, crossovers) to
  ``<workdir>/derived.json``, replacing the previous file: it is rebuilt from results.jsonl on every
  report, so it never goes stale on resume. Non-finite numbers are stored as the strings 'nan' / 'inf'."""
  path = Path(workdir) / DERIVED_NAME
  path.write_text(json.dumps(jsonable(derived), indent=1, sort_keys=True) + "\n")
  return path


def read_derived(workdir) -> dict:
  """The contents of ``<workdir>/derived.json`` (non-finite strings back to floats); {} when absent."""
  path = Path(workdir) / DERIVED_NAME
  return decode(json.loads(path.read_text())) if path.exists() else {}
