"""Argument validation for the ntk package (private)."""
from __future__ import annotations

import numpy as np

from attention._checks import check_finite_matrix


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
  check_finite_matrix(x, name, shape="[n, d] (flattened inputs)")
  if d_in is not None and np.shape(x)[1] != d_in:
    raise ValueError(f"{name} has {np.shape(x)[1]} features but the model expects d_in = {d_in}")
  return x
