"""The width sweep: finite- against infinite-width NTKs of 2L-ReLU and MLP-Attn (arXiv 2603.13085).

  python -m experiments.width_sweep --workdir DIR [--full] [field=value ...]
  python -m experiments.width_sweep.report --workdir DIR

Configs: ``config``; runner: ``run``; plots and summary: ``report``; claim rows: ``claims``.
"""
from __future__ import annotations

from experiments.width_sweep import claims, config, report, run
from experiments.core.spec import ExperimentSpec

SPEC = ExperimentSpec(
    name="width_sweep",
    description="NTK width sweep (finite vs infinite width).",
    get_config=config.get_config,
    run=run.run,
    write_report=report.write_report,
    report_description="Redraw the width-sweep plots and summary.md.",
    config_signature=("kernel_path",),
    record_signature=("kernel_path",),
    grid_fields=frozenset({"converged.common", "data.dir", "data.source", "datasets", "kernel_path", "models",
        "save_arrays", "seeds", "train.datasets", "train.matched_fraction", "train.max_width", "train.seeds",
        "widths"}),
    protocol_choices=(
        ("n: 1,000 training images", ("data.n_train=1000",)),
        ("ridge: λ = 1e-4·tr(K₀)/n", ("converged.ridge_scale=0.0001",)),
        ("data set: CIFAR-10 (where the paper's MLP-Attn distance rises monotonically)", ("datasets=cifar10",)),
    ),
    stability=True,
    main_job=True,
)
