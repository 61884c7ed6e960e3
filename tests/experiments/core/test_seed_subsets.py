"""experiments.core.seed_subsets: each seed its own training subset; the expected overlap of independent draws
against a Monte-Carlo count and a hand-worked case."""
import numpy as np
import pytest

from experiments.core import config as config_lib
from experiments.core import seed_subsets


def test_expected_overlap_by_hand():
  # Two classes of 4 and 2 examples, n = 2: one of each class is drawn (t_c = 1), so the overlap is
  # (1²/4 + 1²/2)/2 = 0.375.
  assert seed_subsets.expected_overlap([0, 0, 0, 0, 1, 1], 2) == pytest.approx(0.375, rel=1e-15)
  # n = 5 exceeds the small class's share (2.5 > 2): it is taken whole and the other gives 3: t = (3, 2) of
  # (4, 2), so (9/4 + 4/2)/5 = 0.85; all six examples overlap surely.
  assert seed_subsets.expected_overlap([0, 0, 0, 0, 1, 1], 5) == pytest.approx((9 / 4 + 4 / 2) / 5)
  assert seed_subsets.expected_overlap([0, 0, 0, 0, 1, 1], 6) == pytest.approx(1.0)


def test_expected_overlap_matches_independent_class_balanced_draws():
  rng = np.random.default_rng(0)
  y = np.repeat(np.arange(10), 200)   # 2,000 balanced labels, as the embedded MNIST pool
  n, shares = 512, []
  for _ in range(400):
    picks = [np.concatenate([rng.choice(np.flatnonzero(y == c), n // 10 + (c < n % 10), replace=False)
                             for c in range(10)]) for _ in range(2)]
    shares.append(np.intersect1d(*picks).size / n)
  assert np.mean(shares) == pytest.approx(seed_subsets.expected_overlap(y, n), abs=3 * np.std(shares) / 20)
  assert seed_subsets.expected_overlap(y, n) == pytest.approx(n / 2000, rel=0.01)   # ≈ n/N when balanced


@pytest.mark.parametrize("n,labels", [(0, [0, 1]), (3, []), (3, [0, 1])])
def test_expected_overlap_refuses_bad_input(n, labels):
  with pytest.raises(ValueError, match="n must be"):
    seed_subsets.expected_overlap(labels, n)


def test_draw_kind():
  embedded = config_lib.DataConfig(n_train=64, source="embedded")
  assert seed_subsets.draw_kind(embedded) == "independent"
  assert seed_subsets.draw_kind(config_lib.DataConfig(n_train=64, source="dir", dir="/x")) == "disjoint"
  assert seed_subsets.draw_kind(config_lib.DataConfig(n_train=None, source="dir", dir="/x")) == "independent"


def test_independent_draws_differ_by_seed_and_report_their_overlap():
  data = config_lib.DataConfig(n_train=200, n_test=20, source="embedded")
  (a, _, fa), (b, _, fb), (a2, _, _) = (seed_subsets.seed_splits(data, "mnist", s) for s in (0, 1, 0))
  np.testing.assert_array_equal(a.x, a2.x)                       # the same seed draws the same subset
  assert not np.array_equal(a.info.indices, b.info.indices)
  shared = np.intersect1d(a.info.indices, b.info.indices).size / 200
  assert fa["data_draw"] == "independent" and fa["data_seed"] == 0 and fb["data_seed"] == 1
  assert fa["train_pool"] == 2000 and fa["expected_seed_overlap"] == pytest.approx(0.1, rel=0.02)
  assert abs(shared - fa["expected_seed_overlap"]) < 0.1          # one draw near its expectation
  assert np.bincount(a.y).tolist() == [20] * 10                   # class-balanced


def test_overlap_text():
  assert seed_subsets.overlap_text([dict(data_draw="disjoint")] * 2).startswith("disjoint per-seed")
  text = seed_subsets.overlap_text([dict(data_draw="independent", expected_seed_overlap=0.256, train_pool=2000)])
  assert text == ("independent per-seed training subsets of the 2,000-image embedded pool (two seeds share "
                  "25.6 % of their images in expectation)")
  assert seed_subsets.overlap_text([{}]) == ""
  assert seed_subsets.overlap_text([dict(data_draw="disjoint"), dict(data_draw="independent",
                                                                     expected_seed_overlap=0.1)]).startswith("mixed")


def test_expected_overlap_at_its_smallest_draw_and_with_classes_filled_in_two_rounds():
  """Catches a moved lower bound (``n < 1`` as ``<= 1``) and a water-filling that stops after one round: a draw of
  one of four balanced labels takes half an image of each class in expectation, (0.5²/2 + 0.5²/2)/1 = 1/4 = n/N;
  classes of 1, 2 and 10 labels with n = 9 take 1, 2 and 6 (the two small classes whole, the rest from the
  large one), (1 + 2 + 36/10)/9."""
  assert seed_subsets.expected_overlap([0, 0, 1, 1], 1) == pytest.approx(0.25, rel=1e-12)
  y = [0] + [1] * 2 + [2] * 10
  assert seed_subsets.expected_overlap(y, 9) == pytest.approx((1 + 2 + 36 / 10) / 9, rel=1e-9)
  assert seed_subsets.expected_overlap(y, 3) == pytest.approx((1 / 1 + 1 / 2 + 1 / 10) / 3, rel=1e-9)


def test_overlap_text_averages_every_record_and_names_every_pool():
  """Catches an overlap read from one record instead of the mean over records, or a pool list cut to one: two
  records of 20 % and 30 % state 25.0 %, from the 1,500- and 2,000-image pools."""
  text = seed_subsets.overlap_text([dict(data_draw="independent", expected_seed_overlap=0.2, train_pool=2000),
                                    dict(data_draw="independent", expected_seed_overlap=0.3, train_pool=1500)])
  assert text == ("independent per-seed training subsets of the 1,500/2,000-image embedded pool (two seeds share "
                  "25.0 % of their images in expectation)")
