"""Differential attention under attack: DiffViT vs ViT — ASR vs ε, gradient alignment, local Lipschitz,
depth crossover (arXiv 2510.00517; docs/theory.md#depth-crossover).

Usage:
  python -m experiments.diff_attention --workdir /tmp/diffattn_run [--full] [field=value ...]

Quick config (default): a smoke run of every code path, not a test of the paper's claims (its models are far
below the paper's accuracy; ``--standard`` is the grid the claims use, ``standard_config``). It trains matched
ViT / DiffViT pairs (width 64, 4 standard vs 2 differential heads, λ_init 0.8) at depths {1, 2} and DiffViTs
with λ_init 0.5 and 0.95 at depth 1 on the embedded CIFAR-10 subset (1,500 train images, 5 epochs;
``experiments.train_vit.run``; clean accuracy on the 500 test images), then on the first 200 test images:
  * ASR of PGD-L∞ (10 steps of ε/4, random start) and APGD-CE (10 steps) at ε ∈ {1, 2, 4, 8}/255, counted
    on the clean-correct images (AutoAttack convention; the count is recorded), and CW-L2 (5 binary-search
    steps × 100 iterations, 20 images) on an L2 grid for the depth-1 models;
  * local Lipschitz estimates (Yang et al. 2020) of the logits at every ε and of every layer's tokens at
    ε = 1/255, on 50 images;
  * gradient alignment cos θ, ρ, γ per differential head and layer from the full input Jacobians of the two
    maps, Lemma 1 checked, Theorem 3's condition vs the model that is actually more sensitive (larger
    per-sample local Lipschitz estimate at ε = 1/255), on 8 images;
  * the depth crossover of ASR, read by ``experiments.diff_attention.claims`` at the primary ε* (the depth-1
    ViT's ASR = 0.5, interpolated on the grid), at 1/255 and at 4/255.
Measured: 3 min 28 s wall on 2 CPU cores shared with a test run; clean accuracy 0.27–0.34 (chance 0.1).
``--full``: the accelerator grid (full CIFAR-10, width 192, depths {1, 2, 4, 8, 12}, APGD 100 steps,
CW 9 × 1000, 64 alignment images, 1,000 attack images).

Writes config.json, results.jsonl (one record per trained model / attack point / Lipschitz point /
alignment layer), model checkpoints under models/, and plots + summary.md
(``experiments.diff_attention.report``). A killed run restarted with the same workdir resumes.
"""
from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

import attacks
from attention.alignment import head_alignment, layer_alignment_statistics
from attention.local_lipschitz import local_lipschitz
from attention.vit import VisionTransformer
from experiments.trainers import vit as vit_training
from experiments.trainers.vit import NO_LAMBDA, Point
from experiments.core.workdir import Workdir
from experiments.diff_attention.config import DiffAttentionConfig

KEY_FIELDS = ("kind", "model", "depth", "lambda_init", "seed_index", "attack", "eps", "layer")
NA = "-"          # key value of a field that does not apply
LOGITS_LAYER = -1  # "layer" of a logits-level measurement


def _record(kind, point: Point, **fields) -> dict:
  base = dict(kind=kind, model=point.model, depth=point.depth, lambda_init=point.lambda_init,
              seed_index=point.seed_index, attack=NA,
              eps=0.0, layer=LOGITS_LAYER, name=point.name)
  base.update(fields)
  return base


def batched_attack(attack, logits_fn, x, y, batch_size: int, *, per_sample=None, **kwargs):
  """Runs ``attack`` over batches; returns (success [n] bool, zero_grad [n] bool, x_adv [n, ...]).
  ``per_sample``: {argument: array [n, ...]} sliced with the batch (e.g. a patch position per image); the other
  keyword arguments go to every call as they are."""
  per_sample = per_sample or {}
  outs = [attack(logits_fn, jnp.asarray(x[i:i + batch_size]), jnp.asarray(y[i:i + batch_size]),
                 **{k: v[i:i + batch_size] for k, v in per_sample.items()}, **kwargs)
          for i in range(0, len(x), batch_size)]
  return (np.concatenate([np.asarray(o.success) for o in outs]),
          np.concatenate([np.asarray(o.zero_grad) for o in outs]),
          np.concatenate([np.asarray(o.x_adv) for o in outs]))


