"""The core paper's grids as the paper ran them (arXiv 2603.13085 §5; docs/theory.md#training-recipe).

  python -m experiments.paper_grid GRID [GRID ...] [--root results/paper_grid]

Each grid is an experiment of this package run under its ``paper_config``: the paper's training recipe
(``experiments.core.config.PAPER_TRAIN``: Adam 1e-3, L2 1e-3, batch 128, 500 epochs; cross-entropy for
10 classes, ½·MSE for binary tasks), n = 1,000 training images per seed from the full data files
(ATTN_DATA_DIR), 10 seeds. Grids (``GRIDS``), each in its own workdir under the root:
  width_sweep         CIFAR-10, MNIST, Fashion-MNIST, widths 16 … 4096 (``width_sweep.config.paper_config``)
  flip_rate           MNIST, CIFAR-10, MNIST 3 vs 8, CIFAR-10 cars vs planes at width 256
                      (``flip_rate.config.paper_config``), one workdir per task
  adversarial         the same on MNIST after PGD adversarial training at ε = 0.3
  sharpness           MNIST, width 256 (``landscape.config.paper_config``)
Every grid resumes from its records (the workdirs under results/ are committed as they grow) and prints its
wall time. The same commands run unchanged on an accelerator.
"""
