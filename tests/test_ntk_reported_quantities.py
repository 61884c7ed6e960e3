"""The numbers the cubing table (experiments/cubing) and the width-sweep table (experiments/width_sweep) report,
each pinned against an independent computation.

A mutation audit of ``ntk/`` found that small changes to these quantities survived the (non-long) suite: the
existing tests check the cubing identity only through fields computed with the same factor, the condition
number only far from its rank threshold, and the width-sweep records only for finiteness (one distance
excepted), so a wrong factor, a missing normalisation, a swapped reference kernel or a dropped f₀ went
unnoticed. Each test here computes the expected value without the code under test:

* the cubing record (``ntk.cubing.cubing_check``) on X = U diag(σ) Vᵀ with chosen singular values, where
  κ(G) = (σ₁/σₙ)², F = X Xᵀ X = U diag(σ³) Vᵀ, and the K∞ fields are recomputed from Cho & Saul's (2009)
  arc-cosine closed form in numpy;
* the default rank threshold of ``ntk.conditioning.gram_spectrum`` on a diagonal matrix (exact eigenvalues);
* the distances of ``ntk.distance`` on hand-worked 2×2 / 3×3 cases and a kernel of known eigenvectors;
* the width-sweep measurements (``ntk.sweep``) against a float64 brute force: the empirical NTK as
  (1/C) Σ_c J_c J_cᵀ from ``jax.jacobian`` of a separately written network, plain gradient descent written
  here, and the kernel predictor by eigendecomposition (Jacot et al. 2018; Lee et al. 2019, eq. 9).

Nothing expected is copied from the output of the code under test.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntk.conditioning import gram_spectrum
from ntk.cubing import cubing_check
from ntk.distance import function_distance, kernel_regression, loglog_fit, spectral_distance
from ntk.models import two_layer_relu
from ntk.sweep import (InfiniteWidthKernels, default_learning_rate, infinite_width_kernels, kernel_distance,
                       train_and_compare)

EPS64 = np.finfo(np.float64).eps


# ----------------------------------------------------------------------------- independent references


def _arccos_reference(x1, x2, readout="fixed"):
  """Cho & Saul (2009) arc-cosine kernels in numpy float64: the fixed-readout 2-layer ReLU NTK
  xᵀx'(π − θ)/(2π) and, for a trained readout, plus the NNGP ‖x‖‖x'‖(sin θ + (π − θ) cos θ)/(2π)."""
  x1, x2 = np.asarray(x1, np.float64), np.asarray(x2, np.float64)
  dots = x1 @ x2.T
  norms = np.linalg.norm(x1, axis=1)[:, None] * np.linalg.norm(x2, axis=1)[None, :]
  theta = np.arccos(np.clip(dots / norms, -1.0, 1.0))
  k = dots * (np.pi - theta) / (2 * np.pi)
  if readout == "trained":
    k = k + norms * (np.sin(theta) + (np.pi - theta) * np.cos(theta)) / (2 * np.pi)
  return k


def _log10_kappa(sym):
  lam = np.linalg.eigvalsh(np.asarray(sym, np.float64))
  return float(np.log10(lam[-1] / lam[0]))


def _unit(x):
  return x / np.linalg.norm(x, axis=1, keepdims=True)


def _net(w_flat, a, x):
  """f(x) = relu(x W) a / √m written here (not ntk.models), W = w_flat reshaped to [d, m]."""
  d, m = x.shape[1], a.shape[0]
  return jax.nn.relu(x @ w_flat.reshape(d, m)) @ a / jnp.sqrt(float(m))


def _brute_force_ntk(w, a, x1, x2):
  """(1/C) Σ_c J_c(x1) J_c(x2)ᵀ with J the Jacobian of ``_net`` in the flattened W (float64; call under x64)."""
  w_flat = jnp.asarray(np.asarray(w, np.float64).reshape(-1))
  a = jnp.asarray(a, jnp.float64)
  j1 = jax.jacobian(_net)(w_flat, a, jnp.asarray(x1, jnp.float64))  # [n, C, P]
  j2 = jax.jacobian(_net)(w_flat, a, jnp.asarray(x2, jnp.float64))
  return np.einsum("icp,jcp->ij", np.asarray(j1), np.asarray(j2)) / a.shape[1]


def _gd_predictor(k, k_test, y, f0, f0_test, t):
  """f_t = f₀ + K(x, X) K⁻¹ (I − exp(−t K/(nC))) (Y − f₀(X)) by eigendecomposition (Lee et al. 2019, eq. 9;
  ½·mean over the n·C entries)."""
  lam, u = np.linalg.eigh((k + k.T) / 2)
  factor = (1 - np.exp(-t * lam / y.size)) / lam
  alpha = u @ (factor[:, None] * (u.T @ (y - f0)))
  return f0 + k @ alpha, f0_test + k_test @ alpha


def _fixed_readout_params(d, m, c, seed):
  rng = np.random.default_rng(seed)
  return {"W": rng.normal(size=(d, m)), "a": np.where(rng.uniform(size=(m, c)) < 0.5, -1.0, 1.0)}


# ----------------------------------------------------------------------------- the cubing record


def _known_spectrum_rows(sigma, d, seed):
  """X = U diag(σ) Vᵀ (U orthogonal [n, n], V orthonormal [d, n]), and the factors."""
  rng = np.random.default_rng(seed)
  n = len(sigma)
  u, _ = np.linalg.qr(rng.normal(size=(n, n)))
  v, _ = np.linalg.qr(rng.normal(size=(d, n)))
  return u @ np.diag(sigma) @ v.T, u, v


SIGMA = np.array([3.0, 2.0, 1.6, 1.3, 1.1, 1.0])


def test_cubing_record_on_a_matrix_of_known_singular_values():
  """X with singular values σ: κ(G) = (σ₁/σₙ)², κ(G̃) = κ(G)³ = (σ₁/σₙ)⁶, the stacked powers, the implied
  widths 6·log10 κ(G) + 2·log10(1/ε) and 2·log10(1/ε) (log10, not ln) and the explicit-identity tolerance
  κ(G)³·eps64, all from σ alone. Catches a wrong cubing factor in ``log10_kappa_Gtilde`` (the existing test
  compares it only with a deviation computed with the same factor), a ln/log10 swap in the 2L-ReLU width
  and a wrong power in the tolerance."""
  x, _, _ = _known_spectrum_rows(SIGMA, 10, 0)
  out = cubing_check(x, layers=(1, 2), eps=(0.1, 0.01))
  log_kappa_g = 2 * math.log10(SIGMA[0] / SIGMA[-1])
  assert out["full_rank"] and out["rank_G"] == 6
  assert out["log10_kappa_G"] == pytest.approx(log_kappa_g, abs=1e-10)
  assert out["log10_kappa_Gtilde"] == pytest.approx(3 * log_kappa_g, abs=1e-10)
  assert out["log10_kappa_Gtilde_direct"] == pytest.approx(3 * log_kappa_g, abs=1e-8)
  for k in (1, 2):
    assert out[f"log10_kappa_values_k{k}"] == pytest.approx((2 * k + 1) * log_kappa_g, abs=1e-10)
    assert out[f"log10_kappa_self_k{k}"] == pytest.approx(3 ** k * log_kappa_g, abs=1e-10)
  assert out["log10_width_relu_eps0.1"] == pytest.approx(2.0, abs=1e-12)
  assert out["log10_width_relu_eps0.01"] == pytest.approx(4.0, abs=1e-12)
  assert out["log10_width_attn_eps0.1"] == pytest.approx(6 * log_kappa_g + 2.0, abs=1e-9)
  assert out["log10_width_attn_eps0.01"] == pytest.approx(6 * log_kappa_g + 4.0, abs=1e-9)
  assert out["explicit_identity_tolerance"] == pytest.approx((SIGMA[0] / SIGMA[-1]) ** 6 * EPS64, rel=1e-8)


def test_cubing_normalised_features_and_network_kernels_against_numpy():
  """The normalised-feature and K∞ fields of the cubing record recomputed independently: F = U diag(σ³) Vᵀ
  with ℓ2-normalised rows for κ(G̃_normalised); the arc-cosine NTK (numpy closed form) of the unit pixel
  rows (2L-ReLU) and of the unit feature rows (MLP-Attn) for κ(K∞); their gap is MLP-Attn minus 2L-ReLU.
  Catches a missing row normalisation (either model) and a reversed gap. The rows have unequal norms, so
  the normalisation changes every figure."""
  x, u, v = _known_spectrum_rows(SIGMA, 10, 1)
  row_norms = np.linalg.norm(x, axis=1)
  assert row_norms.max() / row_norms.min() > 1.1  # normalising changes the kernels
  out = cubing_check(x)
  f_unit = _unit(u @ np.diag(SIGMA ** 3) @ v.T)
  expected_normalised = _log10_kappa(f_unit @ f_unit.T)
  expected_relu = _log10_kappa(_arccos_reference(_unit(x), _unit(x)))
  expected_attn = _log10_kappa(_arccos_reference(f_unit, f_unit))
  assert abs(expected_normalised - 3 * out["log10_kappa_G"]) > 0.05  # the normalisation matters here
  assert out["log10_kappa_Gtilde_normalised"] == pytest.approx(expected_normalised, abs=1e-8)
  assert out["log10_kappa_Kinf_relu"] == pytest.approx(expected_relu, abs=1e-7)
  assert out["log10_kappa_Kinf_mlp_attn"] == pytest.approx(expected_attn, abs=1e-7)
  assert out["log10_kappa_Kinf_gap"] == pytest.approx(expected_attn - expected_relu, abs=2e-7)
  assert expected_attn > expected_relu  # the sign the claim reads: attention's kernel is worse conditioned


def test_default_rank_threshold_is_n_eps_times_lambda_max():
  """A diagonal Gram matrix (exact eigenvalues) with one eigenvalue at 3·eps64·λ₁ and n = 5: the documented
  default threshold 5·eps64·λ₁ drops it (rank 4, pseudo-κ = λ₁/λ₄ = 8); a threshold of eps64·λ₁ would keep
  it (κ ≈ 1.5e15). Catches a wrong default rtol, which moves the cubing table's rank-deficient rows."""
  lam = np.array([2.0, 1.0, 0.5, 0.25, 3 * EPS64 * 2.0])
  s = gram_spectrum(np.diag(lam))
  assert s.rtol == pytest.approx(5 * EPS64, rel=1e-15)
  assert s.rank == 4 and not s.full_rank
  assert s.condition_number == pytest.approx(8.0, rel=1e-14)
  assert s.log10_condition_number == pytest.approx(math.log10(8.0), abs=1e-14)
  # Above the threshold (6·eps·λ₁ > 5·eps·λ₁) the eigenvalue is kept.
  kept = gram_spectrum(np.diag(np.concatenate([lam[:4], [6 * EPS64 * 2.0]])))
  assert kept.rank == 5 and kept.condition_number == pytest.approx(1 / (6 * EPS64), rel=1e-12)


