"""Lipschitz layers, the composed ViT bound and margin certificates (attention.lipschitz_layers,
certified_vit, certification): 1-Lipschitz layers, sound layer radii, no certified sample broken by PGD."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import registry
from experiments.core.cli import experiment_main

from attacks import pgd_l2
from attention import certification as C
from attention import sensitivity
from attention.certified_vit import (CertifiedViT, CertifiedViTConfig, MultiHeadAttention, embedding_lipschitz,
                                     forward_with_intermediates, head_matrices, patchify)
from attention.lipschitz_layers import bounded_norm, sll, sll_scaling, spectral_normalized

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
  """The machine-dependent golden record (README, "Supported versions, and why"): at an orthogonal init every
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


# ----------------------------------------------------------------------------- α selection, standard config,
# report and claim rows (experiments.certify, certify_report, certify_claims.certify_rows)


def _split(n_per_class=10, classes=3, seed=0):
  from experiments.data.loader import Split, SplitInfo
  rng = np.random.default_rng(seed)
  y = np.repeat(np.arange(classes), n_per_class).astype(np.int32)
  x = rng.uniform(size=(y.size, 4, 4, 1)).astype(np.float32)
  info = SplitInfo("mnist", "train", "embedded", "-", tuple(range(classes)), tuple("abc"[:classes]),
                   np.arange(100, 100 + y.size, dtype=np.int64), False)
  return Split(x, y, info)


def test_validation_split_is_stratified_disjoint_and_deterministic():
  from experiments.certify.run import validation_split
  train = _split()
  fit, val = validation_split(train, 0.2, seed=0)
  assert len(fit.x) == 24 and len(val.x) == 6 and np.bincount(val.y).tolist() == [2, 2, 2]
  assert not set(fit.info.indices) & set(val.info.indices)
  assert sorted(set(fit.info.indices) | set(val.info.indices)) == list(train.info.indices)
  np.testing.assert_array_equal(val.x, train.x[np.isin(train.info.indices, val.info.indices)])
  again = validation_split(train, 0.2, seed=0)[1]
  assert again.info.indices.tolist() == val.info.indices.tolist()
  assert validation_split(train, 0.01, seed=0)[1].y.size == 3   # at least one image per class
  with pytest.raises(ValueError, match="validation_fraction"):
    validation_split(train, 0.0, seed=0)


def _val(alpha, cert, clean, eps=0.02, dataset="cifar10", n=100):
  return dict(dataset=dataset, attention_bound=alpha, kind="validation", eps=eps, layer=-1, n_validation=n,
              validation_certified_rigorous=cert, validation_certified_krylov=cert + 0.05,
              validation_clean_accuracy=clean, validation_indices=list(range(n)))


def test_selection_rule_ties_and_refusal_of_test_records():
  from experiments.certify.run import select_attention_bound
  best = select_attention_bound([_val(0.0625, 0.20, 0.30), _val(0.25, 0.25, 0.31), _val(1.0, 0.0, 0.36)])
  assert best["attention_bound"] == 0.25                                        # highest rigorous certified
  tie = [_val(0.0625, 0.0, 0.30), _val(0.25, 0.0, 0.33), _val(1.0, 0.0, 0.33)]
  assert select_attention_bound(tie)["attention_bound"] == 0.25                 # then clean, then smaller α
  test_record = dict(_val(1.0, 0.9, 0.9), kind="certify")
  with pytest.raises(ValueError, match="validation records only"):
    select_attention_bound([_val(0.25, 0.2, 0.3), test_record])
  with pytest.raises(ValueError, match="same validation images"):
    select_attention_bound([_val(0.25, 0.2, 0.3), _val(1.0, 0.2, 0.3, n=50)])


