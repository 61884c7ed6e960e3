"""Plot and summary.md of a condition-number cubing run, drawn from its results.jsonl (no recomputation).

``python -m experiments.cubing.report --workdir runs/cubing`` redraws them.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from experiments.papers import influence_malleability
from experiments.core.report import report_main, write_summary
from experiments.core.plotting import save, subplots

PAPER_KAPPA = influence_malleability.KAPPA  # (paper) κ(G), docs/theory.md#influence-malleability-figures; n not stated.
REQUIRED_FIELDS = ("dataset", "n", "seed", "log10_kappa_G")


def _mean_std(records, key):
  vals = np.array([float(r[key]) for r in records])
  return vals.mean(), vals.std()


def summary_markdown(records) -> str:
  groups = defaultdict(list)
  for r in records:
    groups[r["dataset"], r["n"]].append(r)
  r0 = records[0]
  layers = sorted({int(k.rsplit("_k", 1)[1]) for k in r0 if k.startswith("log10_kappa_values_k")})
  eps = sorted({k.split("eps")[1] for k in r0 if k.startswith("log10_width_attn_eps")}, key=float,
               reverse=True)
  lines = [
      "# Condition-number cubing: κ(G̃) = κ(G)³", "",
      "G = X Xᵀ on raw pixels in [0, 1] (float64); G̃ = Gram of the linearized-attention features X Xᵀ X. "
      "log10 values, mean ± std over random class-balanced subsets. 'via eig' takes the power through the "
      "eigenvalues of G; 'direct' decomposes the formed F Fᵀ, which float64 resolves only while "
      "κ(G)³ ≲ 1/(n·eps) — its deviation shows where that ends. 'normalised' uses ℓ2-normalised feature rows "
      "(what the MLP sees), which breaks the identity. Past full rank, pseudo-condition numbers over "
      f"eigenvalues > n·eps64·λ_max, with the rank. Paper (n not stated): κ(G) ≈ {PAPER_KAPPA['mnist']:.1e} "
      f"MNIST, {PAPER_KAPPA['cifar10']:.1e} CIFAR-10.", "",
      "| data set | n | rank G | log10 κ(G) | log10 κ(G̃) via eig | direct | deviation | normalised | "
      "deviation (normalised) | explicit ‖FFᵀ−G³‖/‖G³‖ |",
      "|---|---|---|---|---|---|---|---|---|---|"]
  for (dataset, n), rs in sorted(groups.items()):
    kg, kg_s = _mean_std(rs, "log10_kappa_G")
    ranks = sorted({r["rank_G"] for r in rs})
    rank = "/".join(str(x) for x in ranks) + ("" if all(r["full_rank"] for r in rs) else " (deficient)")
    direct, _ = _mean_std(rs, "log10_kappa_Gtilde_direct")
    dev, _ = _mean_std(rs, "cubing_deviation_direct")
    norm, _ = _mean_std(rs, "log10_kappa_Gtilde_normalised")
    devn, _ = _mean_std(rs, "cubing_deviation_normalised")
    expl = (f"{np.mean([r['explicit_identity_rel_error'] for r in rs]):.1e}"
            if "explicit_identity_rel_error" in rs[0] else "–")
    lines.append(f"| {dataset} | {n} | {rank} | {kg:.2f} ± {kg_s:.2f} | {3 * kg:.2f} | {direct:.2f} | "
                 f"{dev:+.2f} | {norm:.2f} | {devn:+.2f} | {expl} |")
  lines += ["", "## Stacking and implied widths (log10, mean over subsets)", "",
            "| data set | n | " + " | ".join(f"G^(2k+1), k={k}" for k in layers) + " | "
            + " | ".join(f"G^(3^k), k={k}" for k in layers) + " | "
            + " | ".join(f"m attn (κ⁶/ε²), ε={e}" for e in eps) + " | "
            + " | ".join(f"m ReLU (1/ε²), ε={e}" for e in eps) + " |",
            "|---|---|" + "---|" * (2 * len(layers) + 2 * len(eps))]
  for (dataset, n), rs in sorted(groups.items()):
    cells = [f"{_mean_std(rs, f'log10_kappa_values_k{k}')[0]:.1f}" for k in layers]
    cells += [f"{_mean_std(rs, f'log10_kappa_self_k{k}')[0]:.1f}" for k in layers]
    cells += [f"{_mean_std(rs, f'log10_width_attn_eps{e}')[0]:.1f}" for e in eps]
    cells += [f"{_mean_std(rs, f'log10_width_relu_eps{e}')[0]:.1f}" for e in eps]
    lines.append(f"| {dataset} | {n} | " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def plot_kappa_vs_n(records, path) -> None:
  datasets = sorted({r["dataset"] for r in records})
  fig, axes = subplots(len(datasets))
  for ax, dataset in zip(axes, datasets):
    rs = [r for r in records if r["dataset"] == dataset]
    ns = sorted({r["n"] for r in rs})
    for key, label, style in (("log10_kappa_G", "κ(G)", "o-"), ("log10_kappa_Gtilde", "κ(G)³ (via eig)", "s-"),
                              ("log10_kappa_Gtilde_direct", "κ(G̃) direct", "x--"),
                              ("log10_kappa_Gtilde_normalised", "κ(G̃) normalised rows", "^:")):
      m = [np.mean([float(r[key]) for r in rs if r["n"] == n]) for n in ns]
      ax.plot(ns, m, style, label=label, ms=4)
    deficient = [n for n in ns if not all(r["full_rank"] for r in rs if r["n"] == n)]
    if deficient:
      first = ns.index(min(deficient))
      left = np.sqrt(ns[first - 1] * ns[first]) if first > 0 else ns[first] / 1.2
      ax.axvspan(left, max(ns) * 1.2, color="gray", alpha=0.15, label="rank-deficient (pseudo-κ)")
    ax.set_xscale("log")
    ax.set_xlabel("n (images)")
    ax.set_ylabel("log10 condition number")
    ax.set_title(dataset)
    ax.legend(fontsize=7)
  save(fig, path)


def write_report(workdir) -> str:
  """Draws kappa_vs_n.png and writes summary.md into ``workdir`` from its records; returns the summary.

  Raises:
    ValueError: no records, or records of another experiment (``experiments.core.report.experiment_records``).
  """
  return write_summary(workdir, "cubing", REQUIRED_FIELDS, _render)


def _render(records: list[dict], workdir: Path) -> str:
  """Draws the plots of ``records`` into ``workdir``; returns the summary markdown."""
  plot_kappa_vs_n(records, workdir / "kappa_vs_n.png")
  return summary_markdown(records)

if __name__ == "__main__":
  from experiments.cubing import SPEC
  report_main(SPEC)
