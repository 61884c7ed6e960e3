"""NTKs of the paper's 2-layer ReLU models: neural-tangents canary, arc-cosine closed forms, the
finite-width kernel converging to the infinite-width one, and the closed-form fast path."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ntk


def _unit_rows(n, d, seed=0):
  x = np.random.default_rng(seed).uniform(0, 1, size=(n, d)).astype(np.float32)
  return x / np.linalg.norm(x, axis=1, keepdims=True)


def _rel(a, b):
  return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(np.asarray(b)))


def test_neural_tangents_canary():
  """The pin's canary: neural-tangents imports and computes one empirical and one infinite-width NTK."""
  import neural_tangents as nt
  from neural_tangents import stax
  init_fn, apply_fn, kernel_fn = stax.serial(stax.Dense(64), stax.Relu(), stax.Dense(1))
  x = jnp.asarray(_unit_rows(4, 3))
  _, params = init_fn(jax.random.PRNGKey(0), x.shape)
  k_emp = nt.empirical_ntk_fn(apply_fn, vmap_axes=0)(x, None, params)
  k_inf = kernel_fn(x, None, "ntk")
  assert k_emp.shape == k_inf.shape == (4, 4)
  assert np.all(np.isfinite(k_emp)) and np.all(np.isfinite(k_inf))
  np.testing.assert_allclose(k_emp, k_emp.T, rtol=1e-5)


@pytest.mark.parametrize("readout", ["fixed", "trained"])
def test_stax_infinite_kernel_matches_arccos_closed_form(readout):
  """stax with W_std = √d_in gives w ~ N(0, I); the fixed readout drops the NNGP term (docs/theory.md#two-layer-relu-network)."""
  with jax.enable_x64(True):  # arccos near cos = 1 loses √eps in float32
    x = jnp.asarray(_unit_rows(10, 7, 1), jnp.float64)
    model = ntk.two_layer_relu(8, 7, readout=readout)
    np.testing.assert_allclose(model.kernel_fn(x, None, "ntk"), ntk.arccos_ntk(x, readout=readout),
                               rtol=1e-7, atol=1e-12)  # arccos at θ≈0 loses √eps64


def test_arccos_closed_form_special_values():
  # Identical unit vectors: θ = 0, K = 1·π/(2π) = ½; orthogonal: K = 0; opposite: θ = π, K = 0.
  e = np.eye(3, dtype=np.float32)
  k = np.asarray(ntk.arccos_ntk(np.vstack([e[:2], -e[:1]])))
  np.testing.assert_allclose(np.diag(k), 0.5, rtol=1e-6)
  assert abs(k[0, 1]) < 1e-7 and abs(k[0, 2]) < 1e-7
  # NNGP: identical unit vectors give (0 + π)/(2π) = ½; orthogonal give 1/(2π).
  nngp = np.asarray(ntk.arccos_nngp(e[:2]))
  np.testing.assert_allclose(nngp, [[0.5, 1 / (2 * np.pi)], [1 / (2 * np.pi), 0.5]], rtol=1e-6)


@pytest.mark.parametrize("readout", ["fixed", "trained"])
@pytest.mark.parametrize("out_dim", [1, 3])
def test_fast_path_equals_neural_tangents(readout, out_dim):
  x1, x2 = _unit_rows(9, 12, 2), _unit_rows(5, 12, 3)
  model = ntk.two_layer_relu(256, 12, out_dim=out_dim, readout=readout)
  _, params = model.init_fn(jax.random.PRNGKey(4), (-1, 12))
  for a, b in [(x1, None), (x1, x2)]:
    ref = ntk.empirical_ntk(model.apply_fn, params, a, b)
    np.testing.assert_allclose(ntk.two_layer_relu_ntk(model, params, a, b), ref, rtol=1e-4, atol=1e-6)
  ref = ntk.empirical_ntk(model.apply_fn, params, x1, x2, implementation="ntk_vector_products")
  np.testing.assert_allclose(ntk.two_layer_relu_ntk(model, params, x1, x2), ref, rtol=1e-4, atol=1e-6)


def test_blocked_empirical_ntk_equals_single_block():
  x = _unit_rows(11, 6, 5)
  model = ntk.two_layer_relu(32, 6)
  _, params = model.init_fn(jax.random.PRNGKey(0), (-1, 6))
  whole = ntk.empirical_ntk(model.apply_fn, params, x)
  blocked = ntk.empirical_ntk(model.apply_fn, params, x, memory_bytes=8 * 6 * 32 * 4)  # 4-row blocks
  # Blocks change only the order of the float32 sums over the P parameters. Each entry is a dot product
  # J_i·J_j, whose rounding error is at most γ_P Σ|J_i||J_j| ≤ γ_P √(K_ii K_jj), γ_P = P·u/(1 − P·u)
  # (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., §3.1); two such sums differ by twice
  # that. A misplaced block or a missed mirror is off by O(K), far outside it.
  n_params = sum(np.size(p) for p in jax.tree_util.tree_leaves(params))
  u = np.finfo(np.float32).eps / 2
  gamma = n_params * u / (1 - n_params * u)
  diag = np.sqrt(np.diag(whole))
  bound = 2 * gamma * np.outer(diag, diag)
  assert np.all(np.abs(blocked - whole) <= bound)
  assert np.all(np.abs(blocked - blocked.T) <= bound)
  assert np.all(bound < 1e-3 * np.abs(whole).max())  # the bound is small enough to catch a wrong block


