"""Configs as data: a frozen dataclass per experiment, with nested groups, overridable from the command line.

``python -m experiments.width_sweep --workdir runs/x widths=16,64,256 data.n_train=512 train.max_epochs=30``
Each override is ``field=value``, a field of a group dotted (``data.n_train``); tuples are comma-separated;
booleans are true/false. The groups shared by the experiments live here: ``DataConfig`` (which images),
``TrainConfig`` (minibatch Adam to a train-loss criterion), ``AdamConfig`` (minibatch Adam for fixed
epochs) and ``ClassifierTrainConfig`` (plus warm-up, seed and checkpoints, for
``experiments.trainers.classifier``), ``AttackBudget`` (steps and restarts of an iterative attack).
The command line that reads these configs: ``experiments.core.cli``.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import typing
from typing import Any, Callable, Optional, Sequence

from experiments.data.loader import SOURCES


def _field_name(group: str, field: str) -> str:
  return f"{group}.{field}" if group else field


PREPROCESSINGS = ("raw", "centered")
LR_SELECTIONS = ("per_point", "per_model_dataset")
OPTIMIZERS = ("adam", "lbfgs", "gauss_newton")  # ntk.criterion.OPTIMIZERS (not imported: configs stay free of JAX)


def one_of(default, choices: Sequence, note: str = ""):
  """A config field whose value (each entry, for a tuple) must be one of ``choices``; ``--help`` lists them
  with ``note`` (``field_choices``). The owning config's ``validate`` does the checking, naming the field."""
  return dataclasses.field(default=default, metadata={"choices": tuple(choices), "note": note})


@dataclasses.dataclass(frozen=True)
class DataConfig:
  """Which images an experiment loads (``load_splits``; ``experiments.data.load_dataset``).

  n_train, n_test: class-balanced images drawn with ``seed`` from the train / test split (None: the whole
    split; n_test = 0: no test split is loaded).
  source: 'embedded' (the subsets shipped in the package), 'dir' (the full files in ``dir`` or
    ATTN_DATA_DIR) or 'tfds'. dir: that directory (None: the default).
  seed: the seed of the subset draw (≥ 0).
  holdout: if given, the last ``holdout`` training images form the test split (full CIFAR-10 npz).
  preprocessing: 'raw' (pixels in [0, 1]) or 'centered' (the training split's per-channel scalar mean
    subtracted inside the model's feature map, ``experiments.trainers.network.mean_row``). Centring changes
    what MLP-Attn sees (X Xᵀ X of centred rows), so it is a different model, not a change of units; images,
    and every attack on them, stay in the [0, 1] box. Used by the flip-rate and landscape experiments; the
    others refuse it (``check_common``).
  """
  n_train: Optional[int] = None
  n_test: Optional[int] = None
  source: str = one_of("embedded", SOURCES)
  dir: Optional[str] = None
  seed: int = 0
  holdout: Optional[int] = None
  preprocessing: str = one_of("raw", PREPROCESSINGS, note="centered: flip_rate and landscape only")

  def validate(self, group: str = "data") -> None:
    """Raises ValueError naming the dotted field and its allowed values."""
    errors = FieldErrors()
    name = lambda f: _field_name(group, f)  # noqa: E731
    if self.source not in SOURCES:
      errors.add(f"{name('source')} must be one of {SOURCES}, got {self.source!r}")
    if self.n_train is not None and self.n_train < 1:
      errors.add(f"{name('n_train')} must be >= 1 or None (the whole split), got {self.n_train}")
    if self.n_test is not None and self.n_test < 0:
      errors.add(f"{name('n_test')} must be >= 0 (0: no test split) or None (the whole split), "
                  f"got {self.n_test}")
    if self.seed < 0:
      errors.add(f"{name('seed')} must be an integer >= 0 (a random seed), got {self.seed}")
    if self.holdout is not None and self.holdout < 1:
      errors.add(f"{name('holdout')} must be >= 1 or None, got {self.holdout}")
    if self.preprocessing not in PREPROCESSINGS:
      errors.add(f"{name('preprocessing')} must be one of {PREPROCESSINGS}, got {self.preprocessing!r}")
    errors.raise_any()


