"""What every experiment's report shares: reading and checking a workdir's records
(``experiment_records``), the report skeleton (``write_summary``: render plots and the summary text, write
summary.md) and its command line ``python -m experiments.<name>.report --workdir DIR`` (``report_main``).
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable, Sequence

from experiments.core.cli import check_workdir, user_errors
from experiments.core.spec import ExperimentSpec
from experiments.core.workdir import read_config, read_records


def experiment_records(workdir, experiment: str, required: Sequence[str]) -> list[dict]:
  """The records of ``workdir`` for the report of ``experiments.<experiment>``.

  Raises:
    ValueError: the workdir does not exist, its config.json is corrupt, it holds no records, or holds records
      without one of the
      ``required`` fields (another experiment's workdir); the message is one line naming the workdir.
  """
  path = Path(workdir)
  if not path.is_dir():
    raise ValueError(f"workdir {path} does not exist; run python -m experiments.{experiment} "
                     f"--workdir {path} first")
  if (path / "config.json").exists():
    read_config(path / "config.json")  # a corrupt config.json is named, not ignored
  records = read_records(path)
  if not records:
    raise ValueError(f"{path} holds no records; run python -m experiments.{experiment} --workdir {path} "
                     "first")
  for field in required:
    if any(field not in r for r in records):
      raise ValueError(f"the records in {path} lack the field {field!r} of experiments.{experiment}: is it "
                       "a workdir of another experiment?")
  return records


def write_summary(workdir, experiment: str, required: Sequence[str],
                  render: Callable[[list, Path], str]) -> str:
  """The skeleton of every experiment's ``write_report``: reads the records of ``workdir``
  (``experiment_records``), lets ``render(records, workdir)`` draw its plots and return the summary
  markdown, writes it to ``workdir/summary.md`` and returns it.

  Raises:
    ValueError: no records, or records of another experiment (``experiment_records``).
  """
  workdir = Path(workdir)
  records = experiment_records(workdir, experiment, required)
  text = render(records, workdir)
  (workdir / "summary.md").write_text(text)
  return text


def report_cli(description: str, write_report: Callable, argv=None, prog: str | None = None,
               records: str = "results.jsonl") -> None:
  """``python -m experiments.<name>.report --workdir DIR``: rebuilds plots, derived.json and summary.md
  from the records alone; user errors end with one line on stderr and exit status 2."""
  parser = argparse.ArgumentParser(allow_abbrev=False, prog=prog, description=description)
  parser.add_argument("--workdir", required=True, help=f"a workdir holding {records}")
  args = parser.parse_args(argv)
  with user_errors():
    check_workdir(args.workdir)
    try:
      write_report(args.workdir)
    except KeyError as e:
      raise ValueError(f"the records in {args.workdir} lack the field {e}: is it a workdir of this "
                       "experiment?") from None
  print(f"wrote plots and summary.md to {args.workdir}")


def report_main(spec: ExperimentSpec, argv=None) -> None:
  """``python -m experiments.<name>.report --workdir DIR`` of the experiment ``spec``."""
  report_cli(spec.report_description, spec.write_report, argv, prog=f"python -m experiments.{spec.name}.report")
