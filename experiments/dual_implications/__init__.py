"""Dual implications: kernel fits of top- and bottom-mode targets by 2L-ReLU and MLP-Attn (arXiv 2603.13085).

  python -m experiments.dual_implications --workdir DIR [--full] [field=value ...]
  python -m experiments.dual_implications.report --workdir DIR

Configs: ``config``; runner: ``run``; plots and summary: ``report``; claim rows: ``claims``.
"""
from __future__ import annotations

from experiments.dual_implications import claims, config, report, run
from experiments.core.spec import ExperimentSpec

SPEC = ExperimentSpec(
    name="dual_implications",
    description="Dual implications: kernel fit of top- vs bottom-mode targets.",
    get_config=config.get_config,
    run=run.run,
    write_report=report.write_report,
    report_description="Rebuild the dual-implications plot and summary from results.jsonl.",
    config_signature=("targets", "network_seeds"),
    record_signature=("kernel_error", "alignment"),
    grid_fields=frozenset({"data.dir", "data.source", "datasets", "draws", "models", "network_seeds", "seeds",
        "targets"}),
    stability=True,
)
