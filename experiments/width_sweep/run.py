"""Width sweep: finite- vs infinite-width NTK of 2L-ReLU and MLP-Attn on real images.

Usage:
  python -m experiments.width_sweep --workdir runs/width_sweep [--full] [field=value ...]

Quick config (default): MNIST, Fashion-MNIST and CIFAR-10 from the embedded subsets, n = 256 train /
100 test, widths 16 … 4096, 3 seeds for the kernels at initialisation; gradient-descent training and
function distance on MNIST only, widths ≤ 1024, 3 seeds; the function distance at convergence (kind =
'converged': full-batch L-BFGS to a ½·MSE target, at most 300 iterations, against the kernel regression
of the empirical NTK at initialisation, ``ConvergedConfig``) on MNIST at widths 16, 64, 256, 1024, 2 seeds.
``--full``: 1,000 train / 500 test images from the full files (``data.source=dir``, ``ATTN_DATA_DIR``),
training and converged points on all data sets up to width 4096 — sized for an accelerator or a long CPU run.

Data: each seed draws its own training and test subsets (``data_seed_follows_seed``, default true: from the
embedded pool independent draws, from the full files disjoint blocks of one partition; false: one subset
for every seed, the behaviour before).

Writes config.json, results.jsonl (one record per (dataset, model, readout, width, seed, kind)), orbax
arrays of the test predictions, and plots + summary.md (``experiments.width_sweep.report``).
A killed run restarted with the same workdir skips the recorded points.

Source: arXiv 2603.13085 (docs/theory.md#kernel-distance).
"""
from __future__ import annotations

import math
import time
from typing import Optional
import jax
import numpy as np
from tqdm.auto import tqdm

import ntk
from ntk.sweep import (default_learning_rate, infinite_width_kernels, kernel_distance, matched_time,
                       train_and_compare)
from ntk.criterion import train_to_criterion
from ntk.distance import function_distance, kernel_movement_measures, kernel_regression
from ntk.linearized import gated_inputs, linearized_two_layer_relu
from ntk.loss_floor import fixed_readout_loss_floor
from experiments.core import config as config_lib
from experiments.trainers.network import criterion_fields, perturb_initial
from experiments.core import distributed
from experiments.core import seed_subsets
from experiments.core.workdir import Workdir
from experiments.width_sweep.config import WidthSweepConfig

KEY_FIELDS = ("dataset", "model", "readout", "width", "seed", "kind")
COMMON_FACTOR = 1.5  # the common target: 1.5 × MLP-Attn's largest converged ½·MSE (widths ≥ COMMON_MIN_WIDTH)
COMMON_MIN_WIDTH = 64


def data_draw(config: WidthSweepConfig) -> str:
  """How the seeds' data subsets relate: 'shared' (one subset, data.seed, for every seed), 'independent'
  (each seed its own draw from the embedded pool; they overlap by chance) or 'disjoint' (each seed its own
  block of one partition of the full files); ``experiments.core.seed_subsets.draw_kind``."""
  return seed_subsets.draw_kind(config.data) if config.data_seed_follows_seed else "shared"


def seed_data(config: WidthSweepConfig, dataset: str, seed: int) -> tuple:
  """(train, test, fields): the flattened ``Split``s seed ``seed`` uses (``data_draw``;
  ``experiments.core.seed_subsets.seed_splits`` unless shared) and the record fields that say which: data_draw,
  data_seed (the seed of the draw: data.seed for one shared subset or a block of the partition, else
  ``seed``), data_block (``seed`` for a disjoint block, else None), train_pool (images drawn from, for an
  independent draw), expected_seed_overlap and expected_test_overlap (the expected fraction of a seed's
  training / test images that another seed's subset also holds: 1 when shared, 0 for disjoint training
  blocks; ``seed_subsets.expected_overlap``: the test draws of different seeds are independent)."""
  if data_draw(config) == "shared":
    train, test = config_lib.load_splits(config.data, dataset, flatten=True)
    return train, test, dict(data_draw="shared", data_seed=config.data.seed, data_block=None, train_pool=None,
                             expected_seed_overlap=1.0, expected_test_overlap=1.0)
  from experiments.data import load_dataset
  train, test, fields = seed_subsets.seed_splits(config.data, dataset, seed)
  pool = load_dataset(dataset, "test", source=config.data.source, data_dir=config.data.dir, holdout=config.data.holdout)
  return train, test, dict(fields, expected_test_overlap=seed_subsets.expected_overlap(pool.y, len(test.y)))


