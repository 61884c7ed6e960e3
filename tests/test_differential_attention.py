"""Differential attention (reference semantics), gradient alignment, Lemma 1 and Theorem 3.

Tiny layers and 8×8 images keep this file fast; Lemma 1 is checked in float64.
"""
import math

import flax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention.alignment import (
    HeadAlignment,
    cosine_alignment,
    head_alignment,
    jacobian_gram,
    layer_alignment_statistics,
    lemma1_norm,
    theorem3_predicts_da_more_sensitive,
    theorem3_threshold,
)
from attention.differential import (
    DifferentialAttention,
    MultiHeadSelfAttention,
    lambda_init_schedule,
    reparameterized_lambda,
    softmax_attention_map,
)
from attention.vit import ViTConfig, init_params, matched_configs

H, D, N = 2, 4, 5  # differential heads, head width, tokens; model width 2·H·D = 16
DIM = 2 * H * D


def _layer_and_params(lambda_init=0.8, seed=0, learnable_gain=True):
  layer = DifferentialAttention(H, D, lambda_init, learnable_gain=learnable_gain)
  x = jax.random.normal(jax.random.key(seed), (3, N, DIM))
  params = layer.init(jax.random.key(seed + 1), x)["params"]
  if learnable_gain:  # a non-trivial gain, so the test sees where it is applied
    params = {**params, "norm_gain": 1.0 + 0.1 * jax.random.normal(jax.random.key(seed + 2), (2 * D,))}
  return layer, params, x


def _with_lambda(params, target, lambda_init):
  """Sets the four λ vectors so that λ = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init equals target."""
  if target >= lambda_init:
    a, b = math.log(target + 1 - lambda_init), 0.0
  else:
    a, b = 0.0, math.log(1 + lambda_init - target)
  e0 = np.eye(D, dtype=np.float32)[0]
  vec = lambda v: jnp.asarray(math.sqrt(abs(v)) * e0)  # noqa: E731
  sgn = lambda v: jnp.asarray(math.copysign(math.sqrt(abs(v)), v) * e0)  # noqa: E731
  return {**params, "lambda_q1": vec(a), "lambda_k1": sgn(a), "lambda_q2": vec(b), "lambda_k2": sgn(b)}


def _reference_standard_heads(params, x, lambda_init):
  """Standard softmax attention of the A₁ heads (query/key heads 2h) with value width 2d, followed by the
  same per-head RMSNorm, gain and (1 − λ_init) scale, in float64 numpy."""
  p = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), flax.core.unfreeze(params))
  x = np.asarray(x, np.float64)
  b = x.shape[0]
  q = (x @ p["q_proj"]["kernel"]).reshape(b, N, H, 2, D)[:, :, :, 0].transpose(0, 2, 1, 3)
  k = (x @ p["k_proj"]["kernel"]).reshape(b, N, H, 2, D)[:, :, :, 0].transpose(0, 2, 1, 3)
  v = (x @ p["v_proj"]["kernel"]).reshape(b, N, H, 2 * D).transpose(0, 2, 1, 3)
  s = np.einsum("bhnd,bhmd->bhnm", q, k) / math.sqrt(D)
  a = np.exp(s - s.max(-1, keepdims=True))
  a /= a.sum(-1, keepdims=True)
  o = np.einsum("bhnm,bhme->bhne", a, v)
  o = o / np.sqrt(np.mean(o ** 2, -1, keepdims=True) + 1e-5) * p["norm_gain"].reshape(1, 1, 1, -1)
  o = o * (1 - lambda_init)
  return o.transpose(0, 2, 1, 3).reshape(b, N, DIM) @ p["out_proj"]["kernel"]


def test_lambda_schedule_and_reparameterisation():
  assert lambda_init_schedule(0) == pytest.approx(0.2)
  assert lambda_init_schedule(3) == pytest.approx(0.8 - 0.6 * math.exp(-0.9))
  assert lambda_init_schedule(100) == pytest.approx(0.8)
  z = jnp.zeros(D)
  assert float(reparameterized_lambda(z, z, z, z, 0.8)) == pytest.approx(0.8)  # e⁰ − e⁰ + λ_init
  layer, params, x = _layer_and_params()
  _, maps = layer.apply({"params": _with_lambda(params, -0.7, 0.8)}, x, return_maps=True)
  assert float(maps.lam) == pytest.approx(-0.7, abs=1e-6)


