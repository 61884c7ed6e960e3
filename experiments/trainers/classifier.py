"""Minibatch training of a Flax classifier with optax, orbax checkpoints, resume and a progress bar.

Shared by the experiments that train image classifiers (ViT / DiffViT, certified ViTs, the influence
models). The model is any Flax Linen module called as ``module.apply(variables, x_BxHxWxC, train=...)``
returning logits [B, C]; only ``params`` are trained. Loss: mean softmax cross-entropy (``attacks.cross_entropy``), plus an
optional L2 penalty ``l2/2 · ‖θ‖²`` (added to the loss; not optax's decoupled weight decay).

A checkpoint (params, optimiser state, epoch, RNG key) is written with orbax after every epoch into
``<workdir>/checkpoints/``; calling ``train_classifier`` again with the same workdir resumes from the
newest readable one, so a killed run loses at most one epoch, and a finished run is loaded, not retrained.
A step directory that does not restore (e.g. an empty one left by a partial copy) is moved aside to
``<workdir>/checkpoints-skipped/`` with a warning, and the next older step is used.
Restoring gives back exactly the saved values (tested bit-exact).
"""
from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
from tqdm.auto import tqdm

import attacks
from experiments.core import tolerance
from experiments.core.config import ClassifierTrainConfig, PlateauRule


class EpochMetrics(NamedTuple):
  """One epoch of ``train_classifier``: epoch (1-based), loss (mean training loss over its minibatches, L2
  penalty included), train_accuracy (mean minibatch accuracy, in [0, 1]), seconds (wall time of the
  epoch's steps), validation_accuracy (top-1 on the validation images after the epoch, in [0, 1]; None
  without a validation split)."""
  epoch: int
  loss: float
  train_accuracy: float
  seconds: float
  validation_accuracy: Optional[float] = None


class TrainResult(NamedTuple):
  """params: trained parameters; history: one ``EpochMetrics`` per epoch (``history.json`` holds them as
  objects); stop_reason: 'cap' (every epoch of the config was trained) or 'plateau' (``plateau_reached``)."""
  params: Any
  history: list
  stop_reason: str = "cap"


def plateau_reached(validation_accuracies: Sequence[float], rule: PlateauRule) -> bool:
  """Whether training stops after the last epoch of ``validation_accuracies`` (one per epoch, in [0, 1]) by
  ``rule``: at least rule.min_epochs epochs trained, and the last one gained less than rule.min_gain over
  the epoch ``rule.window`` before it (a gain equal to min_gain within float64 rounding is not less). False
  while the rule is off (window 0), the history has at most ``window`` epochs, or an accuracy is missing
  (None).

  Raises:
    ValueError: an accuracy that is NaN or outside [0, 1].
  """
  acc = list(validation_accuracies)
  bad = [a for a in acc if a is not None and not 0 <= a <= 1]
  if bad:
    raise ValueError(f"validation_accuracies must be in [0, 1], got {bad[:3]}")
  if not rule.active or len(acc) < max(rule.min_epochs, rule.window + 1):
    return False
  last, before = acc[-1], acc[-1 - rule.window]
  if last is None or before is None:
    return False
  # A gain equal to min_gain within rounding reaches it (docs/decision_boundaries.md): not a plateau.
  return not tolerance.at_least(last - before, rule.min_gain, tolerance.tolerance(last, before, rule.min_gain))


def accuracy(apply_fn: Callable, params, x, y, *, batch_size: int = 500) -> float:
  """Top-1 accuracy of ``apply_fn(params, x_batch) -> logits`` on numpy arrays x [n, ...], y [n]."""
  correct = 0
  for i in range(0, len(x), batch_size):
    logits = apply_fn(params, jnp.asarray(x[i:i + batch_size]))
    correct += int(jnp.sum(jnp.argmax(logits, -1) == jnp.asarray(y[i:i + batch_size])))
  return correct / max(len(x), 1)


CROP_PAD = 4  # pixels of zero padding of the "crop_flip" augmentation


