"""Table, figure and paired comparisons of ``experiments.certify.compare`` (LoFAST, CROWN, CROWN + LoFAST on the
same test images), drawn from DIR/crown/results.jsonl (no recomputation).

  python -m experiments.certify.compare_report --workdir DIR

Per ε: certified accuracy of each method over the images every method finished (95 % Clopper–Pearson), the
paired differences on those images (Tango's score interval: ``experiments.certify.claims.paired_binary_difference``),
seconds per image after compilation, and the PGD-L2 soundness check (certified images PGD broke: must be 0).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import numpy as np

from experiments.core import verdicts
from experiments.core.plotting import save, subplots
from experiments.core.rules_version import stamp
from experiments.core.workdir import read_records
from experiments.certify.methods import CROWN_NOTE, LABELS, PAIRS, PAPER, SUBDIR
from experiments.papers import lofast


class Method(NamedTuple):
  """One method's outcome at one ε over the images every method finished."""
  certified: np.ndarray        # 0/1 per image
  pgd_violations: int          # certified images PGD-L2 broke (over all its finished images)
  seconds_per_image: float     # after compilation (NaN when only the compiling chunk ran)
  n_finished: int              # its own finished images (≥ len(certified))
  attention_bound: float
  margin_violations: int = 0   # margin lower bounds above a margin targeted PGD-L2 reached (records that have them)


def comparison(records) -> dict:
  """{ε: {method: ``Method``}} over the images every method finished at every ε (the first n images, the same
  for all)."""
  out = {}
  for eps in sorted({float(r["eps"]) for r in records}):
    per = {}
    for method in sorted({r["method"] for r in records if float(r["eps"]) == eps}):
      widest = {}   # per first image the record reaching furthest (a comparison grown with more images)
      for r in (r for r in records if float(r["eps"]) == eps and r["method"] == method):
        if r["start"] not in widest or r["stop"] > widest[r["start"]]["stop"]:
          widest[r["start"]] = r
      chunks = [widest[k] for k in sorted(widest)]
      contiguous = []
      for r in chunks:
        if r["start"] != (contiguous[-1]["stop"] if contiguous else 0):
          break
        contiguous.append(r)
      flags = np.concatenate([np.asarray(r["certified_images"], np.float64) for r in contiguous] or [np.zeros(0)])
      steady = [r for r in contiguous if not r.get("compiled_first")]
      sec = (sum(r["seconds"] for r in steady) / sum(r["stop"] - r["start"] for r in steady)) if steady else math.nan
      per[method] = Method(flags, sum(int(r["pgd_violations"]) for r in chunks), sec, flags.size,
                           float(chunks[0]["attention_bound"]),
                           sum(int(r.get("margin_violations", 0)) for r in chunks))
    out[eps] = per
  # The same first n images for every method and every ε: the ones all of them finished.
  n = min((m.n_finished for per in out.values() for m in per.values()), default=0)
  return {eps: {k: m._replace(certified=m.certified[:n]) for k, m in per.items()} for eps, per in out.items()}


def _pct(k, n):
  ci = verdicts.clopper_pearson(k, n)
  return f"{100 * k / n:.1f} % [{100 * ci.low:.1f}, {100 * ci.high:.1f}]"


def paired(comp: dict, eps: float, a: str, b: str):
  """The paired difference certified(a) − certified(b) on the same images (Tango's score interval), or None."""
  from experiments.certify.claims import paired_binary_difference
  if a not in comp.get(eps, {}) or b not in comp[eps]:
    return None
  return paired_binary_difference(comp[eps][a].certified, comp[eps][b].certified)


