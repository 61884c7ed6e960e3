"""Influence estimators: NTK LOO closed form vs brute force, sign convention, influence function vs LOO
retraining, CG vs exact, TracIn, Hessian eigenvalues, flip rate."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ntk
from experiments.data import load_dataset
from influence import (brute_force_loo_influence, default_ridge, filter_normalized_direction, flip_rate,
                       hessian_top_eigenvalues, influence_function, loss_landscape, ntk_loo_influence,
                       top_count, top_influential, tracin)


def _psd(n, seed):
  a = np.random.default_rng(seed).normal(size=(n, n + 3))
  return a @ a.T / n


def test_closed_form_loo_equals_brute_force_refits():
  rng = np.random.default_rng(0)
  k_all = _psd(17, 1)
  k, kt = k_all[:12, :12], k_all[12:, :12]
  y = np.eye(3)[rng.integers(0, 3, 12)]
  yt = np.eye(3)[rng.integers(0, 3, 5)]
  ridge = 0.05
  got = ntk_loo_influence(k, kt, y, yt, ridge=ridge)
  ref = brute_force_loo_influence(k, kt, y, yt, ridge=ridge)
  np.testing.assert_allclose(got.per_pair, ref, rtol=1e-9, atol=1e-12)
  np.testing.assert_allclose(got.scores, ref.sum(0), rtol=1e-9, atol=1e-12)


def test_closed_form_loo_with_empirical_ntk_of_real_mnist_rows():
  data = load_dataset("mnist", "train", n=40, seed=3, flatten=True)
  feats, _ = ntk.model_features("relu", data.x)
  model = ntk.two_layer_relu(512, feats.shape[1], out_dim=10)
  _, params = model.init_fn(jax.random.PRNGKey(0), feats.shape)
  k = np.asarray(ntk.two_layer_relu_ntk(model, params, feats[:30]), np.float64)
  kt = np.asarray(ntk.two_layer_relu_ntk(model, params, feats[30:], feats[:30]), np.float64)
  y = np.eye(10)[data.y[:30]]
  yt = np.eye(10)[data.y[30:]]
  got = ntk_loo_influence(k, kt, y, yt)
  assert got.ridge == pytest.approx(1e-3 * np.trace(k) / 30)  # the documented default ridge
  ref = brute_force_loo_influence(k, kt, y, yt, ridge=got.ridge)
  np.testing.assert_allclose(got.per_pair, ref, rtol=1e-7, atol=1e-10)


def test_hand_computable_three_point_example_pins_the_sign():
  """K = I, λ = 1: A = ½I, α = ½y, f(x) = ½ for a test point seen only by point 0 (k_x = e₀).
  Removing point 0 gives f₋₀(x) = 0. Test label +1: ℓ(f) = ½(½ − 1)² = 1/8, ℓ(f₋₀) = ½ → I₀ = +3/8 (helps).
  Test label −1: ℓ(f) = ½(3/2)² = 9/8 → I₀ = ½ − 9/8 = −5/8 (hurts). Points 1, 2 have no effect."""
  k, y = np.eye(3), np.ones((3, 1))
  kt = np.array([[1.0, 0.0, 0.0]])
  helps = ntk_loo_influence(k, kt, y, np.array([[1.0]]), ridge=1.0)
  np.testing.assert_allclose(helps.scores, [3 / 8, 0, 0], atol=1e-15)
  np.testing.assert_allclose(helps.test_predictions, [[0.5]])
  hurts = ntk_loo_influence(k, kt, y, np.array([[-1.0]]), ridge=1.0)
  np.testing.assert_allclose(hurts.scores, [-5 / 8, 0, 0], atol=1e-15)
  assert default_ridge(4 * np.eye(5)) == pytest.approx(4e-3)


def test_float32_path_agrees_roughly():
  k_all = _psd(10, 4)
  y, yt = np.eye(2)[[0, 1, 0, 1, 1, 0, 0]], np.eye(2)[[1, 0, 0]]
  a = ntk_loo_influence(k_all[:7, :7], k_all[7:, :7], y, yt, float64=False)
  b = ntk_loo_influence(k_all[:7, :7], k_all[7:, :7], y, yt)
  np.testing.assert_allclose(a.scores, b.scores, rtol=1e-3, atol=1e-5)


def test_loo_bad_input():
  with pytest.raises(ValueError, match="square"):
    ntk_loo_influence(np.ones((2, 3)), np.ones((1, 2)), np.ones((2, 1)), np.ones((1, 1)))
  with pytest.raises(ValueError, match="y_test"):
    ntk_loo_influence(np.eye(2), np.ones((1, 2)), np.ones((2, 1)), np.ones((2, 1)))
  with pytest.raises(ValueError, match="NaN"):
    ntk_loo_influence(np.eye(2) * np.nan, np.ones((1, 2)), np.ones((2, 1)), np.ones((1, 1)))
  with pytest.raises(ValueError, match="ridge"):
    ntk_loo_influence(np.eye(2), np.ones((1, 2)), np.ones((2, 1)), np.ones((1, 1)), ridge=-1.0)


# --- Influence function (Koh & Liang) on L2-regularised logistic regression (strongly convex). ---

def _logreg_problem(n=30, d=4, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, d))
  y = (x @ rng.normal(size=d) + 0.5 * rng.normal(size=n) > 0).astype(np.float64)
  return x, y


def _logistic_loss(w, x, y):
  z = jnp.dot(x, w)
  return jnp.logaddexp(0.0, z) - y * z


@jax.jit
def _fit(x, y, weights, reg):
  """Exact minimiser of (1/n) Σ_i weights_i ℓ_i(w) + (reg/2)‖w‖² by 30 Newton steps (float64)."""
  obj = lambda w: jnp.sum(weights * jax.vmap(_logistic_loss, (None, 0, 0))(w, x, y)) / x.shape[0] \
      + 0.5 * reg * jnp.sum(w ** 2)
  step = lambda w, _: (w - jnp.linalg.solve(jax.hessian(obj)(w), jax.grad(obj)(w)), None)
  return jax.lax.scan(step, jnp.zeros(x.shape[1], x.dtype), None, length=30)[0]


def test_influence_function_approximates_loo_retraining_and_cg_matches_exact():
  with jax.enable_x64(True):
    x, y = _logreg_problem(80)
    xt, yt = _logreg_problem(8, seed=1)
    reg = 0.1
    x, y = jnp.asarray(x), jnp.asarray(y)
    w = _fit(x, y, jnp.ones(len(x)), reg)
    regularizer = lambda w: 0.5 * reg * jnp.sum(w ** 2)
    exact = influence_function(_logistic_loss, w, (x, y), (xt, yt), regularizer=regularizer, method="exact")
    cg = influence_function(_logistic_loss, w, (x, y), (xt, yt), regularizer=regularizer, method="cg")
    np.testing.assert_allclose(cg, exact, rtol=1e-6, atol=1e-12)
    test_loss = lambda w: float(jnp.sum(jax.vmap(_logistic_loss, (None, 0, 0))(w, xt, yt)))
    loo = []
    for j in range(len(x)):
      # Koh & Liang's removal: up-weight z_j by ε = −1/n, i.e. drop its term from the sum over n.
      weights = jnp.ones(len(x)).at[j].set(0.0)
      loo.append(test_loss(_fit(x, y, weights, reg)) - test_loss(w))
    loo = np.array(loo)
    assert np.corrcoef(exact, loo)[0, 1] > 0.99
    np.testing.assert_allclose(exact, loo, rtol=0.15, atol=0.1 * np.abs(loo).max())


def test_tracin_single_checkpoint_is_a_gradient_dot_product():
  x, y = _logreg_problem(6, 3, seed=2)
  xt, yt = _logreg_problem(2, 3, seed=3)
  w = jnp.array([0.3, -0.2, 0.1])
  got = tracin(_logistic_loss, [w, w], [0.5, 0.25], (x, y), (xt, yt))
  g = np.stack([jax.grad(_logistic_loss)(w, xi, yi) for xi, yi in zip(x, y)])
  gt = sum(jax.grad(_logistic_loss)(w, xi, yi) for xi, yi in zip(xt, yt))
  np.testing.assert_allclose(got, 0.75 * g @ np.asarray(gt), rtol=1e-5)
  with pytest.raises(ValueError, match="learning rate"):
    tracin(_logistic_loss, [w], [0.1, 0.2], (x, y), (xt, yt))


def test_hessian_top_eigenvalues_match_dense_eigensolve():
  with jax.enable_x64(True):
    rng = np.random.default_rng(5)
    params = {"w1": jnp.asarray(rng.normal(size=(4, 6))), "w2": jnp.asarray(rng.normal(size=(6, 2)))}
    x, y = jnp.asarray(rng.normal(size=(20, 4))), jnp.asarray(rng.normal(size=(20, 2)))
    objective = lambda p: 0.5 * jnp.mean((jnp.tanh(x @ p["w1"]) @ p["w2"] - y) ** 2)
    flat, unravel = jax.flatten_util.ravel_pytree(params)
    dense = np.sort(np.linalg.eigvalsh(np.asarray(jax.hessian(lambda f: objective(unravel(f)))(flat))))[::-1]
    got = hessian_top_eigenvalues(objective, params, k=3, num_iters=36)
    np.testing.assert_allclose(got, dense[:3], rtol=1e-6)


def test_filter_normalized_direction_and_landscape():
  params = {"w": jnp.arange(1.0, 7.0).reshape(2, 3), "b": jnp.ones(3)}
  d = filter_normalized_direction(params, jax.random.PRNGKey(0))
  np.testing.assert_allclose(jnp.linalg.norm(d["w"], axis=0), jnp.linalg.norm(params["w"], axis=0), rtol=1e-6)
  assert np.all(np.asarray(d["b"]) == 0)
  objective = lambda p: jnp.sum(p["w"] ** 2)
  line = loss_landscape(objective, params, [d], [-1.0, 0.0, 1.0])
  assert line[1] == pytest.approx(float(objective(params)))
  # Quadratic along the line: f(a) = ‖θ + a d‖² — check the closed form at a = ±1.
  expected = [float(jnp.sum((params["w"] + a * d["w"]) ** 2)) for a in (-1.0, 1.0)]
  np.testing.assert_allclose(line[[0, 2]], expected, rtol=1e-5)
  assert loss_landscape(objective, params, [d, d], [0.0, 1.0]).shape == (2, 2)


# --- Flip rate. ---

def test_flip_rate_constructed_cases():
  before = np.array([5.0, -4.0, 3.0, -2.0, 1.0, 0.5, -0.3, 0.2, 0.1, 0.05])
  assert flip_rate(before, before).rate == 0.0
  assert flip_rate(before, 2 * before).spearman == pytest.approx(1.0)
  all_flipped = flip_rate(before, -before, top_fraction=0.3)
  assert all_flipped.rate == 1.0 and all_flipped.n_top == 3 and all_flipped.spearman == pytest.approx(-1.0)
  after = before.copy()
  after[1] = 4.0  # only the second most influential flips
  fr = flip_rate(before, after, top_fraction=0.2)
  assert fr.rate == 0.5 and fr.n_flipped == 1 and list(fr.top_indices) == [0, 1]
  zero = before.copy()
  zero[0] = 0.0  # becoming exactly 0 is not a flip
  assert flip_rate(before, zero, top_fraction=0.1).rate == 0.0


def test_top_fraction_rounds_up_and_ties_break_by_index():
  scores = np.array([1.0, -3.0, 3.0, 3.0, 0.5, 0.1, 0.2])
  assert list(top_influential(scores, 0.3)) == [1, 2, 3]  # ⌈0.3·7⌉ = 3; |−3| = |3| = |3| tie → by index
  assert list(top_influential(scores, 0.1)) == [1]  # ⌈0.7⌉ = 1
  assert flip_rate(scores, scores, top_fraction=1.0).n_top == 7
  with pytest.raises(ValueError, match="top_fraction"):
    top_influential(scores, 0.0)


def _brute_force_flip_rate(before, after, tau):
  """The definition, written independently: the ⌈τn⌉ largest |before| (exact decimal τ; ties to the lower
  index), and among them the share whose sign changes (strictly: before·after < 0)."""
  from fractions import Fraction
  n = len(before)
  k = -(-Fraction(str(tau)) * n // 1)  # ceil
  ranked = sorted(range(n), key=lambda i: (-abs(before[i]), i))[:int(k)]
  flips = sum(1 for i in ranked if before[i] * after[i] < 0)
  return flips / len(ranked), sorted(ranked)


@pytest.mark.parametrize("seed", range(6))
def test_flip_rate_equals_brute_force_on_rankings_that_differ(seed):
  """Random scores whose before and after rankings differ (after = a partial sign flip plus noise as large
  as the scores), so the top set taken from the after scores is a different set with another flip count."""
  rng = np.random.default_rng(seed)
  n, tau = 50, 0.2
  before = rng.normal(size=n) * rng.lognormal(size=n)
  after = np.where(rng.random(n) < 0.4, -before, before) + rng.normal(size=n) * np.abs(before).mean()
  got = flip_rate(before, after, top_fraction=tau)
  rate, top = _brute_force_flip_rate(before.tolist(), after.tolist(), tau)
  assert got.rate == rate and sorted(got.top_indices.tolist()) == top
  wrong_rate, wrong_top = _brute_force_flip_rate(after.tolist(), before.tolist(), tau)
  assert wrong_top != top  # the test can tell the before set from the after set
  if seed == 0:
    assert wrong_rate != rate or wrong_top != top


def test_top_count_is_exact_at_decimal_fractions():
  """⌈0.07·100⌉ is 7, although 0.07·100 = 7.000000000000001 in floats (it picked 8 images)."""
  assert 0.07 * 100 > 7 and top_count(0.07, 100) == 7
  assert len(top_influential(np.arange(100) + 1.0, 0.07)) == 7
  assert flip_rate(np.arange(100) + 1.0, -(np.arange(100) + 1.0), top_fraction=0.07).n_top == 7
  assert [top_count(t, 10) for t in (0.1, 0.11, 0.3, 1.0)] == [1, 2, 3, 10]
  for tau in (0.01, 0.07, 0.1, 0.13, 0.29, 0.57):
    for n in (7, 100, 512, 1000):
      assert top_count(tau, n) == -(-round(tau * 100) * n // 100)  # τ = p/100 exactly
  with pytest.raises(ValueError, match="n must be"):
    top_count(0.1, -1)


def test_zero_size_perturbation_flips_nothing():
  data = load_dataset("mnist", "train", n=30, seed=0, flatten=True)
  feats, _ = ntk.model_features("mlp_attn", data.x)
  model = ntk.two_layer_relu(256, feats.shape[1], out_dim=10)
  _, params = model.init_fn(jax.random.PRNGKey(1), feats.shape)

  def scores(x):
    f, _ = ntk.model_features("mlp_attn", x)
    k = np.asarray(ntk.two_layer_relu_ntk(model, params, f), np.float64)
    y = np.eye(10)[data.y]
    return ntk_loo_influence(k[:20, :20], k[20:, :20], y[:20], y[20:]).scores

  before = scores(data.x)
  after = scores(np.clip(data.x + 0.0 * np.sign(np.random.default_rng(0).normal(size=data.x.shape)), 0, 1))
  fr = flip_rate(before, after)
  assert fr.rate == 0.0 and fr.spearman == pytest.approx(1.0)


def test_flip_rate_bad_input():
  with pytest.raises(ValueError, match="equal-length"):
    flip_rate(np.ones(3), np.ones(4))
  with pytest.raises(ValueError, match="top_fraction"):
    flip_rate(np.ones(3), np.ones(3), top_fraction=0.0)
  with pytest.raises(ValueError, match="NaN"):
    flip_rate(np.array([np.nan, 1.0]), np.ones(2))


def test_default_ridge_on_a_kernel_without_positive_trace_names_k_train():
  zeros, y = np.zeros((4, 4)), np.eye(4, 2)
  with pytest.raises(ValueError, match="k_train must be a positive semi-definite kernel"):
    ntk_loo_influence(zeros, zeros[:1], y, y[:1])


def test_hessian_eigenvalues_reject_more_than_the_parameters_and_a_nan_objective():
  params = jnp.ones(4)
  with pytest.raises(ValueError, match="k must be <= the number of parameters"):
    hessian_top_eigenvalues(lambda p: jnp.sum(p ** 2), params, k=10, num_iters=20)
  with pytest.raises(ValueError, match="not finite"):
    hessian_top_eigenvalues(lambda p: jnp.sum(p ** 2) * jnp.nan, params, k=1)


@pytest.mark.parametrize("fraction", ["0.1", 0.0, 1.5, float("nan")])
def test_top_fraction_must_be_a_number_in_the_unit_interval(fraction):
  with pytest.raises(ValueError, match=r"top_fraction must be a number in \(0, 1\]"):
    flip_rate(np.arange(5.0), np.arange(5.0)[::-1], fraction)
  with pytest.raises(ValueError, match="top_fraction"):
    top_influential(np.arange(5.0), fraction)


def test_loss_landscape_rejects_a_non_finite_grid():
  with pytest.raises(ValueError, match="alphas must be a non-empty 1-D grid of finite"):
    loss_landscape(lambda p: jnp.sum(p ** 2), jnp.ones(3), [jnp.ones(3)], [0.0, float("nan")])


def _quadratic_problem(h_diag):
  """Per-example loss ℓ(w, x, y) = yᵀw (gradient y) with regulariser ½wᵀHw, so the Hessian is H exactly and
  I_j = gᵀ(H + δI)⁻¹g / n in closed form."""
  h = jnp.diag(jnp.asarray(h_diag))
  loss = lambda w, x, y: jnp.dot(w, y) + 0.0 * jnp.sum(x)
  x, y = jnp.zeros((1, len(h_diag))), jnp.ones((1, len(h_diag)))
  return loss, lambda w: 0.5 * w @ h @ w, jnp.zeros(len(h_diag)), (x, y)


def test_cg_on_an_indefinite_hessian_raises_naming_damping_instead_of_returning_nan():
  loss, reg, w, data = _quadratic_problem([1.0, -1.0])
  # g = (1, 1), H = diag(1, −1): gᵀH⁻¹g = 1 − 1 = 0; CG's first step has pᵀHp = 0.
  np.testing.assert_allclose(influence_function(loss, w, data, data, regularizer=reg, method="exact"), [0.0])
  with pytest.raises(ValueError, match=r"not positive definite \(damping δ = 0.0\)"):
    influence_function(loss, w, data, data, regularizer=reg, method="cg")
  # Damping δ = 2 makes H + δI = diag(3, 1) positive definite: 1/3 + 1.
  got = influence_function(loss, w, data, data, regularizer=reg, method="cg", damping=2.0)
  np.testing.assert_allclose(got, [4.0 / 3.0], rtol=1e-6)


def test_cg_that_stops_before_converging_warns_naming_damping():
  loss, reg, w, data = _quadratic_problem([1.0, 2.0, 3.0, 4.0])
  with pytest.warns(RuntimeWarning, match=r"relative residual .* \(damping δ = 0.0\)"):
    influence_function(loss, w, data, data, regularizer=reg, method="cg", cg_maxiter=1)
  # CG on 4 distinct eigenvalues converges in 4 steps: Σ 1/λ_i, no warning.
  import warnings
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    got = influence_function(loss, w, data, data, regularizer=reg, method="cg")
  np.testing.assert_allclose(got, [1 + 1 / 2 + 1 / 3 + 1 / 4], rtol=1e-5)


def test_lanczos_warns_when_its_ritz_residual_has_not_converged():
  eigenvalues = jnp.linspace(1.0, 2.0, 30)
  objective = lambda p: 0.5 * jnp.sum(eigenvalues * p ** 2)
  with pytest.warns(RuntimeWarning, match="Lanczos did not converge in num_iters=2"):
    got = hessian_top_eigenvalues(objective, jnp.zeros(30), k=1, num_iters=2)
  assert got[0] <= 2.0 + 1e-5  # a Ritz value is a lower estimate of λ_max
  import warnings
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    np.testing.assert_allclose(hessian_top_eigenvalues(objective, jnp.zeros(30), k=1, num_iters=30), [2.0],
                               rtol=1e-5)


def test_row_features_replace_only_their_own_training_row():
  """MLP-Attn: at x_rows = X the row-replaced features are the transductive features of X; a candidate row
  x'_i gets the features of row i of the matrix with only row i replaced (recomputed from scratch), so a
  batched attack on all rows is an attack on each row against its own loss (arXiv 2603.13085 §5)."""
  from attention import linearized_attention_transductive
  from influence import row_features, row_logits
  x = jnp.asarray(load_dataset("mnist", "train", n=12, seed=0, flatten=True).x)
  gram = x.T @ x
  np.testing.assert_allclose(row_features("mlp_attn", x, gram, x), ntk.model_features("mlp_attn", x)[0],
                             rtol=1e-4, atol=1e-6)
  x_new = jnp.clip(x + 0.2 * jnp.sign(jax.random.normal(jax.random.PRNGKey(0), x.shape)), 0, 1)
  got = row_features("mlp_attn", x, gram, x_new)
  for i in (0, 7):
    x_i = x.at[i].set(x_new[i])
    ref = linearized_attention_transductive(x_i[i:i + 1], x_i, normalize=True)[0]
    np.testing.assert_allclose(got[i], ref, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(row_features("relu", x, gram, x_new), ntk.model_features("relu", x_new)[0], rtol=1e-6)
  model = ntk.two_layer_relu(16, x.shape[1], out_dim=10)
  _, params = model.init_fn(jax.random.PRNGKey(1), x.shape)
  np.testing.assert_allclose(row_logits(model.apply_fn, "mlp_attn", params, x, gram, x_new),
                             model.apply_fn(params, got), rtol=1e-6)


def test_perturb_rows_respects_the_budget_and_raises_the_rows_loss():
  """Every attack stays in the ε-box and [0, 1] and returns x at ε = 0; the random-sign control moves every
  unclipped pixel by exactly ε; the gradient attacks raise the mean per-row cross-entropy, the control
  much less."""
  from influence import ATTACKS, perturb_rows, row_logits
  data = load_dataset("mnist", "train", n=16, seed=1, flatten=True)
  x, y = jnp.asarray(data.x), jnp.asarray(data.y)
  model = ntk.two_layer_relu(32, x.shape[1], out_dim=10)
  _, params = model.init_fn(jax.random.PRNGKey(0), x.shape)
  logits_fn = jax.tree_util.Partial(row_logits, model.apply_fn, "relu", params, x, x.T @ x)

  def ce(rows):
    return float(-jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits_fn(rows)), y[:, None], 1)))

  clean = ce(x)
  rise = {}
  for attack in ATTACKS:
    kw = dict(key=jax.random.PRNGKey(3), pgd_steps=5, mim_steps=3)
    assert np.array_equal(np.asarray(perturb_rows(attack, logits_fn, x, y, eps=0.0, **kw)), np.asarray(x)), attack
    x_adv = np.asarray(perturb_rows(attack, logits_fn, x, y, eps=0.1, **kw))
    assert np.max(np.abs(x_adv - np.asarray(x))) <= 0.1 + 1e-6 and x_adv.min() >= 0 and x_adv.max() <= 1, attack
    rise[attack] = ce(jnp.asarray(x_adv)) - clean
  free = (np.asarray(x) >= 0.1) & (np.asarray(x) <= 0.9)
  moved = np.abs(np.asarray(perturb_rows("random_sign", logits_fn, x, y, eps=0.1, key=jax.random.PRNGKey(3))) - x)
  np.testing.assert_allclose(moved[free], 0.1, rtol=1e-5)
  for attack in ("fgsm", "pgd", "mim"):
    assert rise[attack] > 0 and rise[attack] > 3 * abs(rise["random_sign"]), rise
  with pytest.raises(ValueError, match="attack must be one of"):
    perturb_rows("cw", logits_fn, x, y, eps=0.1, key=None)
  with pytest.raises(ValueError, match="eps"):
    perturb_rows("fgsm", logits_fn, x, y, eps=1.5, key=None)
  with pytest.raises(ValueError, match="pgd_steps"):
    perturb_rows("pgd", logits_fn, x, y, eps=0.1, key=jax.random.PRNGKey(0), pgd_steps=0)


def test_feature_influence_equals_brute_force_loo_on_the_neural_tangents_kernel():
  """NTK-LOO influence from feature rows agrees with refitting without each row, on the empirical NTK that
  neural-tangents computes (independent of the closed-form kernel path)."""
  from influence import feature_influence
  data = load_dataset("mnist", "train", n=26, seed=2, flatten=True)
  f, _ = ntk.model_features("relu", data.x)
  model = ntk.two_layer_relu(64, f.shape[1], out_dim=10)
  _, params = model.init_fn(jax.random.PRNGKey(0), f.shape)
  y = np.eye(10)[data.y]
  got = feature_influence(model, params, f[:20], f[20:], y[:20], y[20:])
  k = np.asarray(ntk.empirical_ntk(model.apply_fn, params, f[:20]), np.float64)
  kt = np.asarray(ntk.empirical_ntk(model.apply_fn, params, f[20:], f[:20]), np.float64)
  ref = brute_force_loo_influence(k, kt, y[:20], y[20:], ridge=got.ridge).sum(axis=0)
  np.testing.assert_allclose(got.scores, ref, rtol=1e-3, atol=1e-3 * np.abs(ref).max())


def test_flip_rate_at_tiny_scale_and_float32_fraction_and_nan_scores():
  """Signs, not products (1e-200·1e-200 underflows to −0); τ read in its own precision (np.float32(0.1) is
  0.1, not 0.10000000149, which picked 11 of 100); NaN scores refused."""
  b = np.linspace(1.0, 2.0, 100) * 1e-200
  assert flip_rate(b, -b, top_fraction=0.07).rate == 1.0
  assert top_count(np.float32(0.1), 100) == 10 and top_count(np.float32(0.07), 100) == 7
  with pytest.raises(ValueError, match="finite"):
    top_influential(np.array([np.nan, 1.0, 2.0]), 0.34)


def test_ntk_loo_influence_refuses_a_non_symmetric_kernel():
  import numpy as np
  from influence import ntk_loo_influence
  rng = np.random.default_rng(0)
  a = rng.normal(size=(6, 4))
  k = a @ a.T
  y = np.eye(2)[[0, 1, 0, 1, 0, 1]]
  ntk_loo_influence(k, k[:3], y, y[:3])  # symmetric: fine
  bad = k.copy()
  bad[0, 1] += 0.5
  with pytest.raises(ValueError, match="k_train must be a symmetric kernel"):
    ntk_loo_influence(bad, k[:3], y, y[:3])


# --- Mutation-targeted tests: boundaries the tests above never reach, normalisations a symmetric or linear
# case cannot see, formulas pinned in full rather than through a ranking, functions otherwise reached only
# by the `long` experiment tests. ---

def _sym_block_kernel(n, diag, entries):
  """Diagonal kernel diag·I with the given {(row, col): value} entries set (possibly asymmetrically)."""
  k = np.diag(np.asarray(diag, np.float64) * np.ones(n))
  for (r, c), v in entries.items():
    k[r, c] = v
  return k


def test_symmetry_check_reads_rows_past_the_first_block_and_scales_by_the_largest_entry_anywhere():
  """Catches a symmetry check whose row-block loop stops early or whose scale is read from one block only
  (a boundary at n = 256 that the small kernels above never reach): n = 300. (a) An asymmetry only between
  rows 270 and 290 is refused. (b) An asymmetry of 1e-6·max|K| is accepted, with max |K| in the other row
  block than the asymmetry (measured against its own block's max |K| alone it would be 1). (c) The
  tolerance is relative: 2e-5·max|K| refused, 5e-6·max|K| accepted."""
  n, y, yt = 300, np.eye(300, 2), np.ones((1, 2))
  kt = np.ones((1, n))
  bad = _sym_block_kernel(n, 1.0, {(270, 290): 0.5})
  with pytest.raises(ValueError, match="symmetric kernel"):
    ntk_loo_influence(bad, kt, y, yt, ridge=1.0)
  for big, asym in ((280, (0, 1)), (5, (270, 290))):  # max |K| and the asymmetry in different blocks
    k = _sym_block_kernel(n, 1e-3, {(big, big): 1e3, asym: 1e-3})
    ntk_loo_influence(k, kt, y, yt, ridge=1.0)  # |K_ij − K_ji| = 1e-3 = 1e-6·max|K|: accepted
  for rel, ok in ((2e-5, False), (5e-6, True)):
    k = _sym_block_kernel(n, 1.0, {(280, 280): 4.0, (3, 5): rel * 4.0})
    if ok:
      ntk_loo_influence(k, kt, y, yt, ridge=1.0)
    else:
      with pytest.raises(ValueError, match="symmetric kernel"):
        ntk_loo_influence(k, kt, y, yt, ridge=1.0)


def test_a_nearly_symmetric_kernel_is_symmetrised_not_read_from_one_triangle():
  """Catches a symmetrisation dropped or done with K + K instead of K + Kᵀ (invisible on exactly symmetric
  kernels): K + E with E antisymmetric and below the refusal tolerance gives exactly the influence of K, and
  both equal refitting without each point (brute force on K)."""
  rng = np.random.default_rng(7)
  k_all = _psd(13, 8)
  k, kt = k_all[:9, :9], k_all[9:, :9]
  e = rng.normal(size=(9, 9))
  e = 3e-6 * np.abs(k).max() * (e - e.T) / np.abs(e - e.T).max()
  y, yt = np.eye(2)[rng.integers(0, 2, 9)], np.eye(2)[rng.integers(0, 2, 4)]
  ref = brute_force_loo_influence(k, kt, y, yt, ridge=0.01)
  got = ntk_loo_influence(k + e, kt, y, yt, ridge=0.01)
  np.testing.assert_allclose(got.per_pair, ref, rtol=1e-9, atol=1e-12 * np.abs(ref).max())
  upper = brute_force_loo_influence(k + np.triu(e, 1) + np.triu(e, 1).T, kt, y, yt, ridge=0.01)
  assert np.abs(upper - ref).max() > 1e-7 * np.abs(ref).max()  # reading one triangle alone would be seen


@pytest.mark.parametrize("float64", [True, False])
def test_both_precisions_give_the_refit_per_pair_influence_and_the_krr_predictions(float64):
  """Catches a wrong term or return value in either path, the float32 one in particular, which the tests
  above compare only through the summed scores at 1e-3: per-pair I_tj against refitting without each point,
  with a ridge large enough (λ = 0.5) that float32 is accurate to ~1e-5, C = 3 classes and t = 4 test points;
  and the predictions f = K_test (K + λI)⁻¹ Y written out in float64."""
  rng = np.random.default_rng(11)
  k_all = _psd(12, 12)
  k, kt = k_all[:8, :8], k_all[8:, :8]
  y, yt = np.eye(3)[rng.integers(0, 3, 8)], np.eye(3)[rng.integers(0, 3, 4)]
  got = ntk_loo_influence(k, kt, y, yt, ridge=0.5, float64=float64)
  ref = brute_force_loo_influence(k, kt, y, yt, ridge=0.5)
  tol = dict(rtol=1e-9, atol=1e-12) if float64 else dict(rtol=2e-4, atol=2e-5 * np.abs(ref).max())
  np.testing.assert_allclose(got.per_pair, ref, **tol)
  np.testing.assert_allclose(got.scores, ref.sum(axis=0), **tol)
  np.testing.assert_allclose(got.test_predictions, kt @ np.linalg.solve(k + 0.5 * np.eye(8), y), **tol)
  assert got.ridge == 0.5


@pytest.mark.parametrize("float64", [True, False])
def test_a_zero_ridge_and_an_indefinite_kernel_are_refused(float64):
  """Catches `λ ≤ 0` loosened to `λ < 0` (the test above reaches only λ = −1; K = I would factorise at λ = 0,
  so only the check refuses it) and a factorisation failure that is not turned into an error: K = diag(1, −1)
  with λ = 1/2 is symmetric but K + λI is indefinite, refused in both precisions instead of returning
  scores."""
  y, yt = np.eye(2), np.ones((1, 2))
  with pytest.raises(ValueError, match="ridge must be > 0"):
    ntk_loo_influence(np.eye(2), np.ones((1, 2)), y, yt, ridge=0.0, float64=float64)
  with pytest.raises(ValueError, match="not numerically positive definite"):
    ntk_loo_influence(np.diag([1.0, -1.0]), np.ones((1, 2)), y, yt, ridge=0.5, float64=float64)


def _ls_loss(w, x, y):
  return 0.5 * (jnp.dot(x, w) - y) ** 2


def test_influence_function_equals_its_closed_form_on_ridge_regression_with_damping():
  """Catches a dropped or doubled 1/n (in the mean training loss or on the scores), the test gradient
  averaged instead of summed, or the damping δ missing from one method (the tests above use n = 1 with a
  linear loss, or δ only with CG). Least squares ℓ = ½(wᵀx − y)² with Ω = (r/2)‖w‖², at a point that is not
  the minimiser: g_j = (wᵀx_j − y_j) x_j, H = (1/n) XᵀX + r I, I_j = (1/n) (Σ_t g_t)ᵀ (H + δI)⁻¹ g_j, written
  out in float64. (The logistic problem's shapes, so its compiled operations are reused.)"""
  with jax.enable_x64(True):
    x, y = _logreg_problem(80)
    xt, yt = _logreg_problem(8, seed=1)
    w, reg, n = np.random.default_rng(3).normal(size=4), 0.1, 80
    g = (x @ w - y)[:, None] * x
    g_test = ((xt @ w - yt)[:, None] * xt).sum(axis=0)
    regularizer = lambda w: 0.5 * reg * jnp.sum(w ** 2)  # noqa: E731
    for damping in (0.0, 0.3):
      want = g @ np.linalg.solve(x.T @ x / n + (reg + damping) * np.eye(4), g_test) / n
      for method in ("exact", "cg"):
        got = influence_function(_ls_loss, jnp.asarray(w), (jnp.asarray(x), jnp.asarray(y)),
                                 (jnp.asarray(xt), jnp.asarray(yt)), regularizer=regularizer, damping=damping,
                                 method=method)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12 * np.abs(want).max(),
                                   err_msg=f"{method}, δ = {damping}")


def test_tracin_pairs_each_learning_rate_with_its_own_checkpoint():
  """Catches learning rates paired with the wrong checkpoints, or one checkpoint used throughout (the test
  above uses the same checkpoint twice, which cannot tell): two distinct checkpoints, logistic gradients
  written out, ∇ℓ(w; x, y) = (σ(wᵀx) − y) x; and no checkpoints at all is refused."""
  with jax.enable_x64(True):
    x, y = _logreg_problem(7, 3, seed=4)
    xt, yt = _logreg_problem(3, 3, seed=5)
    ws, etas = [np.array([0.3, -0.2, 0.1]), np.array([-1.0, 0.5, 2.0])], [0.5, 0.1]
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    want = sum(eta * ((sig(x @ w) - y)[:, None] * x) @ ((sig(xt @ w) - yt)[:, None] * xt).sum(axis=0)
               for w, eta in zip(ws, etas))
    got = tracin(_logistic_loss, [jnp.asarray(w) for w in ws], etas, (jnp.asarray(x), jnp.asarray(y)),
                 (jnp.asarray(xt), jnp.asarray(yt)))
    np.testing.assert_allclose(got, want, rtol=1e-10)
  with pytest.raises(ValueError, match="learning rate"):
    tracin(_logistic_loss, [], [], (x, y), (xt, yt))


def test_filter_normalised_direction_is_the_same_unit_direction_for_any_weights_of_a_shape():
  """Catches an elementwise normalisation (|d| = |θ| entry by entry has the right column norms, so the test
  above cannot see it) and a wrong axis for weights of rank > 2: d_f/‖θ_f‖ depends on the key only, so it is
  equal for two different parameter sets of the same shapes; ‖d_f‖ = ‖θ_f‖ over all axes but the last (a
  [2, 3, 4] kernel); a filter with θ_f = 0 gets d_f = 0; 1-D and scalar leaves get zero."""
  rng = np.random.default_rng(0)
  shapes = {"conv": (2, 3, 4), "w": (3, 5), "b": (5,), "s": ()}
  p1 = {k: jnp.asarray(rng.normal(size=s), jnp.float32) for k, s in shapes.items()}
  p2 = {k: jnp.asarray(rng.normal(size=s) * 10, jnp.float32) for k, s in shapes.items()}
  p2["w"] = p2["w"].at[:, 1].set(0.0)
  key = jax.random.PRNGKey(4)
  direction = jax.jit(filter_normalized_direction)  # one compiled program for both parameter sets
  d1, d2 = direction(p1, key), direction(p2, key)
  for name in ("conv", "w"):
    axes = tuple(range(len(shapes[name]) - 1))
    n1, n2 = (np.sqrt(np.sum(np.asarray(p[name], np.float64) ** 2, axis=axes, keepdims=True)) for p in (p1, p2))
    np.testing.assert_allclose(np.sqrt(np.sum(np.asarray(d1[name]) ** 2, axis=axes, keepdims=True)), n1, rtol=1e-5)
    u1 = np.asarray(d1[name]) / n1
    live = np.broadcast_to(n2 > 0, u1.shape)
    np.testing.assert_allclose((np.asarray(d2[name]) / np.where(n2 > 0, n2, 1))[live], u1[live], rtol=1e-5,
                               atol=1e-6)
  assert np.all(np.asarray(d2["w"])[:, 1] == 0)
  assert np.all(np.asarray(d1["b"]) == 0) and np.asarray(d1["s"]) == 0 and np.asarray(d1["s"]).shape == ()


def test_two_direction_landscape_rows_follow_the_first_direction():
  """Catches the [g, g] grid transposed or a direction used twice (the test above passes one direction
  twice): f(θ) = cᵀθ + ‖θ‖² along two different directions, f(θ + a d₁ + b d₂) written out in float64."""
  with jax.enable_x64(True):
    theta = {"w": jnp.array([[1.0, -2.0], [0.5, 3.0]]), "b": jnp.array([0.25, -1.0])}
    c = {"w": jnp.array([[2.0, 0.0], [-1.0, 1.0]]), "b": jnp.array([3.0, -2.0])}
    d1 = {"w": jnp.array([[1.0, 0.0], [0.0, 0.0]]), "b": jnp.array([0.0, 1.0])}
    d2 = {"w": jnp.array([[0.0, 0.0], [2.0, -1.0]]), "b": jnp.array([1.0, 0.0])}
    f = lambda p: sum(jnp.sum(cc * pp + pp ** 2) for cc, pp in zip(jax.tree_util.tree_leaves(c),  # noqa: E731
                                                                   jax.tree_util.tree_leaves(p)))
    flat = lambda p: np.concatenate([np.ravel(v) for v in jax.tree_util.tree_leaves(p)])  # noqa: E731
    th, cc, e1, e2 = flat(theta), flat(c), flat(d1), flat(d2)
    alphas = [-1.0, 0.5, 2.0]
    want = np.array([[cc @ (th + a * e1 + b * e2) + np.sum((th + a * e1 + b * e2) ** 2) for b in alphas]
                     for a in alphas])
    np.testing.assert_allclose(loss_landscape(f, theta, [d1, d2], alphas), want, rtol=1e-6)
    np.testing.assert_allclose(loss_landscape(f, theta, [d2], alphas), want[1, :] + (
        [(cc @ (th + b * e2) + np.sum((th + b * e2) ** 2)) - want[1, i] for i, b in enumerate(alphas)]), rtol=1e-6)


def test_filter_normalised_rise_is_step_squared_times_the_weight_norm_on_a_quadratic():
  """Catches a one-sided or unhalved difference, or a wrong centre term in the filter-normalised rise (used
  only by the `long` landscape experiment): for f(θ) = cᵀθ + ‖θ‖², ½[f(θ + s d) + f(θ − s d)] − f(θ) =
  s²‖d‖², and filter normalisation makes ‖d‖² = Σ over weight matrices of ‖W‖² (biases get d = 0), whatever
  the key; the linear term makes a one-sided version visible. A step of 0 or ∞ is refused."""
  from influence.sharpness import filter_normalized_rise
  with jax.enable_x64(True):
    theta = {"w": jnp.array([[1.0, -2.0, 0.5], [0.5, 3.0, -1.0]]), "b": jnp.array([0.25, -1.0, 2.0])}
    c = {"w": jnp.full((2, 3), 1.5), "b": jnp.array([3.0, -2.0, 1.0])}
    f = lambda p: sum(jnp.sum(c[k] * p[k] + p[k] ** 2) for k in p)  # noqa: E731
    w_sq = float(np.sum(np.asarray(theta["w"]) ** 2))
    for step, seed in ((1.0, 0), (0.5, 1), (2.0, 2)):
      got = filter_normalized_rise(f, theta, jax.random.PRNGKey(seed), step=step)
      assert got == pytest.approx(step ** 2 * w_sq, rel=1e-9)
  for bad in (0.0, -1.0, float("inf")):
    with pytest.raises(ValueError, match="step must be finite and > 0"):
      filter_normalized_rise(f, theta, jax.random.PRNGKey(0), step=bad)


def test_hessian_eigenvalues_at_k_equal_to_the_parameter_count_and_at_a_krylov_breakdown():
  """Catches `k ≤ num_iters` or `k ≤ #params` tightened to `<` (boundaries the tests above never reach) and a
  breakdown test that divides by β ≈ 0: k = num_iters = p = 5 returns all five eigenvalues of a diagonal
  Hessian; on H = 2I the Krylov space closes after one step, so k = 3 warns and returns [2]."""
  with jax.enable_x64(True):
    lam = jnp.array([5.0, -1.0, 3.0, 0.5, 2.0])
    got = hessian_top_eigenvalues(lambda p: 0.5 * jnp.sum(lam * p ** 2), jnp.ones(5), k=5, num_iters=5)
    np.testing.assert_allclose(got, [5.0, 3.0, 2.0, 0.5, -1.0], rtol=1e-9, atol=1e-12)
    with pytest.warns(RuntimeWarning, match="closed after 1 steps"):
      closed = hessian_top_eigenvalues(lambda p: jnp.sum(p ** 2), jnp.ones(5), k=3, num_iters=5)
    np.testing.assert_allclose(closed, [2.0], rtol=1e-12)


def test_lanczos_convergence_warning_reads_the_wanted_top_ritz_pairs_only():
  """Catches the convergence check reading the bottom Ritz pairs (argsort not reversed; Lanczos converges at
  both ends, so a spectrum whose ends converge alike cannot tell): one eigenvalue 100 well separated above
  200 spread over [0, 20]; after 6 Lanczos steps the top pair has converged (residual ~5e-5·max|θ|, no
  warning) while the bottom one has not (~1e-2·max|θ|, above the 1e-3 tolerance)."""
  import warnings
  with jax.enable_x64(True):
    lam = jnp.concatenate([jnp.array([100.0]), jnp.linspace(0.0, 20.0, 200)])
    objective = lambda p: 0.5 * jnp.sum(lam * p ** 2)  # noqa: E731
    with warnings.catch_warnings():
      warnings.simplefilter("error")
      got = hessian_top_eigenvalues(objective, jnp.zeros(201), k=1, num_iters=6)
    np.testing.assert_allclose(got, [100.0], rtol=1e-6)


def test_matched_loss_scale_reaches_both_ends_of_its_interval():
  """Catches the range check `min ≤ target ≤ max` made strict (the test above targets interior losses only):
  a target equal to the loss at c = 0 returns 0; slightly beyond either end is refused; for a loss that
  rises with c the root is found too (closed form c² = target)."""
  from influence.sharpness import matched_loss_scale
  falling = lambda c: 1.0 - 0.5 * c  # noqa: E731
  assert matched_loss_scale(falling, 1.0) == pytest.approx(0.0, abs=1e-12)
  assert matched_loss_scale(falling, 0.75) == pytest.approx(0.5, abs=1e-10)
  for bad in (1.0 + 1e-6, 0.5 - 1e-6, float("nan")):
    with pytest.raises(ValueError):
      matched_loss_scale(falling, bad)
  rising = lambda c: c * c  # noqa: E731
  assert matched_loss_scale(rising, 0.0) == pytest.approx(0.0, abs=1e-9)
  assert matched_loss_scale(rising, 0.25) == pytest.approx(0.5, abs=1e-9)


def test_relative_shift_closed_forms():
  """Catches the shift measured against the after scores, or the zero-norm cases swapped (relative_shift
  has no test above): ‖a − b‖/‖b‖ for b = (3, 4), a = b + (6, 8) is 2 (against ‖a‖ it would be 2/3); zero
  before and moved is inf, neither moved is 0."""
  from influence import relative_shift
  b = np.array([3.0, 4.0])
  assert relative_shift(b, b + [6.0, 8.0]) == pytest.approx(2.0, rel=1e-15)
  assert relative_shift(b + [6.0, 8.0], b) == pytest.approx(10.0 / 15.0, rel=1e-15)
  assert relative_shift(b, b) == 0.0
  assert relative_shift(np.zeros(2), np.array([0.0, 0.5])) == np.inf
  assert relative_shift(np.zeros(2), np.zeros(2)) == 0.0
  with pytest.raises(ValueError, match="equal-length"):
    relative_shift(np.ones(2), np.ones(3))
  with pytest.raises(ValueError, match="NaN"):
    relative_shift(np.ones(2), np.array([1.0, np.inf]))


def test_flip_rate_reports_spearman_not_pearson_and_nan_for_constant_scores():
  """Catches Spearman's ρ replaced by Pearson's r (equal at ±1 on the linear maps above): a monotone but
  non-linear map has ρ = 1; random scores match 1 − 6Σd²/(n(n² − 1)) over the ranks written out; a constant
  side gives nan. Also ⌈τ·0⌉ = 0 is a valid count (n = 0 allowed)."""
  rng = np.random.default_rng(2)
  b = rng.normal(size=40)
  assert flip_rate(b, b ** 3 + 5 * b).spearman == pytest.approx(1.0, abs=1e-12)
  a = rng.normal(size=40)
  rank = lambda v: np.argsort(np.argsort(v))  # noqa: E731
  want = 1 - 6 * np.sum((rank(b) - rank(a)) ** 2) / (40 * (40 ** 2 - 1))
  assert flip_rate(b, a).spearman == pytest.approx(want, rel=1e-12)
  assert np.isnan(flip_rate(b, np.full(40, 2.0)).spearman) and np.isnan(flip_rate(np.ones(40), a).spearman)
  assert top_count(0.5, 0) == 0


def test_interior_sign_moves_the_pixels_exactly_at_its_boundaries_and_nothing_outside():
  """Catches `ε ≤ x ≤ 1 − ε` made strict or loosened (random pixels never sit on the boundary): with ε = 1/4
  (exact in binary), pixels at 1/4 and 3/4 move by exactly ±ε, both signs occurring, and stay in [0, 1];
  pixels at 0, 1/8, 7/8 and 1 stay. At ε = 1/2 only x = 1/2 moves; at ε = 1 nothing does, while the clipped
  random-sign control then sends every pixel to 0 or 1."""
  from influence import perturb_rows
  row = np.array([0.0, 0.125, 0.25, 0.5, 0.75, 0.875, 1.0], np.float32)
  x = np.tile(row, (64, 1))
  key = jax.random.PRNGKey(0)
  out = np.asarray(perturb_rows("interior_sign", None, x, None, eps=0.25, key=key))
  delta = out - x
  for col in (0, 1, 5, 6):
    assert np.all(delta[:, col] == 0)
  for col in (2, 3, 4):
    assert np.all(np.abs(delta[:, col]) == 0.25) and (delta[:, col] > 0).any() and (delta[:, col] < 0).any()
  assert out.min() >= 0 and out.max() <= 1
  half = np.asarray(perturb_rows("interior_sign", None, x, None, eps=0.5, key=key)) - x
  assert np.all(half[:, [0, 1, 2, 4, 5, 6]] == 0) and np.all(np.abs(half[:, 3]) == 0.5)
  assert np.all(np.asarray(perturb_rows("interior_sign", None, x, None, eps=1.0, key=key)) == x)
  full = np.asarray(perturb_rows("random_sign", None, x, None, eps=1.0, key=key))
  assert set(np.unique(full).tolist()) == {0.0, 1.0}


def _tanh_logits(w, x):
  return jnp.tanh(4 * x @ w[0]) @ w[1]


def test_perturb_rows_range_ends_the_default_pgd_step_and_the_steps_passed_on():
  """Catches the ranges ε ∈ [0, 1], α ∈ (0, 1] and steps ≥ 1 with an end moved, a default PGD step other
  than ε/30, and PGD / MIM run with other than the given steps (the test above only checks the budget):
  ε = 1, α = 1 and 1 step pass the checks (the call then stops at the refused α = 0, the last check), while
  ε < 0, α = 0 and 0 or True steps are refused; with a non-linear logits function, PGD with the default
  step equals attacks.pgd_linf with α = ε/30 (and differs from α = ε/3), and MIM equals attacks.mim at the
  given 3 steps."""
  import attacks
  from influence import perturb_rows
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.uniform(0.2, 0.8, size=(6, 5)), jnp.float32)
  y = jnp.asarray(rng.integers(0, 3, 6))
  logits_fn = jax.tree_util.Partial(_tanh_logits, (jnp.asarray(rng.normal(size=(5, 4)), jnp.float32),
                                                   jnp.asarray(rng.normal(size=(4, 3)), jnp.float32)))
  key = jax.random.PRNGKey(2)
  default = np.asarray(perturb_rows("pgd", logits_fn, x, y, eps=0.3, key=key, pgd_steps=3))

  def pgd(alpha):
    return np.asarray(attacks.pgd_linf(logits_fn, x, y, eps=0.3, alpha=alpha, steps=3, key=key).x_adv)

  np.testing.assert_array_equal(default, pgd(0.3 / 30))
  assert not np.array_equal(default, pgd(0.3 / 3))
  np.testing.assert_array_equal(np.asarray(perturb_rows("mim", logits_fn, x, y, eps=0.3, key=key, mim_steps=3)),
                                np.asarray(attacks.mim(logits_fn, x, y, eps=0.3, steps=3).x_adv))
  perturb_rows("pgd", logits_fn, x, y, eps=0.3, key=key, pgd_steps=3, pgd_alpha=1.0)
  with pytest.raises(ValueError, match="pgd_alpha"):  # ε = 1 and one step pass; α = 0 is refused
    perturb_rows("pgd", logits_fn, x, y, eps=1.0, key=key, pgd_steps=1, mim_steps=1, pgd_alpha=0.0)
  for kwargs, match in ((dict(eps=-0.01), "eps"), (dict(eps=0.1, mim_steps=0), "mim_steps"),
                        (dict(eps=0.1, pgd_steps=True), "pgd_steps"), (dict(eps=0.1, pgd_steps=0), "pgd_steps")):
    with pytest.raises(ValueError, match=match):
      perturb_rows("pgd", logits_fn, x, y, key=key, **kwargs)


