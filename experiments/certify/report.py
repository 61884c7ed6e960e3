"""Plots and summary.md of a certification run, drawn from its results.jsonl (no recomputation).

The headline everywhere is the rigorous certificate of the α selected on the validation split (or of the
only α); the Krylov-estimate certificate stands beside it, labelled ``KRYLOV_LABEL``. Every α's rigorous
certified / PGD-L2 / clean triple and the clean − PGD gap at each ε are shown, so an ε at which the attack
breaks almost nothing (a near-trivial certificate) is visible.

``python -m experiments.certify.report --workdir /tmp/certify_run`` redraws them.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from experiments.papers import lofast
from experiments.core import tolerance
from experiments.core.report import report_main, write_summary
from experiments.core.plotting import finite, save, subplots
from experiments.core.rules_version import stamp

SELECTION_RULE = ("the α with the highest rigorous certified accuracy on the validation split (held out of the "
                  "training images) at that ε; ties: the higher validation clean accuracy, then the smaller α")

PAPER_CERTIFIED = lofast.CERTIFIED  # the paper's certified accuracies in % (experiments.papers)
PAPER_MARKERS = {"LoFAST (paper)": "*", "α,β-CROWN (paper)": "X", "CROWN+LoFAST (paper)": "P",
                 "CROWN (paper)": "D"}
COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")

REQUIRED_FIELDS = ("dataset", "attention_bound", "kind", "eps", "layer")  # experiments.certify's keys
KRYLOV_LABEL = "Krylov estimate (not rigorous: approaches the top singular value from below)"
NEAR_TRIVIAL_SHARE = 0.05  # PGD breaks fewer than 5 % of the correctly classified images: the ε is near-trivial


def _models(records, dataset):
  return sorted({r["attention_bound"] for r in records if r["dataset"] == dataset})


def _get(records, **match):
  return [r for r in records if all(r.get(k) == v for k, v in match.items())]


def selected_alpha(records, dataset: str, eps: float):
  """(α, how) of the headline at (data set, ε): the α selected on the validation split ('validation'); the
  only α of a one-α run ('only α'); or (None, 'not selected') when several α were run without a validation
  selection (validation_fraction = 0, or records written before the selection existed): then no α is the
  headline, since choosing the best on the test images would be selection on the test set."""
  sel = [r for r in records if r.get("kind") == "selection" and r["dataset"] == dataset
         and np.isclose(r["eps"], eps)]
  if sel:
    return float(sel[0]["attention_bound"]), "validation"
  alphas = _models([r for r in records if r.get("kind") == "certify"], dataset)
  if len(alphas) == 1:
    return float(alphas[0]), "only α"
  return None, "not selected"


def _selected_everywhere(records, dataset):
  """The α selected at every ε of the data set (the one the plot marks), or None."""
  eps_all = sorted({r["eps"] for r in _get(records, dataset=dataset, kind="certify")})
  picks = {selected_alpha(records, dataset, e)[0] for e in eps_all}
  return picks.pop() if len(picks) == 1 else None


def plot_certified_accuracy(records, path) -> None:
  """One panel per data set: rigorous certified accuracy vs ε (solid curve from the rigorous certified radii,
  markers at the grid), the Krylov-estimate certificate beside it (dotted, not rigorous), PGD-L2 accuracy
  (upper bound), clean accuracy, and the paper's CIFAR-10 points."""
  datasets = sorted({r["dataset"] for r in records})
  fig, axes = subplots(len(datasets), width=5.0, height=3.8)
  for ax, dataset in zip(axes, datasets):
    eps_all = sorted({r["eps"] for r in _get(records, dataset=dataset, kind="certify")})
    grid = np.linspace(0.0, 1.1 * max(eps_all, default=0.1), 200)
    chosen = _selected_everywhere(records, dataset)
    for color, alpha in zip(COLORS, _models(records, dataset)):
      mark = " (selected on validation)" if chosen == alpha and any(
          r.get("kind") == "selection" for r in records) else ""
      radius = _get(records, dataset=dataset, attention_bound=alpha, kind="radius")
      if radius:
        radii = np.array([finite(v) for v in radius[0]["radii"]])
        rigorous = np.array([finite(v) for v in radius[0]["radii_rigorous"]])
        ax.plot(grid, [100 * np.mean(rigorous >= e) if e > 0 else 100 * np.mean(rigorous > 0) for e in grid],
                color=color, label=f"certified (rigorous), ‖A‖≤{alpha:g}{mark}")
        ax.plot(grid, [100 * np.mean(radii >= e) if e > 0 else 100 * np.mean(radii > 0) for e in grid],
                color=color, ls=":", lw=1, label=f"Krylov estimate (not rigorous), ‖A‖≤{alpha:g}")
      cert = sorted(_get(records, dataset=dataset, attention_bound=alpha, kind="certify"), key=lambda r: r["eps"])
      if cert:
        eps = [r["eps"] for r in cert]
        ax.plot(eps, [100 * r["certified_rigorous"] for r in cert], "o", color=color, ms=4)
        ax.plot(eps, [100 * r["pgd_accuracy"] for r in cert], "^--", color=color, ms=4, lw=0.8,
                label=f"PGD-L2 (upper bound), ‖A‖≤{alpha:g}")
        ax.axhline(100 * cert[0]["clean_accuracy"], color=color, lw=0.6, ls="-.")
    if dataset == "cifar10":
      for name, points in PAPER_CERTIFIED.items():
        ax.plot(list(points), list(points.values()), PAPER_MARKERS[name], color="k", ms=7, mfc="none", label=name)
    ax.set_xlabel("ε (ℓ2, pixels in [0, 1])")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"{dataset}: certified, rigorous (solid, o); PGD-L2 (dashed, ^); clean (dash-dot)\n"
                 f"dotted: {KRYLOV_LABEL}", fontsize=7)
    ax.set_ylim(0, None)
    ax.legend(fontsize=5)
  save(fig, path)


