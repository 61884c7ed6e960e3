"""Claim rows of the differential-attention paper's CLIP line (arXiv 2510.00517: "DiffCLIP shows a higher attack
success rate at every perturbation budget and every patch size") from an ``experiments.clip.run`` workdir.

**A substitute, said in every row**: the paper attacks pretrained CLIP / DiffCLIP (ViT-B/16, λ_init 0.8, trained
on image–caption data); these machines cannot download them, so the rows read small CLIP / DiffCLIP pairs
trained here from scratch on CIFAR-10 images with captions made from the class names.

The unit is the seed pair: the CLIP and DiffCLIP of one training seed share the initial key, data order and
captions. Per pair, each model's ASR is the share of the attacked images that *both* models classify correctly
which the attack turns (``paired_differences``: DiffCLIP is a few points less accurate than CLIP, and an ASR over
each model's own clean-correct images would compare different images); the statistic is DiffCLIP's ASR minus
CLIP's, and the interval the inverted sign-flip test over the pairs (``experiments.core.rows.paired_interval``).

The ceiling rule, declared before the numbers: a budget at which both models' ASR on the shared images is at least
``SATURATION`` on every pair leaves no room for a difference, so its row reads *inconclusive* whatever its
interval, and the every-budget row cannot hold (it still fails when another budget fails).

Two kinds of row, for each attack (PGD-L∞ over ε, patches over their side):
  * per budget: one row per ε (per side), read as a family: each at the Bonferroni level
    1 − 0.05/m (``verdicts.family_level``, m budgets), so that no budget's "holds" or "fails" is a chance
    reading among m;
  * every budget (the paper's sentence): an intersection. It *holds* only when every budget's 95 % interval
    lies above 0 (an intersection–union test: each budget tested at 5 % and all required, so no multiplicity
    correction is needed); it *fails* when some budget's family-level interval lies below 0 (a union, hence the
    family level); otherwise it is *inconclusive*. The row shows the budget that decided
    (``every_budget_row``).
"""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import numpy as np

from experiments.core.claim import Case, Claim, ExperimentClaims, around, direction_cases
from experiments.core.rows import ARXIV_DA, LEVEL, Source, make_row, not_measured, not_run, paired_interval
from experiments.core.verdicts import direction_verdict, family_level

SUBSTITUTE = ("small CLIP / DiffCLIP pairs trained here from scratch on CIFAR-10 images with captions made from the "
              "class names, standing in for the paper's pretrained CLIP / DiffCLIP (ViT-B/16, λ_init 0.8), which "
              "could not be loaded offline")
PAPER = "DiffCLIP higher at every budget and patch size (pretrained ViT-B/16, λ_init 0.8)"
ATTACKS = {"pgd": ("PGD-L∞", "every perturbation budget"), "patch": ("patch", "every patch size")}


def budget_label(attack: str, value: float) -> str:
  """'ε = 2/255' or 'patch of side 4 px'."""
  return f"ε = {value:g}/255" if attack == "pgd" else f"patch of side {int(value)} px"


def budgets(records: Sequence[dict], attack: str) -> list[float]:
  """The budgets of ``attack`` the records hold (ε/255 or patch sides), increasing."""
  key = "eps_255" if attack == "pgd" else "size"
  return sorted({float(r[key]) for r in records if r["kind"] == "attack" and r["attack"] == attack
                 and r.get("source", "zero_shot") == "zero_shot"})


def _attack_record(records: Sequence[dict], model: str, attack: str, value: float) -> dict:
  """{seed_index: the zero-shot attack record of ``model`` at ``value``}: the latest one with a clean-correct mask,
  else the latest (a re-attacked point's record, written with its mask, replaces an older one whatever the order
  in which the workdir's files are read)."""
  key = "eps_255" if attack == "pgd" else "size"
  out = {}
  for r in records:
    if (r["kind"] == "attack" and r.get("source", "zero_shot") == "zero_shot" and r["model"] == model
        and r["attack"] == attack and math.isclose(float(r[key]), float(value))):
      s = int(r["seed_index"])
      if s not in out or r.get("clean_correct") is not None or out[s].get("clean_correct") is None:
        out[s] = r
  return out


