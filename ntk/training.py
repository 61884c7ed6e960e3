"""Full-batch gradient descent on the finite network and the infinite-width NTK predictor at the same time.

Loss: L(θ) = ½ · mean over all n·C entries of (f_θ(X) − Y)², Y one-hot; θ ← θ − η ∇L for T steps, so the
training time is t = T·η (neural-tangents' convention: ``nt.predict.gradient_descent_mse`` normalises by
y.size and interprets time in units of the learning rate). In the NTK regime the trained network equals
the kernel predictor
  f_t(x) = f₀(x) − Θ(x, X) Θ(X, X)⁻¹ (I − exp(−η T Θ(X, X)/(nC))) (f₀(X) − Y),
which needs the network's own f₀ (or f₀ ≡ 0): an O(1) f₀ term does not shrink with width
(Jacot et al. 2018; Lee et al. 2019, arXiv 1902.06720;
docs/theory.md#gradient-descent-vs-the-ntk-predictor).
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import neural_tangents as nt
import numpy as np

import attacks
from ntk.models import penalized_leaves


def half_mse(f_NxC, y_NxC):
  """½ · mean over all entries of (f − y)² (scalar). Shapes [n, C]."""
  return 0.5 * jnp.mean((f_NxC - y_NxC) ** 2)


@functools.partial(jax.jit, static_argnames=("apply_fn", "steps"))
def _gd(apply_fn, params, x_NxD, y_NxC, learning_rate, steps: int):
  grad_fn = jax.grad(lambda p: half_mse(apply_fn(p, x_NxD), y_NxC))

  def step(p, _):
    g = grad_fn(p)
    return jax.tree_util.tree_map(lambda a, b: a - learning_rate * b, p, g), None

  params, _ = jax.lax.scan(step, params, None, length=steps)
  return params


def train_gd(apply_fn, params, x_NxD, y_NxC, *, learning_rate: float, steps: int):
  """Full-batch gradient descent on ½·mean squared error, compiled as one ``lax.scan``.

  Args:
    apply_fn: ``apply_fn(params, x) -> [n, C]`` (hashable: the same function object reuses the compile).
    params: initial parameters.
    x_NxD: training inputs, shape [n, d].
    y_NxC: targets, shape [n, C] (one-hot for classification).
    learning_rate: η > 0.
    steps: T ≥ 0; training time t = η·T.

  Returns:
    The parameters after T steps (a fixed readout stays fixed: its gradient is stopped in ``apply_fn``).

  Raises:
    ValueError: η ≤ 0, T < 0, or mismatched shapes.
  """
  if isinstance(learning_rate, (str, bool)) or not (math.isfinite(learning_rate) and learning_rate > 0):
    raise ValueError(f"learning_rate must be a finite number > 0, got {learning_rate!r}")
  if isinstance(steps, (str, bool)) or int(steps) != steps or steps < 0:
    raise ValueError(f"steps must be an integer ≥ 0, got {steps}")
  if np.shape(x_NxD)[0] != np.shape(y_NxC)[0]:
    raise ValueError(f"x has {np.shape(x_NxD)[0]} rows but y has {np.shape(y_NxC)[0]}")
  return _gd(apply_fn, params, jnp.asarray(x_NxD), jnp.asarray(y_NxC), float(learning_rate), int(steps))


class NTKPrediction(NamedTuple):
  """Kernel-regime predictions at time t. Shapes: train [n, C], test [t, C]."""
  train: np.ndarray
  test: np.ndarray


def ntk_predict(k_train_train_NxN, k_test_train_TxN, y_train_NxC, *, time: float,
                fx_train_0=None, fx_test_0=None) -> NTKPrediction:
  """Infinite-width (or any fixed-kernel) gradient-descent predictor at training time t.

  Args:
    k_train_train_NxN: kernel on the training set, shape [n, n] (output-averaged, one per pair).
    k_test_train_TxN: kernel between test and training points, shape [t, n].
    y_train_NxC: targets, shape [n, C].
    time: t = steps · learning rate (≥ 0).
    fx_train_0, fx_test_0: the network's initial outputs, shapes [n, C] and [t, C]; None means f₀ ≡ 0
      (only correct for an antisymmetric initialisation).

  Returns:
    ``NTKPrediction`` of f_t on the training and test points, computed by
    ``nt.predict.gradient_descent_mse`` (eigendecomposition of the training kernel).

  Raises:
    ValueError: negative time or shapes that do not line up.
  """
  if not time >= 0:
    raise ValueError(f"time must be ≥ 0 (steps · learning rate), got {time}")
  n = np.shape(y_train_NxC)[0]
  if np.shape(k_train_train_NxN) != (n, n) or np.shape(k_test_train_TxN)[1] != n:
    raise ValueError(f"kernel shapes {np.shape(k_train_train_NxN)}, {np.shape(k_test_train_TxN)} do not "
                     f"match {n} training targets")
  predict_fn = nt.predict.gradient_descent_mse(jnp.asarray(k_train_train_NxN), jnp.asarray(y_train_NxC),
                                               learning_rate=1.0, diag_reg=0.0)
  c = np.shape(y_train_NxC)[1]
  f_tr = jnp.zeros((n, c)) if fx_train_0 is None else jnp.asarray(fx_train_0)
  f_te = jnp.zeros((np.shape(k_test_train_TxN)[0], c)) if fx_test_0 is None else jnp.asarray(fx_test_0)
  train, test = predict_fn(float(time), f_tr, f_te, jnp.asarray(k_test_train_TxN))
  return NTKPrediction(np.asarray(train), np.asarray(test))


def softmax_cross_entropy(f_NxC, y_NxC):
  """Mean softmax cross-entropy from logits [n, C] against one-hot targets [n, C] (scalar): the mean of the
  code base's one per-example cross-entropy, ``attacks.cross_entropy``, at the labels argmax y."""
  return jnp.mean(attacks.cross_entropy(f_NxC, jnp.argmax(y_NxC, axis=-1)))


