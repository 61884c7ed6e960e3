"""Training to a stated criterion (ntk.criterion): learning rate chosen on a held-out split, train loss to a
target or an epoch cap, and the chunked run equal to one continuous Adam run; full-batch L-BFGS stopped at
the first iterate at or below the target."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntk.criterion import train_to_criterion, validation_split
from ntk.models import two_layer_relu
from ntk.training import train_adam

D, WIDTH = 8, 32


def _blobs(n, seed, separation=3.0):
  """Two well-separated Gaussian classes (linearly separable with overwhelming probability)."""
  rng = np.random.default_rng(seed)
  labels = np.arange(n) % 2
  centres = np.zeros((2, D))
  centres[0, 0], centres[1, 0] = separation, -separation
  x = (centres[labels] + rng.normal(size=(n, D))).astype(np.float32) / np.sqrt(D)
  return x, np.eye(2, dtype=np.float32)[labels]


def _model():
  model = two_layer_relu(WIDTH, D, out_dim=2, readout="trained")
  return model, model.init_fn(jax.random.PRNGKey(0), (-1, D))[1]


def test_reached_on_a_tiny_separable_problem():
  x, y = _blobs(64, 0)
  model, params = _model()
  result = train_to_criterion(model.apply_fn, params, x, y, key=jax.random.PRNGKey(1), learning_rates=(3e-2,),
                              target_loss=0.05, max_epochs=400, check_every=20, batch_size=32)
  assert result.reached and result.train_loss <= 0.05 and result.train_accuracy == 1.0
  assert 0 < result.epochs < 400 and result.epochs % 20 == 0
  assert result.candidates == () and result.learning_rate == 3e-2
  # The recorded loss is the model's cross-entropy, recomputed here independently.
  logits = np.asarray(model.apply_fn(result.params, x), np.float64)
  ce = np.mean(np.log(np.exp(logits).sum(1)) - (logits * y).sum(1))
  np.testing.assert_allclose(result.train_loss, ce, rtol=1e-4)


def test_not_reached_is_recorded_when_the_epoch_cap_stops_it():
  x, y = _blobs(64, 0, separation=0.3)  # overlapping classes: cross-entropy 1e-3 is out of reach
  model, params = _model()
  result = train_to_criterion(model.apply_fn, params, x, y, key=jax.random.PRNGKey(1), learning_rates=(1e-3,),
                              target_loss=1e-3, max_epochs=30, check_every=8, batch_size=32)
  assert not result.reached and result.epochs == 30 and result.train_loss > 1e-3
  assert result.max_epochs == 30 and result.target_loss == 1e-3


def test_the_chunked_run_is_one_continuous_adam_run():
  """Without reaching the target, 4 chunks of 5 epochs equal train_adam for 20 epochs: the Adam moments
  and step count carry over between chunks (resetting them would change every step after the first chunk)."""
  x, y = _blobs(48, 2)
  model, params = _model()
  key = jax.random.PRNGKey(3)
  result = train_to_criterion(model.apply_fn, params, x, y, key=key, learning_rates=(1e-2,), target_loss=0.0,
                              max_epochs=20, check_every=5, l2=1e-3, batch_size=16)
  reference = train_adam(model.apply_fn, params, x, y, key=key, learning_rate=1e-2, l2=1e-3, epochs=20,
                         batch_size=16)
  for a, b in zip(jax.tree_util.tree_leaves(result.params), jax.tree_util.tree_leaves(reference)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  assert not result.reached and result.epochs == 20


def test_the_chosen_rate_is_the_one_with_the_best_validation_accuracy():
  """A rate too small to move the network leaves validation at chance; a workable one separates."""
  x, y = _blobs(80, 4)
  model, params = _model()
  grid = (1e-7, 3e-2, 1e-6)
  result = train_to_criterion(model.apply_fn, params, x, y, key=jax.random.PRNGKey(5), learning_rates=grid,
                              target_loss=0.05, max_epochs=60, check_every=20, batch_size=32)
  assert [c.learning_rate for c in result.candidates] == list(grid)
  accuracies = [c.val_accuracy for c in result.candidates]
  assert result.learning_rate == 3e-2 == grid[int(np.argmax(accuracies))]
  assert accuracies[1] == 1.0 and max(accuracies[0], accuracies[2]) < 0.9, result.candidates
  assert result.reached


def test_validation_split_is_a_deterministic_disjoint_fifth():
  fit, val = validation_split(50, jax.random.PRNGKey(0))
  assert len(val) == 10 and len(fit) == 40
  np.testing.assert_array_equal(np.sort(np.concatenate([fit, val])), np.arange(50))
  fit2, val2 = validation_split(50, jax.random.PRNGKey(0))
  np.testing.assert_array_equal(val, val2)
  assert not np.array_equal(val, validation_split(50, jax.random.PRNGKey(1))[1])


@pytest.mark.parametrize("kwargs,match", [
    (dict(learning_rates=()), "learning_rates"),
    (dict(learning_rates=(1e-3, -1.0)), "learning_rates"),
    (dict(target_loss=-0.1), "target_loss"),
    (dict(max_epochs=-1), "max_epochs"),
    (dict(check_every=0), "check_every"),
    (dict(loss="hinge"), "loss"),
    (dict(l2=-1.0), "l2"),
    (dict(validation_fraction=1.0), "validation_fraction"),
    (dict(optimizer="sgd"), "optimizer"),
])
def test_bad_input_raises_value_error_naming_the_argument(kwargs, match):
  x, y = _blobs(10, 0)
  model, params = _model()
  with pytest.raises(ValueError, match=match):
    train_to_criterion(model.apply_fn, params, x, y, key=jax.random.PRNGKey(0),
                       **{"learning_rates": (1e-3, 1e-2), "max_epochs": 1, **kwargs})


def test_lbfgs_stops_at_the_first_iterate_at_or_below_the_target():
  """L-BFGS checks the loss at every iterate: one iteration fewer misses the target, and how the iterations
  are chunked into compiled loops does not change the run."""
  x, y = _blobs(64, 0)
  model, params = _model()
  kw = dict(key=jax.random.PRNGKey(1), target_loss=0.05, optimizer="lbfgs", learning_rates=(123.0,))
  result = train_to_criterion(model.apply_fn, params, x, y, max_epochs=500, check_every=7, **kw)
  assert result.reached and result.train_loss <= 0.05 and 1 < result.epochs < 500
  assert result.learning_rate is None and result.candidates == ()  # no rate: the line search sets each step
  short = train_to_criterion(model.apply_fn, params, x, y, max_epochs=result.epochs - 1, check_every=1, **kw)
  assert not short.reached and short.train_loss > 0.05 and short.epochs == result.epochs - 1
  again = train_to_criterion(model.apply_fn, params, x, y, max_epochs=500, check_every=1, **kw)
  assert again.epochs == result.epochs
  for a, b in zip(jax.tree_util.tree_leaves(again.params), jax.tree_util.tree_leaves(result.params)):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_lbfgs_with_an_l2_penalty_stops_on_the_data_loss_and_keeps_a_fixed_readout():
  x, y = _blobs(64, 1)
  model = two_layer_relu(WIDTH, D, out_dim=2, readout="fixed")
  params = model.init_fn(jax.random.PRNGKey(0), (-1, D))[1]
  result = train_to_criterion(model.apply_fn, params, x, y, key=jax.random.PRNGKey(1), target_loss=0.1,
                              max_epochs=300, check_every=50, l2=1e-4, optimizer="lbfgs")
  assert result.reached and result.train_loss <= 0.1
  np.testing.assert_array_equal(result.params["a"], params["a"])  # the ±1 readout is neither trained nor penalised
  logits = np.asarray(model.apply_fn(result.params, x), np.float64)
  ce = np.mean(np.log(np.exp(logits).sum(1)) - (logits * y).sum(1))  # the data loss, without the penalty
  np.testing.assert_allclose(result.train_loss, ce, rtol=1e-4)


def test_lbfgs_not_reached_when_the_iteration_cap_stops_it():
  x, y = _blobs(64, 0, separation=0.3)
  model, params = _model()
  result = train_to_criterion(model.apply_fn, params, x, y, key=jax.random.PRNGKey(1), target_loss=1e-3,
                              max_epochs=12, check_every=5, optimizer="lbfgs")
  assert not result.reached and result.epochs == 12 and result.train_loss > 1e-3


def test_full_ntk_of_the_fixed_readout_net_is_j_jt():
  """The closed form of the output-block NTK equals J Jᵀ from jax.jacrev of vec f(X) w.r.t. W."""
  from ntk.gauss_newton import full_ntk_fixed_readout
  model = two_layer_relu(16, D, out_dim=3, readout="fixed")
  params = model.init_fn(jax.random.PRNGKey(2), (-1, D))[1]
  x = np.asarray(jax.random.normal(jax.random.PRNGKey(3), (5, D)))
  jac = jax.jacrev(lambda w: model.apply_fn({"W": w, "a": params["a"]}, x).reshape(-1))(params["W"])
  jac = np.asarray(jac, np.float64).reshape(15, -1)
  np.testing.assert_allclose(full_ntk_fixed_readout(params, x), jac @ jac.T, rtol=1e-5, atol=1e-6)


def test_gauss_newton_reaches_an_mse_target_in_few_steps_and_refuses_what_it_cannot_train():
  x, y = _blobs(32, 3)
  model = two_layer_relu(256, D, out_dim=2, readout="fixed")
  params = model.init_fn(jax.random.PRNGKey(0), (-1, D))[1]
  kw = dict(key=jax.random.PRNGKey(1), loss="mse", target_loss=1e-4, max_epochs=50, optimizer="gauss_newton")
  result = train_to_criterion(model.apply_fn, params, x, y, **kw)
  assert result.reached and result.train_loss <= 1e-4 and result.epochs <= 10  # wide net: near-Newton steps
  f = np.asarray(model.apply_fn(result.params, x), np.float64)
  np.testing.assert_allclose(result.train_loss, 0.5 * np.mean((f - y) ** 2), rtol=1e-6)
  np.testing.assert_array_equal(result.params["a"], params["a"])
  with pytest.raises(ValueError, match="loss must be 'mse'"):
    train_to_criterion(model.apply_fn, params, x, y, **{**kw, "loss": "ce"})
  with pytest.raises(ValueError, match="fixed-readout"):
    trained, p = _model()
    train_to_criterion(trained.apply_fn, p, x, y, **kw)


def _nan_pixel(x, y):
  x = x.copy()
  x[0, 0] = np.nan
  return x, y


@pytest.mark.parametrize("bad,match", [
    (_nan_pixel, "x_NxD holds NaN"),
    (lambda x, y: (x, np.concatenate([y, y], axis=1)), "2 outputs but y_NxC has 4 columns"),
    (lambda x, y: (x[:, 0], y), r"x_NxD must have shape \[n, d\]"),
])
def test_bad_training_data_raises_naming_the_argument(bad, match):
  x, y = _blobs(10, 0)
  model, params = _model()
  x, y = bad(x, y)
  with pytest.raises(ValueError, match=match):
    train_to_criterion(model.apply_fn, params, x, y, key=jax.random.PRNGKey(0), optimizer="lbfgs", max_epochs=1)


def test_gauss_newton_refuses_another_model_with_the_same_params():
  x, y = _blobs(16, 0)
  model = two_layer_relu(32, D, out_dim=2, readout="fixed")
  params = model.init_fn(jax.random.PRNGKey(0), (-1, D))[1]
  doubled = jax.tree_util.Partial(lambda p, v: 2.0 * model.apply_fn(p, v))
  with pytest.raises(ValueError, match="two_layer_relu's fixed-readout apply_fn"):
    train_to_criterion(doubled, params, x, y, key=jax.random.PRNGKey(0), loss="mse", optimizer="gauss_newton",
                       max_epochs=3)


def test_gauss_newton_on_dead_relus_records_not_reached_with_the_cause():
  """Every ReLU inactive (W = −|W| on positive inputs): the empirical NTK is 0, so 1e-3·tr(K)/n damping was 0
  and the Cholesky factorisation raised LinAlgError. Now: not reached, 0 steps, the cause named, f unchanged."""
  from ntk.gauss_newton import ZERO_KERNEL, full_ntk_fixed_readout
  x, y = _blobs(12, 0)
  x = np.abs(x) + 0.1
  model = two_layer_relu(16, D, out_dim=2, readout="fixed")
  params = model.init_fn(jax.random.PRNGKey(0), (-1, D))[1]
  dead = dict(params, W=-jnp.abs(params["W"]))
  assert not np.any(full_ntk_fixed_readout(dead, x))
  result = train_to_criterion(model.apply_fn, dead, x, y, key=jax.random.PRNGKey(1), loss="mse",
                              target_loss=1e-3, max_epochs=5, optimizer="gauss_newton")
  assert not result.reached and result.epochs == 0 and result.stop_reason == ZERO_KERNEL
  np.testing.assert_allclose(result.train_loss, 0.5 * np.mean(np.asarray(y, np.float64) ** 2), rtol=1e-6)
  np.testing.assert_array_equal(result.params["W"], dead["W"])


def test_perturb_initial_is_relative_and_zero_is_the_identity():
  from experiments.trainers.network import perturb_initial
  params = {"W": jnp.arange(1.0, 7.0).reshape(2, 3), "a": jnp.ones((3, 1))}
  assert perturb_initial(params, 0.0, jax.random.PRNGKey(0)) is params
  moved = perturb_initial(params, 1e-3, jax.random.PRNGKey(0))
  rel = np.abs(np.asarray(moved["W"]) / np.asarray(params["W"]) - 1)
  assert 0 < rel.max() < 5e-3 and rel.mean() > 1e-4  # ξ ~ N(0, 1) times 1e-3
  again = perturb_initial(params, 1e-3, jax.random.PRNGKey(0))
  np.testing.assert_array_equal(again["W"], moved["W"])
