"""The configs of ``experiments.landscape``: ``get_config(full=False)``.

Override any field on the command line as ``field=value`` (``experiments.core.config.apply_overrides``).
"""
from __future__ import annotations

import dataclasses


import ntk
from experiments.core import config as config_lib


@dataclasses.dataclass(frozen=True)
class LandscapeConfig:
  """tasks, models, widths, seeds; data: ``DataConfig`` (n_train images; no test split: data.n_test = 0);
  train: ``TrainConfig`` of the Adam training to a criterion (``experiments.trainers.network``);
  readouts: 'fixed' (always; the paper's ±1 readout) and optionally 'trained'; match_loss: when another model
  of ``models`` (same task, width, seed, readout) misses the loss target, a model that reached it is
  retrained (same rate) to stop at the first epoch where its loss is at or below that model's final loss
  (recorded as matched_loss; None otherwise), so both are measured at the same train loss; top_k eigenvalues from
  lanczos_iters HVPs; grid points and span of the filter-normalised plots (step sizes in units of the
  per-filter weight norm)."""
  tasks: tuple[str, ...] = ("mnist",)
  models: tuple[str, ...] = config_lib.one_of(("relu", "mlp_attn"), ntk.MODEL_NAMES)
  widths: tuple[int, ...] = (256,)
  seeds: tuple[int, ...] = (0, 1, 2)
  data: config_lib.DataConfig = config_lib.DataConfig(n_train=256, n_test=0)
  # L-BFGS checks the loss at every iterate, so both models stop at the first iterate at or below the target.
  train: config_lib.TrainConfig = config_lib.TrainConfig(optimizer="lbfgs", max_epochs=2000)
  readouts: tuple[str, ...] = ("fixed", "trained")
  match_loss: bool = True
  top_k: int = 3
  lanczos_iters: int = 30
  grid_1d: int = 41
  grid_2d: int = 21
  span: float = 1.0

  def validate(self) -> None:
    errors = config_lib.FieldErrors()
    errors.check(lambda: config_lib.check_common(self, dataset_fields=("tasks",), binary_tasks=True, centering=True,
                                                 nonempty=("tasks", "models", "widths", "seeds")))
    if self.data.n_train is None or self.data.n_train < 2 or self.data.n_test != 0:
      errors.add(f"data.n_train must be ≥ 2 and data.n_test = 0 (no test split is used), got "
                  f"{self.data.n_train}, {self.data.n_test}")
    bad = [m for m in self.models if m not in ntk.MODEL_NAMES]
    if bad:
      errors.add(f"models must be among {ntk.MODEL_NAMES}, got {bad}")
    if any(w < 1 for w in self.widths):
      errors.add(f"widths must be ≥ 1, got {self.widths}")
    if "fixed" not in self.readouts or any(r not in ntk.READOUTS for r in self.readouts):
      errors.add(f"readouts must hold 'fixed' and may hold 'trained', got {self.readouts}")
    from experiments.data import BINARY_TASKS
    errors.check(lambda: config_lib.check_gauss_newton(self.train, "train",
                                                       mse=all(t in BINARY_TASKS for t in self.tasks),
                                                       fixed_readout=self.readouts == ("fixed",)))
    if self.top_k < 1 or self.lanczos_iters < self.top_k:
      errors.add(f"need 1 ≤ top_k ≤ lanczos_iters, got {self.top_k}, {self.lanczos_iters}")
    if self.grid_1d < 3 or self.grid_2d < 3 or self.span <= 0:
      errors.add("grid_1d and grid_2d must be ≥ 3 and span > 0")
    errors.raise_any()


def get_config(full: bool = False) -> LandscapeConfig:
  if not full:
    return LandscapeConfig()
  return LandscapeConfig(tasks=("mnist", "fashion_mnist", "cifar10"), widths=(256, 1024, 4096),
                         train=config_lib.TrainConfig(optimizer="lbfgs"),
                         seeds=(0, 1, 2, 3, 4), data=config_lib.DataConfig(n_train=1000, n_test=0, source="dir"))


def paper_config() -> LandscapeConfig:
  """Sharpness of networks trained by the core paper's recipe (``config_lib.PAPER_TRAIN``: Adam 1e-3, L2
  1e-3, batch 128, 500 epochs; arXiv 2603.13085 §5), MNIST, n = 1,000 per seed from the full files, width
  256, 10 seeds, the fixed ±1 readout. The recipe trains a fixed budget with no loss target, so the models are
  compared as the recipe leaves them (``match_loss`` off: there is no target to match), each point recording
  its final train loss. Run by ``python -m experiments.paper_grid sharpness``."""
  return LandscapeConfig(tasks=("mnist",), widths=(256,), seeds=tuple(range(10)),
                         data=config_lib.DataConfig(n_train=1000, n_test=0, source="dir"),
                         train=config_lib.PAPER_TRAIN, readouts=("fixed",), match_loss=False)