def load_splits(data: DataConfig, name: str, *, flatten: bool = False, block: Optional[int] = None):
  """The (train, test) ``Split``s of data set or binary task ``name`` as ``data`` says.

  Args:
    data: a ``DataConfig``.
    name: a data set name ('mnist', 'fashion_mnist', 'cifar10') or a ``BINARY_TASKS`` key.
    flatten: images as rows [n, h·w·c] instead of [n, h, w, c] (float32 in [0, 1]).
    block: if given (≥ 0), the training subset is block ``block`` of a class-balanced partition of the
      training split drawn with data.seed (``experiments.data.class_balanced_block_indices``: blocks share
      no image), and the test subset an independent class-balanced draw with seed data.seed + block.

  Returns:
    (train, test); test is None when ``data.n_test == 0``.

  Raises:
    ValueError, DatasetFileError: as ``experiments.data.load_dataset``.
  """
  from experiments.data import BINARY_TASKS, load_dataset
  dataset, classes = BINARY_TASKS.get(name, (name, None))
  kw = dict(source=data.source, data_dir=data.dir, seed=data.seed, holdout=data.holdout, flatten=flatten,
            classes=classes)
  train = load_dataset(dataset, "train", n=data.n_train, block=block, **kw)
  if block is not None:
    kw["seed"] = data.seed + block
  test = None if data.n_test == 0 else load_dataset(dataset, "test", n=data.n_test, **kw)
  return train, test


