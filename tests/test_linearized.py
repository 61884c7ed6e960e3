"""ntk.linearized: the fixed-readout 2-layer ReLU network's linearisation at initialisation (Lee et al. 2019,
arXiv 1902.06720 eq. (6)) is the network with its gates frozen at W₀."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ntk
from ntk.criterion import train_to_criterion
from ntk.linearized import gated_inputs, linearized_two_layer_relu


def _setup(width=32, d=6, n=9, c=3, seed=0):
  model = ntk.two_layer_relu(width, d, out_dim=c)
  _, params = model.init_fn(jax.random.PRNGKey(seed), (n, d))
  x = np.asarray(jax.random.normal(jax.random.PRNGKey(seed + 1), (n, d)), np.float32)
  return model, params, x


def test_equals_the_network_at_initialisation():
  model, params, x = _setup()
  lin = linearized_two_layer_relu(32, 6)
  np.testing.assert_allclose(lin(params, gated_inputs(x, params["W"])), model.apply_fn(params, x), rtol=1e-5,
                             atol=1e-6)


def test_is_the_first_order_taylor_expansion_for_any_w():
  # f_lin(W) = f(W₀) + J(W₀)(W − W₀), the Jacobian-vector product of the network itself, for a W far from W₀.
  model, params, x = _setup()
  w = params["W"] + 0.7 * jax.random.normal(jax.random.PRNGKey(5), params["W"].shape)
  f0, jvp = jax.jvp(lambda w_: model.apply_fn({"W": w_, "a": params["a"]}, x), (params["W"],), (w - params["W"],))
  lin = linearized_two_layer_relu(32, 6)
  got = lin({"W": w, "a": params["a"]}, gated_inputs(x, params["W"]))
  np.testing.assert_allclose(got, f0 + jvp, rtol=1e-4, atol=1e-5)
  # ... and differs from the network there (the gates moved): the check can fail.
  assert np.max(np.abs(np.asarray(got) - np.asarray(model.apply_fn({"W": w, "a": params["a"]}, x)))) > 1e-2


def test_its_tangent_kernel_is_the_empirical_ntk_at_initialisation_for_every_w():
  model, params, x = _setup()
  lin = linearized_two_layer_relu(32, 6)
  rows = gated_inputs(x, params["W"])
  w = params["W"] + jax.random.normal(jax.random.PRNGKey(9), params["W"].shape)

  def kernel(fn, w_):
    jac = jax.jacobian(lambda v: fn({"W": v, "a": params["a"]})[:, 0])(w_).reshape(x.shape[0], -1)
    return jac @ jac.T
  k0 = kernel(lambda p: model.apply_fn(p, x), params["W"])
  np.testing.assert_allclose(kernel(lambda p: lin(p, rows), w), k0, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(k0, ntk.two_layer_relu_ntk(model, params, x) , rtol=1e-4, atol=1e-5)


def test_trains_by_the_same_recipe_and_the_readout_stays_fixed():
  model, params, x = _setup(n=40)
  y = np.eye(3, dtype=np.float32)[np.arange(40) % 3]
  lin = linearized_two_layer_relu(32, 6)
  result = train_to_criterion(lin, params, gated_inputs(x, params["W"]), y, key=jax.random.PRNGKey(0),
                              learning_rates=(1e-2,), target_loss=0.0, max_epochs=20, check_every=10, l2=1e-3,
                              batch_size=16)
  np.testing.assert_array_equal(result.params["a"], params["a"])
  assert result.epochs == 20 and result.train_loss < float(jnp.mean(ntk.training.softmax_cross_entropy(
      lin(params, gated_inputs(x, params["W"])), y)))


@pytest.mark.parametrize("x, w, match", [
    (np.zeros((3, 4)), np.zeros((5, 2)), "share d"),
    (np.full((3, 4), np.nan), np.zeros((4, 2)), "finite"),
])
def test_gated_inputs_refuses_bad_input(x, w, match):
  with pytest.raises(ValueError, match=match):
    gated_inputs(x, w)


def test_refuses_a_bad_width():
  with pytest.raises(ValueError, match="width"):
    linearized_two_layer_relu(0, 3)
