"""Readers for the on-disk formats of the image data sets, with verification.

Three formats, each read into uint8 arrays:
  * IDX (MNIST, Fashion-MNIST): ``read_idx`` parses one ``*-ubyte[.gz]`` file and checks the SHA-256 of
    the decompressed payload, so an official gzip and a re-gzipped copy of the same bytes both pass.
  * CIFAR-10 python batches (``cifar-10-batches-py/``): ``read_cifar_batch`` unpickles one with an
    allow-list unpickler and checks its structure (there are no reference hashes for them).
  * npz archives: ``read_npz`` checks the file SHA-256 and the array shapes and dtypes.

Every reader raises ``DatasetFileError`` (a ``ValueError``) for a truncated or corrupt file and
``DatasetFileNotFoundError`` (also a ``FileNotFoundError``) for a missing one; the message names the path,
what was expected and how to get the file (the ``hint`` argument). Parsed arrays are cached per process
on (path, size, mtime), and returned read-only so the cache cannot be modified by a caller.
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import io
import pickle
import zipfile
import zlib
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

_IDX_UBYTE = 0x08  # IDX type code of unsigned bytes, the only one these data sets use.
_CIFAR_ROW = 3 * 32 * 32


class DatasetFileError(ValueError):
  """A data set file is truncated, corrupt or has an unexpected hash, shape or dtype."""


class DatasetFileNotFoundError(DatasetFileError, FileNotFoundError):
  """A data set file (or directory) is missing."""


def _problem(path: Path | str, what: str, hint: str) -> str:
  msg = f"{path}: {what}"
  return f"{msg}. To get it: {hint}" if hint else msg


def require_file(path: Path | str, *, expected: str, hint: str = "") -> Path:
  """Returns ``path`` as a Path after checking that it is an existing file.

  Raises:
    DatasetFileNotFoundError: naming the path, ``expected`` (what the file should hold) and ``hint``.
  """
  path = Path(path)
  if not path.is_file():
    raise DatasetFileNotFoundError(_problem(path, f"file not found (expected {expected})", hint))
  return path


def sha256_file(path: Path | str, chunk_bytes: int = 1 << 20) -> str:
  """Returns the hex SHA-256 of a file's bytes (streamed, constant memory)."""
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(chunk_bytes), b""):
      digest.update(chunk)
  return digest.hexdigest()


def _stat_key(path: Path) -> tuple[str, int, int]:
  st = path.stat()
  return str(path.resolve()), st.st_size, st.st_mtime_ns


def _read_only(*arrays: np.ndarray) -> None:
  for a in arrays:
    a.flags.writeable = False


def read_idx(
    path: Path | str,
    *,
    expected_shape: Sequence[int] | None = None,
    payload_sha256: str | None = None,
    hint: str = "",
) -> np.ndarray:
  """Reads an IDX file of unsigned bytes (gzip-compressed if the name ends in ``.gz``).

  Args:
    path: an IDX file such as ``train-images-idx3-ubyte.gz``.
    expected_shape: the shape the header must declare, e.g. (60000, 28, 28); None skips the check.
    payload_sha256: hex SHA-256 of the whole decompressed file (header included); None skips it
      (for synthetic files).
    hint: how to get the file, appended to error messages.

  Returns:
    Read-only uint8 array with the shape in the header: [n] for labels, [n, rows, cols] for images.

  Raises:
    DatasetFileNotFoundError: if the file is missing.
    DatasetFileError: if the gzip stream is truncated or corrupt, the header is not an unsigned-byte
      IDX header, the payload length disagrees with the header, or the shape or hash differs from the
      expected one. The message names the path and the expected value.
  """
  path = require_file(path, expected=f"an IDX file of shape {expected_shape}", hint=hint)
  shape = None if expected_shape is None else tuple(int(s) for s in expected_shape)
  return _read_idx_cached(_stat_key(path), shape, payload_sha256, hint)


