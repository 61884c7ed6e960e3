"""Influence flip rates: how often NTK leave-one-out influence flips sign under attacks on the training data
(arXiv 2603.13085).

  python -m experiments.flip_rate --workdir DIR [--full] [--standard [DATASET]] [field=value ...]
  python -m experiments.flip_rate.report --workdir DIR

Configs: ``config``; runner: ``run``; plots and summary: ``report``; claim rows: ``claims``.
"""
from __future__ import annotations

from functools import partial

from experiments.flip_rate import claims, config, report, run
from experiments.core.spec import ExperimentSpec

SPEC = ExperimentSpec(
    name="flip_rate",
    description="Flip rate of NTK influence under attacks on the training data.",
    get_config=config.get_config,
    run=run.run,
    write_report=report.write_report,
    report_description="Redraw the flip-rate plots and summary.md.",
    config_signature=("attacks", "top_fraction"),
    record_signature=("flip_rate", "attack"),
    standard=config.STANDARD,
    grid_fields=frozenset({"attacks", "data.dir", "data.source", "eps", "models", "seed_floor", "seeds", "tasks",
        "widths"}),
    protocol_choices=(
        ("preprocessing: centred inputs", ("data.preprocessing=centered",)),
        ("training: Adam 1e-3 for at most 500 epochs, no L2 (the paper's recipe without its L2)",
         ("train.optimizer=adam", "train.learning_rates=0.001", "train.max_epochs=500")),
        ("training: the paper's recipe, Adam 1e-3, L2 1e-3, at most 500 epochs",
         ("train.optimizer=adam", "train.learning_rates=0.001", "train.max_epochs=500", "train.l2=0.001")),
        ("training: L-BFGS with L2 1e-3 (the paper's penalty)", ("train.l2=0.001",)),
        ("data: one training subset for every seed", ("data_seed_follows_seed=false",)),
        ("influence kernel: K₀ (initial parameters)", ("influence_kernel=init",)),
        ("influence kernel: K∞ (infinite width, analytic)", ("influence_kernel=infinite",)),
        ("ridge: λ = 1e-5·tr(K)/n (×0.01)", ("ridge_scale=1e-05",)),
        ("ridge: λ = 1e-1·tr(K)/n (×100)", ("ridge_scale=0.1",)),
        ("n: 1,000 training images", ("data.n_train=1000",)),
        ("adversarial training (PGD, ε = 0.3)", ("adversarial_training=true",)),
        ("task: CIFAR-10", ("tasks=cifar10",)),
    ),
    standard_runs=(("flip_rate_standard", partial(config.standard_config, "mnist")),
                   ("flip_rate_standard_cifar10", partial(config.standard_config, "cifar10"))),
    stability=True,
    main_job=True,
)
