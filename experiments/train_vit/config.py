"""The configs of ``experiments.train_vit``: ``get_config(full=False)``.

Override any field on the command line as ``field=value`` (``experiments.core.config.apply_overrides``).
"""
from __future__ import annotations


from experiments.trainers.vit import TrainViTConfig, full_config


def get_config(full: bool = False) -> TrainViTConfig:
  """The quick CPU config, or with ``full`` the accelerator one (``experiments.trainers.vit.full_config``)."""
  return full_config() if full else TrainViTConfig()
