"""Plots and summary.md of a width sweep, drawn from its results.jsonl (no recomputation).

``python -m experiments.width_sweep_report --workdir runs/width_sweep`` redraws them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ntk.distance import loglog_fit
from experiments.plotting import (MODEL_COLORS, MODEL_LABELS, finite, grouped, log_errorbar, save, series,
                                  subplots)
from experiments.config import report_cli
from experiments.workdir import read_records

# arXiv 2603.13085, Table (NTK distance ‖f_m − f_NTK‖ by width), as quoted in REFERENCE §1. Targets to
# compare against, never used in a computation.
PAPER_FUNCTION_DISTANCE = {
    ("mnist", "relu"): {16: 45.1, 1024: 39.9, 4096: 39.2},
    ("mnist", "mlp_attn"): {16: 10.3, 1024: 33.3, 4096: 43.4},
    ("cifar10", "relu"): {16: 246.2, 1024: 101.7, 4096: 56.9},
    ("cifar10", "mlp_attn"): {16: 3.7, 1024: 10.4, 4096: 12.6},
}


def _datasets(records):
  return sorted({r["dataset"] for r in records})


def _models(records):
  return [m for m in ("relu", "mlp_attn") if any(r["model"] == m for r in records)]


def _fit(records, dataset, model, y):
  pts = [(r["width"], finite(r[y])) for r in records
         if r["dataset"] == dataset and r["model"] == model and y in r and finite(r[y]) > 0]
  if len({w for w, _ in pts}) < 2 or len(pts) < 3:
    return None
  w, v = zip(*pts)
  return loglog_fit(np.array(w), np.array(v))


def plot_vs_width(records, y: str, ylabel: str, path, *, kind: str, reference_slope=None,
                  extrapolate_to=None) -> None:
  """One panel per data set: ``y`` vs width on log-log axes, mean ± std over seeds, both models."""
  datasets = _datasets(records)
  fig, axes = subplots(len(datasets))
  for ax, dataset in zip(axes, datasets):
    for model in _models(records):
      xs, values = grouped(records, "width", y, dataset=dataset, model=model, kind=kind)
      if xs.size == 0:
        continue
      log_errorbar(ax, xs, values, color=MODEL_COLORS[model], label=MODEL_LABELS[model])
      fit = _fit([r for r in records if r["kind"] == kind], dataset, model, y)
      if extrapolate_to is not None and fit is not None and fit.slope < 0:
        m_star = fit.width_reaching(extrapolate_to)
        grid = np.geomspace(xs[0], max(xs[-1], min(m_star, 1e12)), 50)
        ax.plot(grid, np.exp(fit.intercept) * grid ** fit.slope, ls=":", color=MODEL_COLORS[model],
                label=f"fit: reaches {extrapolate_to:g} at m≈{m_star:.1e}")
    if reference_slope is not None:
      xs, mean, _, _ = series(records, "width", y, dataset=dataset, kind=kind, model="relu")
      if xs.size:
        ax.plot(xs, mean[0] * (xs / xs[0]) ** reference_slope, "k--", lw=1,
                label=f"slope {reference_slope:g}")
    if extrapolate_to is not None:
      ax.axhline(extrapolate_to, color="gray", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("width m")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{dataset} (bars: min–max over seeds)")
    ax.legend(fontsize=7)
  save(fig, path)


def _fmt(v, digits=3):
  return "–" if v is None else f"{v:.{digits}g}"


def summary_markdown(records) -> str:
  """The summary table: fitted slopes, spectral ratios, function distances beside the paper's."""
  init = [r for r in records if r["kind"] == "init"]
  train = [r for r in records if r["kind"] == "train"]
  lines = ["# Width sweep: finite- vs infinite-width NTK", ""]
  if records:
    r0 = records[0]
    lines += [f"Readout: **{r0['readout']}**; n_train = {r0['n_train']}, n_test = {r0['n_test']}; "
              f"kernel path: {r0['kernel_path']}. Mean ± std over seeds. Source: arXiv 2603.13085 "
              "(REFERENCE §1).", ""]
  lines += ["## Kernel distance at initialisation", "",
            "Relative Frobenius ‖K_m − K∞‖_F/‖K∞‖_F (train block) should fall as m^(−1/2) for both models "
            "(sanity check). The discriminating figure is ‖K_m − K∞‖₂/λ_min(K∞) at the largest width, "
            "and the width at which its log-log fit reaches 1.", "",
            "| data set | model | slope (rel. Frobenius) ± s.e. | rel. Frobenius at max m | "
            "‖K_m−K∞‖₂/λ_min at max m | λ_min(K∞) | slope (spectral) | width where ratio = 1 |",
            "|---|---|---|---|---|---|---|---|"]
  for dataset in _datasets(init):
    for model in _models(init):
      fit = _fit(init, dataset, model, "rel_frobenius_train")
      sfit = _fit(init, dataset, model, "spectral_ratio")
      xs, frob, _, _ = series(init, "width", "rel_frobenius_train", dataset=dataset, model=model)
      _, ratio, _, _ = series(init, "width", "spectral_ratio", dataset=dataset, model=model)
      _, lam, _, _ = series(init, "width", "lambda_min_inf", dataset=dataset, model=model)
      if xs.size == 0:
        continue
      lines.append(
          f"| {dataset} | {MODEL_LABELS[model]} | "
          f"{_fmt(fit.slope) if fit else '–'} ± {_fmt(fit.slope_stderr, 2) if fit else '–'} | "
          f"{frob[-1]:.3g} (m={int(xs[-1])}) | {ratio[-1]:.3g} | {lam[0]:.3g} | "
          f"{_fmt(sfit.slope) if sfit else '–'} | {_fmt(sfit.width_reaching(1.0) if sfit else None, 2)} |")
  if train:
    lines += ["", "## Function distance after gradient descent and kernel movement", "",
              "‖f_m − f_NTK‖_F over the [n_test, C] test outputs at the same training time t = steps·η, the "
              "NTK predictor given the network's own f₀; ‖K_T − K_0‖_F/‖K_0‖_F on the train block. The "
              "paper's column is its table (norm and sample size not stated there), so compare trends, "
              "not values.", "",
              "| data set | model | width | ‖f_m − f_NTK‖_F | relative | paper | kernel movement | "
              "test acc. network | test acc. NTK |", "|---|---|---|---|---|---|---|---|---|"]
    for dataset in _datasets(train):
      for model in _models(train):
        xs, dist, dstd, _ = series(train, "width", "function_distance", dataset=dataset, model=model)
        _, rel, _, _ = series(train, "width", "function_distance_relative", dataset=dataset, model=model)
        _, mov, _, _ = series(train, "width", "kernel_movement", dataset=dataset, model=model)
        _, acc_n, _, _ = series(train, "width", "test_accuracy_network", dataset=dataset, model=model)
        _, acc_k, _, _ = series(train, "width", "test_accuracy_ntk", dataset=dataset, model=model)
        paper = PAPER_FUNCTION_DISTANCE.get((dataset, model), {})
        for i, w in enumerate(xs):
          lines.append(f"| {dataset} | {MODEL_LABELS[model]} | {int(w)} | {dist[i]:.3g} ± {dstd[i]:.2g} | "
                       f"{rel[i]:.3g} | {paper.get(int(w), '')} | {mov[i]:.3g} | {acc_n[i]:.3f} | "
                       f"{acc_k[i]:.3f} |")
  lines += ["", "Plots: kernel_distance.png, spectral_ratio.png"
            + (", function_distance.png, kernel_movement.png" if train else ""), ""]
  return "\n".join(lines)


