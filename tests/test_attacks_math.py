"""Mathematical checks of the attacks: closed forms on linear models, loss identities, APGD's schedule,
no recompilation, consistency of AttackResult, and sharding over several (forced CPU) devices."""
import json
import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attacks import (
    apgd,
    attack_success_rate,
    checkpoint_schedule,
    cross_entropy,
    cw_l2,
    dlr_loss,
    dlr_targeted_loss,
    fgm_l2,
    fgsm,
    is_adversarial,
    mim,
    pgd_l2,
    pgd_linf,
    presets,
    success_within_l2,
)


D, K = 12, 3
_W = jnp.asarray(np.random.default_rng(0).standard_normal((D, K)), jnp.float32)
_B = jnp.array([0.1, -0.2, 0.05])


def linear(x):
  """A 3-class linear model, logits x W + b; ∇ₓ CE(xW + b, y) = W (softmax − e_y)."""
  return x.reshape(x.shape[0], -1) @ _W + _B[None, :]


_V = jnp.asarray(np.random.default_rng(1).standard_normal(D), jnp.float32)


def binary(x):
  """Two classes with logits [0, v·x − 1]: the CE gradient for label 1 is −(1 − p)·v, never 0."""
  score_B = x.reshape(x.shape[0], -1) @ _V - 1.0
  return jnp.stack([jnp.zeros_like(score_B), score_B], axis=-1)


def _x(batch, seed=0, low=0.2, high=0.8):
  return jnp.asarray(np.random.default_rng(50 + seed).uniform(low, high, (batch, D)), jnp.float32)


def test_fgsm_matches_closed_form_on_linear_model():
  x, y, eps = _x(4), jnp.array([0, 1, 2, 0]), 0.07
  x64, w64, b64 = (np.asarray(a, np.float64) for a in (x, _W, _B))
  logits = x64 @ w64 + b64
  p = np.exp(logits - logits.max(1, keepdims=True))
  p /= p.sum(1, keepdims=True)
  grad = (p - np.eye(K)[np.asarray(y)]) @ w64.T       # ∇ₓ CE per sample
  expected = np.clip(x64 + eps * np.sign(grad), 0, 1)
  np.testing.assert_allclose(fgsm(linear, x, y, eps=eps).x_adv, expected, atol=1e-6)
  target = (y + 1) % K                                 # targeted: descend CE(target)
  grad_t = (p - np.eye(K)[np.asarray(target)]) @ w64.T
  np.testing.assert_allclose(fgsm(linear, x, y, eps=eps, targeted=True, target=target).x_adv,
                             np.clip(x64 - eps * np.sign(grad_t), 0, 1), atol=1e-6)
  unit = grad / np.linalg.norm(grad, axis=1, keepdims=True)
  np.testing.assert_allclose(fgm_l2(linear, x, y, eps=eps).x_adv, x64 + eps * unit, atol=1e-6)


@pytest.mark.parametrize("attack", ["pgd_linf", "pgd_linf_random_start", "mim", "apgd"])
def test_linf_attacks_reach_the_box_corner_on_a_linear_model(attack):
  """max_{‖δ‖∞≤ε, x+δ∈[0,1]} CE is attained at the corner clip(x − ε·sign(v)) for label 1."""
  x, y, eps = _x(4, low=0.0, high=1.0), jnp.ones(4, jnp.int32), 0.1
  corner = jnp.clip(x - eps * jnp.sign(_V)[None, :], 0, 1)
  result = {
      "pgd_linf": lambda: pgd_linf(binary, x, y, eps=eps, alpha=0.03, steps=4, random_start=False),
      "pgd_linf_random_start": lambda: pgd_linf(binary, x, y, eps=eps, alpha=0.03, steps=7,
                                                key=jax.random.key(3)),
      "mim": lambda: mim(binary, x, y, eps=eps, steps=5),
      "apgd": lambda: apgd(binary, x, y, eps=eps, steps=5, restarts=2, key=jax.random.key(3)),
  }[attack]()
  np.testing.assert_allclose(result.x_adv, corner, atol=1e-6)


