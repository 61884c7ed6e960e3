"""The configs of ``experiments.report``: ``get_config(full=False)``.

Override any field on the command line as ``field=value`` (``experiments.core.config.apply_overrides``).
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from experiments.core import config as config_lib


SECTIONS = ("robustness", "lipschitz", "ntk", "influence", "attention", "certified")


@dataclasses.dataclass(frozen=True)
class ReportConfig:
  """Fields (all overridable as field=value).

  models: the ``--model`` references (filled from the command line; names when specs are passed in Python).
  sections: which of ``SECTIONS`` to run.
  dataset, data: the data set and ``DataConfig`` used when a model does not bring its own arrays
    (data.n_train training images: the NTK / influence pool; data.n_test test images: the attack pool).
  seed: the seed of every random start, sign and Krylov vector.
  eps_255: L∞ budgets in units of 1/255 (pixel scale [0, 1]) of the attacks and Lipschitz estimates.
  attack_samples: test images attacked (None: all loaded); attack_batch_size: images per attack call.
  pgd_steps, pgd_step_ratio: PGD-L∞ steps and α = ratio·ε; apgd_steps: APGD-CE / APGD-DLR iterations.
  cw_samples, cw_steps, cw_search_steps, cw_l2_grid: CW-L2 on the first cw_samples clean-correct images
    (0: not run), success counted on the L2 grid (pixel scale).
  lipschitz_samples, lipschitz_steps: images and ascent steps of the local Lipschitz estimates.
  ntk_train, ntk_test: the NTK sample; memory_gb: the kernels' memory budget in GiB.
  influence_eps, influence_attacks, influence_pgd_steps, top_fraction: the malleability study (ε on the
    [0, 1] pixel scale; 0 is the control).
  bound_samples, bound_eps, bound_power_iters, bound_pgd_steps, bound_pgd_restarts: the per-layer bound
    check (ε: Frobenius norm of the token perturbation, in token units).
  alignment_samples, alignment_chunk: differential-head alignment samples and forward-mode chunk.
  cert_samples, cert_eps, cert_power_iters: certified radius (ℓ2, pixel scale) of a CertifiedViT.
  """
  models: tuple[str, ...] = ()
  sections: tuple[str, ...] = SECTIONS
  dataset: str = "cifar10"
  data: config_lib.DataConfig = config_lib.DataConfig(n_train=128, n_test=256)
  seed: int = 0
  eps_255: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)
  attack_samples: Optional[int] = None
  attack_batch_size: int = 256
  pgd_steps: int = 10
  pgd_step_ratio: float = 0.25
  apgd_steps: int = 20
  cw_samples: int = 50
  cw_steps: int = 100
  cw_search_steps: int = 5
  cw_l2_grid: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5)
  lipschitz_samples: int = 64
  lipschitz_steps: int = 10
  ntk_train: int = 128
  ntk_test: int = 64
  memory_gb: float = 2.0
  influence_eps: tuple[float, ...] = (0.0, 0.03)
  influence_attacks: tuple[str, ...] = ("fgsm", "pgd", "random_sign")
  influence_pgd_steps: int = 40
  top_fraction: float = 0.1
  bound_samples: int = 16
  bound_eps: tuple[float, ...] = (0.01, 0.1)
  bound_power_iters: int = 50
  bound_pgd_steps: int = 50
  bound_pgd_restarts: int = 2
  alignment_samples: int = 4
  alignment_chunk: int = 256
  cert_samples: int = 100
  cert_eps: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1)
  cert_power_iters: int = 50

  def validate(self) -> None:
    """Raises ValueError naming the field and its allowed range."""
    errors = config_lib.FieldErrors()
    from influence.malleability import ATTACKS
    errors.check(lambda: config_lib.check_common(self, dataset_fields=()))
    from experiments.data import get_spec
    try:
      get_spec(self.dataset)
    except ValueError as e:
      errors.add(f"dataset: {e}")
    bad = [s for s in self.sections if s not in SECTIONS]
    if not self.sections or bad:
      errors.add(f"sections must be a non-empty subset of {SECTIONS}, got {self.sections}")
    for name in ("eps_255", "cw_l2_grid", "bound_eps", "cert_eps"):
      values = getattr(self, name)
      if not values or any(not (np.isfinite(v) and v > 0) for v in values):
        errors.add(f"{name} must hold finite values > 0, got {values}")
    if not self.influence_eps or any(not 0 <= e <= 1 for e in self.influence_eps):
      errors.add(f"influence_eps must hold L∞ budgets in [0, 1] (pixel scale), got {self.influence_eps}")
    bad = [a for a in self.influence_attacks if a not in ATTACKS]
    if not self.influence_attacks or bad:
      errors.add(f"influence_attacks must be a non-empty subset of {ATTACKS}, got {self.influence_attacks}")
    if self.attack_samples is not None and self.attack_samples < 1:
      errors.add(f"attack_samples must be >= 1 or None, got {self.attack_samples}")
    for name in ("attack_batch_size", "cw_search_steps", "lipschitz_samples", "ntk_train",
                 "ntk_test", "influence_pgd_steps", "bound_samples", "bound_power_iters", "alignment_samples",
                 "alignment_chunk", "cert_samples", "cert_power_iters"):
      if getattr(self, name) < 1:
        errors.add(f"{name} must be an integer >= 1, got {getattr(self, name)}")
    for name in ("cw_samples", "pgd_steps", "apgd_steps", "cw_steps", "lipschitz_steps", "bound_pgd_steps",
                 "bound_pgd_restarts"):
      if getattr(self, name) < 0:
        errors.add(f"{name} must be an integer >= 0, got {getattr(self, name)}")
    if not (np.isfinite(self.pgd_step_ratio) and self.pgd_step_ratio > 0):
      errors.add(f"pgd_step_ratio must be finite and > 0, got {self.pgd_step_ratio}")
    if not (np.isfinite(self.memory_gb) and self.memory_gb > 0):
      errors.add(f"memory_gb must be finite and > 0 (GiB), got {self.memory_gb}")
    if not 0 < self.top_fraction <= 1:
      errors.add(f"top_fraction must be in (0, 1], got {self.top_fraction}")
    errors.raise_any()


def get_config(full: bool = False) -> ReportConfig:
  """The quick config (the issue's defaults); ``full`` draws larger samples (an accelerator's size)."""
  if not full:
    return ReportConfig()
  return ReportConfig(data=config_lib.DataConfig(n_train=512, n_test=1000), cw_samples=500, cw_steps=1000,
                      cw_search_steps=9, apgd_steps=100, lipschitz_samples=500, ntk_train=512, ntk_test=256,
                      bound_samples=64, alignment_samples=16, cert_samples=1000)