def test_gram_shift_of_one_changed_row_and_with_a_given_base():
  """Catches the normalisation by the perturbed XᵀX or a base_DxD that is ignored: with only row 0 changed,
  X'ᵀX' − XᵀX = x₀'x₀'ᵀ − x₀x₀ᵀ, written out in float64; a given base B is the one subtracted and divided
  by."""
  from influence.malleability import gram_shift
  rng = np.random.default_rng(1)
  x = rng.uniform(size=(5, 4))
  xa = x.copy()
  xa[0] = rng.uniform(size=4)
  want = np.linalg.norm(np.outer(xa[0], xa[0]) - np.outer(x[0], x[0])) / np.linalg.norm(x.T @ x)
  assert gram_shift(x, xa) == pytest.approx(want, rel=1e-12)
  base = 2 * x.T @ x
  assert gram_shift(x, xa, base_DxD=base) == pytest.approx(np.linalg.norm(xa.T @ xa - base) / np.linalg.norm(base),
                                                           rel=1e-12)


def test_feature_influence_with_the_infinite_width_kernel_equals_refitting_on_the_arccos_ntk():
  """Catches the infinite-width branch (no other test reaches it) reading the wrong readout or the kernel
  blocks swapped, and a ridge not equal to ridge_scale·tr(K)/n (the test above takes the ridge from the
  result): K∞ of the trained readout written out in float64, xᵀx'(π − θ)/(2π) + ‖x‖‖x'‖(sin θ + (π − θ)cos θ)
  /(2π) (the fixed readout, arccos_ntk's default, has only the first term); the per-pair scores equal
  refitting without each row at λ = s·tr(K∞)/n, s = 0.05."""
  from influence import feature_influence
  rng = np.random.default_rng(5)
  f = rng.normal(size=(11, 4))
  y = np.eye(3)[rng.integers(0, 3, 11)]

  def arccos_trained(a, b):
    na, nb = np.linalg.norm(a, axis=1)[:, None], np.linalg.norm(b, axis=1)[None, :]
    theta = np.arccos(np.clip(a @ b.T / (na * nb), -1, 1))
    return (a @ b.T * (np.pi - theta) + na * nb * (np.sin(theta) + (np.pi - theta) * np.cos(theta))) / (2 * np.pi)

  model = ntk.two_layer_relu(8, 4, out_dim=3, readout="trained")  # not the default readout of arccos_ntk
  k, kt = arccos_trained(f[:8], f[:8]), arccos_trained(f[8:], f[:8])
  got = feature_influence(model, None, f[:8], f[8:], y[:8], y[8:], kernel="infinite", ridge_scale=0.05)
  assert got.ridge == pytest.approx(0.05 * np.trace(k) / 8, rel=1e-10)
  ref = brute_force_loo_influence(k, kt, y[:8], y[8:], ridge=0.05 * np.trace(k) / 8)
  np.testing.assert_allclose(got.per_pair, ref, rtol=1e-7, atol=1e-10 * np.abs(ref).max())
  with pytest.raises(ValueError, match="kernel must be one of"):
    feature_influence(model, None, f[:8], f[8:], y[:8], y[8:], kernel="nngp")
  with pytest.raises(ValueError, match="ridge_scale"):
    feature_influence(model, None, f[:8], f[8:], y[:8], y[8:], kernel="infinite", ridge_scale=0.0)


