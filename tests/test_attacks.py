"""The ten failure cases from public bug reports in other attack libraries (issue 4), and argument errors.

Tiny pure-JAX models (linear, small MLP) and few steps keep this file fast on CPU.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attacks import (
    apgd,
    attack_success_rate,
    best_other_logit,
    cw_l2,
    cw_loss,
    fgm_l2,
    fgsm,
    is_adversarial,
    mim,
    pgd_l2,
    pgd_linf,
)


SHAPE = (2, 3, 3)  # [channels, height, width] of the toy images, 18 features
D = int(np.prod(SHAPE))


def mlp_apply(params, x):
  """A tanh MLP, logits = tanh(x W₁ + b₁) W₂, x: [batch, 2, 3, 3]."""
  w1, b1, w2 = params
  return jnp.tanh(x.reshape(x.shape[0], -1) @ w1 + b1[None, :]) @ w2


def _mlp_params(num_classes, seed=0, width=16):
  rng = np.random.default_rng(seed)
  return (jnp.asarray(rng.standard_normal((D, width)) / np.sqrt(D), jnp.float32),
          jnp.asarray(0.1 * rng.standard_normal(width), jnp.float32),
          jnp.asarray(rng.standard_normal((width, num_classes)) * 2.0 / np.sqrt(width), jnp.float32))


# Partials: the weights are traced arguments of the compiled attacks, so models of equal shapes share
# one program (which keeps this file fast).
MLP3 = jax.tree_util.Partial(mlp_apply, _mlp_params(3))
MLP4 = jax.tree_util.Partial(mlp_apply, _mlp_params(4, seed=1))
MLP2 = jax.tree_util.Partial(mlp_apply, _mlp_params(2, seed=2))
# Zero weights: the input gradient is exactly zero and all logits are equal (DLR's denominator is 1e-12).
CONSTANT3 = jax.tree_util.Partial(mlp_apply, tuple(jnp.zeros_like(p) for p in MLP3.args[0]))


def _images(batch, seed=0, low=0.1, high=0.9):
  rng = np.random.default_rng(100 + seed)
  return jnp.asarray(rng.uniform(low, high, (batch, *SHAPE)), jnp.float32)


KEY = jax.random.key(7)

# name -> (norm, call(logits_fn, x, y, eps, key, **kw)); small step counts, every attack and variant.
ATTACKS = {
    "fgsm": ("linf", lambda f, x, y, eps, key, **kw: fgsm(f, x, y, eps=eps, **kw)),
    "fgm_l2": ("l2", lambda f, x, y, eps, key, **kw: fgm_l2(f, x, y, eps=eps, **kw)),
    "pgd_linf": ("linf", lambda f, x, y, eps, key, **kw: pgd_linf(
        f, x, y, eps=eps, key=key, alpha=eps / 3, steps=kw.pop("steps", 5), **kw)),
    "pgd_l2": ("l2", lambda f, x, y, eps, key, **kw: pgd_l2(
        f, x, y, eps=eps, key=key, alpha=eps / 3, steps=kw.pop("steps", 5), **kw)),
    "mim": ("linf", lambda f, x, y, eps, key, **kw: mim(
        f, x, y, eps=eps, steps=kw.pop("steps", 5), **kw)),
    "apgd_linf_ce": ("linf", lambda f, x, y, eps, key, **kw: apgd(
        f, x, y, eps=eps, key=key, norm="linf", loss="ce", steps=kw.pop("steps", 6), **kw)),
    "apgd_l2_dlr": ("l2", lambda f, x, y, eps, key, **kw: apgd(
        f, x, y, eps=eps, key=key, norm="l2", loss="dlr", steps=kw.pop("steps", 6), **kw)),
    "cw_l2": ("l2", lambda f, x, y, eps, key, **kw: cw_l2(
        f, x, y, eps=eps, steps=kw.pop("steps", 15), search_steps=3, learning_rate=0.05,
        initial_const=1.0, **kw)),
}
RANDOM_START = ("pgd_linf", "pgd_l2", "apgd_linf_ce", "apgd_l2_dlr")
EPS = {"linf": 0.1, "l2": 0.5}


def _norm(delta, norm):
  flat = np.asarray(delta, np.float64).reshape(delta.shape[0], -1)
  return np.abs(flat).max(1) if norm == "linf" else np.linalg.norm(flat, axis=1)


# 1. Per-sample norms: x1 alone and inside [x1, x2] (with the same key) gives the same adversarial.
# In float64: XLA multiplies a batch of 1 and of 2 with different kernels, and float32 rounding flips
# exact ties (3-class DLR is exactly 1 wherever the label has the lowest logit) into different paths.
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_case1_sample_result_does_not_depend_on_batch(name):
  norm, attack = ATTACKS[name]
  with jax.enable_x64(True):
    x = _images(2).astype(jnp.float64)
    x = x.at[1].set(jnp.clip(3.0 * x[1] - 1.0, 0.0, 1.0))  # a second sample, other gradient norms
    y = jnp.array([0, 2])
    alone = attack(MLP3, x[:1], y[:1], EPS[norm], KEY)
    batch = attack(MLP3, x, y, EPS[norm], KEY)
    assert alone.x_adv.dtype == jnp.float64
    np.testing.assert_allclose(alone.x_adv[0], batch.x_adv[0], rtol=0, atol=1e-12)
    assert bool(alone.success[0]) == bool(batch.success[0])


# 2. ε = 0 returns x exactly, for every attack, with random start too.
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_case2_zero_eps_returns_x_exactly(name):
  _, attack = ATTACKS[name]
  x, y = _images(4), jnp.array([0, 1, 2, 0])
  kw = {"random_start": True} if name in RANDOM_START else {}
  result = attack(MLP3, x, y, 0.0, KEY, **kw)
  np.testing.assert_array_equal(result.x_adv, x)


# 3. Random start on an all-ones image: every input the model sees lies in [0, 1].
@pytest.mark.parametrize("name", RANDOM_START)
def test_case3_random_start_stays_in_pixel_box(name):
  norm, attack = ATTACKS[name]
  seen = []

  def watched(x):
    jax.debug.callback(lambda lo, hi: seen.append((float(lo), float(hi))), jnp.min(x), jnp.max(x))
    return MLP3(x)

  x = jnp.ones((4, *SHAPE))
  result = attack(watched, x, jnp.array([0, 1, 2, 0]), 4 * EPS[norm], KEY, random_start=True)
  jax.effects_barrier()
  assert seen, "the model was never called"
  assert min(lo for lo, _ in seen) >= 0.0 and max(hi for _, hi in seen) <= 1.0
  assert float(result.x_adv.min()) >= 0.0 and float(result.x_adv.max()) <= 1.0


# 4. ‖x_adv − x‖ ≤ ε (+1e-6) for every attack, norm, seed and step count.
@pytest.mark.parametrize("name, steps", [(name, steps) for name in sorted(ATTACKS) for steps in (
    [None] if name in ("fgsm", "fgm_l2") else [1, None])])
def test_case4_budget_holds(name, steps):
  norm, attack = ATTACKS[name]
  kw = {} if steps is None else {"steps": steps}  # None: the step count set in ATTACKS
  for seed in range(3):
    x = _images(4, seed, low=0.0, high=1.0)
    y = jnp.asarray(np.random.default_rng(seed).integers(0, 3, 4), jnp.int32)
    eps = EPS[norm] * (1 + seed)
    result = attack(MLP3, x, y, eps, jax.random.key(seed), **kw)
    assert np.all(_norm(result.x_adv - x, norm) <= eps + 1e-6)
    assert float(result.x_adv.min()) >= 0.0 and float(result.x_adv.max()) <= 1.0


def test_case4_step_of_exactly_eps_is_accepted():
  x, y, eps = _images(4), jnp.array([0, 1, 2, 0]), 0.05
  for result in (fgsm(MLP3, x, y, eps=eps),
                 pgd_linf(MLP3, x, y, eps=eps, alpha=eps, steps=1, random_start=False)):
    delta = np.abs(np.asarray(result.x_adv - x))
    np.testing.assert_allclose(delta, eps, atol=1e-6)  # every coordinate moved by the full ε
  result = pgd_l2(MLP3, x, y, eps=eps, alpha=eps, steps=1, random_start=False)
  np.testing.assert_allclose(_norm(result.x_adv - x, "l2"), eps, rtol=1e-5)


# 5. CW: for logits [−5, −3, −4] and label 0 the best other logit is −3 (masked, not zeroed).
def test_case5_cw_masks_true_class():
  logits = jnp.array([[-5.0, -3.0, -4.0]])
  assert float(best_other_logit(logits, jnp.array([0]))[0]) == -3.0
  assert float(cw_loss(logits, jnp.array([0]))[0]) == 0.0                # −5 − (−3) < 0: already fooled
  assert float(cw_loss(logits, jnp.array([1]))[0]) == 1.0                # −3 − (−4)
  assert float(cw_loss(logits, jnp.array([1]), confidence=2.0)[0]) == 3.0
  assert float(cw_loss(logits, jnp.array([0]), target_B=jnp.array([2]))[0]) == 1.0  # −3 − (−4)

  def fixed(x):
    return jnp.broadcast_to(jnp.array([-5.0, -3.0, -4.0]), (x.shape[0], 3)) + 0.0 * x.reshape(
        x.shape[0], -1)[:, :3]
  result = cw_l2(fixed, _images(1), jnp.array([0]), steps=5, search_steps=1)
  assert bool(result.success[0])  # label 0 is already beaten by −3; zeroing it would say "robust"


# 6. L2 FGM / PGD steps have length ε / α as asked.
def test_case6_l2_step_lengths():
  x, y = _images(4, low=0.3, high=0.7), jnp.array([0, 1, 2, 0])
  for eps in (0.05, 0.2):
    np.testing.assert_allclose(_norm(fgm_l2(MLP3, x, y, eps=eps).x_adv - x, "l2"), eps, rtol=1e-5)
  pgd = pgd_l2(MLP3, x, y, eps=1.0, alpha=0.1, steps=1, random_start=False)
  np.testing.assert_allclose(_norm(pgd.x_adv - x, "l2"), 0.1, rtol=1e-5)
  pgd = pgd_l2(MLP3, x, y, eps=0.1, alpha=0.5, steps=1, random_start=False)  # α > ε: clipped to ε
  np.testing.assert_allclose(_norm(pgd.x_adv - x, "l2"), 0.1, rtol=1e-5)


# 7. A 3-class model works (no class count hard-coded), DLR included.
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_case7_three_class_model(name):
  norm, attack = ATTACKS[name]
  x, y = _images(4), jnp.array([0, 1, 2, 0])
  result = attack(MLP3, x, y, 10 * EPS[norm], KEY)
  assert result.x_adv.shape == x.shape and result.success.shape == (4,)
  assert bool(result.success.any())
  assert np.all(np.asarray(result.success) == np.asarray(is_adversarial(MLP3(result.x_adv), y)))


# 8. Targeted attacks count success only when the prediction equals the target.
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_case8_targeted_success_means_target(name):
  norm, attack = ATTACKS[name]
  x = _images(4, seed=3)
  pred = jnp.argmax(MLP4(x), -1)
  y = (pred + 1) % 4       # every sample starts misclassified ...
  target = (pred + 2) % 4  # ... but not as the target
  still = attack(MLP4, x, y, 0.0, KEY, targeted=True, target=target)
  assert not bool(still.success.any())  # misclassified is not success for a targeted attack
  moved = attack(MLP4, x, y, 10 * EPS[norm], KEY, targeted=True, target=target)
  np.testing.assert_array_equal(moved.success, jnp.argmax(MLP4(moved.x_adv), -1) == target)
  assert bool(moved.success.any())


# 9. An all-zero gradient gives no NaN (MIM and DLR included); without random start x_adv = x.
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_case9_zero_gradient(name):
  norm, attack = ATTACKS[name]
  x, y = _images(4), jnp.zeros(4, jnp.int32)
  kw = {"random_start": False} if name in RANDOM_START else {}
  result = attack(CONSTANT3, x, y, EPS[norm], KEY, **kw)
  np.testing.assert_array_equal(result.x_adv, x)
  assert bool(result.zero_grad.all())
  if name in RANDOM_START:
    result = attack(CONSTANT3, x, y, EPS[norm], KEY, random_start=True)
    assert bool(jnp.isfinite(result.x_adv).all()) and bool(result.zero_grad.all())


# 10. Attack success rate ignores samples that were wrong before the attack.
def test_case10_success_rate_ignores_clean_errors():
  y = jnp.array([0, 1, 2, 0])
  clean_pred = jnp.array([0, 1, 0, 1])        # samples 2 and 3 are wrong before the attack
  success = jnp.array([True, False, True, False])
  rate = attack_success_rate(success, y, clean_pred)
  assert (float(rate.rate), int(rate.n_success), int(rate.n_counted)) == (0.5, 1, 2)
  assert float(attack_success_rate(success, y, clean_pred, convention="all").rate) == 0.5
  assert float(attack_success_rate(success, y, clean_pred, convention="robust_error").rate) == 0.75
  # With a real attack at ε = 0 only the clean errors "succeed"; none of them may count.
  x = _images(4, seed=5)
  y = jnp.array([0, 1, 2, 0])
  clean_pred = jnp.argmax(MLP3(x), -1)
  result = fgsm(MLP3, x, y, eps=0.0)
  np.testing.assert_array_equal(result.success, clean_pred != y)
  rate = attack_success_rate(result.success, y, clean_pred)
  assert float(rate.rate) == 0.0 and int(rate.n_counted) == int(jnp.sum(clean_pred == y))
  with pytest.raises(ValueError, match="convention"):
    attack_success_rate(success, y[:4], clean_pred[:4], convention="foolbox")
  with pytest.raises(ValueError, match="success must be a bool array"):
    attack_success_rate(result.success.astype(jnp.float32), y, clean_pred)


# Clear errors naming the argument and the allowed range.
X3, Y3 = _images(4), jnp.array([0, 1, 2, 0])


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_negative_eps_rejected(name):
  _, attack = ATTACKS[name]
  with pytest.raises(ValueError, match="eps"):
    attack(MLP3, X3, Y3, -0.1, KEY)


@pytest.mark.parametrize("attack", [fgsm, fgm_l2, pgd_linf, pgd_l2, mim, apgd, cw_l2])
@pytest.mark.parametrize("eps", ["0.1", True, "abc"])
def test_non_numeric_eps_rejected_naming_eps(attack, eps):
  # A numeric string used to pass the range check and fail deep inside the compiled attack.
  kwargs = dict(steps=2, search_steps=1) if attack is cw_l2 else {}
  with pytest.raises(ValueError, match="eps must be a real number"):
    attack(MLP3, X3, Y3, eps=eps, key=KEY, **kwargs)


@pytest.mark.parametrize("key", [0, jnp.zeros(3, jnp.uint32), jnp.zeros(2, jnp.float32),
                                 jax.random.split(KEY, 2)])
def test_a_malformed_key_is_rejected_naming_key(key):
  with pytest.raises(ValueError, match="needs key=jax.random.key"):
    pgd_linf(MLP3, X3, Y3, eps=0.1, key=key)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_model_with_nan_logits_is_an_error_not_a_nan_result(name):
  _, attack = ATTACKS[name]
  with pytest.raises(ValueError, match="non-finite logits"):
    attack(lambda z: MLP3(z) * jnp.nan, X3, Y3, 0.1, KEY)


def test_attack_inside_a_callers_jit_with_closed_over_inputs():
  # A constant x inside jit is traced too: the range check must step aside, not crash on a tracer.
  eager = pgd_linf(MLP3, X3, Y3, eps=0.1, key=KEY).x_adv
  jitted = jax.jit(lambda eps, key: pgd_linf(MLP3, X3, Y3, eps=eps, key=key).x_adv)(0.1, KEY)
  np.testing.assert_allclose(jitted, eager, atol=1e-6)


@pytest.mark.parametrize("call, match", [
    (lambda: pgd_linf(MLP3, X3, Y3, eps=0.1, key=KEY, alpha=-0.01), "alpha"),
    (lambda: pgd_l2(MLP3, X3, Y3, eps=0.1, key=KEY, alpha=-0.01), "alpha"),
    (lambda: mim(MLP3, X3, Y3, eps=0.1, alpha=-0.01), "alpha"),
    (lambda: pgd_linf(MLP3, X3, Y3, eps=0.1, key=KEY, steps=-1), "steps"),
    (lambda: cw_l2(MLP3, X3, Y3, learning_rate=-1.0), "learning_rate"),
    (lambda: fgsm(MLP3, X3, Y3, eps=0.1, bounds=(1.0, 0.0)), "lower <= upper"),
    (lambda: pgd_linf(MLP3, X3, Y3, eps=0.1, key=KEY, bounds=(0.5, 0.2)), "lower <= upper"),
    (lambda: fgsm(MLP3, X3, jnp.array([0, 1, 2, 3]), eps=0.1), r"y must lie in \[0, 3\)"),
    (lambda: fgsm(MLP3, X3, jnp.array([-1, 0, 1, 2]), eps=0.1), r"y must lie in \[0, 3\)"),
    (lambda: fgsm(MLP3, X3, jnp.array([0, 1, 2]), eps=0.1), "shape"),
    (lambda: fgsm(MLP3, X3, jnp.array([0.0, 1.0, 2.0, 0.0]), eps=0.1), "integer"),
    (lambda: fgsm(MLP3, X3, Y3, eps=0.1, targeted=True, target=jnp.array([1, 2, 0, 5])), "target must lie"),
    (lambda: fgsm(MLP3, X3, Y3, eps=0.1, targeted=True, target=Y3), "differ"),
    (lambda: fgsm(MLP3, X3, Y3, eps=0.1, targeted=True), "needs target"),
    (lambda: fgsm(MLP3, X3, Y3, eps=0.1, target=jnp.array([1, 2, 0, 1])), "targeted=False"),
    (lambda: apgd(MLP2, X3, Y3, eps=0.1, key=KEY, loss="dlr"), "at least 3 classes"),
    (lambda: apgd(MLP3, X3, Y3, eps=0.1, key=KEY, loss="dlr", targeted=True,
                  target=jnp.array([1, 2, 0, 1])), "at least 4 classes"),
    (lambda: apgd(MLP3, X3, Y3, eps=0.1, key=KEY, norm="l1"), "norm='l1'"),
    (lambda: apgd(MLP3, X3, Y3, eps=0.1, key=KEY, loss="cw"), "loss='cw'"),
    (lambda: apgd(MLP3, X3, Y3, eps=0.1, restarts=3, random_start=False), "restarts"),
    (lambda: pgd_linf(MLP3, X3, Y3, eps=0.1), "key"),
    (lambda: apgd(MLP3, X3, Y3, eps=0.1), "key"),
    (lambda: fgsm(MLP3, X3.at[0, 0, 0, 0].set(jnp.nan), Y3, eps=0.1), "NaN"),
    (lambda: fgsm(MLP3, X3 + 1.0, Y3, eps=0.1), "inside bounds"),
    (lambda: fgsm(MLP3, X3[0, 0, 0], Y3, eps=0.1), "shape"),
    (lambda: fgsm(MLP3, X3, Y3, eps=float("nan")), "eps"),
])
def test_bad_arguments_raise(call, match):
  with pytest.raises(ValueError, match=match):
    call()


def test_every_attack_name_is_a_function_and_pgd_takes_its_norm():
  import jax.numpy as jnp
  import numpy as np
  import attacks
  for name in ("fgsm", "pgd", "mim", "apgd", "patch", "cw_l2"):
    assert callable(getattr(attacks, name)), name
  w = jnp.asarray(np.random.default_rng(0).normal(size=(4, 3)), jnp.float32)
  logits_fn = lambda x: x @ w  # noqa: E731
  x, y = jnp.full((5, 4), 0.5), jnp.arange(5) % 3
  for norm, direct in (("linf", attacks.pgd_linf), ("l2", attacks.pgd_l2)):
    np.testing.assert_array_equal(attacks.pgd(logits_fn, x, y, eps=0.1, norm=norm, random_start=False).x_adv,
                                  direct(logits_fn, x, y, eps=0.1, random_start=False).x_adv)
  with pytest.raises(ValueError, match="norm must be one of"):
    attacks.pgd(logits_fn, x, y, eps=0.1, norm="l1")
