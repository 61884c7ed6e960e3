"""The repository explains itself: no citations of documents outside it, every docs/ page a markdown link
names exists, and every link into a docs page (``docs/page.md#anchor`` anywhere, ``page.md#anchor`` or
``#anchor`` inside docs/) names a heading that exists (GitHub's anchor rules)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = tuple(sorted(p.name for p in (ROOT / "docs").glob("*.md")))  # every page

# Citations of the project's notes that live outside the repository (its reference, style and sources
# notes). The names are assembled from parts so that this file does not cite them itself. The reference
# note's name as a bare word is prose (e.g. "<NAME> §1"); as a Python name being assigned or indexed it is code.
REF, STY, SRC = "REFER" + "ENCE", "STY" + "LE", "SOUR" + "CES"
OUTSIDE = re.compile(rf"{REF}\.md|\b{REF}\b(?!\s*[=\[])|{STY}\.md|{SRC}\.md")
ANCHOR_LINK = re.compile(r"docs/([\w\-]+)\.md#([A-Za-z0-9_\-]+)")
LOCAL_LINK = re.compile(r"\]\((?!\w+://)(?:\.\./)?([\w\-]+\.md)?#([A-Za-z0-9_\-]+)\)")
PAGE_LINK = re.compile(r"\]\((?!\w+://)([\w./\-]+\.(?:md|png))(?:#[^)]*)?\)")


def github_slug(heading: str) -> str:
  """GitHub's heading anchor: lowercase, punctuation dropped, spaces to hyphens."""
  return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
  """Anchors of every ATX heading outside fenced code blocks; repeats get -1, -2, ... as on GitHub."""
  seen: dict[str, int] = {}
  out, fenced = set(), False
  for line in markdown.splitlines():
    if line.lstrip().startswith("```"):
      fenced = not fenced
      continue
    match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
    if fenced or not match:
      continue
    slug = github_slug(match.group(1))
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    out.add(slug if count == 0 else f"{slug}-{count}")
  return out


def _text_files() -> list[tuple[str, str]]:
  """(path, text) of every tracked or new, not-ignored text file, except this test."""
  try:
    listing = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, check=True).stdout
  except (OSError, subprocess.CalledProcessError):
    pytest.skip("not a git checkout: cannot list the tracked files")
  files = []
  for name in sorted(set(listing.decode().split("\0")) - {"", "tests/test_docs.py"}):
    path = ROOT / name
    if not path.is_file():
      continue  # Deleted in the working tree.
    data = path.read_bytes()
    if b"\0" in data[:8192]:
      continue  # Binary (npz, png, ...).
    try:
      files.append((name, data.decode("utf-8")))
    except UnicodeDecodeError:
      continue
  return files


@pytest.fixture(scope="module")
def text_files():
  return _text_files()


def test_slug_rules():
  assert github_slug("Lemma 1") == "lemma-1"
  assert github_slug("Gradient descent vs the NTK predictor") == "gradient-descent-vs-the-ntk-predictor"
  assert github_slug("CW-L2") == "cw-l2"
  assert github_slug("Why `x` (and y)?") == "why-x-and-y"
  assert anchors("# A\n## A\n```\n# B\n```\n### C d\n") == {"a", "a-1", "c-d"}


def test_outside_citation_pattern():
  assert OUTSIDE.search(f"decomposition as in {REF}.md §5")
  assert OUTSIDE.search(f"(arXiv 2603.13085; {REF} §1)")
  assert OUTSIDE.search(f"the layout of the data notes' {SRC}.md")
  assert OUTSIDE.search(f"Strict settings ({STY}.md §8)")
  assert not OUTSIDE.search(f'{REF} = np.load(path)')
  assert not OUTSIDE.search(f'x @ {REF}["w1"]')
  assert not OUTSIDE.search("see docs/theory.md#lemma-1")


def test_no_citations_of_outside_documents(text_files):
  hits = [f"{name}:{i}: {line.strip()}" for name, text in text_files
          for i, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)]
  assert not hits, ("cite the paper, docs/theory.md#anchor or docs/data.md instead of notes outside the "
                    "repository:\n" + "\n".join(hits))


def test_docs_exist_with_headings():
  for doc in ("theory.md", "data.md"):
    assert len(anchors((ROOT / "docs" / doc).read_text())) >= 5, doc
  for doc in DOCS:
    assert anchors((ROOT / "docs" / doc).read_text()), f"docs/{doc} has no heading"


def test_every_linked_page_exists(text_files):
  """Markdown links to pages and figures resolve from the linking file (README.md and docs/*.md)."""
  missing = []
  for name, text in text_files:
    if not name.endswith(".md"):
      continue
    for i, line in enumerate(text.splitlines(), 1):
      for target in PAGE_LINK.findall(line):
        if not (ROOT / Path(name).parent / target).exists():
          missing.append(f"{name}:{i}: {target}")
  assert not missing, "links to files that do not exist:\n" + "\n".join(missing)


def test_every_docs_anchor_exists(text_files):
  known = {doc: anchors((ROOT / "docs" / doc).read_text()) for doc in DOCS}
  missing = []
  for name, text in text_files:
    for i, line in enumerate(text.splitlines(), 1):
      for doc, anchor in ANCHOR_LINK.findall(line):
        if f"{doc}.md" not in known or anchor not in known[f"{doc}.md"]:
          missing.append(f"{name}:{i}: docs/{doc}.md#{anchor}")
      if name in (f"docs/{d}" for d in DOCS):  # Links inside the docs: (#x) and (theory.md#x).
        for target, anchor in LOCAL_LINK.findall(line):
          doc = target or Path(name).name
          if doc == "README.md" or doc not in known:
            continue  # a link out of docs/ (the README's anchors are not checked here)
          if anchor not in known[doc]:
            missing.append(f"{name}:{i}: {doc}#{anchor}")
  assert not missing, "anchors that are not headings of the docs:\n" + "\n".join(missing)


CITED_PATH = re.compile(r"`((?:tests|experiments|ntk|attention|attacks|influence|benchmarks|scripts)/[\w/]+\.py)")


def test_every_file_a_page_cites_exists():
  """A page that names a source or test file (``tests/.../test_x.py``) names one that is there: the layout
  moves of earlier versions left citations of files that had moved."""
  missing = [(page.name, path) for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
             for path in CITED_PATH.findall(page.read_text()) if not (ROOT / path).exists()]
  assert not missing, missing