@dataclasses.dataclass(frozen=True)
class AdamConfig:
  """Minibatch Adam training for a fixed number of epochs: epochs, batch_size, learning_rate, and l2, the
  coefficient of the L2 penalty (l2/2)·‖θ‖² added to the loss (not optax's decoupled weight decay)."""
  epochs: int = 10
  batch_size: int = 128
  learning_rate: float = 1e-3
  l2: float = 0.0

  def _checks(self):
    return (("epochs", self.epochs >= 0, ">= 0"), ("batch_size", self.batch_size >= 1, ">= 1"),
            ("learning_rate", math.isfinite(self.learning_rate) and self.learning_rate > 0, "finite and > 0"),
            ("l2", math.isfinite(self.l2) and self.l2 >= 0, "finite and >= 0"))

  def validate(self, group: str = "") -> None:
    """Raises ValueError naming the first (dotted) field out of range (NaN and inf are out of every range)."""
    errors = FieldErrors()
    for field, ok, allowed in self._checks():
      if not ok:
        errors.add(f"{_field_name(group, field)} must be {allowed}, got {getattr(self, field)!r}")
    errors.raise_any()


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """A network trained to a stated criterion (``ntk.criterion.train_to_criterion``; the networks of
  ``experiments.flip_rate.run``, ``experiments.landscape.run`` and the converged width-sweep points).

  optimizer: 'adam' (minibatch Adam, the rate chosen from ``learning_rates``) or 'lbfgs' (full-batch
    L-BFGS with a strong-Wolfe line search: no rate, no validation split, no batches; max_epochs caps its
    iterations and the loss is checked at every iterate). MLP-Attn reaches the loss target only with
    L-BFGS (docs/theory.md#why-l-bfgs), so the quick and full configs of the experiments above use it.
    'gauss_newton' (Levenberg–Marquardt through the full empirical NTK, ``ntk.gauss_newton``) trains only
    the fixed-readout network on ½·MSE without a penalty (``check_gauss_newton``); max_epochs caps its steps.

  learning_rates: the Adam learning-rate grid, each finite and > 0; with more than one entry the rate is
    chosen by accuracy on a validation split of ``validation_fraction`` of the training split (never the
    test split). A one-entry grid is that rate, unchosen.
  loss_target: the train-loss target ≥ 0 (the mean data loss, no L2 term: cross-entropy for 10 classes,
    0.05 by default; 0 is never reached, so training runs max_epochs).
  max_epochs: the epoch cap ≥ 1; check_every: epochs between loss checks, ≥ 1.
  batch_size: minibatch size ≥ 1; l2: the coefficient of the L2 penalty (l2/2)·‖θ‖² on the trained
    parameters (a fixed readout is not penalised).
  validation_fraction: the share of training rows held out to choose the rate, in (0, 1).
  lr_selection: 'per_point' (the grid is searched for every seed) or 'per_model_dataset' (searched once
    per model and data set, at the first seed, and reused for the others).
  init_perturbation: δ ∈ [0, 0.01]: each initial parameter θ becomes θ·(1 + δξ), ξ ~ N(0, 1) from a fixed
    key, before training (``experiments.trainers.network.perturb_initial``); 0 leaves it unchanged. The
    claims job's ``--stability`` pass reruns L-BFGS-trained rows at δ = 1e-7 (float32 rounding level).
  """
  learning_rates: tuple[float, ...] = (1e-3, 3e-3, 1e-2, 3e-2)
  loss_target: float = 0.05
  max_epochs: int = 2000
  check_every: int = 50
  batch_size: int = 128
  l2: float = 0.0
  validation_fraction: float = 0.2
  lr_selection: str = one_of("per_point", LR_SELECTIONS)
  optimizer: str = one_of("adam", OPTIMIZERS)
  init_perturbation: float = 0.0

  def selection(self) -> str:
    """The record's lr_selection: 'none' (L-BFGS or Gauss–Newton: no rate), 'fixed' (a one-entry grid), 'per_point' or
    'per_model_dataset'."""
    if self.optimizer != "adam":
      return "none"
    return "fixed" if len(self.learning_rates) == 1 else self.lr_selection

  def criterion_kwargs(self) -> dict:
    """The keyword arguments of ``ntk.criterion.train_to_criterion`` this config sets (all but the grid)."""
    return dict(target_loss=self.loss_target, max_epochs=self.max_epochs, check_every=self.check_every,
                validation_fraction=self.validation_fraction, l2=self.l2, batch_size=self.batch_size,
                optimizer=self.optimizer)

  def validate(self, group: str = "") -> None:
    """Raises ValueError naming the first (dotted) field out of range (NaN and inf are out of every range)."""
    errors = FieldErrors()
    checks = (("learning_rates", bool(self.learning_rates) and all(
        math.isfinite(r) and r > 0 for r in self.learning_rates), "a non-empty grid of finite rates > 0"),
              ("loss_target", math.isfinite(self.loss_target) and self.loss_target >= 0, "finite and >= 0"),
              ("max_epochs", self.max_epochs >= 1, ">= 1"), ("check_every", self.check_every >= 1, ">= 1"),
              ("batch_size", self.batch_size >= 1, ">= 1"),
              ("l2", math.isfinite(self.l2) and self.l2 >= 0, "finite and >= 0"),
              ("validation_fraction", 0 < self.validation_fraction < 1, "in (0, 1)"),
              ("lr_selection", self.lr_selection in LR_SELECTIONS, f"one of {LR_SELECTIONS}"),
              ("optimizer", self.optimizer in OPTIMIZERS, f"one of {OPTIMIZERS}"),
              ("init_perturbation", math.isfinite(self.init_perturbation) and 0 <= self.init_perturbation <= 0.01,
               "in [0, 0.01]"))
    for field, ok, allowed in checks:
      if not ok:
        errors.add(f"{_field_name(group, field)} must be {allowed}, got {getattr(self, field)!r}")
    errors.raise_any()


# The core paper's training recipe (arXiv 2603.13085 §5; docs/theory.md#training-recipe): Adam at 1e-3, an L2
# penalty 1e-3, batch 128, a fixed budget of 500 epochs (a loss target of 0 is never reached, so every network
# trains its whole budget: a fixed-budget point, ``experiments.core.tolerance.reached_target``).
PAPER_TRAIN = TrainConfig(optimizer="adam", learning_rates=(1e-3,), loss_target=0.0, max_epochs=500,
                          check_every=50, batch_size=128, l2=1e-3)


