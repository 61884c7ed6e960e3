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
SCOPES = ("core", "differential_attention", "certification")


def rules_constants(scope: str = "core") -> dict:
  """The constants that decide an interval or a verdict in summaries of ``scope`` (JSON-able values):
  'core' for the main job's and the claims job's summaries, 'differential_attention' and 'certification' for
  those experiments' summaries, whose rows use their own interval methods.

  Raises:
    ValueError: an unknown scope.
  """
  from experiments.core import rows as core_rows
  from experiments.core import verdicts
  if scope not in SCOPES:
    raise ValueError(f"scope {scope!r}: expected one of {', '.join(SCOPES)}")
  out = {"level": core_rows.LEVEL, "magnitude_factor": verdicts.MAGNITUDE_FACTOR}
  if scope == "core":
    from experiments.core import claim, intervals
    # The claims job renders the certification and differential-attention rows too.
    out.update(magnitude_points=verdicts.MAGNITUDE_POINTS, primary_asr=verdicts.PRIMARY_ASR)
    out.update(intervals=dict(getattr(core_rows, "INTERVAL_METHODS", {}) or {}),
               mean_interval=inspect.signature(verdicts.bootstrap_mean).parameters["method"].default,
               tail_factor=verdicts.TAIL_FACTOR, se_floor=verdicts.SE_FLOOR, resamples=verdicts.N_RESAMPLES,
               min_seeds=verdicts.MIN_SEEDS, sign_flip_exact_max_n=intervals.EXACT_MAX_N,
               continuity=intervals.CONTINUITY, min_flips=verdicts.MIN_FLIPS, match_rtol=verdicts.MATCH_RTOL,
               family_correction=verdicts.FAMILY_CORRECTION, claim_kinds=list(claim.KINDS))
  elif scope == "certification":
    out.update(magnitude_points=verdicts.MAGNITUDE_POINTS)
  elif scope == "differential_attention":
    out.update(interval=core_rows.METHOD, resamples=core_rows.N_BOOT, bootstrap_seed=core_rows.BOOT_SEED, primary_asr=verdicts.PRIMARY_ASR)
  return out


def rules_version(scope: str = "core") -> str:
  """Eight hex digits of the SHA-256 of ``rules_constants(scope)`` (sorted JSON)."""
  text = json.dumps(rules_constants(scope), sort_keys=True)
  return hashlib.sha256(text.encode()).hexdigest()[:8]


def rules_line(scope: str = "core") -> str:
  """The line a summary states its rules with: the version and the constants."""
  c = rules_constants(scope)
  words = ", ".join(f"{k.replace('_', ' ')} {json.dumps(v, sort_keys=True) if isinstance(v, dict) else v}"
                    for k, v in c.items())
  return f"Verdict rules `{rules_version(scope)}` ({scope}; derived from the rule constants): {words}."


def version_of(text: str):
  """The rules version a summary's text states, or None."""
  m = VERSION_PATTERN.search(text)
  return m.group(1) if m else None


def stamp(summary: str, scope: str = "core") -> str:
  """``summary`` (markdown, starting with its '# ' title line) with ``rules_line(scope)`` under the title."""
  title, _, rest = summary.partition("\n")
  return f"{title}\n\n{rules_line(scope)}\n{rest}"
