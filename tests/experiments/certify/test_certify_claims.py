"""The certification claim rows (experiments.certify.claims): rigorous and Krylov certificates side by
side with Clopper–Pearson intervals, the α selection and the trade-off row."""

import numpy as np
import pytest
from certify_records import cert_record, selection_record
from claim_sources import claim_rows_of, main_row


def test_certified_rows_put_rigorous_and_krylov_side_by_side_with_clopper_pearson(tmp_path):
  records = [dict(dataset="cifar10", attention_bound=a, kind="certify", eps=e, layer=-1, n_test=500,
                  certified_accuracy=c, certified_rigorous=c * 0.5) for a, c in ((0.25, 0.29), (1.0, 0.2))
             for e in (0.02, 0.05)]
  # Without an α selected on a validation split no α is the headline (the best on the test images would be
  # selection on the test set).
  unselected = main_row(claim_rows_of(tmp_path, "none", records), "certified_0.02_rigorous")
  assert unselected["status"] == "not measured" and "validation" in unselected["reason"]
  selection = [dict(dataset="cifar10", attention_bound=0.25, kind="selection", eps=e, layer=-1, n_validation=150,
                    validation_fraction=0.1, candidates=[dict(attention_bound=0.25, validation_certified_rigorous=0.1,
                                                              validation_certified_krylov=0.2,
                                                              validation_clean_accuracy=0.3)]) for e in (0.02, 0.05)]
  rows = claim_rows_of(tmp_path, "cert", records + selection)
  krylov, rigorous = main_row(rows, "certified_0.02_krylov"), main_row(rows, "certified_0.02_rigorous")
  assert [r["claim_id"] for r in rows if not r["variant"]][:2] == ["certified_0.02_rigorous", "certified_0.02_krylov"]
  assert "α = 0.25" in krylov["setting"] and "α = 0.25" in rigorous["setting"]
  assert "selected on a validation split" in rigorous["setting"] and "not rigorous" in krylov["claim"]
  assert krylov["estimate"] == 0.29 and rigorous["estimate"] == pytest.approx(0.145, abs=0.002)
  assert krylov["method"] == "clopper_pearson" and krylov["n"] == 500
  # paper: 29.1 %, band ± 5 points = [24.1, 34.1] %: 0.29 [0.25, 0.33] lies inside, 0.145 [0.12, 0.18] outside
  assert krylov["magnitude"] == "matches" and rigorous["magnitude"] == "differs"
  # No direction is claimed ("above 0" could never fail): the direction cell is context, the magnitude heads.
  assert krylov["direction"] == "context" and rigorous["direction"] == "context"
  assert (krylov["claim_kind"], krylov["verdict"], rigorous["verdict"]) == ("magnitude", "matches", "differs")


def test_certify_claim_rows_main_is_the_validation_selected_rigorous_row():
  from experiments.certify import claims as certify_claims
  from experiments.certify.claims import certify_rows
  from experiments.core.rows import Source
  records = [cert_record(a, e, 0.33, 0.32, c, c + 0.02) for a, c in ((0.0625, 0.26), (1.0, 0.0)) for e in (0.02, 0.05)]
  rows = certify_rows(Source("certify", "p", {}, records))
  mains = {r["claim_id"]: r for r in rows if not r["variant"]}
  # Without a selection no α is the headline: the main rows say so, every α is a variant.
  assert mains["certified_0.02_rigorous"]["status"] == "not measured"
  assert "selection on the test set" in mains["certified_0.02_rigorous"]["reason"]
  selections = [selection_record(1.0, 0.02), selection_record(0.0625, 0.05)]
  rows = certify_rows(Source("certify", "p", {}, records + selections))
  ids = [r["claim_id"] for r in rows if not r["variant"]]
  assert ids[:4] == ["certified_0.02_rigorous", "certified_0.02_krylov", "certified_0.05_rigorous",
                     "certified_0.05_krylov"]
  mains = {r["claim_id"]: r for r in rows if not r["variant"]}
  assert mains["certified_0.02_rigorous"]["estimate"] == 0.0 and "α = 1 (α selected on a validation" in \
      mains["certified_0.02_rigorous"]["setting"]   # the validation choice, not the test-set best (0.0625)
  assert mains["certified_0.05_rigorous"]["estimate"] == pytest.approx(0.26)
  assert mains["certified_0.05_krylov"]["estimate"] == pytest.approx(0.28)
  assert certify_claims.KRYLOV_CERT in mains["certified_0.05_krylov"]["claim"]
  assert "Not a proof" in mains["certified_0.05_krylov"]["note"]