def test_lambda_zero_reduces_to_standard_attention_with_the_same_normalisation():
  lambda_init = 0.8
  layer, params, x = _layer_and_params(lambda_init)
  params = _with_lambda(params, 0.0, lambda_init)
  out, maps = layer.apply({"params": params}, x, return_maps=True)
  assert abs(float(maps.lam)) < 1e-6
  np.testing.assert_allclose(np.asarray(out), _reference_standard_heads(params, x, lambda_init), rtol=2e-5,
                             atol=2e-5)
  # With λ = 0 the second map's projections (query/key heads 2h + 1) have no effect.
  q = np.asarray(params["q_proj"]["kernel"]).reshape(DIM, H, 2, D).copy()
  q[:, :, 1] += 5.0
  moved = {**params, "q_proj": {"kernel": jnp.asarray(q.reshape(DIM, DIM))}}
  np.testing.assert_allclose(np.asarray(layer.apply({"params": moved}, x)), np.asarray(out), rtol=1e-5, atol=1e-6)


def _random_float64_params(lambda_target, lambda_init, seed):
  """Random float64 params of DifferentialAttention(H, D): Gaussian q/k/v/out kernels (logits of order 1, so
  the maps are neither uniform nor one-hot), a non-trivial RMSNorm gain, and four random λ vectors, two of
  them shifted along the others so that exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init = lambda_target."""
  rng = np.random.default_rng(seed)
  kernel = lambda: jnp.asarray(rng.normal(size=(DIM, DIM)) / math.sqrt(DIM))  # noqa: E731
  q1, k1, q2, k2 = (rng.normal(size=D) for _ in range(4))
  dot2 = 0.4                                         # exp(0.4) − λ_init + λ > 0 for every λ ≥ −0.5 tested
  dot1 = math.log(lambda_target - lambda_init + math.exp(dot2))
  k1 = k1 + (dot1 - q1 @ k1) * q1 / (q1 @ q1)        # q1·k1 = dot1, k1 still a random direction
  k2 = k2 + (dot2 - q2 @ k2) * q2 / (q2 @ q2)
  return {"q_proj": {"kernel": kernel()}, "k_proj": {"kernel": kernel()}, "v_proj": {"kernel": kernel()},
          "out_proj": {"kernel": kernel()}, "lambda_q1": jnp.asarray(q1), "lambda_k1": jnp.asarray(k1),
          "lambda_q2": jnp.asarray(q2), "lambda_k2": jnp.asarray(k2),
          "norm_gain": jnp.asarray(1.0 + 0.3 * rng.normal(size=2 * D))}


def _reference_differential(p, x, lambda_init):
  """DifferentialAttention's reference semantics in float64 NumPy, written from the param arrays alone.

  Layout (Ye et al.'s multihead_diffattn.py): the q/k projections have 2H column blocks of width D, block
  2h + j feeding map j of differential head h (interleaved, not [all A₁ heads | all A₂ heads]); v_proj
  and the rows of out_proj have H blocks of width 2D, block h belonging to head h.
  Returns (out [B, N, DIM], A₁ [B, H, N, N], A₂ [B, H, N, N], λ, min over heads/rows of rms((A₁ − λA₂)V)).
  """
  p = {k: (np.asarray(v, np.float64) if not isinstance(v, dict) else np.asarray(v["kernel"], np.float64))
       for k, v in p.items()}
  x = np.asarray(x, np.float64)
  lam = (math.exp(float(p["lambda_q1"] @ p["lambda_k1"])) - math.exp(float(p["lambda_q2"] @ p["lambda_k2"]))
         + lambda_init)

  def softmax_map(h, j):
    cols = slice((2 * h + j) * D, (2 * h + j + 1) * D)
    s = np.einsum("bnd,bmd->bnm", x @ p["q_proj"][:, cols], x @ p["k_proj"][:, cols]) * D ** -0.5
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)

  heads, maps1, maps2, rms_min = [], [], [], np.inf
  for h in range(H):
    a1, a2 = softmax_map(h, 0), softmax_map(h, 1)
    o = (a1 - lam * a2) @ (x @ p["v_proj"][:, 2 * D * h:2 * D * (h + 1)])      # [B, N, 2D]
    rms = np.sqrt(np.mean(o ** 2, -1, keepdims=True))
    rms_min = min(rms_min, float(rms.min()))
    heads.append((1.0 - lambda_init) * o / np.sqrt(rms ** 2 + 1e-5) * p["norm_gain"])
    maps1.append(a1)
    maps2.append(a2)
  out = np.concatenate(heads, axis=-1) @ p["out_proj"]                          # row block h·2D: head h
  return out, np.stack(maps1, 1), np.stack(maps2, 1), lam, rms_min