@dataclasses.dataclass(frozen=True)
class ClassifierTrainConfig(AdamConfig):
  """``AdamConfig`` plus warmup_epochs of linear warm-up then cosine decay of the learning rate, seed
  (initialisation, shuffling, dropout, augmentation), augment ("none"; "crop_flip": a random 4-pixel shift
  of the zero-padded image and a random horizontal flip per training image and step, the standard CIFAR-10
  augmentation) and max_to_keep checkpoints (``experiments.trainers.classifier``)."""
  warmup_epochs: int = 1
  seed: int = 0
  augment: str = one_of("none", ("none", "crop_flip"))
  max_to_keep: int = 2

  def _checks(self):
    return super()._checks() + (("augment", self.augment in ("none", "crop_flip"), "'none' or 'crop_flip'"),
                                ("warmup_epochs", self.warmup_epochs >= 0, ">= 0"),
                                ("seed", self.seed >= 0, ">= 0"), ("max_to_keep", self.max_to_keep >= 1, ">= 1"))


@dataclasses.dataclass(frozen=True)
class PlateauRule:
  """Stop training on a validation-accuracy plateau (``experiments.trainers.classifier.plateau_reached``):
  after at least ``min_epochs`` epochs, stop at the first epoch e whose validation accuracy gained less than
  ``min_gain`` (a fraction: 0.005 = 0.5 points) over the last ``window`` epochs, acc[e] − acc[e − window] <
  min_gain. The training config's ``epochs`` is the cap (its learning-rate schedule runs over the cap).
  ``window = 0`` turns the rule off: every epoch up to the cap is trained."""
  min_epochs: int = 0
  window: int = 0
  min_gain: float = 0.005

  def validate(self, group: str = "plateau") -> None:
    """Raises ValueError naming the dotted field and its allowed range."""
    errors = FieldErrors()
    for field, ok, allowed in (("min_epochs", self.min_epochs >= 0, ">= 0"), ("window", self.window >= 0, ">= 0"),
                               ("min_gain", math.isfinite(self.min_gain) and 0 <= self.min_gain <= 1,
                                "finite and in [0, 1] (a fraction of the validation images)")):
      if not ok:
        errors.add(f"{_field_name(group, field)} must be {allowed}, got {getattr(self, field)!r}")
    errors.raise_any()

  @property
  def active(self) -> bool:
    return self.window > 0


@dataclasses.dataclass(frozen=True)
class AttackBudget:
  """An iterative attack's budget: steps (iterations, ≥ 0) and restarts (≥ 1; restart 0 starts at the
  clean input where the attack has that choice, the others at random points of the ε-ball)."""
  steps: int
  restarts: int = 1

  def validate(self, group: str = "") -> None:
    """Raises ValueError naming the dotted field and its allowed range."""
    errors = FieldErrors()
    if self.steps < 0:
      errors.add(f"{_field_name(group, 'steps')} must be >= 0, got {self.steps}")
    if self.restarts < 1:
      errors.add(f"{_field_name(group, 'restarts')} must be >= 1, got {self.restarts}")
    errors.raise_any()


def _parse_scalar(text: str, kind: type, field: str, random_seed: bool = False) -> Any:
  if kind is bool:
    if text.lower() in ("true", "1", "yes"):
      return True
    if text.lower() in ("false", "0", "no"):
      return False
    raise ValueError(f"{field} must be true or false, got {text!r}")
  if kind is type(None):
    return None
  try:
    value = kind(text)
  except ValueError:
    raise ValueError(f"{field} must be of type {kind.__name__}, got {text!r}") from None
  if kind is float and not math.isfinite(value):
    raise ValueError(f"{field} must be a finite number, got {text!r}")
  if kind is int and random_seed and value < 0:
    raise ValueError(f"{field} must be an integer >= 0 (a random seed), got {value}")
  return value


