"""The command line of every experiment: ``python -m experiments.<name> --workdir DIR [--full]
[--standard [DATASET]] [--overwrite_config] [field=value ...]`` (``experiment_main``), its report
``python -m experiments.<name>.report --workdir DIR`` (``report_cli``), and the one-line user errors of both
(``user_errors``). Overrides are parsed by ``experiments.core.config.apply_overrides``.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from pathlib import Path

from experiments.core.config import apply_overrides, check_data_available, field_choices, fields_of
from experiments.core.spec import ExperimentSpec
from experiments.core.workdir import removed_if_unused


def _fields_help(config) -> str:
  lines = ["config fields (override as field=value, a group's fields dotted as group.field; tuples "
           "comma-separated) and their quick defaults, with the allowed values where there is a fixed set:"]
  choices = field_choices(config)
  for name, value in fields_of(config).items():
    text = ",".join(str(v) for v in value) if isinstance(value, tuple) else str(value)
    allowed = f"  (one of: {choices[name]})" if name in choices else ""
    lines.append(f"  {name}={text}{allowed}")
  return "\n".join(lines)


def cli(spec: ExperimentSpec, argv=None):
  """Parses ``--workdir``, ``--full``, ``--overwrite_config``, ``--standard`` (where ``spec.standard`` names
  data sets) and overrides for the experiment ``spec``; returns (config, args).

  ``--help`` lists every config field (dotted for the groups) with its default, and the allowed values of
  those declared with ``one_of``. A bad override or a config its ``validate()`` rejects ends the program
  with one line on stderr and exit status 2.
  """
  get_config = spec.get_config
  parser = argparse.ArgumentParser(allow_abbrev=False, prog=f"python -m experiments.{spec.name}", description=spec.description,
                                   epilog=_fields_help(get_config()),
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--workdir", required=True, help="output directory (resumes if it exists)")
  parser.add_argument("--full", action="store_true", help="the full-size config instead of the quick one")
  parser.add_argument("--overwrite_config", action="store_true",
                      help="the workdir holds results of another config: move them into previous-<time>/ "
                           "and start afresh")
  has_standard = bool(spec.standard)
  if has_standard:
    choices = spec.standard
    parser.add_argument("--standard", nargs="?", const=True, default=None,
                        metavar="{" + ",".join(choices) + "}" if choices else "DATASET",
                        help="the standard CPU grid (optionally of one data set) instead of the quick one")
  parser.add_argument("overrides", nargs="*", help="field=value (group.field=value for a group's field)")
  from experiments.core import distributed
  distributed.add_arguments(parser)
  args = parser.parse_args(argv)
  if has_standard and isinstance(args.standard, str) and "=" in args.standard:
    args.overrides.insert(0, args.standard)  # "--standard field=value": the flag without a data set
    args.standard = True
  if has_standard and args.standard == "":
    parser.error("--standard= needs a data set name, or no '=' at all")
  with user_errors():
    check_workdir(args.workdir)
    kwargs = dict(standard=args.standard) if has_standard else {}
    config = apply_overrides(get_config(full=args.full, **kwargs), args.overrides)
    check_data_available(config)
  return config, args


def check_workdir(path, flag: str = "--workdir") -> Path:
  """``path`` as a Path, checked before any work: it names a directory, or a place where one can be made.

  Raises:
    ValueError: ``path`` is empty, or it (or a parent of it) exists and is not a directory.
  """
  if not str(path):
    raise ValueError(f"{flag} must name a directory (got an empty string)")
  p = Path(path)
  for q in (p, *p.parents):
    if q.exists():
      if not q.is_dir():
        raise ValueError(f"{flag} {p}: {q} exists and is not a directory" if q != p
                         else f"{flag} {p} exists and is not a directory")
      break
  return p


def experiment_main(spec: ExperimentSpec, argv=None) -> None:
  """``python -m experiments.<name>`` for every experiment: parse → validate → run → report, with the
  experiment's ``spec`` (its ``get_config``, ``run`` and ``write_report``: plots, ``derived.json`` and
  ``summary.md`` rebuilt from the workdir's ``results.jsonl`` alone).

  Several processes (``--num_processes`` or a detected cluster) join through ``jax.distributed`` first;
  each runs its share of the points, and process 0 writes the report once every process has finished.
  An experiment whose spec says ``single_process`` refuses more than one process.

  User errors (bad values, missing or corrupt data files, another config's workdir, records the report
  cannot read), in any stage, end with one line on stderr and exit status 2; Ctrl-C with the resume note
  and status 130 (``user_errors``).
  """
  from experiments.core import distributed
  from experiments.core.workdir import read_records
  config, args = cli(spec, argv)
  with user_errors():
    count = distributed.initialize(args.coordinator_address, args.num_processes, args.process_id,
                                   global_mesh=args.global_mesh)
    if count > 1 and spec.single_process:
      raise ValueError(f"experiments.{spec.name} runs as one process only (its orbax model checkpoints are "
                       f"collective across processes); got {count} processes")
    with distributed.point_context(), removed_if_unused(args.workdir):
      spec.run(config, args.workdir, overwrite_config=args.overwrite_config)
    distributed.barrier("experiment_main: all points done")
    if distributed.process_index() > 0:
      print(f"process {distributed.process_index()} of {count} done; process 0 writes the report")
      return
    spec.write_report(args.workdir)
  print(f"wrote {len(read_records(args.workdir))} records, plots and summary.md to {args.workdir}")


@contextlib.contextmanager
def user_errors():
  """Turns the errors a user can cause (bad values, missing or corrupt data files, a directory where a file
  belongs or the reverse, a path without permission) into one line on
  stderr and exit status 2 (warnings print as one line too), and Ctrl-C into a note that the finished points are kept (status 130),
  instead of a traceback. A Ctrl-C that a gc callback or finalizer swallowed is raised again
  (``experiments.core.interrupts.ctrl_c_stops``), so the first one stops the run."""
  from experiments.core.interrupts import ctrl_c_stops
  saved, warnings.formatwarning = warnings.formatwarning, _one_line_warning
  try:
    with ctrl_c_stops():
      yield
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    raise SystemExit(2) from None
  except OSError as e:   # a directory where a file belongs or the reverse, a missing file, no permission
    where = f"{e.filename}: " if e.filename else ""
    print(f"error: {where}{(e.strerror or str(e)).lower()}", file=sys.stderr)
    raise SystemExit(2) from None
  except KeyboardInterrupt:
    print("interrupted: the points finished so far are kept in the workdir; rerun the same command to "
          "resume", file=sys.stderr)
    raise SystemExit(130) from None
  finally:
    warnings.formatwarning = saved


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
  """A warning as the command line prints it: 'warning: <message>' on one line (not the source line)."""
  return f"warning: {message}\n"
