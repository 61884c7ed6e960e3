"""Dual implications (ntk.approximation, experiments.dual_implications): the targets, the alignment and the
relative error against closed forms, and the runner on a tiny grid (records, resume, report)."""
import jax
import numpy as np
import pytest

from ntk import approximation
from ntk.distance import kernel_regression


def _matrix_with_spectrum(singular_values, n=12, d=9, seed=0):
  rng = np.random.default_rng(seed)
  u, _ = np.linalg.qr(rng.normal(size=(n, n)))
  v, _ = np.linalg.qr(rng.normal(size=(d, d)))
  s = np.zeros((n, d))
  s[np.arange(len(singular_values)), np.arange(len(singular_values))] = singular_values
  return u @ s @ v.T, u, v


def _in_sample_error(kernel, y, rho):
  n = len(y)
  reg = kernel_regression(kernel, kernel, y, fx_train_0=np.zeros_like(y), fx_test_0=np.zeros_like(y),
                          ridge_scale=rho * n / np.trace(kernel))
  return float(np.sum((reg.train - y) ** 2))


def test_top_mode_targets_are_fitted_better_by_the_cubed_kernel_in_closed_form():
  """K = Σ λⱼ uⱼuⱼᵀ, y = uᵢ: the ridge prediction is λᵢ/(λᵢ + ρ)·uᵢ, so the squared error is (ρ/(λᵢ + ρ))².
  G = X Xᵀ has λᵢ = σᵢ²; the linearized-attention Gram G³ has σᵢ⁶: larger on top modes (σ > 1), smaller on
  bottom ones (σ < 1). So G³ fits the top mode better and the bottom mode worse, exactly as predicted."""
  sigma = np.array([3.0, 2.0, 1.5, 0.8, 0.5, 0.3])
  x, u, _ = _matrix_with_spectrum(sigma)
  g = x @ x.T
  g3 = g @ g @ g
  rho = 0.5
  for i, lam in ((0, sigma[0] ** 2), (5, sigma[5] ** 2)):
    y = u[:, i:i + 1]
    assert _in_sample_error(g, y, rho) == pytest.approx((rho / (lam + rho)) ** 2, rel=1e-9)
    assert _in_sample_error(g3, y, rho) == pytest.approx((rho / (lam ** 3 + rho)) ** 2, rel=1e-9)
  top, bottom = u[:, :1], u[:, 5:6]
  assert _in_sample_error(g3, top, rho) < _in_sample_error(g, top, rho)
  assert _in_sample_error(g3, bottom, rho) > _in_sample_error(g, bottom, rho)


def test_mode_targets_follow_the_singular_vectors():
  sigma = np.array([4.0, 3.0, 2.0, 1.0, 0.5])  # rank 5 of 9 columns
  x, _, v = _matrix_with_spectrum(sigma)
  xt = np.random.default_rng(1).normal(size=(4, 9))
  key = jax.random.PRNGKey(0)
  top = approximation.mode_targets(x, xt, kind="top", k=2, key=key)
  bottom = approximation.mode_targets(x, xt, kind="bottom", k=2, key=key)
  np.testing.assert_allclose(top.singular_values, [4.0, 3.0], rtol=1e-12)
  np.testing.assert_allclose(bottom.singular_values, [1.0, 0.5], rtol=1e-12)  # the non-zero ones
  np.testing.assert_allclose(np.abs(top.directions.T @ v[:, :2]), np.eye(2), atol=1e-10)
  np.testing.assert_allclose(top.train, x @ top.directions @ top.coefficients[:, None], rtol=1e-12)
  np.testing.assert_allclose(top.test, xt @ top.directions @ top.coefficients[:, None], rtol=1e-12)
  np.testing.assert_array_equal(top.coefficients, bottom.coefficients)  # same key, same c
  rand = approximation.mode_targets(x, xt, kind="random", k=3, key=key)
  np.testing.assert_allclose(np.linalg.norm(rand.directions, axis=0), 1.0, rtol=1e-12)
  with pytest.raises(ValueError, match=r"k must be an integer in \[1, rank\(X\) = 5\]"):
    approximation.mode_targets(x, xt, kind="bottom", k=6, key=key)
  with pytest.raises(ValueError, match="kind"):
    approximation.mode_targets(x, xt, kind="middle", k=1, key=key)


