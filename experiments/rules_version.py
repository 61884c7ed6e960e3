"""The version of the verdict rules a summary was rendered with, derived from the rule constants themselves.

Every committed summary (docs/quick_summary.md, docs/claims_summary.md, docs/diff_attention_summary.md,
docs/certify_summary.md) carries ``rules_line()``; tests/test_rules_version.py fails when a committed
summary's version differs from the code's, so a change of interval method, tail factor, resamples, minimum
seeds or magnitude band cannot leave a published figure stale. There is no hand-bumped
string: the version is a hash of ``rules_constants()``.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import re

VERSION_PATTERN = re.compile(r"Verdict rules `([0-9a-f]{8})`")


def rules_constants() -> dict:
  """The constants that decide an interval or a verdict, by name (JSON-able values)."""
  from experiments import claim_rows, verdicts
  out = {
      "level": claim_rows.LEVEL,
      "mean_interval": inspect.signature(verdicts.bootstrap_mean).parameters["method"].default,
      "tail_factor": verdicts.TAIL_FACTOR,
      "se_floor": verdicts.SE_FLOOR,
      "resamples": verdicts.N_RESAMPLES,
      "min_seeds": verdicts.MIN_SEEDS,
      "magnitude_factor": verdicts.MAGNITUDE_FACTOR,
  }
  return out


def rules_version() -> str:
  """Eight hex digits of the SHA-256 of ``rules_constants()`` (sorted JSON)."""
  text = json.dumps(rules_constants(), sort_keys=True)
  return hashlib.sha256(text.encode()).hexdigest()[:8]


def rules_line() -> str:
  """The line a summary states its rules with: the version and the constants in words."""
  c = rules_constants()
  return (f"Verdict rules `{rules_version()}` (derived from the rule constants): {c['level']:.0%} intervals, "
          f"{c['mean_interval']} seed bootstrap with tails at {c['tail_factor']:g}·α/2 and SE floor "
          f"{c['se_floor']:g}, {c['resamples']:,} resamples, at least {c['min_seeds']} seeds for a direction, "
          f"magnitude band ×/÷{c['magnitude_factor']:g}.")


def version_of(text: str):
  """The rules version a summary's text states, or None."""
  m = VERSION_PATTERN.search(text)
  return m.group(1) if m else None


def stamp(summary: str) -> str:
  """``summary`` (markdown, starting with its '# ' title line) with ``rules_line()`` under the title."""
  title, _, rest = summary.partition("\n")
  return f"{title}\n\n{rules_line()}\n{rest}"
