"""The registry: every experiment the main job, the claims job and the command line know, as its
``ExperimentSpec`` (``experiments.core.spec``). Adding an experiment is one folder ``experiments/<name>/``
exporting ``SPEC`` plus one line here (docs/layout.md).

The order is the claims table's: each experiment's rows follow the previous experiment's.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Sequence

from experiments import (certify, cubing, diff_attention, dual_implications, flip_rate, landscape, report,
                         train_vit, width_sweep)
from experiments.core.spec import ExperimentSpec

EXPERIMENTS: tuple[ExperimentSpec, ...] = (
    width_sweep.SPEC,
    cubing.SPEC,
    flip_rate.SPEC,
    landscape.SPEC,
    dual_implications.SPEC,
    diff_attention.SPEC,
    certify.SPEC,
    train_vit.SPEC,
    report.SPEC,
)
_active: list[tuple[ExperimentSpec, ...]] = [EXPERIMENTS]


def experiments() -> tuple[ExperimentSpec, ...]:
  """The registered experiments, in registry order."""
  return _active[-1]


def get(name: str) -> ExperimentSpec:
  """The registered experiment ``name``.

  Raises:
    ValueError: no experiment of that name (the message lists the registered ones).
  """
  for spec in experiments():
    if spec.name == name:
      return spec
  raise ValueError(f"no experiment {name!r}; registered: {', '.join(s.name for s in experiments())}")


@contextlib.contextmanager
def registered(specs: Sequence[ExperimentSpec]) -> Iterator[tuple[ExperimentSpec, ...]]:
  """Within the block, ``specs`` are the registered experiments (e.g. the registry plus a new one, in a test).

  Raises:
    ValueError: two specs share a name.
  """
  specs = tuple(specs)
  names = [s.name for s in specs]
  if len(set(names)) != len(names):
    raise ValueError(f"registered: duplicate experiment names in {names}")
  _active.append(specs)
  try:
    yield specs
  finally:
    _active.pop()