def test_l2_attacks_reach_the_ball_optimum_on_a_linear_model():
  """In the interior the L2 optimum for label 1 is x − ε·v/‖v‖₂."""
  x, y, eps = _x(4, low=0.4, high=0.6), jnp.ones(4, jnp.int32), 0.05
  optimum = x - eps * (_V / jnp.linalg.norm(_V))[None, :]
  np.testing.assert_allclose(fgm_l2(binary, x, y, eps=eps).x_adv, optimum, atol=1e-6)
  for result in (pgd_l2(binary, x, y, eps=eps, alpha=0.02, steps=4, random_start=False),
                 # From a random start, radial clipping shrinks the tangential part geometrically.
                 pgd_l2(binary, x, y, eps=eps, alpha=0.02, steps=30, key=jax.random.key(0)),
                 apgd(binary, x, y, eps=eps, norm="l2", steps=5, random_start=False)):
    np.testing.assert_allclose(result.x_adv, optimum, atol=1e-5)


def test_cw_finds_near_minimal_l2_adversarial_on_a_linear_model():
  """The smallest L2 perturbation that flips `binary` is the distance to its hyperplane."""
  x = _x(4, low=0.45, high=0.55)
  score = np.asarray(x, np.float64) @ np.asarray(_V, np.float64) - 1.0
  y = jnp.asarray(score > 0, jnp.int32)
  minimal = np.abs(score) / np.linalg.norm(np.asarray(_V, np.float64))
  result = cw_l2(binary, x, y, steps=100, search_steps=6, initial_const=1.0, learning_rate=0.01)
  found = np.linalg.norm(np.asarray(result.x_adv - x, np.float64), axis=1)
  assert bool(result.success.all())
  assert np.all(found >= minimal - 1e-5)       # no perturbation beats the exact minimum
  assert np.all(found <= 1.1 * minimal + 1e-3)
  grid = success_within_l2(x, result.x_adv, result.success, jnp.array([0.0, 0.5 * minimal.min(), 10.0]))
  assert grid.shape == (3, 4) and not bool(grid[0].any()) and not bool(grid[1].any())
  assert bool(grid[2].all())
  bounded = cw_l2(binary, x, y, eps=float(minimal.min()) / 2, steps=100, search_steps=6,
                  initial_const=1.0)
  np.testing.assert_array_equal(bounded.x_adv, x)  # no adversarial inside the budget: x itself
  assert not bool(bounded.success.any())


def test_cross_entropy_is_optax_bit_for_bit_without_a_scatter_in_its_gradient():
  """Same values and input gradients as optax's integer-label cross-entropy (identical arithmetic), and our
  gradient has no per-sample scatter: optax's take_along_axis transposes to a scatter-add, which XLA:CPU
  may lower to a loop over the batch (JAX 0.5 did; whether a newer XLA does is its choice, not ours)."""
  import optax
  z = jax.random.normal(jax.random.PRNGKey(0), (64, 10)) * 5
  y = jax.random.randint(jax.random.PRNGKey(1), (64,), 0, 10)
  np.testing.assert_array_equal(cross_entropy(z, y), optax.softmax_cross_entropy_with_integer_labels(z, y))
  ours = jax.grad(lambda v: jnp.sum(cross_entropy(v, y)))
  reference = jax.grad(lambda v: jnp.sum(optax.softmax_cross_entropy_with_integer_labels(v, y)))
  np.testing.assert_array_equal(ours(z), reference(z))
  lowered = jax.jit(ours).lower(z)
  assert "scatter" not in lowered.as_text()  # the program JAX hands to XLA
  assert " while(" not in lowered.compile().as_text()  # nor a loop in what XLA made of it


