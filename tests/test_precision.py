"""Accelerator-safe precision: every float32 Gram matrix, kernel, Jacobian norm and bound lowers its matrix
products at the highest precision (recent NVIDIA GPUs otherwise run float32 dot products in TF32, about
1e-3 relative). No GPU is present here, so the check reads the lowered StableHLO text: each dot_general
carries ``precision = [HIGHEST, HIGHEST]`` and each convolution ``#stablehlo<precision HIGHEST>`` twice.
The pins are local (per function), never a global flag: the last test checks that a plain product
outside them still lowers at the default precision."""
import functools
import importlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ntk
from attention.certified_vit import CertifiedViT, CertifiedViTConfig
from attention.vit import ViTConfig, init_params, matched_configs

# Modules by import_module: the packages re-export functions under some of these module names.
(alignment, certification, linearized, local_lipschitz, operator_norm, sensitivity, influence_fn_module,
 ntk_loo, tracin, empirical) = (importlib.import_module(m) for m in (
     "attention.alignment", "attention.certification", "attention.linearized", "attention.local_lipschitz",
     "attention.operator_norm", "attention.sensitivity", "influence.influence_function", "influence.ntk_loo",
     "influence.tracin", "ntk.empirical"))

_DOT = re.compile(r"stablehlo\.dot_general .*")
_CONV = re.compile(r"stablehlo\.convolution.*")


def _unpinned_products(text: str) -> tuple[int, list[str]]:
  """(number of matrix products, those not at HIGHEST) in a lowered module's text."""
  dots, convs = _DOT.findall(text), _CONV.findall(text)
  bad = [d for d in dots if "precision = [HIGHEST, HIGHEST]" not in d]
  bad += [c for c in convs if c.count("precision HIGHEST") != 2]
  return len(dots) + len(convs), bad


def _f32(*shape, seed=0):
  return jnp.asarray(np.random.default_rng(seed).random(shape), jnp.float32)  # no PRNG kernel to compile


def _relu_model(trained=False):
  model = ntk.two_layer_relu(16, 6, out_dim=3, readout="trained" if trained else "fixed")
  return model, model.init_fn(jax.random.PRNGKey(0), (-1, 6))[1]


def _loss(params, x, y):
  return 0.5 * jnp.sum((jnp.tanh(x @ params["w"]) @ params["v"] - y) ** 2)


def _loss_params():
  return {"w": _f32(5, 4, seed=1), "v": _f32(4, 2, seed=2)}


def _head():
  return _f32(6, 4, seed=1), _f32(4, 4, seed=2) - 0.5, _f32(4, 3, seed=3)


def _two_layer_fast_path():
  model, params = _relu_model(trained=True)
  return jax.jit(lambda p, x: ntk.two_layer_relu_ntk(model, p, x)), (params, _f32(7, 6))


def _fast_path_blocks():
  model, params = _relu_model(trained=True)
  w, a = ntk.models.first_layer_weights(model, params), ntk.models.readout_weights(model, params)

  def both(x1, x2):
    s2d, relu2 = empirical._right_side(w, a, x2, True)
    return empirical._left_block(w, x1, x2, s2d, relu2)
  return jax.jit(both), (_f32(4, 6), _f32(5, 6, seed=1))


def _neural_tangents_kernel():
  model, params = _relu_model()
  return empirical._nt_kernel_fn(model.apply_fn, "jacobian_contraction"), (_f32(3, 6), _f32(4, 6), params)


def _loo_float32():
  k = _f32(6, 8)
  k = k @ k.T
  kt = _f32(2, 6, seed=1)
  return ntk_loo._loo, (k, kt, _f32(6, 3, seed=2), _f32(2, 3, seed=3), jnp.float32(0.1))


def _influence_exact():
  def scores(params, x, y, xt, yt):
    return influence_fn_module._influence_scores(_loss, params, (x, y), (xt, yt), None, 0.1, "exact", 1e-6, 3)
  return jax.jit(scores), (_loss_params(), _f32(6, 5), _f32(6, 2), _f32(2, 5, seed=4), _f32(2, 2, seed=5))


def _hvp():
  objective = lambda p: _loss(p, _f32(1, 5)[0], _f32(2, seed=3))  # noqa: E731
  return jax.jit(functools.partial(influence_fn_module.hvp, objective)), (_loss_params(), _loss_params())


def _tracin():
  fn = functools.partial(tracin.checkpoint_scores, _loss)
  return jax.jit(lambda p, x, y, xt, yt: fn(p, (x, y), (xt, yt))), (
      _loss_params(), _f32(6, 5), _f32(6, 2), _f32(2, 5, seed=4), _f32(2, 2, seed=5))