def _attack_records(config, tm, x, y, clean_pred, keys, is_done):
  """Yields PGD and APGD records at every ε not done yet, on the clean-correct images of (x, y)."""
  correct = clean_pred == y
  xc, yc = x[correct], y[correct]
  for attack_name in ("pgd", "apgd"):
    for i, e255 in enumerate(config.eps_255):
      eps = e255 / 255.0
      if is_done(tm.point, "attack", attack=attack_name, eps=eps):
        continue
      key = jax.random.fold_in(keys[attack_name], i)
      if len(yc) == 0:
        yield _record("attack", tm.point, attack=attack_name, eps=eps, eps_255=e255, asr=float("nan"),
                      n_success=0, n_counted=0, n_zero_grad=0, n_attacked_pool=len(y), clean_accuracy=0.0,
                      convention="clean_correct", wall_time_s=0.0)
        continue
      start = time.perf_counter()
      if attack_name == "pgd":
        success, zero, _ = batched_attack(attacks.pgd_linf, tm.logits_fn, xc, yc, config.attack_batch_size,
                                          eps=eps, key=key, alpha=config.pgd_step_ratio * eps,
                                          steps=config.pgd_steps)
      else:
        success, zero, _ = batched_attack(attacks.apgd, tm.logits_fn, xc, yc, config.attack_batch_size,
                                          eps=eps, key=key, steps=config.apgd_steps,
                                          restarts=config.apgd_restarts)
      rate = attacks.attack_success_rate(success, yc, yc)  # all counted images are clean-correct
      yield _record("attack", tm.point, attack=attack_name, eps=eps, eps_255=e255, asr=float(rate.rate),
                    n_success=int(rate.n_success), n_counted=int(rate.n_counted), n_zero_grad=int(zero.sum()),
                    n_attacked_pool=len(y), clean_accuracy=float(correct.mean()), convention="clean_correct",
                    steps=config.pgd_steps if attack_name == "pgd" else config.apgd_steps,
                    wall_time_s=time.perf_counter() - start)


def _cw_records(config, tm, x, y, clean_pred) -> list[dict]:
  correct = np.flatnonzero(clean_pred == y)[:config.cw_samples]
  xc, yc = x[correct], y[correct]
  if len(yc) == 0:
    return []
  start = time.perf_counter()
  success, zero, x_adv = batched_attack(attacks.cw_l2, tm.logits_fn, xc, yc, config.attack_batch_size,
                                        steps=config.cw_steps, search_steps=config.cw_search_steps)
  grid = attacks.success_within_l2(xc, x_adv, success, np.asarray(config.cw_l2_grid, np.float32))
  rate = attacks.attack_success_rate(grid, yc, yc)
  dist = np.sqrt(np.sum(np.square((x_adv - xc).reshape(len(xc), -1)), axis=1))
  seconds = time.perf_counter() - start
  return [_record("attack", tm.point, attack="cw_l2", eps=float(e), asr=float(rate.rate[j]),
                  n_success=int(rate.n_success[j]), n_counted=int(rate.n_counted[j]),
                  n_zero_grad=int(zero.sum()), median_l2_found=float(np.median(dist[success])) if success.any()
                  else None, l2_found=[float(d) if ok else None for d, ok in zip(dist, success)],
                  any_size_success=float(success.mean()), clean_accuracy=float((clean_pred == y).mean()),
                  convention="clean_correct", steps=config.cw_steps, search_steps=config.cw_search_steps,
                  wall_time_s=seconds) for j, e in enumerate(config.cw_l2_grid)]


@functools.lru_cache(maxsize=None)
def _layer_fn(vit_config):
  """(params, layer_index, x) -> tokens: one function object per architecture (the code base's one way to a
  stable jit identity, see ``attacks._driver``)."""
  module = VisionTransformer(vit_config)

  def fn(params, layer_index, x):
    states = jnp.stack(module.apply({"params": params}, x, method=VisionTransformer.hidden_states))
    return states[layer_index].reshape(x.shape[0], -1)
  return fn


def _layer_partial(tm, layer: int):
  """Tokens after block ``layer`` (1-based), flattened [B, n·dim]; the layer index is a traced leaf of the
  Partial, so all layers of one architecture share one compiled estimator."""
  return jax.tree_util.Partial(_layer_fn(tm.vit_config), tm.params, jnp.asarray(layer, jnp.int32))


def _lipschitz_records(config, tm, x, key, is_done):
  """Yields the logits-level estimate at every ε and the per-layer ones, skipping points done."""
  for i, e255 in enumerate(config.eps_255):
    if is_done(tm.point, "lipschitz", eps=e255 / 255.0, layer=LOGITS_LAYER):
      continue
    start = time.perf_counter()
    values = np.asarray(local_lipschitz(tm.logits_fn, x, eps=e255 / 255.0, key=jax.random.fold_in(key, i)))
    yield _record("lipschitz", tm.point, attack=NA, eps=e255 / 255.0, eps_255=e255, layer=LOGITS_LAYER,
                  mean=float(values.mean()), std=float(values.std()), n=len(values), values=values.tolist(),
                  wall_time_s=time.perf_counter() - start)
  e255 = config.lipschitz_layer_eps_255
  for layer in range(1, tm.vit_config.depth + 1):
    if is_done(tm.point, "lipschitz", eps=e255 / 255.0, layer=layer):
      continue
    start = time.perf_counter()
    values = np.asarray(local_lipschitz(_layer_partial(tm, layer), x, eps=e255 / 255.0,
                                        key=jax.random.fold_in(key, 1000 + layer)))
    yield _record("lipschitz", tm.point, attack=NA, eps=e255 / 255.0, eps_255=e255, layer=layer,
                  mean=float(values.mean()), std=float(values.std()), n=len(values), values=values.tolist(),
                  output="tokens after block (flattened, L1 over n·dim)", wall_time_s=time.perf_counter() - start)


