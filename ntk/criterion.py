"""Train to a stated criterion before measuring: pick the Adam learning rate from a grid by accuracy on a
validation split held out of the training split, then train on the whole training split until the training
loss reaches a target or an epoch cap stops it, and record which. Or, with ``optimizer='lbfgs'``, full-batch
L-BFGS (no rate to choose: a strong-Wolfe line search sets each step) to the same target.

The optimiser is the minibatch Adam of ``ntk.training.train_adam`` (arXiv 2603.13085 §5: Adam, an L2
penalty (l2/2)‖θ‖², batch 128, ⌊n/batch⌋ batches per epoch), run in chunks of ``check_every`` epochs that
carry the Adam state across chunks, so training to a criterion is one continuous Adam run, stopped at
the first check where the loss is at or below the target. Each chunk is one compiled ``lax.scan``; the
learning rate is a traced argument, so the grid shares one compile.

Why L-BFGS: MLP-Attn's features, the unit-norm rows of X Xᵀ X, have the singular values of X cubed, so
the first layer sees a problem whose condition number is cubed too (docs/theory.md#why-l-bfgs). On 512
MNIST images at width 1024, minibatch Adam at 1e-2 / 3e-2 is still at cross-entropy 0.35 / 0.28 after 4,000
epochs, while full-batch L-BFGS reaches 0.05 in about 1,350 iterations (both measured on 2 CPU cores).
L-BFGS is the quasi-Newton method of Liu & Nocedal (1989), here ``optax.lbfgs`` (memory 10, zoom line
search for the strong Wolfe conditions, Nocedal & Wright 2006, Alg. 3.5–3.6). ``optimizer='gauss_newton'``
(``ntk.gauss_newton``) is for ½·MSE targets of the fixed-readout network.
"""
from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ntk.gauss_newton import train_gauss_newton
from ntk.models import penalized_leaves
from ntk.training import LOSSES, adam_epochs

DEFAULT_LEARNING_RATES = (1e-3, 3e-3, 1e-2, 3e-2)
OPTIMIZERS = ("adam", "lbfgs", "gauss_newton")
LBFGS_MEMORY = 10  # optax.lbfgs's default number of stored (s, y) pairs


class Candidate(NamedTuple):
  """One learning rate of the grid, trained on the fit part and scored on the validation part.

  Fields:
    learning_rate: η.
    val_accuracy: accuracy on the validation split, in [0, 1].
    val_loss: mean data loss on the validation split.
    train_loss: final mean data loss on the fit split (no L2 term).
    epochs: epochs run.
    reached: whether the fit loss reached the target within the cap.
  """
  learning_rate: float
  val_accuracy: float
  val_loss: float
  train_loss: float
  epochs: int
  reached: bool


class CriterionResult(NamedTuple):
  """A network trained to the criterion.

  Fields:
    params: the trained parameters.
    learning_rate: the chosen Adam η (None for L-BFGS: its line search sets every step).
    train_loss: the final mean data loss (cross-entropy for ``loss='ce'``; no L2 term) on the training split.
    train_accuracy: final accuracy on the training split, in [0, 1].
    epochs: Adam epochs run on the training split (a multiple of check_every, or max_epochs); for L-BFGS
      the iterations run, each one full-batch gradient plus its line search (exactly the first iterate
      whose loss is at or below the target, or max_epochs); for Gauss–Newton the steps taken.
    reached: whether train_loss ≤ target_loss was reached within max_epochs.
    target_loss, max_epochs: the criterion, for the record.
    candidates: one ``Candidate`` per grid entry (empty for a one-entry grid: nothing to choose).
    stop_reason: why training stopped short of the target where the optimizer knows ("" otherwise; e.g.
      Gauss–Newton's "zero kernel …" when every ReLU is inactive).
  """
  params: object
  learning_rate: float
  train_loss: float
  train_accuracy: float
  epochs: int
  reached: bool
  target_loss: float
  max_epochs: int
  candidates: tuple
  stop_reason: str = ""


