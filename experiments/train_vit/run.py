"""Train matched ViT / DiffViT pairs on CIFAR-10 (or MNIST / Fashion-MNIST) with orbax checkpoints.

Usage:
  python -m experiments.train_vit --workdir /tmp/vit [--full] [field=value ...]

Quick config (default): the embedded CIFAR-10 subset (1,500 train / 500 test images), patch 4, width 64,
4 standard heads vs 2 differential heads (λ_init 0.8), depth 1, 15 epochs of Adam (batch 64, lr 2e-3,
warm-up then cosine). About a minute per model on 2 CPU cores; test accuracy about 0.35–0.40 (chance 0.10).
``--full``: the full CIFAR-10 files (``data.source=dir``, ATTN_DATA_DIR; 45,000 train, 5,000 held out),
width 192, 6 / 3 heads, depths {1, 2, 4, 8, 12}, λ_init ∈ {0.5, 0.8, 0.95} at depth 1, 100 epochs —
sized for an accelerator.

Writes config.json, results.jsonl (one record per trained model: clean accuracy, parameter count, training
history, wall time) and the checkpoints under ``models/<name>/checkpoints`` (``train_classifier``);
a restarted run resumes inside an unfinished model and skips finished ones; summary.md lists the models
(``experiments.train_vit.report``). The training itself is ``experiments.trainers.vit``.

Source: arXiv 2510.00517 (docs/theory.md#matched-vit-and-diffvit); models in ``attention.vit``.
"""
from __future__ import annotations

from tqdm.auto import tqdm

from experiments.trainers.vit import BOOKKEEPING, TrainViTConfig, load_data, points, train_points
from experiments.core.workdir import Workdir

KEY_FIELDS = ("kind", "model", "depth", "lambda_init", "seed_index")


def run(config: TrainViTConfig, workdir, *, overwrite_config: bool = False) -> list[dict]:
  """Trains every point of the config (resuming), appending one record per finished model."""
  config.validate()
  wd = Workdir(workdir, KEY_FIELDS, config, overwrite_config=overwrite_config, bookkeeping=BOOKKEEPING)
  done = wd.done()
  todo = [p for p in points(config) if ("train", p.model, p.depth, p.lambda_init, p.seed_index) not in done]
  if todo:
    train, test = load_data(config)
    for trained in tqdm(train_points(config, todo, train, test, workdir), total=len(todo), desc="train (Diff)ViT",
                        unit="model"):
      wd.append(trained.record)
  return wd.records()
