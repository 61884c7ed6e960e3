"""Certified ℓ2 robustness of small Lipschitz-controlled ViTs with local attention sensitivity bounds.

Usage:
  python -m experiments.certify --workdir /tmp/certify_run [--full | --standard] [field=value ...]

For every data set and every attention-norm bound α (one ``CertifiedViT`` each, ‖A_h‖₂ ≤ α), trains the
model on the training images (quick config: the embedded subsets, CIFAR-10 1,500 images, MNIST 2,000; less
the validation split below), then on the test subset (quick config: 500 images) measures, for
ε ∈ {0.01, 0.02, 0.05, 0.1} (pixel-space ℓ2, pixels in [0, 1]):
  clean accuracy; certified accuracy with the per-pair margin certificate, *rigorous* (closed-form key-side
  norm, no Krylov estimate at all: the headline) and with the Krylov estimates (Lanczos estimates of top
  singular values approach them from below, so that certificate is not rigorous), with each layer bound
  alone and with the Tsuzuku form; PGD-L2 robust accuracy (an upper bound on the true robust accuracy);
  per-image certified / PGD-robust / correct flags (for paired comparisons of α); seconds per sample; how
  often and by how much the fine-grained bound alone beats the naive one; and on a few images the
  bound-to-attack tightness ratio of every attention layer at the radius the certificate propagates to it.

Choosing α (``validation_fraction``): with more than one α, a class-stratified ``validation_fraction`` of
the training images (drawn with ``data.seed``) is held out before training and never trained on; every α's
model is certified on it, and at every ε the α with the highest rigorous certified accuracy on the
validation split is selected (ties: the higher validation clean accuracy, then the smaller α)
(``select_attention_bound``). Test images are never read by the selection: it sees the validation records
only. Every α's test figures are still reported; the selected one is the headline. With one α, or
validation_fraction = 0, nothing is held out and nothing is selected.

Configs: quick (default; the embedded subsets of CIFAR-10 and MNIST, α ∈ {1/16, 1/4, 1}, validation 10 %:
about 15 minutes of CPU time on 2 cores, 6 models: training ~8 min, bounds + attacks ~6.5 min, measured
before the validation split, which adds ~0.06 s per validation image and α; 0.06 s per image for the
certificate of all 3 layers); ``--standard`` (``standard_config``: CIFAR-10 from the full training files in
ATTN_DATA_DIR, 49,000 trained on and 1,000 held out for choosing α and for the plateau rule, 10–20 epochs,
1,000 test images); ``--full``
(10,000 training images, sized for an accelerator). Resumes: models from orbax checkpoints, finished
validation points, the selection and finished test points from results.jsonl. Writes config.json,
results.jsonl, certified_accuracy.png, tightness.png and summary.md (``experiments.certify.report``).

Sizing of ``--standard``: about 14 s per training epoch of 49,000 images on 2 CPU cores with nothing else
running (the 63–435 s per epoch measured earlier were contention with other jobs); the certificate constants
about 0.03 s per image (validation + test images) and PGD-L2 with 20 steps about 2 ms per image and ε. The
run with 16–20 epochs per α took 42 min 50 s wall on cores shared for most of it (docs/certify_summary.md);
alone it would take about 15 minutes of training plus a few minutes of certification.

Source: Havens et al. (ICML 2024), docs/theory.md#certification; margin certificate: Tsuzuku et al. (NeurIPS 2018).
"""
from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from attacks import pgd_l2
from attention import certification
from attention.certified_vit import CertifiedViT, embedding_lipschitz
from experiments.core import config as config_lib
from experiments.certify.report import KRYLOV_LABEL, SELECTION_RULE  # noqa: F401  (re-exported)
from experiments.trainers.classifier import accuracy, train_classifier
from experiments.core.workdir import Workdir
from experiments.certify.config import CertifyConfig

KEY_FIELDS = ("dataset", "attention_bound", "kind", "eps", "layer")