def _points(config: WidthSweepConfig):
  for dataset in config.datasets:
    # Trained points first and seed by seed (both models, every width), so a grid stopped part-way holds
    # whole seeds of what takes longest; the kernels at initialisation after them.
    if config.converged.enabled and dataset in config.converged.datasets:
      for seed in config.converged.seeds:
        for width in config.converged.widths:
          for model_name in config.models:
            yield dataset, model_name, width, seed, "converged"
    for model_name in config.models:
      for width in config.widths:
        for seed in config.seeds:
          yield dataset, model_name, width, seed, "init"
        if config.train.enabled and dataset in config.train.datasets and width <= config.train.max_width:
          for seed in config.train.seeds:
            yield dataset, model_name, width, seed, "train"
            if config.train.matched_fraction is not None:
              yield dataset, model_name, width, seed, "matched"


def _converged_network(config, width, d, n_classes, seed, f_train, y_onehot, learning_rates, target=None):
  model = ntk.two_layer_relu(width, d, out_dim=n_classes, readout=config.readout)
  init_key = jax.random.fold_in(jax.random.PRNGKey(seed), width)
  _, params = model.init_fn(init_key, f_train.shape)
  t = config.converged.train
  params = perturb_initial(params, t.init_perturbation, init_key)
  kwargs = t.criterion_kwargs()
  if target is not None:
    kwargs["target_loss"] = float(target)
  result = train_to_criterion(model.apply_fn, params, f_train, y_onehot, key=jax.random.PRNGKey(seed),
                              learning_rates=learning_rates, loss=config.converged.loss, **kwargs)
  return model, params, result


def _linearized_fields(config, model, width, params, f_train, f_test, y_onehot, y_test, learning_rate, seed,
                       f_net_test, f0_test) -> dict:
  """The network's linearisation at initialisation (``ntk.linearized``) trained by the network's recipe
  (same initial parameters, key, rate, loss, L2, batches, budget or target), and the network's distance from
  it on the test inputs (function_distance_linearized*, ``ntk.distance.function_distance`` with f₀)."""
  w0 = np.asarray(ntk.first_layer_weights(model, params))  # readout 'fixed': WidthSweepConfig.validate
  apply_lin = linearized_two_layer_relu(width, f_train.shape[1])
  t = config.converged.train
  kwargs = t.criterion_kwargs()
  rates = t.learning_rates if learning_rate is None else (learning_rate,)
  lin = train_to_criterion(apply_lin, params, gated_inputs(f_train, w0), y_onehot, key=jax.random.PRNGKey(seed),
                           learning_rates=rates, loss=config.converged.loss, **kwargs)
  f_lin = np.asarray(apply_lin(lin.params, gated_inputs(f_test, w0)))
  dist = function_distance(f_net_test, f_lin, f0_test)
  return dict(function_distance_linearized=dist.distance, function_distance_linearized_rms=dist.rms,
              function_distance_linearized_relative=dist.relative, linearized_train_loss=float(lin.train_loss),
              linearized_train_accuracy=float(lin.train_accuracy),
              linearized_test_accuracy=float(np.mean(np.argmax(f_lin, 1) == y_test)))


def common_target(records, dataset: str) -> Optional[float]:
  """The common ½·MSE target of ``dataset``: COMMON_FACTOR × the largest final train loss of MLP-Attn's
  kind = 'converged' points at widths ≥ COMMON_MIN_WIDTH (None before any such point exists). 2L-ReLU
  reaches MLP-Attn's losses easily; MLP-Attn reached each of them, so 1.5× its worst is within reach of
  every seed and width (the rule is fixed before the common points are run)."""
  losses = [float(r["train_loss"]) for r in records if r.get("kind") == "converged" and r["dataset"] == dataset
            and r["model"] == "mlp_attn" and r["width"] >= COMMON_MIN_WIDTH]
  return COMMON_FACTOR * max(losses) if losses else None


