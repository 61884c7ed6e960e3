"""Plots and summary.md of a sensitivity report (``experiments.report.run``), rebuilt from results.jsonl alone.

``python -m experiments.report.report --workdir DIR`` redraws them. The first table of summary.md puts
the headline numbers of every model side by side (95 % Clopper–Pearson intervals over images for the
accuracies, attack success and flip rates, ``experiments.core.verdicts.clopper_pearson``); the next lists
every section's status with its reason or error; then one part per section.
"""
from __future__ import annotations

from pathlib import Path
import matplotlib.ticker
import numpy as np

from experiments.core.report import report_main, write_summary
from experiments.core.plotting import save, subplots

REQUIRED_FIELDS = ("model", "section", "status")
SECTIONS = ("robustness", "lipschitz", "ntk", "influence", "attention", "certified")


def latest(records) -> dict:
  """{(model, section): the last record} (a rerun of an errored section appends a newer one)."""
  out = {}
  for r in records:
    out[(r["model"], r["section"])] = r
  return out


def _fmt(value, digits: int = 3) -> str:
  if value is None:
    return "–"
  if isinstance(value, str):
    return value
  value = float(value)
  if not np.isfinite(value):
    return str(value)
  if value != 0 and (abs(value) >= 1e4 or abs(value) < 1e-3):
    return f"{value:.{digits - 1}e}"
  return f"{value:.{digits}g}"


def _with_ci(value, ci) -> str:
  if value is None:
    return "–"
  if ci is None:
    return _fmt(value)
  return f"{_fmt(value)} [{_fmt(ci[0], 2)}, {_fmt(ci[1], 2)}]"


def headline_rows(by_key: dict, models: list) -> list[tuple[str, list[str]]]:
  """(metric, one cell per model) rows of the first table."""
  rows = []

  def cell(model, section, fn):
    rec = by_key.get((model, section))
    if rec is None:
      return "–"
    if rec["status"] == "skipped":
      return "n/a"
    try:
      return fn(rec)
    except (KeyError, IndexError, TypeError, ValueError):
      return "error" if rec["status"] == "error" else "–"

  rob = [by_key.get((m, "robustness")) for m in models]
  eps = next((r["eps_255"] for r in rob if r and "eps_255" in r), [])
  rows.append(("clean accuracy", [cell(m, "robustness", lambda r: _with_ci(r["clean_accuracy"],
                                                                             r["clean_accuracy_ci"])) for m in models]))
  rows.append(("attack pool: clean-correct test images (of n)", [cell(m, "robustness", lambda r: (
      f"{r['n_clean_correct']} of {r['n_attack_pool']}")) for m in models]))
  for name, label in (("pgd", "PGD-L∞"), ("apgd_ce", "APGD-CE"), ("apgd_dlr", "APGD-DLR")):
    for j, e in enumerate(eps):
      rows.append((f"{label} ASR, ε = {e:g}/255", [cell(m, "robustness", lambda r, j=j, n=name: _with_ci(
          r["asr"][n][j], r["asr_ci"][n][j]) if n in r["asr"] else "n/a (< 3 classes)") for m in models]))
  rows.append(("CW-L2 ASR at the largest L2 budget", [cell(m, "robustness", lambda r: f"{_with_ci(r['cw_l2']['asr'][-1], r['cw_l2']['asr_ci'][-1])} (L2 ≤ {r['cw_l2']['l2_grid'][-1]:g})") for m in models]))
  rows.append(("zero-gradient samples (max over attacks)", [cell(m, "robustness", lambda r: str(r["zero_grad_max"]))
                                                         for m in models]))
  rows.append((f"local Lipschitz (logits), ε = {eps[0]:g}/255" if eps else "local Lipschitz (logits)",
               [cell(m, "lipschitz", lambda r: f"{_fmt(r['mean'][0])} ± {_fmt(r['std'][0], 2)}") for m in models]))
  rows.append(("NTK condition number", [cell(m, "ntk", lambda r: _fmt(r["kernel_condition_number"])) for m in models]))
  rows.append(("NTK effective rank / n", [cell(m, "ntk", lambda r: f"{_fmt(r['kernel_effective_rank'])} / {r['n_train']}")
                                         for m in models]))
  def movement(r):
    if r.get("init_degenerate"):
      return f"not meaningful: K₀ degenerate (movement {_fmt(r['kernel_movement'])}; see the NTK section note)"
    return _fmt(r["kernel_movement"])

  rows.append(("kernel movement ‖K_θ − K_θ₀‖/‖K_θ₀‖", [cell(m, "ntk", movement) for m in models]))

  def flip(attack):
    def fn(r):
      pts = [p for p in r["points"] if p["attack"] == attack and p["eps"] > 0]
      if not pts:
        return "–"
      p = pts[-1]
      return f"{_with_ci(p['flip_rate'], p['flip_rate_ci'])} (ε = {p['eps']:g}, ρ = {_fmt(p['spearman'], 2)})"
    return fn

  for attack in ("fgsm", "pgd", "mim", "random_sign"):
    if any(by_key.get((m, "influence"), {}).get("points") and any(p["attack"] == attack for p in
           by_key[(m, "influence")]["points"]) for m in models):
      rows.append((f"influence flip rate, {attack}", [cell(m, "influence", flip(attack)) for m in models]))
  rows.append(("attention layers (bound applicable)", [cell(m, "attention", lambda r: f"{r['n_layers']} "
                                                            f"({r['n_bound_applicable']})") for m in models]))
  rows.append(("max PGD deviation / layer bound (≤ 1 is sound)", [cell(m, "attention", lambda r: _fmt(max(
      [layer["tightness_max"] for layer in r["layers"] if "tightness_max" in layer] or [None]))) for m in models]))
  rows.append(("mean attention entropy / log T (first layer)", [cell(m, "attention", lambda r: _fmt(
      np.mean(r["layers"][0]["entropy"]) / r["layers"][0]["log_tokens"])) for m in models]))
  rows.append(("certified ℓ2 radius (median)", [cell(m, "certified", lambda r: _fmt(r["radius_median"]))
                                               for m in models]))
  return rows


