"""Matplotlib helpers shared by the experiment reports: grouping records, mean ± std over seeds."""
from __future__ import annotations

import textwrap
from collections import defaultdict
from typing import Iterable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

MODEL_LABELS = {"relu": "2L-ReLU", "mlp_attn": "MLP-Attn"}
MODEL_COLORS = {"relu": "tab:blue", "mlp_attn": "tab:red"}


def finite(value) -> float:
  """A record's number as float; the strings 'inf'/'nan' written for non-finite values map back."""
  return float(value)


def series(records: Iterable[dict], x: str, y: str, **match) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                       np.ndarray]:
  """Groups matching records by ``x``; returns (x values, mean, std, count) of ``y`` sorted by x."""
  xs, vals = grouped(records, x, y, **match)
  return (xs, np.array([v.mean() for v in vals]), np.array([v.std() for v in vals]),
          np.array([v.size for v in vals]))


def log_errorbar(ax, xs, values, **kwargs) -> None:
  """Geometric mean with a min–max bar over seeds (stays positive on log axes).

  Args:
    xs: [k] x positions; values: list of k arrays of positive values (one per seed).
  """
  gm = np.array([np.exp(np.mean(np.log(v))) for v in values])
  lo = np.array([v.min() for v in values])
  hi = np.array([v.max() for v in values])
  ax.errorbar(xs, gm, yerr=[np.maximum(gm - lo, 0), np.maximum(hi - gm, 0)], marker="o", ms=3, capsize=2, **kwargs)


def grouped(records: Iterable[dict], x: str, y: str, **match) -> tuple[np.ndarray, list[np.ndarray]]:
  """Values of ``y`` grouped by ``x`` over matching records: (sorted x values, one array per x)."""
  groups: dict = defaultdict(list)
  for r in records:
    if all(r.get(k) == v for k, v in match.items()) and y in r:
      groups[r[x]].append(finite(r[y]))
  keys = sorted(groups)
  return np.array(keys, dtype=float), [np.array(groups[k]) for k in keys]


def subplots(n_panels: int, *, width: float = 4.2, height: float = 3.4):
  fig, axes = plt.subplots(1, n_panels, figsize=(width * n_panels, height), squeeze=False)
  return fig, axes[0]


def wrap(text: str, width: int) -> str:
  """``text`` broken into lines of at most ``width`` characters at spaces (a label that stays on the canvas
  whole, where cutting it at a character count would leave a word or a bracket half-printed)."""
  return "\n".join(textwrap.wrap(str(text), width, break_long_words=False, break_on_hyphens=False)) or str(text)


def save(fig, path) -> None:
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
