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
