"""Plots and summary.md of a differential-attention run, drawn from its results.jsonl (no recomputation).

``python -m experiments.diff_attention.report --workdir /tmp/diffattn_run`` redraws them. The paper's
reported figures (arXiv 2510.00517; docs/theory.md#differential-attention-figures) are printed beside
ours; they are targets to compare against, never used in a computation.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Optional

import numpy as np

from experiments.papers import differential_attention
from experiments.core.report import report_main, write_summary
from experiments.diff_attention.claims import main_lambda
from experiments.core.plotting import save, subplots
from experiments.core.rules_version import stamp
from experiments.core.workdir import write_derived

REQUIRED_FIELDS = ("kind", "model", "depth", "lambda_init", "attack", "eps", "layer")  # its KEY_FIELDS

PAPER_SINGLE_LAYER = differential_attention.SINGLE_LAYER  # λ_init -> (ASR, clean accuracy) (experiments.papers)
COLORS = {"vit": "tab:blue", "diffvit": "tab:red"}


def crossover_depth(depths, asr_vit, asr_diff) -> Optional[float]:
  """The first depth where DiffViT's ASR minus ViT's changes sign, by linear interpolation in log2(depth).

  Args:
    depths: increasing depths [k]; asr_vit, asr_diff: ASR at those depths [k].

  Returns:
    The interpolated depth, the measured depth itself when the difference is exactly 0 there (after a
    non-zero one), or None when the sign never changes in the measured range.
  """
  d = np.asarray(asr_diff, float) - np.asarray(asr_vit, float)
  depths = np.asarray(depths, float)
  for i in range(1, len(d)):
    if d[i - 1] == 0:
      continue
    if d[i] == 0 or np.sign(d[i]) != np.sign(d[i - 1]):
      if d[i] == 0:
        return float(depths[i])
      t = d[i - 1] / (d[i - 1] - d[i])
      lo, hi = np.log2(depths[i - 1]), np.log2(depths[i])
      return float(2 ** (lo + t * (hi - lo)))
  return None


def _by(records, **match):
  """Records whose fields equal ``match`` (a missing seed_index counts as 0: records before the seeds)."""
  return [r for r in records if all((r.get(k, 0) if k == "seed_index" else r.get(k)) == v for k, v in match.items())]


def _seed(r) -> int:
  return int(r.get("seed_index", 0))


def _first_seed(records):
  """The records of the first training seed (the plots draw one model per configuration)."""
  return [r for r in records if _seed(r) == 0]


def _label(r) -> str:
  return "ViT" if r["model"] == "vit" else f"DiffViT λ_init={r['lambda_init']}"


def _asr_series(records, model, lam, depth, attack):
  rs = sorted(_by(records, kind="attack", model=model, lambda_init=lam, depth=depth, attack=attack),
              key=lambda r: r["eps"])
  return np.array([r["eps_255"] if "eps_255" in r else r["eps"] for r in rs]), np.array([float(r["asr"]) for r in rs])


def _clean(records, model, lam, depth):
  rs = _by(records, kind="train", model=model, lambda_init=lam, depth=depth)
  return rs[0]["clean_accuracy"] if rs else float("nan")


def plot_asr_vs_eps(records, path) -> None:
  lam = main_lambda(records)
  depths = sorted({r["depth"] for r in records if r["kind"] == "attack"})
  fig, axes = subplots(len(depths), width=3.8)
  for ax, depth in zip(axes, depths):
    for model, l in (("vit", "-"), ("diffvit", lam)):
      for attack, ls in (("pgd", "-"), ("apgd", "--")):
        xs, ys = _asr_series(records, model, l, depth, attack)
        if xs.size:
          ax.plot(xs, ys, ls, marker="o", ms=3, color=COLORS[model],
                  label=f"{'ViT' if model == 'vit' else 'DiffViT'} {attack.upper()} "
                        f"(clean {_clean(records, model, l, depth):.2f})")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("ε (×1/255, L∞)")
    ax.set_ylabel("attack success rate (clean-correct)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"depth {depth}")
    ax.legend(fontsize=6)
  save(fig, path)


def plot_lambda_init(records, path) -> bool:
  rs = _by(records, kind="attack", model="diffvit", depth=1, attack="pgd")
  lams = sorted({r["lambda_init"] for r in rs if r["lambda_init"] != "depth"}, key=float)
  if len(lams) < 2:
    return False
  fig, axes = subplots(1, width=4.6)
  ax = axes[0]
  for e in sorted({r["eps_255"] for r in rs}):
    ys = [float(_by(rs, lambda_init=l, eps_255=e)[0]["asr"]) for l in lams]
    ax.plot([float(l) for l in lams], ys, marker="o", ms=3, label=f"ours, ε={e:g}/255")
  vit = _by(records, kind="attack", model="vit", depth=1, attack="pgd", eps_255=1.0)
  if vit:
    ax.axhline(float(vit[0]["asr"]), color=COLORS["vit"], ls=":", label="ours, ViT ε=1/255")
  ax.plot([float(l) for l in PAPER_SINGLE_LAYER], [v[0] for v in PAPER_SINGLE_LAYER.values()], "kx--",
          label="paper, ε=1/255")
  ax.set_xlabel("λ_init (single layer)")
  ax.set_ylabel("PGD attack success rate")
  ax.set_ylim(-0.02, 1.02)
  ax.legend(fontsize=6)
  save(fig, path)
  return True


def crossovers(records, eps_pair) -> dict:
  """{ε_255: (depths, asr_vit, asr_diff, crossover depth or None)} for PGD and the main λ_init."""
  lam = main_lambda(records)
  out = {}
  for e in eps_pair:
    vit = {r["depth"]: float(r["asr"]) for r in _by(records, kind="attack", model="vit", attack="pgd", eps_255=e)}
    diff = {r["depth"]: float(r["asr"])
            for r in _by(records, kind="attack", model="diffvit", lambda_init=lam, attack="pgd", eps_255=e)}
    depths = sorted(set(vit) & set(diff))
    if depths:
      a, b = [vit[d] for d in depths], [diff[d] for d in depths]
      out[e] = (depths, a, b, crossover_depth(depths, a, b))
  return out


def derive(crossover: dict) -> dict:
  """derived.json's contents: {"crossovers": one dict per ε_255 with the depths, both models' PGD ASR and
  the interpolated crossover depth (None: no sign change in the measured range)}, from ``crossovers``."""
  return {"crossovers": [dict(eps_255=float(e), depths=list(depths), asr_vit=list(a), asr_diffvit=list(b),
                              crossover_depth=cross) for e, (depths, a, b, cross) in crossover.items()]}


def plot_crossover(found: dict, path) -> dict:
  """Plots ``found`` (``crossovers``: {ε_255: (depths, asr_vit, asr_diff, crossover)}); returns it."""
  fig, axes = subplots(1, width=4.6)
  ax = axes[0]
  for e, ls in zip(found, ("-", "--")):
    depths, a, b, cross = found[e]
    ax.plot(depths, a, ls, marker="o", ms=3, color=COLORS["vit"], label=f"ViT ε={e:g}/255")
    ax.plot(depths, b, ls, marker="s", ms=3, color=COLORS["diffvit"], label=f"DiffViT ε={e:g}/255")
    if cross is not None:
      ax.axvline(cross, color="gray", ls=ls, lw=0.8, label=f"crossover ≈ {cross:.1f} (ε={e:g}/255)")
  ax.set_xscale("log", base=2)
  ax.set_xlabel("depth")
  ax.set_ylabel("PGD attack success rate")
  ax.set_ylim(-0.02, 1.02)
  ax.legend(fontsize=6)
  save(fig, path)
  return found


def plot_alignment(records, path) -> None:
  rs = sorted(_by(records, kind="alignment", lambda_init=main_lambda(records)), key=lambda r: (r["depth"], r["layer"]))
  fig, axes = subplots(3, width=4.0)
  depths = sorted({r["depth"] for r in rs})
  offsets = np.linspace(-0.25, 0.25, max(len(depths), 1))
  for off, depth in zip(offsets, depths):
    layer_rs = [r for r in rs if r["depth"] == depth]
    for r in layer_rs:
      cos = np.ravel(r["cos_theta"])
      axes[0].scatter(np.full(cos.size, r["layer"] + off), cos, s=6, alpha=0.6,
                      color=f"C{depths.index(depth)}", label=f"depth {depth}" if r["layer"] == 1 else None)
    axes[1].plot([r["layer"] for r in layer_rs], [r["negative_alignment_frequency"] for r in layer_rs],
                 marker="o", ms=3, color=f"C{depths.index(depth)}", label=f"depth {depth}")
  axes[0].axhline(0, color="k", lw=0.6)
  axes[0].set_xlabel("layer")
  axes[0].set_ylabel("cos θ(∇A₁, ∇A₂) per head and image")
  axes[0].legend(fontsize=6)
  axes[1].set_xlabel("layer")
  axes[1].set_ylabel("frequency of cos θ < 0")
  axes[1].set_ylim(-0.02, 1.02)
  axes[1].legend(fontsize=6)
  every = [r for r in records if r["kind"] == "alignment"]
  direct = np.concatenate([np.ravel(r["norm_da"]) for r in every]) if every else np.zeros(0)
  lemma = np.concatenate([np.ravel(r["norm_da_lemma1"]) for r in every]) if every else np.zeros(0)
  if direct.size:
    axes[2].plot(direct, lemma, ".", ms=3)
    lo, hi = direct.min(), direct.max()
    axes[2].plot([lo, hi], [lo, hi], "k--", lw=0.8, label="y = x")
    rel = np.max(np.abs(lemma - direct) / direct)
    axes[2].set_title(f"Lemma 1: max relative gap {rel:.1e}", fontsize=9)
    axes[2].legend(fontsize=6)
  axes[2].set_xlabel("‖∇A_DA‖_F computed directly")
  axes[2].set_ylabel("‖∇A₁‖·(1 + λ²ρ² − 2λρ cos θ)^½")
  for ax in axes[:2]:
    ax.xaxis.get_major_locator().set_params(integer=True)
  save(fig, path)


def plot_lipschitz(records, path) -> None:
  fig, axes = subplots(2, width=4.4)
  rs = [r for r in records if r["kind"] == "lipschitz"]
  names = sorted({(r["model"], r["depth"], r["lambda_init"]) for r in rs}, key=lambda t: (t[1], t[0], t[2]))
  for i, (model, depth, lam) in enumerate(names):
    logits = sorted(_by(rs, model=model, depth=depth, lambda_init=lam, layer=-1), key=lambda r: r["eps"])
    ls = "-" if model == "vit" else "--"
    label = ("ViT" if model == "vit" else f"DiffViT λ={lam}") + f" d{depth}"
    if logits:
      axes[0].plot([r["eps_255"] for r in logits], [r["mean"] for r in logits], ls, marker="o", ms=3,
                   color=f"C{i}", label=label)
    layers = sorted([r for r in _by(rs, model=model, depth=depth, lambda_init=lam) if r["layer"] >= 1],
                    key=lambda r: r["layer"])
    if layers:
      axes[1].plot([r["layer"] for r in layers], [r["mean"] for r in layers], ls, marker="o", ms=3,
                   color=f"C{i}", label=label)
  axes[0].set_xscale("log", base=2)
  axes[0].set_yscale("log")
  axes[0].set_xlabel("ε (×1/255)")
  axes[0].set_ylabel("local Lipschitz L̂ of the logits (L1/L∞)")
  axes[0].legend(fontsize=5)
  axes[1].set_yscale("log")
  axes[1].xaxis.get_major_locator().set_params(integer=True)
  axes[1].set_xlabel("layer (tokens after block)")
  axes[1].set_ylabel("local Lipschitz L̂ of the tokens")
  axes[1].legend(fontsize=5)
  save(fig, path)


def plot_cw(records, path) -> bool:
  rs = _by(records, kind="attack", attack="cw_l2")
  if not rs:
    return False
  fig, axes = subplots(1, width=4.4)
  for model, depth, lam in sorted({(r["model"], r["depth"], r["lambda_init"]) for r in rs}):
    pts = sorted(_by(rs, model=model, depth=depth, lambda_init=lam), key=lambda r: r["eps"])
    axes[0].plot([r["eps"] for r in pts], [float(r["asr"]) for r in pts], marker="o", ms=3,
                 color=COLORS[model], ls="-" if depth == 1 else "--",
                 label=("ViT" if model == "vit" else f"DiffViT λ={lam}") + f" d{depth}")
  axes[0].set_xscale("log")
  axes[0].set_xlabel("L2 budget ε₂ (pixel scale)")
  axes[0].set_ylabel("CW-L2 success rate")
  axes[0].set_ylim(-0.02, 1.02)
  axes[0].legend(fontsize=6)
  save(fig, path)
  return True


def sanity_checks(records) -> list[str]:
  """Violations of APGD ≥ PGD and of ASR non-decreasing in ε (empty when both hold)."""
  out = []
  groups = defaultdict(dict)
  for r in records:
    if r["kind"] == "attack" and r["attack"] in ("pgd", "apgd"):
      groups[(r["name"], r["attack"])][r["eps"]] = float(r["asr"])
  for (name, attack), by_eps in sorted(groups.items()):
    eps = sorted(by_eps)
    for a, b in zip(eps, eps[1:]):
      if by_eps[b] < by_eps[a]:
        out.append(f"{name} {attack}: ASR falls from {by_eps[a]:.3f} at ε={a * 255:g}/255 to {by_eps[b]:.3f} "
                   f"at ε={b * 255:g}/255")
    if attack == "apgd" and (name, "pgd") in groups:
      for e, v in by_eps.items():
        p = groups[(name, "pgd")].get(e)
        if p is not None and v < p:
          out.append(f"{name}: APGD ASR {v:.3f} < PGD ASR {p:.3f} at ε={e * 255:g}/255")
  return out


def _scale_note(config: Optional[dict], train: list) -> str:
  if config and config.get("target_accuracy"):
    return (f" Models must reach {config['target_accuracy']:g} clean test accuracy to enter the claims; "
            "a model below it is flagged in the table and left out.")
  if train and max(float(r["clean_accuracy"]) for r in train) < 0.8:
    return (" These models are far below the paper's accuracy: a smoke run, which tests the code path, not the "
            "paper's claims (run --standard for that).")
  return ""


def claims_section(records, config: Optional[dict] = None) -> list[str]:
  """The claim rows of ``experiments.diff_attention.claims`` as a table: verdict, estimate, 95 % interval,
  seeds and what the row measured."""
  from experiments.diff_attention import claims as diff_attention_claims
  from experiments.core.rows import Source
  rows = diff_attention_claims.CLAIMS.judged(
      diff_attention_claims.rows(Source("diff_attention", "", config or {}, list(records))))
  lines = ["## The paper's claims as rows (experiments.diff_attention.claims)", "",
           "Intervals: 95 %, over training seeds (each seed's images averaged first; fewer than 10 seeds is "
           "inconclusive by design); verdicts by the rules of experiments.core.verdicts, headed by each claim's "
           "declared kind (docs/claims.md#claim-kinds). 'Flips if' says what would turn the verdict.", "",
           "| claim | kind | verdict | estimate [95 % interval] | n | setting | flips if |",
           "|---|---|---|---|---|---|---|"]
  for r in rows:
    value = ("–" if r["estimate"] is None else f"{r['estimate']:.3g} [{r['low']:.3g}, {r['high']:.3g}]")
    verdict = r["verdict"] + (f" ({r['direction']}, {r['magnitude']})" if r.get("magnitude") else "")
    detail = r["setting"] if r["status"] == "measured" else r["reason"]
    variant = f" ({r['variant']})" if r.get("variant") else ""
    lines.append(f"| {r['claim']}{variant} | {r['claim_kind']} | {verdict} | {value} | {r['n'] or '–'} {r.get('unit') or ''} | "
                 f"{detail} | {r.get('note') or '–'} |")
  return lines + [""]


def _f(v, digits=3):
  if v is None:
    return "–"
  v = float(v)
  return "nan" if not np.isfinite(v) else f"{v:.{digits}f}"


def summary_markdown(records, config: Optional[dict] = None, crossover: Optional[dict] = None) -> str:
  """The summary of a differential-attention workdir, section by section, then its claim rows."""
  train = sorted([r for r in records if r["kind"] == "train"],
                 key=lambda r: (r["depth"], r["model"], r["lambda_init"], _seed(r)))
  lines = ["# Differential attention under attack: DiffViT vs ViT (arXiv 2510.00517)", ""]
  lines += _data_lines(train, config)
  lines += _model_table(train)
  lines += _asr_section(records)
  lines += _cw_section(records)
  lines += _crossover_section(crossover)
  lines += _alignment_section(records)
  lines += _lipschitz_section(records)
  lines += claims_section(records, config)
  lines += ["", "Not reproduced here: pretrained CLIP vs DiffCLIP (the published weights cannot be fetched "
            "offline; no loader is provided).", "",
            "Plots: asr_vs_eps.png, asr_vs_lambda_init.png, depth_crossover.png, alignment.png, lipschitz.png"
            + (", cw_l2.png" if any(r["kind"] == "attack" and r["attack"] == "cw_l2" for r in records) else ""), ""]
  return "\n".join(lines)


def _data_lines(train, config: Optional[dict]) -> list[str]:
  """The data and model settings the run used, from its train records and config."""
  lines = []
  if train:
    r0 = train[0]
    source = (config or {}).get("data", {}).get("source")
    origin = {"embedded": " (the embedded subset shipped with the package)", "dir": " (the full data files)",
              "tfds": " (TensorFlow Datasets)"}.get(source, "")
    partial = (" — the data directory's CIFAR-10 test split holds only the first 1,000 official test images"
               if r0["dataset"] == "cifar10" and source == "dir" and r0["n_test"] <= 1000 else "")
    lines += [f"Data: {r0['dataset']}, {r0['n_train']} train / {r0['n_test']} test images{origin}{partial}"
              + (f"; {config['train']['epochs']} epochs, width {config['dim']}, {config['num_heads']} standard heads vs "
                 f"{config['num_heads'] // 2} differential heads, patch {config['patch_size']}" if config else "")
              + ". ASR counts only clean-correct images (AutoAttack convention); n = that count. Paper figures "
                "(docs/theory.md#differential-attention-figures) beside ours (the paper's are CIFAR-10 models at "
                "about 0.86 clean accuracy)." + _scale_note(config, train), ""]
  return lines


def _model_table(train) -> list[str]:
  """One row per trained model: parameters, epochs, accuracy and whether it meets the accuracy target."""
  lines = []
  lines += ["## Models", "", "| model | depth | λ_init | seed | parameters | epochs | clean acc. | meets target | "
            "train acc. (last epoch) | train s |", "|---|---|---|---|---|---|---|---|---|---|"]
  for r in train:
    target = r.get("target_accuracy", 0.0)
    meets = "–" if not target else ("yes" if r.get("meets_target") else f"**no** (< {target:g}; left out of the claims)")
    lines.append(f"| {r['model']} | {r['depth']} | {r['lambda_init']} | {_seed(r)} | {r['parameters']} | "
                 f"{r.get('epochs', '–')} | {_f(r['clean_accuracy'])} | {meets} | "
                 f"{_f(r.get('train_accuracy_last_epoch'))} | {r.get('train_seconds', 0):.0f} |")
  misses = defaultdict(int)
  for r in train:
    if r.get("meets_target") is False:
      misses[(r["model"], r["depth"], r["lambda_init"])] += 1
  over = [k for k, v in misses.items() if v > 1]
  if over:
    lines += ["", "**More than one seed of a configuration misses the accuracy target** ("
              + ", ".join(f"{m} d{d} λ {l}" for m, d, l in over) + "): the grid does not meet its own standard."]
  return lines


def _asr_section(records) -> list[str]:
  """The PGD / APGD attack success rates against ε, with the sanity checks."""
  lines = []
  attack_rs = [r for r in records if r["kind"] == "attack" and r["attack"] in ("pgd", "apgd")]
  eps_list = sorted({r["eps_255"] for r in attack_rs})
  if attack_rs:
    lines += ["", "## Attack success rate vs ε (L∞, pixel scale /255)", "",
              "Clean accuracy here is on the attacked images; n = clean-correct images attacked.", "",
              "| model | depth | λ_init | seed | clean acc. | n | attack | " + " | ".join(f"ε={e:g}/255" for e in eps_list)
              + " | paper, CIFAR-10 (ε=1/255, depth 1) |", "|---|---|---|---|---|---|---|" + "---|" * len(eps_list) + "---|"]
    names = sorted({(r["depth"], r["model"], r["lambda_init"], _seed(r)) for r in attack_rs})
    for depth, model, l, seed in names:
      for attack in ("pgd", "apgd"):
        rs = {r["eps_255"]: r for r in _by(attack_rs, depth=depth, model=model, lambda_init=l, attack=attack,
                                           seed_index=seed)}
        if not rs:
          continue
        any_r = next(iter(rs.values()))
        paper = ""
        if attack == "pgd" and depth == 1 and model == "diffvit" and l in PAPER_SINGLE_LAYER:
          paper = f"{PAPER_SINGLE_LAYER[l][0]:.4f} (clean {PAPER_SINGLE_LAYER[l][1]:.4f})"
        lines.append(f"| {model} | {depth} | {l} | {seed} | {_f(any_r['clean_accuracy'])} | {any_r['n_counted']} | {attack} | "
                     + " | ".join(_f(rs[e]["asr"]) if e in rs else "–" for e in eps_list) + f" | {paper} |")
    bad = sanity_checks(records)
    lines += ["", "Sanity (APGD ≥ PGD; ASR non-decreasing in ε): "
              + ("both hold for every model." if not bad else "violations:"), ""]
    lines += [f"- {b}" for b in bad]
    zero = sum(int(r.get("n_zero_grad", 0)) for r in attack_rs)
    lines += ["", f"Zero input gradients at the attack start: {zero} image-attacks in total.", ""]
  return lines


def _cw_section(records) -> list[str]:
  """CW-L2 attack success rates on an L2 budget grid and the median perturbation found."""
  lines = []
  cw = [r for r in records if r["kind"] == "attack" and r["attack"] == "cw_l2"]
  if cw:
    grid = sorted({r["eps"] for r in cw})
    lines += ["## CW-L2 on an L2 budget grid", "",
              "| model | depth | λ_init | seed | n | " + " | ".join(f"‖δ‖₂ ≤ {e:g}" for e in grid) + " | median ‖δ‖₂ found |",
              "|---|---|---|---|---|" + "---|" * len(grid) + "---|"]
    for depth, model, l, seed in sorted({(r["depth"], r["model"], r["lambda_init"], _seed(r)) for r in cw}):
      rs = {r["eps"]: r for r in _by(cw, depth=depth, model=model, lambda_init=l, seed_index=seed)}
      any_r = next(iter(rs.values()))
      lines.append(f"| {model} | {depth} | {l} | {seed} | {any_r['n_counted']} | " + " | ".join(_f(rs[e]["asr"]) for e in grid)
                   + f" | {_f(any_r.get('median_l2_found'))} |")
    lines.append("")
  return lines


def _crossover_section(crossover: Optional[dict]) -> list[str]:
  """The depth crossover at each ε of the crossover pair."""
  lines = []
  if crossover:
    lines += ["## Depth crossover (PGD, main λ_init)", ""]
    for e, (depths, a, b, cross) in crossover.items():
      pairs = ", ".join(f"d{d}: ViT {x:.3f} / DiffViT {y:.3f}" for d, x, y in zip(depths, a, b))
      lines.append(f"- ε = {e:g}/255: {pairs}; crossover depth: "
                   + (f"≈ {cross:.2f}" if cross is not None else "none in the measured range"))
    lines += ["- paper: at ε = 1/255 DiffViT falls below ViT by depth 8; at 4/255 both ≈ 100 %.", ""]
  return lines


def _alignment_section(records) -> list[str]:
  """Gradient alignment, Lemma 1 and Theorem 3 per DiffViT and layer."""
  lines = []
  align = sorted([r for r in records if r["kind"] == "alignment"],
                 key=lambda r: (r["lambda_init"], r["depth"], _seed(r), r["layer"]))
  if align:
    lines += ["## Gradient alignment, Lemma 1, Theorem 3", "",
              "Per DiffViT and layer, over images × differential heads: cos θ between the full input Jacobians of "
              "A₁ and A₂ (λ constant, before RMSNorm); ρ = ‖∇A₂‖/‖∇A₁‖; γ = ‖∇A₁‖/‖∇A_std‖ against all heads of the "
              "matched ViT layer (‖∇A_std‖: their root-mean-square; γ's spread over the single heads in the γ range "
              "column where recorded). Lemma 1: max relative gap between ‖∇A_DA‖ computed directly and from the lemma. "
              "Theorem 3: fraction of (image, head) where the condition predicts DA more sensitive. 'Actual': "
              "fraction of images where DiffViT's local Lipschitz estimate of the logits (ε = 1/255) exceeds the "
              "ViT's; 'agreement': fraction of (image, head) where the per-head prediction equals it. Theorem 3 "
              "vs map norms: agreement of the condition with ‖∇A_DA‖ > ‖∇A_std‖ (an identity given Lemma 1: "
              "1.0 expected).", "",
              "| depth | λ_init | seed | layer | λ | mean cos θ | mean abs(cos θ) | P(cos θ < 0) | median ρ | median γ | "
              "γ range (medians) | P(λρ < 0) | Lemma 1 max rel. err | Thm 3 predicts DA more sens. | actual DiffViT "
              "more sens. | agreement | constant-guess agreement | Thm 3 vs map norms |", "|" + "---|" * 18]
    for r in align:
      p_actual = r["diffvit_more_sensitive_frequency"]
      lines.append(f"| {r['depth']} | {r['lambda_init']} | {_seed(r)} | {r['layer']} | {r['lam']:.3f} | {r['cos_theta_mean']:.3f} | "
                   f"{np.mean(np.abs(r['cos_theta'])):.3f} | "
                   f"{r['negative_alignment_frequency']:.2f} | {r['rho_median']:.3f} | {r['gamma_median']:.3f} | "
                   + (f"{r['gamma_min_median']:.3f}–{r['gamma_max_median']:.3f}" if np.isfinite(
                       r.get("gamma_min_median", np.nan)) else "– (head 2h pairing)") + " | "
                   f"{r['lambda_rho_negative_frequency']:.2f} | {r['lemma1_max_relative_error']:.1e} | "
                   f"{r['theorem3_predicted_frequency']:.2f} | {p_actual:.2f} | "
                   f"{r['theorem3_agreement']:.2f} | {max(p_actual, 1 - p_actual):.2f} | "
                   f"{r['theorem3_matches_map_norms']:.2f} |")
    lines.append("")
  return lines


def _lipschitz_section(records) -> list[str]:
  """Local Lipschitz estimates of the logits at each ε and of every layer's tokens."""
  lines = []
  lip = [r for r in records if r["kind"] == "lipschitz"]
  if lip:
    eps_l = sorted({r["eps_255"] for r in lip if r["layer"] == -1})
    lines += ["## Local Lipschitz estimates (Yang et al. 2020; L1 of the logits / L∞ of the input)", "",
              "| model | depth | λ_init | seed | " + " | ".join(f"ε={e:g}/255" for e in eps_l) + " | per layer (ε=1/255) |",
              "|---|---|---|---|" + "---|" * len(eps_l) + "---|"]
    for depth, model, l, seed in sorted({(r["depth"], r["model"], r["lambda_init"], _seed(r)) for r in lip}):
      rs = _by(lip, depth=depth, model=model, lambda_init=l, seed_index=seed)
      logits = {r["eps_255"]: r for r in rs if r["layer"] == -1}
      layers = sorted([r for r in rs if r["layer"] >= 1], key=lambda r: r["layer"])
      lines.append(f"| {model} | {depth} | {l} | {seed} | " + " | ".join(_f(logits[e]["mean"], 2) if e in logits else "–"
                                                              for e in eps_l)
                   + " | " + ", ".join(f"{r['mean']:.1f}" for r in layers) + " |")
    lines.append("")
  return lines