def validation_split(n: int, key, fraction: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
  """Holds ``round(fraction · n)`` (at least 1) of n training rows out for validation, by a permutation
  drawn from ``key`` (the same key gives the same split).

  Returns:
    (fit_idx, val_idx): disjoint sorted int arrays whose union is range(n).

  Raises:
    ValueError: fraction outside (0, 1), or n too small to leave a row on each side.
  """
  if not 0 < fraction < 1:
    raise ValueError(f"validation_fraction must be in (0, 1), got {fraction!r}")
  n_val = max(1, int(round(fraction * n)))
  if n_val >= n:
    raise ValueError(f"need at least 2 training rows to hold out a validation split, got n={n}")
  perm = np.asarray(jax.random.permutation(key, n))
  return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def _data_loss(loss: str, f, y):
  return jnp.mean(LOSSES[loss](f, y))


def _accuracy(f, y):
  if y.shape[-1] == 1:  # scalar output against ±1 targets
    return jnp.mean((jnp.sign(f[:, 0]) == jnp.sign(y[:, 0])).astype(jnp.float32))
  return jnp.mean((jnp.argmax(f, axis=-1) == jnp.argmax(y, axis=-1)).astype(jnp.float32))


@functools.partial(jax.jit, static_argnames=("apply_fn", "loss"))
def _evaluate(apply_fn, params, x, y, *, loss: str):
  f = apply_fn(params, x)
  return _data_loss(loss, f, y), _accuracy(f, y)


def _train(apply_fn, params, x, y, key, *, learning_rate, l2, loss, batch_size, target_loss, max_epochs,
           check_every):
  """Adam from params until the data loss ≤ target (checked every check_every epochs) or max_epochs.

  Returns (params, loss, accuracy, epochs, reached). A non-finite loss stops training (not reached).
  """
  import optax
  x, y = jnp.asarray(x), jnp.asarray(y)
  batch_size = min(int(batch_size), int(x.shape[0]))
  epoch_keys = jax.random.split(key, max_epochs) if max_epochs else None
  state = optax.adam(learning_rate).init(params)
  lr, l2 = jnp.asarray(learning_rate, jnp.float32), jnp.asarray(l2, jnp.float32)
  epochs = 0
  value, acc = (float(v) for v in _evaluate(apply_fn, params, x, y, loss=loss))
  while value > target_loss and math.isfinite(value) and epochs < max_epochs:
    chunk = epoch_keys[epochs:min(max_epochs, epochs + check_every)]
    params, state = adam_epochs(apply_fn, params, state, x, y, chunk, lr, l2, loss=loss,
                                batch_size=batch_size)
    epochs += int(chunk.shape[0])
    value, acc = (float(v) for v in _evaluate(apply_fn, params, x, y, loss=loss))
  return params, value, acc, epochs, bool(value <= target_loss)


@functools.partial(jax.jit, static_argnames=("apply_fn", "loss", "penalized"))
def _lbfgs_chunk(apply_fn, params, state, x, y, l2, target, iterations, *, loss: str, penalized: bool):
  """Up to ``iterations`` L-BFGS iterations from (params, state), stopping at the first iterate whose data
  loss is ≤ target or non-finite. Returns (params, state, iterations run, data loss at params)."""
  import optax

  def data_loss(p):
    return _data_loss(loss, apply_fn(p, x), y)

  def objective(p):
    reg = 0.5 * l2 * sum(jnp.sum(w ** 2) for w in penalized_leaves(p)) if penalized else 0.0
    return data_loss(p) + reg

  opt = optax.lbfgs(memory_size=LBFGS_MEMORY)
  value_and_grad = optax.value_and_grad_from_state(objective)

  def running(carry):
    _, _, i, value = carry
    return (i < iterations) & (value > target) & jnp.isfinite(value)

  def step(carry):
    p, s, i, _ = carry
    value, grad = value_and_grad(p, state=s)
    updates, s = opt.update(grad, s, p, value=value, grad=grad, value_fn=objective)
    p = optax.apply_updates(p, updates)
    # Without a penalty the line search has already evaluated the data loss at the new point.
    new_value = data_loss(p) if penalized else optax.tree_utils.tree_get(s, "value")
    return p, s, i + 1, new_value

  return jax.lax.while_loop(running, step, (params, state, jnp.asarray(0), data_loss(params)))


def _train_lbfgs(apply_fn, params, x, y, *, l2, loss, target_loss, max_epochs, check_every):
  """Full-batch L-BFGS from params to the first iterate with data loss ≤ target, or max_epochs iterations
  (compiled chunks of check_every). Returns (params, loss, accuracy, iterations, reached)."""
  import optax
  x, y = jnp.asarray(x), jnp.asarray(y)
  state = optax.lbfgs(memory_size=LBFGS_MEMORY).init(params)
  l2_, target = jnp.asarray(l2, jnp.float32), jnp.asarray(target_loss, jnp.float32)
  value, acc = (float(v) for v in _evaluate(apply_fn, params, x, y, loss=loss))
  iterations = 0
  while value > target_loss and math.isfinite(value) and iterations < max_epochs:
    chunk = min(check_every, max_epochs - iterations)
    params, state, ran, _ = _lbfgs_chunk(apply_fn, params, state, x, y, l2_, target, jnp.asarray(chunk),
                                         loss=loss, penalized=l2 > 0)
    iterations += int(ran)
    value, acc = (float(v) for v in _evaluate(apply_fn, params, x, y, loss=loss))
    if int(ran) < chunk:  # stopped inside the chunk: reached, or the loss turned non-finite
      break
  return params, value, acc, iterations, bool(value <= target_loss)


def train_to_criterion(apply_fn: Callable, params, x_NxD, y_NxC, *, key,
                       learning_rates: Sequence[float] = DEFAULT_LEARNING_RATES, target_loss: float = 0.05,
                       max_epochs: int = 2000, check_every: int = 50, validation_fraction: float = 0.2,
                       loss: str = "ce", l2: float = 0.0, batch_size: int = 128,
                       optimizer: str = "adam") -> CriterionResult:
  """Chooses the learning rate on a held-out validation split, then trains to a train-loss target.

  With ``optimizer='lbfgs'`` (or ``'gauss_newton'``) steps 1–2 are skipped (``learning_rates``,
  ``validation_fraction`` and ``batch_size`` are unused): the optimiser runs from ``params`` on all training
  rows until the first iterate whose mean data loss is ≤ target_loss, or ``max_epochs`` iterations (module
  docstring: why).

  1. Split the training rows: ``validation_split(n, fold_in(key, 1), validation_fraction)``.
  2. For each η in ``learning_rates``: train from ``params`` on the fit rows to the same criterion (minibatch
     order from ``fold_in(key, 2)``), then score on the validation rows. Choose the highest validation
     accuracy; ties go to the lower validation loss, then to the grid order. A run whose loss turned
     non-finite is chosen only if every run did. Skipped for a one-entry grid.
  3. Train from ``params`` on all training rows with the chosen η until the mean data loss ≤ target_loss
     (checked every ``check_every`` epochs) or ``max_epochs``. The minibatch order is that of
     ``train_adam(key=key, epochs=max_epochs)``, so without the target the result is that run's.

  Args:
    apply_fn: ``apply_fn(params, x) -> [n, C]`` (hashable: the same object reuses the compile).
    params: initial parameters (a pytree).
    x_NxD: training inputs [n, d] (never the test split).
    y_NxC: one-hot targets [n, C] (or ±1 targets [n, 1] with ``loss='mse'``).
    key: PRNG key (validation split, minibatch orders).
    learning_rates: the Adam learning-rate grid, each finite and > 0.
    target_loss: the train-loss target ≥ 0 (0.05 cross-entropy by default; the data loss, without L2).
    max_epochs: the epoch cap ≥ 0.
    check_every: epochs between loss checks ≥ 1 (also the length of one compiled chunk).
    validation_fraction: the share of training rows held out for choosing η, in (0, 1).
    loss: ``'ce'`` (softmax cross-entropy) or ``'mse'`` (½·mean squared error), as in ``train_adam``.
    l2: the L2 penalty coefficient ≥ 0, as in ``train_adam`` (on the trained parameters only: a fixed
      readout is not penalised, ``ntk.models.penalized_leaves``).
    batch_size: minibatch size ≥ 1 (capped at the rows available).
    optimizer: ``'adam'`` (minibatch Adam, the rate chosen from the grid), ``'lbfgs'`` (full batch), or
      ``'gauss_newton'`` (Levenberg–Marquardt through the full empirical NTK, ``ntk.gauss_newton``; the
      fixed-readout network on ½·MSE without a penalty only; max_epochs caps its steps).

  Returns:
    ``CriterionResult``.

  Raises:
    ValueError: x not [n, d], NaN or inf in x or y, y's columns ≠ the model's outputs; an unknown optimizer;
      gauss_newton with loss ≠ 'mse', l2 ≠ 0 or another model than the fixed-readout network; an empty
      grid or a non-positive rate; target_loss < 0; max_epochs < 0; check_every < 1; validation_fraction
      outside (0, 1); unknown loss; l2 < 0; batch_size < 1; x and y row counts differ.
  """
  if optimizer not in OPTIMIZERS:
    raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
  rates = tuple(float(r) for r in learning_rates)
  if not rates or not all(math.isfinite(r) and r > 0 for r in rates):
    raise ValueError(f"learning_rates must be a non-empty grid of finite rates > 0, got {learning_rates!r}")
  if not (math.isfinite(target_loss) and target_loss >= 0):
    raise ValueError(f"target_loss must be finite and ≥ 0, got {target_loss!r}")
  for name, value, low in (("max_epochs", max_epochs, 0), ("check_every", check_every, 1),
                           ("batch_size", batch_size, 1)):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
      raise ValueError(f"{name} must be an integer ≥ {low}, got {value!r}")
  if loss not in LOSSES:
    raise ValueError(f"loss must be one of {tuple(LOSSES)}, got {loss!r}")
  if not (math.isfinite(l2) and l2 >= 0):
    raise ValueError(f"l2 must be finite and ≥ 0, got {l2!r}")
  n = int(np.shape(x_NxD)[0])
  if np.shape(y_NxC)[0] != n or np.ndim(y_NxC) != 2:
    raise ValueError(f"y_NxC must have shape [n, C] with n = {n} rows like x, got {np.shape(y_NxC)}")
  x, y = np.asarray(x_NxD), np.asarray(y_NxC)
  if x.ndim != 2:
    raise ValueError(f"x_NxD must have shape [n, d], got {x.shape}")
  for name, a in (("x_NxD", x), ("y_NxC", y)):
    if not np.all(np.isfinite(a)):
      raise ValueError(f"{name} holds NaN or inf; training needs finite inputs and targets")
  out_shape = jax.eval_shape(lambda p, v: apply_fn(p, v), params, jax.ShapeDtypeStruct((1,) + x.shape[1:], x.dtype))
  if out_shape.shape[-1] != y.shape[1]:
    raise ValueError(f"the model has {out_shape.shape[-1]} outputs but y_NxC has {y.shape[1]} columns")
  common = dict(l2=l2, loss=loss, target_loss=float(target_loss), max_epochs=int(max_epochs),
                check_every=int(check_every))
  if optimizer == "lbfgs":
    p, value, acc, epochs, reached = _train_lbfgs(apply_fn, params, x, y, **common)
    return CriterionResult(p, None, value, acc, epochs, reached, float(target_loss), int(max_epochs), ())
  if optimizer == "gauss_newton":
    if loss != "mse" or l2 != 0:
      raise ValueError(f"optimizer='gauss_newton' trains ½·MSE without a penalty: loss must be 'mse' and l2 0, "
                       f"got loss={loss!r}, l2={l2!r}")
    p, value, steps, reason = train_gauss_newton(apply_fn, params, x, y, target_loss=float(target_loss),
                                                 max_iterations=int(max_epochs))
    acc = float(_evaluate(apply_fn, p, jnp.asarray(x), jnp.asarray(y), loss=loss)[1])
    return CriterionResult(p, None, value, acc, steps, bool(value <= target_loss), float(target_loss),
                           int(max_epochs), (), reason)
  common["batch_size"] = batch_size

  candidates = []
  if len(rates) > 1:
    fit_idx, val_idx = validation_split(n, jax.random.fold_in(key, 1), validation_fraction)
    for rate in rates:
      p, value, _, epochs, reached = _train(apply_fn, params, x[fit_idx], y[fit_idx],
                                            jax.random.fold_in(key, 2), learning_rate=rate, **common)
      val_loss, val_acc = (float(v) for v in _evaluate(apply_fn, p, jnp.asarray(x[val_idx]),
                                                         jnp.asarray(y[val_idx]), loss=loss))
      candidates.append(Candidate(rate, val_acc, val_loss, value, epochs, reached))

    def rank(i):
      c = candidates[i]
      finite = math.isfinite(c.train_loss) and math.isfinite(c.val_loss)
      return (finite, c.val_accuracy, -c.val_loss if finite else -math.inf, -i)

    chosen = rates[max(range(len(rates)), key=rank)]
  else:
    chosen = rates[0]
  p, value, acc, epochs, reached = _train(apply_fn, params, x, y, key, learning_rate=chosen, **common)
  return CriterionResult(p, chosen, value, acc, epochs, reached, float(target_loss), int(max_epochs),
                         tuple(candidates))
