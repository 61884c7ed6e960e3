"""The measured figures of the README and the docs pages come from the committed summaries: every number with
a decimal point (or an exponent) inside a ``<!-- numbers from docs/X.md -->`` … ``<!-- end numbers -->`` block
of README.md or of any docs/*.md page must appear in that summary, or among the papers' reported figures in
docs/theory.md. A stale sentence fails here."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"<!-- numbers from (docs/[\w./-]+\.md) -->(.*?)<!-- end numbers -->", re.S)
NUMBER = re.compile(r"(?<![\w.^])-?\d+\.\d+(?:e-?\d+)?|(?<![\w.^])-?\d+e-?\d+")
SOURCES = ("docs/quick_summary.md", "docs/claims_summary.md", "docs/diff_attention_exploratory_summary.md",
           "docs/certify_summary.md", "docs/claims_stability_summary_previous.md",
           "docs/diff_attention_summary.md", "docs/crown_summary.md", "docs/clip_summary.md",
           "docs/paper_grid_summary.md")
PAGES = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))


def numbers(text: str) -> set[str]:
  """Every decimal or exponent number in ``text``, with the typographic minus read as '-'; a bare '.5' and
  digits inside words or after '^' (exponents written as powers) are not numbers here."""
  return set(NUMBER.findall(text.replace("−", "-")))


def unsupported(readme: str, read=lambda p: (ROOT / p).read_text()) -> dict[str, set[str]]:
  """{summary path: the numbers of its README blocks found neither in it nor in docs/theory.md}."""
  papers = numbers(read("docs/theory.md"))
  out: dict[str, set[str]] = {}
  for path, body in BLOCK.findall(readme):
    missing = numbers(body) - numbers(read(path)) - papers
    if missing:
      out.setdefault(path, set()).update(missing)
  return out


def test_the_checker_catches_a_stale_number():
  files = {"docs/theory.md": "paper 8.8×", "docs/quick_summary.md": "slope −0.49 ± 0.01, ratio 11.9"}
  ok = "<!-- numbers from docs/quick_summary.md -->slope −0.49 ± 0.01 (paper 8.8×)<!-- end numbers -->"
  assert unsupported(ok, files.__getitem__) == {}
  stale = ok.replace("0.49", "0.46")
  assert unsupported(stale, files.__getitem__) == {"docs/quick_summary.md": {"-0.46"}}
  assert numbers("10^18.9, n = 256, 1.5e-3, κ⁶/ε²") == {"1.5e-3"}


@pytest.mark.parametrize("source", SOURCES)
def test_the_pages_quote_each_summary_in_checked_blocks(source):
  quoted = {path for page in PAGES for path, _ in BLOCK.findall((ROOT / page).read_text())}
  assert source in quoted, (f"no page has a '<!-- numbers from {source} -->' block: its figures from that "
                            "summary are unchecked")


@pytest.mark.parametrize("page", PAGES)
def test_every_number_in_a_checked_block_is_in_its_summary(page):
  assert unsupported((ROOT / page).read_text()) == {}
