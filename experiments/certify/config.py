"""The configs of ``experiments.certify``: ``get_config(full=False)`` and the standard grids (``standard_config``).

Override any field on the command line as ``field=value`` (``experiments.core.config.apply_overrides``).
"""
from __future__ import annotations

import dataclasses
import math
import os
import warnings

import numpy as np

from attention.certified_vit import CertifiedViTConfig
from experiments.core import config as config_lib
from experiments.certify.report import KRYLOV_LABEL, SELECTION_RULE  # noqa: F401  (re-exported)


IMAGE_GEOMETRY = {"cifar10": (32, 3, 8), "mnist": (28, 1, 7), "fashion_mnist": (28, 1, 7)}


@dataclasses.dataclass(frozen=True)
class CertifyConfig:
  """Fields (all overridable as field=value).

  datasets: data sets ('cifar10', 'mnist', 'fashion_mnist').
  attention_bounds: one model per α, with ‖A_h‖₂ ≤ α in every head (0 < α).
  epsilons: ℓ2 radii on the [0, 1] pixel scale.
  data: ``DataConfig`` (data.n_train None: the whole train split, before the validation split is held out;
    data.n_test images).
  validation_fraction: in [0, 1). With more than one α, this share of the training images (class-stratified,
    drawn with data.seed) is held out and α is selected on it at every ε (module docstring,
    ``select_attention_bound``); with one α, or 0, nothing is held out or selected.
  dim, depth, num_heads, sll_hidden, value_bound, noise_std: ``CertifiedViTConfig``.
  train: ``ClassifierTrainConfig`` (epochs — the cap when ``plateau`` is active —, batch_size, learning_rate,
    l2, warmup_epochs, seed — also the seed of the bound and attack randomness — and max_to_keep).
  plateau: ``PlateauRule``: stop a model's training on a validation-accuracy plateau (needs a validation
    split, ``selects``); window 0 (the default) trains every epoch.
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
  validation_fraction: float = 0.1
  dim: int = 64
  depth: int = 3
  num_heads: int = 2
  sll_hidden: int = 128
  value_bound: float = 1.0
  noise_std: float = 0.0
  train: config_lib.ClassifierTrainConfig = config_lib.ClassifierTrainConfig(
      epochs=30, batch_size=64, learning_rate=3e-3, l2=0.0, warmup_epochs=2, seed=0)
  plateau: config_lib.PlateauRule = config_lib.PlateauRule()
  power_iters: int = 50
  chunk: int = 100
  pgd: config_lib.AttackBudget = config_lib.AttackBudget(steps=20, restarts=1)
  tightness_samples: int = 8
  layer_pgd: config_lib.AttackBudget = config_lib.AttackBudget(steps=60, restarts=2)

  def validate(self) -> None:
    """Raises ValueError naming the field and its allowed range."""
    errors = config_lib.FieldErrors()
    errors.check(lambda: config_lib.check_common(self, dataset_fields=()))
    bad = [d for d in self.datasets if d not in IMAGE_GEOMETRY]
    if not self.datasets or bad:
      errors.add(f"datasets must be among {sorted(IMAGE_GEOMETRY)}, got {self.datasets}")
    if not self.attention_bounds or any(not a > 0 for a in self.attention_bounds):
      errors.add(f"attention_bounds must be > 0, got {self.attention_bounds}")
    if not self.epsilons or any(not (np.isfinite(e) and e > 0) for e in self.epsilons):
      errors.add(f"epsilons must be finite and > 0, got {self.epsilons}")
    if self.data.n_test is None or self.data.n_test < 1:
      errors.add(f"data.n_test must be ≥ 1, got {self.data.n_test}")
    if not (math.isfinite(self.validation_fraction) and 0 <= self.validation_fraction < 1):
      errors.add(f"validation_fraction must be in [0, 1), got {self.validation_fraction!r}")
    for name in ("chunk", "power_iters"):
      if getattr(self, name) < 1:
        errors.add(f"{name} must be ≥ 1, got {getattr(self, name)}")
    if self.tightness_samples < 0:
      errors.add(f"tightness_samples must be ≥ 0, got {self.tightness_samples}")
    errors.check(lambda: self.plateau.validate("plateau"))
    if self.plateau.active and not self.selects:
      errors.add("plateau.window > 0 needs a validation split: set validation_fraction > 0 with more than "
                  "one α (or plateau.window=0)")
    if not errors.messages:   # the model's own checks (dimensions, heads) at the first α, on fields in range
      errors.check(lambda: self.model_config("cifar10", self.attention_bounds[0]).validate())
    errors.raise_any()

  @property
  def selects(self) -> bool:
    """Whether α is selected on a validation split (more than one α and validation_fraction > 0)."""
    return len(self.attention_bounds) > 1 and self.validation_fraction > 0

  def model_config(self, dataset: str, attention_bound: float) -> CertifiedViTConfig:
    image_size, channels, patch = IMAGE_GEOMETRY[dataset]
    return CertifiedViTConfig(num_classes=10, image_size=image_size, channels=channels, patch_size=patch,
                              dim=self.dim, depth=self.depth, num_heads=self.num_heads,
                              sll_hidden=self.sll_hidden, attention_bound=float(attention_bound),
                              value_bound=self.value_bound, noise_std=self.noise_std)


STANDARD = ("cifar10",)


# The standard grid's size on the full training files (module docstring; sized by measurement, see
# standard_config).
STANDARD_EPOCHS_FULL = 20          # the cap; the plateau rule below stops earlier, never before 10 epochs


STANDARD_VALIDATION_FULL = 0.02    # 1,000 of the 50,000 training images: α selection and the plateau rule


STANDARD_PLATEAU = config_lib.PlateauRule(min_epochs=10, window=3, min_gain=0.005)


def standard_config(dataset: str = "cifar10") -> CertifyConfig:
  """The standard CPU grid: CIFAR-10, α ∈ {1/16, 1/4, 1}, α selected on a validation split.

  With ATTN_DATA_DIR set: the full CIFAR-10 training files from it (``data.source='dir'``, all 50,000
  images; 2 % = 1,000 of them held out as the validation split, so 49,000 trained on), each α trained until
  its validation accuracy plateaus (``STANDARD_PLATEAU``: at least 10 epochs, then stop once it gains less
  than 0.5 points over 3 epochs) with a cap of ``STANDARD_EPOCHS_FULL`` = 20 epochs (the cosine schedule
  runs over the cap), α selected on the same validation split, 1,000 test images (the npz copy of
  docs/data.md holds only the first 1,000 official test images; the official python batches hold all
  10,000, of which a class-balanced 1,000 are drawn). Time: the run's summary gives the seconds of every
  epoch (docs/certify_summary.md; about 14 s per epoch on 2 idle CPU cores). Without ATTN_DATA_DIR it falls
  back, with a RuntimeWarning, to the embedded subset (1,500 train images, 10 % held out, 30 epochs, 500 test
  images). Setting ``data.dir`` alone does not switch to the full files: set
  ATTN_DATA_DIR.

  Raises:
    ValueError: an unknown ``dataset``.
  """
  from experiments.data.loader import DATA_DIR_ENV
  if dataset not in STANDARD:
    raise ValueError(f"the standard certify config's data set must be one of {STANDARD}, got {dataset!r}")
  full_files = bool(os.environ.get(DATA_DIR_ENV))
  if not full_files:
    warnings.warn(f"{DATA_DIR_ENV} is not set: the standard certify grid falls back to the embedded CIFAR-10 "
                  "subset (1,500 training images, 500 test images) instead of the full training files; set it "
                  "to the directory of the full data files (docs/data.md)", RuntimeWarning, stacklevel=2)
  epochs = STANDARD_EPOCHS_FULL if full_files else 30
  return CertifyConfig(
      datasets=(dataset,), attention_bounds=(0.0625, 0.25, 1.0), epsilons=(0.01, 0.02, 0.05, 0.1),
      data=config_lib.DataConfig(n_train=None, n_test=1000 if full_files else 500,
                                 source="dir" if full_files else "embedded"),
      validation_fraction=STANDARD_VALIDATION_FULL if full_files else 0.1,
      train=config_lib.ClassifierTrainConfig(epochs=epochs, batch_size=64, learning_rate=3e-3, l2=0.0,
                                             warmup_epochs=min(2, epochs - 1), seed=0),
      plateau=STANDARD_PLATEAU if full_files else config_lib.PlateauRule(),
      power_iters=50, pgd=config_lib.AttackBudget(steps=20, restarts=1), tightness_samples=8)


def get_config(full: bool = False, standard=None) -> CertifyConfig:
  """The quick CPU config; ``standard`` (True or 'cifar10'): the standard CPU grid (``standard_config``);
  or with ``full`` the full-data one (``data.source=dir``, ``ATTN_DATA_DIR``: 10,000 train / 1,000 test
  images, 60 epochs, stronger attacks; sized for an accelerator)."""
  return config_lib.select_config(full, standard, quick=CertifyConfig, full_config=_full_config,
                                  standard_config=standard_config, datasets=STANDARD)


def _full_config() -> CertifyConfig:
  """The full-size config (``--full``)."""
  return CertifyConfig(data=config_lib.DataConfig(n_train=10000, n_test=1000, source="dir"),
                       validation_fraction=0.05,
                       train=config_lib.ClassifierTrainConfig(epochs=60, batch_size=64, learning_rate=3e-3,
                                                              l2=0.0, warmup_epochs=2, seed=0),
                       power_iters=100, pgd=config_lib.AttackBudget(steps=50, restarts=5), tightness_samples=64)
