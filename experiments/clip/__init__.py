"""CLIP against DiffCLIP, trained here on CIFAR-10 captions, under PGD-L∞ and patch attacks (arXiv 2510.00517's
second line of evidence; a substitute for its pretrained models, which cannot be loaded offline).

  python -m experiments.clip --workdir DIR [--standard | --full] [field=value ...]
  python -m experiments.clip.report --workdir DIR

Configs: ``config``; runner: ``run``; plots and summary: ``report``; claim rows: ``claims``.
"""
from __future__ import annotations

from experiments.clip import claims, config, report, run
from experiments.core.spec import ExperimentSpec

SPEC = ExperimentSpec(
    name="clip",
    description="CLIP vs DiffCLIP (trained here on CIFAR-10 captions) under PGD and patch attacks.",
    get_config=config.get_config,
    run=run.run,
    write_report=report.write_report,
    report_description="Redraw the CLIP / DiffCLIP plots and summary.md.",
    config_signature=("templates", "patch_sizes"),
    record_signature=("kind", "source", "size"),
    single_process=True,
    bookkeeping=run.BOOKKEEPING,
    standard=config.STANDARD,
    standard_runs=(("clip", config.standard_config),),
)
