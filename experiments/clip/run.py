"""CLIP against DiffCLIP, trained here, under PGD-L∞ and patch attacks on the zero-shot prediction (the second
line of evidence of arXiv 2510.00517: "DiffCLIP shows a higher attack success rate at every perturbation budget
and every patch size").

Usage:
  python -m experiments.clip --workdir DIR [--standard | --full] [field=value ...]

These are small two-tower models trained here from scratch on CIFAR-10 images with captions made from the class
names (``attention.clip``), standing in for the paper's pretrained CLIP / DiffCLIP on COCO, which these
machines cannot download. Per seed pair k (both models trained with seed train.seed + k: the same initial key,
data order, captions and augmentation):
  * train CLIP (standard attention in both towers) and DiffCLIP (differential attention, λ_init as configured)
    with the symmetric contrastive loss and a learned temperature, with resumable orbax checkpoints
    (``experiments.trainers.classifier`` with the contrastive objective); zero-shot accuracy on the test
    images by the nearest class-prompt embedding (every template averaged);
  * on the first ``attack_samples`` test images, counting the clean-correct ones only: PGD-L∞ at each ε of
    ``eps_255`` and an unbounded patch attack of each side in ``patch_sizes`` at a random position per image
    (the same positions for both models of a pair), both against the zero-shot prediction;
  * with ``classifiers_workdir``, the same patch attacks on that differential-attention workdir's ViT and
    DiffViT classifiers at its shallowest depth (extra columns; their own test images).
Quick config: a smoke run of every code path (2 pairs, 3 epochs on the embedded subset); ``--standard`` is the
grid the claim rows read (``config.standard_config``).

Writes config.json, results.jsonl (a record per trained model and per attack point), checkpoints under
models/, and plots + summary.md (``experiments.clip.report``); appended as each point finishes, so a killed
run restarted with the same workdir resumes.
"""
from __future__ import annotations

import dataclasses
import functools
import time
from pathlib import Path

import jax
import numpy as np
from tqdm.auto import tqdm

import attacks
from attention.clip import ZeroShotCLIP
from attention.vit import parameter_count
from experiments.clip.config import MODELS, CLIPExperimentConfig, prompts
from experiments.core import config as config_lib
from experiments.core.workdir import Workdir
from experiments.diff_attention.run import batched_attack
from experiments.trainers import vit as vit_training
from experiments.trainers.classifier import train_classifier

KEY_FIELDS = ("kind", "model", "seed_index", "attack", "eps", "size", "source")
NA = "-"
ZERO_SHOT = "zero_shot"          # source of the CLIP / DiffCLIP records
CLASSIFIER = "classifier"        # source of the differential-attention classifiers' records
# Config fields that add columns the claim rows never read: a workdir resumes whatever their values.
BOOKKEEPING = frozenset({"classifiers_workdir"})


def _record(kind: str, model: str, seed_index: int, **fields) -> dict:
  base = dict(kind=kind, model=model, seed_index=seed_index, attack=NA, eps=0.0, size=0, source=ZERO_SHOT,
              name=f"{model}_s{seed_index}")
  base.update(fields)
  return base


@functools.lru_cache(maxsize=None)
def module_of(clip_config, prompt_table) -> ZeroShotCLIP:
  """One module object per architecture and prompt table."""
  return ZeroShotCLIP(clip_config, prompt_table)


@functools.lru_cache(maxsize=None)
def _apply_fn(module: ZeroShotCLIP):
  return lambda params, classes, x: module.apply({"params": params}, x, classes, method=ZeroShotCLIP.logits_against)


def logits_function(module: ZeroShotCLIP, params):
  """``jax.tree_util.Partial`` images [B, 32, 32, 3] -> zero-shot logits [B, 10]: the class embeddings computed
  once (the text tower does not run again at every attack step), params and class embeddings as its leaves (one
  compiled attack per architecture, see ``attacks._driver``)."""
  classes = module.apply({"params": params}, method=ZeroShotCLIP.class_embeddings)
  return jax.tree_util.Partial(_apply_fn(module), params, classes)


def contrastive_objective(n_templates: int):
  """The ``experiments.trainers.classifier.Objective`` of CLIP training: each image's caption is a template
  drawn uniformly per step from the step's key, and the loss is ``ZeroShotCLIP.contrastive``'s."""
  def objective(module, params, xb, yb, key):
    template = jax.random.randint(jax.random.fold_in(key, 1), yb.shape, 0, n_templates)
    return module.apply({"params": params}, xb, yb, template, train=True, method=ZeroShotCLIP.contrastive,
                        rngs={"dropout": key})
  return objective