def _ntk_float64(model, params, x1_NxD, x2_KxD) -> np.ndarray:
  """The empirical NTK at ``params`` in float64, [n, k] (the closed form of ``ntk.two_layer_relu_ntk``):
  K₀(X, X) of MLP-Attn features is too ill-conditioned for a float32 kernel to stay positive definite
  under the ridge 1e-6·tr(K₀)/n."""
  w = np.asarray(ntk.first_layer_weights(model, params), np.float64)
  a = np.asarray(ntk.readout_weights(model, params), np.float64)
  x1, x2 = np.asarray(x1_NxD, np.float64), np.asarray(x2_KxD, np.float64)
  pre1, pre2 = x1 @ w, x2 @ w
  d = np.mean(a ** 2, axis=1)
  k = (x1 @ x2.T) * (((pre1 > 0) * d[None, :]) @ (pre2 > 0).T) / w.shape[1]
  if model.readout == "trained":
    k = k + np.maximum(pre1, 0) @ np.maximum(pre2, 0).T / w.shape[1]
  return k


def converged_distance(config, model, f_train, f_test, y_train, y_test, n_classes, seed, rates, group,
                       target=None, inf=None, search=None) -> dict:
  """The fields of a kind = 'converged' record: the network (initialised as the other points of this width
  and seed) trained to ``config.converged.train``'s criterion on ½·MSE (or to ``target``, the common
  target), against the kernel regression of its empirical NTK at initialisation with its own f₀
  (``ConvergedConfig``; function_distance*), and against the same regression with the infinite-width NTK
  K∞, f₀ + K∞(x, X)(K∞ + λ∞I)⁻¹(Y − f₀(X)), λ∞ = ridge_scale·tr(K∞)/n (function_distance_kinf*: the
  paper's reference); with the kernel movement of K_T from K₀ on the training inputs by the four measures
  of ``ntk.distance.kernel_movement_measures`` (kernel_movement = the raw ‖K_T − K₀‖_F/‖K₀‖_F).

  ``inf``: the ``InfiniteWidthKernels`` of these features (None: computed here). ``search``: (f_train,
  y_train) of the data the per-(data set, model) learning-rate search runs on (the first converged seed's;
  None: this point's)."""
  t = config.converged.train
  y_onehot = np.eye(n_classes, dtype=np.float32)[y_train]
  d, width = f_train.shape[1], model.width
  grid, selection = t.learning_rates, t.selection()
  if selection == "per_model_dataset":
    if group not in rates:  # searched at the largest width and the first seed, whichever process asks
      f_search, y_search = (f_train, y_train) if search is None else search
      rates[group] = (_converged_network(config, max(config.converged.widths), d, n_classes,
                                         config.converged.seeds[0], f_search,
                                         np.eye(n_classes, dtype=np.float32)[y_search], grid)[2].learning_rate,)
    grid = rates[group]
  model, params, result = _converged_network(config, width, d, n_classes, seed, f_train, y_onehot, grid,
                                             target)
  f0_train, f0_test = (np.asarray(model.apply_fn(params, f)) for f in (f_train, f_test))
  k0, k0_test = (_ntk_float64(model, params, f, f_train) for f in (f_train, f_test))
  k_trained = _ntk_float64(model, result.params, f_train, f_train)
  pred = kernel_regression(k0, k0_test, y_onehot, fx_train_0=f0_train, fx_test_0=f0_test,
                           ridge_scale=config.converged.ridge_scale)
  f_net = np.asarray(model.apply_fn(result.params, f_test))
  dist = function_distance(f_net, pred.test, f0_test)
  if inf is None:
    inf = infinite_width_kernels(f_train, f_test, readout=config.readout)
  pred_inf = kernel_regression(inf.train, inf.test_train, y_onehot, fx_train_0=f0_train, fx_test_0=f0_test,
                               ridge_scale=config.converged.ridge_scale)
  dist_inf = function_distance(f_net, pred_inf.test, f0_test)
  movement = kernel_movement_measures(k_trained, k0)
  out = criterion_fields(result, t)
  # The fixed ±1 readout bounds the ½·MSE from below whatever W is: a target under this floor is unreachable.
  out["loss_floor"] = (fixed_readout_loss_floor(np.asarray(ntk.readout_weights(model, params)), y_train)
                       if model.readout == "fixed" and config.converged.loss == "mse" else 0.0)
  if config.converged.linearized:  # readout 'fixed': checked by WidthSweepConfig.validate
    out.update(_linearized_fields(config, model, width, params, f_train, f_test, y_onehot, y_test, result.learning_rate,
                                  seed, f_net, f0_test))
  out.update(function_distance=dist.distance, function_distance_rms=dist.rms,
             function_distance_relative=dist.relative, ridge=pred.ridge, ridge_scale=config.converged.ridge_scale,
             loss=config.converged.loss, test_accuracy=float(np.mean(np.argmax(f_net, 1) == y_test)),
             kernel_test_accuracy=float(np.mean(np.argmax(pred.test, 1) == y_test)),
             kernel_movement=float(np.linalg.norm(k_trained - k0) / np.linalg.norm(k0)),
             kernel_movement_centred=movement.centred, kernel_movement_one_minus_cka=movement.one_minus_cka,
             kernel_movement_top_k=movement.top_k_subspace, kernel_movement_k=movement.top_k,
             function_distance_kinf=dist_inf.distance, function_distance_kinf_rms=dist_inf.rms,
             function_distance_kinf_relative=dist_inf.relative, kinf_ridge=pred_inf.ridge,
             kinf_test_accuracy=float(np.mean(np.argmax(pred_inf.test, 1) == y_test)))
  return out


