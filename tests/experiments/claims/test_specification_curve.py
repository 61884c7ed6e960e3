"""A claim under several measurement choices: the summary line names the choices that flip its verdict, and
the claims report shows it beside the primary row and draws the specification curve."""
import pytest

from experiments.claims import report as claims_report
from experiments.claims import specification_curve
from experiments.core.rows import make_row
from experiments.core.verdicts import Interval


def _measured(measurement, low, high, *, primary=False, claim_id="feature_learning", variant=""):
  ci = Interval((low + high) / 2, low, high, 0.95, 10, "seeds", "test")
  return make_row(claim_id, "MLP-Attn's kernel moves more", "arXiv 2603.13085", "(reading)", interval=ci,
                  paper_sign=+1, measurement=measurement, primary=primary, variant=variant)


def test_one_direction_under_every_choice_says_so():
  group = [_measured("raw", 0.1, 0.3, primary=True), _measured("centred", 0.2, 0.5)]
  assert specification_curve.choice_summary(group) == "holds under every choice run (2)"
  group = [_measured("raw", -0.3, -0.1, primary=True), _measured("centred", -0.5, -0.2)]
  assert specification_curve.choice_summary(group) == "fails under every choice run (2)"


def test_a_choice_that_flips_the_verdict_is_named_with_its_direction():
  group = [_measured("raw", -0.44, -0.19, primary=True), _measured("centred", 0.2, 0.5),
           _measured("1 − CKA", -0.1, 0.2), _measured("top-10 subspace", -0.4, -0.1)]
  text = specification_curve.choice_summary(group)
  assert text == "fails under raw; depends on: centred (holds); 1 − CKA (inconclusive)"


def test_groups_need_two_measurements_and_keep_variants_apart():
  rows = [_measured("raw", 0.1, 0.3, primary=True), _measured("centred", 0.2, 0.5),
          _measured("raw", 0.1, 0.3, primary=True, variant="n=1000"),  # a variant measured one way only
          make_row("other", "c", "s", "p")]
  groups = specification_curve.choice_groups(rows)
  assert list(groups) == [("feature_learning", "")]
  assert [r["measurement"] for r in groups[("feature_learning", "")]] == ["raw", "centred"]


def test_the_primary_row_comes_first_whatever_the_order():
  rows = [_measured("centred", 0.2, 0.5), _measured("raw", -0.3, -0.1, primary=True)]
  group = specification_curve.choice_groups(rows)[("feature_learning", "")]
  assert group[0]["measurement"] == "raw"
  assert specification_curve.choice_summary(group).startswith("fails under raw; depends on: centred (holds)")


def test_empty_group_is_refused():
  with pytest.raises(ValueError, match="group"):
    specification_curve.choice_summary([])


def test_the_report_shows_the_summary_and_draws_the_curve(tmp_path):
  rows = [_measured("raw ‖K_T − K₀‖_F/‖K₀‖_F", -0.44, -0.19, primary=True), _measured("centred", 0.2, 0.5)]
  text = claims_report.summary_markdown(rows)
  assert "measurement: fails under raw ‖K_T − K₀‖_F/‖K₀‖_F; depends on: centred (holds)" in text
  assert "↳ measured as centred" in text and "## Measurement choices" in text
  assert specification_curve.plot_specification_curve(rows, tmp_path / "curve.png")
  assert (tmp_path / "curve.png").stat().st_size > 1000
  assert not specification_curve.plot_specification_curve(rows[:1], tmp_path / "none.png")
  assert not (tmp_path / "none.png").exists()


def test_claims_order_lists_each_row_once_primary_then_choices_then_variants():
  from experiments.claims import job as claims
  rows = [_measured("ε = 0.1", 0.1, 0.3), _measured("ε = 0.3", -0.1, 0.2, primary=True),
          _measured("ε = 0.3", 0.1, 0.2, variant="standardised ε"), _measured("ε = 0.2", 0.1, 0.3)]
  ordered = claims._order(rows)
  assert [(r["measurement"], r["variant"]) for r in ordered] == [
      ("ε = 0.3", ""), ("ε = 0.1", ""), ("ε = 0.2", ""), ("ε = 0.3", "standardised ε")]
  assert ordered[0]["protocol"] == [dict(variant="standardised ε", direction="holds", magnitude=None)]


def test_headline_lists_primary_rows_with_their_verdict_across_choices():
  rows = [_measured("raw", -0.44, -0.19, primary=True), _measured("centred", 0.2, 0.5),
          _measured("raw", -0.4, -0.1, primary=True, variant="n = 1000"),
          make_row("x", "a claim not run", "s", "p", status="not run", command="python -m x")]
  table = claims_report.headline_markdown(rows)
  body = [l for l in table.splitlines()[2:]]
  assert len(body) == 1 and "fails under raw; depends on: centred (holds)" in body[0]
  assert "-0.315 [-0.44, -0.19]" in body[0]