def _flags(values, what: str, where: str) -> np.ndarray:
  """A 1-D 0/1 list as a bool array.

  Raises:
    ValueError: not a 1-D list of 0/1 (or true/false) values, naming ``what`` and ``where``.
  """
  a = np.asarray(values if values is not None else [], dtype=object)
  if a.ndim != 1 or not all(isinstance(v, (bool, int, np.integer, np.bool_)) and v in (0, 1) for v in a.tolist()):
    raise ValueError(f"{where}: {what} must be a list of 0/1 values, got {str(values)[:80]}")
  return a.astype(bool)


def pool_outcomes(record: dict):
  """(clean-correct mask [N] bool, attack success [N] bool) over the N attacked images of an attack record, or
  None for a record written before the masks were stored (no ``clean_correct``, or null).

  Raises:
    ValueError: a mask or flags that are not 0/1 lists, or ``success`` flags not one per clean-correct image.
  """
  if record.get("clean_correct") is None:
    return None
  where = f"the attack record of {record.get('model', '?')} seed {record.get('seed_index', '?')}"
  mask = _flags(record["clean_correct"], "clean_correct", where)
  flags = _flags(record.get("success"), "success", where)
  if flags.size != int(mask.sum()):
    raise ValueError(f"{where} holds {flags.size} success flags for its {int(mask.sum())} clean-correct images "
                     f"(of {mask.size})")
  success = np.zeros(mask.shape, bool)
  success[mask] = flags
  return mask, success


class PairedASR(NamedTuple):
  """DiffCLIP − CLIP ASR per seed pair on the images both classify correctly, at one budget."""
  differences: np.ndarray   # [k] float64
  seeds: list               # the k pairs' seed indices
  clip: dict                # {seed: CLIP's ASR on the shared images}
  diff: dict                # {seed: DiffCLIP's}
  shared: dict              # {seed: how many images both models classify correctly}
  unmasked: list            # seeds whose records hold no clean-correct mask (written before the masks)


def paired_differences(records: Sequence[dict], attack: str, value: float) -> PairedASR:
  """``PairedASR`` at one budget: for each seed pair whose records both hold their clean-correct masks, each
  model's ASR over the attacked images that both models classify correctly (pairs sharing none are left out).

  Raises:
    ValueError: the two records of a pair attacked different numbers of images, or malformed flags.
  """
  clip_r, diff_r = (_attack_record(records, m, attack, value) for m in ("clip", "diffclip"))
  seeds, clip, diff, shared, unmasked = [], {}, {}, {}, []
  for s in sorted(set(clip_r) & set(diff_r)):
    a, b = pool_outcomes(clip_r[s]), pool_outcomes(diff_r[s])
    if a is None or b is None:
      unmasked.append(s)
      continue
    if a[0].shape != b[0].shape:
      raise ValueError(f"seed pair {s}: CLIP attacked {a[0].size} images and DiffCLIP {b[0].size}")
    both = a[0] & b[0]
    if both.any():
      seeds.append(s)
      clip[s], diff[s], shared[s] = float(a[1][both].mean()), float(b[1][both].mean()), int(both.sum())
  return PairedASR(np.asarray([diff[s] - clip[s] for s in seeds], np.float64), seeds, clip, diff, shared, unmasked)