def test_width_4096_empirical_ntk_matches_arccos_within_a_few_percent():
  """Monte-Carlo over seeds at width 4096 vs the analytic kernel (neural-tangents' own test uses 1024)."""
  x = _unit_rows(48, 64, 6)
  analytic = np.asarray(ntk.arccos_ntk(x))
  model = ntk.two_layer_relu(4096, 64)
  kernels = []
  for seed in range(4):
    _, params = model.init_fn(jax.random.PRNGKey(seed), (-1, 64))
    kernels.append(ntk.empirical_ntk(model.apply_fn, params, x) if seed == 0
                   else ntk.two_layer_relu_ntk(model, params, x))
  assert _rel(kernels[0], analytic) < 0.05
  assert _rel(np.mean(kernels, axis=0), analytic) < 0.03


def test_kernel_error_falls_with_width_at_rate_one_over_sqrt_m():
  x = _unit_rows(40, 30, 7)
  analytic = np.asarray(ntk.arccos_ntk(x))
  widths = [64, 256, 1024, 4096]
  errors = []
  for width in widths:
    model = ntk.two_layer_relu(width, 30)
    errs = [_rel(ntk.two_layer_relu_ntk(model, model.init_fn(jax.random.PRNGKey(s), (-1, 30))[1], x),
                 analytic) for s in range(8)]
    errors.append(np.mean(errs))
  assert all(a > b for a, b in zip(errors, errors[1:])), errors
  slope = np.polyfit(np.log(widths), np.log(errors), 1)[0]
  assert -0.65 < slope < -0.35, slope


def test_antisymmetric_init_gives_zero_initial_function():
  x = _unit_rows(6, 5, 8)
  for readout in ("fixed", "trained"):
    model = ntk.two_layer_relu(16, 5, out_dim=3, readout=readout, antisymmetric=True)
    _, params = model.init_fn(jax.random.PRNGKey(0), (-1, 5))
    np.testing.assert_allclose(model.apply_fn(params, x), 0.0, atol=1e-6)


def test_fixed_readout_is_not_trained():
  model = ntk.two_layer_relu(8, 4)
  _, params = model.init_fn(jax.random.PRNGKey(0), (-1, 4))
  grads = jax.grad(lambda p: jnp.sum(model.apply_fn(p, jnp.ones((2, 4))) ** 2))(params)
  assert np.all(np.asarray(grads["a"]) == 0) and np.any(np.asarray(grads["W"]) != 0)
  assert set(np.unique(np.asarray(params["a"]))) <= {-1.0, 1.0}


def test_mlp_attn_features_are_unit_rows_of_linearized_attention():
  x_tr = np.random.default_rng(9).uniform(size=(8, 10)).astype(np.float32)
  x_te = np.random.default_rng(10).uniform(size=(3, 10)).astype(np.float32)
  tr, te = ntk.model_features("mlp_attn", x_tr, x_te)
  expected = x_te @ x_tr.T @ x_tr
  np.testing.assert_allclose(te, expected / np.linalg.norm(expected, axis=1, keepdims=True), rtol=1e-5)
  np.testing.assert_allclose(np.linalg.norm(tr, axis=1), 1.0, rtol=1e-6)
  tr_relu, _ = ntk.model_features("relu", x_tr)
  np.testing.assert_allclose(tr_relu, x_tr / np.linalg.norm(x_tr, axis=1, keepdims=True), rtol=1e-6)


@pytest.mark.parametrize("kwargs,match", [
    (dict(width=-4, d_in=3), "width"),
    (dict(width=0, d_in=3), "width"),
    (dict(width=2.5, d_in=3), "width"),
    (dict(width=4, d_in=0), "d_in"),
    (dict(width=4, d_in=3, readout="frozen"), "readout"),
    (dict(width=5, d_in=3, antisymmetric=True), "even"),
])
def test_bad_model_arguments(kwargs, match):
  with pytest.raises(ValueError, match=match):
    ntk.two_layer_relu(**kwargs)


