"""Dual implications, the benefit half: does MLP-Attn's data-dependent kernel fit targets along the data's
dominant modes better than 2L-ReLU's, and targets in its weak modes worse? (arXiv 2603.13085 §1, §4;
docs/theory.md#dual-implications)

Usage:
  python -m experiments.dual_implications --workdir runs/dual [--full] [field=value ...]

For each data set, target kind (``ntk.approximation.TARGET_KINDS``: top-k / bottom-k non-zero / random
directions of the training matrix, plus the real one-hot labels), target draw and model it records, on the
test split:
  * kind "kinf": the relative error of kernel ridge regression with the model's infinite-width NTK K∞, and
    the kernel–target alignment of K∞;
  * kind "finite" (one per seed): the same with the empirical NTK at initialisation K₀ (width ``width``),
    and, for ``network_seeds``, the relative error of the network itself trained to ``train``'s ½·MSE
    criterion (fixed ±1 readout, full-batch L-BFGS).
Kernel regression starts from f₀ = 0 with ridge ρ = ridge_scale·tr(K)/n. Targets are scaled to unit variance
on the training split. Every target draw has its own training and test subset (``experiments.core.seed_subsets``:
block d of a partition of the full training files, disjoint across draws; from the embedded subsets an
independent draw with seed d), so the intervals over draws cover the data.

Two measurement choices beside the network's own inputs (issue 27, item 4): the kernels on the unit-norm
feature rows the networks see (``ntk.model_features``; fields kernel_error, alignment, ...) and on the raw
features (2L-ReLU: the [0, 1] pixel rows; MLP-Attn: x X_trᵀ X_tr, not normalised; one global rescaling,
which K∞, K₀ and a ridge relative to tr(K)/n do not see; fields raw_*); each at the fixed ridge_scale and at
the ridge chosen on a validation split of the training rows (``validation_fraction`` of them, the same
rows for both models; the grid ``ridge_grid``; fields *_validated): never on the test targets. Quick config: MNIST and CIFAR-10 embedded subsets, n = 256 train and test, k = 10,
5 draws, K₀ at 3 seeds, networks at 1 seed (a few minutes on 2 CPU cores). ``--full``: full files, n = 512,
3 network seeds. Writes config.json, results.jsonl, summary.md and errors.png
(``experiments.dual_implications.report``).
"""
from __future__ import annotations

import math
import time

import jax
import numpy as np
from tqdm.auto import tqdm

import ntk
from ntk import approximation
from ntk.criterion import train_to_criterion
from ntk.distance import kernel_regression
from ntk.sweep import finite_width_kernel, infinite_width_kernels
from experiments.core import distributed
from experiments.core import seed_subsets
from experiments.core.workdir import Workdir
from experiments.dual_implications.config import TARGETS, DualImplicationsConfig

KEY_FIELDS = ("dataset", "target", "draw", "model", "kind", "seed")


def _targets(config, x_train, x_test, labels, target: str, draw: int, dataset_index: int):
  """(y_train [n, C], y_test [t, C]) scaled to unit variance on the training split, and the record fields."""
  if target == "labels":
    y_tr, y_te = labels
    extra = {}
  else:
    key = jax.random.fold_in(jax.random.PRNGKey(1000 * dataset_index + draw), TARGETS.index(target))
    t = approximation.mode_targets(x_train, x_test, kind=target, k=config.k, key=key)
    y_tr, y_te = t.train, t.test
    extra = dict(singular_values=[float(s) for s in t.singular_values if np.isfinite(s)])
  scale = float(np.sqrt(np.mean((y_tr - y_tr.mean(axis=0)) ** 2)))
  return y_tr / scale, y_te / scale, extra


