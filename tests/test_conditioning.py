"""Condition numbers in float64: known matrices, powers through eigenvalues, rank-deficient Gram."""
import numpy as np
import pytest
import scipy.linalg

from ntk import condition_number, gram_spectrum


def test_known_condition_numbers():
  assert condition_number(np.diag([1.0, 2.0, 8.0])) == 8.0
  assert condition_number(np.diag([-4.0, 1.0, 2.0])) == 4.0  # symmetric indefinite: |λ|
  theta = 0.3
  rot = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
  assert condition_number(rot) == pytest.approx(1.0, abs=1e-14)
  # 2x2 [[1, 1], [0, 1]]: σ = (√5 ± 1)/2, κ = ((√5 + 1)/2)² = golden ratio squared.
  assert condition_number(np.array([[1.0, 1.0], [0.0, 1.0]])) == pytest.approx(
      ((1 + 5 ** 0.5) / 2) ** 2, rel=1e-13)
  # Hilbert matrix of order 5: κ₂ = 476607.25… (Todd 1954; Higham, Accuracy and Stability, Table 28.1).
  assert condition_number(scipy.linalg.hilbert(5)) == pytest.approx(4.766072502e5, rel=1e-8)


def test_gram_power_through_eigenvalues():
  g = np.diag([10.0, 1.0, 0.1])
  s = gram_spectrum(g, power=3)
  assert s.log10_condition_number == pytest.approx(6.0, abs=1e-12)
  assert s.condition_number == pytest.approx(1e6, rel=1e-12)
  assert s.full_rank and s.rank == 3 and s.lambda_max == pytest.approx(1e3)


def test_power_beyond_float64_range_stays_finite_in_log10():
  g = np.diag([1.0, 1e-120])
  s = gram_spectrum(g, power=3, rtol=1e-200)
  assert s.log10_condition_number == pytest.approx(360.0)
  assert np.isfinite(s.log10_condition_number) and s.condition_number == float("inf")


def test_rank_deficient_gram_reports_pseudo_condition_and_rank():
  rng = np.random.default_rng(0)
  x = rng.uniform(size=(12, 5))          # n > d: rank 5
  x = np.vstack([x, x[:2]])               # duplicates too
  g = x @ x.T
  s = gram_spectrum(g)
  assert s.rank == 5 and not s.full_rank and s.n == 14
  assert np.isfinite(s.condition_number) and s.threshold > 0
  lam = np.sort(np.linalg.eigvalsh(g))[::-1]
  assert s.condition_number == pytest.approx(lam[0] / lam[4], rel=1e-8)
  with pytest.raises(ValueError, match="singular"):
    condition_number(g)


@pytest.mark.parametrize("bad,match", [
    (np.ones((2, 3)), "square"),
    (np.array([[1.0, np.nan], [np.nan, 1.0]]), "NaN"),
])
def test_bad_input(bad, match):
  with pytest.raises(ValueError, match=match):
    gram_spectrum(bad)
  with pytest.raises(ValueError, match=match):
    condition_number(bad)


def test_bad_arguments():
  with pytest.raises(ValueError, match="symmetric"):
    gram_spectrum(np.array([[1.0, 2.0], [0.0, 1.0]]))
  with pytest.raises(ValueError, match="power"):
    gram_spectrum(np.eye(2), power=0)
  with pytest.raises(ValueError, match="rtol"):
    gram_spectrum(np.eye(2), rtol=-1.0)
