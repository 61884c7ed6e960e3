"""The registry: every experiment the main job, the claims job and the command line know, as its
``ExperimentSpec`` (``experiments.core.spec``) beside its claims (``experiments.<name>.claims.CLAIMS``, an
``experiments.core.claim.ExperimentClaims``: the declared claims and the hooks that build their rows; None for
an experiment without claims). Adding an experiment is one folder ``experiments/<name>/`` exporting ``SPEC``
(and, with claims, ``claims.CLAIMS``) plus one line here (docs/layout.md).

The order is the claims table's: each experiment's rows follow the previous experiment's.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Optional, Sequence, Union

from experiments import (certify, clip, cubing, diff_attention, dual_implications, flip_rate, landscape,
                         report, train_vit, width_sweep)
from experiments.core.claim import Claim, ExperimentClaims
from experiments.core.spec import ExperimentSpec

Entry = tuple[ExperimentSpec, Optional[ExperimentClaims]]

REGISTERED: tuple[Entry, ...] = (
    (width_sweep.SPEC, width_sweep.claims.CLAIMS),
    (cubing.SPEC, cubing.claims.CLAIMS),
    (flip_rate.SPEC, flip_rate.claims.CLAIMS),
    (landscape.SPEC, landscape.claims.CLAIMS),
    (dual_implications.SPEC, dual_implications.claims.CLAIMS),
    (diff_attention.SPEC, diff_attention.claims.CLAIMS),
    (clip.SPEC, clip.claims.CLAIMS),
    (certify.SPEC, certify.claims.CLAIMS),
    (train_vit.SPEC, None),
    (report.SPEC, None),
)
EXPERIMENTS: tuple[ExperimentSpec, ...] = tuple(spec for spec, _ in REGISTERED)
_active: list[tuple[Entry, ...]] = [REGISTERED]


def experiments() -> tuple[ExperimentSpec, ...]:
  """The registered experiments, in registry order."""
  return tuple(spec for spec, _ in _active[-1])


def get(name: str) -> ExperimentSpec:
  """The registered experiment ``name``.

  Raises:
    ValueError: no experiment of that name (the message lists the registered ones).
  """
  for spec in experiments():
    if spec.name == name:
      return spec
  raise ValueError(f"no experiment {name!r}; registered: {', '.join(s.name for s in experiments())}")


def claims_of(name: str) -> Optional[ExperimentClaims]:
  """The claims of the registered experiment ``name`` (None when it has none).

  Raises:
    ValueError: no experiment of that name.
  """
  get(name)
  return next(claims for spec, claims in _active[-1] if spec.name == name)


def with_claims() -> list[tuple[ExperimentSpec, ExperimentClaims]]:
  """(spec, claims) of every registered experiment that has claims, in registry order."""
  return [(spec, claims) for spec, claims in _active[-1] if claims is not None]


def declaration(claim_id: str) -> tuple[str, Claim]:
  """(experiment, declared claim) of a row's ``claim_id``.

  Raises:
    ValueError: no registered experiment declares it, or more than one does (the message names the id).
  """
  found = [(spec.name, c) for spec, claims in with_claims() if (c := claims.declaration(claim_id)) is not None]
  if not found:
    raise ValueError(f"claim_id {claim_id!r} is declared by no registered experiment: add a Claim covering it "
                     "to that experiment's claims.CLAIMS (experiments.core.claim)")
  if len(found) > 1:
    raise ValueError(f"claim_id {claim_id!r} is declared by several experiments: {[name for name, _ in found]}")
  return found[0]


@contextlib.contextmanager
def registered(entries: Sequence[Union[Entry, ExperimentSpec]]) -> Iterator[tuple[ExperimentSpec, ...]]:
  """Within the block, ``entries`` are the registered experiments (e.g. the registry plus a new one, in a
  test): (spec, claims) pairs, or a bare spec for an experiment without claims.

  Raises:
    ValueError: two entries share a name.
  """
  pairs = tuple((e, None) if isinstance(e, ExperimentSpec) else (e[0], e[1]) for e in entries)
  names = [s.name for s, _ in pairs]
  if len(set(names)) != len(names):
    raise ValueError(f"registered: duplicate experiment names in {names}")
  _active.append(pairs)
  try:
    yield tuple(s for s, _ in pairs)
  finally:
    _active.pop()
