"""summary.md of a ViT / DiffViT training run, drawn from its results.jsonl (no recomputation).

``python -m experiments.train_vit.report --workdir runs/vit`` rewrites it: one row per trained model
(parameters, clean test accuracy, last-epoch training accuracy, training time).
"""
from __future__ import annotations

from pathlib import Path

from experiments.core.report import report_main, write_summary

REQUIRED_FIELDS = ("kind", "model", "depth", "lambda_init", "name", "parameters", "clean_accuracy")


def summary_markdown(records) -> str:
  """The table of trained models, in the order they were recorded."""
  lines = ["# Matched ViT / DiffViT training", "",
           "Clean accuracy on the test split (chance 0.10); λ_init '-' is the standard ViT.", "",
           "| model | depth | λ_init | parameters | clean accuracy | train accuracy (last epoch) | "
           "epochs | train seconds |", "|---|---|---|---|---|---|---|---|"]
  for r in records:
    last = r.get("train_accuracy_last_epoch")
    lines.append(f"| {r['model']} | {r['depth']} | {r['lambda_init']} | {r['parameters']} | "
                 f"{r['clean_accuracy']:.3f} | {'–' if last is None else f'{last:.3f}'} | "
                 f"{len(r.get('history') or [])} | {float(r.get('train_seconds', 0.0)):.0f} |")
  return "\n".join(lines) + "\n"


def write_report(workdir) -> str:
  """Writes summary.md into ``workdir`` from its records; returns the text.

  Raises:
    ValueError: no records, or records of another experiment (``experiments.core.report.experiment_records``).
  """
  return write_summary(workdir, "train_vit", REQUIRED_FIELDS, _render)


def _render(records: list[dict], workdir: Path) -> str:
  """Draws the plots of ``records`` into ``workdir``; returns the summary markdown."""
  return summary_markdown(records)

if __name__ == "__main__":
  from experiments.train_vit import SPEC
  report_main(SPEC)
