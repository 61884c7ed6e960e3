"""Sharpness: the top Hessian eigenvalue and loss landscapes at the trained minima (arXiv 2603.13085).

  python -m experiments.landscape --workdir DIR [--full] [field=value ...]
  python -m experiments.landscape.report --workdir DIR

Configs: ``config``; runner: ``run``; plots and summary: ``report``; claim rows: ``claims``.
"""
from __future__ import annotations

from experiments.landscape import claims, config, report, run
from experiments.core.spec import ExperimentSpec

SPEC = ExperimentSpec(
    name="landscape",
    description="Sharpness and loss landscapes of 2L-ReLU and MLP-Attn.",
    get_config=config.get_config,
    run=run.run,
    write_report=report.write_report,
    report_description="Redraw the loss-landscape plots and summary.md.",
    config_signature=("lanczos_iters",),
    record_signature=("top_eigenvalues",),
    grid_fields=frozenset({"data.dir", "data.source", "grid_1d", "grid_2d", "lanczos_iters", "models", "seeds",
        "span", "tasks", "top_k", "widths"}),
    protocol_choices=(
        ("preprocessing: centred inputs", ("data.preprocessing=centered",)),
        ("training: Adam 1e-3 for at most 500 epochs, no L2 (the paper's recipe without its L2)",
         ("train.optimizer=adam", "train.learning_rates=0.001", "train.max_epochs=500")),
        ("training: L-BFGS with L2 1e-3 (the paper's penalty)", ("train.l2=0.001",)),
    ),
    stability=True,
)