def validation_split(train, fraction: float, seed: int):
  """(fit, validation): a class-stratified ``fraction`` of ``train``'s rows held out, the rest kept.

  Per class c with n_c rows, round(fraction·n_c) rows (at least 1 and at most n_c − 1) are drawn uniformly
  without replacement by ``numpy.random.default_rng(seed)``; both parts keep the stored order and their
  ``info.indices``. Never touches a test split.

  Args:
    train: an ``experiments.data.Split`` (the training images).
    fraction: in (0, 1).
    seed: the seed of the draw (the config's data.seed).

  Raises:
    ValueError: fraction outside (0, 1), or a split that leaves either part empty.
  """
  if not 0 < fraction < 1:
    raise ValueError(f"validation_fraction must be in (0, 1) to hold out a validation split, got {fraction!r}")
  y = np.asarray(train.y)
  rng = np.random.default_rng(seed)
  held = []
  for c in np.unique(y):
    rows = np.flatnonzero(y == c)
    k = min(max(int(round(fraction * rows.size)), 1), rows.size - 1)   # 0 for a class of one row
    held.append(rng.choice(rows, k, replace=False))
  mask = np.zeros(y.size, bool)
  mask[np.concatenate(held).astype(np.int64)] = True
  if mask.all() or not mask.any():
    raise ValueError(f"validation_fraction={fraction} of {y.size} training images leaves "
                     f"{int((~mask).sum())} to train on and {int(mask.sum())} to validate on; both must be ≥ 1")

  def part(m):
    return train._replace(x=train.x[m], y=train.y[m], info=train.info._replace(indices=train.info.indices[m]))
  return part(~mask), part(mask)


def _chunks(n: int, size: int):
  return [(i, min(i + size, n)) for i in range(0, n, size)]


def _certify_constants(model_config, params, x, config: CertifyConfig, key):
  """Logits and LayerConstants for all images in chunks; seconds per image after the first (compiling)
  chunk."""
  logits, consts, times = [], [], []
  for i, (lo, hi) in enumerate(tqdm(_chunks(len(x), config.chunk), desc="  bounds", leave=False)):
    start = time.perf_counter()
    out = certification.layer_constants(model_config, params, jnp.asarray(x[lo:hi]),
                                        key=jax.random.fold_in(key, i), power_iters=config.power_iters)
    out = jax.block_until_ready(out)
    times.append((time.perf_counter() - start) / (hi - lo))
    logits.append(out[0])
    consts.append(out[1])
  steady = float(np.mean(times[1:])) if len(times) > 1 else float(times[0])
  cat = lambda *f: jnp.concatenate(f, axis=0)
  return jnp.concatenate(logits), jax.tree_util.tree_map(cat, *consts), steady


def _pgd_broken(apply_fn, params, x, y, eps, config: CertifyConfig, key):
  """Per-sample bool: some PGD-L2 restart found a misclassified point within ε (or x is misclassified)."""
  logits_fn = jax.tree_util.Partial(apply_fn, params)
  broken = []
  for lo, hi in _chunks(len(x), config.chunk):
    hit = np.zeros(hi - lo, bool)
    for restart in range(config.pgd.restarts):
      res = pgd_l2(logits_fn, jnp.asarray(x[lo:hi]), jnp.asarray(y[lo:hi]), eps=eps,
                   key=jax.random.fold_in(key, restart), alpha=2.5 * eps / max(config.pgd.steps, 1),
                   steps=config.pgd.steps, random_start=restart > 0)
      hit |= np.asarray(res.success)
    broken.append(hit)
  return np.concatenate(broken)


def _flags(values) -> list[int]:
  return [int(v) for v in np.asarray(values)]


def validation_records(config: CertifyConfig, model_config, params, validation, key, base: dict) -> list[dict]:
  """One record per ε (kind 'validation') of one model on the validation split: clean accuracy and the
  rigorous and Krylov-estimate certified accuracies. Reads the validation images only."""
  logits, consts, _ = _certify_constants(model_config, params, validation.x, config, key)
  y = jnp.asarray(validation.y)
  lip = embedding_lipschitz(params)
  kernel = certification.head_kernel(params)
  correct = np.asarray(jnp.argmax(logits, axis=1) == y)
  n = len(validation.x)
  out = []
  for eps in config.epsilons:
    cert = {}
    for key_norm in ("closed_form", "power"):
      r = certification.feature_radius(consts, eps, embed_lipschitz=lip, key_norm=key_norm)
      cert[key_norm] = np.asarray(certification.margin_certificate(logits, y, kernel, r))
    out.append(dict(base, kind="validation", eps=float(eps), layer=-1, n_validation=n,
                    validation_clean_accuracy=float(correct.mean()),
                    validation_certified_rigorous=float(cert["closed_form"].mean()),
                    validation_certified_rigorous_count=int(cert["closed_form"].sum()),
                    validation_certified_krylov=float(cert["power"].mean()),
                    validation_indices=[int(i) for i in validation.info.indices]))
  return out


