"""ntk/_nt_compat.py: neural-tangents 0.6.5 on the supported JAX range, checked against closed forms.

Runs on every supported version (both CI legs). When a new JAX release breaks neural-tangents, this file
fails first: docs/versions.md says how to check a new release.
"""
import importlib
import importlib.util
import subprocess
import sys
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from ntk import _nt_compat


def _resolve(dotted: str):
  module, _, name = dotted.rpartition(".")
  return getattr(sys.modules[module] if module in sys.modules else importlib.import_module(module), name)


@pytest.mark.parametrize("dotted", _nt_compat.PATCHED_NAMES)
def test_every_name_neural_tangents_needs_is_present(dotted):
  if dotted == "neural_tangents.experimental":
    assert dotted in sys.modules
  else:
    assert _resolve(dotted) is not None


def test_added_names_are_a_subset_and_install_is_idempotent():
  before = list(_nt_compat.ADDED)
  assert set(before) <= set(_nt_compat.PATCHED_NAMES)
  objects = {name: (_resolve(name) if name != "neural_tangents.experimental" else sys.modules[name])
             for name in _nt_compat.PATCHED_NAMES}
  _nt_compat.install()
  assert _nt_compat.ADDED == before
  for name, obj in objects.items():
    now = _resolve(name) if name != "neural_tangents.experimental" else sys.modules[name]
    assert now is obj, name


def test_moved_core_names_are_jax_extend_core_objects():
  import jax.extend.core
  for name in ("Jaxpr", "JaxprEqn", "Literal", "Primitive", "Var"):
    assert getattr(jax.core, name) is getattr(jax.extend.core, name)


def test_present_names_are_never_overwritten():
  sentinel = object()
  owner = types.SimpleNamespace(safe_map=sentinel)
  _nt_compat._set_if_absent(owner, "safe_map", len, "x.safe_map")  # pylint: disable=protected-access
  assert owner.safe_map is sentinel
  assert _nt_compat.ADDED.count("x.safe_map") == 0


def test_safe_map_and_zip_keep_jax_util_contract():
  assert _nt_compat._safe_map(lambda a, b: a + b, [1, 2], (10, 20)) == [11, 22]  # pylint: disable=protected-access
  assert _nt_compat._safe_zip("ab", [1, 2]) == [("a", 1), ("b", 2)]  # pylint: disable=protected-access
  with pytest.raises(ValueError, match="unequal lengths"):
    _nt_compat._safe_map(lambda a, b: a, [1, 2], [1])  # pylint: disable=protected-access
  with pytest.raises(ValueError, match="unequal lengths"):
    _nt_compat._safe_zip([1, 2, 3], [1])  # pylint: disable=protected-access


def test_experimental_stub_names_tensorflow():
  import neural_tangents as nt
  with pytest.raises(ImportError, match="TensorFlow"):
    nt.experimental.empirical_ntk_fn_tf  # pylint: disable=pointless-statement


def _mlp():
  from neural_tangents import stax
  return stax.serial(stax.Dense(32), stax.Relu(), stax.Dense(3))


@pytest.mark.parametrize("implementation", ["JACOBIAN_CONTRACTION", "NTK_VECTOR_PRODUCTS"])
def test_empirical_ntk_equals_jacobian_gram_in_float64(implementation):
  """Θ = (1/C) Σ_c J_c J_cᵀ from jax.jacrev; float64, so agreement is to rounding (1e-12)."""
  import neural_tangents as nt
  with jax.enable_x64(True):
    init_fn, apply_fn, _ = _mlp()
    x = jax.random.normal(jax.random.PRNGKey(0), (5, 4), jnp.float64)
    _, params = init_fn(jax.random.PRNGKey(1), x.shape)
    params = jax.tree_util.tree_map(lambda p: jnp.asarray(p, jnp.float64), params)
    kernel = nt.empirical_ntk_fn(apply_fn, trace_axes=(-1,), vmap_axes=0,
                                 implementation=getattr(nt.NtkImplementation, implementation))(x, None, params)
    jac = jax.jacrev(apply_fn)(params, x)  # leaves [n, C, *shape]
    flat = jnp.concatenate([j.reshape(5, 3, -1) for j in jax.tree_util.tree_leaves(jac)], axis=-1)
    expected = jnp.einsum("ncp,mcp->nm", flat, flat) / 3
    assert kernel.dtype == jnp.float64
    np.testing.assert_allclose(kernel, expected, rtol=1e-12, atol=1e-12)


