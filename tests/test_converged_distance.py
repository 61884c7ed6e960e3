"""Function distance at convergence: a trained network against the kernel regression with its empirical NTK
at initialisation and its own f₀ (ntk.distance.kernel_regression, function_distance)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntk.distance import function_distance, kernel_regression
from ntk.empirical import empirical_ntk, two_layer_relu_ntk
from ntk.models import two_layer_relu
from ntk.training import train_gd

N, T, D, P, C = 12, 8, 20, 200, 3
_A = np.random.default_rng(7).normal(size=(D, P))


def _features(x):
  return jnp.tanh(x @ _A) / np.sqrt(P)


def _linear_apply(params, x, **kwargs):
  """f(x) = φ(x)ᵀθ: linear in its parameters, so its NTK never moves (K = φ(X)φ(X)ᵀ)."""
  del kwargs
  return _features(x) @ params["theta"]


def _data(seed, c):
  rng = np.random.default_rng(seed)
  x, x_test = rng.normal(size=(N, D)), rng.normal(size=(T, D))
  x, x_test = (v / np.linalg.norm(v, axis=1, keepdims=True) for v in (x, x_test))
  y = np.eye(c)[rng.integers(0, c, N)] if c > 1 else np.where(rng.uniform(size=(N, 1)) > 0.5, 1.0, -1.0)
  return x, x_test, y


def test_a_model_linear_in_its_parameters_trained_to_convergence_is_its_kernel_regression():
  with jax.enable_x64(True):
    x, x_test, y = _data(0, C)
    params0 = {"theta": jnp.asarray(np.random.default_rng(1).normal(size=(P, C)))}
    phi, phi_test = np.asarray(_features(x)), np.asarray(_features(x_test))
    k, k_test = phi @ phi.T, phi_test @ phi.T
    np.testing.assert_allclose(empirical_ntk(_linear_apply, params0, x), k, rtol=1e-5, atol=1e-7)
    lam = np.linalg.eigvalsh(k)
    eta = N * C / lam[-1]  # ½·mean-squared-error GD contracts each mode by 1 − η λ/(nC)
    trained = train_gd(_linear_apply, params0, x, y, learning_rate=eta, steps=1500)
    np.testing.assert_allclose(_linear_apply(trained, x), y, atol=1e-12)  # converged: interpolates
    f0, f0_test = _linear_apply(params0, x), _linear_apply(params0, x_test)
    exact = kernel_regression(k, k_test, y, fx_train_0=f0, fx_test_0=f0_test, ridge_scale=0.0)
    assert exact.ridge == 0.0
    assert function_distance(_linear_apply(trained, x_test), exact.test, f0_test).relative < 1e-9
    ridged = kernel_regression(k, k_test, y, fx_train_0=f0, fx_test_0=f0_test)
    assert ridged.ridge == pytest.approx(1e-6 * np.trace(k) / N, rel=1e-12)
    near = function_distance(_linear_apply(trained, x_test), ridged.test, f0_test)
    assert 0 < near.relative < 10 * ridged.ridge / lam[0]  # only the ridge separates them


def _relu_distance(width, seed):
  x, x_test, y = (v.astype(np.float32) for v in _data(seed, 1))
  model = two_layer_relu(width, D)
  _, params0 = model.init_fn(jax.random.PRNGKey(seed), (-1, D))
  k = np.asarray(two_layer_relu_ntk(model, params0, x))
  k_test = np.asarray(two_layer_relu_ntk(model, params0, x_test, x))
  eta = N / np.linalg.eigvalsh(k.astype(np.float64))[-1]
  trained = train_gd(model.apply_fn, params0, x, y, learning_rate=eta, steps=2000)
  residual = float(np.abs(np.asarray(model.apply_fn(trained, x)) - y).max())
  f0_test = model.apply_fn(params0, x_test)
  pred = kernel_regression(k, k_test, y, fx_train_0=model.apply_fn(params0, x), fx_test_0=f0_test)
  return residual, function_distance(model.apply_fn(trained, x_test), pred.test, f0_test)


def test_a_width_16_relu_network_trained_to_fit_is_not_its_initial_kernel_regression_and_a_wide_one_nearly_is():
  narrow = [_relu_distance(16, seed) for seed in range(2)]
  wide = [_relu_distance(2048, seed) for seed in range(2)]
  assert all(res < 1e-3 for res, _ in narrow + wide)  # both fit the training set
  assert all(d.relative > 0.1 for _, d in narrow), narrow
  assert np.mean([d.relative for _, d in wide]) < 0.2 * np.mean([d.relative for _, d in narrow]), (narrow, wide)


@pytest.mark.parametrize("kwargs,match", [
    (dict(ridge_scale=-1.0), "ridge_scale"),
    (dict(fx_train_0=np.zeros((3, 2))), "fx_train_0"),
    (dict(k_train_train_NxN=np.zeros((2, 2))), "kernel shapes"),
    (dict(k_train_train_NxN=-np.eye(4), ridge_scale=0.0), "positive definite"),
])
def test_kernel_regression_rejects_bad_input(kwargs, match):
  args = dict(k_train_train_NxN=np.eye(4), k_test_train_TxN=np.ones((2, 4)), y_train_NxC=np.ones((4, 2)),
              fx_train_0=np.zeros((4, 2)), fx_test_0=np.zeros((2, 2)))
  args.update(kwargs)
  with pytest.raises(ValueError, match=match):
    kernel_regression(**args)


def test_function_distance_closed_form():
  f0 = np.zeros((2, 2))
  d = function_distance(np.array([[1.0, 0], [0, 0]]), np.array([[0.0, 0], [0, 2]]), f0)
  assert d.distance == pytest.approx(np.sqrt(5)) and d.rms == pytest.approx(np.sqrt(5) / 2)
  assert d.relative == pytest.approx(np.sqrt(5) / 2)
  with pytest.raises(ValueError, match="same"):
    function_distance(np.zeros(3), np.zeros(2), np.zeros(3))


def test_matched_time_rule_closed_form_and_a_linear_model_at_that_time_is_its_predictor():
  """L(t)/L(0) = Σᵢ e^{−2λᵢt/N}‖uᵢᵀy‖² / ‖y‖² for a diagonal kernel, so matched_time inverts it; and a model
  linear in its parameters, trained by GD for t/η steps, sits on its NTK predictor at t (distance 0 up to
  the rounding of the steps) with train loss ½·L(0)·fraction."""
  from ntk.sweep import matched_time
  from ntk.training import ntk_predict
  lam, y = np.array([4.0, 1.0, 0.25]), np.array([[1.0], [2.0], [0.5]])
  t = matched_time(np.diag(lam), y, loss_fraction=0.3)
  assert np.sum(np.exp(-2 * lam * t / 3) * y[:, 0] ** 2) / np.sum(y ** 2) == pytest.approx(0.3, rel=1e-9)
  assert matched_time(np.diag([1.0, 0.0, 0.0]), y, loss_fraction=0.3) == float("inf")  # null space holds 81 %
  with pytest.raises(ValueError, match="loss_fraction"):
    matched_time(np.diag(lam), y, loss_fraction=1.0)
  with jax.enable_x64(True):
    x, x_test, y = _data(0, C)
    params0 = {"theta": jnp.zeros((P, C), jnp.float64)}  # f₀ = 0, as matched_time assumes
    phi, phi_test = np.asarray(_features(x)), np.asarray(_features(x_test))
    k, k_test = phi @ phi.T, phi_test @ phi.T
    t = matched_time(k, y, loss_fraction=0.5)
    steps = 4000
    trained = train_gd(_linear_apply, params0, x, y, learning_rate=t / steps, steps=steps)
    pred = ntk_predict(k, k_test, y, time=t)
    f_test = np.asarray(_linear_apply(trained, x_test))
    assert function_distance(f_test, pred.test, np.zeros_like(f_test)).relative < 5e-3  # Euler vs flow
    loss = 0.5 * np.mean((np.asarray(_linear_apply(trained, x)) - y) ** 2)
    assert loss == pytest.approx(0.5 * 0.5 * np.mean(y ** 2), rel=1e-2)