def test_alpha_tradeoff_row_paired_bootstrap_and_what_flips_it():
  from experiments.certify.claims import (
    alpha_tradeoff_rows,
    flip_moves,
    paired_binary_difference,
  )
  from experiments.core.rows import Source
  from experiments.core.verdicts import tango_score_interval
  # The strict α certifies 26 of 100 images, α = 1 none: the paper's side (strict certifies less) fails.
  records = [cert_record(0.0625, 0.02, 0.33, 0.32, 0.26, 0.28), cert_record(1.0, 0.02, 0.36, 0.30, 0.0, 0.0),
             cert_record(0.25, 0.02, 0.34, 0.31, 0.15, 0.16)]
  rows = alpha_tradeoff_rows(Source("certify", "p", {}, records), eps_values=(0.02,))
  main = [r for r in rows if not r["variant"]]
  assert len(main) == 1 and len(rows) == 2 and main[0]["claim_id"] == "certified_alpha_tradeoff"
  share = tango_score_interval(26, 0, 100)   # 26 discordant images, all certified by the strict α only
  assert (main[0]["estimate"], main[0]["low"], main[0]["high"]) == pytest.approx((0.26, share.low, share.high))
  assert main[0]["method"] == "tango_score" and main[0]["unit"] == "images" and main[0]["n"] == 100
  # Where the studentized bootstrap is not: 3 discordant images of 100, all one way (McNemar's statistic
  # 3/√3 < 1.96), contain 0; 2 of 3 discordant pairs one way, 1 the other: the estimate is (2 − 1)/n; no
  # discordant image still leaves an interval around 0 (not conditional on the discordant count).
  few = paired_binary_difference(np.r_[np.ones(3), np.zeros(97)], np.zeros(100))
  assert few.low < 0 < few.high and few.estimate == pytest.approx(0.03)
  mixed = paired_binary_difference(np.r_[1, 1, 0, np.zeros(7)], np.r_[0, 0, 1, np.zeros(7)])
  assert mixed.estimate == pytest.approx(0.1) and mixed.low < 0 < mixed.high
  same = paired_binary_difference(np.ones(5), np.ones(5))
  assert same.estimate == 0.0 and same.low < 0 < same.high
  assert main[0]["direction"] == "fails" and main[0]["magnitude"] is None
  assert "α = 0.0625 vs α = 1" in main[0]["setting"] and "What would flip it" in main[0]["note"]
  # What flips it: the fewest of the 26 strict-only images that would have to be loose-only instead; by hand,
  # the interval excludes 0 iff McNemar's statistic |26 − 2k|/√26 exceeds z = 1.96: contains from k = 9
  # (|26 − 18| = 8 < 9.99), below from k = 18 (|26 − 36| = 10 > 9.99).
  k_contains, k_below = 9, 18
  assert flip_moves(26, 0, 100, "contains") == k_contains and flip_moves(26, 0, 100, "below") == k_below
  assert 0 < k_contains < 13 < k_below < 26
  assert (f"26 images are certified by α = 0.0625 only and 0 by α = 1 only" in main[0]["note"]
          and f"turn inconclusive if {k_contains} of the images certified by α = 0.0625 only were certified by "
              "α = 1 only instead" in main[0]["note"] and f"hold (the paper's side: the looser α certifies more) if "
              f"{k_below} of" in main[0]["note"])
  assert flip_moves(0, 0, 100, "below") is None and flip_moves(3, 0, 100, "contains") == 0
  # The strict α certifying less than the looser one: holds.
  flipped = [cert_record(0.0625, 0.02, 0.20, 0.19, 0.05, 0.06), cert_record(1.0, 0.02, 0.36, 0.30, 0.30, 0.31)]
  row = alpha_tradeoff_rows(Source("certify", "p", {}, flipped), eps_values=(0.02,))[0]
  assert row["direction"] == "holds" and row["high"] < 0
  # Equal certificates on every image: inconclusive.
  same = [cert_record(0.0625, 0.02, 0.3, 0.3, 0.1, 0.1), cert_record(1.0, 0.02, 0.3, 0.3, 0.1, 0.1)]
  assert alpha_tradeoff_rows(Source("certify", "p", {}, same), eps_values=(0.02,))[0]["direction"] == "inconclusive"
  # No α ≤ 0.25, or a single α: not measured.
  loose = [cert_record(0.5, 0.02, 0.3, 0.3, 0.1, 0.1), cert_record(1.0, 0.02, 0.3, 0.3, 0.1, 0.1)]
  assert alpha_tradeoff_rows(Source("certify", "p", {}, loose), eps_values=(0.02,))[0]["status"] == "not measured"


