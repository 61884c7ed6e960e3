"""Certified ℓ2 robustness of small Lipschitz-controlled ViTs with local attention sensitivity bounds.

Usage:
  python -m experiments.certify --workdir /tmp/certify_run [--full] [field=value ...]

For every data set and every attention-norm bound α (one ``CertifiedViT`` each, ‖A_h‖₂ ≤ α), trains the
model on the embedded subset (CIFAR-10: 1,500 train images; MNIST: 2,000), then on the test subset (500
images) measures, for ε ∈ {0.01, 0.02, 0.05, 0.1} (pixel-space ℓ2, pixels in [0, 1]):
  clean accuracy; certified accuracy with the per-pair margin certificate and the layer bound
  min(Σ_h min(naive, fine), joint) (``attention.certification``), and with each bound alone, with the fully
  rigorous variant (closed-form key-side norm) and with the Tsuzuku form; PGD-L2 robust accuracy (an
  upper bound on the true robust accuracy); seconds per sample; how often and by how much the fine-grained
  bound alone beats the naive one; and on a few images the bound-to-attack tightness ratio of every
  attention layer at the radius the certificate propagates to it.
Quick config: about 15 minutes of CPU time on 2 cores (6 models: training ~8 min, bounds + attacks
~6.5 min; 0.06 s per image for the certificate of all 3 layers). Resumes: models from orbax checkpoints,
finished (data set, α) points from results.jsonl. Writes config.json, results.jsonl,
certified_accuracy.png, tightness.png and summary.md (``experiments.certify_report``).

Source: Havens et al. (ICML 2024), docs/theory.md#certification; margin certificate: Tsuzuku et al. (NeurIPS 2018).
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from attacks import pgd_l2
from attention import certification
from attention.certified_vit import CertifiedViT, CertifiedViTConfig, embedding_lipschitz
from experiments import config as config_lib
from experiments.classifier_training import accuracy, train_classifier
from experiments.workdir import Workdir

KEY_FIELDS = ("dataset", "attention_bound", "kind", "eps", "layer")
IMAGE_GEOMETRY = {"cifar10": (32, 3, 8), "mnist": (28, 1, 7), "fashion_mnist": (28, 1, 7)}


@dataclasses.dataclass(frozen=True)
class CertifyConfig:
  """Fields (all overridable as field=value).

  datasets: data sets ('cifar10', 'mnist', 'fashion_mnist').
  attention_bounds: one model per α, with ‖A_h‖₂ ≤ α in every head (0 < α).
  epsilons: ℓ2 radii on the [0, 1] pixel scale.
  data: ``DataConfig`` (data.n_train None: the whole train subset; data.n_test images).
  dim, depth, num_heads, sll_hidden, value_bound, noise_std: ``CertifiedViTConfig``.
  train: ``ClassifierTrainConfig`` (epochs, batch_size, learning_rate, l2, warmup_epochs, seed — also the
    seed of the bound and attack randomness — and max_to_keep).
  power_iters: Krylov (Lanczos) iterations for the key-side and layer Jacobian norms.
  chunk: images per certification / attack batch.
  pgd: ``AttackBudget`` of PGD-L2 on the images, α = 2.5ε/steps; restart 0 starts at x, the others at
    random points of the ε-ball; a sample counts as broken if any restart breaks it.
  tightness_samples, layer_pgd: images and attack budget of the per-layer bound-to-attack tightness ratio.
  """
  datasets: tuple[str, ...] = ("cifar10", "mnist")
  attention_bounds: tuple[float, ...] = (0.0625, 0.25, 1.0)
  epsilons: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1)
  data: config_lib.DataConfig = config_lib.DataConfig(n_train=None, n_test=500)
  dim: int = 64
  depth: int = 3
  num_heads: int = 2
  sll_hidden: int = 128
  value_bound: float = 1.0
  noise_std: float = 0.0
  train: config_lib.ClassifierTrainConfig = config_lib.ClassifierTrainConfig(
      epochs=30, batch_size=64, learning_rate=3e-3, l2=0.0, warmup_epochs=2, seed=0)
  power_iters: int = 50
  chunk: int = 100
  pgd: config_lib.AttackBudget = config_lib.AttackBudget(steps=20, restarts=1)
  tightness_samples: int = 8
  layer_pgd: config_lib.AttackBudget = config_lib.AttackBudget(steps=60, restarts=2)

  def validate(self) -> None:
    """Raises ValueError naming the field and its allowed range."""
    config_lib.check_common(self, dataset_fields=())
    bad = [d for d in self.datasets if d not in IMAGE_GEOMETRY]
    if not self.datasets or bad:
      raise ValueError(f"datasets must be among {sorted(IMAGE_GEOMETRY)}, got {self.datasets}")
    if not self.attention_bounds or any(not a > 0 for a in self.attention_bounds):
      raise ValueError(f"attention_bounds must be > 0, got {self.attention_bounds}")
    if not self.epsilons or any(not (np.isfinite(e) and e > 0) for e in self.epsilons):
      raise ValueError(f"epsilons must be finite and > 0, got {self.epsilons}")
    if self.data.n_test is None or self.data.n_test < 1:
      raise ValueError(f"data.n_test must be ≥ 1, got {self.data.n_test}")
    for name in ("chunk", "power_iters"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be ≥ 1, got {getattr(self, name)}")
    if self.tightness_samples < 0:
      raise ValueError(f"tightness_samples must be ≥ 0, got {self.tightness_samples}")
    self.model_config("cifar10", self.attention_bounds[0]).validate()

  def model_config(self, dataset: str, attention_bound: float) -> CertifiedViTConfig:
    image_size, channels, patch = IMAGE_GEOMETRY[dataset]
    return CertifiedViTConfig(num_classes=10, image_size=image_size, channels=channels, patch_size=patch,
                              dim=self.dim, depth=self.depth, num_heads=self.num_heads,
                              sll_hidden=self.sll_hidden, attention_bound=float(attention_bound),
                              value_bound=self.value_bound, noise_std=self.noise_std)



def get_config(full: bool = False) -> CertifyConfig:
  """The quick CPU config, or with ``full`` the full-data one (``data.source=dir``, ``ATTN_DATA_DIR``:
  10,000 train / 1,000 test images, 60 epochs, stronger attacks; sized for an accelerator)."""
  if not full:
    return CertifyConfig()
  return CertifyConfig(data=config_lib.DataConfig(n_train=10000, n_test=1000, source="dir"),
                       train=config_lib.ClassifierTrainConfig(epochs=60, batch_size=64, learning_rate=3e-3,
                                                              l2=0.0, warmup_epochs=2, seed=0),
                       power_iters=100, pgd=config_lib.AttackBudget(steps=50, restarts=5), tightness_samples=64)


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


def _model_records(config: CertifyConfig, dataset: str, alpha: float, workdir: Path, data) -> list[dict]:
  train, test = data
  model_config = config.model_config(dataset, alpha)
  model = CertifiedViT(model_config)
  key = jax.random.PRNGKey(config.train.seed)
  bounds_key, pgd_key, tightness_key = (jax.random.fold_in(key, i) for i in range(3))
  base = dict(dataset=dataset, attention_bound=float(alpha), n_train=len(train.x), n_test=len(test.x),
              seed=config.train.seed)
  start = time.perf_counter()
  result = train_classifier(model, train.x, train.y, config.train,
                            workdir / "models" / f"{dataset}_alpha{alpha:g}")
  train_seconds = time.perf_counter() - start
  params = result.params
  logits_fn = lambda p, v: model.apply({"params": p}, v)
  apply_fn = jax.jit(logits_fn)
  records = [dict(base, kind="train", eps=-1.0, layer=-1, clean_accuracy=accuracy(apply_fn, params, test.x, test.y),
                  train_accuracy=accuracy(apply_fn, params, train.x, train.y), train_seconds=train_seconds,
                  epochs=config.train.epochs, history=[h._asdict() for h in result.history])]

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
    t0 = time.perf_counter()
    broken = _pgd_broken(logits_fn, params, test.x, test.y, eps, config,
                         jax.random.fold_in(pgd_key, int(round(eps * 1e6))))
    pgd_seconds = (time.perf_counter() - t0) / len(test.x)
    radii_LxB = np.asarray(certification.layer_radii(consts, eps, embed_lipschitz=lip))
    records.append(dict(
        base, kind="certify", eps=float(eps), layer=-1, clean_accuracy=float(correct.mean()),
        certified_accuracy=float(cert.mean()),
        certified_naive=float(certified(eps, "naive").mean()), certified_fine=float(certified(eps, "fine").mean()),
        certified_joint=float(certified(eps, "joint").mean()),
        certified_rigorous=float(certified(eps, key_norm="closed_form").mean()),
        certified_tsuzuku=float(certified(eps, form="tsuzuku").mean()),
        pgd_accuracy=float(1.0 - broken.mean()), pgd_violations=int(np.sum(cert & broken)),
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


def run(config: CertifyConfig, workdir, *, overwrite_config: bool = False) -> list[dict]:
  """Trains, certifies and attacks every (data set, α) model not yet recorded; returns all records.

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
  done = {(r["dataset"], r["attention_bound"]) for r in wd.records()
          if (r.get("kind"), r.get("layer")) == last and r.get("eps") == float(config.epsilons[-1])}
  points = [(d, float(a)) for d in config.datasets for a in config.attention_bounds]
  for dataset, alpha in tqdm([p for p in points if p not in done], desc="certify", unit="model"):
    data = config_lib.load_splits(config.data, dataset)
    start = time.perf_counter()
    records = _model_records(config, dataset, alpha, workdir, data)
    recorded = wd.done()
    for record in records:
      record["wall_time_s"] = time.perf_counter() - start
      if wd.key(record) not in recorded:
        wd.append(record)
  return wd.records()


def main(argv=None) -> None:
  from experiments import certify_report
  config_lib.experiment_main("Certified ℓ2 robustness of Lipschitz ViTs with local attention bounds.",
                             get_config, run, certify_report.write_report, argv)


if __name__ == "__main__":
  main()