@pytest.mark.parametrize("lam", [-0.5, 0.5, 1.5])
def test_forward_matches_a_float64_reference_of_interleaved_differential_heads(lam):
  """The layer equals an independent float64 NumPy (A₁ − λA₂)V reference (interleaved heads, per-head
  RMSNorm with a non-unit gain, (1 − λ_init), out_proj) at λ ≠ 0, with H = 2 heads and random,
  non-symmetric params (λ vectors included), so that any head or map mixing changes the output.

  Checked to fail at every λ (attention/differential.py edited in a scratch copy of the repository, then
  discarded) against: A₂ taking its keys from head 0 (k[:, :1, 1] broadcast over heads) or its queries
  from head 0; the sign of λ flipped (A₁ + λA₂); the blocked instead of the interleaved q/k layout
  (reshape(b, n, 2, h, d)); A₁ and A₂ swapped; the value heads laid out as reshape(b, n, 2d, h); the
  RMSNorm gain ignored; the (1 − λ_init) factor dropped; scores scaled by 1/d instead of 1/√d.
  """
  lambda_init = 0.35
  with jax.enable_x64(True):
    layer = DifferentialAttention(H, D, lambda_init)
    params = _random_float64_params(lam, lambda_init, seed=int(10 * lam) + 7)
    x = jnp.asarray(np.random.default_rng(1).normal(size=(2, N, DIM)))
    out, maps = layer.apply({"params": params}, x, return_maps=True)
    ref, a1, a2, ref_lam, rms_min = _reference_differential(params, x, lambda_init)
    assert out.dtype == jnp.float64 and maps.a1.dtype == jnp.float64
  assert ref_lam == pytest.approx(lam, abs=1e-12)
  # Tolerance: everything is float64 (unit roundoff 1.1e-16) and each entry is a few dot products of
  # length ≤ 16, one softmax and one RMSNorm, so both sides round at the 1e-15 level; the RMSNorm divides
  # by rms((A₁ − λA₂)V) ≥ rms_min (asserted below), amplifying that by at most ~10× (the measured error is
  # ≤ 1.4e-15). 1e-11 leaves a wide margin, while each bug listed in the docstring moves the output (of
  # order 1) by 0.5 to 3.3 at every λ here (measured).
  assert rms_min > 0.05
  np.testing.assert_allclose(float(maps.lam), lam, rtol=0, atol=1e-12)
  np.testing.assert_allclose(np.asarray(maps.a1), a1, rtol=0, atol=1e-13)
  np.testing.assert_allclose(np.asarray(maps.a2), a2, rtol=0, atol=1e-13)
  assert np.abs(ref).max() > 0.5
  np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("lam", [-1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0])
