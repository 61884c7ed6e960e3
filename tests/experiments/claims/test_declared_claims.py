"""Every declared claim (experiments.<name>.claims.CLAIMS, experiments.core.claim) has synthetic cases where the
paper's statement is false, true and at the boundary, and its row reads fails / holds / inconclusive (or the
words of its kind) on them: a row whose test cannot fail is caught here. A new claim without cases fails this
file; a row whose claim_id no experiment declares fails the claims job (build_rows)."""
import dataclasses

import pytest

from experiments import registry
from experiments.claims import job
from experiments.core import claim as claim_lib
from experiments.core.claim import Case, Claim, ExperimentClaims, around, heading, images, synthetic_row
from experiments.core.rows import Source, make_row, mean_interval
from experiments.core.spec import ExperimentSpec

DECLARED = [(spec.name, c) for spec, claims in registry.with_claims() for c in claims.claims]


def test_every_experiment_with_claims_declares_some():
  assert {name for name, _ in DECLARED} == {"width_sweep", "cubing", "flip_rate", "landscape", "dual_implications",
                                             "diff_attention", "clip", "certify"}


@pytest.mark.parametrize("name,claim", DECLARED, ids=[c.id for _, c in DECLARED])
def test_declared_claim_has_false_true_and_boundary_cases(name, claim):
  assert not claim_lib.missing_cases(claim), f"{name}: claim {claim.id} lacks cases {claim_lib.missing_cases(claim)}"
  assert claim.statement and claim.source and claim.quantity and claim.test


CASES = [(c, case) for _, c in DECLARED for case in c.cases]


@pytest.mark.parametrize("claim,case", CASES, ids=[f"{c.id}-{case.truth}-{i}" for i, (c, case) in enumerate(CASES)])
def test_declared_claim_row_reads_its_cases_verdict(claim, case):
  """The statement false → fails / differs / violated / premise fails; true → holds / matches / verified /
  premise holds; boundary → inconclusive / undetermined."""
  row = synthetic_row(claim, case)
  assert row["verdict"] == claim_lib.expected_verdict(claim, case), (claim.id, case.truth, row["reason"])
  assert row["verdict"] in claim_lib.VERDICT_WORDS[claim.kind] + ("inconclusive",)


def test_a_claim_that_cannot_fail_is_caught():
  """The reviewer's example: certified accuracy read as 'above 0' (a direction against 0 on a proportion). No
  data can put a proportion's interval below 0, so its 'false' case reads inconclusive, not fails: the case
  test above would reject such a declaration."""
  above_zero = Claim("certified_above_zero", "certified accuracy above 0", "test", "share certified", "direction",
                     "Clopper–Pearson interval above 0", interval="proportion", paper_sign=+1, null=0.0,
                     scale="proportion", cases=(Case("false", images(0, 1000)),))
  row = synthetic_row(above_zero, above_zero.cases[0])
  assert row["verdict"] != claim_lib.expected_verdict(above_zero, above_zero.cases[0])
  assert row["verdict"] == "inconclusive"


def test_the_cubing_prediction_as_a_direction_could_not_fail_but_as_an_equality_it_does():
  """The kernel-conditioning row tested 'gap above 0' (holds at 2.02 against a predicted 5.60); as an equality
  with the magnitude rule's band, the same interval differs."""
  gap = around(2.02, 0.05)
  as_direction = Claim("kernel_conditioning", "s", "src", "q", "direction", "t", paper_sign=+1, null=0.0,
                       cases=(Case("false", gap),))
  assert synthetic_row(as_direction, as_direction.cases[0])["verdict"] == "holds"
  declared = registry.declaration("kernel_conditioning")[1]
  assert synthetic_row(declared, Case("false", gap, (5.6, 5.6)))["verdict"] == "differs"


def test_identity_tolerance_is_absolute_not_the_magnitude_band():
  """κ(G̃) = κ(G)³: 3.02 ± 0.001 lies inside the ×1.5 magnitude band of 3 but outside 3 ± 0.01: violated."""
  cubing = registry.declaration("cubing")[1]
  assert synthetic_row(cubing, Case("false", around(3.02, 0.001)))["verdict"] == "violated"


