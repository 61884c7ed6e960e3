"""The configs of ``experiments.width_sweep``: ``get_config(full=False)``.

Override any field on the command line as ``field=value`` (``experiments.core.config.apply_overrides``).
"""
from __future__ import annotations

import dataclasses
import math
import typing
from typing import Optional

import ntk
from experiments.core import config as config_lib


KERNEL_PATHS = ("fast", "neural_tangents")
CONVERGED_LOSSES = ("mse", "ce")


@dataclasses.dataclass(frozen=True)
class SweepTrainConfig:
  """Full-batch gradient descent and the function-distance comparison (``ntk.sweep.train_and_compare``).

  enabled: run it. datasets, max_width, seeds: where it runs (widths ≤ max_width).
  steps, lr_scale: GD steps; η = lr_scale · nC/λ_max(K∞) (half the stability limit at 1).
  matched_fraction: also run kind = 'matched' points (None: off): GD for as many steps as this model's K∞
    predictor needs to bring the train loss to matched_fraction·L(0) (``ntk.sweep.matched_time``), so each
    model has fitted the same fraction of its own target; at most max_steps (else recorded as not reached).
  """
  enabled: bool = True
  datasets: tuple[str, ...] = ("mnist",)
  max_width: int = 1024
  seeds: tuple[int, ...] = (0, 1, 2)
  steps: int = 400
  lr_scale: float = 1.0
  matched_fraction: Optional[float] = None
  max_steps: int = 20_000

  def validate(self, group: str = "train") -> None:
    """Raises ValueError naming the dotted field and its allowed range."""
    errors = config_lib.FieldErrors()
    errors.check(lambda: config_lib.check_dataset_names(self.datasets, f"{group}.datasets"))
    if self.max_width < 1:
      errors.add(f"{group}.max_width must be >= 1, got {self.max_width}")
    if self.matched_fraction is not None and not 0 < self.matched_fraction < 1:
      errors.add(f"{group}.matched_fraction must be in (0, 1) or None, got {self.matched_fraction}")
    if self.max_steps < 1:
      errors.add(f"{group}.max_steps must be >= 1, got {self.max_steps}")
    if self.steps < 0 or not self.lr_scale > 0:
      errors.add(f"{group}.steps must be ≥ 0 and {group}.lr_scale > 0, got {self.steps}, "
                  f"{self.lr_scale}")
    errors.raise_any()


@dataclasses.dataclass(frozen=True)
class ConvergedConfig:
  """The function distance at convergence (kind = 'converged' points), beside the fixed-time comparison.

  The network is trained to ``train``'s criterion (full-batch L-BFGS by default, ½·MSE on one-hot targets:
  the kernel predictor is the limit of MSE training) and compared on the test inputs with the kernel
  regression of its empirical NTK at initialisation K₀ and its own f₀,
  f₀ + K₀(x, X)(K₀ + λI)⁻¹(Y − f₀(X)), λ = ridge_scale·tr(K₀)/n (``ntk.distance.kernel_regression``,
  ``function_distance``).

  enabled: run it. datasets, widths, seeds: where. ridge_scale: λ / (tr(K₀)/n), ≥ 0.
  train: ``TrainConfig``; with lr_selection = 'per_model_dataset' the grid is searched once per (data set,
  model), at the largest width and the first seed, and that rate is used at every width and seed.
  common: also train both models to one common ½·MSE target (kind = 'common' points), chosen by a rule
  stated before the numbers (``common_target``): COMMON_FACTOR × the largest final ½·MSE MLP-Attn reaches
  in this workdir's converged points at widths ≥ COMMON_MIN_WIDTH. Both reach it at every such width, so
  the two models are compared where both have trained.
  loss: the training loss, 'mse' (½·MSE on one-hot targets, the kernel predictor's own loss) or 'ce'
    (softmax cross-entropy, the paper's loss for its 10-class tasks, arXiv 2603.13085 §5).
  linearized: also train the network's linearisation at initialisation (``ntk.linearized``: the finite-width
    NTK model, Lee et al. 2019) by the same recipe, from the same parameters, on the same minibatches, and
    record the network's distance from it (function_distance_linearized*): the f_NTK of a network trained by
    a recipe with no closed-form kernel predictor (cross-entropy, Adam, L2, a fixed budget).
  """
  enabled: bool = True
  datasets: tuple[str, ...] = ("mnist",)
  widths: tuple[int, ...] = (16, 64, 256, 1024)
  seeds: tuple[int, ...] = (0, 1)
  ridge_scale: float = 1e-6
  common: bool = False
  # L-BFGS: 2L-ReLU reaches ½·MSE 1e-3 in tens of iterations at width 1024; MLP-Attn reaches it at no width
  # (½·MSE 0.012–0.04 after 4,000 iterations at widths 16–1024, n = 256), so the cap bounds the quick job.
  train: config_lib.TrainConfig = config_lib.TrainConfig(loss_target=1e-3, max_epochs=300, optimizer="lbfgs")
  loss: str = config_lib.one_of("mse", CONVERGED_LOSSES)
  linearized: bool = False

  def errors(self, group: str = "converged") -> list[str]:
    """Every out-of-range field, one line each naming the dotted field and its allowed range."""
    out = []
    if self.loss not in CONVERGED_LOSSES:
      out.append(f"{group}.loss must be one of {CONVERGED_LOSSES}, got {self.loss!r}")
    if self.common and self.loss != "mse":
      out.append(f"{group}.common trains to a common ½·MSE target: it needs {group}.loss = 'mse', got {self.loss!r}")
    return out

  def validate(self, group: str = "converged") -> None:
    """Raises ValueError naming the dotted field and its allowed range."""
    errors = config_lib.FieldErrors()
    errors.check(lambda: config_lib.check_dataset_names(self.datasets, f"{group}.datasets"))
    for message in self.errors(group):
      errors.add(message)
    if any(w < 1 for w in self.widths):
      errors.add(f"{group}.widths must be >= 1, got {self.widths}")
    if not (math.isfinite(self.ridge_scale) and self.ridge_scale >= 0):
      errors.add(f"{group}.ridge_scale must be finite and >= 0, got {self.ridge_scale}")
    errors.check(lambda: self.train.validate(f"{group}.train"))
    errors.raise_any()