def test_certified_flags_from_radii_count_an_image_certified_at_exactly_eps():
  """Catches ``>`` for ``>=`` in the fallback to the certified radii, or the two radii fields swapped: a radius of
  exactly ε certifies at ε, one an ulp below does not; the Krylov flags read ``radii``, the rigorous ones
  ``radii_rigorous``; a record's own per-image flags come first; a field without a fallback, or a missing α,
  gives None."""
  from experiments.certify.claims import certified_flags
  below = float(np.nextafter(0.02, 0.0))
  radius = dict(dataset="cifar10", attention_bound=1.0, kind="radius", eps=-1.0, layer=-1,
                radii_rigorous=[0.02, below, 0.05, 0.0], radii=[0.03, 0.01, 0.02, 0.02])
  records = [radius, dict(radius, attention_bound=0.25), cert_record(0.25, 0.02, 0.5, 0.5, 0.5, 0.5, n=4)]
  assert certified_flags(records, "cifar10", 1.0, 0.02).tolist() == [1.0, 0.0, 1.0, 0.0]
  assert certified_flags(records, "cifar10", 1.0, 0.02, "certified_krylov_images").tolist() == [1.0, 0.0, 1.0, 1.0]
  assert certified_flags(records, "cifar10", 0.25, 0.02).tolist() == [1.0, 1.0, 0.0, 0.0]   # the record's flags
  assert certified_flags(records, "cifar10", 1.0, 0.02, "correct_images") is None
  assert certified_flags(records, "cifar10", 0.5, 0.02) is None


def test_certified_rows_interval_is_the_exact_binomial_interval_of_the_rounded_count():
  """Catches a truncated count (int(0.29·100) = 28 in float64) or a level that does not reach the interval: the
  row's ends are scipy's exact (Clopper–Pearson) interval of 29 of 100 (rigorous) and 57 of 100 (Krylov)."""
  import scipy.stats

  from experiments.certify.claims import certify_rows
  from experiments.core.rows import Source
  records = [cert_record(0.25, e, 0.6, 0.6, 0.29, 0.57) for e in (0.02, 0.05)]
  assert 0.29 * 100 < 29 and 0.57 * 100 < 57   # what int() would cut
  rows = {r["claim_id"]: r for r in certify_rows(Source("certify", "p", {}, records)) if not r["variant"]}
  for claim_id, k in (("certified_0.02_rigorous", 29), ("certified_0.02_krylov", 57)):
    ci = scipy.stats.binomtest(k, 100).proportion_ci(confidence_level=0.95, method="exact")
    row = rows[claim_id]
    assert (row["estimate"], row["n"]) == (pytest.approx(k / 100), 100)
    assert (row["low"], row["high"]) == pytest.approx((ci.low, ci.high), rel=1e-9)


@pytest.mark.parametrize("level", [0.95, 0.9])
def test_paired_binary_difference_is_tangos_interval_of_the_discordant_counts_and_antisymmetric(level):
  """Catches swapped discordant counts, a level that does not reach the interval, or concordant images counted as
  discordant: 7 images certified by A only, 2 by B only, 6 by both and 15 by neither give (7 − 2)/30 and Tango's
  interval of (7, 2, 30) (tested on its own in tests/experiments/core/test_verdicts.py); swapping A and B
  negates the interval."""
  from experiments.certify.claims import paired_binary_difference
  from experiments.core.verdicts import tango_score_interval
  a = np.r_[np.ones(7), np.zeros(2), np.ones(6), np.zeros(15)]
  b = np.r_[np.zeros(7), np.ones(2), np.ones(6), np.zeros(15)]
  ci = tango_score_interval(7, 2, 30, level=level)
  iv = paired_binary_difference(a, b, level=level)
  assert (iv.estimate, iv.low, iv.high) == pytest.approx((5 / 30, ci.low, ci.high), rel=1e-9)
  assert iv.low != pytest.approx(tango_score_interval(7, 2, 30, level=0.5 + level / 2).low)
  assert (iv.level, iv.n, iv.unit) == (level, 30, "images")
  back = paired_binary_difference(b, a, level=level)
  assert (back.estimate, back.low, back.high) == pytest.approx((-iv.estimate, -iv.high, -iv.low), rel=1e-12)


