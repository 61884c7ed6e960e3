"""Lipschitz layers, the composed ViT bound and margin certificates (attention.lipschitz_layers,
certified_vit, certification): 1-Lipschitz layers, sound layer radii, no certified sample broken by PGD."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attacks import pgd_l2
from attention import certification as C
from attention import sensitivity
from attention.certified_vit import (
  CertifiedViT,
  CertifiedViTConfig,
  MultiHeadAttention,
  embedding_lipschitz,
  forward_with_intermediates,
  head_matrices,
  patchify,
)
from attention.lipschitz_layers import (
  bounded_norm,
  sll,
  sll_scaling,
  spectral_normalized,
)

SMALL = CertifiedViTConfig(num_classes=3, image_size=8, channels=1, patch_size=4, dim=8, depth=2,
                           num_heads=2, sll_hidden=12, attention_bound=1.0, value_bound=1.0)

def _sll_params(seed, d=5, m=7, scale=1.0):
  rng = np.random.default_rng(seed)
  return rng.normal(size=(m, d)) * scale, rng.normal(size=m), rng.normal(size=m)

@pytest.mark.parametrize("seed,scale", [(0, 0.1), (1, 1.0), (2, 10.0)])
def test_sll_is_one_lipschitz(seed, scale):
  with jax.enable_x64(True):
    w, b, q = _sll_params(seed, scale=scale)
    rng = np.random.default_rng(seed + 10)
    x, y = rng.normal(size=(500, 5)) * 3, rng.normal(size=(500, 5)) * 3
    y[:250] = x[:250] + 1e-3 * rng.normal(size=(250, 5))   # near pairs probe the Jacobian
    hx, hy = np.asarray(sll(x, w, b, q)), np.asarray(sll(y, w, b, q))
    ratios = np.linalg.norm(hx - hy, axis=1) / np.linalg.norm(x - y, axis=1)
    assert ratios.max() <= 1 + 1e-12
    jac = jax.vmap(jax.jacfwd(lambda v: sll(v, w, b, q)))(jnp.asarray(x[:100]))
    norms = np.linalg.svd(np.asarray(jac), compute_uv=False)[:, 0]
    assert norms.max() <= 1 + 1e-12
    assert norms.max() > 0.99   # the Jacobian is I − 2WᵀTΛW: some direction keeps norm ~1
    # The condition behind it, WᵀTW ⪯ I (Gershgorin on Q⁻¹WWᵀQ), holds for the SLL scaling t.
    t = np.asarray(sll_scaling(w, q))
    assert np.linalg.eigvalsh(w.T @ np.diag(t) @ w).max() <= 1 + 1e-12

def test_sll_zero_row_gives_no_nan():
  w, b, q = _sll_params(0)
  w[2] = 0.0
  assert np.all(np.isfinite(np.asarray(sll(np.ones((3, 5)), w, b, q))))
  assert float(sll_scaling(w, q)[2]) == 0.0

def test_bounded_norm_is_one_lipschitz_and_bounded():
  rng = np.random.default_rng(0)
  x, y = rng.normal(size=(400, 6)) * 4, rng.normal(size=(400, 6)) * 4
  nx, ny = np.asarray(bounded_norm(x, 2.0)), np.asarray(bounded_norm(y, 2.0))
  assert np.linalg.norm(nx, axis=1).max() <= 2.0 + 1e-5
  np.testing.assert_allclose(nx.mean(axis=1), 0.0, atol=1e-6)
  assert np.all(np.linalg.norm(nx - ny, axis=1) <= np.linalg.norm(x - y, axis=1) + 1e-5)
  grad = jax.grad(lambda v: jnp.sum(bounded_norm(v, 1.0)))(jnp.zeros(4))
  assert np.all(np.isfinite(np.asarray(grad)))
  small = rng.normal(size=6) * 0.01
  np.testing.assert_allclose(np.asarray(bounded_norm(small, 2.0)), small - small.mean(), rtol=1e-5)

def test_spectral_normalized_and_patchify():
  w = np.random.default_rng(0).normal(size=(6, 4)) * 5
  assert np.linalg.norm(np.asarray(spectral_normalized(w)), 2) <= 1 + 1e-5
  small = w / 100
  np.testing.assert_allclose(np.asarray(spectral_normalized(small)), small, rtol=1e-6)
  x = np.random.default_rng(1).normal(size=(2, 8, 8, 3))
  p = np.asarray(patchify(jnp.asarray(x), 4))
  assert p.shape == (2, 4, 48)
  np.testing.assert_allclose(np.linalg.norm(p.reshape(2, -1), axis=1), np.linalg.norm(x.reshape(2, -1), axis=1),
                             rtol=1e-6)
  np.testing.assert_allclose(p[0, 1], x[0, :4, 4:8].reshape(-1), rtol=1e-6)

@functools.partial(jax.jit, static_argnums=0)
def _init_params(config, key, x):
  return CertifiedViT(config).init(key, x)["params"]

@functools.lru_cache(maxsize=None)
def _init(config, seed):
  x = jax.random.uniform(jax.random.PRNGKey(seed + 100), (12, config.image_size, config.image_size,
                                                         config.channels))
  return _init_params(config, jax.random.PRNGKey(seed), x[:1]), x

def _model(seed=0, config=SMALL):
  params, x = _init(config, seed)
  return config, params, x

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_spectral_dense_gradient_at_init_does_not_depend_on_rounding(seed):
  """The machine-dependent golden record (docs/versions.md): at an orthogonal init every
  singular value is 1, where W/max(1, σ_max) is not differentiable, so a relative 1e-7 change of W (what
  another CPU's LAPACK or thread count gives) moved the gradient by ~10 %. At the Gaussian init the gradient
  is continuous there: it moves by O(1e-7)·κ. The orthogonal case is kept to show the test can fail."""
  from attention.lipschitz_layers import SpectralDense
  layer = SpectralDense(8)
  x = jax.random.normal(jax.random.PRNGKey(10 + seed), (16, 49))
  params = layer.init(jax.random.PRNGKey(seed), x)["params"]

  def gradient(kernel):
    loss = lambda k: jnp.sum(jnp.sin(layer.apply({"params": dict(params, kernel=k)}, x)))  # noqa: E731
    return np.asarray(jax.grad(loss)(kernel))

  def spread(kernel):
    g = gradient(kernel)
    return max(np.abs(gradient(kernel * s) - g).max() for s in (1 + 3e-7, 1 - 3e-7)) / np.abs(g).max()

  assert spread(params["kernel"]) < 1e-4
  orthogonal = jax.nn.initializers.orthogonal()(jax.random.PRNGKey(seed), (49, 8))
  assert spread(orthogonal) > 1e-2

def test_head_matrices_reproduce_the_layer():
  with jax.enable_x64(True):
    config, params, x = _model()
    params = jax.tree_util.tree_map(lambda p: p.astype(jnp.float64), params)
    _, inputs = _features_and_inputs(config, params, x.astype(jnp.float64))
    a, w_v = head_matrices(config, params["block_0"]["attention"])
    assert float(jnp.max(jnp.linalg.svd(a, compute_uv=False)[:, 0])) <= config.attention_bound * (1 + 1e-12)
    assert float(jnp.max(jnp.linalg.svd(w_v, compute_uv=False)[:, 0])) <= 0.5 * (1 + 1e-12)
    y = inputs[0]
    heads = sum(jax.nn.softmax(y @ a[h] @ jnp.swapaxes(y, 1, 2), -1) @ y @ w_v[h] for h in range(2))
    layer = jax.jit(MultiHeadAttention(config).apply)({"params": params["block_0"]["attention"]}, y)
    b_o = params["block_0"]["attention"]["b_o"][None, None]
    np.testing.assert_allclose(np.asarray(layer - b_o), np.asarray(heads), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(sensitivity.multi_head_attention(y[0], a, w_v)), np.asarray(heads[0]),
                               rtol=1e-10, atol=1e-12)

@functools.partial(jax.jit, static_argnames=("config",))
def _features_and_inputs(config, params, x):
  out = forward_with_intermediates(config, params, x)
  return out.features, out.attention_inputs

@functools.partial(jax.jit, static_argnames=("config",))
def _pgd_step(config, params, x, z0, d, eps):
  """One PGD-L2 step on Σ_b ‖z(x_b + δ_b) − z(x_b)‖² (samples do not interact), step 0.3ε."""
  objective = lambda v: jnp.sum((_features_and_inputs(config, params, x + v)[0] - z0) ** 2)
  g = jax.grad(objective)(d)
  per_sample = lambda v: jnp.sqrt(jnp.sum(v ** 2, axis=(1, 2, 3), keepdims=True))
  d = d + 0.3 * eps * g / (per_sample(g) + 1e-30)
  return d * jnp.minimum(1.0, eps / per_sample(d))

def test_layer_radii_are_sound_under_attack():
  """Every attention input and the pooled feature move by at most the composed radii (every bound
  kind), for PGD on the feature deviation from a random start."""
  with jax.enable_x64(True):
    config, params, x = _model(1)
    params = jax.tree_util.tree_map(lambda p: p.astype(jnp.float64) * 3.0, params)  # sharper attention
    x = x.astype(jnp.float64)
    _, consts = C.layer_constants(config, params, x, key=jax.random.PRNGKey(0), power_iters=40)
    lip = embedding_lipschitz(params)
    z0, inputs0 = _features_and_inputs(config, params, x)
    for eps in (0.01, 0.3, 2.0):
      d = jax.random.normal(jax.random.PRNGKey(int(eps * 100)), x.shape, x.dtype)
      d = eps * d / jnp.linalg.norm(d.reshape(len(x), -1), axis=1)[:, None, None, None]
      for _ in range(25):
        d = _pgd_step(config, params, x, z0, d, eps)
      z1, inputs1 = _features_and_inputs(config, params, x + d)
      z_dev = np.linalg.norm(np.asarray(z1 - z0), axis=1)
      token_dev = np.linalg.norm(np.asarray(inputs1 - inputs0), axis=(2, 3))   # [L, B]
      for mode in C.MODES:
        radii = np.asarray(C.layer_radii(consts, eps, embed_lipschitz=lip, mode=mode))   # [L+1, B]
        rz = np.asarray(C.feature_radius(consts, eps, embed_lipschitz=lip, mode=mode))
        assert np.all(z_dev <= rz * (1 + 1e-9)), mode
        assert np.all(token_dev <= radii[:-1] * (1 + 1e-9)), mode
      # The min-radius of the last layer is within a modest factor of what the attack reached.
      assert np.median(np.asarray(C.layer_radii(consts, eps, embed_lipschitz=lip))[-2] / token_dev[-1]) < 50

def test_min_bound_never_looser_and_per_pair_never_weaker():
  config, params, x = _model(2)
  logits, consts = C.layer_constants(config, params, x, key=jax.random.PRNGKey(0))
  lip = embedding_lipschitz(params)
  labels = jnp.argmax(logits, axis=1)
  for eps in (0.01, 0.1, 1.0):
    r = {m: C.feature_radius(consts, eps, embed_lipschitz=lip, mode=m) for m in C.MODES}
    others = np.minimum(np.minimum(np.asarray(r["naive"]), np.asarray(r["fine"])), np.asarray(r["joint"]))
    assert np.all(np.asarray(r["min"]) <= others * (1 + 1e-6))
    rigorous = C.feature_radius(consts, eps, embed_lipschitz=lip, key_norm="closed_form")
    assert np.all(np.asarray(rigorous) >= np.asarray(r["min"]) * (1 - 1e-6))
    pair = C.margin_certificate(logits, labels, C.head_kernel(params), r["min"], form="per_pair")
    tsu = C.margin_certificate(logits, labels, C.head_kernel(params), r["min"], form="tsuzuku")
    assert np.all(np.asarray(pair) >= np.asarray(tsu))

def test_margin_certificate_by_hand():
  w = jnp.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])   # w_0 = e_0, w_1 = e_1, w_2 = 0
  logits = jnp.array([[2.0, 1.0, 0.0], [2.0, 1.0, 0.0], [0.0, 3.0, 0.0]])
  labels = jnp.array([0, 0, 0])
  # pair (0, 1): margin 1, ‖w_0 − w_1‖ = √2; pair (0, 2): margin 2, ‖w_0‖ = 1.
  radius = jnp.array([0.7, 0.71, 0.0])
  got = C.margin_certificate(logits, labels, w, radius)
  assert got.tolist() == [True, False, False]   # 1 > √2·0.7 = 0.99; 1 < √2·0.71; sample 3 misclassified
  # Tsuzuku: margin 1 > √2·‖W‖₂·r with ‖W‖₂ = 1.
  assert C.margin_certificate(logits, labels, w, jnp.array([0.7, 0.71, 0.0]), form="tsuzuku").tolist() == [
      True, False, False]

@pytest.mark.parametrize("radius", [-1.0, float("nan")])
def test_margin_certificate_rejects_a_negative_or_nan_radius(radius):
  # A negative radius would "certify" any correctly classified sample.
  w, logits, labels = jnp.eye(2, 3), jnp.array([[2.0, 1.0, 0.0]]), jnp.array([0])
  with pytest.raises(ValueError, match="radius must be >= 0"):
    C.margin_certificate(logits, labels, w, radius)

def test_certified_samples_survive_pgd_l2():
  """A certified sample is never broken by PGD-L2 at that ε (labels = the model's own predictions, so
  there are certified samples; an untrained model with sharpened weights so that some are not)."""
  config, params, x = _model(3)
  params = jax.tree_util.tree_map(lambda p: p * 2.0, params)
  logits, consts = C.layer_constants(config, params, x, key=jax.random.PRNGKey(0))
  labels = jnp.argmax(logits, axis=1)
  lip = embedding_lipschitz(params)
  apply = jax.tree_util.Partial(lambda p, v: CertifiedViT(config).apply({"params": p}, v), params)
  radius = C.certified_radius(consts, logits, labels, C.head_kernel(params), embed_lipschitz=lip,
                              eps_max=10.0)
  assert np.all(np.asarray(radius) > 0)
  n_certified = 0
  for eps in (0.5 * float(jnp.median(radius)), 2.0 * float(jnp.max(radius))):
    r = C.feature_radius(consts, eps, embed_lipschitz=lip)
    cert = np.asarray(C.margin_certificate(logits, labels, C.head_kernel(params), r))
    assert np.array_equal(cert, np.asarray(radius) >= eps)   # the radius is where the certificate ends
    attack = pgd_l2(apply, x, labels, eps=eps, key=jax.random.PRNGKey(1), alpha=eps / 4, steps=40,
                    bounds=(-10.0, 10.0))
    assert not np.any(np.asarray(attack.success) & cert)
    n_certified += int(cert.sum())
  assert n_certified > 0

def test_layer_terms_comparison_attack_and_tightness():
  """per_layer_bound_terms with the "min" radii: min(Σ_h min(naive, fine), joint) of layer l is r_{l+1} − r_l
  (the composition). bound_comparison counts the per-head ratios of the selected samples (NaN for none).
  attack_layer at a tiny radius attains ‖∂G/∂X‖₂ r (dense Jacobian) to first order, since it starts on the
  top singular vector, and 0 at r = 0; bound_tightness finds no violation (every ratio ≥ 1)."""
  config, params, x = _model(2)   # the same compiled constants as the tests above
  _, consts = C.layer_constants(config, params, x, key=jax.random.PRNGKey(0))
  radii = np.asarray(C.layer_radii(consts, 0.1, embed_lipschitz=embedding_lipschitz(params)))
  terms = C.per_layer_bound_terms(consts, radii)
  assert terms.naive.shape == (config.depth, len(x), config.num_heads) and terms.joint.shape == (2, len(x))
  layer_min = np.minimum(np.sum(np.minimum(terms.naive, terms.fine), axis=-1), terms.joint)
  np.testing.assert_allclose(layer_min, np.diff(radii, axis=0), rtol=1e-5)
  correct = np.arange(len(x)) % 3 != 0
  cmp = C.bound_comparison(consts, radii, correct)
  ratio = np.asarray(terms.naive)[:, correct] / np.asarray(terms.fine)[:, correct]
  assert cmp.fine_tighter_fraction == pytest.approx(np.mean(ratio > 1))
  assert cmp.naive_over_fine_median == pytest.approx(np.median(ratio))
  per_head = np.sum(np.minimum(terms.naive, terms.fine), axis=-1)[:, correct]
  assert cmp.joint_tighter_fraction == pytest.approx(np.mean(np.asarray(terms.joint)[:, correct] < per_head))
  assert cmp.fine_tighter_fraction == 0 or cmp.fine_gain_median > 1   # a win is a ratio above 1
  assert all(np.isnan(v) for v in C.bound_comparison(consts, radii, np.zeros(len(x), bool)))

  idx = np.arange(4)
  sub = jax.tree_util.tree_map(lambda f: f[idx], consts)
  rows = C.bound_tightness(config, params, x[idx], sub, radii[:, idx], key=jax.random.PRNGKey(1), steps=10,
                           restarts=1)
  assert [r.layer for r in rows] == list(range(config.depth))
  for r in rows:
    assert r.violations == 0 and r.ratio_min_min >= 1 and r.n_samples == 4
    assert r.ratio_min_min <= r.ratio_min_median <= r.ratio_min_max
    assert r.ratio_min_median <= min(r.ratio_fine_median, r.ratio_naive_median, r.ratio_joint_median) * (1 + 1e-6)
  _, inputs = _features_and_inputs(config, params, x[idx])
  a, w_v = head_matrices(config, params["block_0"]["attention"])
  dense = [np.linalg.norm(np.asarray(jax.jacfwd(lambda y: sensitivity.multi_head_attention(y, a, w_v))(y))
                          .reshape(y.size, y.size), 2) for y in inputs[0]]
  r_small, keys = np.full(4, 1e-3, np.float32), jax.random.split(jax.random.PRNGKey(2), 4)
  attained = np.asarray(C.attack_layer(a, w_v, inputs[0], r_small, keys, steps=10, restarts=1))
  np.testing.assert_allclose(attained / r_small, dense, rtol=1e-2)
  # At r = 0 the deviation ‖G(X + 0) − G(X)‖ is 0 up to the rounding of two evaluations of G, which XLA may
  # fuse differently (a few float32 ulps of ‖G(X)‖_F, not a bit-for-bit 0).
  at_zero = np.asarray(C.attack_layer(a, w_v, inputs[0], 0 * r_small, keys, steps=10, restarts=1))
  scale = np.array([np.linalg.norm(np.asarray(sensitivity.multi_head_attention(y, a, w_v))) for y in inputs[0]])
  assert np.all(at_zero <= 16 * np.finfo(np.float32).eps * scale)
  with pytest.raises(ValueError, match="radii_LxB"):
    C.per_layer_bound_terms(consts, radii[:-1])
  with pytest.raises(ValueError, match="correct_B"):
    C.bound_comparison(consts, radii, np.ones(len(x)))
  with pytest.raises(ValueError, match="steps"):
    C.attack_layer(a, w_v, inputs[0], r_small, keys, steps=-1, restarts=0)
  with pytest.raises(ValueError, match="radius"):
    C.attack_layer(a, w_v, inputs[0], -r_small, keys, steps=1, restarts=0)

def test_bad_inputs_raise_clear_errors():
  config, params, x = _model()
  logits, consts = C.layer_constants(config, params, x, key=jax.random.PRNGKey(0))
  kernel = C.head_kernel(params)
  with pytest.raises(ValueError, match="eps"):
    C.feature_radius(consts, -0.5, embed_lipschitz=1.0)
  with pytest.raises(ValueError, match="mode"):
    C.feature_radius(consts, 0.5, embed_lipschitz=1.0, mode="crown")
  with pytest.raises(ValueError, match="key_norm"):
    C.layer_radii(consts, 0.5, embed_lipschitz=1.0, key_norm="exact")
  with pytest.raises(ValueError, match="labels must lie"):
    C.margin_certificate(logits, jnp.full(len(x), 7), kernel, 0.1)
  with pytest.raises(ValueError, match="form"):
    C.margin_certificate(logits, jnp.zeros(len(x), int), kernel, 0.1, form="lmt")
  with pytest.raises(ValueError, match="eps_max"):
    C.certified_radius(consts, logits, jnp.zeros(len(x), int), kernel, embed_lipschitz=1.0, eps_max=0.0)
  with pytest.raises(ValueError, match="patch_size"):
    CertifiedViTConfig(image_size=10, patch_size=4).validate()
  with pytest.raises(ValueError, match="attention_bound"):
    CertifiedViTConfig(attention_bound=-1.0).validate()
  with pytest.raises(ValueError, match="expects images"):
    CertifiedViT(config).apply({"params": params}, jnp.zeros((1, 9, 9, 1)))