@pytest.mark.slow
def test_certify_experiment_selects_alpha_before_reading_test_images_and_resumes(tmp_path, monkeypatch):
  """The entry point with two α: both models train on the training images less a validation split, are
  certified there, and the α selected at each ε is recorded before the test images are first read (a spy on
  ``load_test`` finds the selection already in results.jsonl); the selection sees validation records only,
  and the validation images are training images. It writes config.json, results.jsonl, plots and summary.md
  (headline: the rigorous figure of the selected α); a rerun adds nothing and reads no test image; a fresh
  run with the same models whose test images are NaN records the same selection, then fails on them."""
  import shutil
  from experiments.certify import run as certify
  from experiments.core import config as config_lib
  from experiments.core import workdir
  from experiments.core.workdir import read_records
  # Library versions are recorded by Workdir (tested with it); skip importing neural_tangents/TF here.
  monkeypatch.setattr(workdir, "versions", lambda: {"jax": jax.__version__})
  seen, test_loads, val_images = [], [], []
  real_select, real_load_test, real_validation = (certify.select_attention_bound, certify.load_test,
                                                  certify.validation_records)
  monkeypatch.setattr(certify, "select_attention_bound", lambda c: seen.append(list(c)) or real_select(c))

  def load_test(config, dataset):
    test_loads.append([r["kind"] for r in read_records(tmp_path / "run")])
    return real_load_test(config, dataset)
  monkeypatch.setattr(certify, "load_test", load_test)
  monkeypatch.setattr(certify, "validation_records", lambda config, mc, p, validation, *a: val_images.append(
      validation) or real_validation(config, mc, p, validation, *a))
  overrides = ["datasets=mnist", "attention_bounds=0.25,1", "epsilons=0.05", "data.n_train=40", "data.n_test=10",
               "validation_fraction=0.25", "train.epochs=1", "train.batch_size=10", "depth=1", "dim=8",
               "num_heads=1", "sll_hidden=8", "power_iters=5", "chunk=10", "pgd.steps=3", "tightness_samples=2",
               "layer_pgd.steps=5", "layer_pgd.restarts=1"]
  experiment_main(registry.get('certify'), ["--workdir", str(tmp_path / "run"), *overrides])
  records = read_records(tmp_path / "run")
  assert sorted(r["kind"] for r in records) == sorted(
      ["train", "radius", "certify", "tightness", "validation"] * 2 + ["selection"])
  assert len(test_loads) == 1 and "selection" in test_loads[0] and "certify" not in test_loads[0]
  assert seen and all(r["kind"] == "validation" for batch in seen for r in batch)
  train = config_lib.load_splits(config_lib.DataConfig(n_train=40, n_test=0), "mnist")[0]
  assert len(val_images) == 2
  for v in val_images:
    assert len(v.x) == 10 and set(v.info.indices) < set(train.info.indices)
    np.testing.assert_array_equal(v.x, train.x[np.isin(train.info.indices, v.info.indices)])
  assert {(r["n_train"], r["n_validation"]) for r in records if r["kind"] == "train"} == {(30, 10)}
  cert = [r for r in records if r["kind"] == "certify"]
  for r in cert:
    assert r["pgd_violations"] == 0 and len(r["certified_rigorous_images"]) == 10
    assert r["certified_rigorous"] <= r["pgd_accuracy"] + 1e-12 and r["certified_accuracy"] <= r["pgd_accuracy"] + 1e-12
    assert r["pgd_accuracy"] <= r["clean_accuracy"] + 1e-12
  for name in ("config.json", "summary.md", "certified_accuracy.png", "tightness.png"):
    assert (tmp_path / "run" / name).exists(), name
  sel = [r for r in records if r["kind"] == "selection"][0]
  chosen = next(r for r in cert if r["attention_bound"] == sel["attention_bound"])
  text = (tmp_path / "run" / "summary.md").read_text()
  headline = text.split("## Headline")[1].splitlines()[6]
  assert headline.startswith(f"| mnist | 0.05 | {sel['attention_bound']:g} | validation | "
                             f"**{100 * chosen['certified_rigorous']:.1f} [")
  assert "## α selection on the validation split" in text and "Certified (rigorous) / PGD-L2 / clean" in text

  experiment_main(registry.get('certify'), ["--workdir", str(tmp_path / "run"), *overrides])
  assert len(read_records(tmp_path / "run")) == len(records) and len(test_loads) == 1

  shutil.copytree(tmp_path / "run" / "models", tmp_path / "nan" / "models")

  def nan_test(config, dataset):
    test = real_load_test(config, dataset)
    return test._replace(x=np.full_like(test.x, np.nan))
  monkeypatch.setattr(certify, "load_test", nan_test)
  config = config_lib.apply_overrides(certify.get_config(), overrides)
  with pytest.raises(ValueError, match="radius"):
    certify.run(config, tmp_path / "nan")
  strip = lambda rs: [{k: v for k, v in r.items() if k != "wall_time_s"} for r in rs  # noqa: E731
                      if r["kind"] in ("validation", "selection")]
  assert strip(read_records(tmp_path / "nan")) == strip(records)
  with pytest.raises(SystemExit):
    experiment_main(registry.get('certify'), ["--workdir", str(tmp_path / "run"), "attention_bounds=-1"])


