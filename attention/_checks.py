"""Input validation of matrices: the one "finite 2-D array" check of the code base (private).

``check_finite_matrix`` is used by attention, ntk (``ntk._checks``, ``ntk.conditioning``) and influence
(``influence.ntk_loo``); attention is the package they may all import (it imports none of them).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def check_finite_matrix(x, name: str, *, shape: str = "[n, d]", square: bool = False,
                        nonempty: bool = False):
  """Returns x unchanged after checking it is a rank-2 array of finite values.

  Args:
    x: array-like; NumPy, JAX or a tracer (values of a tracer are not checked, only its shape).
    name: the argument's name, for the messages.
    shape: how the messages spell the expected shape, e.g. "[n, d]" or "[n, n]".
    square: also require shape[0] == shape[1].
    nonempty: also require both dimensions ≥ 1.

  Raises:
    ValueError: naming ``name`` and the expected shape, on a wrong rank, a non-square or empty matrix
      (when asked), or NaN/inf entries.
  """
  got = tuple(np.shape(x))
  if len(got) != 2 or (square and got[0] != got[1]):
    kind = "be a square matrix" if square else "have rank 2"
    raise ValueError(f"{name} must {kind} with shape {shape}, got shape {got}")
  if nonempty and 0 in got:
    raise ValueError(f"{name} must be non-empty, got shape {got}")
  if not isinstance(x, jax.core.Tracer) and not bool(np.isfinite(np.asarray(x)).all()):
    raise ValueError(f"{name} holds NaN or inf values; expected finite floats")
  return x


def check_matrix(x, name: str) -> jnp.ndarray:
  """``check_finite_matrix(x, name, nonempty=True)``, returning x as a floating JAX array.

  Raises:
    ValueError: naming ``name``, if x is not rank 2, is empty, or holds NaN/inf (checked only for
      concrete arrays; traced values pass through).
  """
  x = jnp.asarray(x)
  if not jnp.issubdtype(x.dtype, jnp.floating):
    x = x.astype(jnp.result_type(float))
  return check_finite_matrix(x, name, nonempty=True)