def _parse(text: str, annotation: Any, field: str) -> Any:
  origin, args = typing.get_origin(annotation), typing.get_args(annotation)
  if origin is tuple:
    kind = args[0]
    parts = [t.strip() for t in text.split(",")]
    if text.strip() and not all(parts):
      raise ValueError(f"{field}={text!r} has an empty entry: give comma-separated values (e.g. 16,32)")
    values = tuple(_parse_scalar(t, kind, field, random_seed="seed" in field) for t in parts if t)
    if len(set(values)) != len(values):
      raise ValueError(f"{field} holds a value twice ({text!r}): each sweep point is computed once")
    return values
  if origin is typing.Union:  # Optional[X]
    if text.lower() == "none":
      return None
    return _parse(text, [a for a in args if a is not type(None)][0], field)
  # a scalar '...seeds' counts seeds (e.g. depth1_seeds); a '...seed' or a tuple of '...seeds' holds random seeds
  return _parse_scalar(text, annotation, field, random_seed="seed" in field and not field.endswith("seeds"))


def _is_group(annotation) -> bool:
  return isinstance(annotation, type) and dataclasses.is_dataclass(annotation)


def fields_of(config, prefix: str = "") -> dict[str, Any]:
  """Every leaf field of a (nested) config dataclass by its dotted name, e.g. {'data.n_train': 256, ...}."""
  out = {}
  for f in dataclasses.fields(config):
    value = getattr(config, f.name)
    if dataclasses.is_dataclass(value):
      out.update(fields_of(value, f"{prefix}{f.name}."))
    else:
      out[prefix + f.name] = value
  return out


def check_data_available(config, prefix: str = "") -> None:
  """Checks, before any work, that every data group of ``config`` (a ``DataConfig`` or any group with ``source``
  and ``dir`` fields; nested groups included) that reads the full data files (``source = 'dir'``) names an
  existing directory, by its ``dir`` or ATTN_DATA_DIR.

  Raises:
    ValueError: naming the group's dotted ``dir`` field, the variable, and what the directory must hold.
  """
  import os
  from experiments.data.loader import DATA_DIR_ENV
  for f in dataclasses.fields(config):
    value = getattr(config, f.name)
    if dataclasses.is_dataclass(value) and getattr(value, "source", None) == "dir" and hasattr(value, "dir"):
      where = value.dir or os.environ.get(DATA_DIR_ENV)
      field = f"{prefix}{f.name}"
      if not where:
        raise ValueError(f"{field}.source='dir' reads the full data files, but neither {field}.dir nor "
                         f"{DATA_DIR_ENV} names their directory: set {DATA_DIR_ENV}=DIR, DIR holding mnist/, "
                         "fashion_mnist/ and cifar10/ (docs/data.md#full-data-files)")
      if not os.path.isdir(where):
        named = f"{field}.dir" if value.dir else DATA_DIR_ENV
        raise ValueError(f"{named}={where!r} is not a directory (the full data files' directory, holding mnist/, "
                         "fashion_mnist/ and cifar10/: docs/data.md#full-data-files)")
    elif dataclasses.is_dataclass(value):
      check_data_available(value, f"{prefix}{f.name}.")


def _replace(config, changes: dict[tuple[str, ...], Any]):
  """dataclasses.replace through nested groups; ``changes`` maps field paths to new values."""
  direct = {path[0]: value for path, value in changes.items() if len(path) == 1}
  nested: dict[str, dict] = {}
  for path, value in changes.items():
    if len(path) > 1:
      nested.setdefault(path[0], {})[path[1:]] = value
  for group, sub in nested.items():
    direct[group] = _replace(getattr(config, group), sub)
  return dataclasses.replace(config, **direct)