def test_heading_follows_the_seed_rule_the_stability_pass_and_the_status():
  claim = registry.declaration("ntk_distance_relu")[1]
  row = synthetic_row(claim, Case("true", around(-0.2)[:3]))
  assert row["n"] == 3 and row["verdict"] == "inconclusive"
  row = synthetic_row(claim, Case("true", around(-0.2)))
  assert heading(dict(row, direction="unstable")) == "unstable"
  assert heading(dict(row, status="not run")) == "not run"
  premise = registry.declaration("da_corollary1_premise")[1]
  assert heading(dict(synthetic_row(premise, Case("true", around(1.0))), direction="fails")) == "premise fails"


def test_magnitude_row_without_a_paper_value_and_without_direction():
  """A certified accuracy on a data set the paper does not report reads 'no paper value'; on CIFAR-10 its
  direction cell is context (no direction is claimed) and the magnitude heads the row."""
  certified = registry.declaration("certified_0.05_rigorous")[1]
  row = claim_lib.judge(make_row("certified_0.05_rigorous", "c", "s", "–", interval=mean_interval(around(0.3)),
                                 scale="proportion"), certified)
  assert row["verdict"] == "no paper value"
  row = claim_lib.judge(make_row("certified_0.05_rigorous", "c", "s", "16 %", paper_range=(0.16, 0.16),
                                 interval=mean_interval(around(0.096, 0.005)), scale="proportion"), certified)
  assert (row["direction"], row["magnitude"], row["verdict"]) == ("context", "differs", "differs")


def test_undeclared_claim_rows_stop_the_claims_job():
  def rows(sources, root, include_not_run):
    return [make_row("toy_undeclared", "c", "s", "p", interval=mean_interval(around(1.0)), paper_sign=+1)]
  spec = ExperimentSpec(name="toy", description="toy", get_config=lambda full=False: None, run=lambda *a, **k: [],
                        write_report=lambda w: "")
  claims = ExperimentClaims(claims=(Claim("toy_declared", "s", "src", "q", "direction", "t", paper_sign=+1),),
                            claim_rows=rows)
  with registry.registered(list(registry.REGISTERED) + [(spec, claims)]):
    with pytest.raises(ValueError, match="toy_undeclared.*declared by no registered experiment"):
      job.build_rows([Source("toy", "/nowhere", {}, [])], include_not_run=False)


def test_overlapping_declarations_are_refused():
  claims = ExperimentClaims(claims=(Claim("a_*", "s", "src", "q", "context", "t"),
                                    Claim("a_b", "s", "src", "q", "context", "t")), claim_rows=lambda *a: [])
  with pytest.raises(ValueError, match="several declarations"):
    claims.declaration("a_b")


def test_spec_holds_no_claims_hook_and_bad_declarations_are_refused():
  fields = {f.name for f in dataclasses.fields(ExperimentSpec)}
  assert not fields & {"claims_config", "claim_rows", "not_run_rows", "joint_rows", "claim_prefixes"}
  with pytest.raises(ValueError, match="kind must be one of"):
    Claim("x", "s", "src", "q", "reproduced", "t")
  with pytest.raises(ValueError, match="needs paper_sign"):
    Claim("x", "s", "src", "q", "direction", "t")
  with pytest.raises(ValueError, match="truth must be"):
    Case("maybe", (1.0,))


def test_an_experiment_report_judges_its_rows_by_its_own_declarations():
  from experiments.diff_attention.claims import CLAIMS as DA
  premise = make_row("da_corollary1_premise", "c", "s", "p", interval=mean_interval(around(-0.47)), paper_sign=+1)
  (row,) = DA.judged([premise])
  assert (row["claim_kind"], row["verdict"]) == ("premise", "premise fails")
  with pytest.raises(ValueError, match="declared by none"):
    DA.judged([make_row("flip_ratio_mnist_pgd", "c", "s", "p")])
