"""Gradient descent on the finite net vs the NTK predictor; kernel distance helpers."""
import jax
import numpy as np
import pytest

import ntk
from ntk.distance import loglog_fit, relative_frobenius, spectral_distance
from ntk.training import half_mse, ntk_predict, train_gd


def _unit_rows(n, d, seed):
  x = np.random.default_rng(seed).uniform(size=(n, d)).astype(np.float32)
  return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_wide_network_trained_by_gd_matches_ntk_predictor_and_gap_falls_with_width():
  x, x_test = _unit_rows(48, 40, 0), _unit_rows(16, 40, 1)
  y = np.eye(3, dtype=np.float32)[np.random.default_rng(2).integers(0, 3, 48)]
  k_train, k_test = np.asarray(ntk.arccos_ntk(x)), np.asarray(ntk.arccos_ntk(x_test, x))
  lr, steps = 10.0, 150
  gaps = {}
  for width in (128, 4096):
    per_seed = []
    for seed in range(3):
      model = ntk.two_layer_relu(width, 40, out_dim=3)
      _, params = model.init_fn(jax.random.PRNGKey(seed), (-1, 40))
      f0_test = np.asarray(model.apply_fn(params, x_test))
      trained = train_gd(model.apply_fn, params, x, y, learning_rate=lr, steps=steps)
      pred = ntk_predict(k_train, k_test, y, time=lr * steps,
                         fx_train_0=model.apply_fn(params, x), fx_test_0=f0_test)
      change = np.linalg.norm(pred.test - f0_test)
      per_seed.append(np.linalg.norm(np.asarray(model.apply_fn(trained, x_test)) - pred.test) / change)
    gaps[width] = float(np.mean(per_seed))
  assert gaps[4096] < 0.08, gaps
  assert gaps[4096] < 0.5 * gaps[128], gaps


def test_ntk_predictor_closed_form_on_a_tiny_problem():
  """With f₀ = 0: f_t(X) = (I − exp(−tK/(nC))) Y, checked by eigendecomposition."""
  k = np.array([[2.0, 0.5], [0.5, 1.0]], np.float32)
  y = np.array([[1.0], [-1.0]], np.float32)
  t = 3.0
  lam, v = np.linalg.eigh(k.astype(np.float64))
  expected = v @ np.diag(1 - np.exp(-t * lam / y.size)) @ v.T @ y
  pred = ntk_predict(k, k, y, time=t)
  np.testing.assert_allclose(pred.train, expected, rtol=1e-5)
  np.testing.assert_allclose(pred.test, expected, rtol=1e-5)  # test points = training points


def test_gd_zero_steps_is_identity_and_loss_decreases():
  x = _unit_rows(10, 5, 3)
  y = np.eye(2, dtype=np.float32)[np.arange(10) % 2]
  model = ntk.two_layer_relu(64, 5, out_dim=2)
  _, params = model.init_fn(jax.random.PRNGKey(0), (-1, 5))
  same = train_gd(model.apply_fn, params, x, y, learning_rate=1.0, steps=0)
  np.testing.assert_array_equal(same["W"], params["W"])
  trained = train_gd(model.apply_fn, params, x, y, learning_rate=1.0, steps=50)
  assert half_mse(model.apply_fn(trained, x), y) < half_mse(model.apply_fn(params, x), y)
  np.testing.assert_array_equal(trained["a"], params["a"])  # fixed readout stays fixed
  for bad in (-1.0, float("nan"), "0.1"):
    with pytest.raises(ValueError, match="learning_rate must be a finite number > 0"):
      train_gd(model.apply_fn, params, x, y, learning_rate=bad, steps=5)
  with pytest.raises(ValueError, match="time"):
    ntk_predict(np.eye(2), np.eye(2), np.ones((2, 1)), time=-1.0)


def test_distances_and_loglog_fit():
  k_inf = np.diag([4.0, 1.0])
  k_m = k_inf + np.array([[0.0, 0.5], [0.5, 0.0]])
  assert relative_frobenius(k_m, k_inf) == pytest.approx(np.sqrt(0.5) / np.sqrt(17))
  sd = spectral_distance(k_m, k_inf)
  assert sd.operator_norm == pytest.approx(0.5) and sd.lambda_min == pytest.approx(1.0)
  assert sd.ratio_to_lambda_min == pytest.approx(0.5)
  widths = np.array([16, 64, 256, 1024] * 2)
  fit = loglog_fit(widths, 3.0 * widths ** -0.5)
  assert fit.slope == pytest.approx(-0.5) and fit.slope_stderr < 1e-6
  assert fit.width_reaching(3.0 / 32) == pytest.approx(1024.0)
  assert spectral_distance(k_m, np.diag([1.0, 0.0])).ratio_to_lambda_min == float("inf")
  with pytest.raises(ValueError, match="at least 2 distinct"):
    loglog_fit([4, 4, 4], [1.0, 2.0, 3.0])
  with pytest.raises(ValueError, match="positive"):
    loglog_fit([1, 2, 4], [1.0, 0.0, 3.0])


