"""summary.md and errors.png of a dual-implications run, drawn from its results.jsonl (no recomputation).

``python -m experiments.dual_implications.report --workdir runs/dual`` redraws them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.core.report import report_main, write_summary
from experiments.core.plotting import save, subplots

REQUIRED_FIELDS = ("dataset", "target", "draw", "model", "kind", "kernel_error", "alignment")
LABELS = {"relu": "2L-ReLU", "mlp_attn": "MLP-Attn"}
COLUMNS = (("kinf", "kernel_error", "K∞ regression"), ("finite", "kernel_error", "K₀ regression"),
           ("finite", "network_error", "trained network"), ("kinf", "alignment", "K∞ alignment"))


def cell_values(records, dataset: str, target: str, model: str, kind: str, field: str) -> list[float]:
  """The values of ``field`` over draws (and seeds) for one table cell."""
  return [float(r[field]) for r in records if (r["dataset"], r["target"], r["model"], r["kind"]) ==
          (dataset, target, model, kind) and r.get(field) is not None]


def _fmt(values) -> str:
  if not values:
    return "–"
  return f"{np.mean(values):.3f} ± {np.std(values):.3f}" if len(values) > 1 else f"{values[0]:.3f}"


def summary_markdown(records) -> str:
  datasets = sorted({r["dataset"] for r in records})
  targets = [t for t in ("top", "bottom", "random", "labels") if any(r["target"] == t for r in records)]
  models = [m for m in ("relu", "mlp_attn") if any(r["model"] == m for r in records)]
  r0 = records[0]
  lines = ["# Dual implications: approximation error by target kind", "",
           f"Test-split relative error Σ‖f − y‖²/Σ‖y − ȳ‖² (0: exact, 1: the mean) of kernel ridge regression "
           f"(ρ = ridge_scale·tr(K)/n, f₀ = 0) with each model's K∞ and K₀, and of the trained network; and "
           f"the kernel–target alignment ⟨K, yyᵀ⟩/(‖K‖‖yyᵀ‖) of K∞ on the test split. n = {r0['n_train']} "
           f"train / {r0['n_test']} test; targets y = Σᵢ cᵢ vᵢᵀx along the top-{r0['k']}, bottom-{r0['k']} "
           "non-zero or random directions of the training matrix, c ~ N(0, I), or the one-hot labels; "
           "mean ± std over draws (and seeds). The claim (arXiv 2603.13085): MLP-Attn's error is lower on "
           "top-mode targets and higher on bottom-mode ones; the claims job gives the intervals "
           "(docs/theory.md#dual-implications).", ""]
  for dataset in datasets:
    lines += [f"## {dataset}", "", "| target | " + " | ".join(f"{name}, {LABELS[m]}" for _, _, name in COLUMNS
                                                             for m in models) + " |",
              "|---|" + "---|" * (len(COLUMNS) * len(models))]
    for target in targets:
      cells = [_fmt(cell_values(records, dataset, target, m, kind, field)) for kind, field, _ in COLUMNS
               for m in models]
      lines.append(f"| {target} | " + " | ".join(cells) + " |")
    lines.append("")
  lines += measurement_choice_lines(records)
  unconverged = [r for r in records if r.get("network_converged") is False]
  if unconverged:
    lines += [f"{len(unconverged)} trained network(s) stopped short of the loss target; their errors are "
              "included (the table shows what the network reached)."]
  return "\n".join(lines) + "\n"


def measurement_choice_lines(records) -> list[str]:
  """The K∞ rows under each measurement choice (``experiments.dual_implications.claims.DUAL_MEASUREMENTS``:
  unit-norm or raw feature rows; the fixed ridge or one chosen on a validation split of the training rows): per
  data set and target kind (top, bottom) the mean errors, err(2L-ReLU) − err(MLP-Attn) with its interval over draws and
  the direction verdict; then, per row, the choices whose verdict differs from the primary one."""
  from experiments.core import rows as core_rows
  from experiments.dual_implications import claims as dual_implications_claims
  from experiments.core import verdicts
  fields = [m for m in dual_implications_claims.DUAL_MEASUREMENTS if any(r.get(m[0]) is not None for r in records)]
  if len(fields) < 2:
    return []
  lines = ["## Measurement choices (K∞ kernel regression, test relative error)", "",
           "The kernels on the unit-norm feature rows the networks see (primary) or on the raw features (2L-ReLU: "
           "the [0, 1] pixel rows; MLP-Attn: x X_trᵀ X_tr), each with the run's fixed ridge or with the ridge "
           "scale chosen on a validation split of the training rows (grid "
           + "{" + ", ".join(f"{g:g}" for g in (records[0].get("ridge_grid") or [])) + "}"
           + f", {records[0].get('n_validation', '?')} held-out training rows; the test targets are never read). "
           "Difference: err(2L-ReLU) − err(MLP-Attn) over draws, the inverted sign-flip interval "
           "(``experiments.core.rows.paired_interval``); the claim: > 0 on top-mode targets, < 0 on bottom-mode ones.",
           "",
           "| data set | target | measurement | 2L-ReLU | MLP-Attn | difference [95 %] | verdict |",
           "|---|---|---|---|---|---|---|"]
  flips = []
  for dataset in sorted({r["dataset"] for r in records}):
    for target, sign in (("top", +1), ("bottom", -1)):
      verdict_of = {}
      for field, label, primary in fields:
        relu, attn = dual_implications_claims.dual_differences(records, dataset, target, "kinf", field)
        if len(relu) < 2:
          continue
        iv = core_rows.paired_interval(relu, attn)
        v = verdicts.verdict(iv, sign, null=0.0).direction
        label = label.format(ridge=f"{float(records[0].get('ridge_scale', 1e-3)):g}")
        verdict_of[label] = (v, primary)
        lines.append(f"| {dataset} | {target} | {label}{' (primary)' if primary else ''} | {np.mean(relu):.4g} | "
                     f"{np.mean(attn):.4g} | {iv.estimate:+.4g} [{iv.low:+.4g}, {iv.high:+.4g}] | {v} |")
      base = next((v for v, p in verdict_of.values() if p), None)
      changed = [f"{label} ({v})" for label, (v, p) in verdict_of.items() if not p and v != base]
      if base is not None:
        flips.append(f"{dataset}, {target}: {base} under the primary choice; "
                     + (f"the verdict changes under {', '.join(changed)}" if changed else "the same under every choice"))
  return lines + [""] + [f"- {f}" for f in flips] + [""]


def plot(records, path: Path) -> None:
  datasets = sorted({r["dataset"] for r in records})
  targets = [t for t in ("top", "bottom", "random", "labels") if any(r["target"] == t for r in records)]
  fig, axes = subplots(len(datasets), width=5.5, height=4.0)
  width = 0.38
  for ax, dataset in zip(axes, datasets):
    x = np.arange(len(targets))
    for j, model in enumerate(("relu", "mlp_attn")):
      vals = [cell_values(records, dataset, t, model, "kinf", "kernel_error") for t in targets]
      means = [np.mean(v) if v else np.nan for v in vals]
      errs = [np.std(v) if v else 0 for v in vals]
      ax.bar(x + (j - 0.5) * width, means, width, yerr=errs, label=f"{LABELS[model]} K∞", capsize=3)
    ax.set_xticks(x, targets)
    ax.set_yscale("log")
    ax.set_ylabel("test relative error (log)")
    ax.set_title(dataset)
    ax.legend()
  save(fig, path)


def write_report(workdir) -> str:
  return write_summary(workdir, "dual_implications", REQUIRED_FIELDS, _render)


def _render(records: list[dict], workdir: Path) -> str:
  """Draws the plots of ``records`` into ``workdir``; returns the summary markdown."""
  plot(records, workdir / "errors.png")
  return summary_markdown(records)

if __name__ == "__main__":
  from experiments.dual_implications import SPEC
  report_main(SPEC)
