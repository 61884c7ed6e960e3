"""Many training seeds of one classifier as one compiled program: ``train_classifier_seeds``.

Each seed is trained exactly as ``experiments.trainers.classifier.train_classifier`` trains it alone (its own
initialisation key, data order, dropout / augmentation keys, optimiser and schedule) but the S seeds' steps are
one ``jax.vmap`` over (params, optimiser state, batch, key) inside one ``jax.jit``: one dispatch and one set of
batched matmuls per step instead of S. Every seed writes the same checkpoints and history.json to its own
workdir as ``train_classifier`` does, so either function resumes or loads the other's runs.

What equality to expect: after one step each seed's parameters equal the same seed trained alone to float32
rounding (a batched matmul sums in another order); over many steps the rounding differences are amplified by
training's own sensitivity, so finished models agree in accuracy, not bit for bit
(tests/experiments/trainers/test_seeds.py states the tolerances).

Not supported here: the plateau rule (a per-seed stopping point would need masking of finished seeds);
``train_classifier`` trains those one at a time.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from experiments.core.config import ClassifierTrainConfig
from experiments.trainers.classifier import (EpochMetrics, TrainResult, check_labels, make_optimizer, make_step,
                                             open_checkpoints, save_checkpoint, seed_keys, train_classifier)


def _stack(trees):
  return jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *trees)


def _unstack(tree, i: int):
  return jax.tree_util.tree_map(lambda leaf: leaf[i], tree)


def train_classifier_seeds(module, x_train, y_train, configs: Sequence[ClassifierTrainConfig],
                           workdirs: Optional[Sequence] = None) -> list[TrainResult]:
  """Trains one model per config (configs that differ only in ``seed``) as one vmapped program.

  Args:
    module: a Flax Linen module (as ``train_classifier``'s).
    x_train: float32 images [n, H, W, C] (or any [n, ...] the module takes); y_train: int labels [n].
    configs: S ≥ 1 ``ClassifierTrainConfig`` equal in every field but ``seed``.
    workdirs: S checkpoint directories (one per seed, as ``train_classifier``'s workdir), or None.

  Returns:
    One ``TrainResult`` per config, in order (stop_reason 'cap').

  Resumes: seeds whose newest checkpoints are at one epoch continue together from it; when they are at
  different epochs (a sequential run stopped midway) each seed is finished by ``train_classifier`` alone.

  Raises:
    ValueError: no configs (or not ClassifierTrainConfigs), configs that differ in more than the seed,
      repeated seeds, workdirs that are one path, of another length or not distinct, or x/y lengths that differ.
  """
  configs = list(configs) if isinstance(configs, (list, tuple)) else configs
  if not isinstance(configs, list) or not all(isinstance(c, ClassifierTrainConfig) for c in configs):
    raise ValueError(f"configs must be a list of ClassifierTrainConfig, got {configs!r:.80}")
  if not configs:
    raise ValueError("configs must hold at least one ClassifierTrainConfig")
  for c in configs:
    c.validate()
  if len({dataclasses.replace(c, seed=0) for c in configs}) != 1:
    raise ValueError("configs must be equal in every field but seed")
  if len({c.seed for c in configs}) != len(configs):
    raise ValueError(f"configs' seeds must be distinct, got {[c.seed for c in configs]}")
  if workdirs is not None:
    if isinstance(workdirs, (str, Path)):
      raise ValueError(f"workdirs must be a sequence of directories, one per config, got the single path {workdirs!r}")
    if len(workdirs) != len(configs):
      raise ValueError(f"workdirs must hold one directory per config ({len(configs)}), got {len(workdirs)}")
    if len({Path(w).resolve() for w in workdirs}) != len(workdirs):
      raise ValueError(f"workdirs must be distinct (each seed writes its own checkpoints), got {list(workdirs)}")
  if len(x_train) != len(y_train):
    raise ValueError(f"x_train has {len(x_train)} rows but y_train has {len(y_train)}")
  config, S, n = configs[0], len(configs), len(x_train)
  steps_per_epoch = max(1, n // config.batch_size)
  tx = make_optimizer(config, steps_per_epoch)
  keys = [seed_keys(c.seed) for c in configs]
  params = [module.init(k[0], jnp.asarray(x_train[:1]), train=False)["params"] for k in keys]
  check_labels(module, params[0], x_train, y_train)
  opt_states = [tx.init(p) for p in params]
  histories: list[list] = [[] for _ in configs]
  managers = [None] * S
  start_epoch = 0
  if workdirs is not None:
    workdirs = [Path(w) for w in workdirs]
    latest = []
    for s in range(S):
      managers[s], epoch, state, histories[s] = open_checkpoints(workdirs[s], config, params[s], opt_states[s])
      latest.append(epoch or 0)
      if state is not None:
        params[s], opt_states[s] = state
    if len(set(latest)) > 1:          # seeds at different epochs: each finishes alone
      for m in managers:
        m.close()
      return [train_classifier(module, x_train, y_train, c, w) for c, w in zip(configs, workdirs)]
    start_epoch = latest[0]
  step = jax.jit(jax.vmap(make_step(module, config, tx)))
  params, opt_states = _stack(params), _stack(opt_states)
  y_all = np.asarray(y_train)
  for epoch in range(start_epoch, config.epochs):
    t0 = time.perf_counter()
    perms = np.stack([np.asarray(jax.random.permutation(jax.random.fold_in(k[1], epoch), n)) for k in keys])
    losses, accs = [], []
    bar = tqdm(range(steps_per_epoch), desc=f"epoch {epoch + 1}/{config.epochs} ({S} seeds)", leave=False)
    for i in bar:
      idx = perms[:, i * config.batch_size:(i + 1) * config.batch_size]                   # [S, B]
      step_keys = jnp.stack([jax.random.fold_in(k[2], epoch * steps_per_epoch + i) for k in keys])
      params, opt_states, loss, acc = step(params, opt_states, jnp.asarray(x_train[idx]), jnp.asarray(y_all[idx]),
                                           step_keys)
      losses.append(np.asarray(loss))
      accs.append(np.asarray(acc))
      bar.set_postfix(loss=f"{float(np.mean(losses[-1])):.3f}")
    seconds = time.perf_counter() - t0
    loss_S, acc_S = np.mean(losses, axis=0), np.mean(accs, axis=0)
    for s in range(S):
      histories[s].append(EpochMetrics(epoch=epoch + 1, loss=float(loss_S[s]), train_accuracy=float(acc_S[s]),
                                       seconds=seconds / S))
      if managers[s] is not None:
        save_checkpoint(managers[s], workdirs[s], epoch + 1, _unstack(params, s), _unstack(opt_states, s),
                        histories[s])
  for m in managers:
    if m is not None:
      m.close()
  return [TrainResult(_unstack(params, s), histories[s], "cap") for s in range(S)]