def test_standard_config_reads_the_data_directory_or_warns(monkeypatch):
  from experiments.certify import run as certify
  from experiments.core.cli import cli
  monkeypatch.setenv("ATTN_DATA_DIR", "/nonexistent-data-dir")
  config, _ = cli(registry.get('certify'), ["--workdir", "w", "--standard"])
  assert config.data.source == "dir" and config.data.n_train is None and config.data.n_test == 1000
  assert config.datasets == ("cifar10",) and config.attention_bounds == (0.0625, 0.25, 1.0) and config.selects
  assert config.validation_fraction == certify.STANDARD_VALIDATION_FULL
  assert config.train.epochs == certify.STANDARD_EPOCHS_FULL
  monkeypatch.delenv("ATTN_DATA_DIR")
  with pytest.warns(RuntimeWarning, match="ATTN_DATA_DIR is not set"):
    fallback = certify.get_config(standard="cifar10")
  assert fallback.data.source == "embedded" and fallback.validation_fraction == 0.1
  fallback.validate()
  with pytest.raises(ValueError, match="one of"):
    certify.get_config(standard="mnist")
  with pytest.raises(ValueError, match="exclusive"):
    certify.get_config(full=True, standard=True)
  assert certify.get_config().validation_fraction == 0.1 and certify.get_config().selects
  with pytest.raises(ValueError, match="validation_fraction"):
    dataclasses_replace(certify.get_config(), validation_fraction=1.0).validate()


def dataclasses_replace(config, **changes):
  import dataclasses
  return dataclasses.replace(config, **changes)


def _cert(alpha, eps, clean, pgd, rigorous, krylov, n=100, dataset="cifar10", rigorous_k=None):
  """A certify record with per-image flags: the first k images certified, the first clean·n correct."""
  k = int(round(rigorous * n)) if rigorous_k is None else rigorous_k
  flags = lambda m: [1] * m + [0] * (n - m)  # noqa: E731
  return dict(dataset=dataset, attention_bound=alpha, kind="certify", eps=eps, layer=-1, n_test=n, n_train=900,
              clean_accuracy=clean, pgd_accuracy=pgd, certified_rigorous=k / n, certified_accuracy=krylov,
              certified_naive=0.0, certified_fine=rigorous, certified_joint=krylov, certified_tsuzuku=rigorous,
              pgd_violations=0, seconds_per_sample=0.05, pgd_seconds_per_sample=0.01,
              fine_tighter_fraction=1.0, fine_gain_median=2.0, naive_over_fine_median=2.0, joint_tighter_fraction=1.0,
              joint_gain_median=1.1, key_gap_max=1e-6, jacobian_gap_max=1e-6,
              certified_rigorous_images=flags(k), certified_krylov_images=flags(int(round(krylov * n))),
              correct_images=flags(int(round(clean * n))), pgd_robust_images=flags(int(round(pgd * n))))


def _selection(alpha, eps, dataset="cifar10"):
  return dict(dataset=dataset, attention_bound=alpha, kind="selection", eps=eps, layer=-1, n_validation=100,
              validation_fraction=0.1, candidates=[
                  dict(attention_bound=a, validation_certified_rigorous=0.3 if a == alpha else 0.1,
                       validation_certified_krylov=0.32, validation_clean_accuracy=0.33) for a in (0.0625, 1.0)])


def test_report_leads_with_the_rigorous_certificate_and_shows_the_attack_gap():
  from experiments.certify.report import KRYLOV_LABEL, summary_markdown
  records = [_cert(0.0625, 0.02, 0.328, 0.324, 0.26, 0.274), _cert(1.0, 0.02, 0.356, 0.30, 0.0, 0.0)]
  text = summary_markdown(records)   # two α, no selection: no headline α
  assert "| cifar10 | 0.02 | – | none † |" in text and "† No α is the headline" in text
  assert f"| **certified (rigorous)** | {KRYLOV_LABEL} |" in text
  assert "| cifar10 | 0.0625 | 0.02 | 32.8 | 32.4 | 0.4 | 1.2 % ⚠ | **26.0** | 27.4 |" in text
  assert "| cifar10 | 1 | 0.02 | 35.6 | 30.0 | 5.6 | 15.7 % | **0.0** | 0.0 |" in text
  assert "| 0.02 | 26.0 / 32.4 / 32.8 ⚠ | 0.0 / 30.0 / 35.6 |" in text   # the triple per α
  text = summary_markdown(records + [_selection(0.0625, 0.02)])
  assert "| cifar10 | 0.02 | 0.0625 | validation | **26.0 [17.7, 35.7]** | 27.4 | 32.4 | 32.8 | 0.4 ⚠ | 29.1 |" in text
  assert "| 0.02 | 26.0 / 32.4 / 32.8 ⚠ ✓ | 0.0 / 30.0 / 35.6 |" in text
  assert "| cifar10 | 0.02 | 0.0625 | 33.0 | 30.0 | 32.0 | **✓** |" in text


