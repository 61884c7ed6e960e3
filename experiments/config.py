"""Configs as data: a frozen dataclass per experiment, overridable from the command line.

``python -m experiments.width_sweep --workdir runs/x widths=16,64,256 seeds=0,1 datasets=mnist``
Each override is ``field=value``; tuples are comma-separated; booleans are true/false.
"""
from __future__ import annotations

import argparse
import dataclasses
import typing
from typing import Any, Sequence


def _parse_scalar(text: str, kind: type, field: str) -> Any:
  if kind is bool:
    if text.lower() in ("true", "1", "yes"):
      return True
    if text.lower() in ("false", "0", "no"):
      return False
    raise ValueError(f"{field} must be true or false, got {text!r}")
  if kind is type(None):
    return None
  try:
    return kind(text)
  except ValueError:
    raise ValueError(f"{field} must be of type {kind.__name__}, got {text!r}") from None


def _parse(text: str, annotation: Any, field: str) -> Any:
  origin, args = typing.get_origin(annotation), typing.get_args(annotation)
  if origin is tuple:
    kind = args[0]
    return tuple(_parse_scalar(t.strip(), kind, field) for t in text.split(",") if t.strip())
  if origin is typing.Union:  # Optional[X]
    if text.lower() == "none":
      return None
    return _parse(text, [a for a in args if a is not type(None)][0], field)
  return _parse_scalar(text, annotation, field)


def apply_overrides(config, overrides: Sequence[str]):
  """Returns a copy of the dataclass ``config`` with ``field=value`` overrides applied.

  Raises:
    ValueError: unknown field (the message lists the valid ones) or a value of the wrong type.
  """
  hints = typing.get_type_hints(type(config))
  changes = {}
  for item in overrides:
    if "=" not in item:
      raise ValueError(f"override {item!r} must look like field=value")
    field, text = item.split("=", 1)
    if field not in hints:
      raise ValueError(f"unknown config field {field!r}; valid fields: {sorted(hints)}")
    changes[field] = _parse(text, hints[field], field)
  new = dataclasses.replace(config, **changes)
  validate = getattr(new, "validate", None)
  if validate is not None:
    validate()
  return new


def cli(description: str, get_config, argv=None):
  """Parses ``--workdir``, ``--full``, ``--overwrite_config`` and overrides; returns (config, args)."""
  parser = argparse.ArgumentParser(description=description,
                                   epilog="overrides: field=value (comma-separated for tuples)")
  parser.add_argument("--workdir", required=True, help="output directory (resumes if it exists)")
  parser.add_argument("--full", action="store_true", help="the full-size config instead of the quick one")
  parser.add_argument("--overwrite_config", action="store_true",
                      help="resume a workdir whose config.json differs from this config")
  parser.add_argument("overrides", nargs="*", help="field=value")
  args = parser.parse_args(argv)
  try:
    config = apply_overrides(get_config(full=args.full), args.overrides)
  except ValueError as e:
    parser.error(str(e))
  return config, args


def report_cli(description: str, write_report, argv=None) -> None:
  """``python -m experiments.<name>_report --workdir DIR``: redraws plots and summary.md from the records."""
  parser = argparse.ArgumentParser(description=description)
  parser.add_argument("--workdir", required=True, help="a workdir holding results.jsonl")
  args = parser.parse_args(argv)
  write_report(args.workdir)
  print(f"wrote plots and summary.md to {args.workdir}")