def crop_flip(x_BxHxWxC, key):
  """The standard CIFAR-10 augmentation, per image: zero-pad by ``CROP_PAD`` pixels, take a random H×W crop,
  flip horizontally with probability ½. Images [B, H, W, C] in, same shape and dtype out."""
  b, h, w, c = x_BxHxWxC.shape
  shift_key, flip_key = jax.random.split(key)
  offsets = jax.random.randint(shift_key, (b, 2), 0, 2 * CROP_PAD + 1)
  padded = jnp.pad(x_BxHxWxC, ((0, 0), (CROP_PAD, CROP_PAD), (CROP_PAD, CROP_PAD), (0, 0)))
  crops = jax.vmap(lambda im, o: jax.lax.dynamic_slice(im, (o[0], o[1], 0), (h, w, c)))(padded, offsets)
  flip = jax.random.bernoulli(flip_key, 0.5, (b, 1, 1, 1))
  return jnp.where(flip, crops[:, :, ::-1], crops)


def make_optimizer(config: ClassifierTrainConfig, steps_per_epoch: int):
  total = max(1, config.epochs * steps_per_epoch)
  warmup = min(total - 1, config.warmup_epochs * steps_per_epoch)
  schedule = optax.warmup_cosine_decay_schedule(0.0, config.learning_rate, max(warmup, 0), total)
  return optax.adam(schedule)


SKIPPED_DIR = "checkpoints-skipped"
"""Unreadable checkpoint steps are moved to ``<workdir>/checkpoints-skipped/<step>`` (kept, not deleted)."""


def _restore_newest_readable(open_manager: Callable, workdir: Path, target):
  """(manager, step, state) for the newest checkpoint step that restores; step and state are None when
  there is none.

  A step that fails to restore (a partial copy, an empty or truncated step directory) is moved aside to
  ``<workdir>/checkpoints-skipped/<step>`` — not deleted, and out of the way of the next save, which reuses
  its step number — with a RuntimeWarning naming both directories; then the next older step is tried with
  a fresh manager (a failed restore leaves orbax's manager unable to read even intact steps).
  """
  manager = open_manager()
  for step in sorted(manager.all_steps(), reverse=True):
    try:
      return manager, step, manager.restore(step, args=ocp.args.StandardRestore(target))
    except Exception as error:  # orbax raises ValueError, FileNotFoundError, KeyError, ... for damaged steps
      manager.close()
      source = Path(manager.directory) / str(step)
      destination = workdir / SKIPPED_DIR / str(step)
      suffix = 1
      while destination.exists():
        destination, suffix = workdir / SKIPPED_DIR / f"{step}.{suffix}", suffix + 1
      destination.parent.mkdir(parents=True, exist_ok=True)
      source.rename(destination)
      reason = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
      warnings.warn(f"checkpoint {source} is unreadable ({type(error).__name__}: {reason}); moved it to "
                    f"{destination} and resuming from the newest older checkpoint", RuntimeWarning, stacklevel=3)
      manager = open_manager()
  return manager, None, None


def open_checkpoints(workdir: Path, config: ClassifierTrainConfig, params, opt_state):
  """(manager, latest epoch or None, (params, opt_state) restored or None, history) of ``workdir``'s orbax
  checkpoints (``<workdir>/checkpoints``, newest readable step; history.json cut to that epoch)."""
  open_manager = lambda: ocp.CheckpointManager(
      (workdir / "checkpoints").resolve(),
      # Synchronous saves: each epoch waits for its checkpoint anyway, and without orbax's background
      # threads a Ctrl-C cannot leave them failing with tracebacks (the commit is atomic either way).
      options=ocp.CheckpointManagerOptions(max_to_keep=config.max_to_keep, create=True,
                                           enable_async_checkpointing=False))
  manager, latest, state = _restore_newest_readable(open_manager, workdir, jax.device_get(
      {"params": params, "opt_state": opt_state}))
  if latest is None:
    return manager, None, None, []
  history_path = workdir / "history.json"
  history = ([EpochMetrics(**h) for h in json.loads(history_path.read_text())[:latest]]
             if history_path.exists() else [])
  return manager, latest, jax.tree_util.tree_map(jnp.asarray, (state["params"], state["opt_state"])), history


