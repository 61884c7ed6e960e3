"""Configs as data: a frozen dataclass per experiment, overridable from the command line.

``python -m experiments.width_sweep --workdir runs/x widths=16,64,256 seeds=0,1 datasets=mnist``
Each override is ``field=value``; tuples are comma-separated; booleans are true/false.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import sys
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
    value = kind(text)
  except ValueError:
    raise ValueError(f"{field} must be of type {kind.__name__}, got {text!r}") from None
  if kind is float and not math.isfinite(value):
    raise ValueError(f"{field} must be a finite number, got {text!r}")
  if kind is int and "seed" in field and value < 0:
    raise ValueError(f"{field} must be an integer >= 0 (a random seed), got {value}")
  return value


def _parse(text: str, annotation: Any, field: str) -> Any:
  origin, args = typing.get_origin(annotation), typing.get_args(annotation)
  if origin is tuple:
    kind = args[0]
    values = tuple(_parse_scalar(t.strip(), kind, field) for t in text.split(",") if t.strip())
    if len(set(values)) != len(values):
      raise ValueError(f"{field} holds a value twice ({text!r}): each sweep point is computed once")
    return values
  if origin is typing.Union:  # Optional[X]
    if text.lower() == "none":
      return None
    return _parse(text, [a for a in args if a is not type(None)][0], field)
  return _parse_scalar(text, annotation, field)


def apply_overrides(config, overrides: Sequence[str]):
  """Returns a copy of the dataclass ``config`` with ``field=value`` overrides applied.

  Raises:
    ValueError: unknown field (the message lists the valid ones), a value of the wrong type, a non-finite
      float, a negative seed, a repeated value in a tuple, or whatever the config's ``validate()`` rejects.
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


def _fields_help(config) -> str:
  lines = ["config fields (override as field=value; tuples comma-separated) and their quick defaults:"]
  for f in dataclasses.fields(config):
    value = getattr(config, f.name)
    text = ",".join(str(v) for v in value) if isinstance(value, tuple) else str(value)
    lines.append(f"  {f.name}={text}")
  return "\n".join(lines)


def cli(description: str, get_config, argv=None):
  """Parses ``--workdir``, ``--full``, ``--overwrite_config`` and overrides; returns (config, args).

  ``--help`` lists every config field with its default.
  """
  parser = argparse.ArgumentParser(description=description, epilog=_fields_help(get_config()),
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--workdir", required=True, help="output directory (resumes if it exists)")
  parser.add_argument("--full", action="store_true", help="the full-size config instead of the quick one")
  parser.add_argument("--overwrite_config", action="store_true",
                      help="the workdir holds results of another config: move them into previous-<time>/ "
                           "and start afresh")
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
  with user_errors():
    try:
      write_report(args.workdir)
    except KeyError as e:
      raise ValueError(f"the records in {args.workdir} lack the field {e}: is it a workdir of this "
                       "experiment?") from None
  print(f"wrote plots and summary.md to {args.workdir}")


@contextlib.contextmanager
def user_errors():
  """Turns the errors a user can cause (bad values, missing or corrupt data files) into one line on
  stderr and exit status 2, and Ctrl-C into a note that the finished points are kept (status 130),
  instead of a traceback."""
  try:
    yield
  except (ValueError, FileNotFoundError) as e:
    print(f"error: {e}", file=sys.stderr)
    raise SystemExit(2) from None
  except KeyboardInterrupt:
    print("interrupted: the points finished so far are kept in the workdir; rerun the same command to "
          "resume", file=sys.stderr)
    raise SystemExit(130) from None


def check_common(config, *, dataset_fields=("datasets",), binary_tasks: bool = False, nonempty=(),
                 finite=()) -> None:
  """Checks shared by the experiment configs, run by their ``validate()`` before anything is written.

  Raises:
    ValueError: an unknown data set name (or binary task name, where ``binary_tasks``; listing the valid
      ones), an unknown split or data_source, an empty
      tuple among ``nonempty``, or a non-finite value among the tuples named in ``finite``.
  """
  from experiments.data import BINARY_TASKS, get_spec
  from experiments.data.catalog import SPLITS
  from experiments.data.loader import SOURCES
  for field in nonempty:
    if not getattr(config, field):
      raise ValueError(f"{field} must not be empty")
  for field in dataset_fields:
    for name in getattr(config, field, ()):
      if binary_tasks and name in BINARY_TASKS:
        continue
      try:
        get_spec(name)
      except ValueError as e:
        tasks = f"; binary tasks: {sorted(BINARY_TASKS)}" if binary_tasks else ""
        raise ValueError(f"{field}: {e}{tasks}") from None
  split = getattr(config, "split", "train")
  if split not in SPLITS:
    raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
  source = getattr(config, "data_source", "embedded")
  if source not in SOURCES:
    raise ValueError(f"data_source must be one of {SOURCES}, got {source!r}")
  for field in finite:
    if not all(math.isfinite(v) for v in getattr(config, field)):
      raise ValueError(f"{field} must hold finite numbers, got {getattr(config, field)}")
