"""The configs of ``experiments.clip``: the quick smoke run (``CLIPExperimentConfig()``), the standard CPU grid
(``standard_config``) and the accelerator grid (``--full``).

Override any field on the command line as ``field=value`` (``experiments.core.config.apply_overrides``).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

import numpy as np

from attention.clip import CLIPConfig, WordTokenizer, check_templates, prompt_table
from attention.vit import ViTConfig
from experiments.core import config as config_lib
from experiments.trainers.vit import parse_lambda_init

MODELS = ("clip", "diffclip")
# Caption templates: CLIP's zero-shot prompt style (Radford et al. 2021, §3.1.4), one caption per image and step.
TEMPLATES = ("a photo of a {}.", "a blurry photo of a {}.", "a low resolution photo of the {}.",
             "a picture of a small {}.", "an image of the {}.", "a close-up photo of a {}.")
# The data set's class names as captions read them (CIFAR-10's label order).
CIFAR10_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


@dataclasses.dataclass(frozen=True)
class CLIPExperimentConfig:
  """Fields (all overridable as field=value).

  data: ``DataConfig`` of CIFAR-10 (n_train / n_test class-balanced subsets; data.source 'embedded' for the
    shipped subset, 'dir' for the full files through ATTN_DATA_DIR).
  templates: caption templates, each with one '{}' for the class name; a training image's caption is a
    template drawn per step; the zero-shot class embedding averages all of them.
  max_length: caption length in words (padding to it).
  patch_size, dim, depth, num_heads, mlp_ratio: the image tower (``attention.vit.ViTConfig``; 2H standard heads
    vs H differential heads, as in the differential-attention grid).
  lambda_init: DiffCLIP's λ_init (a float in [0, 1) or "depth"), both towers.
  text_dim, text_depth, text_heads: the text tower; embed_dim: the shared embedding width.
  train: ``ClassifierTrainConfig`` (epochs, batch_size, learning_rate, l2, warmup_epochs, seed, augment); seed
    pair k trains both models with train.seed + k (the same initial key, data order and captions).
  seeds: CLIP / DiffCLIP pairs trained (≥ 10 for a verdict, ``verdicts.MIN_SEEDS``).
  eps_255: PGD-L∞ budgets in units of 1/255 (pixel scale [0, 1]); pgd_steps, pgd_step_ratio: PGD steps of
    α = ratio · ε with a random start.
  patch_sizes: patch sides in pixels; patch_steps, patch_alpha: sign-gradient steps of ``patch_alpha`` on the
    pixel scale inside an unbounded patch at a random position per image (``attacks.patch``).
  attack_samples: the first test images attacked (only the clean-correct ones count); attack_batch_size:
    images per attack call.
  classifiers_workdir: a finished ``experiments.diff_attention`` workdir whose ViT / DiffViT classifiers (its
    shallowest depth, main λ_init, every seed) also get the patch attacks on their own test images, as extra
    columns that no claim row reads (None: none). Bookkeeping: a workdir resumes with it set or changed.
  """
  data: config_lib.DataConfig = config_lib.DataConfig()
  templates: tuple[str, ...] = TEMPLATES
  max_length: int = 10
  patch_size: int = 4
  dim: int = 64
  depth: int = 1
  num_heads: int = 4
  mlp_ratio: float = 2.0
  lambda_init: str = "0.8"
  text_dim: int = 64
  text_depth: int = 1
  text_heads: int = 4
  embed_dim: int = 64
  train: config_lib.ClassifierTrainConfig = config_lib.ClassifierTrainConfig(
      epochs=3, batch_size=128, learning_rate=2e-3, l2=0.0, warmup_epochs=1, seed=0)
  seeds: int = 2
  eps_255: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)
  pgd_steps: int = 10
  pgd_step_ratio: float = 0.25
  patch_sizes: tuple[int, ...] = (2, 4, 8)
  patch_steps: int = 20
  patch_alpha: float = 0.1
  attack_samples: Optional[int] = 100
  attack_batch_size: int = 250
  classifiers_workdir: Optional[str] = None

  def validate(self) -> None:
    """Raises ValueError naming the field and its allowed range."""
    errors = config_lib.FieldErrors()
    errors.check(lambda: config_lib.check_common(self, dataset_fields=()))
    if self.data.n_test == 0:
      errors.add("data.n_test must be >= 1 or None (the whole split), got 0")
    for name in ("max_length", "patch_size", "dim", "depth", "num_heads", "text_dim", "text_depth", "text_heads",
                 "embed_dim", "seeds", "attack_batch_size"):
      if getattr(self, name) < 1:
        errors.add(f"{name} must be an integer >= 1, got {getattr(self, name)}")
    for name in ("pgd_steps", "patch_steps"):
      if getattr(self, name) < 0:
        errors.add(f"{name} must be >= 0, got {getattr(self, name)}")
    if not self.templates:
      errors.add("templates must hold at least one caption template with '{}'")
    if not self.eps_255 or any(not np.isfinite(e) or e <= 0 for e in self.eps_255) or \
        list(self.eps_255) != sorted(set(self.eps_255)):
      errors.add(f"eps_255 must be increasing finite budgets > 0 (units of 1/255), got {self.eps_255}")
    if not self.patch_sizes or any(s < 1 or s > 32 for s in self.patch_sizes) or \
        list(self.patch_sizes) != sorted(set(self.patch_sizes)):
      errors.add(f"patch_sizes must be increasing sides in [1, 32] pixels, got {self.patch_sizes}")
    for name in ("pgd_step_ratio", "patch_alpha"):
      if not (np.isfinite(getattr(self, name)) and getattr(self, name) > 0):
        errors.add(f"{name} must be finite and > 0, got {getattr(self, name)}")
    if self.attack_samples is not None and self.attack_samples < 1:
      errors.add(f"attack_samples must be >= 1 or None, got {self.attack_samples}")
    parse_lambda_init(self.lambda_init)
    if self.classifiers_workdir is not None and not (Path(self.classifiers_workdir.strip() or "/nonexistent")
                                                     / "config.json").is_file():
      errors.add(f"classifiers_workdir must be None or an experiments.diff_attention workdir (holding its "
                  f"config.json), got {self.classifiers_workdir!r}")
    prompts(self)
    if not errors.messages:   # the models' own checks, on fields already known to be in range
      for model in MODELS:
        errors.check(lambda: self.clip_config(model).validate())
    errors.raise_any()

  def clip_config(self, model: str) -> CLIPConfig:
    """The architecture of ``model`` ("clip": standard attention in both towers; "diffclip": differential).

    Raises:
      ValueError: an unknown model.
    """
    if model not in MODELS:
      raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    common = dict(num_classes=len(CIFAR10_NAMES), image_size=32, patch_size=self.patch_size, dim=self.dim,
                  depth=self.depth, num_heads=self.num_heads, mlp_ratio=self.mlp_ratio, pool="cls")
    image = (ViTConfig(attention="standard", **common) if model == "clip" else
             ViTConfig(attention="differential", lambda_init=parse_lambda_init(self.lambda_init), **common))
    return CLIPConfig(image=image, vocab_size=tokenizer(self).vocab_size, max_length=self.max_length,
                      text_dim=self.text_dim, text_depth=self.text_depth, text_heads=self.text_heads,
                      embed_dim=self.embed_dim)


def captions(config: CLIPExperimentConfig) -> list[str]:
  """Every caption: each template with each class name."""
  return [t.format(name) for name in CIFAR10_NAMES for t in config.templates]


def tokenizer(config: CLIPExperimentConfig) -> WordTokenizer:
  """The word tokenizer over the captions' own vocabulary.

  Raises:
    ValueError: a bad template (``attention.clip.check_templates``; a template holding a comma is split by the
      command line's tuple syntax).
  """
  check_templates(config.templates)
  return WordTokenizer.from_texts(captions(config))


def prompts(config: CLIPExperimentConfig) -> tuple:
  """``ZeroShotCLIP.prompts`` [C][P][L] of the config (``attention.clip.prompt_table``)."""
  return prompt_table(tokenizer(config), CIFAR10_NAMES, config.templates, config.max_length)


def standard_config() -> CLIPExperimentConfig:
  """The standard CPU grid the claim rows read: 10 CLIP / DiffCLIP pairs on a 10,000-image class-balanced subset
  of the full CIFAR-10 training files (ATTN_DATA_DIR), crop/flip augmentation, 10 epochs; attacks on the first
  500 test images (1,000-image test subset) at ε = 0.5, 1, 2, 4 and 8 /255 (0.5/255: below the budgets where
  both models saturate)."""
  return CLIPExperimentConfig(
      data=config_lib.DataConfig(n_train=10000, n_test=1000, source="dir"), seeds=10, attack_samples=500,
      eps_255=(0.5, 1.0, 2.0, 4.0, 8.0),
      train=config_lib.ClassifierTrainConfig(epochs=10, batch_size=128, learning_rate=2e-3, l2=0.0,
                                             warmup_epochs=1, seed=0, augment="crop_flip"))


def full_config() -> CLIPExperimentConfig:
  """The accelerator grid: the full CIFAR-10 files (45,000 train, 5,000 held out), width 192, depth 6, 6 heads,
  text depth 4, 30 epochs, 1,000 attacked images."""
  return CLIPExperimentConfig(
      data=config_lib.DataConfig(source="dir", holdout=5000), dim=192, depth=6, num_heads=6, text_dim=192,
      text_depth=4, text_heads=6, embed_dim=128, seeds=10, attack_samples=1000,
      train=config_lib.ClassifierTrainConfig(epochs=30, batch_size=256, learning_rate=1e-3, l2=5e-5,
                                             warmup_epochs=3, seed=0, augment="crop_flip"))


STANDARD = ("cifar10",)


def get_config(full: bool = False, standard=None) -> CLIPExperimentConfig:
  """The quick CPU config (a smoke run: 2 pairs, 3 epochs on the embedded subset), ``standard`` (the standard
  CPU grid, ``standard_config``) or with ``full`` the accelerator grid."""
  return config_lib.select_config(full, standard, quick=CLIPExperimentConfig, full_config=full_config,
                                  standard_config=lambda _: standard_config(), datasets=STANDARD)