def _plots(by_key, models, workdir: Path) -> list[str]:
  written = []
  fig, (ax_asr, ax_lip) = subplots(2)
  drawn = False
  for m in models:
    r = by_key.get((m, "robustness"))
    if r and r["status"] == "ok":
      ax_asr.errorbar(r["eps_255"], r["asr"]["pgd"], marker="o", label=m)
      drawn = True
    r = by_key.get((m, "lipschitz"))
    if r and r["status"] == "ok":
      ax_lip.errorbar(r["eps_255"], r["mean"], yerr=r["std"], marker="o", label=m)
      drawn = True
  if drawn:
    ticks = sorted({e for m in models for s_ in ("robustness", "lipschitz")
                    for e in (by_key.get((m, s_)) or {}).get("eps_255", [])})
    for ax, ylabel, title in ((ax_asr, "PGD-L∞ ASR (clean-correct)", "attack success"),
                              (ax_lip, "local Lipschitz (logits)", "local Lipschitz")):
      ax.set(xlabel="ε × 255 (on each model's input_range)", ylabel=ylabel, xscale="log", title=title)
      ax.set_xticks(ticks, [f"{e:g}" for e in ticks])  # plain labels: no overlapping 3×10⁰-style minor ticks
      ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax_asr.legend(fontsize=7)
    save(fig, workdir / "robustness.png")
    written.append("robustness.png")
  else:
    import matplotlib.pyplot as plt
    plt.close(fig)
  fig, (ax,) = subplots(1)
  drawn = False
  for m in models:
    r = by_key.get((m, "influence"))
    if r and r.get("points"):
      for attack in sorted({p["attack"] for p in r["points"]}):
        pts = [p for p in r["points"] if p["attack"] == attack]
        # distinct markers and line styles, and a small horizontal offset: equal curves stay visible
        k = len(ax.lines)
        offset = 1 + 0.015 * (k - 2)
        ax.plot([p["eps"] * offset for p in pts], [p["flip_rate"] for p in pts], marker="os^vDP"[k % 6],
                linestyle=("-", "--", ":", "-.")[k % 4], alpha=0.85, label=f"{m} {attack}")
        drawn = True
  if drawn:
    ax.set(xlabel="ε (pixel scale)", ylabel="flip rate (top-τ)", title="influence malleability")
    ax.legend(fontsize=7)
    save(fig, workdir / "flip_rate.png")
    written.append("flip_rate.png")
  else:
    import matplotlib.pyplot as plt
    plt.close(fig)
  return written


