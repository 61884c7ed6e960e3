"""Claim declarations: each paper statement the claims table tests, declared once as data beside the
experiment that measures it (``experiments.<name>.claims.CLAIMS``), with the kind of test it is and the
synthetic cases that show its row can fail.

A ``Claim`` names the paper's sentence and its source (arXiv number, section, table), the quantity measured,
and its *kind*, which decides the verdict that heads the row (``heading``):

  * ``direction``: the sign of an effect against a no-effect value — *holds* / *fails* / *inconclusive*;
  * ``magnitude``: the paper's number against ours, with the band stated before the numbers (the paper's
    range widened ×1.5, or ± 5 points for a proportion: ``verdicts.magnitude_band``) — *matches* /
    *differs* / *undetermined*;
  * ``equality``: a value the paper predicts, with a tolerance stated before the numbers (``tolerance``, or
    the magnitude rule's band when None) — *matches* / *differs* / *undetermined*;
  * ``premise``: a precondition of a theorem — *premise holds* / *premise fails* / *inconclusive*;
  * ``identity``: a numerical check of algebra, not a reproduced claim — *verified* / *violated* /
    *undetermined*;
  * ``context``: a figure with no claim — *context*.

Every kind but ``context`` reads *inconclusive* from fewer than ``verdicts.MIN_SEEDS`` seeds (the project's
seed rule), and every kind reads *unstable* where the stability pass moved the row's verdict.

Each claim carries its ``cases``: per-unit values where the paper's statement is false, true, and at the
boundary, with the verdict its row must then read. ``synthetic_row`` builds that row through the same
``experiments.core.rows.make_row`` and ``judge`` that the claims job uses, and
``tests/experiments/claims/test_declared_claims.py`` runs every registered claim's cases, so a claim whose
row cannot fail is caught (it must be declared ``identity`` or ``context``). docs/claims.md#claim-kinds.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import math
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from experiments.core import verdicts

KINDS = ("direction", "magnitude", "equality", "premise", "identity", "context")
# The verdict words each kind can head a row with (besides 'inconclusive', 'unstable' and a row's status).
VERDICT_WORDS = {
    "direction": ("holds", "fails", "inconclusive", "premise fails"),  # the last where a premise gates the test
    "magnitude": ("matches", "differs", "undetermined"),
    "equality": ("matches", "differs", "undetermined"),
    "premise": ("premise holds", "premise fails", "inconclusive"),
    "identity": ("verified", "violated", "undetermined"),
    "context": ("context",),
}
# The words a row whose statement is false / true / at the boundary must read, by kind (the cases' contract).
EXPECTED = {
    "direction": {"false": "fails", "true": "holds", "boundary": "inconclusive"},
    "magnitude": {"false": "differs", "true": "matches", "boundary": "undetermined"},
    "equality": {"false": "differs", "true": "matches", "boundary": "undetermined"},
    "premise": {"false": "premise fails", "true": "premise holds", "boundary": "inconclusive"},
    "identity": {"false": "violated", "true": "verified", "boundary": "undetermined"},
}
_IDENTITY_WORDS = {"matches": "verified", "differs": "violated", "undetermined": "undetermined"}
_PREMISE_WORDS = {"holds": "premise holds", "fails": "premise fails", "inconclusive": "inconclusive"}
INTERVALS = ("paired", "mean", "ratio", "proportion")


@dataclasses.dataclass(frozen=True)
class Case:
  """One synthetic case of a claim: per-unit values and what the paper's statement is on them.

  Attributes:
    truth: ``'false'``, ``'true'`` or ``'boundary'`` (the statement is false, true, or the data cannot tell).
    values: per-unit values of the claim's quantity (per-seed differences, per-seed statistics, per-seed
      ratios, or 0/1 per image for a proportion), fed to the claim's ``interval`` method.
    paper_range: the paper's (lo, hi) for this case, where the claim's own depends on the data (e.g. a
      prediction from κ(G)); None keeps the claim's.
    premise: per-seed values of the premise's margin, for a claim tested only where a theorem's premise holds
      (read by the claim's ``row_of``); () where it does not apply.
    expect: the verdict the row must read where it is not ``EXPECTED[kind][truth]`` (e.g. *premise fails*);
      "" otherwise.
  """
  truth: str
  values: tuple
  paper_range: Optional[tuple] = None
  premise: tuple = ()
  expect: str = ""

  def __post_init__(self):
    if self.truth not in ("false", "true", "boundary"):
      raise ValueError(f"Case.truth must be 'false', 'true' or 'boundary', got {self.truth!r}")


@dataclasses.dataclass(frozen=True)
class Claim:
  """A paper's statement as the claims table tests it.

  Attributes:
    id: the ``claim_id`` of its rows, or an ``fnmatch`` pattern covering several (e.g. 'certified_*_rigorous').
    statement: the paper's own sentence (or its closest paraphrase), quoted before any number of ours.
    source: where the paper says it: arXiv number, section, equation or table.
    quantity: what we measure, in words.
    kind: one of ``KINDS``; decides the verdict that heads the row (``heading``).
    test: the test and its band or tolerance, stated before the numbers (one sentence).
    interval: how the cases' values become an interval: 'paired' (sign-flip interval of per-seed
      differences), 'mean' (Student's t over seeds), 'ratio' (Student's t on the log scale), 'proportion'
      (Clopper–Pearson over images); the rows use the same methods (``experiments.core.rows``).
    paper_sign: +1 / −1, the direction the paper claims relative to ``null`` (None: no direction claimed).
    null: the no-effect value (0 for a difference, 1 for a ratio; a premise's threshold).
    paper_range: the paper's (lo, hi) on the row's scale, where it is fixed (rows may give their own).
    tolerance: for ``equality`` / ``identity``: the half-width around the predicted value inside which the
      measured interval must lie; None takes the magnitude rule's band (``verdicts.magnitude_band``).
    scale: the rows' scale ('difference', 'ratio', 'proportion', ...).
    cases: the synthetic cases (``Case``): at least one each of 'false', 'true' and 'boundary' unless the
      kind is ``context``.
    row_of: for a claim whose rows are judged by a rule of their own rather than ``make_row``'s (e.g.
      Corollary 1's D* against a depth window), ``case -> row`` through that same rule; None otherwise.
  """
  id: str
  statement: str
  source: str
  quantity: str
  kind: str
  test: str
  interval: str = "mean"
  paper_sign: Optional[int] = None
  null: float = 0.0
  paper_range: Optional[tuple] = None
  tolerance: Optional[float] = None
  scale: str = "difference"
  cases: tuple = ()
  row_of: Optional[Callable[[Case], dict]] = None

  def __post_init__(self):
    if self.kind not in KINDS:
      raise ValueError(f"Claim {self.id}: kind must be one of {KINDS}, got {self.kind!r}")
    if self.interval not in INTERVALS:
      raise ValueError(f"Claim {self.id}: interval must be one of {INTERVALS}, got {self.interval!r}")
    if self.kind in ("direction", "premise") and self.paper_sign not in (1, -1):
      raise ValueError(f"Claim {self.id}: a {self.kind} claim needs paper_sign +1 or -1")
    if self.tolerance is not None and not (math.isfinite(self.tolerance) and self.tolerance >= 0):
      raise ValueError(f"Claim {self.id}: tolerance must be finite and ≥ 0, got {self.tolerance!r}")

  def covers(self, claim_id: str) -> bool:
    """Whether rows with ``claim_id`` test this claim (``id`` as an ``fnmatch`` pattern)."""
    return fnmatch.fnmatchcase(claim_id, self.id)


@dataclasses.dataclass(frozen=True)
class ExperimentClaims:
  """What the claims job reads of one experiment: its declared claims and the hooks that build their rows.

  Attributes:
    claims: the ``Claim`` declarations; every row the builders write must be covered by exactly one.
    claim_rows: ``(sources, root, include_not_run) -> rows`` from every ``Source`` of this experiment (the
      quick setting first).
    not_run_rows: ``(root, why) -> rows`` of its claims when it has no workdir (status 'not run', with the
      command that fills them).
    claims_config: ``() -> config`` the claims job runs when no quick-setting workdir of this experiment is
      found (the stability pass reruns it); None for experiments the claims job never runs by itself.
    joint_rows: ``(sources_by_experiment) -> rows`` of claims that also read other experiments' sources,
      appended after every experiment's own rows.
    extra_runs: ((sub-workdir, () -> config), ...) the claims job also runs when no source holds them (a
      protocol setting a claim needs beside the quick config, e.g. adversarial training).
  """
  claims: tuple
  claim_rows: Callable[[Sequence, str, bool], list]
  not_run_rows: Optional[Callable[[str, str], list]] = None
  claims_config: Optional[Callable[[], Any]] = None
  joint_rows: Optional[Callable[[Mapping[str, Sequence]], list]] = None
  extra_runs: tuple = ()

  def declaration(self, claim_id: str) -> Optional[Claim]:
    """The claim covering ``claim_id``, or None.

    Raises:
      ValueError: more than one declared claim covers it.
    """
    found = [c for c in self.claims if c.covers(claim_id)]
    if len(found) > 1:
      raise ValueError(f"claim_id {claim_id!r} is covered by several declarations: {[c.id for c in found]}")
    return found[0] if found else None

  def judged(self, rows) -> list[dict]:
    """``rows`` each with its declared kind and heading verdict (``judge``), for a report that renders this
    experiment's rows by itself.

    Raises:
      ValueError: a row whose claim_id none of these claims covers.
    """
    out = []
    for row in rows:
      claim = self.declaration(row["claim_id"])
      if claim is None:
        raise ValueError(f"claim_id {row['claim_id']!r} is declared by none of this experiment's claims")
      out.append(judge(row, claim))
    return out


def _band(claim: Claim, paper_range, scale: str) -> tuple[float, float]:
  lo, hi = (float(v) for v in paper_range)
  if claim.kind in ("equality", "identity") and claim.tolerance is not None:
    return lo - claim.tolerance, hi + claim.tolerance
  return verdicts.magnitude_band((lo, hi), scale)


def judge(row: dict, claim: Claim) -> dict:
  """``row`` with the claim's kind (field ``claim_kind``; a claims.jsonl record's own ``kind`` is 'claim') and the
  verdict that heads it (``heading``).

  For ``magnitude``, ``equality`` and ``identity`` the row's magnitude is read against the claim's band
  (its tolerance where declared, else the magnitude rule's), from the row's ``paper_range`` (or the claim's);
  a magnitude claim with no paper direction (``paper_sign`` None) reads its direction cell as *context*.
  The row's statement, source and test come from the declaration.

  A magnitude-type row with no paper range (a data set the paper reports nothing on) reads *no paper value*.
  """
  row = dict(row, claim_kind=claim.kind, family=claim.id, statement=claim.statement, statement_source=claim.source,
             test=claim.test)
  if row.get("status") == "measured" and claim.kind in ("magnitude", "equality", "identity") \
      and row.get("low") is not None:
    paper_range = row.get("paper_range") or claim.paper_range
    if paper_range is None:  # e.g. a data set the paper reports nothing on
      row.update(magnitude=None, direction="no paper value" if claim.paper_sign is None else row["direction"])
      row["verdict"] = "no paper value"
      return row
    band = _band(claim, paper_range, row.get("scale", claim.scale))
    interval = verdicts.Interval(row["estimate"], row["low"], row["high"], row.get("level", 0.95), row["n"],
                                 row["unit"], row.get("method") or "")
    row.update(paper_range=[float(v) for v in paper_range], band=[float(v) for v in band],
               magnitude=verdicts.band_magnitude(interval, *band))
    if claim.paper_sign is None and row.get("direction") in ("measured", "holds", "fails", "inconclusive"):
      row.update(direction="context", reason=f"no direction is claimed; the {claim.kind} verdict heads the row")
  row["verdict"] = heading(row)
  return row


def heading(row: dict) -> str:
  """The verdict that heads a row, by its kind (``VERDICT_WORDS``): the direction for ``direction`` rows, the
  magnitude against the declared band for ``magnitude`` / ``equality``, *verified* / *violated* for an
  ``identity``, *premise holds* / *premise fails* for a ``premise``, *context* for ``context``; *unstable*
  where the stability pass moved the verdict; *inconclusive* (by design) from fewer than
  ``verdicts.MIN_SEEDS`` seeds; the status for a row not measured or not run. A row without a kind (an older
  claims.jsonl) is read as a direction row."""
  if row.get("status", "measured") != "measured":
    return row["status"]
  kind = row.get("claim_kind") or "direction"
  direction = row.get("direction")
  if kind == "context":
    return "context"
  if direction == "unstable":
    return "unstable"
  if row.get("unit") == "seeds" and (row.get("n") or 0) < verdicts.MIN_SEEDS:
    return "inconclusive"
  if kind == "direction":
    return direction
  if kind == "premise":
    return _PREMISE_WORDS.get(direction, direction)
  magnitude = row.get("magnitude") or "undetermined"
  return _IDENTITY_WORDS[magnitude] if kind == "identity" else magnitude


def interval_of(claim: Claim, values) -> verdicts.Interval:
  """The interval of a case's per-unit ``values`` by the claim's declared method (``Claim.interval``)."""
  from experiments.core import rows
  v = np.asarray(values, np.float64)
  if claim.interval == "paired":
    return rows.paired_interval(v, np.zeros_like(v))
  if claim.interval == "mean":
    return rows.mean_interval(v)
  if claim.interval == "ratio":
    return rows.ratio_interval(v)
  return verdicts.clopper_pearson(int(v.sum()), int(v.size))


def synthetic_row(claim: Claim, case: Case) -> dict:
  """The row a case's values give, built by ``experiments.core.rows.make_row`` and ``judge`` as the claims
  job builds every row."""
  from experiments.core import rows
  if claim.row_of is not None:
    return judge(claim.row_of(case), claim)
  paper_range = case.paper_range or claim.paper_range
  row = rows.make_row(claim.id, claim.statement, claim.source, "synthetic", interval=interval_of(claim, case.values),
                      paper_sign=claim.paper_sign, null=claim.null, paper_range=paper_range, scale=claim.scale,
                      setting=f"synthetic case ({case.truth})")
  return judge(row, claim)


def expected_verdict(claim: Claim, case: Case) -> str:
  """The verdict a case's row must read: ``case.expect`` where given, else ``EXPECTED[claim.kind][case.truth]``."""
  return case.expect or EXPECTED[claim.kind][case.truth]


def missing_cases(claim: Claim) -> list[str]:
  """The case truths ('false', 'true', 'boundary') a claim lacks; a ``context`` claim needs none."""
  if claim.kind == "context":
    return []
  have = {c.truth for c in claim.cases}
  return [t for t in ("false", "true", "boundary") if t not in have]


# Per-unit values for the cases: ten seeds (the seed rule's minimum) spread symmetrically around a centre.
_PATTERN = (-1.5, -1.0, -0.6, -0.3, -0.1, 0.1, 0.3, 0.6, 1.0, 1.5)


def around(center: float, spread: float = 0.05) -> tuple:
  """Ten per-seed values center + spread·p for a fixed symmetric pattern p (mean ``center``, sd ≈ 0.9·spread)."""
  return tuple(center + spread * p for p in _PATTERN)


def ratios_around(center: float, spread: float = 0.05) -> tuple:
  """Ten positive per-seed ratios whose logs are ``around(log center, spread)`` (geometric mean ``center``)."""
  return tuple(math.exp(v) for v in around(math.log(center), spread))


def images(k: int, n: int) -> tuple:
  """0/1 outcomes of n images, k of them 1 (e.g. certified)."""
  return (1.0,) * k + (0.0,) * (n - k)


def direction_cases(null: float = 0.0, sign: int = 1, effect: float = 0.2, spread: float = 0.05) -> tuple:
  """The three cases of a direction claim on per-seed values: the effect on the other side of ``null``
  (false), on the paper's side (true), and centred on ``null`` with a wide spread (boundary)."""
  return (Case("false", around(null - sign * effect, spread)), Case("true", around(null + sign * effect, spread)),
          Case("boundary", around(null, 4 * effect)))


def ratio_cases(sign: int = 1, factor: float = 2.0) -> tuple:
  """``direction_cases`` for a ratio against 1 (per-seed ratios on the log scale)."""
  return (Case("false", ratios_around(factor ** -sign)), Case("true", ratios_around(factor ** sign)),
          Case("boundary", ratios_around(1.0, 2 * math.log(factor))))