def write_report(workdir, records=None) -> str:
  """Draws the plots and writes summary.md into ``workdir``; returns the summary text."""
  workdir = Path(workdir)
  records = read_records(workdir) if records is None else records
  if not records:
    raise ValueError(f"{workdir} holds no records; run experiments.width_sweep first")
  init = [r for r in records if r["kind"] == "init"]
  train = [r for r in records if r["kind"] == "train"]
  if init:
    plot_vs_width(init, "rel_frobenius_train", "‖K_m − K∞‖_F / ‖K∞‖_F", workdir / "kernel_distance.png",
                  kind="init", reference_slope=-0.5)
    plot_vs_width(init, "spectral_ratio", "‖K_m − K∞‖₂ / λ_min(K∞)", workdir / "spectral_ratio.png",
                  kind="init", extrapolate_to=1.0)
  if train:
    plot_vs_width(train, "function_distance", "‖f_m − f_NTK‖_F (test)", workdir / "function_distance.png",
                  kind="train")
    plot_vs_width(train, "kernel_movement", "‖K_T − K_0‖_F / ‖K_0‖_F", workdir / "kernel_movement.png",
                  kind="train")
  text = summary_markdown(records)
  (workdir / "summary.md").write_text(text)
  return text


def main(argv=None) -> None:
  report_cli("Redraw the width-sweep plots and summary.md.", write_report, argv)


if __name__ == "__main__":
  main()
