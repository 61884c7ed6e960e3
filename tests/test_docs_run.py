"""Docs that run: every ```python block of README.md and docs/*.md is executed, in page order, in a temporary
working directory with the embedded data only (ATTN_DATA_DIR unset, nothing downloaded).

A block that cannot run offline says why in a marker on the line just above it,
``<!-- docs-test: skip: <reason> -->``; the reason must not be empty. A block whose first line is a file name
comment (``# my_vit.py``) is also written to that file first, so that a later block or a command can import
it. The blocks of one page share nothing: each runs in a fresh namespace.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = re.compile(r"<!--\s*docs-test:\s*skip:(.*?)-->")
FILE_NAME = re.compile(r"#\s*([\w/]+\.py)\s*$")


def python_blocks(text: str) -> list[tuple[int, str, str | None]]:
  """(line number, code, skip reason or None) of every ```python block of a page's ``text``."""
  lines, out, i = text.splitlines(), [], 0
  while i < len(lines):
    if lines[i].strip() == "```python":
      start, j = i + 1, i + 1
      while j < len(lines) and lines[j].strip() != "```":
        j += 1
      marker = SKIP.search(lines[i - 1]) if i > 0 else None
      out.append((start, "\n".join(lines[start:j]) + "\n", marker.group(1).strip() if marker else None))
      i = j
    i += 1
  return out


def test_the_block_parser_reads_code_markers_and_line_numbers():
  text = "intro\n```python\nx = 1\n```\n<!-- docs-test: skip: needs a GPU -->\n```python\ny = 2\n```\n"
  assert python_blocks(text) == [(2, "x = 1\n", None), (6, "y = 2\n", "needs a GPU")]


PAGES_WITH_CODE = [p for p in PAGES if python_blocks(p.read_text())]


def test_the_docs_have_python_examples():
  names = {p.name for p in PAGES_WITH_CODE}
  assert {"data.md", "attacks.md", "theory.md", "report.md"} <= names, names


@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=lambda p: p.name)
def test_every_python_block_runs_offline(page, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  monkeypatch.delenv("ATTN_DATA_DIR", raising=False)
  monkeypatch.syspath_prepend(str(tmp_path))
  for line, code, skip in python_blocks(page.read_text()):
    where = f"{page.relative_to(ROOT)}:{line}"
    if skip is not None:
      assert skip, f"{where}: a docs-test skip marker must give its reason"
      continue
    name = FILE_NAME.match(code.splitlines()[0]) if code.strip() else None
    if name:
      (tmp_path / name.group(1)).parent.mkdir(parents=True, exist_ok=True)
      (tmp_path / name.group(1)).write_text(code)
    try:
      exec(compile(code, where, "exec"), {"__name__": "__main__"})
    except Exception as e:  # the page and line, not only the traceback inside exec
      pytest.fail(f"{where}: the block raised {type(e).__name__}: {e}")
