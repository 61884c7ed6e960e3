"""Plots and summary.md of a CLIP / DiffCLIP run, drawn from its results.jsonl (no recomputation).

``python -m experiments.clip.report --workdir DIR`` redraws them: ``asr_vs_eps.png`` (PGD-L∞ ASR against the
budget) and ``asr_vs_patch.png`` (patch ASR against the side, with the differential-attention classifiers where
the run attacked them), each model's mean over seeds with every seed drawn faintly.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.clip.claims import SUBSTITUTE
from experiments.core.plotting import save, subplots
from experiments.core.report import report_main, write_summary
from experiments.core.rules_version import stamp

REQUIRED_FIELDS = ("kind", "model", "seed_index", "attack", "eps", "size", "source")  # its KEY_FIELDS
STYLE = {("zero_shot", "clip"): ("CLIP", "tab:blue", "-"), ("zero_shot", "diffclip"): ("DiffCLIP", "tab:red", "-"),
         ("classifier", "vit"): ("ViT classifier", "tab:blue", "--"),
         ("classifier", "diffvit"): ("DiffViT classifier", "tab:red", "--")}


def asr_curves(records, attack: str) -> dict:
  """{(source, model): (budgets [m], ASR per seed [s, m] with NaN where missing)} of ``attack``; budgets are
  ε in units of 1/255 for PGD, sides in pixels for patches."""
  key = "eps_255" if attack == "pgd" else "size"
  out = {}
  for style in STYLE:
    recs = [r for r in records if r["kind"] == "attack" and r["attack"] == attack
            and (r.get("source", "zero_shot"), r["model"]) == style and r["n_counted"] > 0]
    if not recs:
      continue
    xs = sorted({float(r[key]) for r in recs})
    seeds = sorted({int(r["seed_index"]) for r in recs})
    table = np.full((len(seeds), len(xs)), np.nan)
    for r in recs:
      table[seeds.index(int(r["seed_index"])), xs.index(float(r[key]))] = r["n_success"] / r["n_counted"]
    out[style] = (np.asarray(xs), table)
  return out


def model_labels(records) -> dict:
  """{(source, model): legend label}: the classifiers' with their data set and depth."""
  labels = {style: label for style, (label, _, _) in STYLE.items()}
  for r in records:
    if r.get("source") == "classifier" and "depth" in r:
      labels["classifier", r["model"]] = f"{STYLE['classifier', r['model']][0]} ({r['dataset']}, depth {r['depth']})"
  return labels


def plot_asr(curves: dict, path, xlabel: str, title: str, labels: dict) -> None:
  """Each model's mean ASR over seeds (markers) and every seed (faint)."""
  fig, (ax,) = subplots(1, width=5.2, height=3.8)
  for style, (xs, table) in curves.items():
    _, color, line = STYLE[style]
    label = labels[style]
    for row in table:
      ax.plot(xs, row, color=color, linestyle=line, alpha=0.15, linewidth=0.8)
    ax.plot(xs, np.nanmean(table, axis=0), color=color, linestyle=line, marker="o",
            label=f"{label} ({table.shape[0]} seeds)")
  ax.set_xlabel(xlabel)
  ax.set_ylabel("attack success rate (clean-correct images)")
  ax.set_ylim(-0.02, 1.02)
  ax.set_title(title, fontsize=9)
  ax.legend(fontsize=8)
  save(fig, path)


def summary_markdown(records) -> str:
  """The summary: what was trained (accuracy, parameters, time per model) and the ASR tables."""
  trains = [r for r in records if r["kind"] == "train"]
  lines = ["# CLIP vs DiffCLIP under attack (arXiv 2510.00517's CLIP line, a substitute)", "",
           f"**What this is:** {SUBSTITUTE}.", "", "## Models", "",
           "| model | seeds | zero-shot accuracy (mean [min, max]) | parameters | training time per model (s) |",
           "|---|---|---|---|---|"]
  for model, label in (("clip", "CLIP"), ("diffclip", "DiffCLIP")):
    mine = [r for r in trains if r["model"] == model]
    if mine:
      acc = np.asarray([r["zero_shot_accuracy"] for r in mine])
      lines.append(f"| {label} | {len(mine)} | {acc.mean():.3f} [{acc.min():.3f}, {acc.max():.3f}] | "
                   f"{mine[0]['parameters']:,} | {np.mean([r['train_seconds'] for r in mine]):.0f} |")
  labels = model_labels(records)
  for attack, head in (("pgd", "PGD-L∞ ASR at ε (units of 1/255)"), ("patch", "patch ASR at side (pixels)")):
    curves = asr_curves(records, attack)
    if not curves:
      continue
    xs = sorted({float(x) for xs_, _ in curves.values() for x in xs_})
    lines += ["", f"## {head}", "", "| model | " + " | ".join(f"{x:g}" for x in xs) + " |",
              "|---|" + "---|" * len(xs)]
    for style, (cx, table) in curves.items():
      cells = []
      for x in xs:
        col = table[:, list(cx).index(x)] if x in cx else np.asarray([np.nan])
        col = col[np.isfinite(col)]
        cells.append(f"{col.mean():.3f} ± {col.std():.3f}" if col.size else "–")
      lines.append(f"| {labels[style]} | " + " | ".join(cells) + " |")
  lines += ["", "Mean ± standard deviation over seeds, each model on its own clean-correct images. The claim rows "
            "(paired differences over seed pairs on the images both models classify correctly, per budget at the "
            "Bonferroni level and over every budget as an intersection, the ceiling rule deciding) are in "
            "`python -m experiments.claims --from <this workdir>`; docs/diff_attention.md#clip-vs-diffclip."]
  return "\n".join(lines) + "\n"


def write_report(workdir) -> str:
  """Draws the plots and writes summary.md into ``workdir`` from its records; returns the summary text.

  Raises:
    ValueError: no records, or records of another experiment (``experiments.core.report.experiment_records``).
  """
  return write_summary(workdir, "clip", REQUIRED_FIELDS, _render)


def _render(records: list[dict], workdir: Path) -> str:
  pgd, patch, labels = asr_curves(records, "pgd"), asr_curves(records, "patch"), model_labels(records)
  if pgd:
    plot_asr(pgd, workdir / "asr_vs_eps.png", "ε (units of 1/255)", "PGD-L∞ on the zero-shot prediction", labels)
  if patch:
    plot_asr(patch, workdir / "asr_vs_patch.png", "patch side (pixels)",
             "unbounded patch at a random position", labels)
  return stamp(summary_markdown(records))  # its rows are read by the claims job, under the core rules


if __name__ == "__main__":
  from experiments.clip import SPEC
  report_main(SPEC)
