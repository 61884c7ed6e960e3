"""attacks.over_models: S models attacked as one program (vmapped or mapped) give each model's own attack result."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attacks


@functools.lru_cache(maxsize=None)
def _apply():
  return lambda p, x: jnp.tanh(x.reshape(x.shape[0], -1) @ p["w1"]) @ p["w2"]


def _params(seed):
  k1, k2 = jax.random.split(jax.random.key(seed))
  return {"w1": jax.random.normal(k1, (12, 16)) / 3.0, "w2": jax.random.normal(k2, (16, 3))}


@pytest.mark.parametrize("attack, kwargs", [
    (attacks.pgd_linf, dict(eps=0.1, alpha=0.03, steps=5)),
    (attacks.patch, dict(size=2, position=(0, 1), alpha=0.2, steps=4)),
])
@pytest.mark.parametrize("vectorize", [True, False])
def test_each_model_gets_what_the_attack_on_it_alone_gives(attack, kwargs, vectorize):
  x = jax.random.uniform(jax.random.key(9), (6, 2, 3, 2))
  y = jnp.arange(6) % 3
  if attack is attacks.pgd_linf:
    kwargs = dict(kwargs, key=jax.random.key(4))
  models = [_params(s) for s in range(3)]
  stacked = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *models)
  together = attacks.over_models(attack, _apply(), stacked, x, y, vectorize=vectorize, **kwargs)
  assert together.x_adv.shape == (3, *x.shape) and together.success.shape == (3, 6)
  for s, p in enumerate(models):
    alone = attack(jax.tree_util.Partial(_apply(), p), x, y, **kwargs)
    np.testing.assert_allclose(np.asarray(together.x_adv[s]), np.asarray(alone.x_adv), atol=1e-6)
    assert np.array_equal(np.asarray(together.success[s]), np.asarray(alone.success))
  # the models differ, so their adversarial images do
  assert not np.allclose(np.asarray(together.x_adv[0]), np.asarray(together.x_adv[1]))


def test_unstacked_parameters_are_refused():
  bad = {"w1": jnp.zeros((3, 12, 16)), "w2": jnp.zeros((2, 16, 3))}
  with pytest.raises(ValueError, match="params_S"):
    attacks.over_models(attacks.pgd_linf, _apply(), bad, jnp.zeros((1, 2, 3, 2)), jnp.zeros(1, jnp.int32),
                        eps=0.1, key=jax.random.key(0))


def test_non_array_leaves_are_refused_naming_their_types():
  with pytest.raises(ValueError, match="params_S must hold arrays.*float"):
    attacks.over_models(attacks.pgd_linf, _apply(), {"w1": 0.5, "w2": jnp.zeros((2, 16, 3))},
                        jnp.zeros((1, 2, 3, 2)), jnp.zeros(1, jnp.int32), eps=0.1, key=jax.random.key(0))


def test_vectorize_must_be_a_bool():
  with pytest.raises(ValueError, match="vectorize"):
    attacks.over_models(attacks.fgsm, _apply(), {"w1": jnp.zeros((2, 12, 16)), "w2": jnp.zeros((2, 16, 3))},
                        jnp.zeros((1, 2, 3, 2)), jnp.zeros(1, jnp.int32), eps=0.1, vectorize="yes")
