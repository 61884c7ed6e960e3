"""Plots, derived.json and summary.md of a width sweep, drawn from its results.jsonl (no recomputation).

``python -m experiments.width_sweep.report --workdir runs/width_sweep`` redraws them. derived.json holds
the log-log fits (slope ± standard error, intercept, R², and the width at which the fitted spectral ratio
reaches 1) per (data set, model); the summary renders the records and that file only.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ntk.distance import loglog_fit
from experiments.papers import influence_malleability
from experiments.core.plotting import (MODEL_COLORS, MODEL_LABELS, finite, grouped, log_errorbar, save, series,
                                  subplots)
from experiments.width_sweep import claims as width_sweep_claims
from experiments.core import tolerance
from experiments.core.report import report_main, write_summary
from experiments.core.workdir import write_derived

KEY_FIELDS = ("dataset", "model", "readout", "width", "seed", "kind")  # as experiments.width_sweep
FITTED = ("rel_frobenius_train", "spectral_ratio")  # the kernel-distance measures fitted against width

PAPER_FUNCTION_DISTANCE = influence_malleability.FUNCTION_DISTANCE  # the paper's table (experiments.papers)


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


def derive(records) -> dict:
  """The fitted numbers of the summary: {"fits": [one dict per (dataset, model, quantity)]}, each with
  slope, slope_stderr, intercept (log y at m = 1), r_squared, n_points and width_reaching_1 (the width at
  which the fitted line reaches 1; inf for a slope ≥ 0), from the init records (``ntk.distance.loglog_fit``
  over every seed's point)."""
  init = [r for r in records if r["kind"] == "init"]
  fits = []
  for dataset in _datasets(init):
    for model in _models(init):
      for quantity in FITTED:
        fit = _fit(init, dataset, model, quantity)
        if fit is not None:
          fits.append(dict(dataset=dataset, model=model, quantity=quantity, slope=fit.slope,
                           slope_stderr=fit.slope_stderr, intercept=fit.intercept, r_squared=fit.r_squared,
                           n_points=fit.n_points, width_reaching_1=fit.width_reaching(1.0)))
  return {"fits": fits}


def _derived_fit(derived, dataset, model, quantity):
  found = [f for f in derived.get("fits", ()) if (f["dataset"], f["model"], f["quantity"]) == (dataset, model, quantity)]
  return found[0] if found else None


def plot_vs_width(records, y: str, ylabel: str, path, *, kind: str, reference_slope=None,
                  extrapolate_to=None, derived=None) -> None:
  """One panel per data set: ``y`` vs width on log-log axes, the geometric mean over seeds with min–max bars,
  both models; with
  ``extrapolate_to``, the fitted line of ``derived`` (``derive``) out to where it reaches that value."""
  datasets = _datasets(records)
  fig, axes = subplots(len(datasets))
  for ax, dataset in zip(axes, datasets):
    for model in _models(records):
      xs, values = grouped(records, "width", y, dataset=dataset, model=model, kind=kind)
      if xs.size == 0:
        continue
      log_errorbar(ax, xs, values, color=MODEL_COLORS[model], label=MODEL_LABELS[model])
      fit = _derived_fit(derived or {}, dataset, model, y)
      if extrapolate_to is not None and fit is not None and fit["slope"] < 0:
        m_star = float(np.exp((np.log(extrapolate_to) - fit["intercept"]) / fit["slope"]))
        grid = np.geomspace(xs[0], max(xs[-1], min(m_star, 1e12)), 50)
        ax.plot(grid, np.exp(fit["intercept"]) * grid ** fit["slope"], ls=":", color=MODEL_COLORS[model],
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


def mean_sd(values) -> str:
  """'4.47 ± 0.12 (10)': the mean ± the sample standard deviation (ddof = 1) and the count; '4.47 (1)' for a
  single value, which has no spread."""
  v = np.asarray(values, float)
  if v.size == 1:
    return f"{v[0]:.3g} (1)"
  return f"{v.mean():.3g} ± {v.std(ddof=1):.2g} ({v.size})"


def _optimizer_name(records) -> str:
  """How the converged points were trained, from their records ('Adam (rate chosen on a validation split)',
  'L-BFGS', 'Gauss–Newton'); records written before the optimizer field existed were Adam."""
  names = {"adam": "Adam (rate chosen on a validation split)", "lbfgs": "full-batch L-BFGS",
           "gauss_newton": "Gauss–Newton (Levenberg–Marquardt)"}
  return " / ".join(sorted({names.get(r.get("optimizer", "adam"), r.get("optimizer")) for r in records}))


def _fmt(v, digits=3):
  return "–" if v is None else f"{v:.{digits}g}"


def summary_markdown(records, derived) -> str:
  """The summary table: fitted slopes (from ``derived``), spectral ratios, function distances beside the
  paper's."""
  init = [r for r in records if r["kind"] == "init"]
  train = [r for r in records if r["kind"] == "train"]
  lines = ["# Width sweep: finite- vs infinite-width NTK", ""]
  if records:
    r0 = records[0]
    lines += [f"Readout: **{r0['readout']}**; n_train = {r0['n_train']}, n_test = {r0['n_test']}; "
              f"kernel path: {r0['kernel_path']}. Tables: the mean over seeds ± the sample standard deviation, "
              "with the number of seeds in brackets; plots: the geometric mean over seeds with min–max bars. "
              "Source: arXiv 2603.13085 "
              "(docs/theory.md#kernel-distance).", "",
              f"Data: {width_sweep_claims.data_draw_text(records)}.", ""]
  lines += _initialisation_section(init, derived)
  lines += _trained_section(train)
  lines += _converged_section(records)
  lines += _distance_slope_lines(records) + _movement_lines(records)
  lines += ["", "Fits: derived.json. Plots: kernel_distance.png, spectral_ratio.png"
            + (", function_distance.png, kernel_movement.png" if train else ""), ""]
  return "\n".join(lines)


def _initialisation_section(init, derived) -> list[str]:
  """Kernel distances at initialisation: fitted slopes, spectral ratios and the width where the ratio reaches 1."""
  lines = []
  lines += ["## Kernel distance at initialisation", "",
            "Relative Frobenius ‖K_m − K∞‖_F/‖K∞‖_F (train block) should fall as m^(−1/2) for both models "
            "(sanity check). The discriminating figure is ‖K_m − K∞‖₂/λ_min(K∞) at the largest width, "
            "and the width at which its log-log fit reaches 1.", "",
            "| data set | model | slope (rel. Frobenius) ± s.e. | rel. Frobenius at max m | "
            "‖K_m−K∞‖₂/λ_min at max m | λ_min(K∞) | slope (spectral) | width where ratio = 1 |",
            "|---|---|---|---|---|---|---|---|"]
  for dataset in _datasets(init):
    for model in _models(init):
      fit = _derived_fit(derived, dataset, model, "rel_frobenius_train")
      sfit = _derived_fit(derived, dataset, model, "spectral_ratio")
      xs, frob, _, _ = series(init, "width", "rel_frobenius_train", dataset=dataset, model=model)
      _, ratio, _, _ = series(init, "width", "spectral_ratio", dataset=dataset, model=model)
      _, lam, _, _ = series(init, "width", "lambda_min_inf", dataset=dataset, model=model)
      if xs.size == 0:
        continue
      lines.append(
          f"| {dataset} | {MODEL_LABELS[model]} | "
          f"{_fmt(fit['slope']) if fit else '–'} ± {_fmt(fit['slope_stderr'], 2) if fit else '–'} | "
          f"{frob[-1]:.3g} (m={int(xs[-1])}) | {ratio[-1]:.3g} | {lam[0]:.3g} | "
          f"{_fmt(sfit['slope']) if sfit else '–'} | {_fmt(sfit['width_reaching_1'] if sfit else None, 2)} |")
  return lines


def _trained_section(train) -> list[str]:
  """Function distance after gradient descent and kernel movement, beside the paper's table."""
  lines = []
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
        xs, values = grouped(train, "width", "function_distance", dataset=dataset, model=model)
        _, rel, _, _ = series(train, "width", "function_distance_relative", dataset=dataset, model=model)
        _, mov, _, _ = series(train, "width", "kernel_movement", dataset=dataset, model=model)
        _, acc_n, _, _ = series(train, "width", "test_accuracy_network", dataset=dataset, model=model)
        _, acc_k, _, _ = series(train, "width", "test_accuracy_ntk", dataset=dataset, model=model)
        paper = PAPER_FUNCTION_DISTANCE.get((dataset, model), {})
        for i, w in enumerate(xs):
          lines.append(f"| {dataset} | {MODEL_LABELS[model]} | {int(w)} | {mean_sd(values[i])} | "
                       f"{rel[i]:.3g} | {paper.get(int(w), '')} | {mov[i]:.3g} | {acc_n[i]:.3f} | "
                       f"{acc_k[i]:.3f} |")
  return lines


def _converged_section(records) -> list[str]:
  """Function distance at convergence against the K₀ and K∞ regressions, and the points left out."""
  lines = []
  conv_all = [r for r in records if r["kind"] == "converged"]
  if conv_all:
    left = [r for r in conv_all if not tolerance.reached_target(r)]
    lines += ["", "## Function distance at convergence", "",
              f"The network trained by {_optimizer_name(conv_all)} " + (
                  "to a fixed budget (the paper's recipe: every point trained its whole budget; its final train "
                  "loss in the table) " if any(tolerance.fixed_budget(r) for r in conv_all) else
                  "to a ½·MSE train-loss target ") + "on " + (
                  "softmax cross-entropy " if conv_all[0].get("loss") == "ce" else "½·MSE ") + (
                  "(and its linearisation at initialisation trained by the same recipe: function_distance_linearized "
                  "in results.jsonl) " if any("function_distance_linearized" in r for r in conv_all) else "") +
              "against the kernel regression of its empirical NTK at initialisation with its own f₀, "
              "f₀ + K₀(x, X)(K₀ + λI)⁻¹(Y − f₀(X)), λ = ridge_scale·tr(K₀)/n; ‖·‖_F over the [n_test, C] "
              "test outputs, mean ± sample std over the converged seeds (their number in brackets); beside it the same regression with the "
              "infinite-width NTK K∞ in place of K₀ (λ∞ = ridge_scale·tr(K∞)/n, same f₀). Points that did not "
              "reach the target are left out.", "",
              "| data set | model | width | ‖f_m − f_K₀‖_F | relative | ‖f_m − f_K∞‖_F | train loss | converged | "
              "test acc. network / K₀ / K∞ |", "|---|---|---|---|---|---|---|---|---|"]
    for dataset in _datasets(conv_all):
      for model in _models(conv_all):
        for w in sorted({r["width"] for r in conv_all if (r["dataset"], r["model"]) == (dataset, model)}):
          every = [r for r in conv_all if (r["dataset"], r["model"], r["width"]) == (dataset, model, w)]
          rs = [r for r in every if tolerance.reached_target(r)]
          loss = f"{np.mean([r['train_loss'] for r in every]):.3g}"
          if rs:
            d = np.array([r["function_distance"] for r in rs])
            kinf = [r["function_distance_kinf"] for r in rs if "function_distance_kinf" in r]
            cells = (f"{mean_sd(d)} | "
                     f"{np.mean([r['function_distance_relative'] for r in rs]):.3g} | "
                     + (mean_sd(kinf) if kinf else "–"))
            acc = (f"{np.mean([r['test_accuracy'] for r in rs]):.3f} / "
                   f"{np.mean([r['kernel_test_accuracy'] for r in rs]):.3f} / "
                   + (f"{np.mean([r['kinf_test_accuracy'] for r in rs]):.3f}" if kinf else "–"))
          elif all(r.get("loss_floor", 0.0) > r["loss_target"] for r in every):
            cells, acc = f"unreachable (floor ≥ {min(r['loss_floor'] for r in every):.3g}) | – | –", "–"
          else:
            cells, acc = "not converged | – | –", "–"
          lines.append(f"| {dataset} | {MODEL_LABELS[model]} | {w} | {cells} | {loss} | {len(rs)}/{len(every)} "
                       f"| {acc} |")
    if left:
      lines += ["", f"**Left out: {len(left)} converged-distance point(s) whose training did not reach the loss "
                f"target** (final ½·MSE {min(r['train_loss'] for r in left):.3g} – "
                f"{max(r['train_loss'] for r in left):.3g}, target {left[0]['loss_target']:g})."]
      floored = [r for r in left if r.get("loss_floor", 0.0) > r["loss_target"]]
      if floored:
        lo, hi = (f(r["loss_floor"] for r in floored) for f in (min, max))
        widths = sorted({r["width"] for r in floored})
        lines += [f"{len(floored)} of them cannot reach it with any first layer: their fixed ±1 readout keeps "
                  f"the ½·MSE at or above {lo:.3g}" + (f" – {hi:.3g}" if f"{hi:.3g}" != f"{lo:.3g}" else "")
                  + f" (width{'s' if len(widths) > 1 else ''} {', '.join(map(str, widths))}; `ntk.loss_floor`, "
                  "docs/theory.md#fixed-readout-loss-floor)."]
  return lines


KIND_LABELS = {"common": "common ½·MSE target", "converged": "trained to the criterion",
               "matched": "matched fraction", "train": "fixed GD time"}


def _distance_slope_lines(records) -> list[str]:
  """Per (kind, data set): each model's mean per-seed log-log slope of the distance to the K∞ predictor and
  to the K₀ predictor (``width_sweep_claims.DISTANCE_FIELDS``), and the mean paired difference MLP-Attn − 2L-ReLU
  over the seeds both have (the claim rows' statistic, without its interval); converged points only."""
  out = []
  for kind, (kinf, k0, how, _) in width_sweep_claims.DISTANCE_FIELDS.items():
    recs = [r for r in records if r["kind"] == kind and tolerance.reached_target(r)]
    for dataset in _datasets(recs):
      cells = {}
      for name, field in (("K∞", kinf), ("K₀", k0)):
        slopes = {m: width_sweep_claims.per_seed_slopes([r for r in recs if (r["dataset"], r["model"]) == (dataset, m)
                                                         and field in r], field) for m in ("relu", "mlp_attn")}
        seeds = sorted(set(slopes["relu"]) & set(slopes["mlp_attn"]))
        mean = lambda v: f"{np.mean(v):+.3g}" if len(v) else "–"  # noqa: E731
        cells[name] = (mean(list(slopes["relu"].values())), mean(list(slopes["mlp_attn"].values())),
                       mean([slopes["mlp_attn"][s] - slopes["relu"][s] for s in seeds]) + f" ({len(seeds)})")
      if any(c[2] != "– (0)" for c in cells.values()):
        out.append(f"| {dataset} | {KIND_LABELS[kind]} | " + " | ".join(" | ".join(c) for c in cells.values()) + " |")
  if not out:
    return []
  return ["", "## Distance to the K∞ and K₀ predictors: slopes against width", "",
          "Mean per-seed least-squares slope of log distance on log width (converged points), and the mean "
          "per-seed difference MLP-Attn − 2L-ReLU (seeds paired; how many in brackets). K∞: the infinite-width "
          "NTK's predictor (the paper's reference: a falling distance means the network approaches K∞); K₀: "
          "the network's own initial NTK's (laziness). Common / converged: against the kernel regressions; "
          "matched / fixed time: against the GD predictors at the same time. Intervals and verdicts: "
          "experiments.claims (ntk_distance_*).", "",
          "| data set | criterion | 2L-ReLU (K∞) | MLP-Attn (K∞) | difference (K∞) | 2L-ReLU (K₀) | MLP-Attn (K₀) | "
          "difference (K₀) |", "|---|---|---|---|---|---|---|---|"] + out


def _finite_mean(values) -> str:
  """The mean of the finite values, with '(of k)' when some were undefined (NaN); 'undefined (all k)' when
  every one was."""
  v = [float(x) for x in values if np.isfinite(float(x))]
  if not v:
    return f"undefined (all {len(values)})"
  return f"{np.mean(v):.3g}" + (f" (of {len(v)})" if len(v) < len(values) else "")


def _movement_lines(records) -> list[str]:
  """Per (kind, data set, model, width): the mean of each kernel-movement measure over the converged seeds
  where it is defined (``width_sweep_claims.KERNEL_MOVEMENT_MEASURES``)."""
  fields = [f for f, _, _ in width_sweep_claims.KERNEL_MOVEMENT_MEASURES]
  out = []
  for kind in ("common", "matched", "train", "converged"):
    recs = [r for r in records if r["kind"] == kind and tolerance.reached_target(r) and fields[1] in r]
    for dataset in _datasets(recs):
      for model in _models(recs):
        for w in sorted({r["width"] for r in recs if (r["dataset"], r["model"]) == (dataset, model)}):
          rs = [r for r in recs if (r["dataset"], r["model"], r["width"]) == (dataset, model, w)]
          out.append(f"| {dataset} | {KIND_LABELS[kind]} | {MODEL_LABELS[model]} | {w} | "
                     + " | ".join(_finite_mean([r[f] for r in rs]) for f in fields) + f" | {len(rs)} |")
  if not out:
    return []
  k = sorted({r["kernel_movement_k"] for r in records if "kernel_movement_k" in r})
  return ["", "## Kernel movement by measure", "",
          "K_T against K₀ on the training inputs (``ntk.distance.kernel_movement_measures``), mean over the "
          "converged seeds: raw ‖K_T − K₀‖_F/‖K₀‖_F; centred ‖H(K_T − K₀)H‖_F/‖HK₀H‖_F, H = I − 11ᵀ/n; "
          "1 − CKA(K_T, K₀); top-k eigenspace 1 − ‖U_kᵀV_k‖_F²/k (k = "
          f"{'/'.join(map(str, k))}). MLP-Attn's top eigenvalue carries most of K₀'s trace, so the raw measure "
          "mostly sees that one mode. A measure is undefined for a seed where 1 − CKA meets a constant trained "
          "kernel (HK_TH = 0) or the top-k eigenspace a kernel whose k-th eigenvalue is not positive; '(of j)' "
          "counts the seeds where it is defined, 'undefined (all j)' says it is defined for none.", "",
          "| data set | criterion | model | width | raw | centred | 1 − CKA | top-k eigenspace | seeds |",
          "|---|---|---|---|---|---|---|---|---|"] + out


def write_report(workdir) -> str:
  """Draws the plots and writes derived.json and summary.md into ``workdir`` from its records; returns the
  summary text.

  Raises:
    ValueError: no records, or records of another experiment (``experiments.core.report.experiment_records``).
  """
  return write_summary(workdir, "width_sweep", KEY_FIELDS, _render)


def _render(records: list[dict], workdir: Path) -> str:
  """Draws the plots of ``records`` into ``workdir``; returns the summary markdown."""
  derived = derive(records)
  write_derived(workdir, derived)
  init = [r for r in records if r["kind"] == "init"]
  train = [r for r in records if r["kind"] == "train"]
  if init:
    plot_vs_width(init, "rel_frobenius_train", "‖K_m − K∞‖_F / ‖K∞‖_F", workdir / "kernel_distance.png",
                  kind="init", reference_slope=-0.5)
    plot_vs_width(init, "spectral_ratio", "‖K_m − K∞‖₂ / λ_min(K∞)", workdir / "spectral_ratio.png",
                  kind="init", extrapolate_to=1.0, derived=derived)
  if train:
    plot_vs_width(train, "function_distance", "‖f_m − f_NTK‖_F (test)", workdir / "function_distance.png",
                  kind="train")
    plot_vs_width(train, "kernel_movement", "‖K_T − K_0‖_F / ‖K_0‖_F", workdir / "kernel_movement.png",
                  kind="train")
  return summary_markdown(records, derived)

if __name__ == "__main__":
  from experiments.width_sweep import SPEC
  report_main(SPEC)