def save_checkpoint(manager, workdir: Path, epoch: int, params, opt_state, history) -> None:
  """history.json, then the orbax checkpoint of ``epoch`` (params and optimiser state)."""
  # history.json first: a kill between the two writes leaves it one epoch ahead of the newest checkpoint,
  # which the resume cuts to the checkpoint's epoch; the other order would leave the plateau rule reading
  # a history one epoch short of the parameters it resumes.
  (workdir / "history.json").write_text(json.dumps([h._asdict() for h in history], indent=1))
  # Host (numpy) copies, kept from orbax 0.11.24 on JAX 0.5.3, which could not serialise jax.Array (it calls
  # jax.monitoring.record_scalar, added in a later JAX); numpy leaves take another handler.
  manager.save(epoch, args=ocp.args.StandardSave(jax.device_get({"params": params, "opt_state": opt_state})))


Objective = Callable[..., tuple]
"""A training objective ``(module, params, x_batch, y_batch, key) -> (loss, accuracy)`` (scalars), in place of
the cross-entropy of ``module.apply(...)``'s logits (e.g. CLIP's contrastive loss, ``attention.clip``)."""


def cross_entropy_objective(module, params, xb, yb, key):
  """The default ``Objective``: mean softmax cross-entropy of the module's logits, and top-1 accuracy."""
  logits = module.apply({"params": params}, xb, train=True, rngs={"dropout": key})
  return jnp.mean(attacks.cross_entropy(logits, yb)), jnp.mean(jnp.argmax(logits, -1) == yb)


def make_step(module, config: ClassifierTrainConfig, tx, objective: Optional[Objective] = None) -> Callable:
  """The (unjitted) training step (params, opt_state, x_batch, y_batch, key) -> (params, opt_state, loss,
  accuracy): the augmentation, the ``objective`` (default cross-entropy) plus the L2 penalty, and one optax
  update."""
  objective = objective or cross_entropy_objective

  def loss_fn(p, xb, yb, key):
    if config.augment == "crop_flip":
      key, augment_key = jax.random.split(key)
      xb = crop_flip(xb, augment_key)
    loss, acc = objective(module, p, xb, yb, key)
    if config.l2:
      loss = loss + 0.5 * config.l2 * sum(jnp.sum(w ** 2) for w in jax.tree_util.tree_leaves(p))
    return loss, acc

  def step(p, s, xb, yb, key):
    (loss, acc), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, xb, yb, key)
    updates, s = tx.update(grads, s, p)
    return optax.apply_updates(p, updates), s, loss, acc
  return step


def check_labels(module, params, x_train, y_train, name: str = "y_train") -> None:
  """Labels must be a vector [n] of integers in [0, C), C the module's number of logits (its output shape on one
  image, by ``jax.eval_shape``).

  Raises:
    ValueError: labels that are not one per image, not integers, or outside [0, C) (named with the offending
      values).
  """
  y = np.asarray(y_train)
  if y.ndim != 1:
    raise ValueError(f"{name} must be a vector of labels [n], got shape {y.shape}")
  if not np.issubdtype(y.dtype, np.integer):
    raise ValueError(f"{name} must hold integer class labels, got dtype {y.dtype}")
  classes = int(jax.eval_shape(lambda p, x: module.apply({"params": p}, x, train=False), params,
                               jnp.asarray(x_train[:1])).shape[-1])   # traced for its shape only, not run
  bad = np.unique(y[(y < 0) | (y >= classes)])
  if bad.size:
    raise ValueError(f"{name} must hold labels in [0, {classes}) (the model has {classes} logits), "
                     f"got {bad[:5].tolist()}")


def seed_keys(seed: int):
  """(init, shuffle, dropout) keys of a training seed."""
  return jax.random.split(jax.random.PRNGKey(seed), 3)


