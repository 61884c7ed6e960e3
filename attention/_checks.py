"""Input validation shared by the attention modules (private)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def check_matrix(x, name: str) -> jnp.ndarray:
  """Returns x as a JAX array after checking it is a finite rank-2 float matrix.

  Raises:
    ValueError: naming ``name``, if x is not rank 2, is empty, or holds NaN/inf (checked only for
      concrete arrays; traced values pass through).
  """
  x = jnp.asarray(x)
  if x.ndim != 2:
    raise ValueError(f"{name} must have rank 2 with shape [n, d], got shape {tuple(x.shape)}")
  if x.shape[0] == 0 or x.shape[1] == 0:
    raise ValueError(f"{name} must be non-empty, got shape {tuple(x.shape)}")
  if not jnp.issubdtype(x.dtype, jnp.floating):
    x = x.astype(jnp.result_type(float))
  if not isinstance(x, jax.core.Tracer) and not bool(np.isfinite(np.asarray(x)).all()):
    raise ValueError(f"{name} holds NaN or inf values; expected finite floats")
  return x
