"""A claim under every measurement choice: the summary line ("holds under every choice", "fails under every
choice", "depends on: …") and the specification-curve figure (each choice's interval, coloured by its
verdict), drawn from claim rows (``experiments.core.rows``: rows of one claim — same claim_id and variant —
that differ in ``measurement`` are its measurement choices; ``primary`` marks the one read first: the
paper's own quantity, or the one a stated rule puts first, e.g. the differential-attention rows' ε*).

The specification curve follows Simonsohn, Simmons & Nelson, "Specification curve analysis", Nature Human
Behaviour 4, 2020: the same question answered under every defensible analysis choice, side by side.
"""
from __future__ import annotations

import math
from typing import Sequence

from experiments.core.plotting import plt, save

COLORS = {"holds": "tab:green", "fails": "tab:red", "inconclusive": "tab:gray", "unstable": "tab:orange"}


def choice_groups(rows: Sequence[dict]) -> dict[tuple[str, str], list[dict]]:
  """{(claim_id, variant): its measured rows} for every claim measured under two or more measurement choices;
  the primary row first, the others in their order in ``rows``."""
  groups: dict[tuple[str, str], list[dict]] = {}
  for r in rows:
    if r["status"] == "measured" and r.get("measurement"):
      groups.setdefault((r["claim_id"], r["variant"]), []).append(r)
  return {k: sorted(g, key=lambda r: not r.get("primary", True)) for k, g in groups.items()
          if len({r["measurement"] for r in g}) > 1}


def choice_summary(group: Sequence[dict]) -> str:
  """One claim's verdict across its measurement choices: 'holds under every choice', 'fails under every
  choice', 'inconclusive under every choice', or 'depends on: <choice> (<its direction>), …' naming each
  choice whose direction differs from the primary row's (the first row when none is marked primary).

  Raises:
    ValueError: ``group`` is empty.
  """
  if not group:
    raise ValueError("group: expected at least one measured row")
  directions = {r["direction"] for r in group}
  if len(directions) == 1:
    return f"{group[0]['direction']} under every choice"
  primary = next((r for r in group if r.get("primary", True)), group[0])
  flips = [f"{r['measurement']} ({r['direction']})" for r in group if r["direction"] != primary["direction"]]
  return f"{primary['direction']} under {primary['measurement']}; depends on: " + "; ".join(flips)


def summaries(rows: Sequence[dict]) -> dict[tuple[str, str], str]:
  """``choice_summary`` of every group of ``choice_groups(rows)``."""
  return {k: choice_summary(g) for k, g in choice_groups(rows).items()}


def plot_specification_curve(rows: Sequence[dict], path) -> bool:
  """One panel per claim measured under several choices: each choice's interval and estimate in its own
  units (all are differences or ratios against the row's no-effect value, drawn as a grey line), coloured by
  its direction verdict, the primary choice in bold. Returns False (and draws nothing) without such a claim."""
  groups = choice_groups(rows)
  if not groups:
    return False
  heights = [0.35 * len(g) + 0.9 for g in groups.values()]
  fig, axes = plt.subplots(len(groups), 1, figsize=(9, sum(heights)), squeeze=False,
                           gridspec_kw=dict(height_ratios=heights))
  for ax, ((claim_id, variant), group) in zip(axes[:, 0], groups.items()):
    log = group[0]["scale"] == "ratio"
    values = [float(v) for r in group for v in (r["low"], r["high"], r["estimate"], r["null"])
              if v is not None and math.isfinite(float(v)) and (not log or float(v) > 0)]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    pad = (hi / lo) ** 0.08 if log and lo > 0 else 0.08 * (hi - lo or 1.0)
    edge = (lo / pad, hi * pad) if log and lo > 0 else (lo - pad, hi + pad)
    for y, r in enumerate(group):
      color = COLORS.get(r["direction"], "tab:gray")
      low = float(r["low"]) if math.isfinite(float(r["low"])) else edge[0]
      high = float(r["high"]) if math.isfinite(float(r["high"])) else edge[1]
      ax.plot([max(low, edge[0]), min(high, edge[1])], [y, y], color=color, lw=3 if r.get("primary") else 1.5)
      if math.isfinite(float(r["estimate"])):
        ax.plot([float(r["estimate"])], [y], "o", color=color, ms=4)
    ax.axvline(group[0]["null"], color="0.5", lw=0.8)
    if log and lo > 0:
      ax.set_xscale("log")
    ax.set_xlim(*edge)
    ax.set_yticks(range(len(group)))
    ax.set_yticklabels([("★ " if r.get("primary") else "") + r["measurement"][:60] for r in group], fontsize=6)
    ax.invert_yaxis()
    title = group[0]["claim"][:80] + (f" [{variant[:40]}]" if variant else "")
    ax.set_title(f"{title}: {choice_summary(group)[:90]}", fontsize=7)
  axes[-1, 0].set_xlabel("each choice's interval in its own units (grey: no effect; ★ the paper's quantity; "
                         "green holds, red fails, grey inconclusive)", fontsize=7)
  save(fig, path)
  return True
