"""The configs of ``experiments.diff_attention``: ``get_config(full=False)`` and the standard grids
(``standard_config``).

Override any field on the command line as ``field=value`` (``experiments.core.config.apply_overrides``).
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from experiments.core import config as config_lib
from experiments.trainers import vit as vit_training
from experiments.trainers.vit import TrainViTConfig


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
  primary_eps_255: ε* frozen before the seeds are trained (units of 1/255, within the eps_255 grid), at which
    the claim rows read the ASRs (``experiments.diff_attention.claims.frozen_point``); None recomputes ε*
    from the records (where the depth-1 ViT's mean PGD ASR reaches 0.5). Changes no record.
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
  primary_eps_255: Optional[float] = None

  def validate(self) -> None:
    """Raises ValueError naming every field out of its allowed range, all in one message."""
    errors = []
    try:
      super().validate()
    except ValueError as e:
      errors.append(str(e))
    if not self.eps_255 or any(not np.isfinite(e) or e <= 0 for e in self.eps_255):
      errors.append(f"eps_255 must be finite budgets > 0 (units of 1/255), got {self.eps_255}")
    if list(self.eps_255) != sorted(self.eps_255):
      errors.append(f"eps_255 must be increasing, got {self.eps_255}")
    if self.attack_samples is not None and self.attack_samples < 1:
      errors.append(f"attack_samples must be >= 1 or None, got {self.attack_samples}")
    for name in ("attack_batch_size", "apgd_restarts", "cw_search_steps", "lipschitz_samples",
                 "alignment_samples", "alignment_chunk", "cw_samples"):
      if getattr(self, name) < 1:
        errors.append(f"{name} must be >= 1, got {getattr(self, name)}")
    for name in ("pgd_steps", "apgd_steps", "cw_steps"):
      if getattr(self, name) < 0:
        errors.append(f"{name} must be >= 0, got {getattr(self, name)}")
    if not self.pgd_step_ratio > 0:
      errors.append(f"pgd_step_ratio must be > 0, got {self.pgd_step_ratio}")
    if any(not e > 0 for e in self.cw_l2_grid):
      errors.append(f"cw_l2_grid must hold L2 budgets > 0, got {self.cw_l2_grid}")
    grid_ok = bool(self.eps_255) and all(np.isfinite(e) and e > 0 for e in self.eps_255)
    if self.lipschitz_layer_eps_255 not in self.eps_255:
      errors.append(f"lipschitz_layer_eps_255 must be one of eps_255 {self.eps_255} (its per-sample "
                    f"logits estimates feed the Theorem 3 comparison), got {self.lipschitz_layer_eps_255}")
    if self.alignment_samples > self.lipschitz_samples:
      errors.append(f"alignment_samples ({self.alignment_samples}) must be <= lipschitz_samples "
                    f"({self.lipschitz_samples}): the alignment images are the first Lipschitz images")
    if len(self.crossover_eps_255) != 2 or any(e not in self.eps_255 for e in self.crossover_eps_255):
      errors.append(f"crossover_eps_255 must be two values of eps_255 {self.eps_255}, "
                    f"got {self.crossover_eps_255}")
    if grid_ok and self.primary_eps_255 is not None and not (
        np.isfinite(self.primary_eps_255) and min(self.eps_255) <= self.primary_eps_255 <= max(self.eps_255)):
      errors.append(f"primary_eps_255 must be None or lie within the eps_255 grid [{min(self.eps_255):g}, "
                    f"{max(self.eps_255):g}] (units of 1/255), got {self.primary_eps_255}")
    if set(self.models) != set(vit_training.MODELS):
      errors.append(f"models must be both {vit_training.MODELS} (the comparison needs the pair), "
                    f"got {self.models}")
    if errors:
      raise config_lib.ConfigErrors(errors)


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
  return config_lib.select_config(full, standard, quick=DiffAttentionConfig, full_config=_full_config,
                                  standard_config=standard_config, datasets=STANDARD)


def _full_config() -> DiffAttentionConfig:
  """The full-size config (``--full``)."""
  base = vit_training.full_config()
  fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(TrainViTConfig)}
  return DiffAttentionConfig(**fields, attack_samples=1000, attack_batch_size=250, apgd_steps=100,
                             cw_depths=(1, 2, 4, 8, 12), cw_samples=500, cw_steps=1000, cw_search_steps=9,
                             cw_l2_grid=(0.05, 0.1, 0.25, 0.5, 1.0), lipschitz_samples=500,
                             alignment_samples=64)