@functools.lru_cache(maxsize=16)
def _read_idx_cached(key, expected_shape, payload_sha256, hint) -> np.ndarray:
  path = Path(key[0])
  try:
    if path.suffix == ".gz":
      with gzip.open(path, "rb") as f:
        payload = f.read()
    else:
      payload = path.read_bytes()
  except (EOFError, OSError, zlib.error) as e:  # gzip.BadGzipFile is an OSError.
    raise DatasetFileError(_problem(path, f"truncated or corrupt gzip stream ({e})", hint)) from e
  if payload_sha256 is not None:
    got = hashlib.sha256(payload).hexdigest()
    if got != payload_sha256:
      raise DatasetFileError(_problem(
          path, f"SHA-256 of the decompressed payload is {got}, expected {payload_sha256}", hint))
  if len(payload) < 4 or payload[:2] != b"\0\0" or payload[2] != _IDX_UBYTE:
    raise DatasetFileError(_problem(
        path, f"not an unsigned-byte IDX file (magic {payload[:4].hex()}, expected 000008XX)", hint))
  ndim = payload[3]
  header_bytes = 4 + 4 * ndim
  if ndim == 0 or len(payload) < header_bytes:
    raise DatasetFileError(_problem(path, f"IDX header declares {ndim} dims or is cut short", hint))
  shape = tuple(int(d) for d in np.frombuffer(payload, ">u4", count=ndim, offset=4))
  if expected_shape is not None and shape != expected_shape:
    raise DatasetFileError(_problem(path, f"IDX shape {shape}, expected {expected_shape}", hint))
  want_bytes = header_bytes + int(np.prod(shape))
  if len(payload) != want_bytes:
    raise DatasetFileError(_problem(
        path, f"IDX payload is {len(payload)} bytes, expected {want_bytes} for shape {shape}", hint))
  out = np.frombuffer(payload, np.uint8, offset=header_bytes).reshape(shape).copy()
  _read_only(out)
  return out


class _NumpyOnlyUnpickler(pickle.Unpickler):
  """Unpickler that resolves only the globals a pickled numpy array needs (no arbitrary code)."""

  _ALLOWED = frozenset({
      ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
      ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
      ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
      ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),
  })

  def find_class(self, module, name):
    if (module, name) not in self._ALLOWED:
      raise pickle.UnpicklingError(f"global {module}.{name} is not allowed in a CIFAR batch")
    return super().find_class(module, name)


def read_cifar_batch(
    path: Path | str, *, expected_rows: int | None = 10000, hint: str = ""
) -> tuple[np.ndarray, np.ndarray]:
  """Reads one CIFAR-10 python batch (``data_batch_1`` … ``data_batch_5``, ``test_batch``).

  A batch is a pickled dict with ``b'data'``, a uint8 array with shape [rows, 3072] whose rows hold one
  image in channel-major (C, H, W) order, and ``b'labels'``, a list of ints in 0..9. The official batches
  have no published per-file hashes, so the file is verified by structure only: the keys, the data
  shape and dtype, the label count and the label range. It is unpickled with an allow-list unpickler
  that resolves only numpy's array-reconstruction globals, so a tampered file cannot run code.

  Args:
    path: the batch file.
    expected_rows: images per batch (10000 for the official files); None accepts any count.
    hint: how to get the file, appended to error messages.

  Returns:
    (images, labels): read-only uint8 arrays with shapes [rows, 32, 32, 3] (HWC) and [rows].

  Raises:
    DatasetFileNotFoundError: if the file is missing.
    DatasetFileError: if it cannot be unpickled or its structure differs from the above.
  """
  path = require_file(path, expected=f"a CIFAR-10 python batch of {expected_rows} images", hint=hint)
  return _read_cifar_batch_cached(_stat_key(path), expected_rows, hint)


@functools.lru_cache(maxsize=16)
def _read_cifar_batch_cached(key, expected_rows, hint) -> tuple[np.ndarray, np.ndarray]:
  path = Path(key[0])
  try:
    with open(path, "rb") as f:
      batch = _NumpyOnlyUnpickler(f, encoding="bytes").load()
  except Exception as e:  # Truncated or corrupt pickles raise many different types.
    raise DatasetFileError(_problem(path, f"cannot unpickle CIFAR batch ({type(e).__name__}: {e})",
                                    hint)) from e
  rows = "rows" if expected_rows is None else expected_rows
  expected = f"dict with b'data' uint8 [{rows}, {_CIFAR_ROW}] and b'labels' [{rows}] in 0..9"
  if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
    raise DatasetFileError(_problem(path, f"not a CIFAR batch; expected a {expected}", hint))
  data, labels = batch[b"data"], np.asarray(batch[b"labels"])
  ok = (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 2
        and data.shape[1] == _CIFAR_ROW and labels.shape == (data.shape[0],)
        and np.issubdtype(labels.dtype, np.integer)
        and (expected_rows is None or data.shape[0] == expected_rows))
  if ok and labels.size:
    ok = 0 <= labels.min() and labels.max() <= 9
  if not ok:
    got = (f"data {getattr(data, 'dtype', type(data))} {getattr(data, 'shape', '')}, "
           f"labels {labels.dtype} {labels.shape}")
    raise DatasetFileError(_problem(path, f"got {got}; expected a {expected}", hint))
  images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).copy()
  labels = labels.astype(np.uint8)
  _read_only(images, labels)
  return images, labels


