"""The optional padding mask of the standard and differential attention layers: None keeps today's numbers
exactly, an all-True mask changes nothing beyond rounding, the real tokens' outputs equal the layer run on the
real tokens alone (so they cannot depend on the padding), and a mask of the wrong shape is refused."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention.differential import DifferentialAttention, MultiHeadSelfAttention

LAYERS = {"standard": MultiHeadSelfAttention(4, 4), "differential": DifferentialAttention(2, 4, 0.8)}
X = jax.random.normal(jax.random.PRNGKey(0), (3, 6, 16))


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_no_mask_and_an_all_true_mask_keep_the_numbers(name):
  layer = LAYERS[name]
  params = layer.init(jax.random.PRNGKey(1), X)
  plain = layer.apply(params, X)
  np.testing.assert_array_equal(layer.apply(params, X, mask_BxN=None), plain)
  np.testing.assert_allclose(layer.apply(params, X, mask_BxN=jnp.ones((3, 6), bool)), plain, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_real_tokens_see_only_real_tokens(name):
  layer = LAYERS[name]
  params = layer.init(jax.random.PRNGKey(1), X)
  lengths = np.array([6, 4, 2])
  mask = jnp.asarray(np.arange(6)[None, :] < lengths[:, None])
  out = layer.apply(params, X, mask_BxN=mask)
  noisy = jnp.where(mask[..., None], X, 100.0 * jax.random.normal(jax.random.PRNGKey(9), X.shape))
  np.testing.assert_allclose(jnp.where(mask[..., None], layer.apply(params, noisy, mask_BxN=mask), 0.0),
                             jnp.where(mask[..., None], out, 0.0), rtol=1e-5, atol=1e-5)
  for b, m in enumerate(lengths):
    alone = layer.apply(params, X[b:b + 1, :m])
    np.testing.assert_allclose(out[b, :m], alone[0], rtol=1e-5, atol=1e-5)


def test_a_mask_of_the_wrong_shape_or_dtype_is_refused():
  layer = LAYERS["standard"]
  params = layer.init(jax.random.PRNGKey(1), X)
  with pytest.raises(ValueError, match="mask_BxN must have shape"):
    layer.apply(params, X, mask_BxN=jnp.ones((3, 5), bool))
  with pytest.raises(ValueError, match="mask_BxN must be bool"):
    layer.apply(params, X, mask_BxN=jnp.full((3, 6), 0.5))
