"""Matched ViT / DiffViT training, the models the differential-attention and report experiments read.

  python -m experiments.train_vit --workdir DIR [--full] [field=value ...]
  python -m experiments.train_vit.report --workdir DIR

Configs: ``config``; runner: ``run``; plots and summary: ``report``.
"""
from __future__ import annotations

from experiments.train_vit import config, report, run
from experiments.core.spec import ExperimentSpec
from experiments.trainers.vit import BOOKKEEPING

SPEC = ExperimentSpec(
    name="train_vit",
    description="Train matched ViT / DiffViT pairs.",
    get_config=config.get_config,
    run=run.run,
    write_report=report.write_report,
    report_description="Rewrite the ViT / DiffViT training summary.md.",
    config_signature=("depths",),
    record_signature=("kind", "lambda_init"),
    single_process=True,
    bookkeeping=BOOKKEEPING,
)
