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

from experiments.core.claim import heading
from experiments.core.plotting import plt, save, wrap

VERDICT_COLORS = {  # by the verdict that heads a row (experiments.core.claim.heading)
          "holds": "tab:green", "fails": "tab:red", "inconclusive": "tab:gray", "unstable": "tab:orange",
          "matches": "tab:green", "differs": "tab:red", "undetermined": "tab:gray", "verified": "tab:green",
          "violated": "tab:red", "premise holds": "tab:green", "premise fails": "tab:purple", "context": "tab:blue"}


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
  """One claim's verdict across its measurement choices, by the verdict that heads each row
  (``experiments.core.claim.heading``): '<verdict> under every choice run (k)' (k the number of choices
  measured: only the choices that were run are counted), or '<verdict> under <primary>; depends on:
  <choice> (<its verdict>), …' naming each choice whose verdict differs from the primary row's (the first row
  when none is marked primary).

  Raises:
    ValueError: ``group`` is empty.
  """
  if not group:
    raise ValueError("group: expected at least one measured row")
  verdicts = {heading(r) for r in group}
  if len(verdicts) == 1:
    return f"{heading(group[0])} under every choice run ({len(group)})"
  primary = next((r for r in group if r.get("primary", True)), group[0])
  flips = [f"{r['measurement']} ({heading(r)})" for r in group if heading(r) != heading(primary)]
  return f"{heading(primary)} under {primary['measurement']}; depends on: " + "; ".join(flips)


def summaries(rows: Sequence[dict]) -> dict[tuple[str, str], str]:
  """``choice_summary`` of every group of ``choice_groups(rows)``."""
  return {k: choice_summary(g) for k, g in choice_groups(rows).items()}


def plot_specification_curve(rows: Sequence[dict], path) -> bool:
  """Saves ``specification_figure(rows)`` to ``path``; False (and nothing drawn) without a claim measured
  under several choices."""
  fig = specification_figure(rows)
  if fig is None:
    return False
  save(fig, path)
  return True


def specification_figure(rows: Sequence[dict]):
  """One panel per claim measured under several choices: each choice's interval and estimate in its own
  units (all are differences or ratios against the row's no-effect value, drawn as a grey line), coloured by
  the verdict that heads it, the primary choice in bold; labels and titles wrapped whole onto the canvas.
  Returns the figure (laid out), or None without such a claim."""
  groups = choice_groups(rows)
  if not groups:
    return None
  heights = [0.45 * len(g) + 1.3 for g in groups.values()]
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
      color = VERDICT_COLORS.get(heading(r), "tab:gray")
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
    ax.set_yticklabels([wrap(("★ " if r.get("primary") else "") + r["measurement"], 45) for r in group], fontsize=6)
    ax.invert_yaxis()
    title = group[0]["claim"] + (f" [{variant}]" if variant else "")
    ax.set_title(wrap(title, 95) + "\n" + wrap(choice_summary(group), 110), fontsize=6.5, loc="left")
  axes[-1, 0].set_xlabel(wrap("each choice's interval in its own units (grey line: no effect; ★ the paper's "
                              "quantity; green holds / matches, red fails / differs, grey inconclusive)", 100),
                         fontsize=7)
  fig.tight_layout()
  return fig