def write_report(workdir) -> str:
  """Draws the plots and writes derived.json (the depth crossovers) and summary.md into ``workdir`` from
  its records; returns the summary text.

  Raises:
    ValueError: no records, or records of another experiment (``experiments.core.report.experiment_records``).
  """
  return write_summary(workdir, "diff_attention", REQUIRED_FIELDS, _render)


def _render(records: list[dict], workdir: Path) -> str:
  """Draws the plots of ``records`` into ``workdir``; returns the summary markdown."""
  config_path = workdir / "config.json"
  config = json.loads(config_path.read_text()) if config_path.exists() else None
  eps_pair = tuple(config["crossover_eps_255"]) if config and "crossover_eps_255" in config else (1.0, 4.0)
  first = _first_seed(records)  # plots and the crossover table: one model per configuration (seed 0)
  if any(r["kind"] == "attack" for r in records):
    plot_asr_vs_eps(first, workdir / "asr_vs_eps.png")
    plot_lambda_init(first, workdir / "asr_vs_lambda_init.png")
  derived = derive(crossovers(first, eps_pair))
  write_derived(workdir, derived)
  cross = {c["eps_255"]: (c["depths"], c["asr_vit"], c["asr_diffvit"], c["crossover_depth"])
           for c in derived["crossovers"]}
  plot_crossover(cross, workdir / "depth_crossover.png")
  if any(r["kind"] == "alignment" for r in records):
    plot_alignment(first, workdir / "alignment.png")
  if any(r["kind"] == "lipschitz" for r in records):
    plot_lipschitz(first, workdir / "lipschitz.png")
  plot_cw(first, workdir / "cw_l2.png")
  return stamp(summary_markdown(records, config, cross), "differential_attention")

if __name__ == "__main__":
  from experiments.diff_attention import SPEC
  report_main(SPEC)
