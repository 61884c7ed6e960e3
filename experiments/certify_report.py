"""Plots and summary.md of a certification run, drawn from its results.jsonl (no recomputation).

``python -m experiments.certify_report --workdir /tmp/certify_run`` redraws them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.config import experiment_records, report_cli
from experiments.plotting import finite, save, subplots

# Havens et al. (ICML 2024), docs/theory.md#lofast-figures: 3-layer ViT on CIFAR-10, certified ℓ2 accuracy (%)
# by ε. Targets to compare against, never used in a computation.
PAPER_CERTIFIED = {
    "LoFAST (paper)": {0.02: 29.1, 0.05: 16.0},
    "α,β-CROWN (paper)": {0.02: 41.2, 0.05: 14.1},
    "CROWN+LoFAST (paper)": {0.05: 20.03},
    "CROWN (paper)": {0.05: 14.35},
}
PAPER_SECONDS_PER_SAMPLE = {"LoFAST": 0.055, "CROWN+LoFAST": 1.71, "α,β-CROWN": 4.33}
PAPER_MARKERS = {"LoFAST (paper)": "*", "α,β-CROWN (paper)": "X", "CROWN+LoFAST (paper)": "P",
                 "CROWN (paper)": "D"}
COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")

REQUIRED_FIELDS = ("dataset", "attention_bound", "kind", "eps", "layer")  # experiments.certify's keys


def _models(records, dataset):
  return sorted({r["attention_bound"] for r in records if r["dataset"] == dataset})


def _get(records, **match):
  return [r for r in records if all(r.get(k) == v for k, v in match.items())]


def plot_certified_accuracy(records, path) -> None:
  """One panel per data set: certified accuracy vs ε (curve from the certified radii, markers at the
  grid), PGD-L2 accuracy (upper bound), clean accuracy, and the paper's CIFAR-10 points."""
  datasets = sorted({r["dataset"] for r in records})
  fig, axes = subplots(len(datasets), width=5.0, height=3.8)
  for ax, dataset in zip(axes, datasets):
    eps_all = sorted({r["eps"] for r in _get(records, dataset=dataset, kind="certify")})
    grid = np.linspace(0.0, 1.1 * max(eps_all, default=0.1), 200)
    for color, alpha in zip(COLORS, _models(records, dataset)):
      radius = _get(records, dataset=dataset, attention_bound=alpha, kind="radius")
      if radius:
        radii = np.array([finite(v) for v in radius[0]["radii"]])
        rigorous = np.array([finite(v) for v in radius[0]["radii_rigorous"]])
        ax.plot(grid, [100 * np.mean(radii >= e) if e > 0 else 100 * np.mean(radii > 0) for e in grid],
                color=color, label=f"certified, ‖A‖≤{alpha:g}")
        ax.plot(grid, [100 * np.mean(rigorous >= e) if e > 0 else 100 * np.mean(rigorous > 0) for e in grid],
                color=color, ls=":", lw=1)
      cert = sorted(_get(records, dataset=dataset, attention_bound=alpha, kind="certify"), key=lambda r: r["eps"])
      if cert:
        eps = [r["eps"] for r in cert]
        ax.plot(eps, [100 * r["certified_accuracy"] for r in cert], "o", color=color, ms=4)
        ax.plot(eps, [100 * r["pgd_accuracy"] for r in cert], "^--", color=color, ms=4, lw=0.8,
                label=f"PGD-L2 (upper bound), ‖A‖≤{alpha:g}")
        ax.axhline(100 * cert[0]["clean_accuracy"], color=color, lw=0.6, ls="-.")
    if dataset == "cifar10":
      for name, points in PAPER_CERTIFIED.items():
        ax.plot(list(points), list(points.values()), PAPER_MARKERS[name], color="k", ms=7, mfc="none", label=name)
    ax.set_xlabel("ε (ℓ2, pixels in [0, 1])")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"{dataset}: certified (solid; dotted = rigorous), PGD, clean (dash-dot)", fontsize=8)
    ax.set_ylim(0, None)
    ax.legend(fontsize=6)
  save(fig, path)


