"""Differential attention under attack: DiffViT against ViT (arXiv 2510.00517).

  python -m experiments.diff_attention --workdir DIR [--full] [--standard [DATASET]] [field=value ...]
  python -m experiments.diff_attention.report --workdir DIR

Configs: ``config``; runner: ``run``; plots and summary: ``report``; claim rows: ``claims``.
"""
from __future__ import annotations

from functools import partial

from experiments.diff_attention import claims, config, report, run
from experiments.core.spec import ExperimentSpec
from experiments.trainers.vit import BOOKKEEPING

SPEC = ExperimentSpec(
    name="diff_attention",
    description="Differential attention under attack (DiffViT vs ViT).",
    get_config=config.get_config,
    run=run.run,
    write_report=report.write_report,
    report_description="Redraw the differential-attention plots and summary.md.",
    config_signature=("eps_255", "lipschitz_samples"),
    record_signature=("kind", "lambda_init", "attack"),
    single_process=True,
    bookkeeping=BOOKKEEPING,
    standard=config.STANDARD,
    variant_of=claims.variant_of,
    standard_runs=(("diff_attention", partial(config.standard_config, "fashion_mnist")),
                   ("diff_attention_cifar10", partial(config.standard_config, "cifar10"))),
)