# ----------------------------------------------------------------------------- distances and fits


def test_spectral_distance_takes_the_largest_eigenvalue_magnitude():
  """K∞ = diag(2, 1), K_m = diag(1.1, 1.2): K_m − K∞ = diag(−0.9, 0.2), whose operator norm is 0.9 (the
  negative eigenvalue), so ‖K_m − K∞‖₂/λ_min(K∞) = 0.9. Catches a missing abs() (largest signed
  eigenvalue, 0.2) in the width sweep's spectral ratio."""
  sd = spectral_distance(np.diag([1.1, 1.2]), np.diag([2.0, 1.0]))
  assert sd.operator_norm == pytest.approx(0.9, rel=1e-14)
  assert sd.ratio_to_lambda_min == pytest.approx(0.9, rel=1e-14)
  assert (sd.lambda_min, sd.lambda_max) == (pytest.approx(1.0), pytest.approx(2.0))


def test_loglog_fit_statistics_against_hand_least_squares():
  """Slope, its standard error, intercept and R² of log y on log m against the textbook least-squares
  formulas on noisy points; the width where the fit reaches a target inverts the fitted line. Catches
  R² reported as r, and the intercept's standard error reported as the slope's."""
  rng = np.random.default_rng(3)
  widths = np.repeat([16.0, 64.0, 256.0, 1024.0], 3)
  values = 5.0 * widths ** -0.5 * np.exp(0.1 * rng.normal(size=widths.size))
  xs, ys = np.log(widths), np.log(values)
  n = xs.size
  sxx = np.sum((xs - xs.mean()) ** 2)
  slope = np.sum((xs - xs.mean()) * (ys - ys.mean())) / sxx
  intercept = ys.mean() - slope * xs.mean()
  resid = ys - intercept - slope * xs
  stderr = math.sqrt(np.sum(resid ** 2) / (n - 2) / sxx)
  r2 = 1 - np.sum(resid ** 2) / np.sum((ys - ys.mean()) ** 2)
  fit = loglog_fit(widths, values)
  assert fit.slope == pytest.approx(slope, rel=1e-12) and fit.intercept == pytest.approx(intercept, rel=1e-12)
  assert fit.slope_stderr == pytest.approx(stderr, rel=1e-10)
  assert fit.r_squared == pytest.approx(r2, rel=1e-12) and fit.n_points == n
  assert fit.width_reaching(0.1) == pytest.approx(math.exp((math.log(0.1) - intercept) / slope), rel=1e-10)


