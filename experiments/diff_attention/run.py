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

import dataclasses
import functools
import time
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

import attacks
from attention.alignment import head_alignment, layer_alignment_statistics
from attention.local_lipschitz import local_lipschitz
from attention.vit import VisionTransformer
from experiments.core import config as config_lib
from experiments.trainers import vit as vit_training
from experiments.trainers.vit import NO_LAMBDA, Point, TrainViTConfig
from experiments.core.workdir import Workdir

KEY_FIELDS = ("kind", "model", "depth", "lambda_init", "seed_index", "attack", "eps", "layer")
NA = "-"          # key value of a field that does not apply
LOGITS_LAYER = -1  # "layer" of a logits-level measurement


@dataclasses.dataclass(frozen=True)
class DiffAttentionConfig(TrainViTConfig):
  """The fields of ``experiments.trainers.vit.TrainViTConfig`` (dataset, data.*, the architecture grid,
  train.*; train.seed also seeds the attacks and Lipschitz estimates) plus (all overridable as field=value):

  eps_255: L∞ budgets in units of 1/255 (pixel scale [0, 1]).
  attack_samples: test images attacked (None: all); only the clean-correct ones count and are attacked.
  attack_batch_size: images per attack call.
  pgd_steps, pgd_step_ratio: PGD-L∞ steps and α = ratio · ε (random start).
  apgd_steps, apgd_restarts: APGD-CE iterations and restarts.
  cw_depths, cw_samples, cw_steps, cw_search_steps, cw_l2_grid: CW-L2 on the DiffViT (main λ_init) and ViT
    at these depths, on the first cw_samples clean-correct images, success counted on the L2 grid.
  lipschitz_samples: test images for the local Lipschitz estimates; lipschitz_layer_eps_255: the ε (one of
    eps_255) of the per-layer estimates and of the per-sample sensitivity compared with Theorem 3.
  alignment_samples: the first test images (≤ lipschitz_samples) for the gradient alignment;
    alignment_chunk: forward-mode directions per step (memory).
  crossover_eps_255: the (small, large) ε of the depth-crossover plot.
  """
  depths: tuple[int, ...] = (1, 2)
  single_layer_lambda_inits: tuple[str, ...] = ("0.5", "0.95")
  train: config_lib.ClassifierTrainConfig = config_lib.ClassifierTrainConfig(
      epochs=5, batch_size=64, learning_rate=2e-3, l2=0.0, warmup_epochs=1, seed=0)
  eps_255: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)
  attack_samples: Optional[int] = 200
  attack_batch_size: int = 500
  pgd_steps: int = 10
  pgd_step_ratio: float = 0.25
  apgd_steps: int = 10
  apgd_restarts: int = 1
  cw_depths: tuple[int, ...] = (1,)
  cw_samples: int = 20
  cw_steps: int = 100
  cw_search_steps: int = 5
  cw_l2_grid: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5)
  lipschitz_samples: int = 50
  lipschitz_layer_eps_255: float = 1.0
  alignment_samples: int = 8
  alignment_chunk: int = 512
  crossover_eps_255: tuple[float, ...] = (1.0, 4.0)

  def validate(self) -> None:
    """Raises ValueError naming the field and its allowed range."""
    super().validate()
    if not self.eps_255 or any(not np.isfinite(e) or e <= 0 for e in self.eps_255):
      raise ValueError(f"eps_255 must be finite budgets > 0 (units of 1/255), got {self.eps_255}")
    if list(self.eps_255) != sorted(self.eps_255):
      raise ValueError(f"eps_255 must be increasing, got {self.eps_255}")
    if self.attack_samples is not None and self.attack_samples < 1:
      raise ValueError(f"attack_samples must be >= 1 or None, got {self.attack_samples}")
    for name in ("attack_batch_size", "apgd_restarts", "cw_search_steps", "lipschitz_samples",
                 "alignment_samples", "alignment_chunk", "cw_samples"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
    for name in ("pgd_steps", "apgd_steps", "cw_steps"):
      if getattr(self, name) < 0:
        raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
    if not self.pgd_step_ratio > 0:
      raise ValueError(f"pgd_step_ratio must be > 0, got {self.pgd_step_ratio}")
    if any(not e > 0 for e in self.cw_l2_grid):
      raise ValueError(f"cw_l2_grid must hold L2 budgets > 0, got {self.cw_l2_grid}")
    if self.lipschitz_layer_eps_255 not in self.eps_255:
      raise ValueError(f"lipschitz_layer_eps_255 must be one of eps_255 {self.eps_255} (its per-sample "
                       f"logits estimates feed the Theorem 3 comparison), got {self.lipschitz_layer_eps_255}")
    if self.alignment_samples > self.lipschitz_samples:
      raise ValueError(f"alignment_samples ({self.alignment_samples}) must be <= lipschitz_samples "
                       f"({self.lipschitz_samples}): the alignment images are the first Lipschitz images")
    if len(self.crossover_eps_255) != 2 or any(e not in self.eps_255 for e in self.crossover_eps_255):
      raise ValueError(f"crossover_eps_255 must be two values of eps_255 {self.eps_255}, "
                       f"got {self.crossover_eps_255}")
    if set(self.models) != set(vit_training.MODELS):
      raise ValueError(f"models must be both {vit_training.MODELS} (the comparison needs the pair), "
                       f"got {self.models}")


STANDARD = ("fashion_mnist", "cifar10")


def standard_config(dataset: str = "fashion_mnist") -> DiffAttentionConfig:
  """The standard CPU grids (the Fashion-MNIST grid, 30 models: 3,616 s of CPU time, 1 h 17 min on one pinned
  core plus 12 min on 2 cores with 22 minutes paused; the CIFAR-10 pair 39 min on 2 CPU cores shared with other
  jobs; README).

  "fashion_mnist": the full Fashion-MNIST files (60,000 train, 10,000 test) from ATTN_DATA_DIR, or the
  embedded subset (with a warning) when it is unset; patch 7, width 64, ViT / DiffViT at depths {1, 2, 4, 8},
  λ_init 0.8 and at depth 1 also 0.5 and 0.95, 3 training seeds at every depth; 8 epochs (4 at depth ≥ 2), batch
  64, target accuracy 0.85. "cifar10": the depth-1 pair on the full CIFAR-10 training files (crop/flip
  augmentation, warm-up and cosine schedule, patch 4), tested on the data directory's CIFAR-10 test split.

  Raises:
    ValueError: an unknown ``dataset``.
  """
  import os
  import warnings
  from experiments.data.loader import DATA_DIR_ENV
  if dataset not in STANDARD:
    raise ValueError(f"the standard config's data set must be one of {STANDARD}, got {dataset!r}")
  source = "dir" if os.environ.get(DATA_DIR_ENV) else "embedded"
  if source == "embedded":
    warnings.warn(f"{DATA_DIR_ENV} is not set: the standard differential-attention grid falls back to the "
                  "embedded subsets (the accuracy target may not be reached); set it to the directory of the "
                  "full data files", RuntimeWarning, stacklevel=2)
  # The directory is recorded (config.json), so a resume on other data files is refused, not silent.
  data = config_lib.DataConfig(source=source, dir=os.environ.get(DATA_DIR_ENV) or None, n_train=None, n_test=None)
  attack_fields = dict(attack_samples=1000, attack_batch_size=500, pgd_steps=10, apgd_steps=20, cw_samples=100,
                       cw_steps=100, cw_search_steps=5, lipschitz_samples=200, alignment_samples=64,
                       target_accuracy=0.85 if dataset == "fashion_mnist" else 0.0)
  if dataset == "fashion_mnist":
    return DiffAttentionConfig(
        dataset="fashion_mnist", data=data, depths=(1, 2, 4, 8), lambda_inits=("0.8",),
        single_layer_lambda_inits=("0.5", "0.95"), patch_size=7, dim=64, num_heads=4, mlp_ratio=2.0,
        train=config_lib.ClassifierTrainConfig(epochs=8, batch_size=64, learning_rate=2e-3, warmup_epochs=1),
        depth1_seeds=3, deep_seeds=3, deep_epochs=4, cw_depths=(1, 2, 4, 8), **attack_fields)
  return DiffAttentionConfig(
      dataset="cifar10", data=data, depths=(1,), lambda_inits=("0.8",), single_layer_lambda_inits=(),
      patch_size=4, dim=64, num_heads=4, mlp_ratio=2.0,
      train=config_lib.ClassifierTrainConfig(epochs=20, batch_size=128, learning_rate=2e-3, warmup_epochs=2,
                                             augment="crop_flip"),
      cw_depths=(1,), **attack_fields)


def get_config(full: bool = False, standard=None) -> DiffAttentionConfig:
  """The quick CPU config (a smoke run), ``standard`` (True or a data set of ``STANDARD``: the standard CPU
  grid, ``standard_config``), or with ``full`` the accelerator grid (module docstring)."""
  if standard and full:
    raise ValueError("--full and --standard are exclusive")
  if standard:
    return standard_config("fashion_mnist" if standard is True else standard)
  if not full:
    return DiffAttentionConfig()
  base = vit_training.full_config()
  fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(TrainViTConfig)}
  return DiffAttentionConfig(**fields, attack_samples=1000, attack_batch_size=250, apgd_steps=100,
                             cw_depths=(1, 2, 4, 8, 12), cw_samples=500, cw_steps=1000, cw_search_steps=9,
                             cw_l2_grid=(0.05, 0.1, 0.25, 0.5, 1.0), lipschitz_samples=500,
                             alignment_samples=64)


def _record(kind, point: Point, **fields) -> dict:
  base = dict(kind=kind, model=point.model, depth=point.depth, lambda_init=point.lambda_init,
              seed_index=point.seed_index, attack=NA,
              eps=0.0, layer=LOGITS_LAYER, name=point.name)
  base.update(fields)
  return base


def batched_attack(attack, logits_fn, x, y, batch_size: int, **kwargs):
  """Runs ``attack`` over batches; returns (success [n] bool, zero_grad [n] bool, x_adv [n, ...])."""
  outs = [attack(logits_fn, jnp.asarray(x[i:i + batch_size]), jnp.asarray(y[i:i + batch_size]), **kwargs)
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
  wd = Workdir(workdir, KEY_FIELDS, config, overwrite_config=overwrite_config)
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
  for point in tqdm(vit_training.points(config), desc="train (Diff)ViT", unit="model"):
    tm = vit_training.train_point(config, point, train, test, workdir)
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
