"""Full-batch gradient descent on the finite network and the infinite-width NTK predictor at the same time.

Loss: L(θ) = ½ · mean over all n·C entries of (f_θ(X) − Y)², Y one-hot; θ ← θ − η ∇L for T steps, so the
training time is t = T·η (neural-tangents' convention: ``nt.predict.gradient_descent_mse`` normalises by
y.size and interprets time in units of the learning rate). In the NTK regime the trained network equals
the kernel predictor
  f_t(x) = f₀(x) − Θ(x, X) Θ(X, X)⁻¹ (I − exp(−η T Θ(X, X)/(nC))) (f₀(X) − Y),
which needs the network's own f₀ (or f₀ ≡ 0): an O(1) f₀ term does not shrink with width
(Jacot et al. 2018; Lee et al. 2019, arXiv 1902.06720; REFERENCE §1).
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import neural_tangents as nt
import numpy as np


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
  """Mean softmax cross-entropy from logits against one-hot targets (scalar)."""
  return -jnp.mean(jnp.sum(y_NxC * jax.nn.log_softmax(f_NxC), axis=-1))


LOSSES = {"mse": half_mse, "ce": softmax_cross_entropy}


@functools.partial(jax.jit, static_argnames=("apply_fn", "loss", "epochs", "batch_size"))
def _adam(apply_fn, params, x_NxD, y_NxC, key, *, loss: str, learning_rate, weight_decay, epochs: int,
          batch_size: int):
  import optax
  tx = optax.adam(learning_rate)
  n = x_NxD.shape[0]
  steps = max(1, n // batch_size)

  def objective(p, xb, yb):
    reg = 0.5 * weight_decay * sum(jnp.sum(w ** 2) for w in jax.tree_util.tree_leaves(p))
    return LOSSES[loss](apply_fn(p, xb), yb) + reg

  def epoch(carry, k):
    p, s = carry
    perm = jax.random.permutation(k, n)[:steps * batch_size].reshape(steps, batch_size)

    def step(c, idx):
      p, s = c
      g = jax.grad(objective)(p, x_NxD[idx], y_NxC[idx])
      updates, s = tx.update(g, s, p)
      return (optax.apply_updates(p, updates), s), None

    return jax.lax.scan(step, (p, s), perm)[0], None

  (params, _), _ = jax.lax.scan(epoch, (params, tx.init(params)), jax.random.split(key, epochs))
  return params


def train_adam(apply_fn, params, x_NxD, y_NxC, *, key, loss: str = "ce", learning_rate: float = 1e-3,
               weight_decay: float = 1e-3, epochs: int = 500, batch_size: int = 128):
  """Minibatch Adam with an L2 penalty, the influence paper's training (arXiv 2603.13085 §5: cross-entropy
  for 10 classes, MSE for binary tasks, L2 1e-3, Adam 1e-3, batch 128, 500 epochs), compiled as one scan.

  Args:
    apply_fn: ``apply_fn(params, x) -> [n, C]``; params: initial parameters.
    x_NxD: inputs [n, d]; y_NxC: one-hot targets [n, C].
    key: PRNG key for the minibatch order.
    loss: ``'ce'`` (softmax cross-entropy) or ``'mse'`` (½·mean squared error).
    learning_rate, weight_decay, epochs, batch_size: as named; each epoch uses ⌊n/batch⌋ full batches.

  Raises:
    ValueError: unknown loss, learning_rate not finite and > 0, weight_decay not finite and ≥ 0, epochs < 0
      or batch_size < 1.
  """
  if loss not in LOSSES:
    raise ValueError(f"loss must be one of {tuple(LOSSES)}, got {loss!r}")
  if not (learning_rate > 0 and math.isfinite(learning_rate)) or not (0 <= weight_decay < math.inf) or (
      epochs < 0 or batch_size < 1):
    raise ValueError(f"need learning_rate finite and > 0, weight_decay finite and ≥ 0, epochs ≥ 0, "
                     f"batch_size ≥ 1; got {learning_rate}, {weight_decay}, {epochs}, {batch_size}")
  batch_size = min(int(batch_size), int(np.shape(x_NxD)[0]))
  return _adam(apply_fn, params, jnp.asarray(x_NxD), jnp.asarray(y_NxC), key, loss=loss,
               learning_rate=float(learning_rate), weight_decay=float(weight_decay), epochs=int(epochs),
               batch_size=batch_size)
