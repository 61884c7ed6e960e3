"""Linearized attention X Xᵀ X: explicit formula, transductive form, Gram identity G̃ = G³."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention import (linearized_attention, linearized_attention_transductive, normalize_rows,
                       stacked_gram_power, stacked_linearized_attention)
from ntk import gram_spectrum


def _rows(n, d, seed=0):
  return np.random.default_rng(seed).uniform(0, 1, size=(n, d))


@pytest.mark.parametrize("n,d", [(5, 12), (12, 5)])  # both multiplication orders
def test_equals_explicit_product(n, d):
  x = _rows(n, d).astype(np.float32)
  np.testing.assert_allclose(np.asarray(linearized_attention(x)), x @ x.T @ x, rtol=2e-5)


def test_transductive_rows_use_training_keys_and_values():
  x_tr, x_te = _rows(7, 9, 1).astype(np.float32), _rows(3, 9, 2).astype(np.float32)
  got = np.asarray(linearized_attention_transductive(x_te, x_tr))
  np.testing.assert_allclose(got, x_te @ x_tr.T @ x_tr, rtol=2e-5)
  # A training row featurised as a query equals its row of the full transform.
  np.testing.assert_allclose(np.asarray(linearized_attention_transductive(x_tr[2:3], x_tr)),
                             np.asarray(linearized_attention(x_tr))[2:3], rtol=2e-5)


def test_normalize_gives_unit_rows_and_keeps_direction():
  x = _rows(6, 4, 3).astype(np.float32)
  raw, unit = np.asarray(linearized_attention(x)), np.asarray(linearized_attention(x, normalize=True))
  np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, rtol=1e-6)
  np.testing.assert_allclose(unit * np.linalg.norm(raw, axis=1, keepdims=True), raw, rtol=1e-5)
  assert np.all(np.asarray(normalize_rows(jnp.zeros((2, 3)))) == 0)  # zero rows stay zero, no NaN


def test_gram_is_g_cubed_in_float64():
  """X̃ X̃ᵀ = G³ within a tolerance scaled by κ(G)³·eps (forming G³ loses accuracy that fast)."""
  with jax.enable_x64(True):
    x = _rows(40, 60, 4)
    f = np.asarray(linearized_attention(jnp.asarray(x, jnp.float64)))
    g = x @ x.T
    g3 = g @ g @ g
    kappa = gram_spectrum(g).condition_number
    tol = kappa ** 3 * np.finfo(np.float64).eps
    assert np.linalg.norm(f @ f.T - g3) / np.linalg.norm(g3) < max(tol, 1e-13)
    # The condition number cubes: κ(G̃) from the features' own Gram matrix equals κ(G)³.
    np.testing.assert_allclose(gram_spectrum(f @ f.T).log10_condition_number,
                               3 * gram_spectrum(g).log10_condition_number, rtol=1e-6)


def test_row_normalisation_breaks_the_identity():
  with jax.enable_x64(True):
    x = _rows(20, 30, 5)
    f = np.asarray(linearized_attention(jnp.asarray(x), normalize=True))
    g3 = np.linalg.matrix_power(x @ x.T, 3)
    assert not np.allclose(f @ f.T, g3, rtol=1e-3)


@pytest.mark.parametrize("stacking", ["values", "self"])
@pytest.mark.parametrize("layers", [1, 2])
def test_stacked_gram_power(stacking, layers):
  with jax.enable_x64(True):
    x = _rows(6, 8, 6) / 3  # keep G^(3^k) entries moderate
    z = np.asarray(stacked_linearized_attention(jnp.asarray(x), layers=layers, stacking=stacking))
    p = stacked_gram_power(layers, stacking)
    expected = np.linalg.matrix_power(x @ x.T, p)
    np.testing.assert_allclose(z @ z.T, expected, rtol=1e-8)
  assert stacked_gram_power(3, "values") == 7 and stacked_gram_power(3, "self") == 27


@pytest.mark.parametrize("bad,match", [
    (np.ones((3,)), "rank 2"),
    (np.ones((2, 3, 4)), "rank 2"),
    (np.array([[0.1, np.nan], [0.2, 0.3]]), "NaN"),
    (np.zeros((0, 3)), "non-empty"),
])
def test_bad_input_raises(bad, match):
  with pytest.raises(ValueError, match=match):
    linearized_attention(bad)


def test_mismatched_transductive_dims_raise():
  with pytest.raises(ValueError, match="features"):
    linearized_attention_transductive(np.ones((2, 3)), np.ones((4, 5)))
  with pytest.raises(ValueError, match="layers"):
    stacked_linearized_attention(np.ones((2, 3)), layers=0)
  with pytest.raises(ValueError, match="stacking"):
    stacked_linearized_attention(np.ones((2, 3)), layers=1, stacking="keys")