def plot_learning_curves(records, path) -> bool:
  """One panel per data set: training accuracy (dashed, the mean over each epoch's minibatches) and
  validation accuracy (solid, after the epoch) of every α's model against the epoch, from the train records'
  histories; the legend says where and why each model stopped (plateau or cap). Returns False (no file)
  when no history holds validation accuracies (runs without a validation split, or older records)."""
  train = [r for r in records if r.get("kind") == "train" and any(
      h.get("validation_accuracy") is not None for h in r.get("history", []))]
  if not train:
    return False
  datasets = sorted({r["dataset"] for r in train})
  fig, axes = subplots(len(datasets), width=5.0, height=3.4)
  for ax, dataset in zip(axes, datasets):
    for color, r in zip(COLORS, sorted((r for r in train if r["dataset"] == dataset),
                                        key=lambda r: r["attention_bound"])):
      hist = r["history"]
      epochs = [h["epoch"] for h in hist]
      ax.plot(epochs, [100 * h["train_accuracy"] for h in hist], "--", color=color, lw=0.8)
      ax.plot(epochs, [100 * finite(h["validation_accuracy"]) for h in hist], "o-", color=color, ms=3,
              label=f"α = {r['attention_bound']:g} ({r.get('stop_reason', 'cap')} at epoch {epochs[-1]})")
    ax.set_xlabel("epoch")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"{dataset}: validation (solid) and training (dashed) accuracy", fontsize=8)
    ax.legend(fontsize=6)
  save(fig, path)
  return True


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


def _cp_text(rate, n) -> str:
  """'29.1 [25.2, 33.3]': a rate over n images with its 95 % Clopper–Pearson interval, in %."""
  from experiments.core.verdicts import clopper_pearson
  k = int(round(finite(rate) * n))
  ci = clopper_pearson(k, int(n))
  return f"{100 * ci.estimate:.1f} [{100 * ci.low:.1f}, {100 * ci.high:.1f}]"


