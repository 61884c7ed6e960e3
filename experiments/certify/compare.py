"""LoFAST, CROWN and CROWN + LoFAST on the same test images of a certification run's models.

  python -m experiments.certify.compare --workdir DIR [field=value ...]

DIR is an ``experiments.certify`` workdir whose run has finished (its models' orbax checkpoints, its test
records and, with several α, the α selected on the validation split at every ε). For every ε of
``CompareConfig.epsilons`` the model compared is the one the certification's headline reads at that ε (the
α selected on the validation split, or the only α). On the first ``n_images`` test images (the
certification's own test images, in their order), in chunks of ``chunk`` images, it certifies each image
with each method:

  lofast        LoFAST's rigorous margin certificate (closed-form key-side norms, no Krylov estimate;
                ``attention.certification``), the certification's headline certificate;
  crown         CROWN alone (``attention.crown_vit.margin_lower_bounds``, CROWN intermediate bounds at
                every node a relaxation reads, the ℓ2 ball ∩ the pixel box [0, 1]);
  crown_lofast  CROWN + LoFAST, "LoFAST inside CROWN": LoFAST's rigorous ball of each attention block's
                output, at the smaller of LoFAST's and CROWN's input radius, tightens CROWN's bounds; the
                certificate is the larger of CROWN's and the tightened passes' margins, so never looser than
                CROWN (docs/certification.md#crown--lofast-how-they-compose). Its records carry
                ``composition``; a workdir with chunks of the earlier composition (the ball replaced CROWN's
                bounds) is refused until ``--overwrite_config`` moves them aside;
  crown_ibp     CROWN's final backward pass over interval (IBP) intermediate bounds: the cheaper option
                (not in the default methods).

Each chunk's record holds per-image 0/1 certified flags, the margin lower bounds (the smallest per image, and
per class: ``margin_lower_per_class``), the smallest margin per class that targeted PGD-L2 reaches on the same
image (``pgd_margins``) with the count of bounds above it (``margin_violations``, must be 0: a bound above a
reached margin is unsound), and the wall seconds of the certificate alone; the first chunk of each method in a
process includes compilation (ε is traced, so one compilation serves every radius) and is excluded from the
seconds per image.
Every certified image is checked against the certification run's PGD-L2 flags (``pgd_robust_images``): a
certified image that PGD broke is a soundness violation, counted in the record (it must be 0).

Records go to DIR/crown/results.jsonl (resumable per chunk, and extensible: rerun with more images, another
method or another radius and only the missing chunks run); ``experiments.certify.compare_report`` draws the
table, the figure and the paired comparisons, and the certification's claim rows read them.

Source: Havens et al., ICML 2024 (LoFAST; CROWN + LoFAST, §5); Zhang et al., NeurIPS 2018 (CROWN); Shi et
al., ICLR 2020 (softmax and bilinear relaxations).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from attention import certification, crown_vit
from attention.certified_vit import embedding_lipschitz
from experiments.certify.methods import LABELS, SUBDIR
from experiments.core import config as config_lib
from experiments.core.machine import one_line
from experiments.core.workdir import Workdir, read_records

METHODS = tuple(LABELS)
KEY_FIELDS = ("eps", "method", "start", "stop")
# Grid fields: a record is keyed by (ε, method, first image), so a workdir resumes, and grows, under other
# values of these (more images, another method, another radius of the run).
GRID = frozenset({"n_images", "methods", "epsilons"})


@dataclasses.dataclass(frozen=True)
class CompareConfig:
  """Fields (all overridable as field=value).

  n_images: the first n test images of the certification run (≥ 1, at most its test set).
  chunk: images per batch and per record (≥ 1).
  epsilons: ℓ2 radii on the [0, 1] pixel scale (each one of the certification run's radii).
  methods: from ``METHODS``.
  dataset: the certification run's data set.
  """
  n_images: int = 100
  chunk: int = 10
  epsilons: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1)
  methods: tuple[str, ...] = ("lofast", "crown", "crown_lofast")
  dataset: str = "cifar10"

  def validate(self) -> None:
    """Raises ValueError naming the field and its allowed range."""
    for name in ("n_images", "chunk"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be ≥ 1, got {getattr(self, name)}")
    if not self.epsilons or any(not (math.isfinite(e) and e > 0) for e in self.epsilons):
      raise ValueError(f"epsilons must be finite and > 0, got {self.epsilons}")
    bad = [m for m in self.methods if m not in METHODS]
    if not self.methods or bad:
      raise ValueError(f"methods must be among {METHODS}, got {self.methods}")


def _certify_config(workdir: Path):
  """The certification run's config; ValueError for a workdir of another experiment."""
  from experiments.certify.config import CertifyConfig
  from experiments.core.workdir import read_config
  from experiments.report.adapters import read_workdir_config
  if (workdir / "config.json").exists() and "attention_bounds" not in read_config(workdir / "config.json"):
    raise ValueError(f"{workdir} is not an experiments.certify workdir (its config.json has no attention_bounds)")
  return read_workdir_config(workdir, CertifyConfig, "certify")


def _headline_alpha(records, dataset: str, eps: float) -> float:
  """The α the certification's headline reads at ε (selected on validation, or the only α).

  Raises:
    ValueError: no certify record at ε, or several α and no selection."""
  from experiments.certify.report import selected_alpha
  if not any(r.get("kind") == "certify" and r["dataset"] == dataset and math.isclose(r["eps"], eps)
             for r in records):
    raise ValueError(f"the certification workdir has no test record at ε = {eps:g} of {dataset}: let its run "
                     "finish (python -m experiments.certify --workdir DIR ...) before comparing")
  alpha, how = selected_alpha(records, dataset, eps)
  if alpha is None:
    raise ValueError(f"several α and no validation selection at ε = {eps:g}: no model is the headline")
  return alpha


def _pgd_robust(records, dataset: str, alpha: float, eps: float) -> np.ndarray:
  rec = next(r for r in records if r.get("kind") == "certify" and r["dataset"] == dataset
             and float(r["attention_bound"]) == alpha and math.isclose(r["eps"], eps))
  return np.asarray(rec["pgd_robust_images"], bool)


# The CROWN + LoFAST composition its records were made with (``attention.crown_vit.margin_lower_bounds``).
COMPOSITION = "lofast_inside_crown"


def _certified(method, model_config, params, x, y, eps, key, power_iters):
  """(per-image certified flags, margin lower bounds [n, C − 1] (NaN for LoFAST, which bounds no single
  margin)) of one chunk."""
  if method == "lofast":
    logits, consts = certification.layer_constants(model_config, params, x, key=key, power_iters=power_iters)
    r = certification.feature_radius(consts, eps, embed_lipschitz=embedding_lipschitz(params),
                                     key_norm="closed_form")
    flags = certification.margin_certificate(logits, y, certification.head_kernel(params), r)
    return np.asarray(flags, bool), np.full((len(y), model_config.num_classes - 1), np.nan)
  margins = np.asarray(crown_vit.margin_lower_bounds(
      model_config, params, x, y, eps, lofast=method == "crown_lofast",
      intermediate="ibp" if method == "crown_ibp" else "crown", key=key, power_iters=power_iters))
  return margins.min(axis=1) > 0, margins   # all lower bounds > 0 over the ball, x included: certified


def _other_classes(values_BxC, y_B) -> np.ndarray:
  """values[b, j] for the classes j ≠ y_b, in class order: [B, C − 1] (the order of the margin bounds)."""
  c = values_BxC.shape[1]
  keep = np.arange(c)[None, :] != np.asarray(y_B)[:, None]
  return np.asarray(values_BxC)[keep].reshape(len(y_B), c - 1)


def pgd_margins(apply_fn, params, x, y, eps, *, key, steps: int = 20) -> np.ndarray:
  """Per image and class j ≠ y, the smallest margin f_y − f_j that targeted PGD-L2 finds in the ε-ball ∩ [0, 1]
  (clean point included), [n, C − 1] in class order: an upper bound on the true minimum, so every sound margin
  lower bound must lie at or below it, class by class.

  One targeted run (cross-entropy towards j, ``attacks.pgd_l2``, α = 2.5ε/steps, random start) per class.
  """
  from attacks import pgd_l2
  logits_fn = jax.tree_util.Partial(apply_fn, params)
  x, y = jnp.asarray(x), jnp.asarray(y)

  def margins(v):
    f = np.asarray(logits_fn(v), np.float64)
    return f[np.arange(len(y)), np.asarray(y)][:, None] - f       # [n, C]: f_y − f_j

  best = margins(x)
  c = best.shape[1]
  for j in range(c):
    # images of class j attack another class here (their column j is f_y − f_y, dropped below)
    target = jnp.where(y == j, (j + 1) % c, j)
    res = pgd_l2(logits_fn, x, y, eps=eps, key=jax.random.fold_in(key, j), targeted=True, target=target,
                 alpha=2.5 * eps / steps, steps=steps, random_start=True)
    best[:, j] = np.minimum(best[:, j], margins(res.x_adv)[:, j])
  return _other_classes(best, y)


def run(config: CompareConfig, workdir, *, overwrite_config: bool = False) -> list[dict]:
  """Certifies the first ``n_images`` test images with every method at every ε (module docstring); resumes
  per chunk; returns all records.

  Raises:
    ValueError: a bad config, a workdir without a finished certification run, an ε the run did not
      certify, or more images than its test set holds.
  """
  from experiments.certify.run import load_test
  from experiments.report.adapters import certified_vit
  config.validate()
  workdir = Path(workdir)
  cert_config = _certify_config(workdir)
  records = read_records(workdir)
  if config.dataset not in cert_config.datasets:
    raise ValueError(f"dataset must be one of the run's data sets {cert_config.datasets}, got {config.dataset!r}")
  missing = [e for e in config.epsilons if not any(math.isclose(e, c) for c in cert_config.epsilons)]
  if missing:
    raise ValueError(f"epsilons {missing} are not radii of the certification run {cert_config.epsilons}")
  # the run's own radii (a near-equal value would key a second row of the same ε)
  config = dataclasses.replace(config, epsilons=tuple(next(float(c) for c in cert_config.epsilons
                                                           if math.isclose(e, c)) for e in config.epsilons))
  alphas = {eps: _headline_alpha(records, config.dataset, eps) for eps in config.epsilons}
  test = load_test(cert_config, config.dataset)
  if config.n_images > len(test.x):
    raise ValueError(f"n_images must be ≤ the run's {len(test.x)} test images, got {config.n_images}")
  wd = Workdir(workdir / SUBDIR, KEY_FIELDS, config, overwrite_config=overwrite_config, bookkeeping=GRID)
  stale = [r for r in wd.records() if r.get("method") == "crown_lofast" and r.get("composition") != COMPOSITION]
  if stale:
    raise ValueError(f"{wd.results_path} holds {len(stale)} CROWN + LoFAST chunk(s) of the earlier composition "
                     "(LoFAST's ball replacing CROWN's bounds, looser than CROWN alone): rerun with "
                     "--overwrite_config to move the comparison's records aside and recompute them")
  models = {a: certified_vit(workdir, config.dataset, a) for a in sorted(set(alphas.values()))}
  key = jax.random.fold_in(jax.random.PRNGKey(cert_config.train.seed), 7)
  starts = range(0, config.n_images, config.chunk)
  todo = [(s, eps, m) for s in starts for eps in config.epsilons for m in config.methods
          if wd.key(dict(eps=float(eps), method=m, start=s, stop=min(s + config.chunk, config.n_images)))
          not in wd.done()]
  compiled, machine, attacked_at = set(), one_line(), {}
  for start, eps, method in tqdm(todo, desc="certify: LoFAST / CROWN / CROWN + LoFAST", unit="chunk"):
    alpha = alphas[eps]
    stop = min(start + config.chunk, config.n_images)
    x, y = jnp.asarray(test.x[start:stop]), jnp.asarray(test.y[start:stop])
    model_config = cert_config.model_config(config.dataset, alpha)
    params = models[alpha].params
    t0 = time.perf_counter()
    flags, bounds = _certified(method, model_config, params, x, y, float(eps), jax.random.fold_in(key, start),
                               cert_config.power_iters)
    seconds = time.perf_counter() - t0
    robust = _pgd_robust(records, config.dataset, alpha, eps)[start:stop]
    if (start, eps) not in attacked_at:   # one attack per chunk and ε serves every method
      attacked_at[(start, eps)] = pgd_margins(models[alpha].apply_fn, params, x, y, float(eps),
                                              key=jax.random.fold_in(key, 10_000 + start))
    attacked = attacked_at[(start, eps)]
    # a bound above a margin PGD reached (beyond float32 rounding of the logits) is unsound
    above = bounds > attacked + 1e-4 * np.maximum(1.0, np.abs(attacked))
    wd.append(dict(
        eps=float(eps), method=method, start=int(start), stop=int(stop), dataset=config.dataset,
        attention_bound=float(alpha), certified_images=[int(v) for v in flags],
        margin_lower=[float(v) for v in np.min(bounds, axis=1)],
        margin_lower_per_class=[[float(v) for v in row] for row in bounds],
        pgd_margins=[[float(v) for v in row] for row in attacked],
        margin_violations=int(np.sum(above)),
        pgd_robust_images=[int(v) for v in robust],
        pgd_violations=int(np.sum(flags & ~robust)), seconds=seconds,
        compiled_first=method not in compiled, machine=machine,
        **({"composition": COMPOSITION} if method == "crown_lofast" else {})))
    compiled.add(method)   # ε is traced: one compilation per method serves every radius
  return wd.records()


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(allow_abbrev=False, 
      prog="python -m experiments.certify.compare", description=__doc__.split("\n")[0],
      epilog="Fields (field=value; defaults in CompareConfig): " + " ".join(
          f"{f.name}={f.default!r}" for f in dataclasses.fields(CompareConfig)) + ". methods from "
          f"{METHODS}. Records and the report go to DIR/{SUBDIR}/.")
  parser.add_argument("--workdir", required=True, help="a finished experiments.certify workdir")
  parser.add_argument("--overwrite_config", action="store_true",
                      help="move results of another comparison config aside and start afresh")
  parser.add_argument("overrides", nargs="*", help="field=value")
  args = parser.parse_args(argv)
  from experiments.certify.compare_report import write_report
  from experiments.core.cli import user_errors
  with user_errors():   # one line and status 2 for a user's error; Ctrl-C keeps the finished batches
    run(config_lib.apply_overrides(CompareConfig(), args.overrides), args.workdir,
        overwrite_config=args.overwrite_config)
    print(write_report(args.workdir))


if __name__ == "__main__":
  main()
