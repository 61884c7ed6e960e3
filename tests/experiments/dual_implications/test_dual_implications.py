"""Dual implications (ntk.approximation, experiments.dual_implications): the targets, the alignment and the
relative error against closed forms, and the runner on a tiny grid (records, resume, report)."""
import jax
import numpy as np
import pytest

from experiments.dual_implications import config as dual_implications_config
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


@pytest.mark.long
def test_runner_tiny_grid_resumes_and_reports(tmp_path):
  from experiments.core.config import apply_overrides
  from experiments.dual_implications import config as dual_implications_config
  from experiments.dual_implications import report as dual_implications_report
  from experiments.dual_implications import run as dual_implications
  from experiments.first_try import SETTINGS
  config = apply_overrides(dual_implications_config.get_config(), list(SETTINGS["dual_implications"]))
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


def test_runner_targets_lie_in_the_top_or_bottom_singular_span_of_each_draws_training_rows(tmp_path):
  """A 'top' target on the training rows is X V_k c = U_k Σ_k c: it lies in the span of the top-k left singular
  vectors of that draw's training matrix and has no component along the bottom-k non-zero ones; a 'bottom'
  target the other way round. U, Σ computed here by hand (numpy SVD of the rows the runner loads for the
  draw); the records carry the singular values of their directions."""
  from experiments.core import seed_subsets
  from experiments.core.config import apply_overrides
  from experiments.dual_implications import run as dual_implications
  k = 3
  config = apply_overrides(dual_implications_config.get_config(), [
      "datasets=mnist", "data.n_train=40", "data.n_test=10", "targets=top,bottom", "draws=0,1", f"k={k}",
      "seeds=0", "network_seeds=", "width=8", "features=unit"])
  records = dual_implications.run(config, tmp_path)
  for draw in config.draws:
    train, test, fields = seed_subsets.seed_splits(config.data, "mnist", draw)
    x, xt = np.asarray(train.x, np.float32), np.asarray(test.x, np.float32)
    u, s, _ = np.linalg.svd(x.astype(np.float64), full_matrices=False)
    rank = int(np.sum(s > max(x.shape) * np.finfo(np.float64).eps * s[0]))
    spans = {"top": u[:, :k], "bottom": u[:, rank - k:rank]}
    labels = (np.eye(10)[train.y], np.eye(10)[test.y])
    for target, other in (("top", "bottom"), ("bottom", "top")):
      y, _, _ = dual_implications._targets(config, x, xt, labels, target, draw, 0)
      inside = spans[target] @ (spans[target].T @ y)
      assert np.linalg.norm(y - inside) < 1e-6 * np.linalg.norm(y), (draw, target)
      assert np.linalg.norm(spans[other].T @ y) < 1e-6 * np.linalg.norm(y), (draw, target)
      want = s[:k] if target == "top" else s[rank - k:rank]
      recorded = [r for r in records if (r["target"], r["draw"]) == (target, draw)]
      assert recorded and all(np.allclose(r["singular_values"], want, rtol=1e-4) for r in recorded)
      assert all(r["data_seed"] == draw and r["data_draw"] == fields["data_draw"] for r in recorded)


def test_ridge_is_chosen_on_held_out_training_rows_never_on_the_test_targets():
  """choose_ridge fits on the fit rows and scores on the held-out training rows (by hand); the chosen scale, and
  so kernel_error_validated's ridge, does not change when the test targets do."""
  from experiments.dual_implications import run as dual_implications
  rng = np.random.default_rng(0)
  a, at = rng.normal(size=(30, 4)), rng.normal(size=(7, 4))
  k, kt, ktt = a @ a.T, at @ a.T, at @ at.T
  y = a @ rng.normal(size=(4, 1)) + 0.3 * rng.normal(size=(30, 1))
  yt = at @ rng.normal(size=(4, 1))
  fit, val = dual_implications.validation_split(30, 0.25, jax.random.PRNGKey(0))
  assert len(val) == 8 and len(fit) == 22 and not set(fit) & set(val)
  grid = (1e-4, 1e-2, 1.0)
  chosen, errors = dual_implications.choose_ridge(k, y, grid, fit, val)
  by_hand = []
  for scale in grid:
    reg = kernel_regression(k[np.ix_(fit, fit)], k[np.ix_(val, fit)], y[fit], fx_train_0=np.zeros((22, 1)),
                            fx_test_0=np.zeros((8, 1)), ridge_scale=scale)
    by_hand.append(approximation.relative_error(reg.test, y[val]))
  np.testing.assert_allclose(errors, by_hand, rtol=1e-12)
  assert chosen == grid[int(np.argmin(by_hand))]
  one = dual_implications._kernel_fields(k, kt, ktt, y, yt, 1e-3, grid=grid, split=(fit, val))
  other = dual_implications._kernel_fields(k, kt, ktt, y, -7 * yt + 1, 1e-3, grid=grid, split=(fit, val))
  assert one["ridge_scale_validated"] == other["ridge_scale_validated"] == chosen
  raw = dual_implications._kernel_fields(k, kt, ktt, y, yt, 1e-3, grid=grid, split=(fit, val), prefix="raw_")
  assert raw["raw_kernel_error_validated"] == one["kernel_error_validated"]


def test_raw_features_are_the_rows_before_normalisation_up_to_one_constant():
  from experiments.dual_implications import run as dual_implications
  rng = np.random.default_rng(1)
  x, xt = rng.uniform(size=(6, 5)), rng.uniform(size=(3, 5))
  for model, want, want_t in (("relu", x, xt), ("mlp_attn", x @ x.T @ x, xt @ x.T @ x)):
    a, b = dual_implications.raw_features(model, x, xt)
    c = np.mean(np.linalg.norm(want, axis=1))
    np.testing.assert_allclose(a, want / c, rtol=1e-12)
    np.testing.assert_allclose(b, want_t / c, rtol=1e-12)
