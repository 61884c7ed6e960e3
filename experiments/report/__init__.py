"""The sensitivity report: one report (robustness, local Lipschitz, NTK, influence, attention, certified) for any
Flax attention model.

  python -m experiments.report --workdir DIR [--full] [field=value ...]
  python -m experiments.report.report --workdir DIR

Configs: ``config``; runner: ``run``; plots and summary: ``report``.
"""
from __future__ import annotations

from experiments.report import config, report, run
from experiments.core.spec import ExperimentSpec

SPEC = ExperimentSpec(
    name="report",
    description=("One sensitivity report for any Flax attention model.\n\n"
                 "--model pkg.module:function[(key=literal, ...)]  (required, repeatable): a callable returning "
                 "an attention.model_spec.ModelSpec,\n  e.g. --model "
                 "\"experiments.report.adapters:vit(workdir='runs/vit', depth=1)\""),
    get_config=config.get_config,
    run=run.run,
    write_report=report.write_report,
    report_description="Rebuild summary.md and the plots of a sensitivity report from its records.",
)