def attack_gap(r) -> tuple[float, float]:
  """(clean − PGD accuracy in points, the share of correctly classified images PGD breaks) of a certify
  record; the share is NaN when nothing is classified correctly."""
  clean, pgd = finite(r["clean_accuracy"]), finite(r["pgd_accuracy"])
  gap = clean - pgd
  gap = 0.0 if abs(gap) < 1e-9 else gap   # 1 − mean(broken) vs mean(correct): rounding, not a negative gap
  return 100 * gap, gap / clean if clean > 0 else float("nan")


def _trivial_mark(r) -> str:
  """" ⚠" where PGD breaks fewer than ``NEAR_TRIVIAL_SHARE`` of the correctly classified images. The share
  (clean − PGD)/clean comes from two count ratios, 1 − mean and a subtraction: a few ulps, 16 at most; a share
  of exactly 5 % (e.g. 1 of 20) is not fewer than 5 %, whatever its last bits (docs/decision_boundaries.md)."""
  share = attack_gap(r)[1]
  return " ⚠" if np.isfinite(share) and tolerance.compare(share, NEAR_TRIVIAL_SHARE, tolerance.tolerance(
      share, ops=16)) < 0 else ""


def _epochs_text(train) -> str:
  """"12 epochs" or "10–14 epochs", with "(until the validation accuracy plateaued; cap 20)" when the plateau
  rule stopped a model or any model trained fewer epochs than the cap."""
  counts = sorted({len(r.get("history", [])) or int(r["epochs"]) for r in train})
  caps = sorted({int(r.get("epochs_cap", r["epochs"])) for r in train})
  text = f"{counts[0]} epochs" if len(counts) == 1 else f"{counts[0]}–{counts[-1]} epochs"
  if any(r.get("stop_reason") == "plateau" for r in train) or counts[-1] < caps[-1]:
    text += f" (until the validation accuracy plateaued; cap {caps[-1]})"
  return text


def _data_sentence(train) -> str:
  r0 = train[0]
  source = r0.get("train_source")
  if source == "dir":
    where = "the full training files of the data directory"
  elif source in ("embedded", None):
    where = "the embedded subset only (the paper trains on the full training set)"
  else:
    where = f"source {source!r}"
  partial = any(r.get("test_partial") for r in train)
  test = (" The data directory's CIFAR-10 test split (npz copy, docs/data.md) holds only the first 1,000 "
          "official test images, so the test images are drawn from those." if partial else "")
  return f"Training images: {where}.{test}"


def _headline_lines(records, cert) -> list[str]:
  lines = ["", "## Headline: rigorous certified accuracy (%) of the α selected on the validation split", "",
           f"certified (rigorous): closed-form key-side norms and no Krylov estimate anywhere, with its 95 % "
           f"Clopper–Pearson interval over the test images. {KRYLOV_LABEL}: the same certificate with Lanczos "
           "estimates of the key-side and layer-Jacobian norms, not a proof. clean − PGD: how much the attack "
           f"takes; ⚠ marks an ε at which PGD breaks fewer than {100 * NEAR_TRIVIAL_SHARE:.0f} % of the correctly "
           "classified images, where a certificate near clean accuracy says little. Selection rule: "
           f"{SELECTION_RULE}.", "",
           "| data set | ε | α | how chosen | **certified (rigorous)** | "
           f"{KRYLOV_LABEL} | PGD-L2 | clean | clean − PGD (pts) | paper (LoFAST) |", "|---" * 10 + "|"]
  unselected = False
  for dataset in sorted({r["dataset"] for r in cert}):
    for eps in sorted({r["eps"] for r in cert if r["dataset"] == dataset}):
      alpha, how = selected_alpha(records, dataset, eps)
      paper = PAPER_CERTIFIED["LoFAST (paper)"].get(eps) if dataset == "cifar10" else None
      paper_text = "–" if paper is None else f"{paper:.1f}"
      if alpha is None:
        lines.append(f"| {dataset} | {eps:g} | – | none † | | | | | | {paper_text} |")
        unselected = True
        continue
      r = next(c for c in cert if c["dataset"] == dataset and c["eps"] == eps and c["attention_bound"] == alpha)
      lines.append(f"| {dataset} | {eps:g} | {alpha:g} | {how} | **{_cp_text(r['certified_rigorous'], r['n_test'])}** | "
                   f"{_pct(r['certified_accuracy'])} | {_pct(r['pgd_accuracy'])} | {_pct(r['clean_accuracy'])} | "
                   f"{attack_gap(r)[0]:.1f}{_trivial_mark(r)} | {paper_text} |")
  if unselected:
    lines += ["", "† No α is the headline: several α were run without a validation split (validation_fraction = 0, "
              "or records written before α was selected on one), and picking the best α on the test images would "
              "be selection on the test set. Every α is in the tables below."]
  return lines


