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
  if not isinstance(x, jax.core.Tracer) and not np.issubdtype(np.asarray(x).dtype, np.floating):
    x = np.asarray(x, np.float32)  # through numpy: JAX would narrow int64 to int32 (and wrap) first
  x = jnp.asarray(x)
  return check_finite_matrix(x, name, nonempty=True)


def check_no_overflow(x, name: str, *, degree: int, terms: int = 1, factor: float = 1.0, what: str = "kernel"):
  """Returns x unchanged after checking that a degree-``degree`` product of its rows fits its dtype.

  Entries of a Gram-type product of rows are bounded by Cauchy–Schwarz: |xᵢ·xⱼ| ≤ max‖x‖² (degree 2), and
  a sum of ``terms`` such products of degree p by terms·max‖x‖^p (e.g. X Xᵀ X: degree 3, n terms), times
  ``factor`` for the norm of another operand (e.g. ‖q‖ in q X_trᵀ X_tr). Where
  that bound exceeds the largest finite value of x's dtype the result may be inf (and then NaN), silently;
  this raises instead. Traced values pass unchecked.

  Raises:
    ValueError: naming ``name``, the largest row norm, the bound and the dtype's limit.
  """
  if isinstance(x, jax.core.Tracer):
    return x
  a = np.asarray(x)
  if not np.issubdtype(a.dtype, np.floating) or a.size == 0:
    return x
  limit = float(np.finfo(a.dtype).max)
  with np.errstate(over="ignore"):
    largest = float(np.max(np.linalg.norm(a.astype(np.float64), axis=-1)))
    bound = float(terms) * float(factor) * np.float64(largest) ** degree
  if not bound <= limit:
    raise ValueError(
        f"{name}: rows of ℓ2 norm up to {largest:.3g} overflow {a.dtype} in the {what} (a degree-{degree} "
        f"product of rows, bounded by {bound:.3g} > {limit:.3g}, the largest finite {a.dtype}); rescale "
        f"{name} (e.g. to the [0, 1] pixel scale) or pass float64 arrays under jax.enable_x64(True)")
  return x