def test_losses_from_logits():
  big = jnp.array([[1000.0, 0.0, -1000.0]])
  assert float(cross_entropy(big, jnp.array([1]))[0]) == pytest.approx(1000.0)  # no inf from softmax
  z = jnp.array([[2.0, 1.0, 0.5, -1.0], [0.0, 3.0, 1.0, 2.0]])
  y, t = jnp.array([0, 0]), jnp.array([3, 2])
  expected = [-(2.0 - 1.0) / (2.0 - 0.5), -(0.0 - 3.0) / (3.0 - 1.0)]
  np.testing.assert_allclose(dlr_loss(z, y), expected, rtol=1e-6)
  np.testing.assert_allclose(dlr_loss(3.0 * z + 7.0, y), expected, rtol=1e-5)  # shift/scale invariant
  expected_t = [-(2.0 - -1.0) / (2.0 - 0.5 * (0.5 - 1.0)), -(0.0 - 1.0) / (3.0 - 0.5 * (1.0 + 0.0))]
  np.testing.assert_allclose(dlr_targeted_loss(z, y, t), expected_t, rtol=1e-6)


def test_apgd_checkpoints_follow_the_paper():
  """p₀ = 0, p₁ = 0.22, p_{j+1} = p_j + max(p_j − p_{j−1} − 0.03, 0.06), times N = 100."""
  is_check, window = checkpoint_schedule(100)
  p, expected = [0.0, 0.22], []
  while p[-1] <= 1.0:
    expected.append(round(100 * p[-1]))
    p.append(p[-1] + max(p[-1] - p[-2] - 0.03, 0.06))
  np.testing.assert_array_equal(np.flatnonzero(is_check) + 1, expected)  # iterations done at each
  assert list(window[is_check]) == list(np.diff([0] + expected))


def test_no_recompilation_on_second_call():
  from attacks.projected_gradient import _pgd  # the compiled implementation
  x, y = _x(4), jnp.array([0, 1, 2, 0])
  pgd_linf(linear, x, y, eps=0.1, key=jax.random.key(0))
  size = _pgd._cache_size()
  pgd_linf(linear, _x(4, seed=1), (y + 1) % K, eps=0.2, alpha=0.05, key=jax.random.key(1))
  assert _pgd._cache_size() == size  # new data, ε, α and key reuse the program
  # Weights passed as a Partial are traced: new weights of the same shape reuse it too.
  def apply(w, x):
    return x.reshape(x.shape[0], -1) @ w
  pgd_linf(jax.tree_util.Partial(apply, _W), x, y, eps=0.1, key=jax.random.key(0))
  size = _pgd._cache_size()
  pgd_linf(jax.tree_util.Partial(apply, 2.0 * _W), x, y, eps=0.1, key=jax.random.key(0))
  assert _pgd._cache_size() == size


def test_attack_inside_callers_jit_matches_eager():
  x, y = _x(4), jnp.array([0, 1, 2, 0])
  eager = pgd_linf(linear, x, y, eps=0.1, key=jax.random.key(0))
  jitted = jax.jit(lambda x, eps: pgd_linf(linear, x, y, eps=eps, key=jax.random.key(0)))(x, 0.1)
  np.testing.assert_allclose(jitted.x_adv, eager.x_adv, atol=1e-6)


def test_random_start_depends_on_key_only_through_fold_in():
  x, y = _x(4), jnp.array([0, 1, 2, 0])
  a = pgd_linf(linear, x, y, eps=0.1, steps=0, key=jax.random.key(0))
  b = pgd_linf(linear, x, y, eps=0.1, steps=0, key=jax.random.key(0))
  c = pgd_linf(linear, x, y, eps=0.1, steps=0, key=jax.random.key(1))
  np.testing.assert_array_equal(a.x_adv, b.x_adv)
  assert not np.allclose(a.x_adv, c.x_adv)
  delta = np.asarray(a.x_adv - x)
  assert np.abs(delta).max() <= 0.1 + 1e-6 and np.abs(delta).max() > 0.05  # U(−ε, ε), not a point
  raw = pgd_linf(linear, x, y, eps=0.1, steps=0, key=jax.random.PRNGKey(0))  # raw uint32 keys work
  assert raw.x_adv.shape == x.shape