def _selection_lines(records) -> list[str]:
  sel = sorted([r for r in records if r.get("kind") == "selection"], key=lambda r: (r["dataset"], r["eps"]))
  if not sel:
    return []
  lines = ["", "## α selection on the validation split", "",
           f"Rule: {SELECTION_RULE}. The validation split is a class-stratified "
           f"{100 * sel[0]['validation_fraction']:g} % of the training images ({sel[0]['n_validation']} images), "
           "held out before training: no model trains on it and the selection never reads a test image.", "",
           "| data set | ε | α | val. clean | val. certified (rigorous) | val. Krylov estimate (not rigorous) | "
           "selected |", "|---" * 7 + "|"]
  for r in sel:
    for c in r["candidates"]:
      chosen = "**✓**" if c["attention_bound"] == r["attention_bound"] else ""
      lines.append(f"| {r['dataset']} | {r['eps']:g} | {c['attention_bound']:g} | "
                   f"{_pct(c['validation_clean_accuracy'])} | {_pct(c['validation_certified_rigorous'])} | "
                   f"{_pct(c['validation_certified_krylov'])} | {chosen} |")
  return lines


def _triple_lines(records, cert) -> list[str]:
  lines = ["", "## Certified (rigorous) / PGD-L2 / clean accuracy (%) per α", "",
           "Each cell: rigorous certified / PGD-L2 / clean on the test images; ✓ = the α selected on the "
           f"validation split at that ε; ⚠ = PGD breaks fewer than {100 * NEAR_TRIVIAL_SHARE:.0f} % of the correctly "
           "classified images (near-trivial ε).", ""]
  for dataset in sorted({r["dataset"] for r in cert}):
    alphas = _models(cert, dataset)
    lines += [f"| {dataset}: ε | " + " | ".join(f"α = {a:g}" for a in alphas) + " |", "|---" * (len(alphas) + 1) + "|"]
    for eps in sorted({r["eps"] for r in cert if r["dataset"] == dataset}):
      chosen, how = selected_alpha(records, dataset, eps)
      cells = []
      for a in alphas:
        r = [c for c in cert if c["dataset"] == dataset and c["eps"] == eps and c["attention_bound"] == a]
        if not r:
          cells.append("–")
          continue
        r = r[0]
        tick = " ✓" if (a == chosen and how == "validation") else ""
        cells.append(f"{_pct(r['certified_rigorous'])} / {_pct(r['pgd_accuracy'])} / {_pct(r['clean_accuracy'])}"
                     f"{_trivial_mark(r)}{tick}")
      lines.append(f"| {eps:g} | " + " | ".join(cells) + " |")
    lines.append("")
  return lines[:-1]


