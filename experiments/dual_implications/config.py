"""The configs of ``experiments.dual_implications``: ``get_config(full=False)``.

Override any field on the command line as ``field=value`` (``experiments.core.config.apply_overrides``).
"""
from __future__ import annotations

import dataclasses
import math


from ntk import approximation
from experiments.core import config as config_lib


TARGETS = approximation.TARGET_KINDS + ("labels",)


MODELS = ("relu", "mlp_attn")


FEATURES = ("unit", "raw")


RIDGE_GRID = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1)


@dataclasses.dataclass(frozen=True)
class DualImplicationsConfig:
  """datasets; data: the images (n_train, n_test; raw pixels only); targets: of ``TARGETS``; k: directions per
  target (≥ 1); draws: one target draw per entry (c ~ N(0, I_k); the labels are drawn once); models: of
  ``MODELS``; seeds: initialisations for K₀; network_seeds: those (a subset of seeds) at which the network
  is also trained; width: the networks' width m ≥ 1; ridge_scale: ρ/(tr(K)/n) > 0; train: the networks'
  criterion (loss ½·MSE; ``experiments.core.config.TrainConfig``); features: the kernels' feature rows, 'unit' (always:
  the networks' own inputs) and optionally 'raw'; ridge_grid: the ridge scales searched on the validation
  split (each > 0); validation_fraction: the share of the training rows held out for that search, in (0, 1)."""
  datasets: tuple[str, ...] = ("mnist", "cifar10")
  data: config_lib.DataConfig = config_lib.DataConfig(n_train=256, n_test=256)
  targets: tuple[str, ...] = TARGETS
  k: int = 10
  draws: tuple[int, ...] = (0, 1, 2, 3, 4)
  models: tuple[str, ...] = MODELS
  seeds: tuple[int, ...] = (0, 1, 2)
  network_seeds: tuple[int, ...] = (0,)
  width: int = 256
  ridge_scale: float = 1e-3
  train: config_lib.TrainConfig = config_lib.TrainConfig(
      learning_rates=(1e-3,), loss_target=1e-3, max_epochs=300, check_every=1, optimizer="lbfgs")
  features: tuple[str, ...] = config_lib.one_of(FEATURES, FEATURES)
  ridge_grid: tuple[float, ...] = RIDGE_GRID
  validation_fraction: float = 0.25

  def validate(self) -> None:
    """Raises ValueError naming the field and its allowed values."""
    errors = config_lib.FieldErrors()
    errors.check(lambda: config_lib.check_common(self, nonempty=("datasets", "targets", "draws", "models", "seeds")))
    if not self.data.n_train or self.data.n_train < 2 or not self.data.n_test or self.data.n_test < 2:
      errors.add(f"data.n_train and data.n_test must be ≥ 2, got {self.data.n_train}, {self.data.n_test}")
    bad = [t for t in self.targets if t not in TARGETS]
    if bad:
      errors.add(f"targets must be drawn from {TARGETS}, got {bad}")
    bad = [m for m in self.models if m not in MODELS]
    if bad:
      errors.add(f"models must be drawn from {MODELS}, got {bad}")
    if self.k < 1 or self.width < 1:
      errors.add(f"k and width must be ≥ 1, got k={self.k}, width={self.width}")
    if not (math.isfinite(self.ridge_scale) and self.ridge_scale > 0):
      errors.add(f"ridge_scale must be finite and > 0, got {self.ridge_scale!r}")
    if not set(self.network_seeds) <= set(self.seeds):
      errors.add(f"network_seeds {self.network_seeds} must be a subset of seeds {self.seeds}")
    if "unit" not in self.features or any(f not in FEATURES for f in self.features):
      errors.add(f"features must hold 'unit' and may hold 'raw', got {self.features}")
    if not self.ridge_grid or not all(math.isfinite(r) and r > 0 for r in self.ridge_grid):
      errors.add(f"ridge_grid must be a non-empty grid of finite values > 0, got {self.ridge_grid}")
    n = self.data.n_train or 0   # a missing n_train is reported above
    if not 0 < self.validation_fraction < 1 or (n and not 1 <= round(self.validation_fraction * n) <= n - 2):
      errors.add(f"validation_fraction must be in (0, 1) and leave ≥ 1 validation and ≥ 2 fitting rows of "
                  f"data.n_train = {self.data.n_train}, got {self.validation_fraction}")
    if self.train.optimizer == "gauss_newton":
      errors.add("train.optimizer must be 'lbfgs' or 'adam' here (targets are regression, C ≥ 1)")
    errors.raise_any()


def get_config(full: bool = False) -> DualImplicationsConfig:
  if not full:
    return DualImplicationsConfig()
  return DualImplicationsConfig(data=config_lib.DataConfig(n_train=512, n_test=512, source="dir"),
                                network_seeds=(0, 1, 2))