@pytest.mark.parametrize("bad, match", [
    (dict(k="a"), r"k must be an integer in \[1, rank"),
    (dict(k=None), r"k must be an integer in \[1, rank"),
    (dict(k=float("nan")), r"k must be an integer in \[1, rank"),
    (dict(k=1.5), r"k must be an integer in \[1, rank"),
    (dict(k=True), r"k must be an integer in \[1, rank"),
    (dict(kind=["top"]), "kind must be one of"),
    (dict(key="a"), "key must be a JAX PRNG key"),
    (dict(rtol="0.1"), r"rtol must be a number in \(0, 1\)"),
    (dict(x_train_NxD=[["a", "b"]]), "x_train_NxD must be a numeric array"),
    (dict(x_test_TxD=None), "x_test_TxD must be a numeric array"),
])
def test_mode_targets_argument_errors_name_the_argument_and_its_range(bad, match):
  x = np.random.default_rng(0).normal(size=(6, 2))
  args = dict(x_train_NxD=x, x_test_TxD=x[:3], kind="top", k=1, key=jax.random.PRNGKey(0))
  args.update(bad)
  with pytest.raises(ValueError, match=match):
    approximation.mode_targets(args.pop("x_train_NxD"), args.pop("x_test_TxD"), **args)


@pytest.mark.parametrize("call, match", [
    (lambda y: approximation.kernel_target_alignment("a", y), "k_NxN must be a numeric array"),
    (lambda y: approximation.kernel_target_alignment(np.eye(3), [["x"]] * 3), "y_NxC must be a numeric array"),
    (lambda y: approximation.relative_error(None, y), "prediction_NxC must be a numeric array"),
    (lambda y: approximation.relative_error(y, {"a": 1}), "y_NxC must be a numeric array"),
])
def test_alignment_and_relative_error_name_a_non_numeric_argument(call, match):
  with pytest.raises(ValueError, match=match):
    call(np.array([[1.0], [-2.0], [0.5]]))


def test_alignment_and_relative_error_closed_forms():
  y = np.array([[1.0], [-2.0], [0.5]])
  assert approximation.kernel_target_alignment(y @ y.T, y) == pytest.approx(1.0)
  assert approximation.kernel_target_alignment(3 * np.eye(3), y) == pytest.approx(
      np.sum(y ** 2) / (np.sqrt(3) * np.sum(y ** 2)))
  assert approximation.relative_error(y, y) == 0.0
  assert approximation.relative_error(np.full_like(y, y.mean()), y) == pytest.approx(1.0)
  with pytest.raises(ValueError, match="constant targets"):
    approximation.relative_error(y, np.ones_like(y))
  with pytest.raises(ValueError, match="zero kernel"):
    approximation.kernel_target_alignment(np.zeros((3, 3)), y)


def test_runner_tiny_grid_resumes_and_reports(tmp_path):
  from experiments import dual_implications, dual_implications_report
  from experiments.config import apply_overrides
  config = apply_overrides(dual_implications.get_config(), [
      "datasets=mnist", "data.n_train=24", "data.n_test=12", "targets=top,bottom", "draws=0,1", "k=3",
      "seeds=0", "network_seeds=0", "width=16", "train.max_epochs=5"])
  records = dual_implications.run(config, tmp_path)
  assert len(records) == 2 * 2 * 2 * 2  # targets × draws × models × (kinf, seed 0)
  assert all(0 <= r["kernel_error"] and -1 <= r["alignment"] <= 1 for r in records)
  assert all("network_error" in r for r in records if r["kind"] == "finite")
  again = dual_implications.run(config, tmp_path)
  assert [r["wall_time_s"] for r in again] == [r["wall_time_s"] for r in records]  # nothing recomputed
  text = dual_implications_report.write_report(tmp_path)
  assert "| top |" in text and (tmp_path / "errors.png").exists()
  with pytest.raises(ValueError, match="network_seeds"):
    apply_overrides(config, ["network_seeds=3"]).validate()


def test_scale_invariant_measures_at_extreme_scales():
  """Alignment, relative error and the matched time do not depend on the scale of K or y."""
  from ntk.sweep import matched_time
  rng = np.random.default_rng(0)
  a = rng.normal(size=(6, 4))
  k, y, f = a @ a.T, rng.normal(size=(6, 1)), rng.normal(size=(6, 1))
  base = approximation.kernel_target_alignment(k, y)
  for c in (1e200, 1e-200):
    assert approximation.kernel_target_alignment(k * c, y) == pytest.approx(base)
    assert approximation.kernel_target_alignment(k, y * c) == pytest.approx(base)
    assert approximation.relative_error(f * c, y * c) == pytest.approx(approximation.relative_error(f, y))
    assert matched_time(k, y * c, loss_fraction=0.5) == pytest.approx(matched_time(k, y, loss_fraction=0.5))
