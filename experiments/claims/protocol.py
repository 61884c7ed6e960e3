"""Protocol variants and protocol choices of the claims job.

A workdir whose protocol fields (``data.*``, ``train.*``, readout, adversarial training, ...) differ from the
config the claims job runs (``claims_config`` of its ``claims.CLAIMS``) is a *variant*: its rows stand under
the quick setting's rows. The protocol choices each spec declares (``protocol_choices``) are flipped one at a
time from that config; each is measured (a variant workdir carries its overrides), not run (with the command
that runs it) or not available in this version (a field the config lacks).
"""
from __future__ import annotations

from typing import Optional, Sequence

from experiments import registry
from experiments.core import config as config_lib
from experiments.core.rows import Source
from experiments.core.workdir import jsonable, leaves


def format_value(value) -> str:
  """A config value as a ``field=value`` override writes it (lists comma-separated, booleans lower-case)."""
  if isinstance(value, bool):
    return str(value).lower()
  if isinstance(value, (list, tuple)):
    return ",".join(format_value(v) for v in value)
  return "none" if value is None else str(value)


def diffs(config: dict, reference, grid_fields: frozenset = frozenset()) -> list[str]:
  """'field=value' for every leaf of ``config`` (a config.json dict) that differs from ``reference`` (a config
  dataclass), skipping the fields in ``grid_fields``; fields only one side has are marked."""
  ref, mine = leaves(jsonable(reference)), leaves(config)
  out = []
  for key in sorted(set(ref) | set(mine)):
    if key in grid_fields:
      continue
    if key not in mine:
      out.append(f"{key}=(absent: written by another version)")
    elif key not in ref:
      out.append(f"{key}={format_value(mine[key])} (not a field of this version)")
    elif mine[key] != ref[key]:
      out.append(f"{key}={format_value(mine[key])}")
  return out


def resolve(quick, overrides: Sequence[str]) -> Optional[tuple]:
  """``overrides`` with each field named as the config ``quick`` names it (a field not found under its
  dotted name is looked up by its last part, if exactly one field ends so); None if one is not a field."""
  fields = config_lib.fields_of(quick)
  out = []
  for o in overrides:
    name, value = o.split("=", 1)
    if name not in fields:
      matches = [f for f in fields if f.split(".")[-1] == name.split(".")[-1]]
      if len(matches) != 1:
        return None
      name = matches[0]
    out.append(f"{name}={value}")
  return tuple(out)


def protocol_choices(sources: Sequence[Source], root: str) -> list[dict]:
  """Every registered experiment's protocol choices, grouped by experiment name (alphabetically; within an
  experiment in its spec's order): measured (a variant workdir carries its overrides), not run (with the
  command that runs it into ``root``), or not available in this version."""
  out = []
  for spec in sorted(registry.experiments(), key=lambda s: s.name):
    if not spec.protocol_choices:
      continue
    quick_config = registry.claims_of(spec.name).claims_config()
    quick = {k: format_value(v) for k, v in config_lib.fields_of(quick_config).items()}
    for choice, overrides in spec.protocol_choices:
      overrides = resolve(quick_config, overrides) or overrides
      overrides = tuple(o for o in overrides if quick.get(o.split("=", 1)[0]) != o.split("=", 1)[1]) or overrides
      found = [s for s in sources if s.experiment == spec.name and all(
          o in s.variant or _grid_holds(o, s.records) for o in overrides)]
      if found:
        status, command = "measured", found[0].command
      elif resolve(quick_config, overrides) is None:
        status, command = "not available", ""
      else:
        slug = "_".join(o.split("=", 1)[0].split(".")[-1] for o in overrides)
        base = diffs(jsonable(quick_config), spec.get_config())
        command = spec.command(f"{root}/{spec.name}_{slug}") + " " + " ".join(config_lib.merge_overrides(base,
                                                                                                      overrides))
        status = "not run"
      out.append(dict(choice=choice, experiment=spec.name, overrides=list(overrides), status=status,
                      command=command))
  return out


def _grid_holds(override: str, records) -> bool:
  """Whether a 'tasks=X' or 'datasets=X' choice (grid fields, so no variant label) is measured in ``records``."""
  for prefix, field in (("tasks=", "task"), ("datasets=", "dataset")):
    if override.startswith(prefix):
      return any(r.get(field) == override[len(prefix):] for r in records)
  return False