def test_attack_key_is_the_documented_fold_in_of_attack_and_rounded_budget():
  """Catches 1 + i replaced by i, or ε·1e6 truncated instead of rounded (0.00397·1e6 = 3969.9999999999995):
  attack_key(key, i, ε) = fold_in(fold_in(key, 1 + i), round(ε·1e6)), the scheme of the flip-rate experiment."""
  from influence.model_malleability import attack_key
  key = jax.random.PRNGKey(9)
  for i, eps in ((0, 0.00397), (2, 0.3), (1, 0.0)):
    want = jax.random.fold_in(jax.random.fold_in(key, 1 + i), round(eps * 1e6))
    np.testing.assert_array_equal(np.asarray(attack_key(key, i, eps)), np.asarray(want))
  assert 0.00397 * 1e6 < 3970


def _linear_logits(w, x):
  return x @ w


def _dot_kernel(a, b):
  a = np.asarray(a, np.float64)
  b = a if b is None else np.asarray(b, np.float64)
  return a @ b.T + 1.0


def test_influence_malleability_equals_the_step_by_step_recomputation():
  """Catches any step of the attack–reinfluence–flip pipeline done wrong (it is reached otherwise only by the
  `long` report tests): on a linear model with kernel xᵀx' + 1, each (attack, ε), attack-major, equals
  perturbing with attack_key(key, i, ε), refitting without each point on the perturbed kernels (brute force),
  the flip rate by its definition (τ = 0.3), Spearman's ρ, mean ‖δ‖∞/ε and the attacked accuracy; ε = 0 flips
  nothing. Precomputed clean kernels give the same result; labels C − 1 pass, C and n = 1 are refused."""
  from influence import perturb_rows
  from influence.model_malleability import attack_key, influence_malleability
  import scipy.stats
  rng = np.random.default_rng(4)
  n, t, d, c = 10, 4, 6, 3
  x = rng.uniform(0.2, 0.8, size=(n, d)).astype(np.float32)
  xt = rng.uniform(0.2, 0.8, size=(t, d)).astype(np.float32)
  y, yt = np.arange(n) % c, np.array([0, 1, 2, 2])
  logits_fn = jax.tree_util.Partial(_linear_logits, jnp.asarray(rng.normal(size=(d, c)), jnp.float32))
  key = jax.random.PRNGKey(1)
  attacks, eps = ("random_sign", "fgsm"), (0.0, 0.2)
  before, points = influence_malleability(_dot_kernel, logits_fn, x, y, xt, yt, c, eps=eps, attacks=attacks, key=key,
                                          top_fraction=0.3)
  onehot = np.eye(c)
  clean = brute_force_loo_influence(_dot_kernel(x, None), _dot_kernel(xt, x), onehot[y], onehot[yt],
                                    ridge=1e-3 * np.trace(_dot_kernel(x, None)) / n).sum(axis=0)
  np.testing.assert_allclose(before.scores, clean, rtol=1e-8, atol=1e-12 * np.abs(clean).max())
  assert [(p.attack, p.eps) for p in points] == [(a, e) for a in attacks for e in eps]
  for i, attack in enumerate(attacks):
    for e in eps:
      p = points[i * len(eps) + eps.index(e)]
      x_adv = np.asarray(perturb_rows(attack, logits_fn, jnp.asarray(x), jnp.asarray(y), eps=e,
                                      key=attack_key(key, i, e)))
      k = _dot_kernel(x_adv, None)
      after = brute_force_loo_influence(k, _dot_kernel(xt, x_adv), onehot[y], onehot[yt],
                                        ridge=1e-3 * np.trace(k) / n).sum(axis=0)
      rate, _ = _brute_force_flip_rate(clean.tolist(), after.tolist(), 0.3)
      assert (p.flip_rate, p.n_top, p.n_flipped) == (rate, 3, round(3 * rate)), (attack, e)
      assert p.spearman == pytest.approx(scipy.stats.spearmanr(clean, after).statistic, abs=1e-9)
      linf = np.abs(x_adv - x).max(axis=1)
      assert p.mean_linf_over_eps == (pytest.approx(linf.mean() / e, rel=1e-6) if e else 0.0)
      assert p.attacked_accuracy == pytest.approx(np.mean(np.argmax(x_adv @ np.asarray(logits_fn.args[0]), 1) == y))
      if e == 0:
        assert p.flip_rate == 0.0 and p.spearman == pytest.approx(1.0)
      else:
        assert p.mean_linf_over_eps == pytest.approx(1.0, rel=1e-6)  # every row has a pixel moved by exactly ε
  again, points_again = influence_malleability(
      _dot_kernel, logits_fn, x, y, xt, yt, c, eps=eps, attacks=attacks, key=key, top_fraction=0.3,
      clean_kernels=(_dot_kernel(x, None), _dot_kernel(xt, x)))
  np.testing.assert_array_equal(again.scores, before.scores)
  assert points_again == points
  y_top = np.full(n, c - 1)
  influence_malleability(_dot_kernel, logits_fn, x, y_top, xt, yt, c, eps=(0.0,), attacks=("fgsm",), key=key)
  for args, match in (((x, np.full(n, c), xt, yt), "y_train"), ((x, y, xt, np.full(t, c)), "y_test"),
                      ((x[:1], y[:1], xt, yt), "n >= 2")):
    with pytest.raises(ValueError, match=match):
      influence_malleability(_dot_kernel, logits_fn, *args, c, eps=(0.0,), attacks=("fgsm",), key=key)