def train_model(config: CLIPExperimentConfig, model: str, seed_index: int, train, test, workdir):
  """(logits function, train record) of one model, trained or resumed in ``workdir/models/<model>_s<k>``."""
  module = module_of(config.clip_config(model), prompts(config))
  train_config = dataclasses.replace(config.train, seed=config.train.seed + seed_index)
  start = time.perf_counter()
  result = train_classifier(module, train.x, train.y, train_config, Path(workdir) / "models" / f"{model}_s{seed_index}",
                            objective=contrastive_objective(len(config.templates)))
  wall = time.perf_counter() - start
  fn = logits_function(module, result.params)
  accuracy = float(np.mean(vit_training.predict(fn, test.x, config.attack_batch_size) == test.y))
  record = _record("train", model, seed_index, seed=train_config.seed, epochs=train_config.epochs,
                   n_train=len(train.y), n_test=len(test.y), parameters=parameter_count(result.params),
                   zero_shot_accuracy=accuracy, logit_scale=float(result.params["logit_scale"]),
                   train_seconds=float(sum(h.seconds for h in result.history)),
                   history=[h._asdict() for h in result.history], wall_time_s=wall)
  return fn, record


def attack_records(config: CLIPExperimentConfig, fn, model: str, seed_index: int, x, y, key, is_done, *,
                   source: str = ZERO_SHOT, patch_only: bool = False):
  """Yields the PGD-L∞ (unless ``patch_only``) and patch records of one model not done yet, on the
  clean-correct images of (x, y); ``key`` fixes the PGD starts and the patch positions (shared by the models
  of a pair). Each record holds ``clean_correct`` (0/1 per image of x, in order) and ``success`` (0/1 per
  clean-correct image, in order), so the claim rows can pair the models on the images both classify correctly."""
  clean = vit_training.predict(fn, x, config.attack_batch_size)
  correct = clean == y
  xc, yc = x[correct], y[correct]
  height, width = x.shape[1:3]
  points = ([] if patch_only else [("pgd", e / 255.0, 0) for e in config.eps_255]) + \
      [("patch", 0.0, s) for s in config.patch_sizes]
  for i, (attack, eps, size) in enumerate(points):
    if is_done(model, seed_index, attack=attack, eps=eps, size=size, source=source):
      continue
    common = dict(attack=attack, eps=eps, eps_255=eps * 255.0, size=size, source=source,
                  n_attacked_pool=len(y), clean_accuracy=float(correct.mean()), convention="clean_correct",
                  clean_correct=correct.astype(int).tolist())
    if len(yc) == 0:
      yield _record("attack", model, seed_index, asr=float("nan"), n_success=0, n_counted=0, n_zero_grad=0,
                    success=[], wall_time_s=0.0, **common)
      continue
    start = time.perf_counter()
    point_key = jax.random.fold_in(key, i)
    if attack == "pgd":
      success, zero, _ = batched_attack(attacks.pgd_linf, fn, xc, yc, config.attack_batch_size, eps=eps,
                                        key=point_key, alpha=config.pgd_step_ratio * eps, steps=config.pgd_steps)
      steps = config.pgd_steps
    else:
      position = patch_positions(point_key, len(y), size, height, width)[correct]
      success, zero, _ = batched_attack(attacks.patch, fn, xc, yc, config.attack_batch_size, size=size,
                                        per_sample=dict(position=position), alpha=config.patch_alpha,
                                        steps=config.patch_steps)
      steps = config.patch_steps
    yield _record("attack", model, seed_index, asr=float(success.mean()), n_success=int(success.sum()),
                  n_counted=len(yc), n_zero_grad=int(zero.sum()), success=success.astype(int).tolist(),
                  steps=steps, wall_time_s=time.perf_counter() - start, **common)


def done_keys(records) -> set[tuple]:
  """The ``KEY_FIELDS`` of the points done. A zero-shot attack record written before the clean-correct masks were
  stored is not done: its point is attacked again (the same attack key, so the same attack) and the newer record,
  with the mask the claim rows pair on, replaces it (``experiments.clip.claims.paired_differences``)."""
  return {tuple(r[f] for f in KEY_FIELDS) for r in records if all(f in r for f in KEY_FIELDS)
          and not (r["kind"] == "attack" and r["source"] == ZERO_SHOT and r.get("clean_correct") is None)}


