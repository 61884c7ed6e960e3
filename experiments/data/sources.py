"""The three places a split can come from, each read into verified uint8 arrays.

  * ``read_dir``: the standard files in a local data directory (``docs/data.md#directory-layouts``):
    ``DIR/mnist/`` and ``DIR/fashion_mnist/`` with the four IDX ``.gz`` files, ``DIR/cifar10/`` with
    either the official python batches (``cifar-10-batches-py/``) or the npz layout of docs/data.md#cifar-10.
  * ``read_embedded``: the small class-balanced subsets shipped in ``experiments/data/embedded/``,
    verified against ``MANIFEST.json``.
  * ``read_tfds``: TensorFlow Datasets (imported lazily): ArrayRecord data through ``tfds.data_source``
    without TensorFlow; TFRecord data needs the ``tfrecord`` extra.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import NamedTuple

import numpy as np

from experiments.data import catalog
from experiments.data.formats import (
    DatasetFileError,
    DatasetFileNotFoundError,
    read_cifar_batch,
    read_idx,
    read_npz,
    require_file,
)

EMBEDDED_DIR = Path(__file__).resolve().parent / "embedded"
MANIFEST_NAME = "MANIFEST.json"


class PartialTestSetWarning(UserWarning):
  """The test split read is a documented partial copy (CIFAR-10 npz layout: first 1,000 images)."""


class RawSplit(NamedTuple):
  """One split as stored.

  Attributes:
    x: read-only uint8 images with shape [n, height, width, channels] (HWC).
    y: read-only uint8 labels with shape [n], in 0..num_classes-1.
    origin: where the arrays came from (paths, or the TFDS name and data dir).
    partial: True if this is a partial copy of the official split (CIFAR-10 npz test: the first
      ``catalog.CIFAR_NPZ_TEST_SIZE`` = 1,000 of 10,000 images).
  """
  x: np.ndarray
  y: np.ndarray
  origin: str
  partial: bool = False


def _dataset_dir(root: Path, spec: catalog.DatasetSpec) -> Path:
  directory = root / spec.name
  if not directory.is_dir():
    raise DatasetFileNotFoundError(
        f"{directory}: directory not found (expected the {spec.name} files inside the data dir "
        f"{root}). To get it: {spec.hint}")
  return directory


def _read_idx_split(root: Path, spec: catalog.DatasetSpec, split: str) -> RawSplit:
  directory = _dataset_dir(root, spec)
  n = spec.num_examples[split]
  arrays = []
  for fname, shape in zip(catalog.IDX_FILES[split], ((n,) + spec.image_shape[:2], (n,))):
    path = directory / fname
    if not path.exists() and (directory / fname[:-3]).exists():
      path = directory / fname[:-3]  # Already decompressed; the payload hash still applies.
    arrays.append(read_idx(path, expected_shape=shape, hint=spec.hint,
                           payload_sha256=catalog.IDX_PAYLOAD_SHA256[(spec.name, fname)]))
  images, labels = arrays
  return RawSplit(images[..., None], labels, origin=str(directory))


def _find_cifar_batches(root: Path) -> Path | None:
  for candidate in (root / "cifar10" / catalog.CIFAR_BATCH_DIR, root / catalog.CIFAR_BATCH_DIR):
    if candidate.is_dir():
      return candidate
  return None


def read_cifar_batches(directory: Path | str, split: str, *, expected_rows: int | None = 10000,
                       hint: str = catalog.DATASETS["cifar10"].hint) -> RawSplit:
  """Reads a CIFAR-10 split from a ``cifar-10-batches-py`` directory of official python batches.

  Verified by structure only (see ``formats.read_cifar_batch``): no reference hashes exist for them.

  Args:
    directory: the folder holding ``data_batch_1`` … ``data_batch_5`` and ``test_batch``.
    split: "train" (the five data batches, concatenated in order) or "test".
    expected_rows: images per batch; 10000 for the official files, None for any.
    hint: how to get the files, for error messages.

  Returns:
    RawSplit with x uint8 [n, 32, 32, 3] and y uint8 [n].

  Raises:
    DatasetFileNotFoundError, DatasetFileError: naming the batch file that is missing or malformed.
  """
  directory = Path(directory)
  parts = [read_cifar_batch(directory / f, expected_rows=expected_rows, hint=hint)
           for f in catalog.CIFAR_BATCHES[split]]
  x = np.concatenate([p[0] for p in parts]) if len(parts) > 1 else parts[0][0]
  y = np.concatenate([p[1] for p in parts]) if len(parts) > 1 else parts[0][1]
  return RawSplit(x, y, origin=str(directory))


def _read_cifar_npz(root: Path, spec: catalog.DatasetSpec, split: str) -> RawSplit:
  directory = root / spec.name
  xs, ys = [], []
  for fname, sha, rows in catalog.CIFAR_NPZ[split]:
    arrays = read_npz(directory / fname, {f"x_{split}": ((rows,) + spec.image_shape, "uint8"),
                                          f"y_{split}": ((rows,), "uint8")},
                      sha256=sha, hint=spec.hint)
    xs.append(arrays[f"x_{split}"])
    ys.append(arrays[f"y_{split}"])
  x = np.concatenate(xs) if len(xs) > 1 else xs[0]
  y = np.concatenate(ys) if len(ys) > 1 else ys[0]
  return RawSplit(x, y, origin=str(directory), partial=(split == "test"))


def read_dir(spec: catalog.DatasetSpec, split: str, data_dir: Path | str) -> RawSplit:
  """Reads one split of a data set from the standard files in a local data directory.

  MNIST / Fashion-MNIST: ``DIR/<name>/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz`` (or the same
  files decompressed), checked against the SHA-256 of the decompressed payload.
  CIFAR-10: the official python batches in ``DIR/cifar10/cifar-10-batches-py/`` (or
  ``DIR/cifar-10-batches-py/``) if present, checked by structure; otherwise the npz layout of
  docs/data.md#cifar-10 in ``DIR/cifar10/`` (``cifar10_train_part{0,1}.npz``, ``cifar10_test.npz``), checked by file
  SHA-256. In the npz layout the test split holds only the first 1,000 official test images and the
  result has ``partial=True``.

  Args:
    spec: the data set (``catalog.get_spec``).
    split: "train" or "test".
    data_dir: the root directory holding ``mnist/``, ``fashion_mnist/``, ``cifar10/``.

  Returns:
    RawSplit with read-only uint8 arrays x [n, h, w, c] and y [n].

  Raises:
    DatasetFileNotFoundError: naming the missing file or directory and how to get it.
    DatasetFileError: naming the file whose hash, size or structure is wrong.
  """
  root = Path(data_dir)
  if not root.is_dir():
    raise DatasetFileNotFoundError(f"{root}: data directory not found (expected a folder holding "
                                   f"{spec.name}/). To get it: {spec.hint}")
  if spec.name != "cifar10":
    return _read_idx_split(root, spec, split)
  batches = _find_cifar_batches(root)
  if batches is not None:
    return read_cifar_batches(batches, split, hint=spec.hint)
  npz_first = root / spec.name / catalog.CIFAR_NPZ[split][0][0]
  if not npz_first.exists():
    raise DatasetFileNotFoundError(
        f"{root / spec.name / catalog.CIFAR_BATCH_DIR}: CIFAR-10 not found (expected the official "
        f"python batches there, or the npz layout of docs/data.md#cifar-10 such as {npz_first}). "
        f"To get it: {spec.hint}")
  return _read_cifar_npz(root, spec, split)


def read_manifest(embedded_dir: Path | str = EMBEDDED_DIR) -> dict:
  """Returns the parsed ``MANIFEST.json`` of an embedded-subset directory.

  Raises:
    DatasetFileNotFoundError: if the manifest is missing.
    DatasetFileError: if it is not valid JSON with a "files" table.
  """
  path = require_file(Path(embedded_dir) / MANIFEST_NAME, expected="the embedded-subset manifest",
                      hint=catalog.EMBEDDED_HINT)
  try:
    manifest = json.loads(path.read_text())
    manifest["files"].items()
  except (ValueError, KeyError, AttributeError, TypeError) as e:
    raise DatasetFileError(f"{path}: not a valid manifest ({e}); expected JSON with a 'files' table. "
                           f"To get it: {catalog.EMBEDDED_HINT}") from e
  return manifest


def embedded_file_name(name: str, split: str) -> str:
  """Returns the file name of an embedded subset, e.g. ``mnist_train.npz``."""
  return f"{name}_{split}.npz"


def read_embedded(spec: catalog.DatasetSpec, split: str,
                  embedded_dir: Path | str = EMBEDDED_DIR) -> RawSplit:
  """Reads an embedded subset, verifying file SHA-256, array shapes and class counts against the manifest.

  Args:
    spec: the data set.
    split: "train" or "test".
    embedded_dir: directory with the npz files and ``MANIFEST.json`` (default: the package's own).

  Returns:
    RawSplit with read-only uint8 arrays x [n, h, w, c] and y [n] (n as in ``catalog.EMBEDDED_SIZES``).

  Raises:
    DatasetFileNotFoundError: if the npz or the manifest is missing.
    DatasetFileError: if the file hash, an array shape/dtype or the class counts differ from the
      manifest.
  """
  embedded_dir = Path(embedded_dir)
  fname = embedded_file_name(spec.name, split)
  path = embedded_dir / fname
  entry = read_manifest(embedded_dir)["files"].get(fname)
  if entry is None:
    raise DatasetFileError(f"{embedded_dir / MANIFEST_NAME}: no entry for {fname}. "
                           f"To get it: {catalog.EMBEDDED_HINT}")
  arrays = read_npz(path, {k: (tuple(v["shape"]), v["dtype"]) for k, v in entry["arrays"].items()},
                    sha256=entry["sha256"], hint=catalog.EMBEDDED_HINT)
  x, y = arrays["x"], arrays["y"]
  counts = np.bincount(y, minlength=spec.num_classes).tolist()
  if x.shape[1:] != spec.image_shape or counts != entry["class_counts"]:
    raise DatasetFileError(f"{path}: images {x.shape} with class counts {counts}, expected "
                           f"[n, {', '.join(map(str, spec.image_shape))}] and {entry['class_counts']} "
                           f"(manifest). To get it: {catalog.EMBEDDED_HINT}")
  return RawSplit(x, y, origin=str(path))


def read_tfds(spec: catalog.DatasetSpec, split: str, *, data_dir: Path | str | None = None,
              download: bool = False) -> RawSplit:
  """Reads a split through TensorFlow Datasets, preferring ``tfds.data_source`` (no TensorFlow needed).

  Data prepared in TFDS's ArrayRecord format is read through the builder's random-access data source,
  which needs no TensorFlow. Data prepared as TFRecord (TFDS's default file format) can only be read
  through ``tf.data``, so that path needs the ``tfrecord`` extra (``pip install -e ".[tfrecord]"``).
  ``download=True`` prepares missing data as ArrayRecord. ``tensorflow_datasets`` is imported here only.
  Results are cached per process.

  Args:
    spec: the data set (its canonical name is the TFDS name).
    split: "train" or "test".
    data_dir: the TFDS data directory; None uses TFDS's default (``~/tensorflow_datasets`` or
      ``$TFDS_DATA_DIR``).
    download: let TFDS download and prepare the data set if it is not in ``data_dir`` (needs internet).

  Returns:
    RawSplit with read-only uint8 arrays x [n, h, w, c] and y [n].

  Raises:
    DatasetFileNotFoundError: if the prepared data set is not in ``data_dir`` and download is False.
    DatasetFileError: TFRecord data without TensorFlow installed (the message names the extra), or images
      of the wrong shape.
  """
  return _read_tfds_cached(spec.name, split, None if data_dir is None else str(data_dir),
                           bool(download))


TFRECORD_EXTRA = 'pip install -c constraints.txt -e ".[tfrecord]"'


@functools.lru_cache(maxsize=8)
def _read_tfds_cached(name: str, split: str, data_dir: str | None, download: bool) -> RawSplit:
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

  spec = catalog.DATASETS[name]
  where = data_dir or "~/tensorflow_datasets"
  builder = tfds.builder(name, data_dir=data_dir)
  if not builder.is_prepared():
    if not download:
      raise DatasetFileNotFoundError(
          f"{where}: TFDS data set {name!r} split {split!r} is not prepared there. To get it: call with "
          f"download=True (needs internet), or {spec.hint}")
    builder.download_and_prepare(file_format="array_record")
  file_format = str(getattr(builder.info.file_format, "value", builder.info.file_format))
  if file_format == "array_record":
    source = builder.as_data_source(split=split)
    examples = [source[i] for i in range(len(source))]
    x = np.stack([np.asarray(e["image"]) for e in examples]) if examples else np.zeros((0,) + spec.image_shape)
    y = np.asarray([int(e["label"]) for e in examples])
  else:
    try:
      import tensorflow  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
    except ImportError:
      raise DatasetFileError(
          f"{where}: TFDS data set {name!r} is prepared as {file_format}, which only TensorFlow reads. "
          f"Install the extra ({TFRECORD_EXTRA}), or prepare it as ArrayRecord "
          f"(tfds.builder({name!r}).download_and_prepare(file_format='array_record')), or use "
          f"source='dir'") from None
    ds = builder.as_dataset(split=split, batch_size=-1, as_supervised=True)
    x, y = tfds.as_numpy(ds)
  x, y = np.asarray(x, np.uint8), np.asarray(y).astype(np.uint8)
  if x.shape[1:] != spec.image_shape or y.shape != x.shape[:1]:
    raise DatasetFileError(f"{data_dir}: TFDS {name!r} gave images {x.shape} and labels {y.shape}, "
                           f"expected [n, {spec.image_shape}] and [n]")
  x.flags.writeable = False
  y.flags.writeable = False
  return RawSplit(x, y, origin=f"tfds:{name}/{split} in {data_dir or 'default data dir'}")