def summary_markdown(records) -> str:
  """The tables: the headline (rigorous certificate of the α selected on the validation split), the
  selection, certified / PGD / clean per α, accuracies by ε, bound comparisons, tightness, beside the
  paper's numbers."""
  lines = ["# Certified ℓ2 robustness of Lipschitz ViTs with local attention-sensitivity bounds", ""]
  train = [r for r in records if r["kind"] == "train"]
  cert = sorted([r for r in records if r["kind"] == "certify"],
                key=lambda r: (r["dataset"], r["attention_bound"], r["eps"]))
  lines += _models_lines(train)
  if cert:
    lines += _headline_lines(records, cert)
  lines += _selection_lines(records)
  lines += _training_section(train)
  if cert:
    lines += _triple_lines(records, cert)
    lines += _accuracy_section(cert)
    lines += _bound_comparison_section(records, cert)
  lines += _tightness_section(records)
  lines += ["", "Notes: the rigorous certificate is the headline: Lanczos (like power iteration) approaches a top "
            "singular value from below, so a certificate built on its estimate can be too optimistic; the "
            f"{KRYLOV_LABEL} column shows by how much the estimate would move the figures. The issue's "
            "min(naive, fine) certificate lies between the `fine` and Krylov-estimate columns (per head and "
            "layer the minimum is taken; the naive bound alone certifies almost nothing). The tightness table "
            "is the check that caught 50-step plain power iteration being ~0.7 % low on two MNIST layers (an "
            "attack exceeded the joint bound); Lanczos on the same budget is now the default.",
            "", "Plots: certified_accuracy.png (solid: rigorous; dotted: Krylov estimate), tightness.png, "
            "learning_curves.png (when the run recorded validation accuracies)", ""]
  return re.sub(r"\n{3,}", "\n\n", "\n".join(lines))


def _models_lines(train) -> list[str]:
  """What was trained and certified, and which certificate is the headline."""
  lines = []
  if train:
    r0 = train[0]
    n_val = r0.get("n_validation", 0)
    val = (f" ({n_val} more held out as the validation split for choosing α)" if n_val else "")
    depth = r0.get("depth")
    blocks = f"{depth} attention block{'s' if depth != 1 else ''}" if depth else "attention blocks"
    lines += [f"Models: CertifiedViT ({blocks} with SLL MLPs, bounded normalisation, spectrally "
              f"normalised embedding; ‖W_V^h‖₂ ≤ 1/H; ‖A_h‖₂ ≤ α) trained for {_epochs_text(train)} on "
              f"n_train = {r0['n_train']} images{val}; certified on n_test = {r0['n_test']} test images. "
              f"{_data_sentence(train)} Certified = correctly classified and provably constant within the ℓ2 ball "
              "(per-pair last-layer margin certificate). The headline certificate is rigorous (closed-form "
              "key-side norms, layer bound Σ_h min(naive, fine)); the Krylov estimate beside it also uses the "
              "joint bound and Lanczos estimates of top singular values, which approach them from below, so it "
              "is not a proof. Source: Havens et al., ICML 2024 (docs/theory.md#lofast-figures).", ""]
  return lines


