"""Silent non-finite results, as a kind: every kernel, feature map and Gram computation either gives a finite
result (scaling rows by powers of two before squaring, exact) or raises an error naming the argument and the
overflow. One representative of each kind, at rows of norm far beyond √(float32 max) ≈ 1.8e19."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ntk
from attention.linearized import linearized_attention, normalize_rows
from attention.safe_math import pow2_row_scale
from ntk.cubing import cubing_check

HUGE = jnp.full((2, 4), 3e19, jnp.float32)  # ‖row‖ = 6e19: ‖row‖² = 3.6e39 > 3.4e38


@pytest.mark.parametrize("kernel", [ntk.arccos_ntk, ntk.arccos_nngp])
def test_kernel_that_cannot_be_represented_raises_naming_the_argument(kernel):
  with pytest.raises(ValueError, match=r"x1: rows of ℓ2 norm up to 6e\+19 overflow float32"):
    kernel(HUGE)
  with pytest.raises(ValueError, match=r"x1: .*overflow float32"):  # 2e19 · 6e19 > 3.4e38
    kernel(jnp.full((2, 4), 1e19), HUGE)
  assert np.isfinite(np.asarray(kernel(jnp.ones((2, 4)), HUGE))).all()  # 2 · 6e19 fits


def test_kernel_of_large_but_representable_rows_is_finite_and_homogeneous():
  """Rows of norm 1e19 (‖x‖² = 1e38 fits; K = ‖x‖²/2 on the diagonal): K(cx) = c²K(x), finite, and the angle
  part is the unit rows' exactly. Before, ‖x‖² was formed for every pair's cosine, still finite here but not
  for a row of norm 2e19 beside a small one, where the cosine became 0 (θ = π/2) silently."""
  x = jax.random.normal(jax.random.PRNGKey(0), (5, 4))
  x = x / jnp.linalg.norm(x, axis=1, keepdims=True)
  k = np.asarray(ntk.arccos_ntk(x), np.float64)
  big = np.asarray(ntk.arccos_ntk(x * 1e19), np.float64)
  assert np.isfinite(big).all()
  np.testing.assert_allclose(big / 1e38, k, rtol=1e-5, atol=1e-7)
  mixed = np.asarray(ntk.arccos_ntk(x[:2] * 2e19, x[2:] * 1e-3), np.float64)  # ‖x1‖² alone overflows
  np.testing.assert_allclose(mixed / 2e16, np.asarray(ntk.arccos_ntk(x[:2], x[2:])), rtol=1e-5, atol=1e-7)


def test_feature_maps_are_finite_at_any_finite_scale():
  """Unit rows and MLP-Attn's normalised features are scale-invariant: computed from rows scaled by powers of
  two, they are bit-identical to the unscaled ones and finite at 3e19 (where ‖x‖² was inf and the row 0)."""
  np.testing.assert_array_equal(normalize_rows(HUGE), jnp.full((2, 4), 0.5))
  x = jax.random.uniform(jax.random.PRNGKey(1), (6, 5))
  np.testing.assert_array_equal(normalize_rows(x * 2.0 ** 70), normalize_rows(x))
  feats, _ = ntk.model_features("mlp_attn", x)
  big, _ = ntk.model_features("mlp_attn", x * 2.0 ** 60)  # X Xᵀ X: 2^180 overflows float32
  np.testing.assert_array_equal(big, feats)
  with pytest.raises(ValueError, match="keys_values: .*overflow float32 in the linearized attention"):
    linearized_attention(x * 2.0 ** 60)
  assert np.isfinite(np.asarray(linearized_attention(x))).all()


def test_gram_computation_refuses_what_float64_cannot_hold():
  x = np.random.default_rng(0).uniform(size=(8, 5))
  ok = cubing_check(x, layers=(1,), eps=(0.1,))
  np.testing.assert_allclose(cubing_check(x * 1e40, layers=(1,), eps=(0.1,))["log10_kappa_G"],
                             ok["log10_kappa_G"], rtol=1e-9)  # 1e40⁶·64 < 1.8e308: still computed
  with pytest.raises(ValueError, match=r"x: rows .*overflow float64 in the attention features' Gram"):
    cubing_check(x * 1e52, layers=(1,), eps=(0.1,))


def test_pow2_row_scale_is_exact():
  x = jnp.array([[3.0, -5.0, 0.25], [0.0, 0.0, 0.0], [1e30, 2e30, -3e30]], jnp.float32)
  scaled, scale = pow2_row_scale(x)
  np.testing.assert_array_equal(scaled * scale, x)
  top = np.abs(np.asarray(scaled)).max(axis=1)
  assert np.all((top < 2) & ((top >= 1) | (np.asarray(scale)[:, 0] == 1)))
  assert np.all(np.log2(np.asarray(scale)) == np.round(np.log2(np.asarray(scale))))


def test_float16_rows_normalise_without_nan():
  """float16: 2^16 is not representable and 1e-12 rounds to 0; a row of 40000s and a zero row still give
  the unit row and the zero row."""
  x = np.array([[40000.0, 40000.0, 0.0], [0.0, 0.0, 0.0]], np.float16)
  out = np.asarray(normalize_rows(x), np.float32)
  np.testing.assert_allclose(out[0], [2 ** -0.5, 2 ** -0.5, 0.0], rtol=1e-3)
  np.testing.assert_array_equal(out[1], 0.0)
  with pytest.raises(ValueError, match="eps must be"):
    normalize_rows(x, eps=-1.0)
  with pytest.raises(ValueError, match="NaN or inf"):
    normalize_rows(np.array([[np.nan, 1.0]]))


def test_integer_inputs_are_not_wrapped():
  """int32 50000² wraps; int64 is narrowed to int32 by JAX before any conversion. Kernels see floats."""
  x = np.array([[50000, 50000]], np.int32)
  np.testing.assert_allclose(float(ntk.arccos_ntk(x)[0, 0]), 2 * 50000.0 ** 2 / 2, rtol=1e-6)
  big = np.array([[2_000_000_000, 4_000_000_000]], np.int64)
  # (float32 arccos near cos = 1 costs √eps32 ≈ 3e-4 in θ, hence 1e-4 relative on the diagonal)
  np.testing.assert_allclose(float(ntk.arccos_ntk(big)[0, 0]), (4e18 + 16e18) / 2, rtol=5e-4)
  np.testing.assert_allclose(np.asarray(linearized_attention(np.array([[3, 4]], np.int64))), [[75.0, 100.0]])


def test_a_nan_partner_is_named_itself():
  with pytest.raises(ValueError, match="^x2"):
    ntk.arccos_ntk(np.ones((2, 3), np.float32), np.full((2, 3), np.nan, np.float32))