def summary_markdown(records) -> str:
  comp = comparison(records)
  if not comp:
    return "# LoFAST, CROWN and CROWN + LoFAST\n\nNo comparison records yet.\n"
  methods = [m for m in LABELS if any(m in c for c in comp.values())]
  machine = records[-1].get("machine", "")
  lines = ["# LoFAST, CROWN and CROWN + LoFAST on the same images", "",
           f"Certified ℓ2 accuracy of the certification run's headline model at each ε (the α selected on the "
           f"validation split) on the first n test images, every method on the same images; 95 % Clopper–Pearson "
           f"intervals; seconds per image after compilation ({machine}). {CROWN_NOTE}.", "",
           "| ε | α | n | " + " | ".join(LABELS[m] for m in methods)
           + " | PGD-L2 violations (certified images broken / margin bounds above a reached margin) |",
           "|---|---|---|" + "---|" * len(methods) + "---|"]
  for eps, per in comp.items():
    n = len(next(iter(per.values())).certified)
    cells = [_pct(int(per[m].certified.sum()), n) if m in per else "–" for m in methods]
    viol = (f"{sum(m.pgd_violations for m in per.values())} / "
            f"{sum(m.margin_violations for m in per.values())}")
    alpha = next(iter(per.values())).attention_bound
    lines.append(f"| {eps:g} | {alpha:g} | {n} | " + " | ".join(cells) + f" | {viol} |")
  lines += ["", "Seconds per image (after compilation):", "",
            "| ε | " + " | ".join(LABELS[m] for m in methods) + " |", "|---|" + "---|" * len(methods)]
  for eps, per in comp.items():
    lines.append(f"| {eps:g} | " + " | ".join(f"{per[m].seconds_per_image:.3g}" if m in per else "–"
                                               for m in methods) + " |")
  lines += ["", "Paper (CIFAR-10, seconds on hardware its summary does not name): "
            + ", ".join(f"{k} {v:g} s" for k, v in lofast.SECONDS_PER_SAMPLE.items()) + ".", "",
            "Paired differences on the same images (Tango's score interval of the difference of certified shares, not conditional on the discordant count):", "",
            "| ε | comparison | difference | discordant images |", "|---|---|---|---|"]
  for eps in comp:
    for a, b in PAIRS:
      ci = paired(comp, eps, a, b)
      if ci is None:
        continue
      x, y = comp[eps][a].certified, comp[eps][b].certified
      lines.append(f"| {eps:g} | {LABELS[a]} − {LABELS[b]} | {100 * ci.estimate:+.1f} points "
                   f"[{100 * ci.low:+.1f}, {100 * ci.high:+.1f}] | {int(np.sum((x == 1) & (y == 0)))} only "
                   f"{LABELS[a]}, {int(np.sum((x == 0) & (y == 1)))} only {LABELS[b]} |")
  lines += ["", "![certified accuracy by method](certified_methods.png)", ""]
  return "\n".join(lines)


def plot_methods(records, path) -> None:
  """Certified accuracy against ε of every method (Clopper–Pearson bars) with the paper's points."""
  comp = comparison(records)
  cifar10 = {r.get("dataset") for r in records} == {"cifar10"}
  fig, (ax,) = subplots(1, width=5.6, height=4.0)
  colors = {"lofast": "tab:blue", "crown": "tab:red", "crown_lofast": "tab:green", "crown_ibp": "tab:gray"}
  for m, label in LABELS.items():
    pts = [(eps, per[m]) for eps, per in comp.items() if m in per]
    if not pts:
      continue
    eps = np.array([e for e, _ in pts])
    k = np.array([int(p.certified.sum()) for _, p in pts])
    n = np.array([p.certified.size for _, p in pts])
    ci = [verdicts.clopper_pearson(int(a), int(b)) for a, b in zip(k, n)]
    mid = 100 * k / n
    err = np.array([[m_ - 100 * c.low for m_, c in zip(mid, ci)], [100 * c.high - m_ for m_, c in zip(mid, ci)]])
    ax.errorbar(eps, mid, yerr=err, marker="o", capsize=3, color=colors[m], label=f"{label} (n = {n.min()})")
    if m in PAPER and PAPER[m] in lofast.CERTIFIED and cifar10:
      paper = lofast.CERTIFIED[PAPER[m]]
      ax.scatter(list(paper), list(paper.values()), marker="*", s=110, color=colors[m], edgecolor="black",
                 zorder=5, label=f"{label} (paper)")
  if cifar10:   # the paper's figures are CIFAR-10's
    abc = lofast.CERTIFIED["α,β-CROWN (paper)"]
    ax.scatter(list(abc), list(abc.values()), marker="X", s=80, color="black", label="α,β-CROWN (paper)")
  ax.set_xscale("log")
  ax.set_xlabel("ℓ2 radius ε ([0, 1] pixel scale)")
  ax.set_ylabel("certified accuracy (%)")
  ax.set_title("same test images, headline model per ε")
  ax.legend(fontsize=7)
  save(fig, path)


def write_report(workdir) -> str:
  """Writes DIR/crown/summary.md and certified_methods.png; returns the markdown.

  Raises:
    ValueError: DIR/crown holds no comparison records.
  """
  out = Path(workdir) / SUBDIR
  records = read_records(out) if out.is_dir() else []
  if not records:
    raise ValueError(f"{out} holds no comparison records: run python -m experiments.certify.compare --workdir "
                     f"{workdir} first")
  plot_methods(records, out / "certified_methods.png")
  text = stamp(summary_markdown(records), "certification")
  (out / "summary.md").write_text(text)
  return text


def main(argv=None) -> None:
  from experiments.core.report import report_cli
  report_cli("Redraw the LoFAST / CROWN / CROWN + LoFAST comparison (DIR/crown).", write_report, argv,
             prog="python -m experiments.certify.compare_report")


if __name__ == "__main__":
  main()