def every_budget_row(differences: Sequence[np.ndarray], labels: Sequence[str], ceiling: Sequence[bool] = (),
                     **row_fields) -> dict:
  """The intersection row "DiffCLIP's ASR exceeds CLIP's at every budget" from per-seed differences at each of m
  budgets (``differences[j]``: DiffCLIP − CLIP per seed pair at budget ``labels[j]``; ``ceiling[j]``: whether
  budget j is at the ceiling, ``saturated``; none when empty).

  Rule (stated before the numbers): *fails* when some budget below the ceiling has its interval at the family
  level 1 − 0.05/m below 0 (the row shows the lowest such); else *inconclusive* when some budget is at the
  ceiling (no difference can show there, so "every budget" cannot be confirmed); else *holds* when every
  budget's 95 % interval lies above 0 (an intersection–union test needs no correction; the row shows the budget
  with the lowest lower end); else *inconclusive*, showing that budget. ``row_fields`` go to ``make_row``
  (claim_id, claim, source, paper_value, setting, ...).

  Raises:
    ValueError: no budget, or labels / ceiling flags not one per budget.
  """
  m = len(differences)
  ceiling = list(ceiling) or [False] * m
  if m == 0 or len(labels) != m or len(ceiling) != m:
    raise ValueError(f"every_budget_row needs one label and one ceiling flag per budget, got {m} budgets, "
                     f"{len(labels)} labels and {len(ceiling)} flags")
  fam = [paired_interval(d, np.zeros_like(d), level=family_level(m)) for d in differences]
  own = [paired_interval(d, np.zeros_like(d), level=LEVEL) for d in differences]
  below = [j for j in range(m) if not ceiling[j] and direction_verdict(fam[j], +1)[0] == "fails"]
  if below:
    j = min(below, key=lambda i: fam[i].high)
    how = (f"decided by {labels[j]}: its interval at {100 * fam[j].level:.4g} % (Bonferroni over the {m} budgets, "
           "as a union needs) lies below 0")
    return make_row(interval=fam[j], paper_sign=+1, null=0.0, scale="difference", direction="fails",
                    reason=f"{how}: {direction_verdict(fam[j], +1)[1]}", **row_fields)
  if any(ceiling):
    j = ceiling.index(True)
    return make_row(interval=own[j], paper_sign=+1, null=0.0, scale="difference", direction="inconclusive",
                    reason=f"decided by the ceiling rule: {saturation_text(labels[j])}", **row_fields)
  j = min(range(m), key=lambda i: own[i].low)
  verdict = direction_verdict(own[j], +1)
  if verdict[0] == "fails":  # below 0 at 95 % but not at the family level: no union reading
    direction, reason = "inconclusive", (f"{labels[j]}'s 95 % interval lies below 0, but not its interval at the "
                                         f"family level {100 * fam[j].level:.4g} % that a 'fails' over {m} budgets needs")
  else:
    direction, reason = verdict[0], (f"decided by the lowest of the {m} budgets' 95 % intervals, {labels[j]}'s"
                                     + (": every budget's lies above 0 (intersection–union test, no correction)"
                                        if verdict[0] == "holds" else f": {verdict[1]}"))
  return make_row(interval=own[j], paper_sign=+1, null=0.0, scale="difference", direction=direction,
                  reason=reason, **row_fields)


def _setting(records, attack: str, label: str, paired: PairedASR, level: float) -> str:
  seeds = paired.seeds
  trains = {(r["model"], int(r["seed_index"])): r for r in records if r["kind"] == "train"}
  acc = {m: np.mean([trains[m, s]["zero_shot_accuracy"] for s in seeds if (m, s) in trains] or [np.nan])
         for m in ("clip", "diffclip")}
  params = {m: next((trains[m, s]["parameters"] for s in seeds if (m, s) in trains), None) for m in ("clip", "diffclip")}
  asr = "; ".join(f"seed {s}: {paired.diff[s]:.3f} vs {paired.clip[s]:.3f} on {paired.shared[s]}" for s in seeds)
  what = f"PGD-L∞ at {label}" if attack == "pgd" else f"an unbounded {label}"
  left = (f"; seed pairs {paired.unmasked} left out: their records hold no clean-correct masks (rerun the "
          "experiment's command to re-attack them)" if paired.unmasked else "")
  return (f"{SUBSTITUTE}; {what} on the zero-shot prediction, over the images both models of a pair classify "
          f"correctly; {len(seeds)} seed pairs; zero-shot accuracy DiffCLIP {acc['diffclip']:.3f} vs CLIP "
          f"{acc['clip']:.3f} (mean over seeds), parameters {params['diffclip']} vs {params['clip']}; ASR DiffCLIP "
          f"vs CLIP on the shared images {asr}{left}"
          + ("" if level == LEVEL else f"; interval at {100 * level:.4g} % (Bonferroni over the budgets)"))


