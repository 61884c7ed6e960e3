"""The configs of ``experiments.flip_rate``: ``get_config(full=False)`` and the standard grids (``standard_config``).

Override any field on the command line as ``field=value`` (``experiments.core.config.apply_overrides``).
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

import ntk
from influence import malleability
from experiments.core import config as config_lib


ATTACKS = malleability.ATTACKS


QUICK_EPS = (0.0, 0.0125, 0.05, 0.1, 0.2, 0.3)


# The claims job's grid: fine below 0.1, where 2L-ReLU's PGD flip rate crosses the paper's 3.3 %.
CLAIMS_EPS = tuple(round(0.0125 * i, 4) for i in range(9)) + (0.2, 0.3)


INFLUENCE_KERNELS = ("trained", "init", "infinite")


FULL_EPS = tuple(round(0.025 * i, 3) for i in range(13))  # 0, 0.025, …, 0.3


# Quick: full-batch L-BFGS, at most 2,000 iterations (measured: MLP-Attn reaches CE 0.05 in 785–1,092
# iterations on all 10 seeds; minibatch Adam left it at CE 0.28–0.35 after 4,000 epochs).
QUICK_TRAIN = config_lib.TrainConfig(optimizer="lbfgs", max_epochs=2000)


@dataclasses.dataclass(frozen=True)
class FlipRateConfig:
  """tasks: data set names or BINARY_TASKS keys; models; widths; seeds (init and attack randomness);
  eps: L∞ budgets on the [0, 1] pixel scale (0 = control); attacks: among ATTACKS; data: ``DataConfig``
  (n_train, n_test, source, dir, seed, preprocessing); train: ``TrainConfig`` (learning-rate grid, loss
  target, epoch cap, batch_size, l2, optimizer) of the training to a criterion (train.l2 = 0 by default);
  pgd_steps and pgd_alpha (None: α = ε/30, which is Madry et al.'s α = 0.01 for 40 steps at ε = 0.3),
  mim_steps (α = ε/steps, Dong et al.); top_fraction τ; adversarial_training with at_eps, at_rounds,
  at_epochs_per_round (Adam, at the clean network's rate or, after L-BFGS, at train.learning_rates[0]).
  Protocol choices: influence_kernel, the kernel of the NTK influence
  ('trained': the empirical NTK at the trained parameters; 'init': at the initial ones, K₀; 'infinite': the
  analytic K∞); ridge_scale, its ridge λ/(tr(K)/n); data_seed_follows_seed (default true), each seed its
  own training subset (``experiments.core.seed_subsets.seed_splits``: block s of a partition of the full
  training files drawn with data.seed, disjoint across seeds; from the embedded subsets an independent draw
  with seed s), so intervals over seeds cover the choice of subset; false: one subset, data.seed, for every
  seed, the behaviour before; seed_floor, also train a second
  network from seed + 100,000 on the same data to the same criterion and record the flip rate between the
  two networks' influence (no attack: the seed noise floor; with adversarial_training the second network
  is the clean one); extra_kernels, more influence kernels whose flip rates are measured from the same
  attacked data (record fields flip_rate_<kernel>, n_flipped_<kernel>, n_top_<kernel>, spearman_<kernel>);
  sign_randomized_control, for every attack and ε > 0 also the sign-randomised attack (``run.sign_randomized``:
  the attack's δ with random per-pixel signs, clipped; fields control_flip_rate[_<kernel>], control_n_flipped…,
  and the mean ‖δ‖₂ of both, delta_l2 and control_delta_l2)."""
  tasks: tuple[str, ...] = ("mnist",)
  models: tuple[str, ...] = config_lib.one_of(("relu", "mlp_attn"), ntk.MODEL_NAMES)
  widths: tuple[int, ...] = (256,)
  seeds: tuple[int, ...] = tuple(range(10))
  eps: tuple[float, ...] = QUICK_EPS
  attacks: tuple[str, ...] = ATTACKS
  data: config_lib.DataConfig = config_lib.DataConfig(n_train=512, n_test=100)
  train: config_lib.TrainConfig = QUICK_TRAIN
  pgd_steps: int = 40
  pgd_alpha: Optional[float] = None
  mim_steps: int = 10
  top_fraction: float = 0.1
  adversarial_training: bool = False
  at_eps: float = 0.3
  at_rounds: int = 10
  at_epochs_per_round: int = 50
  influence_kernel: str = config_lib.one_of("trained", INFLUENCE_KERNELS)
  ridge_scale: float = 1e-3
  data_seed_follows_seed: bool = True
  seed_floor: bool = False
  extra_kernels: tuple[str, ...] = ()
  sign_randomized_control: bool = False

  def validate(self) -> None:
    errors = config_lib.FieldErrors()
    errors.check(lambda: config_lib.check_common(self, dataset_fields=("tasks",), binary_tasks=True, centering=True,
                                                 finite=("eps",),
                                                 nonempty=("tasks", "models", "widths", "seeds", "eps", "attacks")))
    if any(not 0 <= e <= 1 for e in self.eps):
      errors.add(f"eps must be in [0, 1] (L∞ on the [0, 1] pixel scale), got {self.eps}")
    from experiments.data import BINARY_TASKS
    errors.check(lambda: config_lib.check_gauss_newton(self.train, "train",
                                                       mse=all(t in BINARY_TASKS for t in self.tasks),
                                                       fixed_readout=True))
    if not 0 <= self.at_eps <= 1:
      errors.add(f"at_eps must be in [0, 1], got {self.at_eps}")
    bad = [a for a in self.attacks if a not in ATTACKS]
    if bad:
      errors.add(f"attacks must be among {ATTACKS}, got {bad}")
    bad = [m for m in self.models if m not in ntk.MODEL_NAMES]
    if bad:
      errors.add(f"models must be among {ntk.MODEL_NAMES}, got {bad}")
    if any(w < 1 for w in self.widths):
      errors.add(f"widths must be ≥ 1, got {self.widths}")
    if self.data.n_train is None or self.data.n_train < 10 or self.data.n_test is None or self.data.n_test < 1:
      errors.add(f"data.n_train must be ≥ 10 and data.n_test ≥ 1, got {self.data.n_train}, "
                  f"{self.data.n_test}")
    if not 0 < self.top_fraction <= 1:
      errors.add(f"top_fraction must be in (0, 1], got {self.top_fraction}")
    for name in ("pgd_steps", "mim_steps", "at_rounds", "at_epochs_per_round"):
      if getattr(self, name) < 1:
        errors.add(f"{name} must be an integer >= 1, got {getattr(self, name)}")
    bad = [k for k in self.extra_kernels if k not in INFLUENCE_KERNELS or k == self.influence_kernel]
    if bad or len(set(self.extra_kernels)) != len(self.extra_kernels):
      errors.add(f"extra_kernels must be distinct kernels of {INFLUENCE_KERNELS} other than influence_kernel "
                  f"({self.influence_kernel!r}), got {self.extra_kernels}")
    if self.influence_kernel not in INFLUENCE_KERNELS:
      errors.add(f"influence_kernel must be one of {INFLUENCE_KERNELS}, got {self.influence_kernel!r}")
    if not (np.isfinite(self.ridge_scale) and self.ridge_scale > 0):
      errors.add(f"ridge_scale must be finite and > 0, got {self.ridge_scale!r}")
    if self.pgd_alpha is not None and not 0 < self.pgd_alpha <= 1:
      errors.add(f"pgd_alpha must be in (0, 1] or None (α = ε/30), got {self.pgd_alpha}")
    errors.raise_any()


STANDARD = ("mnist", "cifar10")


STANDARD_SEEDS = {"mnist": 30, "cifar10": 10}


def standard_config(dataset: str = "mnist") -> FlipRateConfig:
  """The standard CPU grid of ``dataset`` (``STANDARD``): the quick protocol (L-BFGS to CE 0.05, trained
  NTK, ridge 1e-3, top 10 %, FGSM / PGD / MIM / random sign, the seed floor) at n = 512 train / 100 test,
  width 256, the claims job's whole ε grid (``CLAIMS_EPS``), on the full training files from ATTN_DATA_DIR
  (data.dir is recorded, so a resume on other files is refused) with disjoint per-seed subsets; 30 seeds on
  MNIST, 10 on CIFAR-10 (the paper's setting; its n and width are not stated, these are the quick config's).
  Without ATTN_DATA_DIR it falls back to the embedded subsets with a warning (seeds then share about 25 % of
  their images). Measured on 2 CPU cores: the 30 MNIST seeds (2,700 points) took 8 min 31 s of wall time
  (912 s of CPU time) with nothing else running; the CIFAR-10 grid's time is in the README (it ran on one
  core beside another job).

  Raises:
    ValueError: an unknown ``dataset``.
  """
  import os
  import warnings
  from experiments.data.loader import DATA_DIR_ENV
  if dataset not in STANDARD:
    raise ValueError(f"the standard config's data set must be one of {STANDARD}, got {dataset!r}")
  data_dir = os.environ.get(DATA_DIR_ENV) or None
  if data_dir is None:
    warnings.warn(f"{DATA_DIR_ENV} is not set: the standard flip-rate grid falls back to the embedded subsets, "
                  "where the seeds' training subsets overlap (about 25 % for n = 512); set it to the directory "
                  "of the full data files for disjoint subsets", RuntimeWarning, stacklevel=2)
  data = config_lib.DataConfig(n_train=512, n_test=100, source="dir" if data_dir else "embedded", dir=data_dir)
  return FlipRateConfig(tasks=(dataset,), widths=(256,), seeds=tuple(range(STANDARD_SEEDS[dataset])),
                        eps=CLAIMS_EPS, data=data, seed_floor=True, data_seed_follows_seed=True)


def get_config(full: bool = False, standard=None) -> FlipRateConfig:
  """The quick config, ``standard`` (True or a data set of ``STANDARD``: ``standard_config``), or with
  ``full`` the accelerator grid (module docstring)."""
  return config_lib.select_config(full, standard, quick=FlipRateConfig, full_config=_full_config,
                                  standard_config=standard_config, datasets=STANDARD)


def _full_config() -> FlipRateConfig:
  """The full-size config (``--full``)."""
  return FlipRateConfig(tasks=("mnist", "fashion_mnist", "cifar10", "mnist_3v8", "cifar_cars_planes"),
                        widths=(256, 1024, 4096), seeds=tuple(range(20)), eps=FULL_EPS,
                        train=config_lib.TrainConfig(optimizer="lbfgs"),
                        data=config_lib.DataConfig(n_train=1000, n_test=500, source="dir"))


PAPER_TASKS = ("mnist", "cifar10", "mnist_3v8", "cifar_cars_planes")


def paper_config(task: str, *, adversarial_training: bool = False) -> FlipRateConfig:
  """The core paper's flip-rate grid on ``task`` (``PAPER_TASKS``) as the paper ran it (arXiv 2603.13085 §5;
  docs/theory.md#training-recipe): the paper's recipe (``config_lib.PAPER_TRAIN``; cross-entropy for 10
  classes, ½·MSE for the binary tasks), n = 1,000 training images per seed from the full files (disjoint
  blocks), width 256, 10 seeds, FGSM / PGD (40 steps) / MIM (10 steps) and both controls over the claims ε grid,
  both influence kernels (the trained network's empirical NTK and K∞) from the same attacked data, and the
  sign-randomised attack. Test images: 100, or 96 on cars vs planes (its test split in the data files holds
  192 images of the two classes, and each seed draws its own). With ``adversarial_training`` the paper's PGD
  adversarial training (ε = 0.3) first. Run by ``python -m experiments.paper flip_rate``.

  Raises:
    ValueError: an unknown task.
  """
  if task not in PAPER_TASKS:
    raise ValueError(f"the paper grid's task must be one of {PAPER_TASKS}, got {task!r}")
  n_test = 96 if task == "cifar_cars_planes" else 100
  return FlipRateConfig(tasks=(task,), widths=(256,), seeds=tuple(range(10)), eps=CLAIMS_EPS,
                        data=config_lib.DataConfig(n_train=1000, n_test=n_test, source="dir"),
                        train=config_lib.PAPER_TRAIN, extra_kernels=("infinite",), sign_randomized_control=True,
                        adversarial_training=adversarial_training, at_eps=0.3)
