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


def test_seeds_in_one_program_give_the_models_of_seeds_one_after_another_and_resume_either_way(tmp_path):
  """seeds_per_program is bookkeeping: 2 seeds vmapped give each seed's model of the sequential run (same
  predictions; accuracy equal), and a workdir resumes under another value without retraining."""
  import dataclasses
  import json
  from experiments.core import config as config_lib
  base = train_vit_config.get_config()
  cfg = dataclasses.replace(
      base, models=("vit",), depths=(1,), lambda_inits=("0.8",), dim=8, num_heads=2, patch_size=8, depth1_seeds=2,
      data=dataclasses.replace(base.data, n_train=128, n_test=64),
      train=config_lib.ClassifierTrainConfig(epochs=1, batch_size=32, learning_rate=1e-3, l2=0.0, warmup_epochs=0,
                                             seed=0))
  one = train_vit.run(cfg, tmp_path / "one")
  two = train_vit.run(dataclasses.replace(cfg, seeds_per_program=2), tmp_path / "two")
  assert [r["seeds_in_program"] for r in two] == [2, 2]
  for a, b in zip(one, two):
    assert a["name"] == b["name"] and a["clean_accuracy"] == b["clean_accuracy"]
    assert abs(a["history"][0]["loss"] - b["history"][0]["loss"]) < 1e-5
  again = train_vit.run(cfg, tmp_path / "two")                 # the other value resumes: nothing retrained
  assert [r["wall_time_s"] for r in again] == [r["wall_time_s"] for r in two]
  assert json.loads((tmp_path / "two" / "config.json").read_text())["seeds_per_program"] == 1
