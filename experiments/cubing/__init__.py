"""Condition-number cubing: κ(G̃) = κ(G)³ for the linearized-attention Gram (arXiv 2603.13085).

  python -m experiments.cubing --workdir DIR [--full] [field=value ...]
  python -m experiments.cubing.report --workdir DIR

Configs: ``config``; runner: ``run``; plots and summary: ``report``; claim rows: ``claims``.
"""
from __future__ import annotations

from experiments.cubing import claims, config, report, run
from experiments.core.spec import ExperimentSpec

SPEC = ExperimentSpec(
    name="cubing",
    description="Condition-number cubing check κ(G̃) = κ(G)³.",
    get_config=config.get_config,
    run=run.run,
    write_report=report.write_report,
    report_description="Redraw the condition-number cubing plot and summary.md.",
    config_signature=("ns", "layers"),
    record_signature=("log10_kappa_G",),
    grid_fields=frozenset({"data.dir", "data.source", "datasets", "eps", "layers", "ns", "seeds"}),
    main_job=True,
)