def test_finite_for_lambda_in_minus_one_to_two(lam):
  layer, params, x = _layer_and_params(0.5)
  out, maps = layer.apply({"params": _with_lambda(params, lam, 0.5)}, 30.0 * x, return_maps=True)
  assert float(maps.lam) == pytest.approx(lam, abs=1e-5)
  assert np.isfinite(np.asarray(out)).all()
  np.testing.assert_allclose(np.asarray(maps.a1).sum(-1), 1.0, rtol=1e-5)
  np.testing.assert_allclose(np.asarray(maps.a2).sum(-1), 1.0, rtol=1e-5)


def test_identical_maps_with_lambda_one_give_zero_not_nan():
  """A₁ = A₂ and λ = 1: (A₁ − λA₂)V = 0, and RMSNorm's eps keeps the output at exactly 0."""
  layer, params, x = _layer_and_params(0.5, learnable_gain=False)
  q = np.array(params["q_proj"]["kernel"]).reshape(DIM, H, 2, D)
  k = np.array(params["k_proj"]["kernel"]).reshape(DIM, H, 2, D)
  q[:, :, 1], k[:, :, 1] = q[:, :, 0], k[:, :, 0]
  params = _with_lambda({**params, "q_proj": {"kernel": jnp.asarray(q.reshape(DIM, DIM))},
                         "k_proj": {"kernel": jnp.asarray(k.reshape(DIM, DIM))}}, 1.0, 0.5)
  out = np.asarray(layer.apply({"params": params}, x))
  assert np.isfinite(out).all() and np.abs(out).max() < 1e-4


def test_softmax_runs_in_float32_for_narrow_inputs():
  q = jax.random.normal(jax.random.key(0), (1, 2, N, D)).astype(jnp.bfloat16)
  a = softmax_attention_map(q, q)
  assert a.dtype == jnp.float32
  np.testing.assert_allclose(np.asarray(a).sum(-1), 1.0, rtol=1e-6)


def test_standard_and_differential_layers_have_the_same_projection_shapes():
  x = jnp.zeros((1, N, DIM))
  std = MultiHeadSelfAttention(2 * H, D).init(jax.random.key(0), x)["params"]
  diff = DifferentialAttention(H, D, 0.8).init(jax.random.key(0), x)["params"]
  for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
    assert std[name]["kernel"].shape == diff[name]["kernel"].shape == (DIM, DIM)
  extra = sum(np.size(v) for k, v in diff.items() if k not in std)
  assert extra == 4 * D + 2 * D  # λ's four vectors and the RMSNorm gain


@pytest.mark.parametrize("patch, channels", [(4, 3), (2, 1), (8, 3)])
def test_patch_embedding_is_the_strided_convolution_with_its_parameters(patch, channels):
  """The ViT's patch embedding (one matrix product) equals ``nn.Conv`` with stride = kernel = p on the same
  weights, to float32 rounding, and its parameters are ``nn.Conv``'s: the same tree, shapes and initial
  values, so checkpoints and the torch twin read them unchanged. A product with the patch's pixels in
  another order (the transpose of (row, column) in each patch) fails the first check."""
  from attention.vit import PatchEmbedding
  x = jax.random.uniform(jax.random.key(1), (5, 16, 16, channels))
  conv = flax.linen.Conv(32, (patch, patch), strides=(patch, patch), padding="VALID")
  conv_params = conv.init(jax.random.key(0), x)["params"]
  embed_params = PatchEmbedding(32, patch).init(jax.random.key(0), x)["params"]
  assert jax.tree_util.tree_structure(embed_params) == jax.tree_util.tree_structure(conv_params)
  for a, b in zip(jax.tree_util.tree_leaves(embed_params), jax.tree_util.tree_leaves(conv_params)):
    np.testing.assert_array_equal(a, b)
  params = {"kernel": jax.random.normal(jax.random.key(2), conv_params["kernel"].shape),
            "bias": jax.random.normal(jax.random.key(3), (32,))}
  want = conv.apply({"params": params}, x)
  got = PatchEmbedding(32, patch).apply({"params": params}, x)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  if patch > 1:  # the check can fail: the same product with each patch transposed is another map
    swapped = {**params, "kernel": params["kernel"].transpose(1, 0, 2, 3)}
    assert np.abs(PatchEmbedding(32, patch).apply({"params": swapped}, x) - want).max() > 1e-2
  with pytest.raises(ValueError, match="divisible by patch_size"):
    PatchEmbedding(32, 3).apply({"params": params}, x)
  with jax.enable_x64(True):  # float32 parameters, as nn.Conv's, also when float64 is on
    assert {leaf.dtype for leaf in jax.tree_util.tree_leaves(PatchEmbedding(32, patch).init(
        jax.random.key(0), x.astype(jnp.float64)))} == {jnp.dtype(jnp.float32)}
  for bad in (dict(features=32, patch_size=0), dict(features=32, patch_size=-2), dict(features=0, patch_size=2)):
    with pytest.raises(ValueError, match="must be an integer >= 1"):
      PatchEmbedding(**bad).init(jax.random.key(0), x)