def attack_rows(src: Source, attack: str) -> list[dict]:
  """The per-budget rows and the every-budget row of ``attack`` ('pgd' or 'patch')."""
  name, every = ATTACKS[attack]
  values = budgets(src.records, attack)
  stem = "clip_asr_pgd_eps" if attack == "pgd" else "clip_asr_patch_size"
  rows, diffs, labels, saturated_labels, missing = [], {}, [], [], []
  level = family_level(len(values))
  for value in values:
    label = budget_label(attack, value)
    cid = f"{stem}{value:g}"
    claim = f"DiffCLIP's ASR exceeds CLIP's ({f'{name}, ' if attack == 'pgd' else ''}{label}; CIFAR-10 substitute)"
    paired = paired_differences(src.records, attack, value)
    if not paired.seeds:
      why = (f"the records of seed pairs {paired.unmasked} at {label} hold no per-image clean-correct masks "
             f"(written before they were stored), so the images both models classify correctly are unknown; "
             f"`python -m experiments.clip --workdir {src.path}` re-attacks those points" if paired.unmasked
             else f"no seed pair attacked at {label} with an image both models classify correctly")
      rows.append(not_measured(cid, claim, ARXIV_DA, PAPER, why, produced_by=src.command))
      missing.append(label)
      continue
    d = paired.differences
    diffs[label] = dict(zip(paired.seeds, d))
    labels.append(label)
    note = "a substitute for the paper's pretrained models (see the setting)"
    ceiling = saturated(paired.clip, paired.diff, paired.seeds)
    if ceiling:
      note += f"; {saturation_text(label)}"
      saturated_labels.append(label)
    rows.append(make_row(cid, claim, ARXIV_DA, PAPER, interval=paired_interval(d, np.zeros_like(d), level=level),
                         paper_sign=+1, null=0.0, scale="difference", produced_by=src.command,
                         setting=_setting(src.records, attack, label, paired, level), note=note,
                         **(dict(direction="inconclusive", reason=f"the ceiling rule: {saturation_text(label)}")
                            if ceiling else {})))
  cid = f"clip_asr_{attack}_every_{'budget' if attack == 'pgd' else 'size'}"
  claim = f"DiffCLIP's ASR exceeds CLIP's at {every} ({f'{name}; ' if attack == 'pgd' else ''}CIFAR-10 substitute)"
  common = sorted(set.intersection(*(set(d) for d in diffs.values()))) if diffs else []
  if missing or not common:
    why = (f"no seed pair attacked at {', '.join(missing)}: 'every budget' needs them all" if missing else
           f"no seed pair attacked at every {name} budget" if diffs else f"no {name} budget attacked on both models")
    return rows + [not_measured(cid, claim, ARXIV_DA, PAPER, why, produced_by=src.command)]
  rows.append(every_budget_row([np.asarray([diffs[b][s] for s in common]) for b in labels], labels,
                               [b in saturated_labels for b in labels], claim_id=cid,
                               claim=claim, source=ARXIV_DA, paper_value=PAPER, produced_by=src.command,
                               setting=f"{SUBSTITUTE}; {name} at {', '.join(labels)}; the {len(common)} seed pairs "
                                       "attacked at every budget; an intersection over the budgets (see the reason)",
                               note="; ".join(["a substitute for the paper's pretrained models (see the setting)"]
                                              + [saturation_text(label) for label in saturated_labels])))
  return rows


SATURATION = 0.99  # both models' ASR at least this on every pair: the budget leaves (almost) no room for a difference


def saturated(clip: dict, diff: dict, seeds: Sequence[int]) -> bool:
  """Whether both models' ASR is at least ``SATURATION`` on every seed pair (the ceiling rule of the module
  docstring, which decides the budget's verdict)."""
  return all(clip[s] >= SATURATION and diff[s] >= SATURATION for s in seeds)


def saturation_text(label: str) -> str:
  return (f"at {label} both models' ASR is at least {SATURATION:g} on every seed pair: the attack saturates these "
          "small models, so almost no difference can show there (a ceiling, not evidence against the paper; "
          "read as inconclusive)")


CLIP_CLAIMS = (("clip_asr_pgd_every_budget", "DiffCLIP's ASR exceeds CLIP's at every perturbation budget (PGD-L∞)"),
               ("clip_asr_patch_every_size", "DiffCLIP's ASR exceeds CLIP's at every patch size"))


