"""The claim rows whose verdict words differ between two summary.md files, of the main job or the claims job.

Rows that either summary marks *unstable* are set apart, not counted as differing.

  python -m experiments.claims.verdict_diff RUN_A/summary.md RUN_B/summary.md

A row is a markdown table line holding a verdict word; rows are matched by their first cell, with a
calibrated "ε = <value>)" or "ε* = <value>" read as one name (ε* moves with the numerics). Exit status 1
when a row that neither run marks unstable differs, or is in one summary only, 0 otherwise. Typical use: the main job run twice on one
machine, once with ``XLA_FLAGS=--xla_cpu_max_isa=AVX OPENBLAS_CORETYPE=Sandybridge`` (docs/stability.md).
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import NamedTuple

WORDS = re.compile(r"\b(holds|fails|inconclusive|matches|differs|undetermined|unstable|premise fails)\b")
TABLE_HEADER = "| claim | paper |"  # the claims table's header (experiments.claims.report.rows_markdown)
CALIBRATED = re.compile(r"ε\*? = [0-9.e+-]+\)?")


class Difference(NamedTuple):
  """rows: verdict rows in each summary; differ: the names of rows whose words differ, neither unstable;
  unstable: rows marked unstable in either (also a row only one summary holds, marked unstable there);
  only_one: rows that only one summary holds, not marked unstable there."""
  rows: tuple[int, int]
  differ: list[str]
  unstable: list[str]
  only_one: list[str]


def verdict_rows(text: str) -> dict[str, tuple[str, ...]]:
  """{row name: the verdict words of its other cells, in order} of a summary's markdown tables; a name
  repeated in one summary gets ' #1', ' #2', ... in order."""
  out: dict[str, tuple[str, ...]] = {}
  for line in text.splitlines():
    if not line.startswith("|") or not WORDS.search(line):
      continue
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    name = CALIBRATED.sub("ε = *", cells[0])
    key, i = name, 0
    while key in out:
      i += 1
      key = f"{name} #{i}"
    out[key] = tuple(WORDS.findall(" | ".join(cells[1:])))
  return out


def compare(text_a: str, text_b: str) -> Difference:
  """The verdict rows of two summaries compared (``Difference``)."""
  a, b = verdict_rows(text_a), verdict_rows(text_b)
  differ, unstable, only = [], [], []
  for key in sorted(set(a) | set(b)):
    if key not in a or key not in b:
      (unstable if "unstable" in a.get(key, ()) + b.get(key, ()) else only).append(key)
    elif a[key] != b[key]:
      (unstable if "unstable" in a[key] + b[key] else differ).append(key)
  return Difference((len(a), len(b)), differ, unstable, only)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(allow_abbrev=False, prog="python -m experiments.claims.verdict_diff",
                                   description=__doc__.splitlines()[0])
  parser.add_argument("summaries", nargs=2, metavar="SUMMARY.md")
  args = parser.parse_args(argv)
  texts = []
  for path in map(Path, args.summaries):
    try:
      text = path.read_text(encoding="utf-8") if path.is_file() else None
    except UnicodeDecodeError:
      text = None
    if text is None or TABLE_HEADER not in text:
      print(f"error: {path} is not a summary.md of the main job or the claims job (no claims table: a line "
            f"starting {TABLE_HEADER!r})", file=sys.stderr)
      return 2
    texts.append(text)
  d = compare(*texts)
  for key in d.differ:
    print(f"differs: {key[:100]}")
  for key in d.only_one:
    print(f"in one summary only: {key[:100]}")
  print(f"{d.rows[0]} / {d.rows[1]} verdict rows; {len(d.differ)} differ; {len(d.unstable)} marked unstable in "
        f"either; {len(d.only_one)} in one summary only")
  return 1 if d.differ or d.only_one else 0


if __name__ == "__main__":
  sys.exit(main())
