"""Matched ViT / DiffViT training (experiments.train_vit): the points of the full grid, one ViT and one DiffViT
per depth and λ_init, each named once. The trained models' numbers are pinned by the golden records
(tests/experiments/test_golden_records.py)."""
from experiments.train_vit import config as train_vit_config
from experiments.train_vit import run as train_vit


def test_full_configs_validate_and_points():
  cfg = train_vit_config.get_config(full=True)
  cfg.validate()
  pts = train_vit.points(cfg)
  assert len(pts) == 2 * 5 + 2 and len({p.name for p in pts}) == len(pts)