@pytest.mark.parametrize("n, clean_k, pgd_k, marked", [
    (1000, 20, 19, False),   # exactly 5 %: 0.04999999999999918 in float64 before the tolerance
    (100, 20, 19, False),    # exactly 5 %: 0.05000000000000032
    (1000, 20, 20, True), (1000, 40, 39, True),   # 0 % and 2.5 %: clearly fewer
    (1000, 20, 18, False),   # 10 %
])
def test_near_trivial_mark_at_exactly_five_percent_is_not_decided_by_rounding(n, clean_k, pgd_k, marked):
  from experiments.certify.report import _trivial_mark
  r = dict(clean_accuracy=clean_k / n, pgd_accuracy=1 - (n - pgd_k) / n)
  assert (_trivial_mark(r) == " ⚠") is marked


def test_certify_claim_rows_main_is_the_validation_selected_rigorous_row():
  from experiments.certify import claims as certify_claims
  from experiments.core.rows import Source
  from experiments.certify.claims import certify_rows
  records = [_cert(a, e, 0.33, 0.32, c, c + 0.02) for a, c in ((0.0625, 0.26), (1.0, 0.0)) for e in (0.02, 0.05)]
  rows = certify_rows(Source("certify", "p", {}, records))
  mains = {r["claim_id"]: r for r in rows if not r["variant"]}
  # Without a selection no α is the headline: the main rows say so, every α is a variant.
  assert mains["certified_0.02_rigorous"]["status"] == "not measured"
  assert "selection on the test set" in mains["certified_0.02_rigorous"]["reason"]
  rows = certify_rows(Source("certify", "p", {}, records + [_selection(1.0, 0.02), _selection(0.0625, 0.05)]))
  ids = [r["claim_id"] for r in rows if not r["variant"]]
  assert ids[:4] == ["certified_0.02_rigorous", "certified_0.02_krylov", "certified_0.05_rigorous",
                     "certified_0.05_krylov"]
  mains = {r["claim_id"]: r for r in rows if not r["variant"]}
  assert mains["certified_0.02_rigorous"]["estimate"] == 0.0 and "α = 1 (α selected on a validation" in \
      mains["certified_0.02_rigorous"]["setting"]   # the validation choice, not the test-set best (0.0625)
  assert mains["certified_0.05_rigorous"]["estimate"] == pytest.approx(0.26)
  assert mains["certified_0.05_krylov"]["estimate"] == pytest.approx(0.28)
  assert certify_claims.KRYLOV_CERT in mains["certified_0.05_krylov"]["claim"]
  assert "Not a proof" in mains["certified_0.05_krylov"]["note"]


