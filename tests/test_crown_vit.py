"""attention.crown_vit: the certified ViT as a CROWN graph computes the model's own logits, and its margin lower
bounds are sound: no sampled or PGD-optimised point of the ball ∩ [0, 1] box goes below them, so no image it
certifies is broken by PGD-L2."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention import crown, crown_vit
from attention.certified_vit import CertifiedViT, CertifiedViTConfig, patchify

CONFIG = CertifiedViTConfig(num_classes=3, image_size=4, channels=1, patch_size=2, dim=4, depth=1, num_heads=2,
                            sll_hidden=4, attention_bound=1.0, value_bound=1.0)


def _model(seed=0):
  with jax.enable_x64(True):
    params = CertifiedViT(CONFIG).init(jax.random.PRNGKey(seed), jnp.zeros((1, 4, 4, 1)))["params"]
    return jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), params)


def test_the_graph_computes_the_models_logits():
  params = _model()
  x = np.random.default_rng(0).uniform(0, 1, size=(5, 4, 4, 1))
  with jax.enable_x64(True):
    logits = CertifiedViT(CONFIG).apply({"params": params}, jnp.asarray(x))
    graph, gp = crown_vit.certified_vit_graph(CONFIG, params)[:2]
    mine = jnp.stack([crown.forward(graph, gp, p)[-1] for p in patchify(jnp.asarray(x), CONFIG.patch_size)])
  np.testing.assert_allclose(np.asarray(mine), np.asarray(logits), rtol=1e-10, atol=1e-12)


@pytest.mark.long
def test_margin_bounds_hold_against_sampled_and_pgd_points():
  params = _model(1)
  rng = np.random.default_rng(1)
  x = rng.uniform(0.1, 0.9, size=(3, 4, 4, 1))
  eps = 0.1
  with jax.enable_x64(True):
    model = lambda v: CertifiedViT(CONFIG).apply({"params": params}, v)  # noqa: E731
    labels = jnp.argmax(model(jnp.asarray(x)), axis=1)
    bounds = np.asarray(crown_vit.margin_lower_bounds(CONFIG, params, jnp.asarray(x), labels, eps))

    def margins(v, y):
      f = model(v[None])[0]
      return f[y] - jnp.delete(f, y, assume_unique_indices=True)

    for i in range(3):
      y = int(labels[i])
      z = rng.normal(size=(400, 16))
      z = z / np.linalg.norm(z, axis=1, keepdims=True) * eps * rng.uniform(size=(400, 1)) ** (1 / 16)
      pts = np.clip(x[i].ravel()[None] + z, 0, 1).reshape(400, 4, 4, 1)
      sampled = np.asarray(jax.vmap(lambda v: margins(v, y))(jnp.asarray(pts)))
      assert np.all(sampled >= bounds[i] - 1e-9)
      for j in range(2):   # PGD-L2 on each margin: the smallest it finds stays above the bound
        v = jnp.asarray(x[i])
        for _ in range(40):
          g = jax.grad(lambda u: margins(u, y)[j])(v)
          v = v - 0.05 * eps * g / (jnp.linalg.norm(g) + 1e-30)
          delta = v - x[i]
          v = jnp.clip(x[i] + delta * jnp.minimum(1.0, eps / (jnp.linalg.norm(delta) + 1e-30)), 0, 1)
        assert float(margins(v, y)[j]) >= bounds[i, j] - 1e-9
  assert bounds.shape == (3, 2)


@pytest.mark.long
def test_at_radius_zero_the_bounds_are_the_margins():
  params = _model(2)
  x = np.random.default_rng(2).uniform(0, 1, size=(2, 4, 4, 1))
  with jax.enable_x64(True):
    f = np.asarray(CertifiedViT(CONFIG).apply({"params": params}, jnp.asarray(x)))
    bounds = np.asarray(crown_vit.margin_lower_bounds(CONFIG, params, jnp.asarray(x), jnp.array([0, 2]), 0.0))
  np.testing.assert_allclose(bounds[0], f[0, 0] - f[0, [1, 2]], atol=1e-8)
  np.testing.assert_allclose(bounds[1], f[1, 2] - f[1, [0, 1]], atol=1e-8)


@pytest.mark.long
def test_crown_with_lofast_cuts_is_sound():
  """CROWN + LoFAST (LoFAST inside CROWN): its margin bounds hold against sampled points of the ball (the
  certificate is sound). (That it is never looser than CROWN alone is the depth-3 test below; whether it beats
  LoFAST alone is a measurement, not a theorem.)"""
  params = _model(3)
  rng = np.random.default_rng(3)
  x = rng.uniform(0.1, 0.9, size=(3, 4, 4, 1))
  eps = 0.05
  with jax.enable_x64(True):
    model = lambda v: CertifiedViT(CONFIG).apply({"params": params}, v)  # noqa: E731
    f = model(jnp.asarray(x))
    labels = jnp.argmax(f, axis=1)
    both = np.asarray(crown_vit.margin_lower_bounds(CONFIG, params, jnp.asarray(x), labels, eps, lofast=True,
                                                    key=jax.random.PRNGKey(0)))
    for i in range(3):
      y = int(labels[i])
      z = rng.normal(size=(300, 16))
      z = z / np.linalg.norm(z, axis=1, keepdims=True) * eps * rng.uniform(size=(300, 1)) ** (1 / 16)
      pts = np.clip(x[i].ravel()[None] + z, 0, 1).reshape(300, 4, 4, 1)
      out = np.asarray(model(jnp.asarray(pts)))
      margins = out[:, [y]] - np.delete(out, y, axis=1)
      assert np.all(margins >= both[i] - 1e-9)
  assert both.shape == (3, 2) and np.all(np.isfinite(both))


@pytest.mark.parametrize("change, message", [
    (dict(labels=[3, 0]), "labels_B must be integer labels"),
    (dict(labels=[0.0, 1.0]), "labels_B must be integer labels"),
    (dict(x=2.0), "finite pixels in \\[0, 1\\]"),
    (dict(x=np.nan), "finite pixels"),
    (dict(shape=(2, 4, 4)), "x_BxHxWxC must be floating images"),
    (dict(eps=True), "eps must be a finite number"),
    (dict(eps=-0.1), "eps must be a finite number"),
])
def test_bad_input_is_refused_naming_the_argument(change, message):
  params = _model()
  x = np.full(change.get("shape", (2, 4, 4, 1)), 0.5)
  if "x" in change:
    x[0, 0, 0] = change["x"]
  with pytest.raises(ValueError, match=message):
    crown_vit.margin_lower_bounds(CONFIG, params, x, np.asarray(change.get("labels", [0, 1])), change.get("eps", 0.1))


DEEP = CertifiedViTConfig(num_classes=3, image_size=4, channels=1, patch_size=2, dim=4, depth=3, num_heads=1,
                          sll_hidden=4, attention_bound=1.0, value_bound=1.0)


def _pgd_margins(model, x, y, eps, steps=40):
  """The smallest value of each margin f_y − f_j (j ≠ y) that PGD-L2 finds in the ε-ball ∩ [0, 1], [C − 1]."""
  def margins(v):
    f = model(v[None])[0]
    return f[y] - jnp.delete(f, y, assume_unique_indices=True)

  @jax.jit
  def attack(j):
    def step(t, carry):
      v, best = carry
      g = jax.grad(lambda u: margins(u)[j])(v)
      v = v - 0.1 * eps * g / (jnp.linalg.norm(g) + 1e-30)
      delta = v - x
      v = jnp.clip(x + delta * jnp.minimum(1.0, eps / (jnp.linalg.norm(delta) + 1e-30)), 0, 1)
      return v, jnp.minimum(best, margins(v)[j])
    return jax.lax.fori_loop(0, steps, step, (x, margins(x)[j]))[1]
  return np.asarray([float(attack(j)) for j in range(DEEP.num_classes - 1)])


def _deep_case(seed, eps):
  """(CROWN's, CROWN + LoFAST's and PGD-L2's margins [C − 1]) of one image of a random depth-3 certified ViT,
  float64. CROWN runs op by op (``jax.disable_jit``): on these sizes compiling its unrolled backward passes
  takes minutes, running them eagerly under one."""
  with jax.enable_x64(True):
    params = CertifiedViT(DEEP).init(jax.random.PRNGKey(seed), jnp.zeros((1, 4, 4, 1)))["params"]
    params = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), params)
    x = jnp.asarray(np.random.default_rng(seed).uniform(0.1, 0.9, size=(1, 4, 4, 1)))
    model = lambda v: CertifiedViT(DEEP).apply({"params": params}, v)  # noqa: E731
    labels = jnp.argmax(model(x), axis=1)
    with jax.disable_jit():
      alone = np.asarray(crown_vit.margin_lower_bounds(DEEP, params, x, labels, eps))[0]
      both = np.asarray(crown_vit.margin_lower_bounds(DEEP, params, x, labels, eps, lofast=True,
                                                      key=jax.random.PRNGKey(0), power_iters=4))[0]
    attacked = _pgd_margins(model, x[0], int(labels[0]), eps)
  return alone, both, attacked


@pytest.mark.parametrize("seed, eps", [(5, 0.3), pytest.param(4, 0.05, marks=pytest.mark.long)])
def test_crown_with_lofast_is_never_looser_than_crown_and_sound_on_a_depth_3_vit(seed, eps):
  """LoFAST inside CROWN: on a random depth-3 certified ViT (float64) every margin bound is ≥ CROWN's alone (the
  composition keeps CROWN's relaxation) and ≤ the smallest margin PGD-L2 finds in the ball (both sound), at a
  radius where CROWN's relaxations are loose and (long) at one where it is nearly tight."""
  alone, both, attacked = _deep_case(seed, eps)
  assert np.all(both >= alone - 1e-12), (both, alone)
  assert np.all(both <= attacked + 1e-9) and np.all(alone <= attacked + 1e-9), (both, alone, attacked)


# Tests that catch planted bugs in the relaxations, the backward rules and the margins.


def _linear_patch_graph(w, bias):
  """patches [2, 2] → x W + b per token → the mean over tokens: logits [C], linear in the input."""
  b = crown.Builder((2, 2))
  b.row_mean(b.linear(0, "l", w.shape[1]))
  return b.graph(), {"l.W": jnp.asarray(w), "l.b": jnp.asarray(bias)}


def test_the_margins_of_every_label_come_back_in_class_order_and_are_exact_on_a_linear_model():
  """``crown_vit._margins`` (what ``margin_lower_bounds`` runs per image) on a linear stand-in for the model, one image
  per label 0 … 3: under ℓ∞ the bound of f_y − f_j over the ball ∩ [0, 1] box is the exact minimum over the box
  [max(x − ε, 0), min(x + ε, 1)] (f is linear), and the C − 1 bounds come back for j ≠ y in class order. Catches
  an off-by-one in which row is dropped (``others > y``), a margin of the wrong sign, or the rows mis-ordered."""
  rng = np.random.default_rng(20)
  c, eps = 4, 0.2
  w, bias = rng.normal(size=(2, c)), rng.normal(size=c)
  patches = rng.uniform(0, 1, size=(c, 2, 2))
  patches[:, 0, 0] = 0.05                              # near a face, so the pixel box binds
  labels = np.arange(c)
  with jax.enable_x64(True):
    graph, gp = _linear_patch_graph(w, bias)
    got = np.asarray(crown_vit._margins(graph, gp, jnp.asarray(patches), jnp.asarray(labels), None,
                                        jnp.asarray(eps), "inf", "crown", ()))
  assert got.shape == (c, c - 1)
  for i, y in enumerate(labels):
    lo, hi = np.maximum(patches[i] - eps, 0.0), np.minimum(patches[i] + eps, 1.0)
    for k, j in enumerate([j for j in range(c) if j != y]):
      a = 0.5 * (w[:, y] - w[:, j])                     # ∂(f_y − f_j)/∂ patches[t] for each token t
      exact = np.minimum(a * lo, a * hi).sum() + bias[y] - bias[j]
      assert got[i, k] == pytest.approx(exact, abs=1e-12), (y, j)


def _min_linear(g, x0, eps, lo, hi):
  """min of g·x over {‖x − x0‖₂ ≤ ε} ∩ [lo, hi] (x0 in the box), exactly: the minimiser is clip(x0 − t·g, lo, hi)
  for the t ≥ 0 at which it reaches the sphere (KKT), found by bisection."""
  point = lambda t: np.clip(x0 - t * g, lo, hi)  # noqa: E731
  a, b = 0.0, 1e6
  for _ in range(200):
    m = 0.5 * (a + b)
    a, b = (m, b) if np.linalg.norm(point(m) - x0) < eps else (a, m)
  return float(g @ point(a))


def _identity_blocks_graph():
  """A two-block residual stand-in for the certified ViT on patches [2, 2]: tokens X₀ = 3·x + pos (pos ≈ −1.5, so
  the tokens of pixels near 0.5 are near 0), then twice X ← X + B(X) with the block B(X) = relu(X [I, −I]) [I; −I]
  = X (the identity, but CROWN relaxes its ReLUs, which cross 0 there), then the mean over tokens and a head [3].
  The whole network is linear, f(x) = mean(12·x + 4·pos) W_h + b_h. Returns (graph, params, the blocks' input
  nodes, their output nodes)."""
  b = crown.Builder((2, 2))
  eye = np.eye(2)
  params = {"e.W": 3.0 * eye, "e.b": np.zeros(2), "pos": np.array([[-1.4, -1.6], [-1.5, -1.3]])}
  x = b.offset(b.linear(0, "e", 2), "pos")
  inputs, outputs = [], []
  for k in range(2):
    params.update({f"b{k}.in.W": np.concatenate([eye, -eye], 1), f"b{k}.in.b": np.zeros(4),
                   f"b{k}.out.W": np.concatenate([eye, -eye], 0), f"b{k}.out.b": np.zeros(2)})
    inputs.append(x)
    outputs.append(b.linear(b.relu(b.linear(x, f"b{k}.in", 4)), f"b{k}.out", 2))
    x = b.add(x, outputs[-1])
  params.update({"h.W": np.array([[1.0, -0.5, 0.2], [0.3, 0.8, -1.0]]), "h.b": np.array([0.1, 0.0, -0.2])})
  b.linear(b.row_mean(x), "h", 3)
  return b.graph(), {k: jnp.asarray(v) for k, v in params.items()}, tuple(inputs), tuple(outputs)


@pytest.mark.parametrize("corner", [False, True])
def test_lofast_inside_crown_is_exact_on_identity_blocks_and_sound_at_the_pixel_box_corner(corner, monkeypatch):
  """``_margins`` with LoFAST (CROWN + LoFAST) on ``_identity_blocks_graph``, LoFAST's layer bound replaced by the
  exact one of an identity block (deviation = input radius) and the embedding's Lipschitz constant 3: ℓ2 ε = 0.1.
  The chain of radii is then exact (block 0 reads 3ε, block 1 3ε + 3ε), so inside the pixel box the margin bound
  of the cut pass is the exact minimum of the linear margins, while CROWN alone is looser (its ReLU relaxations).
  At a corner of the pixel box (pixels 0 or 1, so half of each coordinate's box is empty) the bound is ≤ the exact
  minimum over the ball ∩ box. Catches the chain's embedding constant or a block's deviation dropped, and a
  block's box radius taken as the smaller instead of the larger of its one-sided widths (each shrinks a ball
  below the set it must hold: unsound)."""
  from attention import sensitivity
  monkeypatch.setattr(sensitivity, "layer_bound", lambda lc, radius, **_: lc * radius)
  eps = 0.1
  patches = np.array([[[0.0, 1.0], [1.0, 0.0]]]) if corner else np.array([[[0.4, 0.6], [0.5, 0.45]]])
  labels = np.array([0])
  with jax.enable_x64(True):
    graph, gp, inputs, outputs = _identity_blocks_graph()
    consts = jnp.ones((1, 2))                              # [B, L]: every block's Lipschitz constant, 1
    args = (jnp.asarray(patches), jnp.asarray(labels))
    both = np.asarray(crown_vit._margins(graph, gp, *args, (consts, jnp.asarray(3.0)), jnp.asarray(eps), "2",
                                         "crown", (inputs, outputs)))[0]
    alone = np.asarray(crown_vit._margins(graph, gp, *args, None, jnp.asarray(eps), "2", "crown", ()))[0]
    f0 = np.asarray(crown.forward(graph, gp, jnp.asarray(patches[0]))[-1])
  wh = np.asarray(gp["h.W"])
  exact = []
  for j in (1, 2):                                          # f_0 − f_j = 6 Σ_t x_t·(w_0 − w_j) + const
    g = np.tile(6.0 * (wh[:, 0] - wh[:, j]), 2)
    x0 = patches[0].ravel()
    exact.append(f0[0] - f0[j] + _min_linear(g, x0, eps, 0.0, 1.0) - g @ x0)
  exact = np.array(exact)
  assert np.all(both >= alone - 1e-12) and np.all(both <= exact + 1e-9), (both, alone, exact)
  if not corner:
    np.testing.assert_allclose(both, exact, rtol=0, atol=1e-9)
    assert np.all(alone < exact - 0.05)                  # the cut is what makes it exact (the test's power)