@pytest.mark.parametrize("kwargs, match", [
    (dict(num_heads=0, head_dim=4, lambda_init=0.8), "num_heads"),
    (dict(num_heads=2, head_dim=0, lambda_init=0.8), "head_dim"),
    (dict(num_heads=2, head_dim=4, lambda_init=1.0), "lambda_init"),
    (dict(num_heads=2, head_dim=4, lambda_init=-0.1), "lambda_init"),
    (dict(num_heads=2, head_dim=4, lambda_init=float("nan")), "lambda_init"),
])
def test_bad_layer_arguments(kwargs, match):
  with pytest.raises(ValueError, match=match):
    DifferentialAttention(**kwargs).init(jax.random.key(0), jnp.zeros((1, N, DIM)))


def test_wrong_input_width_and_rank():
  with pytest.raises(ValueError, match="feature dim"):
    DifferentialAttention(H, D, 0.8).init(jax.random.key(0), jnp.zeros((1, N, DIM + 1)))
  with pytest.raises(ValueError, match="batch, tokens, dim"):
    MultiHeadSelfAttention(2 * H, D).init(jax.random.key(0), jnp.zeros((N, DIM)))
  with pytest.raises(ValueError, match="lambda_init_schedule|layer_index"):
    lambda_init_schedule(-1)


# Gradient alignment -------------------------------------------------------------------------------------


def test_jacobian_gram_of_a_hand_built_two_branch_map_has_the_known_angle():
  """A₁(x) = W₁x, A₂(x) = c·(cos φ·W₁ + sin φ·W⊥)x with ⟨W₁, W⊥⟩_F = 0, ‖W⊥‖ = ‖W₁‖: cos θ = cos φ, ρ = c."""
  rng = np.random.default_rng(0)
  w1 = rng.normal(size=(6, 7))
  w_perp = rng.normal(size=(6, 7))
  w_perp -= np.sum(w_perp * w1) / np.sum(w1 * w1) * w1
  w_perp *= np.linalg.norm(w1) / np.linalg.norm(w_perp)
  phi, c = 2.0, 0.7
  w2 = c * (math.cos(phi) * w1 + math.sin(phi) * w_perp)
  with jax.enable_x64(True):
    maps_fn = lambda x: jnp.stack([jnp.asarray(w1) @ x, jnp.asarray(w2) @ x])[None]  # noqa: E731  [1, 2, 6]
    gram = np.asarray(jacobian_gram(maps_fn, jnp.asarray(rng.normal(size=7)), chunk_size=3))[0]
  assert gram[0, 1] / math.sqrt(gram[0, 0] * gram[1, 1]) == pytest.approx(math.cos(phi), abs=1e-12)
  assert math.sqrt(gram[1, 1] / gram[0, 0]) == pytest.approx(c, abs=1e-12)
  cos, rho = cosine_alignment(w1, w2)
  assert float(cos) == pytest.approx(math.cos(phi), abs=1e-6) and float(rho) == pytest.approx(c, abs=1e-6)