def _training_section(train) -> list[str]:
  """One row per trained model: epochs, why it stopped, accuracies and time."""
  lines = []
  if train:
    lines += ["", "## Training", "",
              "Epochs: trained / cap, and why it stopped (plateau: the validation accuracy gained less than the "
              "rule's minimum over its window; cap: the last epoch allowed). s/epoch: the median wall time of "
              "an epoch's steps (the first epoch includes compilation); the sum adds them up (the validation pass "
              "and checkpoints after each epoch are not included).", "",
              "| data set | α = max ‖A_h‖₂ | n_train | n_validation | epochs | stopped by | train acc. | "
              "validation acc. | clean acc. | s/epoch (median) | training s (sum of epochs) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(train, key=lambda r: (r["dataset"], r["attention_bound"])):
      hist = r.get("history", [])
      seconds = sum(h["seconds"] for h in hist) or r["train_seconds"]
      per_epoch = f"{np.median([h['seconds'] for h in hist]):.0f}" if hist else "–"
      val = hist[-1].get("validation_accuracy") if hist else None
      lines.append(f"| {r['dataset']} | {r['attention_bound']:g} | {r['n_train']} | {r.get('n_validation', 0)} | "
                   f"{len(hist) or r['epochs']} / {r.get('epochs_cap', r['epochs'])} | {r.get('stop_reason', 'cap')} | "
                   f"{_pct(r['train_accuracy'])} | {'–' if val is None else _pct(val)} | "
                   f"{_pct(r['clean_accuracy'])} | {per_epoch} | {seconds:.0f} |")
  return lines


def _accuracy_section(cert) -> list[str]:
  """Clean, PGD-L2 and certified accuracy (rigorous, Krylov estimate, each bound alone) by α and ε."""
  lines = ["", "## Accuracy (%) by ε", "",
            f"certified (rigorous): closed-form key-side norm and no Krylov estimate at all (so no joint bound); "
            f"{KRYLOV_LABEL}: the min bound min(Σ_h min(naive, fine), joint) with Lanczos norms; naive / fine / "
            "joint: each layer bound alone and Tsuzuku: √2‖W‖₂ margin form (fine, joint and Tsuzuku also use "
            "the Krylov estimates). PGD-L2 is an upper bound on the true robust accuracy; clean − PGD in "
            "points, and the share of correctly classified images PGD breaks (⚠ below "
            f"{100 * NEAR_TRIVIAL_SHARE:.0f} %: a near-trivial ε); `viol.` counts certified samples (either "
            "certificate) PGD broke (must be 0). s/sample: bound constants + propagation, after compilation.", "",
            "| data set | α | ε | clean | PGD-L2 | clean − PGD | PGD breaks | **certified (rigorous)** | "
            f"{KRYLOV_LABEL} | naive | fine | joint | Tsuzuku | viol. | s/sample (cert.) | s/sample (PGD) |",
            "|---" * 16 + "|"]
  for r in cert:
    gap, share = attack_gap(r)
    share_text = "–" if not np.isfinite(share) else f"{100 * share:.1f} %{_trivial_mark(r)}"
    lines.append(
        f"| {r['dataset']} | {r['attention_bound']:g} | {r['eps']:g} | {_pct(r['clean_accuracy'])} | "
        f"{_pct(r['pgd_accuracy'])} | {gap:.1f} | {share_text} | **{_pct(r['certified_rigorous'])}** | "
        f"{_pct(r['certified_accuracy'])} | "
        f"{_pct(r['certified_naive'])} | {_pct(r['certified_fine'])} | {_pct(r['certified_joint'])} | "
        f"{_pct(r['certified_tsuzuku'])} | {r['pgd_violations']} | {r['seconds_per_sample']:.4f} | "
        f"{r['pgd_seconds_per_sample']:.4f} |")
  return lines


def _bound_comparison_section(records, cert) -> list[str]:
  """The paper's figures, then how often the fine-grained and joint bounds beat the naive one."""
  full = any(r.get("train_source") == "dir" for r in records if r["kind"] == "train")
  lines = ["", "Paper (CIFAR-10, 3-layer ViT): LoFAST 29.1 % at ε = 0.02 and 16.0 % at ε = 0.05; "
            "α,β-CROWN 41.2 % / 14.1 %; CROWN 14.35 % vs CROWN+LoFAST 20.03 % at ε = 0.05; LoFAST "
            "0.055 s/sample, CROWN+LoFAST 1.71 s vs CROWN alone 4.33 s per sample. The paper trains on the "
            "full CIFAR-10 training set" + ("; so do these models (for fewer epochs)." if full else
                                             "; here the models see the embedded subset only."),
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
  return lines


def _tightness_section(records) -> list[str]:
  """The bound over the largest deviation PGD finds on each attention layer."""
  lines = []
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
  return lines


def write_report(workdir) -> str:
  """Draws the plots and writes summary.md into ``workdir`` from its records; returns the summary text.

  Raises:
    ValueError: no records, or records of another experiment (``experiments.core.report.experiment_records``).
  """
  return write_summary(workdir, "certify", REQUIRED_FIELDS, _render)


def _render(records: list[dict], workdir: Path) -> str:
  """Draws the plots of ``records`` into ``workdir``; returns the summary markdown."""
  plot_certified_accuracy(records, workdir / "certified_accuracy.png")
  plot_tightness(records, workdir / "tightness.png")
  plot_learning_curves(records, workdir / "learning_curves.png")
  return stamp(summary_markdown(records), "certification")

if __name__ == "__main__":
  from experiments.certify import SPEC
  report_main(SPEC)