LOSSES = {"mse": half_mse, "ce": softmax_cross_entropy}


@functools.partial(jax.jit, static_argnames=("apply_fn", "loss", "batch_size"))
def adam_epochs(apply_fn, params, opt_state, x_NxD, y_NxC, epoch_keys, learning_rate, l2, *, loss: str,
                batch_size: int):
  """len(epoch_keys) epochs of ``train_adam``'s minibatch Adam from an explicit Adam state; returns
  (params, opt_state). Epoch e shuffles with epoch_keys[e] and takes ⌊n/batch⌋ full batches. Chunks of
  consecutive keys continue one run exactly (``ntk.criterion`` checks its loss target between chunks)."""
  import optax
  tx = optax.adam(learning_rate)
  n = x_NxD.shape[0]
  steps = max(1, n // batch_size)

  def objective(p, xb, yb):
    reg = 0.5 * l2 * sum(jnp.sum(w ** 2) for w in penalized_leaves(p))
    return LOSSES[loss](apply_fn(p, xb), yb) + reg

  def epoch(carry, k):
    perm = jax.random.permutation(k, n)[:steps * batch_size].reshape(steps, batch_size)

    def step(c, idx):
      p, s = c
      g = jax.grad(objective)(p, x_NxD[idx], y_NxC[idx])
      updates, s = tx.update(g, s, p)
      return (optax.apply_updates(p, updates), s), None

    return jax.lax.scan(step, carry, perm)[0], None

  return jax.lax.scan(epoch, (params, opt_state), epoch_keys)[0]


def _adam(apply_fn, params, x_NxD, y_NxC, key, *, loss: str, learning_rate, l2, epochs: int, batch_size: int):
  import optax
  state = optax.adam(learning_rate).init(params)
  return adam_epochs(apply_fn, params, state, x_NxD, y_NxC, jax.random.split(key, epochs), learning_rate, l2,
                     loss=loss, batch_size=batch_size)[0]


def train_adam(apply_fn, params, x_NxD, y_NxC, *, key, loss: str = "ce", learning_rate: float = 1e-3,
               l2: float = 1e-3, epochs: int = 500, batch_size: int = 128):
  """Minibatch Adam with an L2 penalty, the influence paper's training (arXiv 2603.13085 §5: cross-entropy
  for 10 classes, MSE for binary tasks, L2 1e-3, Adam 1e-3, batch 128, 500 epochs), compiled as one scan.

  Args:
    apply_fn: ``apply_fn(params, x) -> [n, C]``; params: initial parameters.
    x_NxD: inputs [n, d]; y_NxC: one-hot targets [n, C].
    key: PRNG key for the minibatch order.
    loss: ``'ce'`` (softmax cross-entropy) or ``'mse'`` (½·mean squared error).
    learning_rate, epochs, batch_size: as named; each epoch uses ⌊n/batch⌋ full batches.
    l2: coefficient of the L2 penalty (l2/2)·‖θ‖² added to the loss (not optax's decoupled weight decay),
      on the trained parameters only (``ntk.models.penalized_leaves``: a fixed readout is not penalised).

  Raises:
    ValueError: unknown loss, learning_rate not finite and > 0, l2 not finite and ≥ 0, epochs < 0
      or batch_size < 1.
  """
  if loss not in LOSSES:
    raise ValueError(f"loss must be one of {tuple(LOSSES)}, got {loss!r}")
  if not (learning_rate > 0 and math.isfinite(learning_rate)) or not (0 <= l2 < math.inf) or (
      epochs < 0 or batch_size < 1):
    raise ValueError(f"need learning_rate finite and > 0, l2 finite and ≥ 0, epochs ≥ 0, "
                     f"batch_size ≥ 1; got {learning_rate}, {l2}, {epochs}, {batch_size}")
  batch_size = min(int(batch_size), int(np.shape(x_NxD)[0]))
  return _adam(apply_fn, params, jnp.asarray(x_NxD), jnp.asarray(y_NxC), key, loss=loss,
               learning_rate=float(learning_rate), l2=float(l2), epochs=int(epochs),
               batch_size=batch_size)


def _features_logits(apply_fn, features_fn, params, x_rows):
  return apply_fn(params, features_fn(x_rows))


def adversarial_train_adam(apply_fn, params, x_NxD, y_NxC, *, key, attack_key, features_fn, eps: float,
                           rounds: int, epochs_per_round: int, pgd_steps: int, pgd_alpha: float | None = None,
                           clean_features_NxF=None, loss: str = "ce", learning_rate: float = 1e-3,
                           l2: float = 1e-3, batch_size: int = 128):
  """PGD adversarial training (Madry et al. 2018, arXiv 1706.06083 §3), alternating as rounds: Adam on the
  clean rows, then ``rounds`` times PGD-L∞ on every training row against the current network followed by
  Adam on the adversarial rows' features (each ``train_adam`` call starts a fresh Adam state).

  Round r attacks with key fold_in(attack_key, r) and trains with minibatch key fold_in(key, r + 1); the
  clean training uses ``key``.

  Args:
    apply_fn: ``apply_fn(params, features) -> logits [n, C]``; params: initial parameters.
    x_NxD: training rows, shape [n, d], float in [0, 1] (the pixel scale of ε).
    y_NxC: one-hot targets [n, C]; the attack's labels are their argmax.
    key: PRNG key of the minibatch orders; attack_key: PRNG key of the PGD random starts.
    features_fn: rows [b, d] -> the network's inputs [b, d'] (e.g. ``ntk.row_replaced_features`` with the
      clean matrix bound); row i of the output may depend on row i of its input only, so that every row is
      attacked against its own loss. A function or a ``jax.tree_util.Partial`` whose non-array arguments
      are hashable (the attack's compile is reused across rounds).
    eps: L∞ budget on the [0, 1] pixel scale, in [0, 1].
    rounds: attack-and-train rounds ≥ 0; epochs_per_round: Adam epochs per round (and of the clean start).
    pgd_steps: PGD steps ≥ 1; pgd_alpha: step size in (0, 1], None for ε/30 (Madry et al.'s α = 0.01 for
      40 steps at ε = 0.3).
    clean_features_NxF: the network's inputs for the clean rows (None: features_fn(x)); pass the features
      the network is otherwise trained on when they are computed another way.
    loss, learning_rate, l2, batch_size: as ``train_adam``.

  Returns:
    The trained parameters.

  Raises:
    ValueError: eps outside [0, 1], rounds < 0, pgd_steps < 1, pgd_alpha outside (0, 1], and as
      ``train_adam`` and ``attacks.pgd_linf`` (x outside [0, 1]).
  """
  if isinstance(eps, (str, bool)) or not 0 <= eps <= 1:
    raise ValueError(f"eps must be in [0, 1] (L∞ on the [0, 1] pixel scale), got {eps!r}")
  for name, value, low in (("rounds", rounds, 0), ("pgd_steps", pgd_steps, 1), ("epochs_per_round",
                                                                                  epochs_per_round, 0)):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
      raise ValueError(f"{name} must be an integer ≥ {low}, got {value!r}")
  if pgd_alpha is not None and not 0 < pgd_alpha <= 1:
    raise ValueError(f"pgd_alpha must be in (0, 1] or None (α = ε/30), got {pgd_alpha!r}")
  alpha = pgd_alpha if pgd_alpha is not None else eps / 30
  x = jnp.asarray(x_NxD)
  kw = dict(loss=loss, learning_rate=learning_rate, l2=l2, batch_size=batch_size, epochs=epochs_per_round)
  feats = features_fn(x) if clean_features_NxF is None else clean_features_NxF
  params = train_adam(apply_fn, params, feats, y_NxC, key=key, **kw)
  labels = jnp.argmax(jnp.asarray(y_NxC), axis=1)
  for r in range(rounds):
    logits_fn = jax.tree_util.Partial(_features_logits, apply_fn, features_fn, params)
    x_adv = attacks.pgd_linf(logits_fn, x, labels, eps=eps, alpha=alpha, steps=pgd_steps,
                             key=jax.random.fold_in(attack_key, r)).x_adv
    params = train_adam(apply_fn, params, features_fn(x_adv), y_NxC, key=jax.random.fold_in(key, r + 1), **kw)
  return params
