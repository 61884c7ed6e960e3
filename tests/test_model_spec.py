"""ModelSpec (attention.model_spec): a valid spec gives its logits (with preprocess composed before apply_fn);
each kind of bad spec or bad data gets a one-line ValueError naming what is wrong."""
import jax.numpy as jnp
import numpy as np
import pytest

from attention.model_spec import ModelSpec, spec_logits, validate_model_spec

W = jnp.arange(12.0).reshape(4, 3) / 10


def _apply(params, x):
  return x.reshape(x.shape[0], -1) @ params["w"]


def _spec(**change):
  base = ModelSpec(name="lin", apply_fn=_apply, params={"w": W}, num_classes=3)
  return base._replace(**change)


X = jnp.linspace(0.0, 1.0, 8).reshape(2, 2, 2)


def test_valid_spec_returns_its_logits_and_composes_preprocess():
  np.testing.assert_allclose(np.asarray(validate_model_spec(_spec(), X)), np.asarray(X.reshape(2, 4) @ W), rtol=1e-6)
  spec = _spec(preprocess=lambda x: 2.0 * x - 1.0, init_params={"w": jnp.zeros((4, 3))})
  expected = (2.0 * X - 1.0).reshape(2, 4) @ W
  np.testing.assert_allclose(np.asarray(validate_model_spec(spec, X)), np.asarray(expected), rtol=1e-6)
  assert float(jnp.abs(spec_logits(spec, spec.init_params)(X)).max()) == 0.0


@pytest.mark.parametrize("spec, x, match", [
    ((lambda p, x: x, {"w": W}), X, "must return an attention.model_spec.ModelSpec"),
    (_spec(name=""), X, "name"),
    (_spec(apply_fn=3), X, "apply_fn must be callable"),
    (_spec(num_classes=1), X, "num_classes"),
    (_spec(input_range=(1.0, 0.0)), X, "input_range"),
    (_spec(init_params={"w": jnp.zeros((3, 3))}), X, "init_params"),
    (_spec(), X + 2.0, "outside input_range"),
    (_spec(), X.reshape(2, 2, 2, 1)[:, :, :1], "does not fit the model"),
    (_spec(apply_fn=lambda p, x: _apply(p, x) * jnp.nan), X, "NaN"),
    (_spec(apply_fn=lambda p, x: _apply(p, x)[:, :2]), X, r"logits \[batch, num_classes\]"),
    (_spec(num_classes=4), X, r"\[2, 4\]"),
])
def test_bad_spec_or_data_gets_one_line_error(spec, x, match):
  with pytest.raises(ValueError, match=match) as info:
    validate_model_spec(spec, x)
  assert "\n" not in str(info.value)


def test_from_nnx_takes_state_or_pure_dict_and_checks_init_params_shapes():
  """nnx.split / nnx.merge round trip: the spec's logits are the module's; an init_params nnx.State of the
  same shapes is accepted (it was refused when States were compared by value), another shape is refused."""
  import jax
  from flax import nnx
  model = nnx.Linear(4, 3, rngs=nnx.Rngs(0))
  other = nnx.split(nnx.Linear(4, 3, rngs=nnx.Rngs(1)), nnx.Param, ...)[1]
  x = X.reshape(2, 4)
  for init in (other, nnx.to_pure_dict(other)):
    spec = ModelSpec.from_nnx("lin", model, num_classes=3, init_params=init)
    np.testing.assert_array_equal(validate_model_spec(spec, x), model(x))
    assert isinstance(spec.params, dict) and isinstance(spec.init_params, dict)
  np.testing.assert_allclose(spec_logits(spec, other)(x), nnx.merge(*nnx.split(nnx.Linear(4, 3, rngs=nnx.Rngs(1))))(x))
  wrong = nnx.split(nnx.Linear(4, 2, rngs=nnx.Rngs(1)), nnx.Param, ...)[1]
  with pytest.raises(ValueError, match="init_params must have the same tree structure"):
    validate_model_spec(ModelSpec.from_nnx("lin", model, num_classes=3, init_params=wrong), x)
  with pytest.raises(ValueError, match="flax.nnx.Module"):
    ModelSpec.from_nnx("lin", jax.numpy.zeros(3), num_classes=3)


def test_float64_range_against_float32_data_is_accepted_within_the_stated_tolerance_and_errors_name_the_model():
  """The standardised box computed in float64, the data in float32: the data's extremes round to just outside
  it, by less than 4 float32 ulps; 1e-3 outside is still refused, and every error names the model."""
  from attention.model_spec import range_tolerance
  x = np.array([[-0.4242129, 2.8214865, 0.0, 1.0]], np.float32).reshape(1, 2, 2)
  low, high = float(x.min()) + 1e-9, float(x.max()) - 1e-9  # the float64 box, a rounding inside the data
  assert float(x.min()) < low and float(x.max()) > high
  spec = _spec(input_range=(low, high))
  validate_model_spec(spec, x)
  assert range_tolerance(np.float32, (low, high)) == pytest.approx(4 * np.finfo(np.float32).eps * high)
  with pytest.raises(ValueError, match=r"^model 'lin': x_sample values lie in .* \(tolerance"):
    validate_model_spec(spec, x + 1e-3)
  with pytest.raises(ValueError, match=r"^model 'lin': apply_fn failed"):
    validate_model_spec(spec, X.reshape(2, 2, 2, 1)[:, :, :1])