def select_attention_bound(candidates: Sequence[dict]) -> dict:
  """The validation record of the selected α among one (data set, ε)'s candidates (``SELECTION_RULE``):
  the highest rigorous certified accuracy on the validation split; ties: the higher validation clean
  accuracy, then the smaller α.

  Args:
    candidates: kind 'validation' records (``validation_records``) of one data set and ε, one per α, all on
      the same validation images.

  Raises:
    ValueError: no candidates, a record that is not a validation record (test figures never enter the
      selection), mixed data sets or ε, two records of one α, or different validation splits.
  """
  if not candidates:
    raise ValueError("select_attention_bound needs at least one validation record")
  if any(c.get("kind") != "validation" for c in candidates):
    raise ValueError("select_attention_bound reads validation records only (kind 'validation'), got kinds "
                     f"{sorted({str(c.get('kind')) for c in candidates})}: test figures never select α")
  if len({(c["dataset"], float(c["eps"])) for c in candidates}) != 1:
    raise ValueError("select_attention_bound compares one data set at one ε")
  alphas = [float(c["attention_bound"]) for c in candidates]
  if len(set(alphas)) != len(alphas):
    raise ValueError(f"select_attention_bound got α repeated: {alphas}")
  if len({(int(c["n_validation"]), tuple(c.get("validation_indices", ()))) for c in candidates}) != 1:
    raise ValueError("select_attention_bound compares models on the same validation images only")
  return max(candidates, key=lambda c: (float(c["validation_certified_rigorous"]),
                                        float(c["validation_clean_accuracy"]), -float(c["attention_bound"])))


def selection_records(config: CertifyConfig, records: Sequence[dict], dataset: str) -> list[dict]:
  """One 'selection' record per ε of ``dataset`` from its validation records (attention_bound = the
  selected α; ``candidates`` = every α's validation figures); [] when the validation records of some α
  are missing."""
  out = []
  for eps in config.epsilons:
    cands = [r for r in records if r.get("kind") == "validation" and r["dataset"] == dataset
             and math.isclose(float(r["eps"]), float(eps))
             and float(r["attention_bound"]) in {float(a) for a in config.attention_bounds}]
    if {float(c["attention_bound"]) for c in cands} != {float(a) for a in config.attention_bounds}:
      return []
    chosen = select_attention_bound(cands)
    out.append(dict(
        dataset=dataset, attention_bound=float(chosen["attention_bound"]), kind="selection", eps=float(eps),
        layer=-1, rule=SELECTION_RULE, validation_fraction=config.validation_fraction,
        n_validation=int(chosen["n_validation"]), seed=config.train.seed,
        candidates=[dict(attention_bound=float(c["attention_bound"]),
                         validation_certified_rigorous=float(c["validation_certified_rigorous"]),
                         validation_certified_krylov=float(c["validation_certified_krylov"]),
                         validation_clean_accuracy=float(c["validation_clean_accuracy"]))
                    for c in sorted(cands, key=lambda c: float(c["attention_bound"]))]))
  return out


@dataclasses.dataclass
class _Trained:
  """A trained model of one (data set, α): its params, training history and seconds."""
  params: object
  history: list
  seconds: float
  stop_reason: str = "cap"


def _train(config: CertifyConfig, dataset: str, alpha: float, workdir: Path, train, validation) -> _Trained:
  """Trains (or restores from its orbax checkpoints) the model of (data set, α) on ``train``, recording the
  accuracy on ``validation`` (or None) after every epoch and stopping on ``config.plateau``."""
  model = CertifiedViT(config.model_config(dataset, alpha))
  start = time.perf_counter()
  result = train_classifier(model, train.x, train.y, config.train,
                            workdir / "models" / f"{dataset}_alpha{alpha:g}",
                            validation=None if validation is None else (validation.x, validation.y),
                            plateau=config.plateau)
  return _Trained(result.params, [h._asdict() for h in result.history], time.perf_counter() - start,
                  result.stop_reason)