@pytest.mark.parametrize("kwargs", [dict(learning_rate=float("nan")), dict(learning_rate=float("inf")),
                                    dict(l2=float("nan")), dict(batch_size=0)])
def test_train_adam_rejects_non_finite_or_out_of_range_settings(kwargs):
  from ntk.training import train_adam
  model = ntk.two_layer_relu(8, 3, out_dim=2)
  _, params = model.init_fn(jax.random.PRNGKey(0), (4, 3))
  x, y = np.ones((4, 3), np.float32), np.eye(2, dtype=np.float32)[[0, 1, 0, 1]]
  with pytest.raises(ValueError, match="need learning_rate finite"):
    train_adam(model.apply_fn, params, x, y, key=jax.random.PRNGKey(0), epochs=1, **kwargs)


def _normalized(x_rows):
  return x_rows / jax.numpy.linalg.norm(x_rows, axis=1, keepdims=True)


def test_adversarial_training_equals_the_hand_unrolled_madry_loop():
  """Adam on the clean rows, then per round PGD-L∞ on every row against the current network and Adam on the
  attacked rows' features, with the documented keys; and rounds = 0 is plain Adam on the clean rows."""
  import attacks
  from ntk.training import adversarial_train_adam, train_adam
  rng = np.random.default_rng(0)
  x = rng.uniform(size=(12, 6)).astype(np.float32)
  y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 12)]
  model = ntk.two_layer_relu(16, 6, out_dim=3)
  _, params0 = model.init_fn(jax.random.PRNGKey(0), x.shape)
  key, attack_key = jax.random.PRNGKey(1), jax.random.PRNGKey(2)
  kw = dict(loss="ce", learning_rate=1e-2, l2=1e-3, batch_size=4, epochs=3)
  got = adversarial_train_adam(model.apply_fn, params0, x, y, key=key, attack_key=attack_key,
                               features_fn=_normalized, eps=0.2, rounds=2, epochs_per_round=3, pgd_steps=4,
                               loss="ce", learning_rate=1e-2, l2=1e-3, batch_size=4)
  params = train_adam(model.apply_fn, params0, _normalized(x), y, key=key, **kw)
  for r in range(2):
    logits_fn = jax.tree_util.Partial(lambda p, rows: model.apply_fn(p, _normalized(rows)), params)
    x_adv = attacks.pgd_linf(logits_fn, x, y.argmax(1), eps=0.2, alpha=0.2 / 30, steps=4,
                             key=jax.random.fold_in(attack_key, r)).x_adv
    assert np.max(np.abs(np.asarray(x_adv) - x)) <= 0.2 + 1e-6 and np.max(np.abs(np.asarray(x_adv) - x)) > 0.1
    params = train_adam(model.apply_fn, params, _normalized(x_adv), y, key=jax.random.fold_in(key, r + 1), **kw)
  for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(params)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)
  none = adversarial_train_adam(model.apply_fn, params0, x, y, key=key, attack_key=attack_key,
                                features_fn=_normalized, eps=0.2, rounds=0, epochs_per_round=3, pgd_steps=4,
                                loss="ce", learning_rate=1e-2, l2=1e-3, batch_size=4)
  clean = train_adam(model.apply_fn, params0, _normalized(x), y, key=key, **kw)
  for a, b in zip(jax.tree_util.tree_leaves(none), jax.tree_util.tree_leaves(clean)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("kwargs,match", [(dict(eps=1.5), "eps"), (dict(rounds=-1), "rounds"),
                                          (dict(pgd_steps=0), "pgd_steps"), (dict(pgd_alpha=0.0), "pgd_alpha")])
def test_adversarial_training_rejects_out_of_range_settings(kwargs, match):
  from ntk.training import adversarial_train_adam
  model = ntk.two_layer_relu(8, 3, out_dim=2)
  _, params = model.init_fn(jax.random.PRNGKey(0), (4, 3))
  x, y = np.full((4, 3), 0.5, np.float32), np.eye(2, dtype=np.float32)[[0, 1, 0, 1]]
  args = dict(key=jax.random.PRNGKey(0), attack_key=jax.random.PRNGKey(1), features_fn=_normalized, eps=0.1,
              rounds=1, epochs_per_round=1, pgd_steps=1)
  with pytest.raises(ValueError, match=match):
    adversarial_train_adam(model.apply_fn, params, x, y, **{**args, **kwargs})