def read_npz(
    path: Path | str,
    expected: Mapping[str, tuple[tuple[int, ...], str]],
    *,
    sha256: str | None = None,
    hint: str = "",
) -> dict[str, np.ndarray]:
  """Reads arrays from an ``.npz`` file after checking its SHA-256, then their shapes and dtypes.

  Args:
    path: the npz file.
    expected: array name -> (shape, dtype name); only these arrays are read.
    sha256: hex SHA-256 of the file bytes; None skips the check.
    hint: how to get the file, appended to error messages.

  Returns:
    Dict of read-only arrays, one per name in ``expected``.

  Raises:
    DatasetFileNotFoundError: if the file is missing.
    DatasetFileError: if the hash differs, the archive is unreadable, or an array is missing or has
      another shape or dtype. The message names the path and the expected value.
  """
  desc = ", ".join(f"{k} {dt} {list(s)}" for k, (s, dt) in expected.items())
  path = require_file(path, expected=f"an npz holding {desc}", hint=hint)
  frozen = tuple((k, tuple(s), str(dt)) for k, (s, dt) in expected.items())
  return dict(_read_npz_cached(_stat_key(path), frozen, sha256, hint))


@functools.lru_cache(maxsize=16)
def _read_npz_cached(key, expected, sha256, hint) -> tuple[tuple[str, np.ndarray], ...]:
  path = Path(key[0])
  if sha256 is not None:
    got = sha256_file(path)
    if got != sha256:
      raise DatasetFileError(_problem(
          path, f"SHA-256 is {got} ({key[1]} bytes), expected {sha256}", hint))
  out = []
  try:
    with np.load(path, allow_pickle=False) as z:
      for name, shape, dtype in expected:
        if name not in z.files:
          raise DatasetFileError(_problem(path, f"no array {name!r} (has {z.files})", hint))
        a = z[name]
        if a.shape != shape or a.dtype != np.dtype(dtype):
          raise DatasetFileError(_problem(
              path, f"array {name!r} is {a.dtype} {a.shape}, expected {dtype} {shape}", hint))
        _read_only(a)
        out.append((name, a))
  except DatasetFileError:
    raise
  except Exception as e:  # zipfile.BadZipFile, zlib.error, EOFError, ValueError, ...
    raise DatasetFileError(_problem(path, f"unreadable npz ({type(e).__name__}: {e})", hint)) from e
  return tuple(out)


def write_npz_deterministic(path: Path | str, arrays: Mapping[str, np.ndarray]) -> None:
  """Writes a compressed npz whose bytes depend only on the arrays (fixed zip timestamps).

  ``np.savez_compressed`` stamps each zip entry with the current time, so re-running it changes the
  file hash; this writer pins the timestamp so re-creating a file reproduces its SHA-256.
  """
  with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
    for name, a in arrays.items():
      buf = io.BytesIO()
      np.lib.format.write_array(buf, np.ascontiguousarray(a), allow_pickle=False)
      info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
      info.compress_type = zipfile.ZIP_DEFLATED
      info.external_attr = 0o644 << 16
      zf.writestr(info, buf.getvalue(), compresslevel=9)


def clear_cache() -> None:
  """Drops the per-process cache of parsed files (for tests and long-running processes)."""
  for fn in (_read_idx_cached, _read_cifar_batch_cached, _read_npz_cached):
    fn.cache_clear()


__all__ = [
    "DatasetFileError", "DatasetFileNotFoundError", "clear_cache", "read_cifar_batch", "read_idx",
    "read_npz", "require_file", "sha256_file", "write_npz_deterministic",
]