def validation_split(n: int, fraction: float, key) -> tuple[np.ndarray, np.ndarray]:
  """(fit rows, validation rows) of n training rows: round(fraction·n) rows drawn with ``key`` are held out."""
  perm = np.asarray(jax.random.permutation(key, n))
  n_val = int(round(fraction * n))
  return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def choose_ridge(k_train, y_train, grid, fit, val) -> tuple[float, list[float]]:
  """The ridge scale of ``grid`` whose kernel regression on the ``fit`` training rows has the lowest relative
  error on the ``val`` training rows (ties: the smaller scale), and the validation error at each scale (inf
  where K + λI is not positive definite in float64). The test rows are never read."""
  errors = []
  for scale in grid:
    try:
      reg = kernel_regression(k_train[np.ix_(fit, fit)], k_train[np.ix_(val, fit)], y_train[fit],
                              fx_train_0=np.zeros_like(y_train[fit]), fx_test_0=np.zeros_like(y_train[val]),
                              ridge_scale=scale)
    except ValueError:  # K + λI not positive definite in float64 at this small a ridge: not a candidate
      errors.append(math.inf)
      continue
    errors.append(approximation.relative_error(reg.test, y_train[val]))
  best = min(range(len(grid)), key=lambda i: (errors[i], grid[i]))
  return float(grid[best]), errors


def _kernel_fields(k_train, k_test_train, k_test, y_train, y_test, ridge_scale: float, *, grid=(), split=None,
                   prefix: str = "") -> dict:
  """kernel_error, kernel_train_error, alignment, ridge at ``ridge_scale``; with a ``grid`` and a
  ``split`` (fit rows, validation rows) also kernel_error_validated and ridge_scale_validated (the scale
  ``choose_ridge`` picks) and validation_errors; every name prefixed by ``prefix``."""
  if not np.abs(k_train).max(initial=0) > 0:  # e.g. every ReLU of a tiny network inactive at init
    return {prefix + "kernel_error": None, prefix + "kernel_train_error": None, prefix + "alignment": None,
            prefix + "ridge": 0.0,
            "note": "zero kernel: no kernel regression or alignment (every unit inactive on every input?)"}
  zeros = np.zeros_like

  def fit(scale):
    return kernel_regression(k_train, k_test_train, y_train, fx_train_0=zeros(y_train), fx_test_0=zeros(y_test),
                             ridge_scale=scale)
  reg = fit(ridge_scale)
  out = dict(kernel_error=approximation.relative_error(reg.test, y_test),
             kernel_train_error=approximation.relative_error(reg.train, y_train),
             alignment=approximation.kernel_target_alignment(k_test, y_test), ridge=reg.ridge)
  if grid and split is not None:
    chosen, errors = choose_ridge(k_train, y_train, tuple(grid), *split)
    # The chosen scale refitted on every training row; if K + λI is not positive definite there in float64,
    # the next best scale on the validation rows (recorded).
    for scale in sorted(grid, key=lambda g: (errors[list(grid).index(g)], g)):
      try:
        test_error = approximation.relative_error(fit(scale).test, y_test)
      except ValueError:
        continue
      out.update(kernel_error_validated=test_error, ridge_scale_validated=float(scale), validation_errors=errors,
                 ridge_scale_validation_best=chosen)
      break
  return {prefix + k: v for k, v in out.items()}


def raw_features(model_name: str, x_train, x_test):
  """The features before the unit-norm step, float64: 2L-ReLU the pixel rows, MLP-Attn x X_trᵀ X_tr; both
  divided by the mean norm of their training rows (one constant: K∞ and K₀ of a bias-free ReLU network are
  homogeneous, so kernel ridge with a ridge relative to tr(K)/n and the alignment do not see it)."""
  a, b = np.asarray(x_train, np.float64), np.asarray(x_test, np.float64)
  if model_name == "mlp_attn":
    gram = a.T @ a
    a, b = a @ gram, b @ gram
  scale = float(np.mean(np.linalg.norm(a, axis=1)))
  return a / scale, b / scale


