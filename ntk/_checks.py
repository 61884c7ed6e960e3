"""Argument validation for the ntk package (private)."""
from __future__ import annotations

import jax
import numpy as np


def check_width(width, name: str = "width") -> int:
  """Returns width as int; raises ValueError unless it is an integer ≥ 1 (or a float with an integer value)."""
  if isinstance(width, bool) or not isinstance(width, (int, float, np.integer, np.floating)) or not (
      np.isfinite(width) and width >= 1 and int(width) == width):
    raise ValueError(f"{name} must be an integer ≥ 1, got {width!r}")
  return int(width)


def check_inputs(x, name: str, d_in: int | None = None):
  """Checks x is a finite [n, d] matrix (and d == d_in when given); returns it unchanged.

  Raises:
    ValueError: naming ``name``, on wrong rank, mismatched feature count or NaN/inf entries
      (the NaN check is skipped for traced values).
  """
  shape = tuple(np.shape(x))
  if len(shape) != 2:
    raise ValueError(f"{name} must have rank 2 with shape [n, d] (flattened inputs), got shape {shape}")
  if d_in is not None and shape[1] != d_in:
    raise ValueError(f"{name} has {shape[1]} features but the model expects d_in = {d_in}")
  if not isinstance(x, jax.core.Tracer) and not np.isfinite(np.asarray(x)).all():
    raise ValueError(f"{name} holds NaN or inf values; expected finite floats")
  return x