def train_classifier(module, x_train, y_train, config: ClassifierTrainConfig, workdir=None, *,
                     validation=None, plateau: Optional[PlateauRule] = None,
                     objective: Optional[Objective] = None) -> TrainResult:
  """Trains ``module`` on (x_train, y_train) and returns its params; resumes from ``workdir``.

  Args:
    module: a Flax Linen module; ``module.init(key, x, train=False)`` and
      ``module.apply(variables, x, train=True, rngs={'dropout': key})`` must work.
    x_train: float32 images [n, H, W, C] in [0, 1] (or any [n, ...] the module takes).
    y_train: int labels [n].
    config: ``experiments.core.config.ClassifierTrainConfig``; its ``epochs`` is the cap.
    workdir: directory for checkpoints and ``history.json``; None trains without checkpoints.
    validation: (x_val, y_val) held out of the training images, or None; its accuracy is recorded after
      every epoch (``EpochMetrics.validation_accuracy``).
    plateau: ``experiments.core.config.PlateauRule`` (needs ``validation``): stop at the first epoch where
      ``plateau_reached``; a resumed run that had stopped stays stopped. None or an inactive rule: train to
      the cap.
    objective: the training loss (``Objective``); None: cross-entropy of the module's logits. The validation
      accuracy is always the top-1 of ``module.apply(variables, x, train=False)``.

  Returns:
    ``TrainResult``.

  Raises:
    ValueError: bad config, x/y lengths that differ, labels that are not integers in [0, C) (``check_labels``),
      or an active plateau rule without a validation split.
  """
  config.validate()
  y_train = np.asarray(y_train)
  if len(x_train) != len(y_train):
    raise ValueError(f"x_train has {len(x_train)} rows but y_train has {len(y_train)}")
  if len(x_train) == 0:
    raise ValueError("x_train holds no images")
  if plateau is not None:
    plateau.validate()
    if plateau.active and validation is None:
      raise ValueError("plateau: an active rule (window > 0) needs a validation split (validation=(x, y))")
  if validation is not None and len(validation[0]) != len(validation[1]):
    raise ValueError(f"validation has {len(validation[0])} images but {len(validation[1])} labels")
  stops = lambda hist: plateau is not None and plateau_reached([h.validation_accuracy for h in hist], plateau)
  eval_fn = jax.jit(lambda p, xb: module.apply({"params": p}, xb, train=False))
  n = len(x_train)
  steps_per_epoch = max(1, n // config.batch_size)
  init_key, shuffle_key, dropout_key = seed_keys(config.seed)
  params = module.init(init_key, jnp.asarray(x_train[:1]), train=False)["params"]
  check_labels(module, params, x_train, y_train)
  if validation is not None:
    check_labels(module, params, validation[0], validation[1], "validation labels")
  tx = make_optimizer(config, steps_per_epoch)
  opt_state = tx.init(params)
  start_epoch, history = 0, []

  manager = None
  if workdir is not None:
    workdir = Path(workdir)
    manager, latest, state, history = open_checkpoints(workdir, config, params, opt_state)
    if latest is not None:
      params, opt_state = state
      start_epoch = latest
      if len(history) != latest and plateau is not None and plateau.active:
        raise ValueError(f"{workdir / 'history.json'} holds {len(history)} epochs but the newest checkpoint is epoch "
                         f"{latest}: the plateau rule cannot be applied to a history that does not match the parameters "
                         f"(delete {workdir / 'checkpoints'} to retrain, or turn the rule off with plateau.window=0)")

  step = jax.jit(make_step(module, config, tx, objective))

  for epoch in range(start_epoch, config.epochs):
    if stops(history):
      break
    t0 = time.perf_counter()
    perm = np.asarray(jax.random.permutation(jax.random.fold_in(shuffle_key, epoch), n))
    losses, accs = [], []
    bar = tqdm(range(steps_per_epoch), desc=f"epoch {epoch + 1}/{config.epochs}", leave=False)
    for i in bar:
      idx = perm[i * config.batch_size:(i + 1) * config.batch_size]
      key = jax.random.fold_in(dropout_key, epoch * steps_per_epoch + i)
      params, opt_state, loss, acc = step(params, opt_state, jnp.asarray(x_train[idx]),
                                          jnp.asarray(y_train[idx]), key)
      losses.append(float(loss))
      accs.append(float(acc))
      bar.set_postfix(loss=f"{losses[-1]:.3f}")
    seconds = time.perf_counter() - t0
    val_acc = None if validation is None else accuracy(eval_fn, params, *validation)
    history.append(EpochMetrics(epoch=epoch + 1, loss=float(np.mean(losses)), train_accuracy=float(np.mean(accs)),
                                seconds=seconds, validation_accuracy=val_acc))
    if manager is not None:
      save_checkpoint(manager, workdir, epoch + 1, params, opt_state, history)
  stop_reason = "plateau" if len(history) < config.epochs and stops(history) else "cap"
  if manager is not None:
    manager.close()
  return TrainResult(params, history, stop_reason)
