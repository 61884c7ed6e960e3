"""Tests of experiments.data: embedded subsets, file formats, verification and error paths.

Tests marked ``full_data`` read the full files and run only when ATTN_DATA_DIR names a directory laid
out as in docs/data.md#directory-layouts (``ATTN_DATA_DIR=/path/to/data pytest tests/test_data.py``); the
expected values are the ones documented in docs/data.md#full-data-files.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest

from experiments.data import (
  BINARY_TASKS,
  DatasetFileError,
  DatasetFileNotFoundError,
  PartialTestSetWarning,
  class_balanced_indices,
  formats,
  load_binary_task,
  load_dataset,
  make_embedded,
  sources,
)

FULL_DATA_DIR = os.environ.get("ATTN_DATA_DIR")
requires_full_data = pytest.mark.skipif(
    not (FULL_DATA_DIR and os.path.isdir(FULL_DATA_DIR)),
    reason="full-data test: set ATTN_DATA_DIR to a directory with mnist/, fashion_mnist/, cifar10/ "
           "(docs/data.md#directory-layouts) to run it")

EMBEDDED_SHAPES = {
    ("mnist", "train"): (2000, 28, 28, 1), ("mnist", "test"): (500, 28, 28, 1),
    ("fashion_mnist", "train"): (2000, 28, 28, 1), ("fashion_mnist", "test"): (500, 28, 28, 1),
    ("cifar10", "train"): (1500, 32, 32, 3), ("cifar10", "test"): (500, 32, 32, 3),
}


def _manifest():
  return sources.read_manifest()


def _write_idx(path, array_u8, *, gz=True):
  header = bytes([0, 0, 0x08, array_u8.ndim]) + np.asarray(array_u8.shape, ">u4").tobytes()
  payload = header + np.ascontiguousarray(array_u8, np.uint8).tobytes()
  with (gzip.open if gz else open)(path, "wb") as f:
    f.write(payload)
  return payload


def _cifar_rows(images_NxHxWxC):
  """Official batch row layout: each row is the image in C, H, W order."""
  return np.ascontiguousarray(images_NxHxWxC.transpose(0, 3, 1, 2)).reshape(len(images_NxHxWxC), -1)


def _write_cifar_batch(path, data, labels, protocol=2):
  with open(path, "wb") as f:
    pickle.dump({b"batch_label": b"synthetic", b"data": data, b"labels": list(labels)}, f,
                protocol=protocol)


# ---------------------------------------------------------------- embedded subsets


@pytest.mark.parametrize("name,split", sorted(EMBEDDED_SHAPES))
def test_embedded_split_shapes_range_and_manifest_counts(name, split):
  s = load_dataset(name, split)
  assert s.x.shape == EMBEDDED_SHAPES[(name, split)]
  assert s.x.dtype == np.float32 and s.y.dtype == np.int32
  assert s.y.shape == s.x.shape[:1]
  assert 0.0 <= s.x.min() and s.x.max() <= 1.0 and s.x.max() > 0.9  # uint8 / 255, not all dark.
  entry = _manifest()["files"][f"{name}_{split}.npz"]
  assert np.bincount(s.y, minlength=10).tolist() == entry["class_counts"]
  assert len(set(entry["class_counts"])) == 1  # Class-balanced.
  assert entry["bytes"] < 5 * 2**20
  np.testing.assert_array_equal(s.info.indices, np.arange(s.x.shape[0]))


def test_embedded_files_under_5_mib_and_listed_in_manifest():
  files = _manifest()["files"]
  assert sorted(files) == sorted(f"{n}_{s}.npz" for n, s in EMBEDDED_SHAPES)
  for fname, entry in files.items():
    path = sources.EMBEDDED_DIR / fname
    assert path.stat().st_size == entry["bytes"] < 5 * 2**20
    assert formats.sha256_file(path) == entry["sha256"]
    assert len(entry["indices"]) == entry["arrays"]["y"]["shape"][0]
    assert entry["indices"] == sorted(set(entry["indices"]))


def test_aliases_give_the_same_data():
  a = load_dataset("fashion_mnist", "test")
  for alias in ("fmnist", "fashion-mnist", "Fashion-MNIST"):
    np.testing.assert_array_equal(load_dataset(alias, "test").x, a.x)
  assert load_dataset("cifar-10", "test").info.name == "cifar10"


def test_returned_arrays_are_fresh_copies():
  a = load_dataset("mnist", "test")
  a.x[:] = 0.0
  assert load_dataset("mnist", "test").x.max() == 1.0


# ---------------------------------------------------------------- class filter, subsets, flatten


def test_class_filter_keeps_only_those_classes_and_relabels_in_given_order():
  full = load_dataset("mnist", "train")
  s = load_dataset("mnist", "train", classes=(8, 3))
  assert s.info.class_ids == (8, 3) and s.info.class_names == ("8", "3")
  assert np.bincount(s.y).tolist() == [200, 200]
  np.testing.assert_array_equal(full.y[s.info.indices], np.where(s.y == 0, 8, 3))
  np.testing.assert_array_equal(full.x[s.info.indices], s.x)


def test_binary_tasks():
  s = load_binary_task("cifar_cars_planes", "test")
  assert s.info.class_names == ("automobile", "airplane")
  full = load_dataset("cifar10", "test")
  np.testing.assert_array_equal(full.y[s.info.indices], np.where(s.y == 0, 1, 0))
  for task, (dataset, classes) in BINARY_TASKS.items():
    assert len(classes) == 2, task
    assert load_binary_task(task, "test", n=10).y.tolist().count(0) == 5
  with pytest.raises(ValueError, match="valid tasks"):
    load_binary_task("mnist_3v9")


def test_subset_is_reproducible_balanced_and_seed_dependent():
  a = load_dataset("mnist", "train", n=100, seed=3)
  b = load_dataset("mnist", "train", n=100, seed=3)
  c = load_dataset("mnist", "train", n=100, seed=4)
  np.testing.assert_array_equal(a.x, b.x)
  np.testing.assert_array_equal(a.info.indices, b.info.indices)
  assert not np.array_equal(a.info.indices, c.info.indices)
  assert np.bincount(a.y).tolist() == [10] * 10
  assert len(np.unique(a.info.indices)) == 100
  full = load_dataset("mnist", "train")
  np.testing.assert_array_equal(full.x[a.info.indices], a.x)


def test_class_balanced_indices_shares_the_shortfall_of_small_classes():
  y = np.array([0] * 2 + [1] * 10 + [2] * 10)
  idx = class_balanced_indices(y, 12, seed=0)
  assert np.bincount(y[idx]).tolist() == [2, 5, 5]
  idx = class_balanced_indices(y, 7, seed=0)  # 2 each, one extra to a random class.
  assert sorted(np.bincount(y[idx], minlength=3).tolist()) == [2, 2, 3]
  assert len(np.unique(idx)) == 7 and np.all(np.diff(idx) > 0)
  assert class_balanced_indices(y, 22, seed=1).tolist() == list(range(22))


def test_flatten_is_hwc_reshape():
  img = load_dataset("cifar10", "test", n=20, seed=1)
  flat = load_dataset("cifar10", "test", n=20, seed=1, flatten=True)
  assert flat.x.shape == (20, 3072)
  np.testing.assert_array_equal(flat.x, img.x.reshape(20, -1))
  assert load_dataset("mnist", "test", flatten=True).x.shape == (500, 784)


def test_holdout_splits_the_training_set():
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    tr = load_dataset("cifar10", "train", holdout=300)
    te = load_dataset("cifar10", "test", holdout=300)
  assert tr.x.shape[0] == 1200 and te.x.shape[0] == 300
  np.testing.assert_array_equal(te.info.indices, np.arange(1200, 1500))
  assert not te.info.partial


# ---------------------------------------------------------------- argument errors


@pytest.mark.parametrize("kwargs,match", [
    ({"name": "mnits"},
     r"unknown dataset name 'mnits'; valid names: \['cifar10', 'fashion_mnist', 'mnist'\]"),
    ({"split": "valid"}, r"split must be one of \('train', 'test'\)"),
    ({"source": "web"}, r"source must be one of"),
    ({"n": 0}, r"n must be a positive int"),
    ({"n": -5}, r"n must be a positive int"),
    ({"n": 2001}, r"n=2001 exceeds the 2000 examples available"),
    ({"n": 401, "classes": (3, 8)}, r"n=401 exceeds the 400 examples available"),
    ({"classes": ()}, r"classes must be non-empty"),
    ({"classes": (3, 10)}, r"classes must hold class ids in 0\.\.9"),
    ({"classes": (-1,)}, r"classes must hold class ids in 0\.\.9"),
    ({"classes": (3, 3)}, r"must not repeat"),
    ({"classes": 3}, r"classes must be a sequence"),
    ({"holdout": 2000}, r"holdout must be an int in 1\.\.1999"),
    ({"holdout": 0}, r"holdout must be an int in 1\.\.1999"),
])
def test_bad_arguments_raise_value_error_naming_the_argument(kwargs, match):
  kwargs = {"name": "mnist", "split": "train", **kwargs}
  with pytest.raises(ValueError, match=match):
    load_dataset(kwargs.pop("name"), kwargs.pop("split"), **kwargs)


def test_dir_source_needs_data_dir_or_env(monkeypatch):
  monkeypatch.delenv("ATTN_DATA_DIR", raising=False)
  with pytest.raises(ValueError, match="ATTN_DATA_DIR"):
    load_dataset("mnist", source="dir")


# ---------------------------------------------------------------- missing and corrupt files


def test_missing_dataset_dir_names_path_and_how_to_get_it(tmp_path, monkeypatch):
  monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path))
  with pytest.raises(DatasetFileNotFoundError, match="tfds") as e:
    load_dataset("mnist", source="dir")
  assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, ValueError)
  assert str(tmp_path / "mnist") in str(e.value)
  with pytest.raises(DatasetFileNotFoundError, match="cifar-10-python.tar.gz"):
    load_dataset("cifar10", source="dir", data_dir=tmp_path)


def test_missing_idx_file_names_the_file(tmp_path):
  (tmp_path / "mnist").mkdir()
  with pytest.raises(DatasetFileNotFoundError) as e:
    load_dataset("mnist", "test", source="dir", data_dir=tmp_path)
  assert "t10k-images-idx3-ubyte.gz" in str(e.value) and "(10000, 28, 28)" in str(e.value)


def test_wrong_idx_file_fails_verification(tmp_path):
  (tmp_path / "mnist").mkdir()
  _write_idx(tmp_path / "mnist" / "t10k-images-idx3-ubyte.gz", np.zeros((10000, 28, 28), np.uint8))
  with pytest.raises(DatasetFileError, match="decompressed payload .* expected 0fa7898d") as e:
    load_dataset("mnist", "test", source="dir", data_dir=tmp_path)
  assert "t10k-images-idx3-ubyte.gz" in str(e.value)


def _copy_embedded(tmp_path, fname="mnist_test.npz"):
  shutil.copy(sources.EMBEDDED_DIR / sources.MANIFEST_NAME, tmp_path)
  shutil.copy(sources.EMBEDDED_DIR / fname, tmp_path)
  return tmp_path / fname


def test_corrupt_embedded_file_is_detected(tmp_path):
  path = _copy_embedded(tmp_path)
  load_dataset("mnist", "test", data_dir=tmp_path)  # The intact copy verifies.
  data = bytearray(path.read_bytes())
  data[len(data) // 2] ^= 0xFF
  path.write_bytes(bytes(data))
  with pytest.raises(DatasetFileError, match="SHA-256 is .* expected") as e:
    load_dataset("mnist", "test", data_dir=tmp_path)
  assert str(path) in str(e.value) and "make_embedded" in str(e.value)


def test_truncated_embedded_file_is_detected(tmp_path):
  path = _copy_embedded(tmp_path)
  path.write_bytes(path.read_bytes()[:1000])
  with pytest.raises(DatasetFileError, match=r"\(1000 bytes\)") as e:
    load_dataset("mnist", "test", data_dir=tmp_path)
  assert str(path) in str(e.value)


def test_missing_embedded_file_and_manifest(tmp_path):
  path = _copy_embedded(tmp_path)
  path.unlink()
  with pytest.raises(DatasetFileNotFoundError, match="make_embedded") as e:
    load_dataset("mnist", "test", data_dir=tmp_path)
  assert str(path) in str(e.value)
  (tmp_path / sources.MANIFEST_NAME).unlink()
  with pytest.raises(DatasetFileNotFoundError, match="MANIFEST.json"):
    load_dataset("mnist", "test", data_dir=tmp_path)


def test_embedded_class_counts_are_checked_against_manifest(tmp_path):
  _copy_embedded(tmp_path)
  manifest = json.loads((tmp_path / sources.MANIFEST_NAME).read_text())
  manifest["files"]["mnist_test.npz"]["class_counts"][0] += 1
  (tmp_path / sources.MANIFEST_NAME).write_text(json.dumps(manifest))
  with pytest.raises(DatasetFileError, match="class counts"):
    load_dataset("mnist", "test", data_dir=tmp_path)


def test_cifar_npz_layout_checks_the_sources_md_hash(tmp_path):
  (tmp_path / "cifar10").mkdir()
  np.savez_compressed(tmp_path / "cifar10" / "cifar10_test.npz",
                      x_test=np.zeros((1000, 32, 32, 3), np.uint8), y_test=np.zeros(1000, np.uint8))
  with pytest.raises(DatasetFileError, match="expected 3fa345f7") as e:
    load_dataset("cifar10", "test", source="dir", data_dir=tmp_path)
  assert "cifar10_test.npz" in str(e.value)


def test_tfds_without_prepared_data_raises_our_error(tmp_path):
  with pytest.raises(DatasetFileNotFoundError, match="download=True") as e:
    load_dataset("mnist", "test", source="tfds", data_dir=tmp_path, download=False)
  assert str(tmp_path) in str(e.value)


def test_package_import_does_not_import_tensorflow():
  code = ("import sys; from experiments.data import load_dataset; load_dataset('mnist', n=10); "
          "bad = [m for m in ('tensorflow', 'tensorflow_datasets', 'jax') if m in sys.modules]; "
          "assert not bad, bad")
  subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# ---------------------------------------------------------------- file formats on synthetic files


def test_idx_parsing_puts_pixels_in_place(tmp_path):
  images = np.zeros((3, 28, 28), np.uint8)
  images[1, 4, 9] = 200
  images[2, 27, 0] = 7
  payload = _write_idx(tmp_path / "img-idx3-ubyte.gz", images)
  out = formats.read_idx(tmp_path / "img-idx3-ubyte.gz", expected_shape=(3, 28, 28))
  np.testing.assert_array_equal(out, images)
  assert out[1, 4, 9] == 200 and out[2, 27, 0] == 7 and out.sum() == 207
  good = hashlib.sha256(payload).hexdigest()
  formats.read_idx(tmp_path / "img-idx3-ubyte.gz", payload_sha256=good)
  # Uncompressed files are read too and the payload hash is the same.
  _write_idx(tmp_path / "img-idx3-ubyte", images, gz=False)
  formats.read_idx(tmp_path / "img-idx3-ubyte", payload_sha256=good)
  with pytest.raises(DatasetFileError, match="decompressed payload"):
    formats.read_idx(tmp_path / "img-idx3-ubyte.gz", payload_sha256="0" * 64)
  with pytest.raises(DatasetFileError, match=r"IDX shape \(3, 28, 28\), expected \(4, 28, 28\)"):
    formats.read_idx(tmp_path / "img-idx3-ubyte.gz", expected_shape=(4, 28, 28))
  labels = np.array([5, 0, 4], np.uint8)
  _write_idx(tmp_path / "lab-idx1-ubyte.gz", labels)
  np.testing.assert_array_equal(formats.read_idx(tmp_path / "lab-idx1-ubyte.gz"), labels)


def test_idx_truncated_or_corrupt_gzip_names_the_file(tmp_path):
  path = tmp_path / "img-idx3-ubyte.gz"
  _write_idx(path, np.arange(3 * 28 * 28, dtype=np.uint32).astype(np.uint8).reshape(3, 28, 28))
  data = path.read_bytes()
  path.write_bytes(data[:-20])
  with pytest.raises(DatasetFileError, match="truncated or corrupt gzip") as e:
    formats.read_idx(path)
  assert str(path) in str(e.value)
  flipped = bytearray(data)
  flipped[len(data) // 2] ^= 0xFF
  path.write_bytes(bytes(flipped))
  with pytest.raises(DatasetFileError, match=str(path)):
    formats.read_idx(path)
  # A gzip of an IDX whose payload is shorter than its header says.
  with gzip.open(path, "wb") as f:
    f.write(bytes([0, 0, 8, 1]) + np.asarray([5], ">u4").tobytes() + b"\x01\x02")
  with pytest.raises(DatasetFileError, match="payload is 10 bytes, expected 13"):
    formats.read_idx(path)


def test_cifar_python_batches_parse_to_hwc(tmp_path):
  rng = np.random.default_rng(0)
  images = rng.integers(0, 256, (6, 2, 32, 32, 3), dtype=np.uint8)  # batch, row, H, W, C.
  images[0, 1, 5, 7, 2] = 17  # Train image 1: blue channel at row 5, column 7.
  for b, fname in enumerate(["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4",
                             "data_batch_5", "test_batch"]):
    _write_cifar_batch(tmp_path / fname, _cifar_rows(images[b]), [b, 9 - b],
                       protocol=2 if b % 2 else pickle.HIGHEST_PROTOCOL)
  # The CHW row layout: channel 2, row 5, column 7 is at offset 2 * 1024 + 5 * 32 + 7.
  assert _cifar_rows(images[0])[1, 2 * 1024 + 5 * 32 + 7] == 17
  train = sources.read_cifar_batches(tmp_path, "train", expected_rows=2)
  assert train.x.shape == (10, 32, 32, 3) and train.x[1, 5, 7, 2] == 17
  np.testing.assert_array_equal(train.x, images[:5].reshape(10, 32, 32, 3))
  assert train.y.tolist() == [0, 9, 1, 8, 2, 7, 3, 6, 4, 5]
  test = sources.read_cifar_batches(tmp_path, "test", expected_rows=2)
  np.testing.assert_array_equal(test.x, images[5])
  with pytest.raises(DatasetFileError, match=r"\[10000, 3072\]") as e:
    sources.read_cifar_batches(tmp_path, "test")  # The official row count is the default.
  assert "test_batch" in str(e.value)


def test_cifar_batch_dir_is_found_by_load_dataset(tmp_path):
  batch_dir = tmp_path / "cifar10" / "cifar-10-batches-py"
  batch_dir.mkdir(parents=True)
  images = np.zeros((10000, 32, 32, 3), np.uint8)
  images[9999, 31, 0, 1] = 255
  _write_cifar_batch(batch_dir / "test_batch", _cifar_rows(images), np.arange(10000) % 10)
  with warnings.catch_warnings():
    warnings.simplefilter("error")  # A full official test batch is not partial.
    s = load_dataset("cifar10", "test", source="dir", data_dir=tmp_path, classes=(9,))
  assert s.x.shape == (1000, 32, 32, 3) and s.x[-1, 31, 0, 1] == 1.0 and s.x.sum() == 1.0
  assert not s.info.partial and s.info.indices[-1] == 9999


@pytest.mark.parametrize("bad,match", [
    ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 10]}, "in 0..9"),
    ({b"data": np.zeros((2, 3000), np.uint8), b"labels": [0, 1]}, r"data uint8 \(2, 3000\)"),
    ({b"data": np.zeros((2, 3072), np.float32), b"labels": [0, 1]}, "data float32"),
    ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0]}, r"labels int64 \(1,\)"),
    ({b"labels": [0]}, "not a CIFAR batch"),
])
def test_malformed_cifar_batch_is_rejected(tmp_path, bad, match):
  path = tmp_path / "test_batch"
  with open(path, "wb") as f:
    pickle.dump(bad, f, protocol=2)
  with pytest.raises(DatasetFileError, match=match):
    formats.read_cifar_batch(path, expected_rows=None)


class _Exploit:

  def __reduce__(self):
    return (os.system, ("echo pwned",))


def test_cifar_batch_unpickler_refuses_arbitrary_globals(tmp_path):
  path = tmp_path / "test_batch"
  path.write_bytes(pickle.dumps({b"data": _Exploit(), b"labels": []}))
  with pytest.raises(DatasetFileError, match="is not allowed"):
    formats.read_cifar_batch(path, expected_rows=None)
  path.write_bytes(pickle.dumps({b"data": np.zeros((1, 3072), np.uint8), b"labels": [1]})[:50])
  with pytest.raises(DatasetFileError, match="cannot unpickle"):
    formats.read_cifar_batch(path, expected_rows=None)


# ---------------------------------------------------------------- full files (opt-in)

MNIST_COUNTS = {"train": [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949],
                "test": [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]}
FIRST_LABELS = {("mnist", "train"): [5, 0, 4, 1, 9, 2, 1, 3, 1, 4],
                ("mnist", "test"): [7, 2, 1, 0, 4, 1, 4, 9, 5, 9],
                ("fashion_mnist", "train"): [9, 0, 0, 3, 0, 2, 7, 2, 5, 5],
                ("cifar10", "train"): [6, 9, 9, 4, 1, 1, 2, 7, 8, 3],
                ("cifar10", "test"): [3, 8, 8, 0, 6, 6, 1, 6, 3, 1]}


@pytest.mark.full_data
@requires_full_data
@pytest.mark.parametrize("split", ["train", "test"])
@pytest.mark.parametrize("name", ["mnist", "fashion_mnist"])
def test_full_idx_files_match_sources_md(name, split):
  s = load_dataset(name, split, source="dir")
  n = 60000 if split == "train" else 10000
  assert s.x.shape == (n, 28, 28, 1) and s.x.dtype == np.float32
  counts = MNIST_COUNTS[split] if name == "mnist" else [n // 10] * 10
  assert np.bincount(s.y).tolist() == counts
  if (name, split) in FIRST_LABELS:
    assert s.y[:10].tolist() == FIRST_LABELS[(name, split)]
  if (name, split) == ("mnist", "train"):
    assert abs(float(s.x.mean()) * 255 - 33.3184) < 1e-3


@pytest.mark.full_data
@requires_full_data
def test_full_cifar10_matches_sources_md():
  train = load_dataset("cifar10", "train", source="dir", data_dir=FULL_DATA_DIR)
  assert train.x.shape == (50000, 32, 32, 3)
  assert np.bincount(train.y).tolist() == [5000] * 10
  assert train.y[:10].tolist() == FIRST_LABELS[("cifar10", "train")]
  red_row0 = np.rint(train.x[0, 0, :8, 0] * 255).astype(int).tolist()
  assert red_row0 == [59, 43, 50, 68, 98, 119, 139, 145]
  with pytest.warns(PartialTestSetWarning, match="only the first 1000 of the 10000"):
    test = load_dataset("cifar10", "test", source="dir", data_dir=FULL_DATA_DIR)
  assert test.info.partial and test.x.shape == (1000, 32, 32, 3)
  assert np.bincount(test.y).tolist() == [103, 89, 100, 103, 90, 86, 112, 102, 106, 109]
  assert test.y[:10].tolist() == FIRST_LABELS[("cifar10", "test")]
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    held = load_dataset("cifar10", "test", source="dir", data_dir=FULL_DATA_DIR, holdout=5000)
  assert held.x.shape == (5000, 32, 32, 3) and not held.info.partial
  np.testing.assert_array_equal(held.x, train.x[45000:])


@pytest.mark.full_data
@requires_full_data
def test_embedded_subsets_are_the_manifest_rows_and_rebuild_byte_identically(tmp_path):
  manifest = _manifest()
  for fname, entry in manifest["files"].items():
    name, split = entry["dataset"], entry["split"]
    with warnings.catch_warnings():
      warnings.simplefilter("ignore", PartialTestSetWarning)
      full = load_dataset(name, split, source="dir", data_dir=FULL_DATA_DIR)
    emb = load_dataset(name, split)
    np.testing.assert_array_equal(full.x[entry["indices"]], emb.x, err_msg=fname)
    np.testing.assert_array_equal(full.y[entry["indices"]], emb.y, err_msg=fname)
  make_embedded.main(["--data_dir", FULL_DATA_DIR, "--out_dir", str(tmp_path),
                      "--seed", str(manifest["files"]["mnist_train.npz"]["seed"])])
  rebuilt = json.loads((tmp_path / sources.MANIFEST_NAME).read_text())["files"]
  for fname, entry in manifest["files"].items():
    assert rebuilt[fname]["sha256"] == entry["sha256"], fname
    assert rebuilt[fname]["indices"] == entry["indices"], fname


@pytest.mark.full_data
@requires_full_data
def test_real_idx_file_regzipped_passes_and_corrupted_fails(tmp_path):
  src = os.path.join(FULL_DATA_DIR, "mnist", "t10k-labels-idx1-ubyte.gz")
  (tmp_path / "mnist").mkdir()
  for fname in ("t10k-images-idx3-ubyte.gz",):
    os.symlink(os.path.join(FULL_DATA_DIR, "mnist", fname), tmp_path / "mnist" / fname)
  dst = tmp_path / "mnist" / "t10k-labels-idx1-ubyte.gz"
  with gzip.open(src) as f_in:  # Re-gzip with another header and level, as Debian did.
    dst.write_bytes(gzip.compress(f_in.read(), compresslevel=1, mtime=0))
  assert formats.sha256_file(dst) != formats.sha256_file(src)
  s = load_dataset("mnist", "test", source="dir", data_dir=tmp_path)
  assert s.y[:10].tolist() == FIRST_LABELS[("mnist", "test")]
  data = bytearray(open(src, "rb").read())
  data[100] ^= 0x01
  dst.write_bytes(bytes(data))
  with pytest.raises(DatasetFileError) as e:
    load_dataset("mnist", "test", source="dir", data_dir=tmp_path)
  assert str(dst) in str(e.value)


class _FakeBuilder:
  """Stands in for a prepared tfds builder (no data set can be prepared offline)."""

  def __init__(self, file_format, examples):
    self.info = type("Info", (), {"file_format": file_format})()
    self._examples = examples

  def is_prepared(self):
    return True

  def as_data_source(self, split):
    return self._examples


def test_tfds_array_record_data_is_read_without_tensorflow(monkeypatch):
  """ArrayRecord data goes through the builder's random-access source: images and labels in order."""
  import tensorflow_datasets as tfds

  from experiments.data import sources
  rng = np.random.default_rng(0)
  examples = [dict(image=rng.integers(0, 256, (28, 28, 1), dtype=np.uint8), label=i % 10) for i in range(5)]
  monkeypatch.setattr(tfds, "builder", lambda name, data_dir=None: _FakeBuilder("array_record", examples))
  monkeypatch.setitem(sys.modules, "tensorflow", None)  # importing it would fail
  sources._read_tfds_cached.cache_clear()
  try:
    raw = sources._read_tfds_cached("mnist", "test", "/nowhere", False)
  finally:
    sources._read_tfds_cached.cache_clear()
  np.testing.assert_array_equal(raw.x, np.stack([e["image"] for e in examples]))
  np.testing.assert_array_equal(raw.y, np.arange(5))


def test_tfds_tfrecord_data_without_tensorflow_names_the_extra(monkeypatch):
  import tensorflow_datasets as tfds

  from experiments.data import sources
  monkeypatch.setattr(tfds, "builder", lambda name, data_dir=None: _FakeBuilder("tfrecord", []))
  monkeypatch.setitem(sys.modules, "tensorflow", None)
  sources._read_tfds_cached.cache_clear()
  try:
    with pytest.raises(DatasetFileError, match=r"tfrecord.*\.\[tfrecord\]"):
      sources._read_tfds_cached("mnist", "test", "/nowhere", False)
  finally:
    sources._read_tfds_cached.cache_clear()