def apply_overrides(config, overrides: Sequence[str]):
  """Returns a copy of the dataclass ``config`` with ``field=value`` overrides applied.

  A field of a nested group is named by its dotted path (``data.n_train=512``, ``train.max_epochs=30``).
  A config class may link fields (``LINKED_FIELDS = {"widths": ("converged.widths",)}``): overriding the source
  without a target keeps the target's values that lie in the source's, or takes the source's when none does.

  Raises:
    ValueError: unknown field (the message lists the valid ones), a field given twice, a group named without
      a field, a value
      of the wrong type, a non-finite float, a negative seed, a repeated value in a tuple, or whatever the
      config's ``validate()`` rejects.
  """
  changes, given = {}, {}
  for item in overrides:
    if "=" not in item:
      raise ValueError(f"override {item!r} must look like field=value")
    field, text = item.split("=", 1)
    if field in given:
      raise ValueError(f"{field} is given twice ({given[field]}, {item}): give each field once")
    given[field] = item
    path = tuple(field.split("."))
    owner = type(config)
    for depth, part in enumerate(path):
      hints = typing.get_type_hints(owner)
      if part not in hints:
        raise ValueError(f"unknown config field {field!r}; valid fields: {sorted(fields_of(config))}")
      annotation = hints[part]
      if _is_group(annotation):
        if depth == len(path) - 1:
          raise ValueError(f"{field} is a group of fields: override one of them, e.g. "
                           f"{field}.{dataclasses.fields(annotation)[0].name}=...")
        owner = annotation
      elif depth != len(path) - 1:
        raise ValueError(f"unknown config field {field!r}; valid fields: {sorted(fields_of(config))}")
    changes[path] = _parse(text, annotation, field)
  for source, targets in getattr(config, "LINKED_FIELDS", {}).items():  # e.g. widths -> converged.widths
    if (source,) not in changes:
      continue
    chosen = changes[(source,)]
    for target in targets:
      path = tuple(target.split("."))
      if path not in changes:
        current = functools.reduce(getattr, path, config)
        changes[path] = tuple(v for v in current if v in chosen) or chosen
  new = _replace(config, changes)
  validate = getattr(new, "validate", None)
  if validate is not None:
    validate()
  return new


def merge_overrides(*groups: Sequence[str]) -> list[str]:
  """One list of ``field=value`` overrides from several, a later group's value of a field replacing an
  earlier one's (in the earlier one's place): for code that composes overrides, since ``apply_overrides``
  refuses a field given twice.

  Raises:
    ValueError: an item that is not ``field=value``.
  """
  merged: dict[str, str] = {}
  for group in groups:
    for item in group:
      if "=" not in item:
        raise ValueError(f"override {item!r} must look like field=value")
      merged[item.split("=", 1)[0]] = item
  return list(merged.values())


def field_choices(config, prefix: str = "") -> dict[str, str]:
  """The allowed values of every leaf field declared with ``one_of`` as help text ('a | b', then the note),
  by dotted name."""
  out = {}
  for f in dataclasses.fields(config):
    value = getattr(config, f.name)
    if dataclasses.is_dataclass(value):
      out.update(field_choices(value, f"{prefix}{f.name}."))
    elif "choices" in f.metadata:
      out[prefix + f.name] = " | ".join(f.metadata["choices"]) + (f"; {f.metadata['note']}" if f.metadata["note"]
                                                                   else "")
  return out


def select_config(full: bool, standard, *, quick: Callable[[], Any], full_config: Callable[[], Any],
                  standard_config: Callable[[str], Any], datasets: Sequence[str]):
  """The ``get_config(full, standard)`` of the experiments with standard grids: the quick config, the full one
  (``--full``), or a standard grid (``--standard [DATASET]``; True: the first of ``datasets``).

  Raises:
    ValueError: ``full`` and ``standard`` together.
  """
  if standard and full:
    raise ValueError("--full and --standard are exclusive")
  if standard:
    return standard_config(datasets[0] if standard is True else standard)
  return full_config() if full else quick()


class ConfigErrors(ValueError):
  """Every field error a config's ``validate`` found (``messages``), raised at once: the message itself when
  there is one, else "N fields are out of range: a; b; …"."""

  def __init__(self, messages: Sequence[str]):
    self.messages = list(messages)
    super().__init__(self.messages[0] if len(self.messages) == 1 else
                     f"{len(self.messages)} fields are out of range: " + "; ".join(self.messages))