def _alignment_records(config, diff, vit, x, lip_diff, lip_vit) -> list[dict]:
  """Per layer of ``diff``: cos θ, ρ, γ, Lemma 1, Theorem 3 vs the actually more sensitive model.

  lip_diff, lip_vit: per-sample local Lipschitz estimates of the two models' logits on x at ε =
  lipschitz_layer_eps_255 (read from their Lipschitz records: the estimator is per-sample, so these are
  the values a call on x alone would give).
  """
  start = time.perf_counter()
  per_sample = [head_alignment(diff.vit_config, diff.params, xi, vit_config=vit.vit_config, vit_params=vit.params,
                               chunk_size=config.alignment_chunk)
                for xi in tqdm(x, desc=f"alignment {diff.point.name}", leave=False, unit="image")]
  seconds = time.perf_counter() - start
  eps = config.lipschitz_layer_eps_255 / 255.0
  out = []
  for layer in range(diff.vit_config.depth):
    stats = layer_alignment_statistics(per_sample, layer, lip_diff, lip_vit)
    fields = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in stats._asdict().items()}
    out.append(_record("alignment", diff.point, attack=NA, eps=eps, layer=layer + 1, **fields,
                       matched_vit=vit.point.name, wall_time_s=seconds))
  return out


def run(config: DiffAttentionConfig, workdir, *, overwrite_config: bool = False) -> list[dict]:
  """Runs (or resumes) training and every analysis point; returns all records of the workdir."""
  config.validate()
  wd = Workdir(workdir, KEY_FIELDS, config, overwrite_config=overwrite_config,
              bookkeeping=vit_training.BOOKKEEPING)
  done = wd.done()
  root = jax.random.key(config.train.seed)
  attack_key, lipschitz_key = jax.random.split(root, 2)
  keys = dict(pgd=jax.random.fold_in(attack_key, 0), apgd=jax.random.fold_in(attack_key, 1))
  train, test = vit_training.load_data(config)
  n_attack = len(test.y) if config.attack_samples is None else min(config.attack_samples, len(test.y))
  x, y = test.x[:n_attack], test.y[:n_attack]
  x_lip = test.x[:config.lipschitz_samples]
  x_align = test.x[:config.alignment_samples]

  def is_done(point, kind, **fields):
    rec = _record(kind, point, **fields)
    return tuple(rec[f] for f in KEY_FIELDS) in done

  def append(records):
    for r in records:  # appended one by one as they finish (generators), so a kill loses one point
      key = tuple(r[f] for f in KEY_FIELDS)
      if key not in done:
        wd.append(r)
        done.add(key)

  models = {}
  grid = vit_training.points(config)
  for tm in tqdm(vit_training.train_points(config, grid, train, test, workdir), total=len(grid),
                 desc="train (Diff)ViT", unit="model"):
    point = tm.point
    models[point] = tm
    if not is_done(point, "train"):
      append([_record("train", point, **{k: v for k, v in tm.record.items() if k not in KEY_FIELDS})])

  main_lambda = config.lambda_inits[0]
  for point, tm in tqdm(list(models.items()), desc="attacks + Lipschitz", unit="model"):
    clean_pred = vit_training.predict(tm.logits_fn, x, config.attack_batch_size)
    append(_attack_records(config, tm, x, y, clean_pred, keys, is_done))
    cw_here = point.depth in config.cw_depths and point.lambda_init in (NO_LAMBDA, main_lambda)
    if cw_here and not is_done(point, "attack", attack="cw_l2", eps=float(config.cw_l2_grid[-1])):
      append(_cw_records(config, tm, x, y, clean_pred))
    append(_lipschitz_records(config, tm, x_lip, lipschitz_key, is_done))

  def lipschitz_values(point):
    eps = config.lipschitz_layer_eps_255 / 255.0
    rec = [r for r in wd.records() if r["kind"] == "lipschitz" and r["name"] == point.name
           and r["layer"] == LOGITS_LAYER and r["eps"] == eps][-1]
    return np.asarray(rec["values"][:len(x_align)])

  for point, tm in tqdm([(p, m) for p, m in models.items() if p.model == "diffvit"], desc="alignment",
                        unit="model"):
    vit_point = point.matched_vit()
    if not is_done(point, "alignment", eps=config.lipschitz_layer_eps_255 / 255.0, layer=point.depth):
      append(_alignment_records(config, tm, models[vit_point], x_align, lipschitz_values(point),
                                lipschitz_values(vit_point)))
  return wd.records()