def test_alpha_tradeoff_reads_a_strict_alpha_of_exactly_the_papers_bound():
  """Catches ``>=`` for ``>`` in the strict-α rule: α = 0.25 is the paper's bound itself (‖A_h‖₂ ≤ 0.25), so it is
  read as the strict α; just above it (0.2500001) no α qualifies and the row is not measured."""
  from experiments.certify.claims import STRICT_ALPHA, alpha_tradeoff_rows
  from experiments.core.rows import Source
  assert STRICT_ALPHA == 0.25
  for strict, status in ((0.25, "measured"), (0.2500001, "not measured")):
    records = [cert_record(strict, 0.02, 0.3, 0.3, 0.05, 0.06), cert_record(1.0, 0.02, 0.36, 0.3, 0.3, 0.31)]
    (row,) = alpha_tradeoff_rows(Source("certify", "p", {}, records), eps_values=(0.02,))
    assert row["status"] == status
  assert row["status"] == "not measured" and "0.2500001" in row["reason"]


def _crown_chunk(method, start, flags, seconds, compiled, eps=0.05):
  return dict(eps=eps, method=method, start=start, stop=start + len(flags), dataset="cifar10", attention_bound=0.25,
              certified_images=flags, pgd_violations=0, seconds=seconds, compiled_first=compiled, machine="m")


def _crown_workdir(tmp_path, chunks):
  import json
  (tmp_path / "crown").mkdir(parents=True)
  (tmp_path / "crown" / "results.jsonl").write_text("".join(json.dumps(c) + "\n" for c in chunks))
  from experiments.core.rows import Source
  return Source("certify", str(tmp_path), {}, [])


def test_crown_rows_pair_the_methods_image_by_image_and_time_only_compiled_batches(tmp_path):
  """Catches a speed ratio inverted (CROWN + LoFAST over CROWN), a compiling batch timed, a moved minimum of two
  timed batches, or discordant counts swapped: three chunks of three images; the first chunk of each method
  compiles, so the ratios CROWN / CROWN + LoFAST are 8/2 and 6/3, whose row is Student's t of their logs
  (unit 'batches'); CROWN + LoFAST certifies images 1, 3, 6 alone and CROWN image 8 alone: (3 − 1)/9 with the
  score interval of 3 and 1 discordant images of 9."""
  import scipy.stats

  from experiments.certify import crown_claims
  from experiments.core.verdicts import tango_score_interval
  flags = {"crown_lofast": [1, 1, 1, 1, 1, 0, 1, 0, 0], "crown": [1, 0, 1, 0, 1, 0, 0, 0, 1], "lofast": [0] * 9}
  seconds = {"crown_lofast": (50.0, 2.0, 3.0), "crown": (70.0, 8.0, 6.0), "lofast": (1.0, 1.0, 1.0)}
  chunks = [_crown_chunk(m, 3 * i, flags[m][3 * i:3 * i + 3], seconds[m][i], i == 0) for m in flags for i in range(3)]
  rows = {r["claim_id"]: r for r in crown_claims.crown_rows(_crown_workdir(tmp_path / "three", chunks))}
  speed = rows["crown_lofast_speed"]
  logs = np.log([4.0, 2.0])
  half = scipy.stats.t.ppf(0.975, 1) * logs.std(ddof=1) / np.sqrt(2)
  assert (speed["estimate"], speed["low"], speed["high"]) == pytest.approx(
      np.exp([logs.mean(), logs.mean() - half, logs.mean() + half]), rel=1e-12)
  assert (speed["n"], speed["unit"], speed["status"]) == (2, "batches", "measured")
  diff = rows["crown_lofast_vs_crown_0.05"]
  ci = tango_score_interval(3, 1, 9)
  assert (diff["estimate"], diff["low"], diff["high"]) == pytest.approx((2 / 9, ci.low, ci.high), rel=1e-9)
  assert "3 images certified by the first method only and 1 by the second only" in diff["note"]
  # One timed batch is not enough for the speed row.
  two = [c for c in chunks if c["start"] < 6]
  one = {r["claim_id"]: r for r in crown_claims.crown_rows(_crown_workdir(tmp_path / "two", two))}
  assert one["crown_lofast_speed"]["status"] == "not measured"
