"""Claim rows of LoFAST's comparisons with linear bound propagation (Havens et al., ICML 2024, §5), from the
records of ``experiments.certify.compare`` (DIR/crown of a certification workdir):

  crown_lofast_vs_crown_0.05   CROWN + LoFAST certifies more than CROWN alone at ε = 0.05 (14.35 → 20.03 %);
  crown_lofast_speed           CROWN + LoFAST is faster than CROWN alone (4.33 → 1.71 s per sample);
  crown_vs_lofast_0.02 / 0.05  bound propagation beats LoFAST at ε = 0.02 and LoFAST wins at ε = 0.05 (the
                               paper's crossover, with α,β-CROWN: 41.2 vs 29.1 %, 14.1 vs 16.0 %).

The certified-share rows are paired over the same test images (Tango's score interval of the difference,
``experiments.certify.claims.paired_binary_difference``), the speed row over the timed batches of images
(Student's t of the log ratio of seconds per image, batch by batch on the same images and radius).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.certify.methods import CROWN_NOTE, LABELS, SUBDIR
from experiments.core.claim import Case, Claim, ratio_cases
from experiments.core.rows import LOFAST, Source, make_row, not_measured, not_run, ratio_interval
from experiments.core.workdir import read_records
from experiments.papers import lofast

_SECTION = f"{LOFAST}, §5 (comparison with bound propagation; CIFAR-10, 3-layer ViT)"
_DIFFERENCES = (
    ("crown_lofast_vs_crown_0.05", 0.05, "crown_lofast", "crown", +1,
     "CROWN + LoFAST certifies more test images than CROWN alone at ℓ2 radius 0.05",
     f"{lofast.CERTIFIED['CROWN (paper)'][0.05]:g} % → {lofast.CERTIFIED['CROWN+LoFAST (paper)'][0.05]:g} % "
     "(CIFAR-10; SVHN 27.45 → 29.51 %)"),
    ("crown_vs_lofast_0.02", 0.02, "crown", "lofast", +1,
     "bound propagation certifies more than LoFAST at ℓ2 radius 0.02 (the small-radius side of the crossover)",
     f"α,β-CROWN {lofast.CERTIFIED['α,β-CROWN (paper)'][0.02]:g} % vs LoFAST "
     f"{lofast.CERTIFIED['LoFAST (paper)'][0.02]:g} %"),
    ("crown_vs_lofast_0.05", 0.05, "crown", "lofast", -1,
     "LoFAST certifies more than bound propagation at ℓ2 radius 0.05 (the large-radius side of the crossover)",
     f"α,β-CROWN {lofast.CERTIFIED['α,β-CROWN (paper)'][0.05]:g} % vs LoFAST "
     f"{lofast.CERTIFIED['LoFAST (paper)'][0.05]:g} %"),
)
SPEED = ("crown_lofast_speed", "CROWN + LoFAST takes less time per image than CROWN alone",
         f"{lofast.SECONDS_PER_SAMPLE['CROWN']:g} → {lofast.SECONDS_PER_SAMPLE['CROWN + LoFAST']:g} s per sample "
         "(CIFAR-10, hardware not named; SVHN 5.68 → 1.44 s)")
COMMAND = "python -m experiments.certify.compare --workdir {path}"


def difference_row(claim_id: str, statement: str, paper: str, a, b, *, sign: int, setting: str = "",
                   produced_by: str = "", variant: str = "") -> dict:
  """The row of 'method a certifies more (sign +1) or less (−1) than method b' from their 0/1 flags on the same
  images: Tango's score interval of mean(a − b)."""
  from experiments.certify.claims import paired_binary_difference
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  row = make_row(claim_id, statement, LOFAST, paper, interval=paired_binary_difference(a, b), paper_sign=sign,
                 null=0.0, scale="difference", setting=setting, produced_by=produced_by, variant=variant)
  n10, n01 = int(np.sum((a == 1) & (b == 0))), int(np.sum((a == 0) & (b == 1)))
  row["note"] = (f"{n10} images certified by the first method only and {n01} by the second only (the exact "
                 "interval depends on these two counts). No magnitude verdict: the paper's models and ours differ.")
  return row


def speed_row(ratios, *, setting: str = "", produced_by: str = "", variant: str = "") -> dict:
  """The speed row from per-batch ratios seconds(CROWN) / seconds(CROWN + LoFAST) (same images, same ε)."""
  claim_id, statement, paper = SPEED
  interval = ratio_interval(np.asarray(ratios, np.float64))._replace(unit="batches")
  return make_row(claim_id, statement, LOFAST, paper, interval=interval, paper_sign=+1, null=1.0, scale="ratio",
                  setting=setting, produced_by=produced_by, variant=variant)


def _speed_ratios(records) -> list[float]:
  """seconds(CROWN) / seconds(CROWN + LoFAST) per timed batch (same start and ε; compiling batches left out)."""
  by = {(r["eps"], r["start"], r["method"]): r for r in records if not r.get("compiled_first")}
  return [by[(e, s, "crown")]["seconds"] / by[(e, s, "crown_lofast")]["seconds"]
          for (e, s, m) in by if m == "crown" and (e, s, "crown_lofast") in by]


