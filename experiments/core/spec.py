"""What an experiment declares about itself: ``ExperimentSpec``.

Every experiment package ``experiments/<name>/`` exports one ``SPEC`` (its ``__init__.py``), and
``experiments.registry.EXPERIMENTS`` lists them. The main job, the claims job and the command line find
experiments only through these specs: a new experiment is one folder plus one registry line (docs/layout.md).
A spec holds only what running an experiment needs; what the claims job reads (the declared claims and the
hooks that build their rows) is the experiment's ``claims.CLAIMS`` (``experiments.core.claim.ExperimentClaims``),
registered beside the spec.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional


@dataclasses.dataclass(frozen=True)
class ExperimentSpec:
  """One experiment, as the jobs and the command line see it.

  Attributes:
    name: the package name under ``experiments`` (``python -m experiments.<name>``) and the claims job's
      sub-workdir.
    description: the ``--help`` headline of ``python -m experiments.<name>``.
    get_config: ``get_config(full=False[, standard=None]) -> config`` (a frozen dataclass with
      ``validate()``); ``standard`` is accepted when ``standard`` below is non-empty.
    run: ``run(config, workdir, *, overwrite_config=False) -> list[dict]`` (resumes; validates first).
    write_report: ``write_report(workdir) -> str``: plots and summary.md from the workdir's records alone.
    report_description: the ``--help`` headline of ``python -m experiments.<name>.report``.
    config_signature: config.json fields that identify a workdir of this experiment (all must be present).
    record_signature: record fields that identify it when config.json is absent.
    single_process: refuses more than one process (e.g. its orbax checkpoints are collective across
      processes); ``experiments.core.cli.experiment_main`` enforces it.
    standard: the data sets of its standard grids (``--standard [DATASET]``); () when it has none.
    variant_of: ``(config dict) -> ('field=value', ...)``, the protocol variant of a workdir of an
      experiment the claims job does not run itself (e.g. another data set than its standard grid); () if none.
    grid_fields: config fields (dotted) that are sweep grids or bookkeeping: a workdir differing from
      the claims job's config only in these is the quick setting, not a variant.
    bookkeeping: top-level config fields that change how results are computed, not which (e.g. seeds per
      vmapped program): a workdir resumes under any value of them, and a workdir differing only in them
      is the quick setting or holds a standard grid.
    protocol_choices: ((choice, (field=value, ...)), ...) flipped one at a time from the claims job's config.
    standard_runs: ((sub-workdir, () -> config), ...) of the standard grids ``--standard`` runs when missing.
    stability: trained by full-batch L-BFGS, so rerun by the claims job's stability pass.
    main_job: part of the main job ``python -m experiments`` (its quick config, or with ``--full`` its full one).
  """
  name: str
  description: str
  get_config: Callable[..., Any]
  run: Callable[..., list]
  write_report: Callable[[Any], str]
  report_description: str = ""
  config_signature: tuple[str, ...] = ()
  record_signature: tuple[str, ...] = ()
  single_process: bool = False
  standard: tuple[str, ...] = ()
  variant_of: Optional[Callable[[dict], tuple]] = None
  grid_fields: frozenset = frozenset()
  bookkeeping: frozenset = frozenset()
  protocol_choices: tuple = ()
  standard_runs: tuple = ()
  stability: bool = False
  main_job: bool = False

  def __post_init__(self):
    if not self.name.isidentifier():
      raise ValueError(f"ExperimentSpec name {self.name!r}: must be a Python identifier (a package name)")
    if bool(self.config_signature) != bool(self.record_signature):
      raise ValueError(f"ExperimentSpec {self.name}: give both config_signature and record_signature, or neither")

  def command(self, workdir) -> str:
    """The command line that runs this experiment into ``workdir``."""
    return f"python -m experiments.{self.name} --workdir {workdir}"