def _seed_inputs(config, cache, dataset, model_name, seed) -> tuple:
  """(train, test, data record fields, f_train, f_test, K∞) of ``seed`` (``seed_data``), cached per data
  subset: one entry per seed, or one for all seeds when they share the subset."""
  subset = None if data_draw(config) == "shared" else seed
  if (dataset, subset) not in cache:
    cache[dataset, subset] = seed_data(config, dataset, seed)
  train, test, fields = cache[dataset, subset]
  if (dataset, model_name, subset) not in cache:
    f_train, f_test = (np.asarray(f) for f in ntk.model_features(model_name, train.x, test.x))
    cache[dataset, model_name, subset] = (f_train, f_test,
                                          infinite_width_kernels(f_train, f_test, readout=config.readout))
  return (train, test, fields) + cache[dataset, model_name, subset]


def _search_data(config, cache, dataset, model_name):
  """(f_train, y_train) of the first converged seed: the data of the per-(data set, model) rate search."""
  if config.converged.train.selection() != "per_model_dataset":
    return None
  train, _, _, f_train, _, _ = _seed_inputs(config, cache, dataset, model_name, config.converged.seeds[0])
  return f_train, train.y


def run(config: WidthSweepConfig, workdir, *, overwrite_config: bool = False) -> list[dict]:
  """Runs (or resumes) the sweep; returns all records in the workdir.

  Args:
    config: a validated ``WidthSweepConfig``.
    workdir: output directory.
    overwrite_config: resume although config.json differs.
  """
  config.validate()
  wd = Workdir(workdir, KEY_FIELDS, config, overwrite_config=overwrite_config)
  done = wd.done()
  # This process's share (all points in a single-process run): kernel and training points dealt separately.
  todo = [p for p in distributed.shard(list(_points(config)), by=lambda p: p[4])
          if (p[0], p[1], config.readout, p[2], p[3], p[4]) not in done]
  cache: dict = {}
  rates: dict = {}
  for dataset, model_name, width, seed, kind in tqdm(todo, desc="width sweep", unit="point"):
    train, test, data_fields, f_train, f_test, inf = _seed_inputs(config, cache, dataset, model_name, seed)
    n_classes = int(train.y.max()) + 1
    start = time.perf_counter()
    model = ntk.two_layer_relu(width, f_train.shape[1], out_dim=n_classes, readout=config.readout)
    init_key = jax.random.fold_in(jax.random.PRNGKey(seed), width)
    _, params = model.init_fn(init_key, f_train.shape)
    record = dict(dataset=dataset, model=model_name, readout=config.readout, width=width, seed=seed,
                  kind=kind, n_train=len(f_train), n_test=len(f_test), kernel_path=config.kernel_path,
                  **data_fields)
    if kind == "init":
      record.update(kernel_distance(model, params, f_train, f_test, inf, path=config.kernel_path)._asdict())
    elif kind == "converged":
      record.update(converged_distance(config, model, f_train, f_test, train.y, test.y, n_classes, seed,
                                       rates, (dataset, model_name), inf=inf,
                                       search=_search_data(config, cache, dataset, model_name)))
    else:
      y_onehot = np.eye(n_classes, dtype=np.float32)[train.y]
      lr = default_learning_rate(inf, n_classes, config.train.lr_scale)
      steps = config.train.steps
      if kind == "matched":
        t_star = matched_time(inf.train, y_onehot, loss_fraction=config.train.matched_fraction)
        needed = math.ceil(t_star / lr) if math.isfinite(t_star) else math.inf
        steps = min(config.train.max_steps, needed)
        # Converged: the steps that reach t* were not capped. Tested on the step count itself, since
        # ceil(t*/lr)·lr can fall an ulp short of t* when t* is within rounding of a multiple of lr.
        record.update(matched_fraction=config.train.matched_fraction, matched_time=t_star,
                      converged=bool(needed <= config.train.max_steps))
      result = train_and_compare(model, params, f_train, f_test, y_onehot, test.y, inf,
                                 learning_rate=lr, steps=steps, path=config.kernel_path)
      record.update(result.metrics._asdict())
      # How far this fixed training time gets: modes of K∞ whose GD factor steps·lr_scale·λᵢ/λ_max exceeds 1.
      lam = np.linalg.eigvalsh(inf.train)
      record.update(kinf_modes_fitted=int(np.sum(config.train.steps * config.train.lr_scale * lam / lam[-1] > 1)),
                    kinf_modes=int(lam.size))
      if config.save_arrays:
        wd.save_arrays(wd.key(record), result.arrays)
    record["wall_time_s"] = time.perf_counter() - start
    wd.append(record)
  if config.converged.enabled and config.converged.common:
    _run_common(config, wd, cache, rates)
  return wd.records()