def _test_records(config: CertifyConfig, dataset: str, alpha: float, trained: _Trained, train, validation,
                  test) -> list[dict]:
  """Every test-image record of one trained model: train (with the test clean accuracy), radius, one
  certify record per ε and the tightness rows."""
  model_config = config.model_config(dataset, alpha)
  model = CertifiedViT(model_config)
  key = jax.random.PRNGKey(config.train.seed)
  bounds_key, pgd_key, tightness_key = (jax.random.fold_in(key, i) for i in range(3))
  base = dict(dataset=dataset, attention_bound=float(alpha), n_train=len(train.x), n_test=len(test.x),
              seed=config.train.seed)
  params = trained.params
  logits_fn = lambda p, v: model.apply({"params": p}, v)
  apply_fn = jax.jit(logits_fn)
  records = [dict(base, kind="train", eps=-1.0, layer=-1, depth=model_config.depth, clean_accuracy=accuracy(apply_fn, params, test.x, test.y),
                  train_accuracy=accuracy(apply_fn, params, train.x, train.y), train_seconds=trained.seconds,
                  epochs=len(trained.history) or config.train.epochs, epochs_cap=config.train.epochs,
                  stop_reason=trained.stop_reason, history=trained.history,
                  n_validation=0 if validation is None else len(validation.x),
                  validation_fraction=config.validation_fraction if validation is not None else 0.0,
                  train_source=train.info.source, test_source=test.info.source,
                  test_partial=bool(test.info.partial))]

  start = time.perf_counter()
  logits, consts, bound_seconds = _certify_constants(model_config, params, test.x, config, bounds_key)
  y = jnp.asarray(test.y)
  correct = np.asarray(jnp.argmax(logits, axis=1) == y)
  lip = embedding_lipschitz(params)
  kernel = certification.head_kernel(params)
  constants_wall = time.perf_counter() - start
  gaps = dict(key_gap_max=float(jnp.max(consts.heads.key_gap)), jacobian_gap_max=float(jnp.max(consts.jacobian_gap)))

  def certified(eps, mode="min", key_norm="power", form="per_pair"):
    r = certification.feature_radius(consts, eps, embed_lipschitz=lip, mode=mode, key_norm=key_norm)
    return np.asarray(certification.margin_certificate(logits, y, kernel, r, form=form))

  radius_kw = dict(embed_lipschitz=lip, eps_max=4.0 * max(config.epsilons))
  radii = np.asarray(certification.certified_radius(consts, logits, y, kernel, **radius_kw))
  radii_rigorous = np.asarray(certification.certified_radius(consts, logits, y, kernel, key_norm="closed_form",
                                                             **radius_kw))
  records.append(dict(base, kind="radius", eps=-1.0, layer=-1, radii=radii, radii_rigorous=radii_rigorous,
                      clean_accuracy=float(correct.mean())))
  for eps in tqdm(config.epsilons, desc="  epsilons", leave=False):
    t0 = time.perf_counter()
    cert = certified(eps)
    propagate_seconds = (time.perf_counter() - t0) / len(test.x)
    rigorous = certified(eps, key_norm="closed_form")
    t0 = time.perf_counter()
    broken = _pgd_broken(logits_fn, params, test.x, test.y, eps, config,
                         jax.random.fold_in(pgd_key, int(round(eps * 1e6))))
    pgd_seconds = (time.perf_counter() - t0) / len(test.x)
    radii_LxB = np.asarray(certification.layer_radii(consts, eps, embed_lipschitz=lip))
    records.append(dict(
        base, kind="certify", eps=float(eps), layer=-1, clean_accuracy=float(correct.mean()),
        # certified_accuracy: the Krylov-estimate certificate (historical field name; not rigorous);
        # certified_rigorous: the rigorous one, the headline.
        certified_accuracy=float(cert.mean()),
        certified_naive=float(certified(eps, "naive").mean()), certified_fine=float(certified(eps, "fine").mean()),
        certified_joint=float(certified(eps, "joint").mean()),
        certified_rigorous=float(rigorous.mean()),
        certified_tsuzuku=float(certified(eps, form="tsuzuku").mean()),
        pgd_accuracy=float(1.0 - broken.mean()), pgd_violations=int(np.sum((cert | rigorous) & broken)),
        correct_images=_flags(correct), certified_rigorous_images=_flags(rigorous),
        certified_krylov_images=_flags(cert), pgd_robust_images=_flags(~broken),
        seconds_per_sample=bound_seconds + propagate_seconds, pgd_seconds_per_sample=pgd_seconds,
        constants_wall_seconds=constants_wall, pgd_steps=config.pgd.steps, pgd_restarts=config.pgd.restarts,
        **certification.bound_comparison(consts, radii_LxB, correct)._asdict(), **gaps))
    if config.tightness_samples:
      idx = np.arange(min(config.tightness_samples, len(test.x)))
      sub = jax.tree_util.tree_map(lambda f: f[idx], consts)
      for row in certification.bound_tightness(
          model_config, params, test.x[idx], sub, radii_LxB[:, idx],
          key=jax.random.fold_in(tightness_key, int(round(eps * 1e6))), steps=config.layer_pgd.steps,
          restarts=config.layer_pgd.restarts):
        records.append(dict(base, kind="tightness", eps=float(eps), **row._asdict()))
  return records


