"""The fixed-readout loss floor (ntk.loss_floor): closed forms, invariance, and soundness against networks."""
import jax
import numpy as np
import pytest
import scipy.optimize

from ntk.criterion import train_to_criterion
from ntk.loss_floor import fixed_readout_loss_floor
from ntk.models import readout_weights, two_layer_relu


def test_one_shared_unit_has_the_closed_form_floor():
  # m = 1, a = 1ᵀ: every output equals h ≥ 0, so the best is h = 1/C and ‖h·1 − e_c‖² = 1 − 1/C.
  for c in (2, 3, 10):
    expected = 0.5 * (1 - 1 / c) / c
    assert fixed_readout_loss_floor(np.ones((1, c)), np.arange(c)) == pytest.approx(expected, rel=1e-12)


def test_a_readout_holding_each_basis_vector_has_floor_zero():
  a = np.concatenate([np.eye(4), -np.ones((3, 4))])
  assert fixed_readout_loss_floor(a, np.array([0, 1, 2, 3, 3])) == pytest.approx(0.0, abs=1e-15)


def test_a_class_outside_the_cone_has_its_own_closed_form():
  # a = [[1, -1]]: f = (h, -h), so class 1's target (0, 1) is best met by h = 0 with error 1.
  a = np.array([[1.0, -1.0]])
  assert fixed_readout_loss_floor(a, np.array([1])) == pytest.approx(0.5 * 1.0 / 2)
  # class 0's target (1, 0): min_h (h − 1)² + h² at h = ½ gives ½.
  assert fixed_readout_loss_floor(a, np.array([0])) == pytest.approx(0.5 * 0.5 / 2)


def test_floor_is_invariant_to_a_positive_rescaling_of_the_readout():
  a = np.random.default_rng(0).choice([-1.0, 1.0], size=(16, 10))
  labels = np.random.default_rng(1).integers(0, 10, 50)
  base = fixed_readout_loss_floor(a, labels)
  assert base > 0
  for c in (1e-3, 0.5, 7.0):
    assert fixed_readout_loss_floor(c * a, labels) == pytest.approx(base, rel=1e-9)


def test_no_fixed_readout_network_goes_below_its_floor():
  width, d, n, c = 16, 12, 40, 10
  model = two_layer_relu(width, d, out_dim=c, readout="fixed")
  rng = np.random.default_rng(2)
  x = rng.normal(size=(n, d)).astype(np.float32)
  labels = np.arange(n) % c
  y = np.eye(c)[labels]
  _, params = model.init_fn(jax.random.PRNGKey(3), (n, d))
  floor = fixed_readout_loss_floor(np.asarray(readout_weights(model, params)), labels)
  assert floor > 0.005  # a 16-unit ±1 readout misses most of the 10 one-hot targets
  half_mse = lambda w: 0.5 * float(np.mean((np.asarray(model.apply_fn({**params, "W": w}, x)) - y) ** 2))
  trained = train_to_criterion(model.apply_fn, params, x, y.astype(np.float32), key=jax.random.PRNGKey(4),
                               loss="mse", target_loss=0.0, max_epochs=500, optimizer="lbfgs")
  assert trained.train_loss >= floor
  for seed in range(20):
    w_rand = jax.numpy.asarray(np.random.default_rng(seed).normal(scale=3.0, size=params["W"].shape),
                               params["W"].dtype)
    assert half_mse(w_rand) >= floor


def test_the_floor_is_attained_when_each_input_can_choose_its_hidden_vector():
  # Inputs e_i ∈ ℝⁿ: relu(Wᵀe_i) = relu(W[i]), so row i of W can be the NNLS optimum of its class.
  width, c, n = 16, 10, 30
  model = two_layer_relu(width, n, out_dim=c, readout="fixed")
  _, params = model.init_fn(jax.random.PRNGKey(5), (n, n))
  a = np.asarray(readout_weights(model, params), np.float64)
  labels = np.arange(n) % c
  best = np.stack([scipy.optimize.nnls(a.T / np.sqrt(width), np.eye(c)[k])[0] for k in range(c)])
  with jax.enable_x64(True):
    f = model.apply_fn({"W": jax.numpy.asarray(best[labels]), "a": jax.numpy.asarray(a)}, np.eye(n))
    loss = 0.5 * float(np.mean((np.asarray(f) - np.eye(c)[labels]) ** 2))
  assert loss == pytest.approx(fixed_readout_loss_floor(a, labels), rel=1e-9)


@pytest.mark.parametrize("readout, labels, match", [
    (np.ones(3), np.array([0]), "readout_MxC"),
    (np.array([[np.nan, 1.0]]), np.array([0]), "readout_MxC must be finite"),
    (np.array([[1 + 1j, 1.0]]), np.array([0]), "readout_MxC must hold real numbers"),
    (np.array([["a", "b"]]), np.array([0]), "readout_MxC must hold real numbers"),
    (np.ones((2, 3)), np.array([], int), "labels_N"),
    (np.ones((2, 3)), np.array([0.0, 1.0]), "labels_N"),
    (np.ones((2, 3)), np.array([0, 3]), r"\[0, 3\)"),
])
def test_bad_input_is_refused_naming_the_argument(readout, labels, match):
  with pytest.raises(ValueError, match=match):
    fixed_readout_loss_floor(readout, labels)