def _run_common(config, wd, cache, rates) -> None:
  """The kind = 'common' points: both models at every converged width ≥ COMMON_MIN_WIDTH and seed, trained
  to ``common_target`` (computed from the converged records once they are all in)."""
  distributed.barrier("width sweep: converged points done")
  records = wd.records()
  done = wd.done()
  for dataset in config.converged.datasets:
    target = common_target(records, dataset)
    if target is None:
      continue
    points = [(dataset, m, w, s) for m in config.models for w in config.converged.widths
              if w >= COMMON_MIN_WIDTH for s in config.converged.seeds]
    todo = [p for p in distributed.shard(points) if (*p[:2], config.readout, *p[2:], "common") not in done]
    for _, model_name, width, seed in tqdm(todo, desc=f"common target {target:.3g}", unit="point"):
      train, test, data_fields, f_train, f_test, inf = _seed_inputs(config, cache, dataset, model_name, seed)
      n_classes = int(train.y.max()) + 1
      start = time.perf_counter()
      model = ntk.two_layer_relu(width, f_train.shape[1], out_dim=n_classes, readout=config.readout)
      record = dict(dataset=dataset, model=model_name, readout=config.readout, width=width, seed=seed,
                    kind="common", n_train=len(f_train), n_test=len(f_test), kernel_path=config.kernel_path,
                    common_target=target, common_rule=f"{COMMON_FACTOR:g} × MLP-Attn's largest converged ½·MSE "
                                                      f"at widths ≥ {COMMON_MIN_WIDTH}", **data_fields)
      record.update(converged_distance(config, model, f_train, f_test, train.y, test.y, n_classes, seed, rates,
                                       (dataset, model_name), target=target, inf=inf,
                                       search=_search_data(config, cache, dataset, model_name)))
      record["wall_time_s"] = time.perf_counter() - start
      wd.append(record)
