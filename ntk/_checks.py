"""Argument validation for the ntk package (private)."""
from __future__ import annotations

import jax
import numpy as np

from attention._checks import check_finite_matrix, check_no_overflow


def check_width(width, name: str = "width") -> int:
  """Returns width as int; raises ValueError unless it is an integer ≥ 1 (or a float with an integer value)."""
  if isinstance(width, bool) or not isinstance(width, (int, float, np.integer, np.floating)) or not (
      np.isfinite(width) and width >= 1 and int(width) == width):
    raise ValueError(f"{name} must be an integer ≥ 1, got {width!r}")
  return int(width)


def check_inputs(x, name: str, d_in: int | None = None, *, kernel: bool = False, partner=None):
  """Checks x is a finite [n, d] matrix (and d == d_in when given); returns it unchanged.

  Args:
    kernel: x feeds a kernel of degree 2 in its rows (xᵀx', ‖x‖‖x'‖): also check that it cannot overflow
      x's dtype (``attention._checks.check_no_overflow``): |K| ≤ max‖x‖·max‖x'‖, with x' = ``partner``
      (the kernel's other argument; None: x itself).

  Raises:
    ValueError: naming ``name``, on wrong rank, mismatched feature count, NaN/inf entries, or (kernel)
      rows so large that the kernel would overflow (value checks are skipped for traced values).
  """
  check_finite_matrix(x, name, shape="[n, d] (flattened inputs)")
  if d_in is not None and np.shape(x)[1] != d_in:
    raise ValueError(f"{name} has {np.shape(x)[1]} features but the model expects d_in = {d_in}")
  if kernel and partner is None:
    check_no_overflow(x, name, degree=2)
  elif kernel and not isinstance(partner, jax.core.Tracer):
    partner = np.asarray(partner, np.float64)
    if not np.isfinite(partner).all():
      return x  # the partner's own check names it
    partner_norm = float(np.max(np.linalg.norm(partner, axis=-1), initial=0.0))
    check_no_overflow(x, name, degree=1, factor=partner_norm)
  return x


def as_float(x):
  """x as a floating array: integer or bool inputs become float32 through numpy first (a JAX int64 array
  would be narrowed to int32, and wrap, before any conversion). Floats and tracers pass unchanged."""
  if isinstance(x, jax.core.Tracer) or np.issubdtype(np.asarray(x).dtype, np.floating):
    return x
  return np.asarray(x, np.float32)
