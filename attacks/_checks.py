"""Argument validation shared by the attacks (private).

Checks on values (ranges, NaN, label ranges) run only on concrete arrays; traced values (an attack called
inside the caller's jit) pass through, and only their shapes and dtypes are checked.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class Inputs(NamedTuple):
  """Validated attack inputs."""
  x: jnp.ndarray          # [batch, ...] floating, inside [lower, upper]
  y: jnp.ndarray          # [batch] int32 in [0, num_classes)
  target: jnp.ndarray | None  # [batch] int32 in [0, num_classes), ≠ y; None when untargeted
  num_classes: int
  lower: float
  upper: float


@jax.jit
def _range_stats(x):
  """(all finite, min, max) of x, reduced on x's device so only three scalars reach the host."""
  return jnp.all(jnp.isfinite(x)), jnp.min(x), jnp.max(x)


def _concrete(v) -> bool:
  return not isinstance(v, jax.core.Tracer)


def check_nonnegative(value, name: str, *, allow_none: bool = False):
  """Returns value after checking it is a finite real scalar ≥ 0; concrete values come back as float.

  Strings, booleans and complex numbers are refused (a numeric string such as "0.1" would only fail later,
  deep inside the compiled attack); traced scalars pass through with only their shape and dtype checked.
  """
  if value is None:
    if allow_none:
      return None
    raise ValueError(f"{name} is required: a finite scalar >= 0")
  dtype = getattr(value, "dtype", None)
  if isinstance(value, (bool, np.bool_)) or (dtype is None and not isinstance(value, (int, float))) or (
      dtype is not None and not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer))):
    raise ValueError(f"{name} must be a real number >= 0, got {value!r}")
  if jnp.ndim(value) != 0:
    raise ValueError(f"{name} must be a scalar, got shape {jnp.shape(value)}")
  if not _concrete(value):
    return value
  v = float(value)
  if not math.isfinite(v) or v < 0:
    raise ValueError(f"{name} must be finite and >= 0, got {v}")
  return v


def check_key(key, attack: str, hint: str = "") -> None:
  """Raises ValueError unless key is one JAX PRNG key, as JAX itself reads it: jax.random.key(seed), or a
  raw jax.random.PRNGKey(seed) of the default implementation (whatever JAX_DEFAULT_PRNG_IMPL sets).
  ``hint``: what needs the key and how to do without it (default: a random start, random_start=False)."""
  hint = hint or f"{attack} with a random start needs key=jax.random.key(seed) (or pass random_start=False)"
  if key is None:
    raise ValueError(hint)
  try:
    jax.eval_shape(lambda k: jax.random.fold_in(k, 0), key)  # shapes only: nothing is computed
  except (TypeError, ValueError):
    raise ValueError(f"{hint}; got {type(key).__name__} with dtype {getattr(key, 'dtype', None)} and shape "
                     f"{jnp.shape(key)}, which is not a single key") from None


def check_count(value, name: str, *, minimum: int = 0) -> int:
  """Returns value as int after checking it is a Python/NumPy integer ≥ minimum."""
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
  if value < minimum:
    raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
  return int(value)


def check_choice(value, name: str, allowed: tuple, *, attack: str):
  """Raises a ValueError naming the attack and the supported options unless value is in allowed."""
  if value not in allowed:
    supported = ", ".join(map(repr, allowed))
    raise ValueError(f"{attack} does not support {name}={value!r}; supported: {supported}")
  return value


def _check_labels(labels, name: str, batch: int, num_classes: int) -> jnp.ndarray:
  labels = jnp.asarray(labels)
  if labels.shape != (batch,):
    raise ValueError(f"{name} must have shape [batch] = ({batch},), got {tuple(labels.shape)}")
  if not jnp.issubdtype(labels.dtype, jnp.integer):
    raise ValueError(f"{name} must hold integer class indices, got dtype {labels.dtype}")
  if _concrete(labels):
    values = np.asarray(labels)
    if values.size and (values.min() < 0 or values.max() >= num_classes):
      raise ValueError(
          f"{name} must lie in [0, {num_classes}) for a model with {num_classes} classes, "
          f"got values in [{values.min()}, {values.max()}]")
  return labels.astype(jnp.int32)