def _jacobian_gram():
  w = _f32(5, 4)
  maps = lambda x: jnp.tanh(jnp.stack([x @ w, (x ** 2) @ w]))[None]  # noqa: E731  [1, 2, 4]
  return jax.jit(lambda x: alignment.jacobian_gram(maps, x, chunk_size=2)), (_f32(5, seed=1),)


@functools.lru_cache(maxsize=None)
def _tiny_vits():
  base = ViTConfig(num_classes=3, image_size=8, patch_size=4, dim=8, depth=1, num_heads=4)
  vit_cfg, diff_cfg = matched_configs(base)
  # Lowering needs only shapes and dtypes: jax.eval_shape gives the parameters without compiling the init.
  return (vit_cfg, jax.eval_shape(lambda: init_params(vit_cfg, key=jax.random.key(0), channels=1)),
          diff_cfg, jax.eval_shape(lambda: init_params(diff_cfg, key=jax.random.key(1), channels=1)))


def _differential_gram():
  _, _, cfg, params = _tiny_vits()
  return jax.jit(lambda p, x: alignment.differential_gram(cfg, p, x, chunk_size=16)), (params, _f32(8, 8, 1))


def _standard_head_norms():
  cfg, params, _, _ = _tiny_vits()
  return jax.jit(lambda p, x: alignment.standard_head_norms(cfg, p, x, chunk_size=16)), (params, _f32(8, 8, 1))


def _certified_layer_constants():
  cfg = CertifiedViTConfig(num_classes=3, image_size=8, channels=1, patch_size=4, dim=8, depth=1, num_heads=2,
                           sll_hidden=12, attention_bound=1.0, value_bound=1.0)
  x = _f32(2, 8, 8, 1)
  params = jax.eval_shape(lambda k, x: CertifiedViT(cfg).init(k, x)["params"], jax.random.PRNGKey(0), x[:1])
  return jax.jit(lambda p, x, k: certification.layer_constants(cfg, p, x, key=k, power_iters=3)), (
      params, x, jax.random.PRNGKey(1))


def _local_lipschitz():
  fn = jax.tree_util.Partial(lambda w, x: jnp.tanh(x.reshape(x.shape[0], -1) @ w), _f32(12, 3))
  keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.PRNGKey(0), i))(jnp.arange(2))
  return jax.jit(functools.partial(local_lipschitz._estimate, steps=2)), (
      fn, _f32(2, 12), keys, 0.1, 0.003, 0.001, 0.0, 1.0)


def _input_jacobian_norm():
  fn = jax.tree_util.Partial(lambda w, x: jnp.tanh(x @ w), _f32(5, 3))
  return local_lipschitz._jacobian_norms, (fn, _f32(2, 5))


def _top_singular_value():
  m = _f32(5, 4)
  return jax.jit(lambda m, k: operator_norm.top_singular_value(lambda v: m @ v, jnp.zeros(4), key=k,
                                                               iters=3).sigma), (m, jax.random.PRNGKey(0))


def _head_constants():
  return jax.jit(lambda x, a, w, k: sensitivity.head_constants(x, a, w, key=k, power_iters=3)), (
      *_head(), jax.random.PRNGKey(0))


def _layer_constants():
  x, a, w = _head()
  return jax.jit(lambda x, a, w, k: sensitivity.layer_constants(x, a, w, key=k, power_iters=3)), (
      x, jnp.stack([a, a.T]), jnp.stack([w, 2 * w]), jax.random.PRNGKey(0))


def _operators():
  def apply_all(x, a, w, delta):
    return [op(x, a, w)(delta) for op in (sensitivity.value_operator, sensitivity.query_side_operator,
                                          sensitivity.key_side_operator)] + [sensitivity.self_attention(x, a, w)]
  x, a, w = _head()
  return jax.jit(apply_all), (x, a, w, _f32(6, 4, seed=7))


def _max_deviation():
  x, a, w = _head()
  layer = lambda z: sensitivity.self_attention(z, a, w)  # noqa: E731
  return jax.jit(lambda x, k: sensitivity.max_deviation(layer, x, 0.1, key=k, steps=2, restarts=1)), (
      x, jax.random.PRNGKey(0))


def _jacobian_norm():
  x, a, w = _head()
  layer = lambda z: sensitivity.self_attention(z, a, w)  # noqa: E731
  return jax.jit(lambda x, k: sensitivity.jacobian_norm(layer, x, key=k, iters=3)), (x, jax.random.PRNGKey(0))