def test_mirrored_softmax_branches_are_anti_aligned_and_lemma1_gives_one_plus_lambda_rho():
  """A₁(x) = softmax(x), A₂(x) = softmax(−x): at x = 0, J₂ = −J₁, so cos θ = −1 and ‖∇A_DA‖ = (1 + λ)‖∇A₁‖."""
  with jax.enable_x64(True):
    maps_fn = lambda x: jnp.stack([jax.nn.softmax(x), jax.nn.softmax(-x)])[None]  # noqa: E731
    gram = np.asarray(jacobian_gram(maps_fn, jnp.zeros(5, jnp.float64)))[0]
    cos = gram[0, 1] / math.sqrt(gram[0, 0] * gram[1, 1])
    lam = 0.8
    via_lemma = float(lemma1_norm(math.sqrt(gram[0, 0]), 1.0, cos, lam))
  assert cos == pytest.approx(-1.0, abs=1e-12)
  assert via_lemma == pytest.approx((1 + lam) * math.sqrt(gram[0, 0]), rel=1e-12)


def test_jacobian_gram_equals_explicit_jacobians():
  with jax.enable_x64(True):
    x = jax.random.normal(jax.random.key(0), (3, 4), jnp.float64)
    maps_fn = lambda x: jnp.stack([jnp.tanh(x) ** 2, jnp.sin(x) * x])[None]  # noqa: E731
    gram = np.asarray(jacobian_gram(maps_fn, x, chunk_size=5))[0]
    jac = np.asarray(jax.jacfwd(maps_fn)(x))[0].reshape(2, -1)
  np.testing.assert_allclose(gram, jac @ jac.T, rtol=1e-12)


def _tiny_pair(lambda_init=0.8, depth=2):
  base = ViTConfig(num_classes=3, image_size=8, patch_size=4, dim=8, depth=depth, num_heads=4,
                   lambda_init=lambda_init)
  vit_cfg, diff_cfg = matched_configs(base)
  return vit_cfg, diff_cfg, init_params(vit_cfg, key=jax.random.key(0), channels=1), \
      init_params(diff_cfg, key=jax.random.key(1), channels=1)


def test_lemma1_holds_to_float64_precision_on_real_images():
  from experiments.data import load_dataset
  digits = load_dataset("mnist", "test", n=2, seed=0).x[:, ::4, ::4]  # real digits, 28×28 -> 7×7
  images = np.pad(digits, ((0, 0), (0, 1), (0, 1), (0, 0)))  # -> 8×8
  vit_cfg, diff_cfg, vit_p, diff_p = _tiny_pair(lambda_init=None)  # depth schedule
  with jax.enable_x64(True):
    to64 = lambda t: jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), t)  # noqa: E731
    for image in images:
      a = head_alignment(diff_cfg, to64(diff_p), jnp.asarray(image, jnp.float64), vit_config=vit_cfg,
                         vit_params=to64(vit_p), chunk_size=16)
      np.testing.assert_allclose(a.norm_da_lemma1, a.norm_da, rtol=1e-12)
      assert np.all(np.abs(a.cos_theta) <= 1 + 1e-12)
      # Theorem 3's condition is, given Lemma 1, exactly ‖∇A_DA‖ > ‖∇A_std‖.
      np.testing.assert_array_equal(a.predicted_da_more_sensitive, a.norm_da > a.norm_std)
      assert a.lam.shape == (2,) and a.cos_theta.shape == (2, 2)


def test_gamma_compares_each_differential_head_with_all_heads_of_the_matched_layer():
  """By hand: ‖J₁‖ = (2, 4) against ViT heads (1, 3, 1, 3) → ‖J_std‖ = √((1 + 9 + 1 + 9)/4) = √5 for both
  heads, γ = 2/√5, 4/√5, spread [2/3, 2] and [4/3, 4]. Any permutation of the ViT heads leaves it unchanged;
  the old position pairing (head 2h: norms 1, 1) would have given γ = 2, 4, and (3, 1, 3, 1) would flip it."""
  from attention.alignment import matched_head_norms
  n1, std = np.array([[2.0, 4.0]]), np.array([[1.0, 3.0, 1.0, 3.0]])
  norm_std, gamma, lo, hi = matched_head_norms(n1, std)
  np.testing.assert_allclose(norm_std, [[np.sqrt(5), np.sqrt(5)]], rtol=1e-15)
  np.testing.assert_allclose(gamma, [[2 / np.sqrt(5), 4 / np.sqrt(5)]], rtol=1e-15)
  np.testing.assert_allclose(lo, [[2 / 3, 4 / 3]], rtol=1e-15)
  np.testing.assert_allclose(hi, [[2.0, 4.0]], rtol=1e-15)
  for perm in ([3, 2, 1, 0], [1, 0, 3, 2], [0, 2, 1, 3]):
    np.testing.assert_array_equal(matched_head_norms(n1, std[:, perm])[1], gamma)
  with pytest.raises(ValueError, match="rank 2"):
    matched_head_norms(n1[0], std)


