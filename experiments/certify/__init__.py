"""Certified ℓ2 robustness of Lipschitz ViTs with local attention bounds (Havens et al., ICML 2024).

  python -m experiments.certify --workdir DIR [--full] [--standard [DATASET]] [field=value ...]
  python -m experiments.certify.report --workdir DIR

Configs: ``config``; runner: ``run``; plots and summary: ``report``; claim rows: ``claims``.
"""
from __future__ import annotations

from functools import partial

from experiments.certify import claims, config, report, run
from experiments.core.spec import ExperimentSpec

SPEC = ExperimentSpec(
    name="certify",
    description="Certified ℓ2 robustness of Lipschitz ViTs with local attention bounds.",
    get_config=config.get_config,
    run=run.run,
    write_report=report.write_report,
    report_description="Redraw the certification plots and summary.md.",
    config_signature=("attention_bounds",),
    record_signature=("attention_bound",),
    single_process=True,
    standard=config.STANDARD,
    standard_runs=(("certify", partial(config.get_config, standard=True)),),
)