class FieldErrors:
  """Collects a ``validate``'s errors so that a user sees all of them in one run: ``add`` a message, ``check``
  a check that raises ValueError (its messages are kept), then ``raise_any``."""

  def __init__(self):
    self.messages: list[str] = []

  def add(self, message: str) -> None:
    self.messages.append(message)

  def check(self, fn: Callable[[], Any]) -> None:
    try:
      fn()
    except ConfigErrors as e:
      self.messages.extend(e.messages)
    except ValueError as e:
      self.messages.append(str(e))

  def raise_any(self) -> None:
    """Raises:
      ConfigErrors (a ValueError): when any error was collected."""
    if self.messages:
      raise ConfigErrors(self.messages)


def check_gauss_newton(train: TrainConfig, group: str, *, mse: bool, fixed_readout: bool) -> None:
  """Raises ValueError naming ``<group>.optimizer`` when it is 'gauss_newton' where that cannot train: it
  needs ½·MSE (binary tasks or the converged width-sweep points, not 10-class cross-entropy), the fixed
  readout, and l2 = 0."""
  if train.optimizer != "gauss_newton":
    return
  why = [w for w, bad in (("a cross-entropy task (use binary tasks, which train on ½·MSE)", not mse),
                          ("a trained readout (readout must be 'fixed')", not fixed_readout),
                          (f"{group}.l2 = {train.l2} (must be 0)", train.l2 != 0)) if bad]
  if why:
    raise ValueError(f"{group}.optimizer='gauss_newton' trains only the fixed-readout network on ½·MSE without "
                     f"a penalty, but this config has {'; '.join(why)}")


def check_dataset_names(names, field: str, *, binary_tasks: bool = False) -> None:
  """Raises ValueError naming ``field`` when a name is not a data set (nor, with ``binary_tasks``, a
  ``BINARY_TASKS`` key), listing the valid ones."""
  from experiments.data import BINARY_TASKS, get_spec
  for name in names:
    if binary_tasks and name in BINARY_TASKS:
      continue
    try:
      get_spec(name)
    except ValueError as e:
      tasks = f"; binary tasks: {sorted(BINARY_TASKS)}" if binary_tasks else ""
      raise ValueError(f"{field}: {e}{tasks}") from None


def check_common(config, *, dataset_fields=("datasets",), binary_tasks: bool = False, nonempty=(),
                 finite=(), centering: bool = False) -> None:
  """Checks shared by the experiment configs, run by their ``validate()`` before anything is written.

  Validates every nested group (``data``, ``train``, attack budgets, ...) through its own ``validate``.
  Without ``centering`` (the experiments that read raw pixels only) ``data.preprocessing`` must be 'raw',
  so a centring request is refused rather than ignored.

  Raises:
    ValueError (``ConfigErrors``, all of them at once): an unknown data set name (or binary task name, where
      ``binary_tasks``; listing the valid ones), a group field out of range (named dotted, e.g.
      ``data.source``), an empty tuple among ``nonempty``, or a non-finite value among the tuples named in
      ``finite``.
  """
  errors = FieldErrors()
  for field in nonempty:
    if not getattr(config, field):
      errors.add(f"{field} must not be empty")
  for field in dataset_fields:
    errors.check(lambda field=field: check_dataset_names(getattr(config, field, ()), field, binary_tasks=binary_tasks))
  for f in dataclasses.fields(config):
    group = getattr(config, f.name)
    if dataclasses.is_dataclass(group) and hasattr(group, "validate"):
      errors.check(lambda group=group, name=f.name: group.validate(name))
  data = getattr(config, "data", None)
  if not centering and getattr(data, "preprocessing", "raw") != "raw":
    errors.add(f"data.preprocessing={data.preprocessing!r} is not supported here: only the flip-rate and "
               "landscape experiments centre their inputs; this one reads raw pixels (use 'raw')")
  for field in finite:
    if not all(math.isfinite(v) for v in getattr(config, field)):
      errors.add(f"{field} must hold finite numbers, got {getattr(config, field)}")
  errors.raise_any()