def test_head_alignment_gamma_uses_every_vit_head_and_lemma1_does_not_depend_on_the_vit():
  """On a real pair: γ equals ‖J₁‖ over the RMS of ``standard_head_norms`` of all ViT heads; cos θ, ρ,
  ‖J_DA‖ and Lemma 1 are identical with and without the ViT (they never use γ)."""
  from attention.alignment import standard_head_norms
  vit_cfg, diff_cfg, vit_p, diff_p = _tiny_pair()
  x = jax.random.uniform(jax.random.key(5), (8, 8, 1))
  with_vit = head_alignment(diff_cfg, diff_p, x, vit_config=vit_cfg, vit_params=vit_p, chunk_size=64)
  alone = head_alignment(diff_cfg, diff_p, x, chunk_size=64)
  for name in ("cos_theta", "rho", "norm_a1", "norm_a2", "norm_da", "norm_da_lemma1", "lam"):
    np.testing.assert_array_equal(getattr(with_vit, name), getattr(alone, name))
  with jax.enable_x64(True):
    std = np.asarray(standard_head_norms(vit_cfg, vit_p, jnp.asarray(x), chunk_size=64), np.float64)
  assert std.shape == (2, 4) and with_vit.norm_std_heads.shape == (2, 4)
  rms = np.sqrt((std ** 2).mean(axis=1))[:, None]
  np.testing.assert_allclose(with_vit.gamma, with_vit.norm_a1 / rms, rtol=1e-6)
  assert np.all(with_vit.gamma_min <= with_vit.gamma) and np.all(with_vit.gamma <= with_vit.gamma_max)
  assert np.all(np.isnan(alone.gamma)) and np.all(np.isnan(alone.norm_std_heads))


def test_float32_model_with_float64_gram_meets_lemma1_closely():
  vit_cfg, diff_cfg, vit_p, diff_p = _tiny_pair()
  x = jax.random.uniform(jax.random.key(3), (8, 8, 1))
  a = head_alignment(diff_cfg, diff_p, x, vit_config=vit_cfg, vit_params=vit_p, chunk_size=64)
  np.testing.assert_allclose(a.norm_da_lemma1, a.norm_da, rtol=1e-6)
  assert np.all(np.isfinite(a.gamma)) and np.all(a.gamma > 0)


def test_theorem3_condition_matches_lemma1_norms_for_both_signs_of_lambda_rho():
  rng = np.random.default_rng(1)
  n1, rho = rng.uniform(0.1, 2, 500), rng.uniform(0.1, 2, 500)
  cos, lam = rng.uniform(-1, 1, 500), rng.uniform(-1, 2, 500)
  n_std = rng.uniform(0.1, 3, 500)
  gamma = n1 / n_std
  predicted = np.asarray(theorem3_predicts_da_more_sensitive(cos, lam, rho, gamma))
  np.testing.assert_array_equal(predicted, np.asarray(lemma1_norm(n1, rho, cos, lam)) > n_std)
  # The divided form: cos θ < threshold for λρ > 0, reversed for λρ < 0.
  thr = np.asarray(theorem3_threshold(lam, rho, gamma))
  np.testing.assert_array_equal(predicted, np.where(lam * rho > 0, cos < thr, cos > thr))