def test_bad_kernel_inputs():
  model = ntk.two_layer_relu(8, 4)
  _, params = model.init_fn(jax.random.PRNGKey(0), (-1, 4))
  with pytest.raises(ValueError, match="rank 2"):
    ntk.two_layer_relu_ntk(model, params, np.ones((2, 2, 1)))
  with pytest.raises(ValueError, match="d_in"):
    ntk.two_layer_relu_ntk(model, params, np.ones((2, 5)))
  with pytest.raises(ValueError, match="NaN"):
    ntk.arccos_ntk(np.array([[np.nan, 1.0]]))
  with pytest.raises(ValueError, match="implementation"):
    ntk.empirical_ntk(model.apply_fn, params, np.ones((2, 4)), implementation="auto")
  with pytest.raises(ValueError, match="model"):
    ntk.model_features("transformer", np.ones((2, 4)))


def test_fast_path_sharded_over_several_devices_equals_single_device():
  """Runs in a subprocess with two forced host devices (the flag must be set before JAX starts)."""
  import os
  import subprocess
  import sys
  code = (
      "import jax, numpy as np, ntk\n"
      "assert jax.local_device_count() == 2\n"
      "x = np.random.default_rng(0).uniform(size=(8, 5)).astype(np.float32)\n"
      "m = ntk.two_layer_relu(64, 5)\n"
      "_, p = m.init_fn(jax.random.PRNGKey(0), (-1, 5))\n"
      "k = ntk.two_layer_relu_ntk(m, p, x)\n"
      "assert len(k.sharding.device_set) == 2, k.sharding\n"
      "ref = ntk.empirical_ntk(m.apply_fn, p, x)\n"
      "np.testing.assert_allclose(np.asarray(k), ref, rtol=1e-4, atol=1e-6)\n")
  env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"}
  result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
  assert result.returncode == 0, result.stderr[-2000:]


def test_row_replaced_features_equal_full_refeaturisation_with_one_row_changed():
  rng = np.random.default_rng(11)
  x = rng.uniform(size=(7, 5)).astype(np.float64)
  x_new = rng.uniform(size=(7, 5))
  got = np.asarray(ntk.row_replaced_features("mlp_attn", x_new, x))
  for i in range(7):
    replaced = x.copy()
    replaced[i] = x_new[i]
    full, _ = ntk.model_features("mlp_attn", replaced)
    np.testing.assert_allclose(got[i], np.asarray(full)[i], rtol=1e-5)
  # Unperturbed rows reproduce the clean features; 2L-ReLU features are just the normalised rows.
  np.testing.assert_allclose(np.asarray(ntk.row_replaced_features("mlp_attn", x, x)),
                             np.asarray(ntk.model_features("mlp_attn", x)[0]), rtol=1e-5)
  np.testing.assert_allclose(np.asarray(ntk.row_replaced_features("relu", x_new, x)),
                             x_new / np.linalg.norm(x_new, axis=1, keepdims=True), rtol=1e-6)


def test_train_adam_learns_a_separable_problem():
  from ntk.training import train_adam
  x = _unit_rows(40, 6, 12)
  labels = (x[:, 0] > x[:, 1]).astype(int)
  y = np.eye(2, dtype=np.float32)[labels]
  model = ntk.two_layer_relu(64, 6, out_dim=2)
  _, params = model.init_fn(jax.random.PRNGKey(0), x.shape)
  trained = train_adam(model.apply_fn, params, x, y, key=jax.random.PRNGKey(1), epochs=200, batch_size=16,
                       learning_rate=1e-2, l2=0.0)
  acc = np.mean(np.argmax(np.asarray(model.apply_fn(trained, x)), 1) == labels)
  assert acc > 0.9
  with pytest.raises(ValueError, match="loss"):
    train_adam(model.apply_fn, params, x, y, key=jax.random.PRNGKey(1), loss="hinge")


def test_equal_architectures_share_one_model_so_jitted_code_compiles_once():
  assert ntk.two_layer_relu(32, 5, out_dim=2) is ntk.two_layer_relu(32, 5, out_dim=2)
  assert ntk.two_layer_relu(32, 5) is not ntk.two_layer_relu(32, 5, readout="trained")


def test_empirical_ntk_refuses_a_model_whose_outputs_are_nan():
  import jax
  import jax.numpy as jnp
  import numpy as np
  import ntk
  model = ntk.two_layer_relu(8, 3, out_dim=2)
  _, params = model.init_fn(jax.random.PRNGKey(0), (4, 3))
  x = np.ones((4, 3), np.float32)
  assert np.all(np.isfinite(ntk.empirical_ntk(model.apply_fn, params, x)))
  params = {"W": params["W"].at[0, 0].set(jnp.nan), "a": params["a"]}
  with pytest.raises(ValueError, match="non-finite outputs"):
    ntk.empirical_ntk(model.apply_fn, params, x)
