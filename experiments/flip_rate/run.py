"""Influence malleability: how often NTK influence flips sign when the training data is attacked.

Usage:
  python -m experiments.flip_rate --workdir runs/flip_rate [--full | --standard [mnist|cifar10]] [field=value ...]

For each task (10-class MNIST / Fashion-MNIST / CIFAR-10, binary MNIST 3-vs-8 and CIFAR cars-vs-planes),
model (2L-ReLU, MLP-Attn), width and seed:
  1. train the 2-layer ReLU network (fixed ±1 readout) on its features to a stated criterion (CE for 10
     classes, MSE for binary; ``ntk.criterion``): full-batch L-BFGS to a train-loss target or an iteration
     cap (``train.optimizer = lbfgs``, the quick and full configs: minibatch Adam leaves MLP-Attn far from
     the target, docs/theory.md#why-l-bfgs), or Adam with the rate chosen from a grid on a validation split
     of the training split (``train.optimizer = adam``); records carry the optimizer, the chosen rate, the
     final train loss and accuracy and ``converged``;
  2. NTK leave-one-out influence of every training image on the test loss, with the empirical NTK at the
     trained parameters (``influence.ntk_loo_influence``; I_j > 0 = helpful; λ = 1e-3·tr(K)/n);
  3. attack every training row against its own loss with the other rows held fixed (FGSM, PGD-L∞, MIM, and a
     random-sign control) at each ε, re-featurise all rows together (the attention transform sees the whole
     perturbed set; test rows are featurised against it), recompute kernel and influence with the
     parameters fixed, and record the flip rate of the top-10 % influential samples, Spearman ρ, the
     influence vector's norm and relative shift ‖I_after − I_before‖/‖I_before‖ (``influence.relative_shift``,
     their continuous companion), and the measured mean ‖δ‖∞/ε. ε = 0 is run as a control (it must give exactly 0 flips). ε is the L∞ budget
     on the [0, 1] pixel scale; records also carry it on the data set's standardised scale, ε/σ_c, with the
     per-channel mean and std of the training split (``experiments.data.scales``).
``data.preprocessing = centered`` subtracts the training split's per-channel mean inside the feature map (a
different MLP-Attn: X Xᵀ X of centred rows); the attacks still perturb pixels inside the [0, 1] box.
Optionally (``adversarial_training=true``) the network is first trained adversarially (PGD on its rows).

Quick config: embedded MNIST, n = 512 train / 100 test, width 256 (L-BFGS takes MLP-Attn about 16 s per
seed to the target there, 80 s at width 1024, on 2 CPU cores), 10 seeds, ε ∈ {0, 0.05, 0.1, 0.2, 0.3}.
``--full``: every task, widths 256/1024/4096, 20 seeds, n = 1000, ε from 0 to 0.3 in steps of 0.025, full
data files. ``--standard [mnist|cifar10]`` (``standard_config``): the claims job's ε grid at n = 512, m = 256
on the full files, 30 seeds on MNIST, 10 on CIFAR-10 (the paper's data sets).
Data per seed (``data_seed_follows_seed``, ``experiments.core.seed_subsets``): from the full files seed s trains on
block s of one class-balanced partition of the training split (seeds share no image); from the embedded
subsets each seed draws its own subset of the 2,000-image pool (two seeds share n/2,000 of their images in
expectation, recorded as expected_seed_overlap).
Writes config.json, results.jsonl, flip_rate_vs_eps.png, flip_rate_vs_width.png and summary.md.
Source: arXiv 2603.13085 §5; docs/theory.md#flip-rate (paper's numbers in ``PAPER_FLIP_RATES``).
"""
from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

import ntk
from influence import flip_rate, malleability, relative_shift
from ntk.training import adversarial_train_adam
from experiments.core import config as config_lib
from experiments.core import distributed
from experiments.trainers import network as network_training
from experiments.core import seed_subsets
from experiments.data import scales
from experiments.core.workdir import Workdir
from experiments.flip_rate.config import FlipRateConfig

