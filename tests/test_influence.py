"""Influence estimators: NTK LOO closed form vs brute force, sign convention, influence function vs LOO
retraining, CG vs exact, TracIn, Hessian eigenvalues, flip rate."""
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