PINNED = {
    # ntk/: kernels and features
    "ntk.two_layer_relu_ntk": _two_layer_fast_path,
    "ntk.empirical fast-path blocks": _fast_path_blocks,
    "ntk.empirical_ntk (neural-tangents kernel)": _neural_tangents_kernel,
    "ntk.arccos_ntk": lambda: (jax.jit(lambda x: ntk.arccos_ntk(x, readout="trained")), (_f32(5, 4),)),
    "ntk.model_features mlp_attn": lambda: (jax.jit(lambda x, t: ntk.model_features("mlp_attn", x, t)),
                                            (_f32(6, 4), _f32(2, 4, seed=1))),
    "ntk.row_replaced_features": lambda: (jax.jit(lambda r, x: ntk.row_replaced_features("mlp_attn", r, x)),
                                          (_f32(6, 4), _f32(6, 4, seed=1))),
    # influence/
    "influence.ntk_loo float32": _loo_float32,
    "influence.influence_function exact": _influence_exact,
    "influence.hvp": _hvp,  # the products of method="cg" (its host-checked loop runs inside the pin)
    "influence.tracin": _tracin,
    # attention/
    "attention.linearized_attention": lambda: (jax.jit(linearized.linearized_attention), (_f32(6, 4),)),
    "attention.stacked_linearized_attention": lambda: (
        jax.jit(lambda x: linearized.stacked_linearized_attention(x, layers=2, stacking="self")), (_f32(6, 4),)),
    "attention.alignment.cosine_alignment": lambda: (jax.jit(alignment.cosine_alignment),
                                                     (_f32(3, 4), _f32(3, 4, seed=1))),
    "attention.alignment.jacobian_gram": _jacobian_gram,
    "attention.alignment.differential_gram": _differential_gram,
    "attention.alignment.standard_head_norms": _standard_head_norms,
    "attention.sensitivity.head_constants": _head_constants,
    "attention.sensitivity.layer_constants": _layer_constants,
    "attention.sensitivity operators and self_attention": _operators,
    "attention.sensitivity.multi_head_attention": lambda: (
        jax.jit(sensitivity.multi_head_attention), (_f32(6, 4), _f32(2, 4, 4, seed=1), _f32(2, 4, 3, seed=2))),
    "attention.sensitivity.jacobian_norm": _jacobian_norm,
    "attention.sensitivity.max_deviation": _max_deviation,
    "attention.operator_norm.top_singular_value": _top_singular_value,
    "attention.certification.layer_constants": _certified_layer_constants,
    "attention.local_lipschitz.local_lipschitz": _local_lipschitz,
    "attention.local_lipschitz.input_jacobian_norm": _input_jacobian_norm,
}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_float32_matrix_products_lower_at_highest_precision(name):
  fn, args = PINNED[name]()
  text = fn.lower(*args).as_text()
  count, bad = _unpinned_products(text)
  assert count > 0, f"{name}: no matrix product was lowered, so the check would be empty"
  assert not bad, f"{name}: {len(bad)} of {count} products not at HIGHEST, e.g. {bad[0][:200]}"


def test_the_check_sees_default_precision_outside_the_pins():
  """A plain float32 product (no pin, no global flag) lowers at DEFAULT, so the check above can fail."""
  count, bad = _unpinned_products(jax.jit(lambda a: a @ a.T).lower(_f32(3, 3)).as_text())
  assert count == 1 and len(bad) == 1
  conv = jax.jit(lambda x, w: jax.lax.conv(x, w, (1, 1), "SAME")).lower(_f32(1, 1, 4, 4), _f32(1, 1, 2, 2))
  count, bad = _unpinned_products(conv.as_text())
  assert count == 1 and len(bad) == 1
  assert jax.config.jax_default_matmul_precision is None  # the pins did not leak into a global setting


def test_float32_gram_matrices_agree_with_float64():
  """Gram matrices of unit-norm rows in float32 match float64 to float32 rounding (1e-5 relative), which
  TF32 (10-bit mantissa, ~1e-3) would not: the fast-path NTK and the linearized-attention features' Gram."""
  x = np.random.default_rng(0).random((40, 300))
  x /= np.linalg.norm(x, axis=1, keepdims=True)
  model = ntk.two_layer_relu(64, 300)
  _, params = model.init_fn(jax.random.PRNGKey(0), (-1, 300))

  def grams(dtype):
    xd = jnp.asarray(x, dtype)
    p = jax.tree_util.tree_map(lambda a: jnp.asarray(a, dtype), params)
    feats = linearized.linearized_attention(xd)
    return (np.asarray(ntk.two_layer_relu_ntk(model, p, xd), np.float64),
            np.asarray(feats @ feats.T, np.float64), np.asarray(xd @ xd.T, np.float64))

  k32, g32, _ = grams(jnp.float32)
  with jax.enable_x64(True):
    k64, g64, x64 = grams(jnp.float64)
  for got, want in ((k32, k64), (g32, g64)):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())
  # Closed forms in float64: unit rows, and the fixed-readout NTK diagonal is the mean of 1[wᵀx > 0]·a².
  np.testing.assert_allclose(np.diag(x64), 1.0, rtol=1e-12)
  np.testing.assert_allclose(g64, np.linalg.matrix_power(x @ x.T, 3), rtol=1e-10)