def patch_positions(key, n: int, size: int, height: int, width: int) -> np.ndarray:
  """Top-left corners [n, 2] (int32) of size × size patches, uniform per image index from ``key``: image i of
  the attacked images gets the same position in every model that attacks it."""
  rows = jax.random.randint(key, (n,), 0, height - size + 1)
  cols = jax.random.randint(jax.random.fold_in(key, 1), (n,), 0, width - size + 1)
  return np.stack([np.asarray(rows), np.asarray(cols)], axis=1).astype(np.int32)


def classifier_models(config: CLIPExperimentConfig):
  """(the differential-attention config, depth, points) of the classifiers ``classifier_records`` attacks: the
  ViT / DiffViT of ``config.classifiers_workdir`` at its shallowest depth (main λ_init, every seed).

  Raises:
    ValueError: the workdir is not a differential-attention workdir, or a model of that depth is not trained.
  """
  from experiments.diff_attention import SPEC as DA_SPEC
  from experiments.diff_attention.config import DiffAttentionConfig
  from experiments.report.adapters import read_workdir_config
  workdir = Path(config.classifiers_workdir)
  da = read_workdir_config(workdir, DiffAttentionConfig, "diff_attention")
  from experiments.core.workdir import read_config
  if not all(k in read_config(workdir / "config.json") for k in DA_SPEC.config_signature):
    raise ValueError(f"classifiers_workdir {workdir} is not an experiments.diff_attention workdir (its config.json "
                     f"lacks {', '.join(DA_SPEC.config_signature)})")
  depth = min(da.depths)
  points = [p for p in vit_training.points(da) if p.depth == depth and p.lambda_init in (vit_training.NO_LAMBDA,
                                                                                         da.lambda_inits[0])]
  unfinished = [p.name for p in points if not (workdir / "models" / p.name / "history.json").exists()]
  if unfinished:
    raise ValueError(f"classifiers_workdir {workdir}: the models {unfinished[:4]} are not trained; finish that "
                     f"run first (python -m experiments.diff_attention --workdir {workdir})")
  return da, depth, points


def classifier_records(config: CLIPExperimentConfig, key, is_done):
  """Yields the patch records of the classifiers of ``classifier_models`` (loaded, never retrained), on their
  workdir's own test images; each record names the workdir, depth and data set.

  Raises:
    ValueError: as ``classifier_models``.
  """
  da, depth, points = classifier_models(config)
  workdir = Path(config.classifiers_workdir)
  train, test = vit_training.load_data(da)
  n = len(test.y) if config.attack_samples is None else min(config.attack_samples, len(test.y))
  for tm in vit_training.train_points(da, points, train, test, workdir):
    for r in attack_records(config, tm.logits_fn, tm.point.model, tm.point.seed_index, test.x[:n], test.y[:n],
                            jax.random.fold_in(key, tm.point.seed_index), is_done, source=CLASSIFIER,
                            patch_only=True):
      yield dict(r, classifiers_workdir=str(workdir), depth=depth, dataset=da.dataset,
                 lambda_init=tm.point.lambda_init)


def run(config: CLIPExperimentConfig, workdir, *, overwrite_config: bool = False) -> list[dict]:
  """Runs (or resumes) every pair's training and attacks, then the classifier columns; returns all records."""
  config.validate()
  if config.classifiers_workdir is not None:
    classifier_models(config)  # before hours of training: the classifiers must be there
  wd = Workdir(workdir, KEY_FIELDS, config, overwrite_config=overwrite_config, bookkeeping=BOOKKEEPING)
  done = done_keys(wd.records())
  train, test = config_lib.load_splits(config.data, "cifar10")
  n = len(test.y) if config.attack_samples is None else min(config.attack_samples, len(test.y))
  x, y = test.x[:n], test.y[:n]
  attack_key = jax.random.fold_in(jax.random.key(config.train.seed), 1)

  def is_done(model, seed_index, **fields):
    rec = _record("attack", model, seed_index, **fields)
    return tuple(rec[f] for f in KEY_FIELDS) in done

  def append(records):
    for r in records:  # one by one as they finish: a kill loses one point
      key = tuple(r[f] for f in KEY_FIELDS)
      if key not in done:
        wd.append(r)
        done.add(key)

  pairs = [(k, m) for k in range(config.seeds) for m in MODELS]
  for seed_index, model in tqdm(pairs, desc="train + attack CLIP / DiffCLIP", unit="model"):
    fn, record = train_model(config, model, seed_index, train, test, workdir)
    append([record])
    append(attack_records(config, fn, model, seed_index, x, y, jax.random.fold_in(attack_key, seed_index),
                          is_done))
  if config.classifiers_workdir is not None:
    append(classifier_records(config, jax.random.fold_in(attack_key, 10_000), is_done))
  return wd.records()
