"""The configs of ``experiments.cubing``: ``get_config(full=False)``.

Override any field on the command line as ``field=value`` (``experiments.core.config.apply_overrides``).
"""
from __future__ import annotations

import dataclasses
from typing import Optional


from experiments.core import config as config_lib
from experiments.data.catalog import SPLITS


@dataclasses.dataclass(frozen=True)
class CubingDataConfig:
  """Where the subsets come from: source and dir as in ``experiments.core.config.DataConfig``; split: 'train'
  or 'test'. (The subset sizes and seeds are the sweep's ``ns`` and ``seeds``.)"""
  source: str = config_lib.one_of("embedded", config_lib.SOURCES)
  dir: Optional[str] = None
  split: str = config_lib.one_of("train", SPLITS)

  def validate(self, group: str = "data") -> None:
    """Raises ValueError naming the dotted field and its allowed values."""
    errors = config_lib.FieldErrors()
    if self.source not in config_lib.SOURCES:
      errors.add(f"{group}.source must be one of {config_lib.SOURCES}, got {self.source!r}")
    if self.split not in SPLITS:
      errors.add(f"{group}.split must be one of {SPLITS}, got {self.split!r}")
    errors.raise_any()


@dataclasses.dataclass(frozen=True)
class CubingConfig:
  """datasets; ns: subset sizes; seeds: one random class-balanced subset per seed; layers: stacking
  depths; eps: accuracies for the implied widths; data: source, dir and split of the subsets."""
  datasets: tuple[str, ...] = ("mnist", "fashion_mnist", "cifar10")
  ns: tuple[int, ...] = (50, 100, 256, 500, 1000)
  seeds: tuple[int, ...] = (0, 1, 2)
  layers: tuple[int, ...] = (1, 2, 3)
  eps: tuple[float, ...] = (0.1, 0.01)
  data: CubingDataConfig = CubingDataConfig()

  def validate(self) -> None:
    errors = config_lib.FieldErrors()
    errors.check(lambda: config_lib.check_common(self, nonempty=("datasets", "ns", "seeds", "layers", "eps"),
                                                 finite=("eps",)))
    if not self.ns or any(n < 2 for n in self.ns):
      errors.add(f"ns must be integers ≥ 2, got {self.ns}")
    if any(k < 1 for k in self.layers):
      errors.add(f"layers must be ≥ 1, got {self.layers}")
    if any(e <= 0 for e in self.eps):
      errors.add(f"eps must be > 0, got {self.eps}")
    errors.raise_any()


def get_config(full: bool = False) -> CubingConfig:
  if not full:
    return CubingConfig()
  return CubingConfig(ns=(50, 100, 256, 500, 1000, 2000, 4000), seeds=(0, 1, 2, 3, 4),
                      data=CubingDataConfig(source="dir"))
