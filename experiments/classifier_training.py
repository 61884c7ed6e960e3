"""Minibatch training of a Flax classifier with optax, orbax checkpoints, resume and a progress bar.

Shared by the experiments that train image classifiers (ViT / DiffViT, certified ViTs, the influence
models). The model is any Flax Linen module called as ``module.apply(variables, x_BxHxWxC, train=...)``
returning logits [B, C]; only ``params`` are trained. Loss: mean softmax cross-entropy (optax), plus an
optional L2 penalty ``weight_decay/2 · ‖θ‖²``.

A checkpoint (params, optimiser state, epoch, RNG key) is written with orbax after every epoch into
``<workdir>/checkpoints/``; calling ``train_classifier`` again with the same workdir resumes from the
latest one, so a killed run loses at most one epoch, and a finished run is loaded, not retrained.
Restoring gives back exactly the saved values (tested bit-exact).
"""
from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
from tqdm.auto import tqdm


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """epochs, batch_size, learning_rate (Adam), weight_decay (L2 coefficient), warmup_epochs of linear
  warm-up then cosine decay, seed (init and shuffling), max_to_keep checkpoints."""
  epochs: int = 10
  batch_size: int = 128
  learning_rate: float = 1e-3
  weight_decay: float = 0.0
  warmup_epochs: int = 1
  seed: int = 0
  max_to_keep: int = 2

  def validate(self) -> None:
    """Raises ValueError naming the first field out of range (NaN and inf are out of every range)."""
    checks = (("epochs", self.epochs >= 0, ">= 0"), ("batch_size", self.batch_size >= 1, ">= 1"),
              ("learning_rate", math.isfinite(self.learning_rate) and self.learning_rate > 0, "finite and > 0"),
              ("weight_decay", math.isfinite(self.weight_decay) and self.weight_decay >= 0, "finite and >= 0"),
              ("warmup_epochs", self.warmup_epochs >= 0, ">= 0"), ("seed", self.seed >= 0, ">= 0"))
    for name, ok, allowed in checks:
      if not ok:
        raise ValueError(f"{name} must be {allowed}, got {getattr(self, name)!r}")


class TrainResult(NamedTuple):
  """params: trained parameters; history: one dict per epoch (loss, train accuracy, epoch seconds)."""
  params: Any
  history: list


def cross_entropy(logits_BxC, labels_B):
  """Per-example softmax cross-entropy from logits, shape [B]."""
  return optax.softmax_cross_entropy_with_integer_labels(logits_BxC, labels_B)


def accuracy(apply_fn: Callable, params, x, y, *, batch_size: int = 500) -> float:
  """Top-1 accuracy of ``apply_fn(params, x_batch) -> logits`` on numpy arrays x [n, ...], y [n]."""
  correct = 0
  for i in range(0, len(x), batch_size):
    logits = apply_fn(params, jnp.asarray(x[i:i + batch_size]))
    correct += int(jnp.sum(jnp.argmax(logits, -1) == jnp.asarray(y[i:i + batch_size])))
  return correct / max(len(x), 1)


def _optimizer(config: TrainConfig, steps_per_epoch: int):
  total = max(1, config.epochs * steps_per_epoch)
  warmup = min(total - 1, config.warmup_epochs * steps_per_epoch)
  schedule = optax.warmup_cosine_decay_schedule(0.0, config.learning_rate, max(warmup, 0), total)
  return optax.adam(schedule)


def train_classifier(module, x_train, y_train, config: TrainConfig, workdir=None) -> TrainResult:
  """Trains ``module`` on (x_train, y_train) and returns its params; resumes from ``workdir``.

  Args:
    module: a Flax Linen module; ``module.init(key, x, train=False)`` and
      ``module.apply(variables, x, train=True, rngs={'dropout': key})`` must work.
    x_train: float32 images [n, H, W, C] in [0, 1] (or any [n, ...] the module takes).
    y_train: int labels [n].
    config: ``TrainConfig``.
    workdir: directory for checkpoints and ``history.json``; None trains without checkpoints.

  Returns:
    ``TrainResult``.

  Raises:
    ValueError: bad config, or x/y lengths that differ.
  """
  config.validate()
  if len(x_train) != len(y_train):
    raise ValueError(f"x_train has {len(x_train)} rows but y_train has {len(y_train)}")
  n = len(x_train)
  steps_per_epoch = max(1, n // config.batch_size)
  init_key, shuffle_key, dropout_key = jax.random.split(jax.random.PRNGKey(config.seed), 3)
  params = module.init(init_key, jnp.asarray(x_train[:1]), train=False)["params"]
  tx = _optimizer(config, steps_per_epoch)
  opt_state = tx.init(params)
  start_epoch, history = 0, []

  manager = None
  if workdir is not None:
    workdir = Path(workdir)
    manager = ocp.CheckpointManager(
        (workdir / "checkpoints").resolve(),
        # Synchronous saves: each epoch waits for its checkpoint anyway, and without orbax's background
        # threads a Ctrl-C cannot leave them failing with tracebacks (the commit is atomic either way).
        options=ocp.CheckpointManagerOptions(max_to_keep=config.max_to_keep, create=True,
                                             enable_async_checkpointing=False))
    latest = manager.latest_step()
    if latest is not None:
      state = manager.restore(latest, args=ocp.args.StandardRestore(
          jax.device_get({"params": params, "opt_state": opt_state})))
      params, opt_state = jax.tree_util.tree_map(jnp.asarray, (state["params"], state["opt_state"]))
      start_epoch = latest
      history_path = workdir / "history.json"
      history = json.loads(history_path.read_text())[:latest] if history_path.exists() else []

  def loss_fn(p, xb, yb, key):
    logits = module.apply({"params": p}, xb, train=True, rngs={"dropout": key})
    loss = jnp.mean(cross_entropy(logits, yb))
    if config.weight_decay:
      loss = loss + 0.5 * config.weight_decay * sum(jnp.sum(w ** 2) for w in jax.tree_util.tree_leaves(p))
    return loss, jnp.mean(jnp.argmax(logits, -1) == yb)

  @jax.jit
  def step(p, s, xb, yb, key):
    (loss, acc), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, xb, yb, key)
    updates, s = tx.update(grads, s, p)
    return optax.apply_updates(p, updates), s, loss, acc

  for epoch in range(start_epoch, config.epochs):
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
    history.append({"epoch": epoch + 1, "loss": float(np.mean(losses)), "train_accuracy": float(np.mean(accs)),
                    "seconds": time.perf_counter() - t0})
    if manager is not None:
      # Host (numpy) copies: orbax 0.11.24 cannot serialise jax.Array on JAX 0.5.3 (it calls
      # jax.monitoring.record_scalar, added in a later JAX); numpy leaves take another handler.
      manager.save(epoch + 1, args=ocp.args.StandardSave(
          jax.device_get({"params": params, "opt_state": opt_state})))
      (workdir / "history.json").write_text(json.dumps(history, indent=1))
  if manager is not None:
    manager.close()
  return TrainResult(params, history)