def test_alpha_tradeoff_row_paired_bootstrap_and_what_flips_it():
  from experiments.core.rows import Source
  from experiments.certify.claims import alpha_tradeoff_rows, flip_moves, paired_binary_difference
  from experiments.core.verdicts import clopper_pearson
  # The strict α certifies 26 of 100 images, α = 1 none: the paper's side (strict certifies less) fails.
  records = [_cert(0.0625, 0.02, 0.33, 0.32, 0.26, 0.28), _cert(1.0, 0.02, 0.36, 0.30, 0.0, 0.0),
             _cert(0.25, 0.02, 0.34, 0.31, 0.15, 0.16)]
  rows = alpha_tradeoff_rows(Source("certify", "p", {}, records), eps_values=(0.02,))
  main = [r for r in rows if not r["variant"]]
  assert len(main) == 1 and len(rows) == 2 and main[0]["claim_id"] == "certified_alpha_tradeoff"
  share = clopper_pearson(26, 26)   # 26 discordant images, all certified by the strict α only
  assert main[0]["estimate"] == pytest.approx(0.26) and main[0]["low"] == pytest.approx(0.26 * (2 * share.low - 1))
  assert main[0]["high"] == pytest.approx(0.26)
  assert main[0]["method"] == "mcnemar_clopper_pearson" and main[0]["unit"] == "images" and main[0]["n"] == 100
  # Exact where the studentized bootstrap is not: 3 discordant images of 100, all one way (McNemar p = 0.25),
  # contain 0; 2 of 3 discordant pairs one way, 1 the other: the estimate is (2 − 1)/n.
  few = paired_binary_difference(np.r_[np.ones(3), np.zeros(97)], np.zeros(100))
  assert few.low < 0 < few.high and few.estimate == pytest.approx(0.03)
  mixed = paired_binary_difference(np.r_[1, 1, 0, np.zeros(7)], np.r_[0, 0, 1, np.zeros(7)])
  assert mixed.estimate == pytest.approx(0.1) and mixed.low < 0 < mixed.high
  assert paired_binary_difference(np.ones(5), np.ones(5))[:3] == (0.0, 0.0, 0.0)
  assert main[0]["direction"] == "fails" and main[0]["magnitude"] is None
  assert "α = 0.0625 vs α = 1" in main[0]["setting"] and "What would flip it" in main[0]["note"]
  # What flips it: the fewest of the 26 strict-only images that would have to be loose-only instead; by hand,
  # the first k at which the Clopper–Pearson interval of the strict-only share (26 − k)/26 reaches 1/2.
  def contains_half(k):
    cp = clopper_pearson(26 - k, 26)
    return cp.low <= 0.5 <= cp.high
  k_contains = next(k for k in range(27) if contains_half(k))
  k_below = next(k for k in range(27) if clopper_pearson(26 - k, 26).high < 0.5)
  assert flip_moves(26, 0, 100, "contains") == k_contains and flip_moves(26, 0, 100, "below") == k_below
  assert 0 < k_contains < 13 < k_below < 26
  assert (f"26 images are certified by α = 0.0625 only and 0 by α = 1 only" in main[0]["note"]
          and f"turn inconclusive if {k_contains} of the images certified by α = 0.0625 only were certified by "
              "α = 1 only instead" in main[0]["note"] and f"hold (the paper's side: the looser α certifies more) if "
              f"{k_below} of" in main[0]["note"])
  assert flip_moves(0, 0, 100, "below") is None and flip_moves(3, 0, 100, "contains") == 0
  # The strict α certifying less than the looser one: holds.
  flipped = [_cert(0.0625, 0.02, 0.20, 0.19, 0.05, 0.06), _cert(1.0, 0.02, 0.36, 0.30, 0.30, 0.31)]
  row = alpha_tradeoff_rows(Source("certify", "p", {}, flipped), eps_values=(0.02,))[0]
  assert row["direction"] == "holds" and row["high"] < 0
  # Equal certificates on every image: inconclusive.
  same = [_cert(0.0625, 0.02, 0.3, 0.3, 0.1, 0.1), _cert(1.0, 0.02, 0.3, 0.3, 0.1, 0.1)]
  assert alpha_tradeoff_rows(Source("certify", "p", {}, same), eps_values=(0.02,))[0]["direction"] == "inconclusive"
  # No α ≤ 0.25, or a single α: not measured.
  loose = [_cert(0.5, 0.02, 0.3, 0.3, 0.1, 0.1), _cert(1.0, 0.02, 0.3, 0.3, 0.1, 0.1)]
  assert alpha_tradeoff_rows(Source("certify", "p", {}, loose), eps_values=(0.02,))[0]["status"] == "not measured"


def test_report_training_table_and_learning_curves_from_the_histories(tmp_path):
  from experiments.certify.report import plot_learning_curves, summary_markdown
  hist = [dict(epoch=e, loss=2.0 - 0.1 * e, train_accuracy=0.3 + 0.05 * e, seconds=s, validation_accuracy=v)
          for e, s, v in ((1, 40.0, 0.30), (2, 14.0, 0.40), (3, 16.0, 0.402))]
  train = dict(dataset="cifar10", attention_bound=0.25, kind="train", eps=-1.0, layer=-1, n_train=100, n_test=10,
               n_validation=20, train_accuracy=0.5, clean_accuracy=0.45, train_seconds=75.0, epochs=3, epochs_cap=20,
               stop_reason="plateau", history=hist)
  text = summary_markdown([train])
  # 3 of at most 20 epochs, stopped by the plateau rule; median epoch 16 s; the sum 70 s; the last validation acc.
  assert "| cifar10 | 0.25 | 100 | 20 | 3 / 20 | plateau | 50.0 | 40.2 | 45.0 | 16 | 70 |" in text
  assert "trained for 3 epochs (until the validation accuracy plateaued; cap 20)" in text
  assert plot_learning_curves([train], tmp_path / "curves.png") and (tmp_path / "curves.png").stat().st_size > 0
  old = dict(train, history=[{k: v for k, v in h.items() if k != "validation_accuracy"} for h in hist])
  assert not plot_learning_curves([old], tmp_path / "none.png") and not (tmp_path / "none.png").exists()