def test_l2_random_start_is_uniform_in_the_ball():
  """For δ uniform in the d-ball of radius ε, P(‖δ‖₂ ≤ tε) = t^d and E[δ] = 0."""
  from attacks.random_start import start_points
  x = jnp.full((4000, 2), 0.5)
  delta = np.asarray(start_points(jax.random.key(0), x, 0.25, 0.0, 1.0, kind="uniform_l2_ball") - x)
  radius = np.linalg.norm(delta, axis=1) / 0.25
  assert radius.max() <= 1.0 + 1e-6
  for t in (0.3, 0.6, 0.9):
    assert abs(np.mean(radius <= t) - t**2) < 0.03  # binomial sd ≤ 0.008
  assert np.all(np.abs(delta.mean(0)) < 0.01)


def test_early_stop_freezes_each_sample_at_its_first_adversarial():
  x = _x(4, low=0.3, high=0.7)
  y = jnp.asarray(np.asarray(binary(x)).argmax(1), jnp.int32)
  plain = pgd_linf(binary, x, y, eps=0.3, alpha=0.01, steps=30, random_start=False)
  early = pgd_linf(binary, x, y, eps=0.3, alpha=0.01, steps=30, random_start=False, early_stop=True)
  np.testing.assert_array_equal(early.success, plain.success)
  assert bool(early.success.any())
  size = lambda r: np.abs(np.asarray(r.x_adv - x)).max(1)
  assert np.all(size(early) <= size(plain) + 1e-7)
  # The frozen point is adversarial, and one step earlier was not: rerun with one fewer step.
  for i in np.flatnonzero(np.asarray(early.success)):
    steps = int(round(float(size(early)[i]) / 0.01))
    before = pgd_linf(binary, x, y, eps=0.3, alpha=0.01, steps=steps - 1, random_start=False)
    assert not bool(before.success[i])


def test_success_field_agrees_with_the_model_at_x_adv():
  x, y = _x(4), jnp.array([0, 1, 2, 0])
  key = jax.random.key(0)
  results = [fgsm(linear, x, y, eps=0.2), pgd_linf(linear, x, y, eps=0.2, key=key),
             pgd_l2(linear, x, y, eps=0.5, key=key), mim(linear, x, y, eps=0.2),
             apgd(linear, x, y, eps=0.2, key=key, steps=10)]
  for result in results:
    np.testing.assert_array_equal(result.success, is_adversarial(linear(result.x_adv), y))
    assert not bool(result.zero_grad.any())


def test_presets_are_published_settings():
  assert dict(presets.MADRY_MNIST_LINF) == dict(eps=0.3, alpha=0.01, steps=40, random_start=True)
  x, y = _x(4), jnp.array([0, 1, 2, 0])
  result = pgd_linf(linear, x, y, key=jax.random.key(0), **presets.MADRY_MNIST_LINF)
  assert np.abs(np.asarray(result.x_adv - x)).max() <= 0.3 + 1e-6
  rate = attack_success_rate(result.success, y, jnp.argmax(linear(x), -1), convention="all")
  assert int(rate.n_counted) == 4


_SHARDED = """
import json, sys
import jax, jax.numpy as jnp, numpy as np
from attacks import pgd_linf, apgd
from attacks._driver import shard_batch
x = jnp.asarray(np.load(sys.argv[1]))
w = jnp.asarray(np.random.default_rng(0).standard_normal((x.shape[1], 3)), jnp.float32)
f = lambda v: v.reshape(v.shape[0], -1) @ w
y = jnp.arange(x.shape[0]) % 3
sharded, _, _ = shard_batch(dict(x=x), ())
out = dict(devices=jax.local_device_count(), shards=len(sharded["x"].sharding.device_set),
           padded=sharded["x"].shape[0],
           pgd=pgd_linf(f, x, y, eps=0.1, key=jax.random.key(1)).x_adv.tolist(),
           apgd=apgd(f, x, y, eps=0.1, key=jax.random.key(1), steps=5).x_adv.tolist())
print(json.dumps(out))
"""