def test_the_float64_leave_one_out_solve_runs_blas_on_one_thread(monkeypatch):
  """The float64 path runs its LAPACK / BLAS calls on one thread (OpenBLAS's threads made it 5-60x slower on 2
  cores: benchmarks/loo_threads.py) and gives the brute-force refits' influence."""
  import threadpoolctl

  from influence import ntk_loo
  seen = []
  serial = ntk_loo._loo_float64_serial
  def spy(*args):
    seen.append({i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"})
    return serial(*args)
  monkeypatch.setattr(ntk_loo, "_loo_float64_serial", spy)
  rng = np.random.default_rng(0)
  a = rng.normal(size=(12, 5))
  k, k_test = a @ a.T, rng.normal(size=(3, 5)) @ a.T
  y, y_test = rng.normal(size=(12, 2)), rng.normal(size=(3, 2))
  scores = ntk_loo.ntk_loo_influence(k, k_test, y, y_test, ridge=0.1).per_pair
  assert seen == [{1}]
  np.testing.assert_allclose(scores, ntk_loo.brute_force_loo_influence(k, k_test, y, y_test, ridge=0.1), rtol=1e-8,
                             atol=1e-12)


def test_relative_shift_neither_underflows_nor_overflows():
  """Scores near 1e-200 once gave a shift of 0 (their squared norms underflowed to 0) and scores near 1e200 or
  1e308 NaN (overflow): the ratio ‖a − b‖/‖b‖ is scale-free, so every scale gives the same closed form."""
  from influence.flip_rate import relative_shift
  b = np.array([3.0, 4.0])
  for scale in (1e-200, 1.0, 1e200):
    assert relative_shift(b * scale, -b * scale) == pytest.approx(2.0, rel=1e-15)
    assert relative_shift(b * scale, np.array([3.0, 5.0]) * scale) == pytest.approx(0.2, rel=1e-15)
  assert relative_shift(np.full(2, 1e308), np.full(2, -1e308)) == pytest.approx(2.0, rel=1e-15)
  assert relative_shift(np.zeros(2), np.array([0.0, 1e-200])) == math.inf
  assert relative_shift(np.zeros(3), np.zeros(3)) == 0.0