@dataclasses.dataclass(frozen=True)
class WidthSweepConfig:
  """Fields (all overridable as field=value; a group's fields as group.field).

  datasets, models: what to sweep (models: 'relu' = 2L-ReLU, 'mlp_attn' = MLP-Attn).
  widths, seeds: hidden widths and init seeds for the kernels at initialisation.
  data: ``DataConfig`` (n_train, n_test class-balanced images; data.source 'embedded', 'dir' (full files;
    data.dir or ATTN_DATA_DIR) or 'tfds').
  data_seed_follows_seed: each seed draws its own training and test subsets, so intervals over seeds cover
    the choice of images (as ``experiments.flip_rate.run``; ``data_draw``): from the embedded pool an
    independent draw with data.seed = that seed (subsets of two seeds overlap by chance, recorded as
    expected_seed_overlap); from the full files (data.source 'dir' or 'tfds') block ``seed`` of one
    class-balanced partition of the training split drawn with data.seed (disjoint across seeds,
    ``experiments.data.class_balanced_block_indices``) and a test draw with seed data.seed + seed.
    False: one subset (data.seed) for every seed, the behaviour before.
  readout: 'fixed' (the paper's ±1 readout) or 'trained' (stax; adds the NNGP term).
  kernel_path: 'fast' (closed form) or 'neural_tangents' (reference, much slower).
  train: ``SweepTrainConfig``, gradient descent and the function distance at a fixed time.
  converged: ``ConvergedConfig``, the function distance of a network trained to a loss criterion.
  save_arrays: save test predictions of each trained point with orbax.
  """
  datasets: tuple[str, ...] = ("mnist", "fashion_mnist", "cifar10")
  models: tuple[str, ...] = config_lib.one_of(("relu", "mlp_attn"), ntk.MODEL_NAMES)
  widths: tuple[int, ...] = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
  seeds: tuple[int, ...] = (0, 1, 2)
  data: config_lib.DataConfig = config_lib.DataConfig(n_train=256, n_test=100)
  readout: str = config_lib.one_of("fixed", ntk.READOUTS)
  kernel_path: str = config_lib.one_of("fast", KERNEL_PATHS)
  train: SweepTrainConfig = SweepTrainConfig()
  converged: ConvergedConfig = ConvergedConfig()
  save_arrays: bool = True
  data_seed_follows_seed: bool = True
  # ``widths=16,64`` alone also sets the trained widths (``config_lib.apply_overrides``): those of
  # converged.widths among 16, 64, or 16, 64 when none is.
  LINKED_FIELDS: typing.ClassVar[dict] = {"widths": ("converged.widths",),
                                           "datasets": ("converged.datasets", "train.datasets")}

  def validate(self) -> None:
    """Raises ValueError naming the field and its allowed range."""
    errors = config_lib.FieldErrors()
    if not self.widths or any(w < 1 for w in self.widths):  # first: converged.widths may follow it (LINKED_FIELDS)
      errors.add(f"widths must be integers ≥ 1, got {self.widths}")
    errors.check(lambda: config_lib.check_common(self, dataset_fields=("datasets",), nonempty=("datasets", "models",
                                                 "widths", "seeds")))
    if self.data.n_train is None or self.data.n_train < 2 or self.data.n_test is None or self.data.n_test < 1:
      errors.add(f"data.n_train must be ≥ 2 and data.n_test ≥ 1, got {self.data.n_train}, "
                  f"{self.data.n_test}")
    if self.readout not in ntk.READOUTS:
      errors.add(f"readout must be one of {ntk.READOUTS}, got {self.readout!r}")
    bad = [m for m in self.models if m not in ntk.MODEL_NAMES]
    if bad:
      errors.add(f"models must be among {ntk.MODEL_NAMES}, got {bad}")
    if self.kernel_path not in KERNEL_PATHS:
      errors.add(f"kernel_path must be one of {KERNEL_PATHS}, got {self.kernel_path!r}")
    if self.converged.linearized and self.readout != "fixed":
      errors.add(f"converged.linearized needs readout='fixed' (ntk.linearized), got readout={self.readout!r}")
    errors.check(lambda: config_lib.check_gauss_newton(self.converged.train, "converged.train",
                                                       mse=self.converged.loss == "mse",
                                                       fixed_readout=self.readout == "fixed"))
    errors.raise_any()