KEY_FIELDS = ("task", "model", "width", "seed", "adversarial_training", "attack", "eps")
SEED_FLOOR = "seed_floor"  # the attack field of a seed-floor record (eps 0)
SEED_FLOOR_OFFSET = 100_000  # the second network of the seed floor starts from seed + this


def pixel_row_features(model_name, mean_row_D, x_clean_NxD, gram_DxD, x_rows_BxD):
  """``malleability.row_features`` of pixel rows whose feature map centres them first: rows − mean_row,
  against the centred clean rows x_clean [n, d] and their Gram matrix [d, d] (``data.preprocessing =
  centered``). Bind all but the rows with ``jax.tree_util.Partial``."""
  return malleability.row_features(model_name, x_clean_NxD, gram_DxD, x_rows_BxD - mean_row_D[None, :])


def pixel_row_logits(apply_fn, model_name, params, mean_row_D, x_clean_NxD, gram_DxD, x_rows_BxD):
  """Logits [b, C] of ``pixel_row_features`` (the per-row ``logits_fn`` the attacks take, on pixels)."""
  return apply_fn(params, pixel_row_features(model_name, mean_row_D, x_clean_NxD, gram_DxD, x_rows_BxD))


def row_maps(model_name, x_NxD, mean_row_D):
  """(features_fn, logits_fn-maker) on pixel rows [b, d]: the raw maps of ``influence.malleability``, or
  the centring ones when ``mean_row_D`` is not None. The clean Gram matrix is that of the (centred) rows."""
  x = jnp.asarray(x_NxD)
  if mean_row_D is None:
    gram = x.T @ x
    return (jax.tree_util.Partial(malleability.row_features, model_name, x, gram),
            lambda apply_fn, params: jax.tree_util.Partial(malleability.row_logits, apply_fn, model_name,
                                                           params, x, gram))
  mean = jnp.asarray(mean_row_D)
  xc = x - mean[None, :]
  gram = xc.T @ xc
  return (jax.tree_util.Partial(pixel_row_features, model_name, mean, xc, gram),
          lambda apply_fn, params: jax.tree_util.Partial(pixel_row_logits, apply_fn, model_name, params, mean,
                                                         xc, gram))


def adversarial_rounds(config, model, model_name, x, y_onehot, n_classes, key, clean, *, mean_row=None):
  """PGD adversarial training (``ntk.training.adversarial_train_adam``: at_epochs_per_round clean epochs,
  then at_rounds attack-and-train rounds) from the parameters of the clean criterion training ``clean``
  (a ``CriterionResult``), at its chosen rate; returns params. x: pixel rows [n, d]; mean_row [d]: centre
  inside the feature map (None: raw)."""
  _, train_key, at_key = network_training.split_key(key)
  feats, _ = ntk.model_features(model_name, x if mean_row is None else x - mean_row)
  features_fn, _ = row_maps(model_name, x, mean_row)
  return adversarial_train_adam(
      model.apply_fn, clean.params, jnp.asarray(x), y_onehot, key=train_key, attack_key=at_key,
      features_fn=features_fn, clean_features_NxF=feats, eps=config.at_eps, rounds=config.at_rounds,
      epochs_per_round=config.at_epochs_per_round, pgd_steps=config.pgd_steps, pgd_alpha=config.pgd_alpha,
      loss=network_training.loss_for(n_classes), learning_rate=at_learning_rate(config, clean),
      l2=config.train.l2, batch_size=config.train.batch_size)


def at_learning_rate(config, clean) -> float:
  """The Adam rate of the adversarial rounds: the clean network's chosen rate, or the grid's first rate
  when the clean network was trained by L-BFGS (which has none)."""
  return config.train.learning_rates[0] if clean.learning_rate is None else clean.learning_rate


