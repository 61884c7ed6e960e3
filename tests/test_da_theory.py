"""Theorem 2's ratio, Theorem 3's margin, the ROC AUC and Corollary 1's D* on constructed cases
(``attention.da_theory``; arXiv 2510.00517)."""
import itertools
import math

import numpy as np
import pytest

from attention import da_theory


def _explicit_case(seed, lam):
  rng = np.random.default_rng(seed)
  j1, j2, j_std = (rng.normal(size=(5, 7)) for _ in range(3))
  j2 = j2 + 0.8 * j1 * np.sign(lam)  # correlated maps, so cos θ is far from 0
  cos = np.vdot(j1, j2) / (np.linalg.norm(j1) * np.linalg.norm(j2))  # float64, as the definition
  rho = np.linalg.norm(j2) / np.linalg.norm(j1)
  gamma = np.linalg.norm(j1) / np.linalg.norm(j_std)
  return j1, j2, j_std, cos, rho, gamma


@pytest.mark.parametrize("lam", [-0.5, 0.3, 0.8, 1.5])
def test_theorem2_ratio_equals_the_jacobian_norm_ratio(lam):
  """γ√(1 + λ²ρ² − 2λρ cos θ) = ‖J₁ − λJ₂‖/‖J_std‖ for explicit Jacobians (Lemma 1 divided by ‖J_std‖)."""
  j1, j2, j_std, cos, rho, gamma = _explicit_case(0, lam)
  direct = np.linalg.norm(j1 - lam * j2) / np.linalg.norm(j_std)
  np.testing.assert_allclose(da_theory.theorem2_ratio(cos, rho, gamma, lam), direct, rtol=1e-12)


def test_theorem2_ratio_extremes_and_errors():
  # cos θ = −1: (1 + λρ)γ; cos θ = +1: |1 − λρ|γ.
  np.testing.assert_allclose(da_theory.theorem2_ratio([-1.0, 1.0], 0.5, 2.0, 0.8), [2.8, 1.2])
  with pytest.raises(ValueError, match="cos_theta"):
    da_theory.theorem2_ratio(1.5, 1.0, 1.0, 0.5)
  with pytest.raises(ValueError, match="rho"):
    da_theory.theorem2_ratio(0.0, -1.0, 1.0, 0.5)
  with pytest.raises(ValueError, match="finite"):
    da_theory.theorem2_ratio(np.nan, 1.0, 1.0, 0.5)
  with pytest.raises(ValueError, match="overflows"):
    da_theory.theorem2_ratio(1.0, 1e200, 1.0, 1e200)
  with pytest.raises(ValueError, match="broadcast"):
    da_theory.theorem2_ratio(np.ones(2), np.ones(3), 1.0, 1.0)
  # Large but representable: computed without squaring, γ|1 − λρ| at cos θ = 1.
  assert da_theory.theorem2_ratio(1.0, 1e160, 1.0, 1e100) == pytest.approx(1e260)


def test_layer_ratio_is_the_ratio_of_stacked_jacobian_norms():
  rng = np.random.default_rng(1)
  da, std = rng.normal(size=(3, 4, 6)), rng.normal(size=(3, 4, 6))  # [S, H, Jacobian entries]
  norm = lambda a: np.linalg.norm(a, axis=-1)  # noqa: E731
  expected = np.linalg.norm(da.reshape(3, -1), axis=1) / np.linalg.norm(std.reshape(3, -1), axis=1)
  np.testing.assert_allclose(da_theory.layer_sensitivity_ratio(norm(da), norm(std)), expected, rtol=1e-12)
  with pytest.raises(ValueError, match="all 0"):
    da_theory.layer_sensitivity_ratio(np.ones((1, 2)), np.zeros((1, 2)))
  # Scaled before squaring: no overflow at 1e200, no underflow to "all 0" at 1e-170.
  np.testing.assert_allclose(da_theory.layer_sensitivity_ratio([[1e200, 1e200]], [[1e200, 1e200]]), [1.0])
  np.testing.assert_allclose(da_theory.layer_sensitivity_ratio([[2e-170]], [[1e-170]]), [2.0])


@pytest.mark.parametrize("lam", [-0.5, 0.8, 1.5])
def test_theorem3_margin_sign_is_the_measured_comparison(lam):
  """margin = (‖J_DA‖² − ‖J_std‖²)/‖J₁‖², so its sign says which head is more sensitive, both signs of λρ."""
  for seed in range(20):
    j1, j2, j_std, cos, rho, gamma = _explicit_case(seed, lam)
    margin = da_theory.theorem3_margin(cos, rho, gamma, lam)
    exact = (np.linalg.norm(j1 - lam * j2) ** 2 - np.linalg.norm(j_std) ** 2) / np.linalg.norm(j1) ** 2
    np.testing.assert_allclose(margin, exact, rtol=1e-10, atol=1e-12)


def test_roc_auc_against_the_pairwise_definition():
  rng = np.random.default_rng(2)
  scores = rng.integers(0, 5, size=40).astype(float)  # many ties
  labels = rng.random(40) < 0.4
  pairs = [(p, q) for p, q in itertools.product(scores[labels], scores[~labels])]
  brute = np.mean([1.0 if p > q else 0.5 if p == q else 0.0 for p, q in pairs])
  assert da_theory.roc_auc(scores, labels) == pytest.approx(brute, abs=1e-12)
  assert da_theory.roc_auc([1.0, 2.0, 3.0, 4.0], [0, 0, 1, 1]) == 1.0
  assert da_theory.roc_auc([1.0, 2.0, 3.0, 4.0], [1, 1, 0, 0]) == 0.0
  assert da_theory.roc_auc(np.zeros(6), [0, 1, 0, 1, 0, 1]) == 0.5  # a constant guess
  with pytest.raises(ValueError, match="both classes"):
    da_theory.roc_auc([1.0, 2.0], [1, 1])
  with pytest.raises(ValueError, match="each 0 or 1"):
    da_theory.roc_auc([1.0, 2.0, 3.0], [0.3, 0.7, 0.0])


def test_noise_cancellation_fit_and_crossover_depth():
  """s_l = 2·0.5^(l−1) is fitted exactly; DiffViT/ViT sensitivity crosses 1 at D* = 2."""
  s = 2.0 * 0.5 ** np.arange(8)
  fit = da_theory.noise_cancellation_fit(s)
  assert fit.r1 == pytest.approx(2.0) and fit.alpha_bar == pytest.approx(0.5) and fit.layers == 8
  assert da_theory.crossover_depth_estimate(fit.r1, fit.alpha_bar) == pytest.approx(2.0)
  # r₁ = 3, ᾱ = 0.8: D* = 1 + ln 3/ln 1.25, where r₁ᾱ^(D*−1) = 1.
  d = da_theory.crossover_depth_estimate(3.0, 0.8)
  assert 3.0 * 0.8 ** (d - 1) == pytest.approx(1.0)
  assert da_theory.crossover_depth_estimate(0.9, 0.5) == 1.0
  assert math.isinf(da_theory.crossover_depth_estimate(1.5, 1.1))
  with pytest.raises(ValueError, match="at least 2"):
    da_theory.noise_cancellation_fit([1.2])
  with pytest.raises(ValueError, match="> 0"):
    da_theory.noise_cancellation_fit([1.2, 0.0])