def test_infinite_width_ntk_and_gd_prediction_match_closed_forms_in_float64():
  """stax's Dense-ReLU-Dense NTK is the arc-cosine closed form, and gradient_descent_mse is
  f_t = f_0 + (I − e^{−ηKt/n}) K⁻¹ (y − f_0) on the training points (Lee et al., NeurIPS 2019, eq. 9)."""
  import neural_tangents as nt
  from neural_tangents import stax
  import ntk
  with jax.enable_x64(True):
    x = jax.random.normal(jax.random.PRNGKey(2), (6, 5), jnp.float64)
    x = x / jnp.linalg.norm(x, axis=1, keepdims=True)
    _, _, kernel_fn = stax.serial(stax.Dense(64, W_std=np.sqrt(5.0)), stax.Relu(), stax.Dense(1))
    k = kernel_fn(x, None, "ntk")
    # arccos at θ ≈ 0 (the diagonal) loses √eps64 ≈ 1.5e-8; off the diagonal they agree to ~1e-15.
    np.testing.assert_allclose(k, ntk.arccos_ntk(x, readout="trained"), rtol=1e-7, atol=1e-12)
    y = jax.random.normal(jax.random.PRNGKey(3), (6, 1), jnp.float64)
    predict = nt.predict.gradient_descent_mse(k, y, learning_rate=1.0, diag_reg=0.0)
    t = 2.5
    got = predict(t, jnp.zeros_like(y))
    expected = (np.eye(6) - scipy.linalg.expm(-np.asarray(k) * t / 6)) @ np.asarray(y)
    np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-10)


def test_importing_the_packages_does_not_import_tensorflow():
  code = ("import sys, ntk, attention, attacks, influence, experiments.core.workdir as w; "
          "import neural_tangents; w.versions(); "
          "bad = [m for m in ('tensorflow', 'tf2jax') if m in sys.modules]; assert not bad, bad")
  subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_bare_import_of_neural_tangents_works_in_a_fresh_interpreter():
  """The install puts site_hook/attention_fragility_nt_hook.py (and its .pth) into site-packages: at start-up
  it only adds a finder (no JAX import); ``import neural_tangents`` then runs ntk/_nt_compat.py first, once."""
  code = ("import sys; assert 'jax' not in sys.modules, 'start-up imported JAX'; "
          "import neural_tangents as nt; from neural_tangents import stax; import jax.numpy as jnp; "
          "k = stax.serial(stax.Dense(4), stax.Relu(), stax.Dense(1))[2](jnp.eye(3), None, 'ntk'); "
          "assert k.shape == (3, 3) and 'tensorflow' not in sys.modules; "
          "import ntk, ntk._nt_compat as c; "
          "assert c is sys.modules['ntk._nt_compat'] and 'neural_tangents.experimental' in c.ADDED, c.ADDED")
  done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, (
      f"{done.stderr.strip().splitlines()[-1:]}: is the hook installed? Reinstall the project "
      "(pip install --no-deps -e .; setup.py puts site_hook/ into site-packages)")


def test_the_installed_hook_is_this_versions():
  """The hook is a copy in site-packages (data files are not editable): a stale one needs a reinstall."""
  spec = importlib.util.find_spec("attention_fragility_nt_hook")
  assert spec is not None, "the hook is not installed: pip install --no-deps -e . (setup.py)"
  source = Path(__file__).resolve().parents[1] / "site_hook" / "attention_fragility_nt_hook.py"
  assert Path(spec.origin).read_text() == source.read_text(), "stale hook: pip install --no-deps -e ."