def summary_text(records) -> str:
  """summary.md from the records (no files read or written)."""
  by_key = latest(records)
  models = list(dict.fromkeys(r["model"] for r in records))
  lines = ["# Sensitivity report", "", "Headline numbers, models side by side (95 % Clopper–Pearson intervals "
           "over images; ASR on the clean-correct images):", "",
           "| metric | " + " | ".join(models) + " |", "|---|" + "---|" * len(models)]
  for metric, cells in headline_rows(by_key, models):
    lines.append(f"| {metric} | " + " | ".join(cells) + " |")
  units = [(m, by_key[(m, "robustness")].get("eps_units")) for m in models if (m, "robustness") in by_key]
  if any(u for _, u in units):
    lines += ["", "ε units (attacks clip to each model's input_range; ε is on that scale): "
              + "; ".join(f"{m}: {u}" for m, u in units if u) + "."]
  lines += ["", "## Sections", "", "| model | section | status | seconds | note |", "|---|---|---|---|---|"]
  for m in models:
    for s in SECTIONS:
      r = by_key.get((m, s))
      if r is None:
        continue
      note = (r.get("reason") or r.get("error") or "; ".join(r.get("notes", []) or [])).replace("|", "/")
      if s == "ntk" and r["status"] == "ok":
        note = f"{r['implementation']}, blocks of {r['block_rows']} rows, {r['n_params']:,} parameters"
      lines.append(f"| {m} | {s} | {r['status']} | {r.get('wall_time_s', 0.0):.1f} | {note} |")
  att = [(m, by_key[(m, "attention")]) for m in models if (m, "attention") in by_key
         and "layers" in by_key[(m, "attention")]]
  if att:
    lines += ["", "## Attention layers", "",
              "| model | layer | kind | entropy (nats) | largest weight | bound (min) / PGD deviation at each ε | "
              "cos θ mean | Theorem 3 (γ = 1) | note |", "|---|---|---|---|---|---|---|---|---|"]
    for m, r in att:
      for layer in r["layers"]:
        bd = "–"
        if "bound_min_mean" in layer:
          bd = "; ".join(f"ε={e:g}: {_fmt(b)} / {_fmt(d)}" for e, b, d in zip(layer["bound_eps"],
                                                                            layer["bound_min_mean"],
                                                                            layer["deviation_mean"]))
        al = layer.get("alignment", {})
        lines.append(f"| {m} | {layer['path']} | {layer['kind']} | "
                     f"{', '.join(_fmt(v) for v in layer.get('entropy', [])) or '–'} | "
                     f"{', '.join(_fmt(v) for v in layer.get('max_weight', [])) or '–'} | {bd} | "
                     f"{_fmt(al.get('cos_theta_mean'))} | {_fmt(al.get('theorem3_gamma1_frequency'))} | "
                     f"{layer['reason'].replace('|', '/') or '–'} |")
  return "\n".join(lines) + "\n"


def write_report(workdir) -> str:
  """Writes summary.md and the plots of ``workdir`` from its records; returns the summary text.

  Raises:
    ValueError: the workdir is missing, empty, or holds another experiment's records.
  """
  return write_summary(workdir, "report", REQUIRED_FIELDS, _render)


def _render(records: list[dict], workdir: Path) -> str:
  """Draws the plots of ``records`` into ``workdir``; returns the summary markdown."""
  by_key = latest(records)
  models = list(dict.fromkeys(r["model"] for r in records))
  plots = _plots(by_key, models, workdir)
  text = summary_text(records)
  if plots:
    text += "\n" + "\n".join(f"![{p}]({p})" for p in plots) + "\n"
  return text

if __name__ == "__main__":
  from experiments.report import SPEC
  report_main(SPEC)