def crown_rows(src: Source) -> list[dict]:
  """The comparison rows of one certification source: measured from DIR/crown, else 'not run'."""
  path = Path(src.path) / SUBDIR
  records = read_records(path) if path.is_dir() else []
  command = COMMAND.format(path=src.path)
  produced_by = f"{src.command}; {command}"
  if not records:
    return not_run_rows(src.path, f"no comparison records under {path}")
  from experiments.certify.compare_report import comparison
  comp = comparison(records)
  variant = "; ".join(src.variant)
  rows = []
  for claim_id, eps, a, b, sign, statement, paper in _DIFFERENCES:
    per = comp.get(eps, {})
    if a not in per or b not in per:
      rows.append(not_measured(claim_id, statement, LOFAST, paper, f"needs {LABELS[a]} and {LABELS[b]} at "
                               f"ε = {eps:g} in {path}", command=command, produced_by=produced_by, variant=variant))
      continue
    x, y = per[a].certified, per[b].certified
    n = x.size
    dataset = {"cifar10": "CIFAR-10", "mnist": "MNIST", "fashion_mnist": "Fashion-MNIST"}.get(
        records[0].get("dataset"), records[0].get("dataset"))
    setting = (f"{dataset} certified ViT α = {per[a].attention_bound:g} (the headline model), ε = {eps:g}, the "
               f"first {n} test images: {LABELS[a]} {int(x.sum())} vs {LABELS[b]} {int(y.sum())} certified "
               f"({100 * x.mean():.1f} % vs {100 * y.mean():.1f} %)")
    if "crown_vs_lofast" in claim_id:
      setting += f"; {CROWN_NOTE}"
    rows.append(difference_row(claim_id, statement, paper, x, y, sign=sign, setting=setting,
                               produced_by=produced_by, variant=variant))
  ratios = _speed_ratios(records)
  if len(ratios) >= 2:
    sec = {m: np.mean([p[m].seconds_per_image for p in comp.values() if m in p]) for m in ("crown", "crown_lofast")}
    setting = (f"{len(ratios)} batches timed after compilation on {records[-1].get('machine', 'this machine')}: "
               f"CROWN {sec['crown']:.3g} s, CROWN + LoFAST {sec['crown_lofast']:.3g} s per image (mean over ε)")
    rows.append(speed_row(ratios, setting=setting, produced_by=produced_by, variant=variant))
  else:
    rows.append(not_measured(SPEED[0], SPEED[1], LOFAST, SPEED[2], "needs at least 2 batches timed after "
                             "compilation for both CROWN and CROWN + LoFAST", command=command, produced_by=produced_by,
                             variant=variant))
  return rows


def not_run_rows(path: str, why: str, before: str = "") -> list[dict]:
  """Every comparison row, 'not run', with the command that fills them (after ``before``, a command that makes
  the certification workdir, where there is none)."""
  command = (f"{before}; then " if before else "") + COMMAND.format(path=path)
  return ([not_run(cid, statement, LOFAST, paper, command, why) for cid, _, _, _, _, statement, paper in _DIFFERENCES]
          + [not_run(SPEED[0], SPEED[1], LOFAST, SPEED[2], command, why)])


# ----------------------------------------------------------------------------- declared claims


def _nested(k_a: int, k_b: int, n: int = 200) -> tuple:
  """Flags of two methods on n images, a certifying the first k_a and b the first k_b (discordant one way)."""
  return (tuple(float(i < k_a) for i in range(n)), tuple(float(i < k_b) for i in range(n)))


def _crossed(k: int, n: int = 200) -> tuple:
  """Flags with k images certified by a only and k by b only: a difference of 0 either way."""
  return (tuple(float(i < k) for i in range(n)), tuple(float(k <= i < 2 * k) for i in range(n)))


def _difference_cases(sign: int) -> tuple:
  more, less = _nested(60, 30), _nested(30, 60)
  return (Case("false", less if sign > 0 else more), Case("true", more if sign > 0 else less),
          Case("boundary", _crossed(12)))


def _difference_claim(claim_id, eps, a, b, sign, statement, paper) -> Claim:
  def row_of(case: Case) -> dict:
    return difference_row(claim_id, statement, "synthetic", *case.values, sign=sign,
                          setting=f"synthetic case ({case.truth})")
  return Claim(claim_id, statement, _SECTION, f"per image, certified by {LABELS[a]} minus certified by {LABELS[b]} "
               f"at ε = {eps:g}, on the same images", "direction",
               f"Tango's score interval of the paired difference lies {'above' if sign > 0 else 'below'} 0",
               interval="paired", paper_sign=sign, null=0.0, cases=_difference_cases(sign), row_of=row_of)


CLAIMS = tuple(_difference_claim(*spec) for spec in _DIFFERENCES) + (
    Claim(SPEED[0], SPEED[1], _SECTION, "per timed batch of images (same images and ε), seconds of CROWN alone over "
          "seconds of CROWN + LoFAST, after compilation", "direction",
          "the t interval of the geometric-mean ratio over batches lies above 1", interval="ratio", paper_sign=+1,
          null=1.0, scale="ratio", cases=ratio_cases(+1),
          row_of=lambda case: speed_row(case.values, setting=f"synthetic case ({case.truth})")),)