def get_config(full: bool = False) -> WidthSweepConfig:
  """The quick CPU config, or with ``full`` the full-size one (see the module docstring)."""
  if not full:
    return WidthSweepConfig()
  return WidthSweepConfig(data=config_lib.DataConfig(n_train=1000, n_test=500, source="dir"),
                          seeds=(0, 1, 2, 3, 4),
                          train=SweepTrainConfig(datasets=("mnist", "fashion_mnist", "cifar10"), max_width=4096,
                                                 seeds=(0, 1, 2), steps=1000, matched_fraction=0.5),
                          converged=ConvergedConfig(datasets=("mnist", "fashion_mnist", "cifar10"),
                                                    widths=(16, 64, 256, 1024, 4096), seeds=(0, 1, 2), common=True,
                                                    train=config_lib.TrainConfig(
                                                        loss_target=1e-3, optimizer="lbfgs")))


PAPER_WIDTHS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


def paper_config() -> WidthSweepConfig:
  """The core paper's width sweep as the paper ran it (arXiv 2603.13085 §5; docs/theory.md#training-recipe):
  CIFAR-10, MNIST and Fashion-MNIST (CIFAR-10 first: the paper's NTK-distance claim is stated there), n =
  1,000 training images per seed from the full files (``data.source=dir``, disjoint blocks across seeds),
  500 test images, widths 16 … 4096, 10 seeds; every network trained by the paper's recipe
  (``config_lib.PAPER_TRAIN``: Adam 1e-3, L2 1e-3, batch 128, 500 epochs) on softmax cross-entropy (its loss
  for 10-class tasks), compared with its linearisation trained by the same recipe (``converged.linearized``),
  with the kernel regressions of K₀ and K∞, and with its kernel movement; the kernels at initialisation as in
  every sweep. Run by ``python -m experiments.paper width_sweep``."""
  seeds = tuple(range(10))
  datasets = ("cifar10", "mnist", "fashion_mnist")
  return WidthSweepConfig(
      datasets=datasets, widths=PAPER_WIDTHS, seeds=seeds,
      data=config_lib.DataConfig(n_train=1000, n_test=500, source="dir"),
      train=SweepTrainConfig(enabled=False),
      converged=ConvergedConfig(datasets=datasets, widths=PAPER_WIDTHS, seeds=seeds, train=config_lib.PAPER_TRAIN,
                                loss="ce", linearized=True),
      save_arrays=False)
