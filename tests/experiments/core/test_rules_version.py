"""Published summaries cannot go stale: each states the verdict rules it was rendered with, as a version derived
from the rule constants, and this test fails when a committed summary's version differs from the code's."""
from pathlib import Path

import pytest

from experiments.core import rows as core_rows
from experiments.core import rules_version, verdicts

DOCS = Path(__file__).resolve().parents[3] / "docs"
SUMMARIES = (("quick_summary.md", "core"), ("claims_summary.md", "core"),
             ("diff_attention_summary.md", "differential_attention"), ("certify_summary.md", "certification"),
             ("diff_attention_depth2_summary.md", "differential_attention"), ("crown_summary.md", "certification"),
             ("clip_summary.md", "core"))
# docs/claims_stability_summary_previous.md is the previous version's four-mode stability pass, kept as history
# under the rules it states (b26e5bfa): it is not rendered by this code.


@pytest.mark.parametrize("name, scope", SUMMARIES)
def test_each_committed_summary_was_rendered_with_the_current_rules(name, scope):
  text = (DOCS / name).read_text()
  stated = rules_version.version_of(text)
  assert stated is not None, f"docs/{name} states no verdict-rules version (render it with the current code)"
  assert stated == rules_version.rules_version(scope), (
      f"docs/{name} was rendered with verdict rules {stated}, the code's are {rules_version.rules_version(scope)}: "
      "regenerate it (python -m experiments / experiments.claims / the experiment's report)")


@pytest.mark.parametrize("module, name, value", [
    (verdicts, "TAIL_FACTOR", 1.0), (verdicts, "N_RESAMPLES", 2_000), (verdicts, "MIN_SEEDS", 20),
    (verdicts, "MAGNITUDE_FACTOR", 1.2), (verdicts, "SE_FLOOR", 0.0), (core_rows, "LEVEL", 0.9),
    (verdicts, "MIN_FLIPS", 3), (verdicts, "MATCH_RTOL", 0.05), (verdicts, "FAMILY_CORRECTION", "holm")])
def test_the_version_follows_every_rule_constant(monkeypatch, module, name, value):
  before = rules_version.rules_version()
  monkeypatch.setattr(module, name, value)
  assert rules_version.rules_version() != before
  assert str(value) in rules_version.rules_line()


def test_the_version_follows_the_default_interval_method(monkeypatch):
  before = rules_version.rules_version()
  original = verdicts.bootstrap_mean
  def percentile_default(values, *, method: str = "percentile", **kw):
    return original(values, method=method, **kw)
  monkeypatch.setattr(verdicts, "bootstrap_mean", percentile_default)
  assert rules_version.rules_version() != before and "mean interval percentile" in rules_version.rules_line()


def test_stamp_puts_the_rules_line_under_the_title_and_it_reads_back():
  text = rules_version.stamp("# Title\n\nbody\n")
  assert text.startswith("# Title\n\nVerdict rules `") and text.endswith("\nbody\n")
  assert rules_version.version_of(text) == rules_version.rules_version()
  assert rules_version.version_of("# no rules here") is None


def test_scopes_follow_their_own_constants(monkeypatch):
  core, da, cert = (rules_version.rules_version(s) for s in rules_version.SCOPES)
  assert len({core, da, cert}) == 3
  monkeypatch.setattr(core_rows, "N_BOOT", 1000)
  assert rules_version.rules_version("differential_attention") != da and rules_version.rules_version("core") == core
  monkeypatch.setattr(verdicts, "MAGNITUDE_FACTOR", 2.0)
  assert all(rules_version.rules_version(s) != v for s, v in zip(rules_version.SCOPES, (core, da, cert)))
  with pytest.raises(ValueError, match="scope"):
    rules_version.rules_version("other")