def load_training(config: CertifyConfig, dataset: str):
  """(train, validation) of ``dataset``: the training images less the validation split, and the
  validation split held out of them (None when nothing is selected, ``CertifyConfig.selects``). Reads no
  test image."""
  train, _ = config_lib.load_splits(dataclasses.replace(config.data, n_test=0), dataset)
  if not config.selects:
    return train, None
  return validation_split(train, config.validation_fraction, config.data.seed)


def load_test(config: CertifyConfig, dataset: str):
  """The test images of ``dataset`` (``config.data``; as ``experiments.core.config.load_splits`` draws them).
  ``run`` calls it only after α has been selected."""
  from experiments.data import load_dataset
  data = config.data
  return load_dataset(dataset, "test", n=data.n_test, source=data.source, data_dir=data.dir, seed=data.seed,
                      holdout=data.holdout)


def run(config: CertifyConfig, workdir, *, overwrite_config: bool = False) -> list[dict]:
  """Per data set, in two phases: (1) trains every α's model on the training images less the validation
  split, certifies each on the validation split and records the α selected at every ε (when
  ``config.selects``); (2) only then loads the test images, and certifies and attacks every model on them.
  Resumes (models from their checkpoints; finished validation, selection and test points from
  results.jsonl); returns all records.

  Args:
    config: a ``CertifyConfig``.
    workdir: output directory (models under models/, records in results.jsonl).
    overwrite_config: resume although config.json differs.
  """
  config.validate()
  workdir = Path(workdir)
  wd = Workdir(workdir, KEY_FIELDS, config, overwrite_config=overwrite_config)
  # A model is done when its last record (appended last) is there.
  last = (("tightness", config.depth - 1) if config.tightness_samples else ("certify", -1))
  alphas = [float(a) for a in config.attention_bounds]

  def append(records, start):
    recorded = wd.done()
    for record in records:
      record["wall_time_s"] = time.perf_counter() - start
      if wd.key(record) not in recorded:
        wd.append(record)

  for dataset in tqdm(config.datasets, desc="certify", unit="data set"):
    records = wd.records()
    done = {r["attention_bound"] for r in records if r["dataset"] == dataset and (r.get("kind"), r.get("layer")) == last
            and r.get("eps") == float(config.epsilons[-1])}
    validated = {r["attention_bound"] for r in records if r["dataset"] == dataset and r.get("kind") == "validation"
                 and r.get("eps") == float(config.epsilons[-1])}
    selected = any(r.get("kind") == "selection" and r["dataset"] == dataset for r in records)
    todo = [a for a in alphas if a not in done]
    if not todo and (selected or not config.selects):
      continue
    # Phase 1: training images only.
    train, validation = load_training(config, dataset)
    trained = {}
    for alpha in tqdm(alphas, desc=f"  train {dataset}", unit="model", leave=False):
      if alpha in todo or (config.selects and alpha not in validated):
        trained[alpha] = _train(config, dataset, alpha, workdir, train, validation)
      if config.selects and alpha not in validated:
        start = time.perf_counter()
        base = dict(dataset=dataset, attention_bound=alpha, n_train=len(train.x), seed=config.train.seed)
        append(validation_records(config, config.model_config(dataset, alpha), trained[alpha].params, validation,
                                  jax.random.fold_in(jax.random.PRNGKey(config.train.seed), 3), base), start)
    if config.selects and not selected:
      append(selection_records(config, wd.records(), dataset), time.perf_counter())
    # Phase 2: the first read of the test images, after the selection.
    if todo:
      test = load_test(config, dataset)
      for alpha in tqdm(todo, desc=f"  test {dataset}", unit="model", leave=False):
        start = time.perf_counter()
        append(_test_records(config, dataset, alpha, trained[alpha], train, validation, test), start)
  return wd.records()