def run(config: DualImplicationsConfig, workdir, *, overwrite_config: bool = False) -> list[dict]:
  """Runs (or resumes) every (data set, target, draw, model, kind, seed) point; returns all records."""
  config.validate()
  wd = Workdir(workdir, KEY_FIELDS, config, overwrite_config=overwrite_config)
  done = wd.done()
  points = []
  for dataset in config.datasets:
    for target in config.targets:
      for draw in (config.draws[:1] if target == "labels" else config.draws):
        for model in config.models:
          points.append((dataset, target, draw, model, "kinf", None))
          points += [(dataset, target, draw, model, "finite", s) for s in config.seeds]
  todo = [p for p in distributed.shard(points) if p not in done]
  # (data set, draw) -> (train rows, test rows, one-hot labels, {(model, features): rows}, draw fields)
  cache: dict = {}
  kernels: dict = {}  # (data set, draw, model, kind, seed, outputs, features) -> (K_train, K_test_train, K_test)
  for point in tqdm(todo, desc="dual implications", unit="point"):
    dataset, target, draw, model_name, kind, seed = point
    start = time.perf_counter()
    if (dataset, draw) not in cache:  # this target draw's own training and test subset
      train, test, draw_fields = seed_subsets.seed_splits(config.data, dataset, draw)
      n_classes = int(max(train.y.max(), test.y.max())) + 1
      onehot = lambda y: np.eye(n_classes)[np.asarray(y)]  # noqa: E731
      cache[dataset, draw] = (np.asarray(train.x, np.float32), np.asarray(test.x, np.float32),
                              (onehot(train.y), onehot(test.y)), {}, draw_fields)
    x_tr, x_te, labels, feats, draw_fields = cache[dataset, draw]
    for features in config.features:
      if (model_name, features) not in feats:
        f = (ntk.model_features(model_name, x_tr, x_te) if features == "unit"
             else raw_features(model_name, x_tr, x_te))
        feats[model_name, features] = (np.asarray(f[0]), np.asarray(f[1]))
    f_tr, f_te = feats[model_name, "unit"]
    dataset_index = config.datasets.index(dataset)
    y_tr, y_te, extra = _targets(config, x_tr, x_te, labels, target, draw, dataset_index)
    split = validation_split(len(x_tr), config.validation_fraction,
                             jax.random.fold_in(jax.random.PRNGKey(1000 * dataset_index + draw), 99))
    record = dict(dataset=dataset, target=target, draw=draw, model=model_name, kind=kind, seed=seed,
                  n_train=len(x_tr), n_test=len(x_te), k=config.k, outputs=int(y_tr.shape[1]), **extra,
                  **draw_fields, n_validation=len(split[1]), ridge_grid=list(config.ridge_grid),
                  ridge_scale=config.ridge_scale)
    if kind == "finite":
      model = ntk.two_layer_relu(config.width, f_tr.shape[1], out_dim=y_tr.shape[1], readout="fixed")
      init_key, train_key = jax.random.split(jax.random.PRNGKey(seed))
      _, params = model.init_fn(init_key, f_tr.shape)
    # The kernels depend on (data set, draw, model, kind, seed, outputs, features), not on the target kind.
    for features in config.features:
      kernel_key = (dataset, draw, model_name, kind, seed, y_tr.shape[1], features)
      if kernel_key not in kernels:
        a_tr, a_te = feats[model_name, features]
        if kind == "kinf":
          inf = infinite_width_kernels(a_tr, a_te, readout="fixed")
          kernels[kernel_key] = (inf.train, inf.test_train,
                                 infinite_width_kernels(a_te, a_te[:1], readout="fixed").train)
        else:
          kernels[kernel_key] = tuple(np.asarray(finite_width_kernel(model, params, a, b), np.float64)
                                      for a, b in ((a_tr, None), (a_te, a_tr), (a_te, None)))
      record.update(_kernel_fields(*kernels[kernel_key], y_tr, y_te, config.ridge_scale, grid=config.ridge_grid,
                                   split=split, prefix="" if features == "unit" else f"{features}_"))
    if kind == "finite":
      record["width"] = config.width
      if seed in config.network_seeds:
        result = train_to_criterion(model.apply_fn, params, f_tr, np.asarray(y_tr, np.float32), key=train_key,
                                    learning_rates=config.train.learning_rates, loss="mse",
                                    **config.train.criterion_kwargs())
        pred = np.asarray(model.apply_fn(result.params, f_te), np.float64)
        record.update(network_error=approximation.relative_error(pred, y_te), network_train_loss=float(
            result.train_loss), network_converged=bool(result.reached), network_iterations=int(result.epochs))
    record["wall_time_s"] = time.perf_counter() - start
    wd.append(record)
  return wd.records()