def train_model(config, model, model_name, x, y_onehot, n_classes, key, *, mean_row=None):
  """Trains the 2-layer network on the features of the pixel rows x [n, d] as ``run`` does for one seed
  (the config's own grid searched for this key, whatever ``train.lr_selection``); returns params. Trained to
  ``config.train``'s criterion, then with ``adversarial_training`` the PGD rounds (``adversarial_rounds``)."""
  result = network_training.train_network(config.train, model, model_name, x if mean_row is None else x - mean_row,
                                          y_onehot, n_classes, key)
  if not config.adversarial_training:
    return result.params
  return adversarial_rounds(config, model, model_name, x, y_onehot, n_classes, key, result, mean_row=mean_row)


def _kernel_influence(model, kernel, params, y_tr, y_te, ridge_scale):
  """(f_train, f_test) -> ``LOOInfluence`` under influence kernel ``kernel`` (``INFLUENCE_KERNELS``: the
  empirical NTK at ``params``, trained or initial, or K∞)."""
  return lambda a, b: malleability.feature_influence(
      model, params, a, b, y_tr, y_te, kernel="infinite" if kernel == "infinite" else "empirical",
      ridge_scale=ridge_scale)


def _flip_fields(before, after, top_fraction, kernel: str, prefix: str = "") -> dict:
  """The flip-rate fields of one influence kernel: ``<prefix>flip_rate[_<kernel>]``, n_flipped, n_top, spearman
  (no suffix for the run's own ``influence_kernel``)."""
  fr = flip_rate(before, after, top_fraction)
  suffix = f"_{kernel}" if kernel else ""
  return {f"{prefix}flip_rate{suffix}": fr.rate, f"{prefix}n_flipped{suffix}": fr.n_flipped,
          f"{prefix}n_top{suffix}": fr.n_top, f"{prefix}spearman{suffix}": fr.spearman}


def sign_randomized(x_NxD, x_adv_NxD, key) -> np.ndarray:
  """The sign-randomised attack: the attack's own perturbation δ = x_adv − x with each pixel's sign drawn
  at random (±1 with probability ½, from ``key``), added to x and clipped to [0, 1]: the same magnitudes at
  the same pixels, with the attack's direction removed (the control of the flip-rate rows; its mean ‖δ‖₂ is
  recorded beside the attack's, clipping can shorten it). Shapes [n, d], [0, 1] pixel scale."""
  delta = np.asarray(x_adv_NxD, np.float32) - np.asarray(x_NxD, np.float32)
  signs = np.where(np.asarray(jax.random.bernoulli(key, 0.5, delta.shape)), 1.0, -1.0).astype(np.float32)
  return np.clip(np.asarray(x_NxD, np.float32) + signs * delta, 0.0, 1.0)


def _points(config):
  # Seed by seed (both models), so a grid stopped part-way holds whole paired seeds.
  for task in config.tasks:
    for width in config.widths:
      for seed in config.seeds:
        for model_name in config.models:
          yield task, model_name, width, seed