def rows(src: Source) -> list[dict]:
  """Every CLIP claim row of one workdir; malformed records give 'not measured' rows with the error."""
  out = []
  for attack in ATTACKS:
    try:
      out += attack_rows(src, attack)
    except (ValueError, KeyError, IndexError, TypeError, ZeroDivisionError) as error:
      cid, claim = CLIP_CLAIMS[list(ATTACKS).index(attack)]
      out.append(not_measured(cid, claim, ARXIV_DA, PAPER, f"the records cannot be read for this claim "
                              f"({type(error).__name__}: {error})", produced_by=src.command))
  return out


def claim_rows(sources: Sequence[Source], root: str, include_not_run: bool) -> list[dict]:
  """The rows of every CLIP source; with none yet (``include_not_run``), the every-budget rows say how to run it."""
  out = not_run_rows(root, "no clip workdir; the claims job runs it only with --standard (see the command)") if (
      include_not_run and not sources) else []
  for s in sources:
    found = rows(s)
    if s.variant:
      found = [dict(r, variant="; ".join(s.variant)) for r in found if r["status"] != "not measured"]
    out += found
  return out


def not_run_rows(root: str, why: str) -> list[dict]:
  """The every-budget claims as 'not run' (the per-budget rows follow the workdir's grid)."""
  command = f"python -m experiments.claims --workdir {root} --standard"
  why += (" (the standard grid: 10 CLIP / DiffCLIP pairs on 10,000 CIFAR-10 images; about 2 h on 2 CPU cores; "
          "ATTN_DATA_DIR set)")
  return [not_run(cid, claim, ARXIV_DA, PAPER, command, why) for cid, claim in CLIP_CLAIMS]


def _every_case_row(case: Case) -> dict:
  """The every-budget row of a case: four budgets whose per-seed differences are the case's values shifted up
  by 0, 0.05, 0.1 and 0.15 (so the lowest budget decides), through ``every_budget_row``."""
  values = np.asarray(case.values, np.float64)
  return every_budget_row([values + shift for shift in (0.0, 0.05, 0.1, 0.15)], ["b0", "b1", "b2", "b3"],
                          claim_id="clip_asr_pgd_every_budget", claim="synthetic", source=ARXIV_DA, paper_value="",
                          setting=f"synthetic case ({case.truth})")


_SOURCE = (f"{ARXIV_DA}, the pretrained CLIP vs DiffCLIP comparison (ViT-B/16, λ_init 0.8); here a substitute: "
           "small pairs trained on CIFAR-10 captions")
CLAIMS = ExperimentClaims(
    claims=(
        Claim("clip_asr_pgd_eps*", "DiffCLIP shows a higher attack success rate at every perturbation budget "
              "(this row: one budget)", _SOURCE, "per seed pair, DiffCLIP's minus CLIP's PGD-L∞ ASR on the "
              "images both classify correctly", "direction", "the sign-flip interval over seed pairs, at the Bonferroni "
              "level over the budgets, excludes 0 above (10 pairs); inconclusive at the ceiling (both ASRs ≥ 0.99)", interval="paired", paper_sign=+1, null=0.0,
              cases=direction_cases()),
        Claim("clip_asr_patch_size*", "DiffCLIP shows a higher attack success rate at every patch size (this row: "
              "one size)", _SOURCE, "per seed pair, DiffCLIP's minus CLIP's patch-attack ASR on the images both "
              "classify correctly", "direction", "the sign-flip interval over seed pairs, at the Bonferroni level over the "
              "sizes, excludes 0 above (10 pairs); inconclusive at the ceiling (both ASRs ≥ 0.99)", interval="paired", paper_sign=+1, null=0.0,
              cases=direction_cases()),
        Claim("clip_asr_*_every_*", "DiffCLIP shows a higher attack success rate at every perturbation budget and "
              "every patch size", _SOURCE, "the per-budget paired differences, read as an intersection",
              "direction", "holds when every budget's 95 % sign-flip interval lies above 0 (intersection–union, no "
              "correction) and none is at the ceiling; fails when some budget below the ceiling has its Bonferroni-level "
              "interval below 0; 10 pairs",
              interval="paired", paper_sign=+1, null=0.0, row_of=_every_case_row,
              cases=(Case("false", around(-0.2)), Case("true", around(0.2)), Case("boundary", around(0.0, 0.8)))),
    ),
    claim_rows=claim_rows, not_run_rows=not_run_rows)