def plot_tightness(records, path) -> None:
  """Bound / attained deviation (median over images) of each attention layer vs ε, per data set and α."""
  rows = [r for r in records if r["kind"] == "tightness"]
  datasets = sorted({r["dataset"] for r in rows})
  if not rows:
    return
  fig, axes = subplots(len(datasets), width=5.0, height=3.6)
  for ax, dataset in zip(axes, datasets):
    for color, alpha in zip(COLORS, _models(rows, dataset)):
      for layer, ls in zip(sorted({r["layer"] for r in rows}), ("-", "--", ":", "-.")):
        sel = sorted(_get(rows, dataset=dataset, attention_bound=alpha, layer=layer), key=lambda r: r["eps"])
        if sel:
          ax.plot([r["eps"] for r in sel], [r["ratio_min_median"] for r in sel], marker="o", ms=3, ls=ls,
                  color=color, label=f"‖A‖≤{alpha:g}, layer {layer + 1}")
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("pixel ε (layer radius = the certificate's propagated radius)")
    ax.set_ylabel("min-bound / PGD deviation (median)")
    ax.set_title(f"{dataset}: tightness of the layer bound", fontsize=9)
    ax.legend(fontsize=6)
  save(fig, path)


def _pct(v):
  return f"{100 * finite(v):.1f}"