def _alignment(cos_LxH, rho_LxH, n1_LxH, lam_L, n_std_LxH, lemma_scale=1.0):
  cos, rho, n1, n_std = map(np.asarray, (cos_LxH, rho_LxH, n1_LxH, n_std_LxH))
  lam = np.asarray(lam_L, float)
  norm_da = np.asarray(lemma1_norm(n1, rho, cos, lam[:, None]))
  gamma = n1 / n_std
  predicted = np.asarray(theorem3_predicts_da_more_sensitive(cos, lam[:, None], rho, gamma))
  return HeadAlignment(cos, rho, n1, rho * n1, norm_da, norm_da * lemma_scale, lam, n_std, gamma, predicted)


def test_layer_alignment_statistics_by_hand():
  """Two samples, two heads, λ = −0.5 at layer 1 (layer 0 is a decoy); the expected values are worked out
  by hand: ‖J_DA‖² = ‖J₁‖²(1 + λ²ρ² − 2λρ cos θ) gives ‖J_DA‖ = √1.75, 1, 2√0.9625, 2√2.15 against
  ‖J_std‖ = 1, 0.5, 3, 1, so Theorem 3 predicts [[T, T], [F, T]]."""
  decoy = ([[0.99, 0.99]], [[5.0, 5.0]], [[1.0, 1.0]], [0.1], [[1.0, 1.0]])
  s0 = _alignment(decoy[0] + [[0.5, -0.5]], decoy[1] + [[1.0, 2.0]], decoy[2] + [[1.0, 1.0]], [0.1, -0.5],
                  decoy[4] + [[1.0, 0.5]], lemma_scale=1.001)
  s1 = _alignment(decoy[0] + [[-0.2, 0.9]], decoy[1] + [[0.5, 1.0]], decoy[2] + [[2.0, 2.0]], [0.1, -0.5],
                  decoy[4] + [[3.0, 1.0]])
  stats = layer_alignment_statistics([s0, s1], 1, [2.0, 1.0], [1.0, 3.0])
  assert np.array_equal(stats.theorem3_predicted, [[True, True], [False, True]])
  assert (stats.n_samples, stats.heads, stats.lam) == (2, 2, -0.5)
  assert stats.negative_alignment_frequency == 0.5
  assert stats.cos_theta_mean == pytest.approx(0.175)
  assert stats.rho_median == 1.0 and stats.gamma_median == pytest.approx(1.5)   # γ = 1, 2, 2/3, 2
  assert stats.lambda_rho_negative_frequency == 1.0
  assert stats.lemma1_max_relative_error == pytest.approx(1e-3, rel=1e-3)
  assert stats.theorem3_predicted_frequency == 0.75
  assert stats.theorem3_matches_map_norms == 1.0   # Theorem 3 is an equivalence given Lemma 1
  assert np.array_equal(stats.diffvit_more_sensitive, [True, False])
  assert stats.diffvit_more_sensitive_frequency == 0.5
  assert stats.theorem3_agreement == 0.75   # [[T, T], [F, T]] against [T, F] per sample
  with pytest.raises(ValueError, match="at least one"):
    layer_alignment_statistics([], 0, [], [])
  with pytest.raises(ValueError, match="layer"):
    layer_alignment_statistics([s0, s1], 2, [2.0, 1.0], [1.0, 3.0])
  with pytest.raises(ValueError, match="lipschitz"):
    layer_alignment_statistics([s0, s1], 1, [2.0], [1.0, 3.0])


def test_head_alignment_argument_errors():
  vit_cfg, diff_cfg, vit_p, diff_p = _tiny_pair(depth=1)
  with pytest.raises(ValueError, match="differential"):
    head_alignment(vit_cfg, vit_p, jnp.zeros((8, 8, 1)))
  with pytest.raises(ValueError, match="one image"):
    head_alignment(diff_cfg, diff_p, jnp.zeros((1, 8, 8, 1)))
  with pytest.raises(ValueError, match="chunk_size"):
    jacobian_gram(lambda x: x[None, None], jnp.zeros(3), chunk_size=0)
