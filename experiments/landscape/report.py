"""Plots and summary.md of a sharpness / loss-landscape run, drawn from its results.jsonl (no recomputation).

``python -m experiments.landscape.report --workdir runs/landscape`` redraws them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.core import tolerance
from experiments.core.report import report_main, write_summary
from experiments.core.plotting import MODEL_COLORS, MODEL_LABELS, save, subplots

REQUIRED_FIELDS = ("task", "model", "width", "seed", "top_eigenvalues", "landscape_1d")


def write_report(workdir) -> str:
  """Draws landscape_1d.png and landscape_2d.png and writes summary.md into ``workdir`` from its records;
  returns the summary text.

  Raises:
    ValueError: no records, or records of another experiment (``experiments.core.report.experiment_records``).
  """
  return write_summary(workdir, "landscape", REQUIRED_FIELDS, _render)


def _render(records: list[dict], workdir: Path) -> str:
  """Draws the plots of ``records`` into ``workdir``; returns the summary markdown."""
  tasks = sorted({r["task"] for r in records})
  fig, axes = subplots(len(tasks))
  for ax, task in zip(axes, tasks):
    for r in (r for r in records if r["task"] == task):
      ax.plot(r["alphas"], r["landscape_1d"], color=MODEL_COLORS[r["model"]], alpha=0.7,
              label=f"{MODEL_LABELS[r['model']]} m={r['width']}" if r["seed"] == min(
                  q["seed"] for q in records) else None)
    ax.set_xlabel("step along a filter-normalised direction")
    ax.set_ylabel("training loss")
    ax.set_title(task)
    ax.legend(fontsize=7)
  save(fig, workdir / "landscape_1d.png")
  firsts = [r for r in records if r["seed"] == min(q["seed"] for q in records)]
  fig, axes = subplots(len(firsts), width=3.6, height=3.2)
  for ax, r in zip(axes, firsts):
    a = np.asarray(r["alphas_2d"])
    cs = ax.contour(a, a, np.asarray(r["landscape_2d"]), levels=15)
    ax.clabel(cs, fontsize=6)
    ax.set_title(f"{r['task']}, {MODEL_LABELS[r['model']]}, m={r['width']}", fontsize=9)
  save(fig, workdir / "landscape_2d.png")
  lines = ["# Sharpness of the trained minima", "",
           "Top Hessian eigenvalues of the training loss w.r.t. the trained first-layer weights (Lanczos, "
           "float32), mean ± std over seeds; the paper (arXiv 2603.13085) claims 2L-ReLU minima are sharper "
           "than MLP-Attn's. Also the loss rise at a unit filter-normalised step (mean of the two directions).",
           "Adaptive: top eigenvalue of diag|θ| H diag|θ| (Kwon et al. 2021, arXiv 2102.11600), invariant to "
           "layer rescaling; 'trained readout': the same network with its readout trained (Hessian w.r.t. W "
           "and V), where only the adaptive value is comparable across parameterisations. Both models are "
           "trained to the same loss target or, when one misses it, the other is stopped at the first epoch at or "
           "below the slower one's final loss (matched_loss); other unconverged trainings are left out.",
           "", "| task | model | width | λ₁ | λ₂ | λ₃ | adaptive λ₁ | train loss | loss at ±1 step − loss "
           "| trained readout: λ₁ / adaptive λ₁ / train loss | converged (fixed / trained) |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
  groups = {}
  left_out = []
  matched = {(r["task"], r["width"], r["seed"], prefix) for r in records for prefix in ("", "trained_")
             if r.get(prefix + "matched_loss") is not None}
  for r in records:
    # Comparable: the loss target reached, or the slowest model at its final loss with the other stopped there.
    if not all(tolerance.reached_target(r, p) or (r["task"], r["width"], r["seed"], p) in matched
               for p in ("", "trained_")):
      left_out.append(r)
      continue
    groups.setdefault((r["task"], r["model"], r["width"]), []).append(r)
  for r in left_out:
    if (r["task"], r["model"], r["width"]) not in groups:
      lines.append(f"| {r['task']} | {MODEL_LABELS[r['model']]} | {r['width']} | not converged: left out | – | – | – "
                   f"| {r['train_loss']:.3g} | – | – | 0/– |")
      groups[r["task"], r["model"], r["width"]] = None
  for (task, model, width), rs in sorted((k, v) for k, v in groups.items() if v is not None):
    eig = np.array([r["top_eigenvalues"] for r in rs])
    rise = [0.5 * (r["landscape_1d"][0] + r["landscape_1d"][-1]) - r["train_loss"] for r in rs]
    cells = [f"{eig[:, i].mean():.3g} ± {eig[:, i].std():.2g}" if i < eig.shape[1] else "–" for i in range(3)]
    adaptive = f"{np.mean([r['adaptive_sharpness'][0] for r in rs]):.3g}" if "adaptive_sharpness" in rs[0] else "–"
    trained = (f"{np.mean([r['trained_top_eigenvalues'][0] for r in rs]):.3g} / "
               f"{np.mean([r['trained_adaptive_sharpness'][0] for r in rs]):.3g} / "
               f"{np.mean([r['trained_train_loss'] for r in rs]):.3g}") if "trained_top_eigenvalues" in rs[0] else "–"
    every = [r for r in records if (r["task"], r["model"], r["width"]) == (task, model, width)]
    conv = (f"{sum(tolerance.reached_target(r) for r in every)}/{len(every)} / "
            f"{sum(tolerance.reached_target(r, 'trained_') for r in every)}/{len(every)}")
    lines.append(f"| {task} | {MODEL_LABELS[model]} | {width} | " + " | ".join(cells)
                 + f" | {adaptive} | {np.mean([r['train_loss'] for r in rs]):.3g} | {np.mean(rise):.3g} | "
                 f"{trained} | {conv} |")
  if left_out:
    lines += ["", f"**Left out: {len(left_out)} point(s) whose training (fixed or trained readout) did not reach "
              "the loss target**: " + ", ".join(
                  f"{r['task']}/{MODEL_LABELS[r['model']]}/m={r['width']}/seed {r['seed']} (loss "
                  f"{r['train_loss']:.3g}" + (f", trained {r['trained_train_loss']:.3g}" if
                                               "trained_train_loss" in r else "") + ")" for r in left_out)]
  lines += ["", "Plots: landscape_1d.png, landscape_2d.png.", ""]
  return "\n".join(lines)

if __name__ == "__main__":
  from experiments.landscape import SPEC
  report_main(SPEC)
