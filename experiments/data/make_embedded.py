"""(Re)creates the embedded subsets in ``experiments/data/embedded/`` from the full data files.

Usage (about 10 s; reads and verifies every full file first):
  python -m experiments.data.make_embedded --data_dir /path/to/data [--out_dir DIR] [--seed 0]

``--data_dir`` is a directory laid out as in ``docs/data.md#directory-layouts`` (``mnist/``, ``fashion_mnist/``,
``cifar10/``). For each data set and split it draws ``catalog.EMBEDDED_SIZES`` examples, the same
number from every class (``loader.class_balanced_indices`` with ``numpy.random.default_rng(seed)``,
fresh per file: for class c = 0..9 in turn, ``rng.choice(rows of class c, n // 10, replace=False)``;
the union is sorted into stored order). It writes ``<name>_<split>.npz`` (arrays ``x`` uint8
[n, h, w, c] and ``y`` uint8 [n], byte-reproducible) and ``MANIFEST.json`` recording per file the
SHA-256, shapes, class counts, source file hashes, seed, the rows drawn and this command.
Each file must stay under 5 MiB. The same inputs and seed reproduce the same bytes.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

from experiments.data import catalog, sources
from experiments.data.formats import DatasetFileNotFoundError, sha256_file, write_npz_deterministic
from experiments.data.loader import class_balanced_indices

MAX_FILE_BYTES = 5 * 2**20
RULE = ("rng = numpy.random.default_rng(seed); for class c in 0..9 ascending: "
        "rng.choice(numpy.flatnonzero(y == c), n // 10, replace=False); concatenate and sort "
        "ascending (experiments.data.loader.class_balanced_indices(y, n, seed=seed))")


def _source_files(origin: Path, spec: catalog.DatasetSpec, split: str) -> dict[str, dict]:
  """SHA-256 of each full file a split was read from (plus the decompressed payload hash for IDX)."""
  if spec.name != "cifar10":
    return {f"{spec.name}/{f}": {"sha256": sha256_file(origin / f),
                                 "payload_sha256": catalog.IDX_PAYLOAD_SHA256[(spec.name, f)]}
            for f in catalog.IDX_FILES[split]}
  if origin.name == catalog.CIFAR_BATCH_DIR:
    return {f"{origin.name}/{f}": {"sha256": sha256_file(origin / f)}
            for f in catalog.CIFAR_BATCHES[split]}
  return {f"{spec.name}/{f}": {"sha256": sha} for f, sha, _ in catalog.CIFAR_NPZ[split]}


def make_file(spec: catalog.DatasetSpec, split: str, data_dir: Path, out_dir: Path, seed: int,
              command: str) -> tuple[str, dict]:
  """Draws and writes one embedded subset; returns (file name, manifest entry).

  Raises:
    ValueError: if the written file is not under MAX_FILE_BYTES.
    DatasetFileError: if a full source file fails verification.
  """
  raw = sources.read_dir(spec, split, data_dir)
  size = catalog.EMBEDDED_SIZES[spec.name][split]
  rows = class_balanced_indices(raw.y, size, seed=seed)
  x, y = raw.x[rows], raw.y[rows]
  fname = sources.embedded_file_name(spec.name, split)
  path = out_dir / fname
  write_npz_deterministic(path, {"x": x, "y": y})
  n_bytes = path.stat().st_size
  if n_bytes >= MAX_FILE_BYTES:
    raise ValueError(f"{path}: {n_bytes} bytes, must stay under {MAX_FILE_BYTES} (5 MiB)")
  entry = {
      "dataset": spec.name,
      "split": split,
      "bytes": n_bytes,
      "sha256": sha256_file(path),
      "arrays": {"x": {"shape": list(x.shape), "dtype": "uint8"},
                 "y": {"shape": list(y.shape), "dtype": "uint8"}},
      "class_counts": np.bincount(y, minlength=spec.num_classes).tolist(),
      "class_names": list(spec.class_names),
      "source_split_size": int(raw.y.shape[0]),
      "source_partial": raw.partial,
      "source_files": _source_files(Path(raw.origin), spec, split),
      "seed": seed,
      "rule": RULE,
      "numpy_version": np.__version__,
      "command": command,
      "indices": rows.tolist(),
  }
  return fname, entry


def _compact_int_lists(text: str) -> str:
  """Puts JSON lists of integers on one line (json.dumps(indent=...) gives one number per line)."""
  return re.sub(r"\[\s*(-?\d+(?:,\s*-?\d+)*)\s*\]",
                lambda m: "[" + ", ".join(m.group(1).replace(",", " ").split()) + "]", text)


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
  parser.add_argument("--data_dir", required=True, type=Path,
                      help="directory with mnist/, fashion_mnist/, cifar10/ (docs/data.md#directory-layouts)")
  parser.add_argument("--out_dir", type=Path, default=sources.EMBEDDED_DIR)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  if not args.data_dir.is_dir():
    parser.error(f"--data_dir {args.data_dir} is not a directory: it wants the full data files' directory, "
                 "holding mnist/, fashion_mnist/ and cifar10/ (docs/data.md#directory-layouts)")
  command = (f"python -m experiments.data.make_embedded --data_dir {args.data_dir} "
             f"--seed {args.seed}")
  args.out_dir.mkdir(parents=True, exist_ok=True)
  files = {}
  for name in catalog.EMBEDDED_SIZES:
    for split in catalog.SPLITS:
      try:
        fname, entry = make_file(catalog.DATASETS[name], split, args.data_dir, args.out_dir,
                                 args.seed, command)
      except DatasetFileNotFoundError as e:
        parser.error(f"--data_dir {args.data_dir}: {e}")
      files[fname] = entry
      print(f"{fname}: {entry['bytes']} bytes, class counts {entry['class_counts']}")
  manifest = {
      "description": ("Class-balanced real subsets of MNIST, Fashion-MNIST and CIFAR-10; see "
                      "README.md. indices are rows of the source split in stored (official) order."),
      "files": files,
  }
  text = _compact_int_lists(json.dumps(manifest, indent=2)) + "\n"
  (args.out_dir / sources.MANIFEST_NAME).write_text(text)
  print(f"wrote {args.out_dir / sources.MANIFEST_NAME}", file=sys.stderr)


if __name__ == "__main__":
  main()