@pytest.mark.slow
def test_batch_shards_over_local_devices(tmp_path):
  """With 2 (forced) CPU devices a batch of 5 is padded to 6, sharded, and gives the 1-device result."""
  x = _x(5)
  np.save(tmp_path / "x.npy", np.asarray(x))
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
  done = subprocess.run([sys.executable, "-c", _SHARDED, str(tmp_path / "x.npy")], env=env,
                        capture_output=True, text=True, timeout=120,
                        cwd=pathlib.Path(__file__).resolve().parents[1])
  assert done.returncode == 0, done.stderr[-2000:]
  out = json.loads(done.stdout.strip().splitlines()[-1])
  assert (out["devices"], out["shards"], out["padded"]) == (2, 2, 6)
  w = jnp.asarray(np.random.default_rng(0).standard_normal((D, 3)), jnp.float32)
  f = lambda v: v.reshape(v.shape[0], -1) @ w
  y = jnp.arange(5) % 3
  np.testing.assert_allclose(out["pgd"], pgd_linf(f, x, y, eps=0.1, key=jax.random.key(1)).x_adv,
                             atol=1e-6)
  np.testing.assert_allclose(out["apgd"], apgd(f, x, y, eps=0.1, key=jax.random.key(1), steps=5).x_adv,
                             atol=1e-6)


def test_package_imports_neither_experiments_nor_torch():
  """attacks/ is model-agnostic library code: no experiment entry points, and PyTorch stays out."""
  import ast
  for path in (pathlib.Path(__file__).resolve().parents[1] / "attacks").glob("*.py"):
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
      elif isinstance(node, ast.ImportFrom):
        names = [node.module or ""]
      else:
        continue
      for name in names:
        assert name.split(".")[0] not in ("experiments", "torch", "torchattacks"), (path, name)


@pytest.mark.parametrize("grid", [[-0.1, 1.0], [float("nan")]])
def test_success_within_l2_rejects_negative_or_nan_budgets(grid):
  x = jnp.zeros((2, 3))
  with pytest.raises(ValueError, match="eps_grid must hold L2 budgets >= 0"):
    success_within_l2(x, x, jnp.array([True, False]), jnp.array(grid))


def test_every_budget_check_uses_one_relative_tolerance():
  """‖δ‖ = ε(1 + rtol/2) is within budget ε (PGD-L2 ends at ε + rounding), ε(1 + 2·rtol) is not."""
  from attacks import BUDGET_RTOL, within_budget
  assert 0 < BUDGET_RTOL <= 1e-5
  eps = 0.5
  inside, outside = eps * (1 + BUDGET_RTOL / 2), eps * (1 + 2 * BUDGET_RTOL)
  x = jnp.full((3, 4), 0.25)
  x_adv = x.at[:, 0].add(jnp.array([eps, inside, outside]))  # ‖δ‖₂ = |δ₀| (one coordinate moves)
  grid = success_within_l2(x, x_adv, jnp.ones(3, bool), jnp.array([eps]))
  np.testing.assert_array_equal(grid, [[True, True, False]])
  np.testing.assert_array_equal(within_budget(jnp.array([eps, inside, outside]), eps), [True, True, False])
  # CW with a budget applies the same tolerance: its unbudgeted adversarial at distance d is kept at
  # ε = d/(1 + rtol/2) (d = ε(1 + rtol/2)) and dropped at ε = d/(1 + 2·rtol) (d = ε(1 + 2·rtol)).
  logits_fn = lambda z: jnp.stack([z[:, 0] - 0.5, 0.5 - z[:, 0]], axis=1)  # adversarial where z₀ < 0.5
  xs = jnp.array([[0.6, 0.5]])
  free = cw_l2(logits_fn, xs, jnp.array([0]), initial_const=10.0, steps=100, search_steps=3)
  assert bool(free.success[0])
  d = float(jnp.linalg.norm(free.x_adv - xs))
  for budget, expected in ((d / (1 + BUDGET_RTOL / 2), True), (d / (1 + 2 * BUDGET_RTOL), False)):
    got = cw_l2(logits_fn, xs, jnp.array([0]), eps=budget, initial_const=10.0, steps=100, search_steps=3)
    assert bool(got.success[0]) == expected, budget


