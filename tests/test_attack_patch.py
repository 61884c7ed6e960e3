"""attacks.patch: the perturbation stays inside its square exactly, the returned attack loss is never below the
clean image's, samples are independent, a linear model's optimal unbounded patch (a closed form) is found, a
zero gradient is reported, and bad sizes and positions are refused naming the argument."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attacks
from attacks.losses import attack_objective

RNG = np.random.default_rng(0)
H, W, C, K = 8, 8, 2, 3
WEIGHTS = jnp.asarray(RNG.normal(size=(H * W * C, K)), jnp.float32)
X = jnp.asarray(RNG.uniform(0.2, 0.8, size=(5, H, W, C)), jnp.float32)


def linear(x):
  return x.reshape(x.shape[0], -1) @ WEIGHTS


def mlp(x):
  h = jnp.tanh(x.reshape(x.shape[0], -1) @ WEIGHTS * 3.0)
  return h @ jnp.asarray([[1.0, -1.0, 0.5], [0.3, 1.0, -1.0], [-1.0, 0.2, 1.0]], jnp.float32)


Y = jnp.argmax(linear(X), axis=1)


def _inside(pos, size):
  m = np.zeros((len(pos), H, W, 1), bool)
  for b, (r, c) in enumerate(np.asarray(pos)):
    m[b, r:r + size, c:c + size] = True
  return m


@pytest.mark.parametrize("eps", [None, 0.1])
def test_the_perturbation_stays_in_the_patch_and_the_budget(eps):
  pos = np.array([[0, 0], [5, 5], [2, 3], [4, 0], [0, 4]])
  res = attacks.patch(mlp, X, Y, size=3, position=pos, eps=eps, steps=20)
  inside = np.broadcast_to(_inside(pos, 3), X.shape)
  x, adv = np.asarray(X), np.asarray(res.x_adv)
  np.testing.assert_array_equal(adv[~inside], x[~inside])
  assert adv.min() >= 0 and adv.max() <= 1
  if eps is not None:
    assert np.abs(adv - x).max() <= eps + 1e-7
  assert np.any(adv[inside] != x[inside])


def test_the_returned_loss_is_never_below_the_clean_loss_and_is_the_best_iterate():
  res = attacks.patch(mlp, X, Y, size=4, position=(2, 2), steps=30, alpha=0.3)
  start = attack_objective(mlp(X), Y)
  end = attack_objective(mlp(res.x_adv), Y)
  assert np.all(np.asarray(end) >= np.asarray(start))
  for steps in (1, 5, 12):      # no iterate of a shorter run beats the best of the longer run's prefix
    shorter = attacks.patch(mlp, X, Y, size=4, position=(2, 2), steps=steps, alpha=0.3)
    assert np.all(np.asarray(attack_objective(mlp(shorter.x_adv), Y)) <= np.asarray(end) + 1e-6)


def test_a_linear_models_optimal_unbounded_patch_is_found():
  """Two-class linear model: CE(f(x), y) grows with the margin m = (w_o − w_y)·x, so the best patch puts each
  patch pixel at the bound the sign of (w_o − w_y) picks, a closed form."""
  w = jnp.asarray(RNG.normal(size=(H * W * C, 2)), jnp.float32)
  f = lambda x: x.reshape(x.shape[0], -1) @ w  # noqa: E731
  y = jnp.argmax(f(X), axis=1)
  res = attacks.patch(f, X, y, size=3, position=(1, 4), steps=4, alpha=0.5)
  d = np.asarray(w[:, 1] - w[:, 0]).reshape(H, W, C)
  for b in range(len(X)):
    want = np.asarray(X[b]).copy()
    sign = d if int(y[b]) == 0 else -d
    want[1:4, 4:7] = np.where(sign[1:4, 4:7] > 0, 1.0, 0.0)
    np.testing.assert_allclose(np.asarray(res.x_adv[b]), want, atol=1e-6)


def test_samples_are_independent_and_random_positions_come_from_the_key():
  key = jax.random.key(0)
  res = attacks.patch(mlp, X, Y, size=2, key=key, steps=10)
  again = attacks.patch(mlp, X, Y, size=2, key=key, steps=10)
  np.testing.assert_array_equal(res.x_adv, again.x_adv)
  changed = np.asarray(res.x_adv != X).any(axis=-1)
  corners = []
  for b in range(len(X)):
    rows, cols = np.nonzero(changed[b])
    assert rows.max() - rows.min() <= 1 and cols.max() - cols.min() <= 1   # inside one 2×2 square
    corners.append((rows.min(), cols.min()))
  assert len(set(corners)) > 1
  pos = np.array([[1, 1], [3, 2], [0, 6], [6, 0], [2, 2]])
  batch = attacks.patch(mlp, X, Y, size=2, position=pos, steps=10)
  for b in range(len(X)):
    alone = attacks.patch(mlp, X[b:b + 1], Y[b:b + 1], size=2, position=pos[b:b + 1], steps=10)
    np.testing.assert_allclose(batch.x_adv[b], alone.x_adv[0], atol=1e-6)


def test_a_zero_gradient_is_reported_and_leaves_the_image():
  blind = lambda x: jnp.zeros((x.shape[0], K)) + x[:, :1, :1, 0].reshape(x.shape[0], 1) * jnp.ones((1, K))  # noqa: E731
  res = attacks.patch(blind, X, Y, size=2, position=(4, 4), steps=5)
  assert bool(jnp.all(res.zero_grad))
  np.testing.assert_array_equal(res.x_adv, X)


@pytest.mark.parametrize("kwargs, message", [
    (dict(size=0, position=(0, 0)), "size must be an integer patch side in \\[1, 8\\]"),
    (dict(size=9, position=(0, 0)), "size must be"),
    (dict(size=2.0, position=(0, 0)), "size must be"),
    (dict(size=3, position=(6, 0)), "row in \\[0, 5\\]"),
    (dict(size=3, position=(-1, 0)), "position must put"),
    (dict(size=3, position=np.zeros((4, 2), int)), "position must be integer"),
    (dict(size=3, position=(0.5, 1.0)), "position must be integer"),
    (dict(size=3), "needs key"),
    (dict(size=3, position=(0, 0), eps=-0.1), "eps must be finite and >= 0"),
    (dict(size=3, position=(0, 0), steps=-1), "steps must be"),
])
def test_bad_sizes_and_positions_are_refused(kwargs, message):
  with pytest.raises(ValueError, match=message):
    attacks.patch(mlp, X, Y, **kwargs)


def test_images_must_be_four_dimensional():
  with pytest.raises(ValueError, match="shape \\[batch, H, W, C\\]"):
    attacks.patch(lambda x: x @ jnp.ones((4, K)), jnp.zeros((2, 4)), jnp.zeros(2, int), size=1, position=(0, 0))


def test_the_best_iterate_is_kept_where_the_loss_oscillates():
  """CE = softplus(3 sin(10 m)) with m the mean of the patch: sign steps of 0.13 overshoot its maximum and
  alternate, so a last-iterate attack would lose ground between step counts; the best iterate never does."""
  def wave(x):
    m = jnp.mean(x[:, 2:5, 2:5, :], axis=(1, 2, 3))
    return jnp.stack([jnp.zeros_like(m), 3.0 * jnp.sin(10.0 * m)], axis=1)
  y = jnp.zeros(len(X), int)
  losses = [np.asarray(attack_objective(wave(attacks.patch(wave, X, y, size=3, position=(2, 2), steps=t,
                                                                  alpha=0.13).x_adv), y)) for t in range(12)]
  assert np.all(np.diff(np.stack(losses), axis=0) >= -1e-6)
  assert np.all(losses[-1] >= losses[0])