def check_attack_inputs(logits_fn, x, y, *, bounds, targeted: bool, target, key, needs_key: bool,
                        attack: str, min_classes: int = 2) -> Inputs:
  """Validates the arguments every attack shares.

  Args:
    logits_fn: pure function x [batch, ...] -> logits [batch, classes].
    x: inputs, floating, shape [batch, ...], inside bounds, finite.
    y: integer labels with shape [batch] in [0, classes).
    bounds: (lower, upper) pixel bounds, lower ≤ upper, finite.
    targeted: whether the attack is targeted; then `target` is required, otherwise it must be None.
    target: integer targets with shape [batch], in range and ≠ y.
    key: a JAX PRNG key, required when needs_key.
    needs_key: whether the configuration draws random numbers.
    attack: the attack's name, for messages.
    min_classes: smallest class count the attack's loss supports.

  Returns:
    Inputs with x as a JAX array, labels as int32 and the class count read from logits_fn's output shape.

  Raises:
    ValueError: naming the argument and the allowed range.
  """
  if not callable(logits_fn):
    raise ValueError(f"logits_fn must be callable x -> logits, got {type(logits_fn).__name__}")
  try:
    lower, upper = (float(b) for b in bounds)
  except (TypeError, ValueError):
    raise ValueError(f"bounds must be a pair of floats (lower, upper), got {bounds!r}") from None
  if not (math.isfinite(lower) and math.isfinite(upper)):
    raise ValueError(f"bounds must be finite, got ({lower}, {upper})")
  if lower > upper:
    raise ValueError(f"bounds must satisfy lower <= upper, got lower={lower} > upper={upper}")

  x = jnp.asarray(x)
  if not jnp.issubdtype(x.dtype, jnp.floating):
    raise ValueError(f"x must be a floating array with pixels in [{lower}, {upper}], got dtype {x.dtype}")
  if x.ndim < 2 or x.shape[0] == 0:
    raise ValueError(f"x must have shape [batch, ...] with batch >= 1 and rank >= 2, got {tuple(x.shape)}")
  stats = _range_stats(x) if _concrete(x) else None
  if stats is not None and all(map(_concrete, stats)):  # inside a caller's jit even a constant x is traced
    finite, low, high = (float(v) for v in jax.device_get(stats))
    if not finite:
      raise ValueError("x holds NaN or inf values; expected finite pixels")
    if low < lower or high > upper:
      raise ValueError(f"x must lie inside bounds [{lower}, {upper}], got values in [{low}, {high}]")

  out = jax.eval_shape(logits_fn, x)
  if getattr(out, "ndim", None) != 2 or out.shape[0] != x.shape[0]:
    raise ValueError(f"logits_fn must map x with shape {tuple(x.shape)} to logits with shape "
                     f"[batch, classes] = ({x.shape[0]}, classes), got {getattr(out, 'shape', out)}")
  if not jnp.issubdtype(out.dtype, jnp.floating):
    raise ValueError(f"logits_fn must return floating logits, got dtype {out.dtype}")
  num_classes = int(out.shape[1])
  if num_classes < min_classes:
    raise ValueError(f"{attack} needs a model with at least {min_classes} classes, got {num_classes}")

  y = _check_labels(y, "y", x.shape[0], num_classes)
  if not isinstance(targeted, bool):
    raise ValueError(f"targeted must be a bool, got {targeted!r}")
  if targeted:
    if target is None:
      raise ValueError("targeted=True needs target: integer class indices with shape [batch]")
    target = _check_labels(target, "target", x.shape[0], num_classes)
    if _concrete(target) and _concrete(y) and bool(np.any(np.asarray(target) == np.asarray(y))):
      raise ValueError("target must differ from y for every sample (a targeted attack at the true "
                       "label is already 'successful')")
  elif target is not None:
    raise ValueError("target was given but targeted=False; pass targeted=True for a targeted attack")

  if needs_key:
    check_key(key, attack)
  return Inputs(x, y, target, num_classes, lower, upper)