def summary_markdown(records) -> str:
  """The tables: accuracies by ε, bound comparisons, tightness, beside the paper's numbers."""
  lines = ["# Certified ℓ2 robustness of Lipschitz ViTs with local attention-sensitivity bounds", ""]
  train = [r for r in records if r["kind"] == "train"]
  if train:
    r0 = train[0]
    lines += [f"Models: CertifiedViT (3 attention blocks with SLL MLPs, bounded normalisation, spectrally "
              f"normalised embedding; ‖W_V^h‖₂ ≤ 1/H; ‖A_h‖₂ ≤ α) trained for {r0['epochs']} epochs on "
              f"n_train = {r0['n_train']} images; certified on n_test = {r0['n_test']} test images. "
              "Certified = correctly classified and provably constant within the ℓ2 ball (per-pair "
              "last-layer margin certificate, layer bound min(Σ_h min(naive, fine), joint)). "
              "Source: Havens et al., ICML 2024 (docs/theory.md#lofast-figures).", "",
              "| data set | α = max ‖A_h‖₂ | train acc. | clean acc. | training s (sum of epochs) |",
              "|---|---|---|---|---|"]
    for r in sorted(train, key=lambda r: (r["dataset"], r["attention_bound"])):
      seconds = sum(h["seconds"] for h in r.get("history", [])) or r["train_seconds"]
      lines.append(f"| {r['dataset']} | {r['attention_bound']:g} | {_pct(r['train_accuracy'])} | "
                   f"{_pct(r['clean_accuracy'])} | {seconds:.0f} |")
  cert = sorted([r for r in records if r["kind"] == "certify"],
                key=lambda r: (r["dataset"], r["attention_bound"], r["eps"]))
  if cert:
    lines += ["", "## Accuracy (%) by ε", "",
              "certified: min bound (what we certify with); rigorous: closed-form key-side norm and no "
              "Krylov estimate at all (so no joint bound); naive / fine / joint: each layer bound alone; "
              "Tsuzuku: √2‖W‖₂ margin form. PGD-L2 is an upper bound on the true robust accuracy; `viol.` "
              "counts certified samples PGD broke (must be 0). s/sample: bound constants + propagation, "
              "after compilation.", "",
              "| data set | α | ε | clean | PGD-L2 | certified | rigorous | naive | fine | joint | Tsuzuku | "
              "viol. | s/sample (cert.) | s/sample (PGD) |", "|---" * 14 + "|"]
    for r in cert:
      lines.append(
          f"| {r['dataset']} | {r['attention_bound']:g} | {r['eps']:g} | {_pct(r['clean_accuracy'])} | "
          f"{_pct(r['pgd_accuracy'])} | **{_pct(r['certified_accuracy'])}** | {_pct(r['certified_rigorous'])} | "
          f"{_pct(r['certified_naive'])} | {_pct(r['certified_fine'])} | {_pct(r['certified_joint'])} | "
          f"{_pct(r['certified_tsuzuku'])} | {r['pgd_violations']} | {r['seconds_per_sample']:.4f} | "
          f"{r['pgd_seconds_per_sample']:.4f} |")
    lines += ["", "Paper (CIFAR-10, 3-layer ViT): LoFAST 29.1 % at ε = 0.02 and 16.0 % at ε = 0.05; "
              "α,β-CROWN 41.2 % / 14.1 %; CROWN 14.35 % vs CROWN+LoFAST 20.03 % at ε = 0.05; LoFAST "
              "0.055 s/sample, CROWN+LoFAST 1.71 s vs α,β-CROWN 4.33 s per sample. The paper trains on the "
              "full CIFAR-10 training set; here the models see the embedded subset only.",
              "", "## Fine-grained vs naive bound", "",
              "Per head, layer and correctly classified test image, at the radius the certificate propagates "
              "to that layer: how often B_fine < B_naive, the median B_naive/B_fine where it is, and the "
              "median ratio overall; and how often the joint bound (exact layer Jacobian) beats the "
              "per-head minimum, with its median gain. Krylov residuals: the largest relative residual "
              "‖KᵀKv − σ²v‖/σ² of the top Ritz pair (Lanczos) for the key-side and layer-Jacobian norms.", "",
              "| data set | α | ε | fine tighter | gain where tighter | median naive/fine | joint tighter | "
              "joint gain | max key residual | max Jacobian residual |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in cert:
      lines.append(f"| {r['dataset']} | {r['attention_bound']:g} | {r['eps']:g} | "
                   f"{_pct(r['fine_tighter_fraction'])} % | {finite(r['fine_gain_median']):.3g}× | "
                   f"{finite(r['naive_over_fine_median']):.3g} | {_pct(r['joint_tighter_fraction'])} % | "
                   f"{finite(r['joint_gain_median']):.3g}× | {r['key_gap_max']:.1e} | {r['jacobian_gap_max']:.1e} |")
  tight = sorted([r for r in records if r["kind"] == "tightness"],
                 key=lambda r: (r["dataset"], r["attention_bound"], r["eps"], r["layer"]))
  if tight:
    lines += ["", "## Bound-to-attack tightness on the trained models' own layers", "",
              "For the first images of the test set, each attention layer (all heads) at its clean input and "
              "the radius the certificate propagates to it at pixel radius ε: the bound divided by the largest "
              "deviation ‖G(X + Δ) − G(X)‖_F that PGD on Δ found (≥ 1 always; `viol.` = cases below 1, must "
              "be 0). Medians over images; the min-bound's range in brackets.", "",
              "| data set | α | ε | layer | layer radius | attained | min bound / attack | fine / attack | "
              "joint / attack | naive / attack | ‖∂G/∂X‖ | viol. |", "|---" * 12 + "|"]
    for r in tight:
      lines.append(
          f"| {r['dataset']} | {r['attention_bound']:g} | {r['eps']:g} | {r['layer'] + 1} | "
          f"{r['radius_median']:.3g} | {r['attained_median']:.3g} | {r['ratio_min_median']:.3g} "
          f"[{r['ratio_min_min']:.3g}, {r['ratio_min_max']:.3g}] | {r['ratio_fine_median']:.3g} | "
          f"{r['ratio_joint_median']:.3g} | {r['ratio_naive_median']:.3g} | {r['jacobian_norm_median']:.3g} | "
          f"{r['violations']} |")
  lines += ["", "Notes: the issue's min(naive, fine) certificate lies between the `fine` and `certified` "
            "columns (per head and layer the minimum is taken; the naive bound alone certifies almost "
            "nothing). The `rigorous` column is that certificate with no Krylov estimate at all. The tightness "
            "table is the check that caught 50-step plain power iteration being ~0.7 % low on two MNIST "
            "layers (an attack exceeded the joint bound); Lanczos on the same budget is now the default.",
            "", "Plots: certified_accuracy.png, tightness.png", ""]
  return "\n".join(lines)


def write_report(workdir) -> str:
  """Draws the plots and writes summary.md into ``workdir`` from its records; returns the summary text.

  Raises:
    ValueError: no records, or records of another experiment (``experiments.config.experiment_records``).
  """
  workdir = Path(workdir)
  records = experiment_records(workdir, "certify", REQUIRED_FIELDS)
  plot_certified_accuracy(records, workdir / "certified_accuracy.png")
  plot_tightness(records, workdir / "tightness.png")
  text = summary_markdown(records)
  (workdir / "summary.md").write_text(text)
  return text


def main(argv=None) -> None:
  report_cli("Redraw the certification plots and summary.md.", write_report, argv)


if __name__ == "__main__":
  main()