def run(config: FlipRateConfig, workdir, *, overwrite_config: bool = False) -> list[dict]:
  """Runs (or resumes) the flip-rate experiment; returns all records."""
  config.validate()
  wd = Workdir(workdir, KEY_FIELDS, config, overwrite_config=overwrite_config)
  done = wd.done()
  at = config.adversarial_training
  wanted = [(a, e) for a in config.attacks for e in config.eps]
  wanted += [(SEED_FLOOR, 0.0)] if config.seed_floor else []
  groups = [g for g in distributed.shard(list(_points(config)))  # this process's share of the trainings
            if any((*g, at, a, e) not in done for a, e in wanted)]
  data = {}
  rates = network_training.RateCache(config.train, config.seeds[0])
  bar = tqdm(total=len(groups) * len(wanted), desc="flip rate", unit="point")
  for task, model_name, width, seed in groups:
    draw_key = (task, seed if config.data_seed_follows_seed else None)
    if draw_key not in data:
      if config.data_seed_follows_seed:  # this seed's own subset (disjoint blocks on the full files)
        data[draw_key] = seed_subsets.seed_splits(config.data, task, seed)
      else:  # one subset for every seed (the behaviour before; the golden records' setting)
        data[draw_key] = (*config_lib.load_splits(config.data, task, flatten=True),
                          dict(data_draw="shared", data_seed=config.data.seed, data_block=None))
    train, test, draw = data[draw_key]
    stats = network_training.channel_stats(train)
    mean_row = None if config.data.preprocessing == "raw" else network_training.mean_row(stats, train.x.shape[1])
    n_classes = len(train.info.class_ids)
    y_tr = np.eye(n_classes)[train.y]
    y_te = np.eye(n_classes)[test.y]
    start = time.perf_counter()
    model = ntk.two_layer_relu(width, train.x.shape[1], out_dim=n_classes)
    key = jax.random.PRNGKey(seed)
    x_in = train.x if mean_row is None else train.x - mean_row
    result = rates.train_point((task, model_name, width), seed, lambda s, grid: network_training.train_network(
        config.train, model, model_name, x_in, y_tr.astype(np.float32), n_classes,
        jax.random.fold_in(jax.random.PRNGKey(s), 0), learning_rates=grid))
    params = result.params if not at else adversarial_rounds(
        config, model, model_name, train.x, y_tr.astype(np.float32), n_classes, jax.random.fold_in(key, 0),
        result, mean_row=mean_row)
    centre = (lambda v: v) if mean_row is None else (lambda v: v - mean_row)
    f_tr, f_te = ntk.model_features(model_name, centre(train.x), centre(test.x))
    names = (config.influence_kernel, *config.extra_kernels)
    init_params = network_training.init_network(  # the features again: only for an 'init' kernel
        model, model_name, x_in, network_training.split_key(jax.random.fold_in(jax.random.PRNGKey(seed), 0))[0]
    )[1] if "init" in names else None
    kernels = {k: _kernel_influence(model, k, init_params if k == "init" else params, y_tr, y_te,
                                    config.ridge_scale) for k in names}
    influence = kernels[config.influence_kernel]
    before_all = {k: fn(f_tr, f_te) for k, fn in kernels.items()}
    before = before_all[config.influence_kernel]
    train_acc = float(np.mean(np.argmax(np.asarray(model.apply_fn(params, f_tr)), 1) == train.y))
    test_acc = float(np.mean(np.argmax(np.asarray(model.apply_fn(params, f_te)), 1) == test.y))
    setup_s = time.perf_counter() - start
    x = jnp.asarray(train.x)
    logits_fn = row_maps(model_name, train.x, mean_row)[1](model.apply_fn, params)
    criterion = network_training.criterion_fields(result, config.train)
    del criterion["train_accuracy"]  # measured below on the final (possibly adversarially trained) params
    units = dict(channel_mean=stats.as_record()["mean"], channel_std=stats.as_record()["std"],
                 preprocessing=config.data.preprocessing, influence_kernel=config.influence_kernel,
                 ridge_scale=config.ridge_scale, **draw)
    common = dict(task=task, model=model_name, width=width, seed=seed, adversarial_training=at,
                  train_accuracy=train_acc, test_accuracy=test_acc, n_train=len(train.y), n_test=len(test.y),
                  n_classes=n_classes, setup_time_s=setup_s)
    if config.seed_floor and (task, model_name, width, seed, at, SEED_FLOOR, 0.0) not in done:
      t0 = time.perf_counter()
      other_key = jax.random.fold_in(jax.random.PRNGKey(seed + SEED_FLOOR_OFFSET), 0)
      other = network_training.train_network(config.train, model, model_name, x_in, y_tr.astype(np.float32),
                                             n_classes, other_key, learning_rates=None if result.learning_rate
                                             is None else (result.learning_rate,))
      other_params = other.params if config.influence_kernel != "init" else network_training.init_network(
          model, model_name, x_in, network_training.split_key(other_key)[0])[1]
      second = _kernel_influence(model, config.influence_kernel, other_params, y_tr, y_te,
                                 config.ridge_scale)(f_tr, f_te).scores
      fr = flip_rate(before.scores, second, config.top_fraction)
      wd.append(dict(**criterion, **units, **common, attack=SEED_FLOOR, eps=0.0, flip_rate=fr.rate,
                     influence_norm=float(np.linalg.norm(before.scores)),
                     influence_shift=relative_shift(before.scores, second),
                     n_flipped=fr.n_flipped, n_top=fr.n_top, spearman=fr.spearman, mean_linf_over_eps=0.0,
                     second_seed=seed + SEED_FLOOR_OFFSET, second_converged=bool(other.reached),
                     second_train_loss=float(other.train_loss), ridge=before.ridge,
                     wall_time_s=time.perf_counter() - t0))
      bar.update()
    x_gram = train.x.astype(np.float64).T @ train.x.astype(np.float64)  # XᵀX, once for every attack and ε
    at_zero = None  # ε = 0 leaves the rows as they are under every attack: measured once, by the first attack
    for a_i, attack in enumerate(config.attacks):
      for eps in config.eps:
        if (task, model_name, width, seed, at, attack, eps) in done:
          bar.update()
          continue
        t0 = time.perf_counter()
        attack_key = jax.random.fold_in(jax.random.fold_in(key, 1 + a_i), int(round(eps * 1e6)))
        if eps == 0 and at_zero is not None:
          x_adv, after, after_extra = at_zero
        else:
          x_adv = np.asarray(malleability.perturb_rows(
              attack, logits_fn, x, jnp.asarray(train.y), eps=eps, key=attack_key, pgd_steps=config.pgd_steps,
              pgd_alpha=config.pgd_alpha, mim_steps=config.mim_steps))
          feats_adv = ntk.model_features(model_name, centre(x_adv), centre(test.x))
          after = influence(*feats_adv)
          after_extra = {k: kernels[k](*feats_adv).scores for k in config.extra_kernels}
          if eps == 0:
            at_zero = x_adv, after, after_extra
        linf = np.abs(x_adv - train.x).max(axis=1)
        fr = flip_rate(before.scores, after.scores, config.top_fraction)
        extra = {}
        for k in config.extra_kernels:
          extra.update(_flip_fields(before_all[k].scores, after_extra[k], config.top_fraction, k))
        if config.sign_randomized_control and eps and attack not in malleability.CONTROLS:
          x_ctrl = sign_randomized(train.x, x_adv, jax.random.fold_in(attack_key, 7))
          feats_ctrl = ntk.model_features(model_name, centre(x_ctrl), centre(test.x))
          extra.update(delta_l2=float(np.mean(np.linalg.norm(x_adv - train.x, axis=1))),
                       control_delta_l2=float(np.mean(np.linalg.norm(x_ctrl - train.x, axis=1))))
          for k in kernels:
            extra.update(_flip_fields(before_all[k].scores, kernels[k](*feats_ctrl).scores, config.top_fraction,
                                      k if k != config.influence_kernel else "", prefix="control_"))
        adv_acc = float(np.mean(np.argmax(np.asarray(logits_fn(jnp.asarray(x_adv))), 1) == train.y))
        wd.append(dict(**criterion, **units, **common, attack=attack, eps=eps,
                       eps_standardized=[float(v) for v in scales.eps_to_standardized(eps, stats.std)],
                       flip_rate=fr.rate, n_flipped=fr.n_flipped, n_top=fr.n_top,
                       influence_norm=float(np.linalg.norm(before.scores)),
                       influence_shift=relative_shift(before.scores, after.scores),
                       spearman=fr.spearman, mean_linf_over_eps=float(np.mean(linf) / eps) if eps else 0.0,
                       attacked_row_accuracy=adv_acc, ridge=before.ridge,
                       gram_shift=malleability.gram_shift(train.x, x_adv, base_DxD=x_gram) if eps else 0.0,
                       **extra, wall_time_s=time.perf_counter() - t0))
        bar.update()
  bar.close()
  return wd.records()