def _uneven_model():
  """A nonlinear model whose input gradients differ in norm by orders of magnitude across samples (a per-batch
  normalisation, or a per-sample one that is wrong, shows here; a linear model's gradients are too alike)."""
  rng = np.random.default_rng(3)
  w1 = jnp.asarray(rng.normal(size=(6, 16)), jnp.float32)
  w2 = jnp.asarray(rng.normal(size=(16, 3)), jnp.float32)
  scale = jnp.asarray([0.01, 1.0, 30.0, 0.3], jnp.float32)  # per-sample input scale inside the model
  return lambda x: jnp.tanh((x * scale[:x.shape[0], None]) @ w1) @ w2


def test_l2_steps_have_length_alpha_for_every_sample_of_a_nonlinear_model():
  """One PGD-L2 step (no random start, a ball too large to bind, a point far from the box's faces) moves every
  sample by exactly α, and FGM-L2 by exactly ε, whatever its gradient's norm; and along the gradient."""
  import attacks
  logits_fn = _uneven_model()
  x = jnp.full((4, 6), 0.5, jnp.float32)
  y = jnp.asarray([0, 1, 2, 0])
  step = np.asarray(attacks.pgd_l2(logits_fn, x, y, eps=10.0, alpha=0.05, steps=1, random_start=False).x_adv) - 0.5
  np.testing.assert_allclose(np.linalg.norm(step, axis=1), 0.05, rtol=1e-4)
  grad = np.asarray(jax.grad(lambda v: jnp.sum(attacks.cross_entropy(logits_fn(v), y)))(x))
  norms = np.linalg.norm(grad, axis=1)
  assert norms.max() / norms.min() > 100  # the samples' gradients really are uneven
  np.testing.assert_allclose(step, 0.05 * grad / norms[:, None], rtol=1e-3, atol=1e-6)
  fgm = np.asarray(attacks.fgm_l2(logits_fn, x, y, eps=0.1).x_adv) - 0.5
  np.testing.assert_allclose(np.linalg.norm(fgm, axis=1), 0.1, rtol=1e-4)


def _mim_reference(logits_fn, x, y, eps, alpha, steps, decay, normalise="sample"):
  """MI-FGSM written out (Dong et al. 2018, Algorithm 1): gradients divided by each sample's ‖∇‖₁ (or, as
  planted bugs, by the whole batch's: ``normalise='batch'``, or not at all: 'none'), accumulated with decay μ,
  sign steps, projection onto the ε-box ∩ [0, 1]; numpy float64 outside the gradient."""
  import attacks
  grad_fn = jax.grad(lambda v: jnp.sum(attacks.cross_entropy(logits_fn(v), y)))
  x0 = np.asarray(x, np.float64)
  x_t, g = x0.copy(), np.zeros_like(x0)
  for _ in range(steps):
    grad = np.asarray(grad_fn(jnp.asarray(x_t, jnp.float32)), np.float64)
    norm = {"sample": np.abs(grad).sum(axis=1, keepdims=True), "batch": np.abs(grad).sum(), "none": 1.0}[normalise]
    g = decay * g + grad / np.where(norm > 0, norm, 1.0)   # a zero gradient adds nothing
    x_t = np.clip(x0 + np.clip(x_t + alpha * np.sign(g) - x0, -eps, eps), 0.0, 1.0)
  return x_t


def test_mim_accumulates_per_sample_l1_normalised_gradients_on_a_nonlinear_model():
  """MIM's momentum adds each step's gradient divided by its own sample's ‖∇‖₁: on a model whose samples'
  gradients differ by orders of magnitude and turn between steps, a dropped normalisation or one over the
  whole batch ends elsewhere (a linear model's constant gradient cannot see either)."""
  import attacks
  logits_fn = _uneven_model()
  x = jnp.asarray(np.random.default_rng(0).uniform(0.3, 0.7, size=(4, 6)), jnp.float32)
  y = jnp.asarray([0, 1, 2, 0])
  budget = dict(eps=0.3, alpha=0.1, steps=8, decay=0.5)
  mine = np.asarray(attacks.mim(logits_fn, x, y, **budget).x_adv)
  np.testing.assert_allclose(mine, _mim_reference(logits_fn, x, y, **budget), atol=1e-5)
  for planted in ("batch", "none"):   # the case tells the normalisations apart
    assert np.abs(mine - _mim_reference(logits_fn, x, y, **budget, normalise=planted)).max() > 0.05