def test_kernel_regression_with_a_visible_ridge_against_the_eigendecomposition():
  """K = Q diag(λ) Qᵀ, ridge ρ = s·tr(K)/n with s = 0.05: the predictor is f₀ + Q diag(λ/(λ + ρ)) Qᵀ(Y − f₀)
  on the training points and f₀ + K_t Q diag(1/(λ + ρ)) Qᵀ(Y − f₀) on the test points. Catches a ridge left
  out of (or scaled in) the solve while the recorded ridge stays right."""
  rng = np.random.default_rng(4)
  q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
  lam = np.array([5.0, 2.0, 0.5, 0.1])
  k = q @ np.diag(lam) @ q.T
  k_test = rng.normal(size=(3, 4))
  y, f0, f0_test = rng.normal(size=(4, 2)), rng.normal(size=(4, 2)), rng.normal(size=(3, 2))
  rho = 0.05 * lam.sum() / 4
  got = kernel_regression(k, k_test, y, fx_train_0=f0, fx_test_0=f0_test, ridge_scale=0.05)
  assert got.ridge == pytest.approx(rho, rel=1e-14)
  coef = q @ np.diag(1 / (lam + rho)) @ q.T @ (y - f0)
  np.testing.assert_allclose(got.train, f0 + q @ np.diag(lam / (lam + rho)) @ q.T @ (y - f0), rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(got.test, f0_test + k_test @ coef, rtol=1e-10, atol=1e-12)


def test_function_distance_relative_is_to_the_predictors_movement_from_f0():
  """f_net − f_kernel = [[0, 1], [2, 3]] (norm √14), f_kernel − f₀ = [[.5, .5], [.5, −.5]] (norm 1): relative
  distance √14, rms √14/2. Catches the relative distance divided by ‖f_kernel‖ (= 2) instead of by
  ‖f_kernel − f₀‖ (the existing closed-form test has f₀ = 0, where the two agree)."""
  f_net = np.array([[1.0, 2.0], [3.0, 4.0]])
  f_kernel = np.ones((2, 2))
  f0 = np.array([[0.5, 0.5], [0.5, 1.5]])
  d = function_distance(f_net, f_kernel, f0)
  assert d.distance == pytest.approx(math.sqrt(14), rel=1e-15)
  assert d.rms == pytest.approx(math.sqrt(14) / 2, rel=1e-15)
  assert d.relative == pytest.approx(math.sqrt(14), rel=1e-15)


# ----------------------------------------------------------------------------- the width-sweep measurements


def test_default_learning_rate_is_half_the_stability_limit():
  """η = scale·n·C/λ_max(K∞) for ½·mean over n·C entries: K∞ = diag(4, 2, 1), C = 10, scale 0.5 gives
  0.5·3·10/4 = 3.75. Catches n in place of n·C (or λ_min for λ_max), which sets the sweep's training time."""
  inf = InfiniteWidthKernels(np.diag([4.0, 2.0, 1.0]), np.zeros((2, 3)))
  assert default_learning_rate(inf, 10, 0.5) == pytest.approx(3.75, rel=1e-14)


@pytest.mark.parametrize("readout", ["fixed", "trained"])
def test_infinite_width_kernels_against_the_arc_cosine_closed_form(readout):
  """Both blocks of ``infinite_width_kernels`` against numpy's Cho–Saul closed form, for either readout, on
  rows of unequal norm. Catches a block computed with the wrong readout (the trained readout's NNGP term
  left out of the test-train block) or transposed."""
  rng = np.random.default_rng(5)
  tr, te = rng.uniform(size=(6, 4)), rng.uniform(size=(3, 4))
  inf = infinite_width_kernels(tr, te, readout=readout)
  assert inf.train.dtype == np.float64 and inf.test_train.shape == (3, 6)
  np.testing.assert_allclose(inf.train, _arccos_reference(tr, tr, readout), rtol=1e-12, atol=1e-14)
  np.testing.assert_allclose(inf.test_train, _arccos_reference(te, tr, readout), rtol=1e-12, atol=1e-14)


def test_kernel_distance_record_against_a_brute_force_empirical_ntk():
  """Every field of the width sweep's kind = 'init' record (``kernel_distance``) at width 16 recomputed in
  float64: K_m = (1/C) Σ_c J_c J_cᵀ from ``jax.jacobian`` of a separately written network, K∞ from the numpy
  closed form; relative Frobenius distances divided by ‖K∞‖_F on both blocks, ‖K_m − K∞‖₂ and λ_min(K∞).
  Catches the test-train distance normalised by K_m, and the spectral ratio taken with K_m as reference."""
  d, m, c = 5, 16, 2
  rng = np.random.default_rng(6)
  tr, te = _unit(rng.uniform(size=(7, d))), _unit(rng.uniform(size=(4, d)))
  p = _fixed_readout_params(d, m, c, 7)
  model = two_layer_relu(m, d, out_dim=c)
  with jax.enable_x64(True):
    params = {"W": jnp.asarray(p["W"]), "a": jnp.asarray(p["a"])}
    inf = infinite_width_kernels(tr, te, readout="fixed")
    got = kernel_distance(model, params, jnp.asarray(tr), jnp.asarray(te), inf)
    k_m, k_m_test = _brute_force_ntk(p["W"], p["a"], tr, tr), _brute_force_ntk(p["W"], p["a"], te, tr)
  k_inf, k_inf_test = _arccos_reference(tr, tr), _arccos_reference(te, tr)
  lam = np.linalg.eigvalsh(k_inf)
  op = np.max(np.abs(np.linalg.eigvalsh(k_m - k_inf)))
  frob_test = np.linalg.norm(k_m_test - k_inf_test) / np.linalg.norm(k_inf_test)
  assert abs(np.linalg.norm(k_m_test) / np.linalg.norm(k_inf_test) - 1) > 0.01  # the reference matters
  assert got.rel_frobenius_train == pytest.approx(np.linalg.norm(k_m - k_inf) / np.linalg.norm(k_inf), rel=1e-9)
  assert got.rel_frobenius_test_train == pytest.approx(frob_test, rel=1e-9)
  assert got.operator_norm == pytest.approx(op, rel=1e-9)
  assert got.lambda_min_inf == pytest.approx(lam[0], rel=1e-9)
  assert got.lambda_max_inf == pytest.approx(lam[-1], rel=1e-9)
  assert got.spectral_ratio == pytest.approx(op / lam[0], rel=1e-9)


def test_train_and_compare_record_against_brute_force_training_and_predictors():
  """The width sweep's kind = 'train' record (``train_and_compare``) at width 8, recomputed in float64 with
  gradient descent on ½·mean squared error written here, the empirical NTK by brute-force Jacobians, and
  the gradient-descent predictors of K∞ (numpy closed form) and K₀ by eigendecomposition, each started from
  the network's own f₀: the function distances (absolute, relative to the predictor's movement from f₀), the
  kernel movement ‖K_T − K₀‖_F/‖K₀‖_F and the train loss. Catches the movement normalised by K_T, the relative
  distance divided by ‖f_NTK‖ instead of ‖f_NTK − f₀‖, and a predictor started from 0 instead of f₀."""
  d, m, c, n, t_n = 10, 8, 2, 8, 4
  rng = np.random.default_rng(8)
  tr, te = _unit(rng.uniform(size=(n, d)) - 0.3), _unit(rng.uniform(size=(t_n, d)) - 0.3)
  labels = np.arange(n) % c
  y = np.eye(c)[labels]
  y_test = np.arange(t_n) % c
  p = _fixed_readout_params(d, m, c, 9)
  lr, steps = 4.0, 40
  model = two_layer_relu(m, d, out_dim=c)
  with jax.enable_x64(True):
    params = {"W": jnp.asarray(p["W"]), "a": jnp.asarray(p["a"])}
    inf = infinite_width_kernels(tr, te, readout="fixed")
    got = train_and_compare(model, params, jnp.asarray(tr), jnp.asarray(te), jnp.asarray(y), y_test, inf,
                            learning_rate=lr, steps=steps).metrics
    a = jnp.asarray(p["a"])
    xs, ys = jnp.asarray(tr), jnp.asarray(y)
    grad = jax.jit(jax.grad(lambda w: 0.5 * jnp.mean((_net(w, a, xs) - ys) ** 2)))
    w0 = jnp.asarray(p["W"].reshape(-1))
    w = w0
    for _ in range(steps):  # θ ← θ − η ∇L, one step at a time
      w = w - lr * grad(w)
    f0, f0_test = np.asarray(_net(w0, a, xs)), np.asarray(_net(w0, a, jnp.asarray(te)))
    f_train, f_test = np.asarray(_net(w, a, xs)), np.asarray(_net(w, a, jnp.asarray(te)))
    k0, k0_test = _brute_force_ntk(p["W"], p["a"], tr, tr), _brute_force_ntk(p["W"], p["a"], te, tr)
    k_t = _brute_force_ntk(np.asarray(w).reshape(d, m), p["a"], tr, tr)
  t = lr * steps
  _, pred_test = _gd_predictor(_arccos_reference(tr, tr), _arccos_reference(te, tr), y, f0, f0_test, t)
  _, pred_k0_test = _gd_predictor(k0, k0_test, y, f0, f0_test, t)
  dist, dist_k0 = np.linalg.norm(f_test - pred_test), np.linalg.norm(f_test - pred_k0_test)
  movement = np.linalg.norm(k_t - k0) / np.linalg.norm(k0)
  # The cases the mutations would confuse are far apart here.
  assert abs(np.linalg.norm(k_t) / np.linalg.norm(k0) - 1) > 0.02
  assert np.linalg.norm(f0_test) > 0.2 * np.linalg.norm(pred_test - f0_test)
  assert got.time == pytest.approx(t, rel=1e-15) and got.steps == steps
  assert got.kernel_movement == pytest.approx(movement, rel=1e-8)
  assert got.function_distance == pytest.approx(dist, rel=1e-7)
  assert got.function_distance_rms == pytest.approx(dist / math.sqrt(t_n * c), rel=1e-7)
  assert got.function_distance_relative == pytest.approx(dist / np.linalg.norm(pred_test - f0_test), rel=1e-7)
  assert got.function_distance_k0 == pytest.approx(dist_k0, rel=1e-6)
  assert got.function_distance_k0_relative == pytest.approx(dist_k0 / np.linalg.norm(pred_k0_test - f0_test),
                                                            rel=1e-6)
  assert got.train_loss == pytest.approx(0.5 * np.mean((f_train - y) ** 2), rel=1e-8)
