"""Rounding tolerances for the report-time decisions: a computed float compared with a threshold, a window
edge or a grid value (docs/decision_boundaries.md lists every such place and the tolerance each uses).

A value computed by k floating-point operations from exact inputs is off by at most about k·u·scale
(u = eps/2 the unit roundoff, scale the largest magnitude met on the way); two machines (another BLAS,
another summation order, another CPU) can differ by that much. A decision taken on a value within that
distance of its threshold is taken on rounding. So each decision here has a tolerance

    tol = ops · eps · max(1, |v| for the finite values v involved)      (``tolerance``)

with ``ops`` the operation count times the condition of the computation (stated where it is used), and a
rule for the band [threshold − tol, threshold + tol]:

* membership of a window or a band (``within``): on the edge within tol counts as inside;
* a side of a null value (``side``): within tol of it is neither side (a verdict there is *inconclusive*);
* reaching a target (``at_least``): within tol below it counts as reached;
* a tie between two candidates (``compare`` = 0): broken by a stated rule, never by rounding.

Infinite values are compared exactly (an infinite end is on no finite edge). Numpy and the standard library
only.
"""
from __future__ import annotations

import math

import numpy as np

EPS64 = float(np.finfo(np.float64).eps)  # 2.2e-16: the report-time computations are float64
EPS32 = float(np.finfo(np.float32).eps)  # 1.2e-7: for values a float32 pipeline produced


def tolerance(*values, ops: float = 8, eps: float = EPS64, floor: float = 1.0) -> float:
  """``ops · eps · max(floor, |v|)`` over the finite ``values`` (NaN and ±inf are left out of the scale).

  Args:
    values: the numbers compared (e.g. the value and the threshold); none gives scale ``floor``.
    ops: the operations behind the value times the computation's condition (≥ 0).
    eps: machine epsilon of the precision the value was computed in (``EPS64`` or ``EPS32``).
    floor: the smallest scale (1: an absolute tolerance for values below 1, which carry the rounding of
      the larger numbers they were computed from; 0: purely relative, for a loss against a target of 0).

  Raises:
    ValueError: ops, eps or floor negative or not finite.
  """
  if not all(math.isfinite(x) and x >= 0 for x in (ops, eps, floor)):
    raise ValueError(f"ops, eps and floor must be finite and >= 0, got {ops!r}, {eps!r} and {floor!r}")
  finite = [abs(float(v)) for v in values if math.isfinite(float(v))]
  return float(ops) * float(eps) * max([float(floor), *finite])


def compare(a: float, b: float, tol: float) -> int:
  """−1 if a < b − tol, +1 if a > b + tol, 0 otherwise (equal within tol). Infinities compare exactly:
  inf vs inf is 0; NaN raises."""
  a, b = float(a), float(b)
  if math.isnan(a) or math.isnan(b):
    raise ValueError(f"compare needs numbers, got {a!r} and {b!r}")
  if math.isinf(a) or math.isinf(b):
    return 0 if a == b else (1 if a > b else -1)
  if a > b + tol:
    return 1
  if a < b - tol:
    return -1
  return 0


def side(value: float, null: float, tol: float) -> int:
  """+1 if value lies above null by more than tol, −1 below by more than tol, 0 within tol (neither)."""
  return compare(value, null, tol)


def at_least(value: float, target: float, tol: float) -> bool:
  """value ≥ target, where value within tol below target counts as reaching it."""
  return compare(value, target, tol) >= 0


def within(value: float, low: float, high: float, tol: float) -> bool:
  """low ≤ value ≤ high, on either edge within tol counting as inside (edges may be ±inf)."""
  return compare(value, low, tol) >= 0 and compare(value, high, tol) <= 0


def on_edge(value: float, edges, tol: float) -> bool:
  """Whether value lies within tol of one of the finite ``edges`` without being exactly on it (for a reason
  text that says so)."""
  return any(math.isfinite(float(e)) and float(value) != float(e) and compare(value, e, tol) == 0
             for e in edges)


def distinct(value: float, other: float, digits: int = 3) -> tuple[str, str]:
  """(value, other) printed with ``digits`` significant digits, or as many more as it takes to print them
  differently when they differ (so "x misses the edge e" never prints x as e).

  Returns:
    The two strings, at one precision.
  """
  value, other = float(value), float(other)
  for p in range(digits, 18):
    a, b = f"{value:.{p}g}", f"{other:.{p}g}"
    if value == other or a != b:
      return a, b
  return repr(value), repr(other)


# A training loss is a float32 mean over the training rows, evaluated once inside the optimizer's loop (where
# the stopping rule compares it with float32(target)) and once more on the host for the record: the two
# differ by a few float32 ulps. 16 ulps of the target. docs/decision_boundaries.md
LOSS_OPS = 16


def fixed_budget(record: dict, prefix: str = "") -> bool:
  """Whether a record's network was trained to a fixed budget (the paper's recipe: loss target 0, never
  reached) and ran it whole with a finite final loss: such a point is trained, not unconverged."""
  target = record.get(prefix + "loss_target", record.get("loss_target"))
  epochs, cap = record.get(prefix + "epochs_trained"), record.get(prefix + "max_epochs", record.get("max_epochs"))
  loss = record.get(prefix + "train_loss")
  return (target is not None and float(target) == 0.0 and epochs is not None and cap is not None
          and int(epochs) >= int(cap) and loss is not None and math.isfinite(float(loss)))


def reached_target(record: dict, prefix: str = "") -> bool:
  """Whether a training record reached its loss target: its ``converged`` flag (absent: True, as for records
  written before the criterion), or, where the flag is False, its final ``train_loss`` at most its
  ``loss_target`` within float32 rounding (``LOSS_OPS`` ulps of the target; a target of 0 has none). So a
  run that stopped on the target in float32 and was recorded a rounding above it counts as having reached
  it. A fixed-budget point (``fixed_budget``: target 0, its whole budget run, a finite loss) counts as trained.
  ``prefix`` selects another set of fields (e.g. ``'trained_'``)."""
  flag = record.get(prefix + "converged", True)
  if flag is not False:
    return True
  if fixed_budget(record, prefix):
    return True
  loss, target = record.get(prefix + "train_loss"), record.get(prefix + "loss_target", record.get("loss_target"))
  if loss is None or target is None or not (math.isfinite(float(loss)) and math.isfinite(float(target))):
    return False
  return at_least(float(target), float(loss), tolerance(target, ops=LOSS_OPS, eps=EPS32, floor=0.0))
