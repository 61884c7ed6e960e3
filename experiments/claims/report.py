"""The claims table (summary.md) and forest plot (claims_forest.png) of a claims run, drawn from its
claims.jsonl alone.

``python -m experiments.claims.report --workdir DIR`` redraws them; ``rows_markdown`` renders rows for the
main job's summary. The rows come from ``experiments.claims.job``.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from experiments.core.report import report_cli
from experiments.core.claim import heading
from experiments.core.plotting import plt, save, wrap
from experiments.core.rules_version import stamp
from experiments.claims.specification_curve import VERDICT_COLORS, plot_specification_curve, summaries
from experiments.core.workdir import decode, parse_lines

ROWS_NAME = "claims.jsonl"
DIRECTION_COLORS = VERDICT_COLORS
SCALE_ORDER = ("ratio", "slope", "exponent", "log10 width", "log10 κ gap", "difference", "proportion")
SCALE_LABELS = {"ratio": "ratio (log axis; null 1)", "slope": "log-log slope against width (null 0)",
                "exponent": "log κ(G̃) / log κ(G) (null 1)", "log10 width": "log10 implied width",
                "log10 κ gap": "log10 κ(K∞, MLP-Attn) − log10 κ(K∞, 2L-ReLU) (null 0)",
                "difference": "difference (null 0)", "proportion": "certified accuracy"}

VERDICT_RULES = """\
## Verdict rules

- **Intervals** (95 %, methods stated before the numbers and validated by simulation at the numbers of
  seeds used here, `experiments.core.intervals`; docs/theory.md#interval-methods-and-their-coverage):
  - paired per-seed differences (MLP-Attn − 2L-ReLU, a slope difference, an attack's excess over the
    random-sign control): the interval that inverts the exact sign-flip permutation test (unbounded at
    ≤ 5 seeds, where that test cannot reject at 5 %);
  - one model's per-seed statistic (a slope, an exponent, a log10 gap): Student's t; per-seed ratios
    (sharpness): Student's t on the log scale, shown as the geometric-mean ratio;
  - ratios of flip rates: the ratio of pooled flip counts with a t interval on the log ratio whose standard
    error is the seed-level (cluster) delta-method one, floored at the binomial one;
  - the calibrated ε*: a seed bootstrap of the interpolated crossing;
  - for single-model accuracies and attack success rates (differential attention, certification):
    Clopper–Pearson over images; a difference of k such rates combines k intervals at level 1 − 0.05/k
    (Bonferroni), so it covers with probability ≥ 95 %;
  - for Lipschitz comparisons: a paired bootstrap over images (both models on the same images);
  - an ε grid is one family: the paper's ε (primary) and the calibrated ε* at 95 %, the other m grid ε each
    at 1 − 0.05/m (Bonferroni), so a "depends on" list names only choices that survive the correction;
  - a ratio of flip counts whose denominator rests on fewer than 5 flips is read in neither direction;
  - the flip-rate excess is over the neutral control (a random sign only where both signs stay inside
    [0, 1]), the clipped random sign a secondary row; each row gives the shift of XᵀX under both;
  - sharpness is compared only where the two train losses agree within 2 % (primary: λ₁ with the lower-loss
    model's first layer rescaled to the other's loss; the adaptive sharpness and the filter-normalised loss
    rise beside it).
- **Kind** (declared with each claim, `experiments.<name>.claims.CLAIMS`): it decides the verdict that heads
  the row — *direction* (holds / fails / inconclusive), *magnitude* and *equality* (matches / differs /
  undetermined, against the paper's number or a predicted value with its stated tolerance), *premise*
  (premise holds / premise fails: a theorem's precondition; a claim whose premise fails is not tested),
  *identity* (verified / violated: an algebraic identity checked numerically), *context* (no claim).
- **Direction**: *holds* if the interval of the difference (or of the ratio, i.e. the log-ratio against
  0) excludes the no-effect value on the paper's side; *fails* if it excludes it on the other side;
  *inconclusive* otherwise, and *inconclusive by design* with fewer than 10 seeds where seeds (or random
  subsets, or target draws) are the unit,
  or when the grid cannot reach the paper's setting (the depth crossover below depth 8).
- **Magnitude**, reported separately, against the paper's value or range widened by 1.5× at each end
  (6–9× becomes [4, 13.5]), or ± 5 percentage points for a certified accuracy (29.1 % becomes [24.1 %, 34.1 %]):
  *matches* only if the whole interval lies inside that band, *differs* if it is
  disjoint from it, *undetermined* otherwise (an interval too wide to tell); "–" where the paper gives no
  number. An interval no longer matches by merely overlapping.
- **Stability** (`--stability`, `experiments.claims.stability`): a verdict that changes when its L-BFGS-trained
  experiments are rerun under another machine's numerics — initial parameters perturbed by a relative 1e-7
  (*perturb*), one-threaded reductions (*serial*), an older instruction set (*isa*), two host devices
  (*devices*) — is *unstable*, and the row gives every outcome; a row that survived names the modes.
- *context* rows (the dual-implications random-direction and real-label targets) carry no paper claim.
- Points whose training did not reach the criterion (`converged` false in the records) are left out of
  every comparison; a row that left any out says how many.
- A *variant* (↳) flips one protocol choice from the quick setting (ε unit, preprocessing, training
  criterion, n, kernel at initialisation vs trained, ridge, data set); the last column of a quick-setting
  row names the variants whose verdict differs from it.
"""


def read_rows(workdir) -> tuple[list[dict], list[dict]]:
  """(rows, protocol choices) from ``workdir/claims.jsonl``.

  claims.jsonl is written whole by every claims run (atomically), so a file that does not parse was damaged
  afterwards; it is refused, since the claims job rebuilds it from the workdirs without rerunning anything.

  Raises:
    ValueError: the file is absent (no claims run there yet), empty, or holds a line that is not a JSON object.
  """
  path = Path(workdir) / ROWS_NAME
  if not path.is_file():
    raise ValueError(f"{path} does not exist; run python -m experiments.claims --workdir {workdir} first")
  records, bad = parse_lines(path.read_bytes())
  rebuild = f"python -m experiments.claims --workdir {workdir} --no_run rebuilds it from the workdirs"
  if bad or not records:
    raise ValueError(f"{path} is {'damaged: ' + str(len(bad)) + ' line(s) are not JSON records' if bad else 'empty'}"
                     f"; {rebuild}")
  rows, choices = [], []
  for record in map(decode, records):
    if record.get("kind") == "protocol_choices":
      choices = record["choices"]
    elif record.get("kind") == "claim":
      rows.append(record)
  return rows, choices


def read_times(workdir) -> dict[str, float]:
  """{experiment: seconds} from ``workdir/claims.jsonl``'s 'compute_times' record ({} if it has none)."""
  path = Path(workdir) / ROWS_NAME
  for line in path.read_text().splitlines() if path.exists() else ():
    try:
      record = json.loads(line)
    except json.JSONDecodeError:
      continue
    if record.get("kind") == "compute_times":
      return {k: float(v) for k, v in record["seconds"].items()}
  return {}


def times_markdown(times: dict[str, float]) -> list[str]:
  """'## Compute time per experiment': each quick experiment's summed per-point wall time."""
  if not times:
    return []
  return (["## Compute time per experiment", "",
           "Summed per-point wall times of the records each row was built from (the compute each experiment cost; "
           "on a machine shared with other jobs this is longer than on idle cores).", "",
           "| experiment | seconds | minutes |", "|---|---|---|"]
          + [f"| {k} | {v:.0f} | {v / 60:.1f} |" for k, v in sorted(times.items())]
          + [f"| total | {sum(times.values()):.0f} | {sum(times.values()) / 60:.1f} |", ""])


def _num(v, scale: str) -> str:
  if v is None:
    return "–"
  v = float(v)
  if math.isinf(v):
    return "∞" if v > 0 else "−∞"
  if math.isnan(v):
    return "nan"
  if scale == "proportion":
    return f"{100 * v:.1f}"
  return f"{v:.3g}"


def value_text(row: dict) -> str:
  """'estimate [low, high]' in the row's scale (× for ratios, % for proportions), or the status."""
  if row["status"] != "measured":
    if row.get("command"):
      return f"{row['status']}: `{row['command']}`"
    return f"{row['status']} ({row['reason']})"
  s = row["scale"]
  unit = "×" if s == "ratio" else " %" if s == "proportion" else ""
  return f"{_num(row['estimate'], s)}{unit} [{_num(row['low'], s)}, {_num(row['high'], s)}]"


def _protocol_text(row: dict, across: dict = {}) -> str:  # noqa: B006 (read only)
  """The last column: the protocol variants that change the verdict, and on a claim's primary row its
  verdict across the measurement choices (``experiments.claims.specification_curve.choice_summary``)."""
  changes = row.get("protocol") or []
  texts = [f"{c['variant']} → {c['direction']}" + (f" / {c['magnitude']}" if c.get("magnitude") else "")
           for c in changes]
  summary = across.get((row["claim_id"], row["variant"]))
  if summary and row.get("primary", True):
    texts.insert(0, f"measurement: {summary}")
  if not texts:
    return "–" if row["status"] == "measured" and not row["variant"] else ""
  return "; ".join(texts)


def rows_markdown(rows: Sequence[dict], *, only_measured: bool = False) -> str:
  """The claims table: one line per row (variants marked ↳ under their quick-setting row), then the
  reason behind each verdict."""
  shown = [r for r in rows if not only_measured or r["status"] == "measured"]
  across = summaries(shown)
  lines = ["| claim | paper | our setting | ours [95 % interval] | n | kind | verdict | direction | magnitude | "
           "choices that change the verdict |", "|---|---|---|---|---|---|---|---|---|---|"]
  for r in shown:
    claim = f"↳ {r['variant']}" if r["variant"] else f"**{r['claim']}** ({r['source']})"
    if r.get("measurement") and not r.get("primary", True):
      claim = f"↳ measured as {r['measurement']}" + (f" [{r['variant']}]" if r["variant"] else "")
    elif r.get("measurement"):
      claim += f" — {r['measurement']}"
    n = f"{r['n']} {r['unit']}" if r["status"] == "measured" else "–"
    note = f" ({r['note']})" if r.get("note") else ""
    cells = [claim, r["paper_value"] if not r["variant"] else "", f"{r['setting']}{note}", value_text(r), n,
             r.get("claim_kind") or "direction", heading(r), _direction_text(r), r["magnitude"] or "–",
             _protocol_text(r, across)]
    # A '|' inside a cell (e.g. diag|θ|) would end the cell in Markdown: escape it.
    lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
  return "\n".join(lines) + "\n"


def _direction_text(row: dict) -> str:
  """The direction cell: the verdict, and where a stability pass read the row, the modes it survived; an
  unstable row gives every outcome (here, under each mode, and inside the rounding band where that decided)."""
  modes = row.get("stability") or {}
  if row["direction"] == "unstable":
    outcomes = row.get("stability_outcomes") or {}
    return "unstable" + (f" ({'; '.join(f'{k}: {v}' for k, v in outcomes.items())})" if outcomes else "")
  if not modes:
    return row["direction"]
  stable = [m for m, d in modes.items() if d is not None]
  return f"{row['direction']} (stable: {', '.join(stable)})" if stable else row["direction"]


def _reasons(rows: Sequence[dict]) -> list[str]:
  out = []
  for r in rows:
    label = r["claim"] + (f" [{r['variant']}]" if r["variant"] else "")
    produced = f" Produced by `{r['produced_by']}`." if r.get("produced_by") else ""
    test = f" Test ({r.get('claim_kind') or 'direction'}): {r['test']}." if r.get("test") else ""
    out.append(f"- {label}: {heading(r)} — {r['reason']}.{test}{produced}")
  return out


EPS_MEASUREMENT = re.compile(r"^ε = ([0-9.e+-]+) on \[0, 1\]$")


def _family(row: dict) -> str:
  """The claim family a row belongs to: its declared claim (``family``, e.g. 'flip_ratio_*'), else its id."""
  return row.get("family") or row["claim_id"]


def _eps_of(row: dict) -> Optional[float]:
  """The ε of a row measured at one point of an ε grid ('ε = 0.05 on [0, 1]'), else None."""
  m = EPS_MEASUREMENT.match(row.get("measurement") or "")
  return float(m.group(1)) if m else None


def row_label(row: dict, with_claim: bool = True) -> str:
  """A forest row's label: the claim (unless ``with_claim`` is false: the panel's rows share it), its
  measurement choice and its protocol variant, so that rows of one claim are told apart."""
  parts = [row["claim"]] if with_claim else []
  if row.get("measurement"):
    parts.append(f"measured as {row['measurement']}")
  if row.get("variant"):
    parts.append(f"[{row['variant']}]")
  return " — ".join(parts) or "the quick setting"


def _unique(labels: list[str]) -> list[str]:
  seen: dict[str, int] = {}
  out = []
  for label in labels:
    seen[label] = seen.get(label, 0) + 1
    out.append(label if seen[label] == 1 else f"{label} (#{seen[label]})")
  return out


def forest_figure(rows: Sequence[dict]):
  """The forest: one panel per claim family (its declared claim), one line per measured row, the points of an
  ε grid other than the primary ε left to their curves (``eps_figure``): its interval and estimate coloured by the verdict that heads
  it, the paper's value (×) or range (shaded), the no-effect value (grey line). Every label names the row's
  measurement choice and variant and is wrapped whole onto the canvas. Returns the laid-out figure, or None
  when no such row was measured."""
  measured = [r for r in rows if r["status"] == "measured" and r["estimate"] is not None
              and (_eps_of(r) is None or r.get("primary", True))]
  families = list(dict.fromkeys(_family(r) for r in measured))
  if not families:
    return None
  panels = [[r for r in measured if _family(r) == f] for f in families]
  labels = [_unique([wrap(row_label(r, len({q["claim"] for q in rs}) > 1), 60) for r in rs]) for rs in panels]
  # Rows sit at y positions in units of a label line (0.13 in at 6 pt), each as far from the next as their
  # labels need (half of each one's lines plus one line between them); each panel adds its title (0.3 in per
  # line) and its axis (0.5 in).
  lines = [[label.count("\n") + 1 for label in ls] for ls in labels]
  positions = [list(np.cumsum([0.0] + [(a + b) / 2 + 1 for a, b in zip(ns, ns[1:])])) for ns in lines]
  spans = [(-ns[0] / 2 - 0.5, ys[-1] + ns[-1] / 2 + 0.5) for ns, ys in zip(lines, positions)]
  heights = [0.13 * (hi - lo) + 0.5 + 0.3 * (3 + (i == 0) * 2) for i, (lo, hi) in enumerate(spans)]
  fig, axes = plt.subplots(len(panels), 1, figsize=(10, sum(heights) + 0.4), squeeze=False,
                           gridspec_kw=dict(height_ratios=heights))
  for ax, rs, ls, ys, span in zip(axes[:, 0], panels, labels, positions, spans):
    scale = rs[0]["scale"]
    log = scale == "ratio"
    finite = [float(v) for r in rs for v in (r["low"], r["high"], r["estimate"], r["null"], *(r["paper_range"] or ()))
              if v is not None and math.isfinite(float(v)) and (not log or float(v) > 0)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    if log:
      ax.set_xscale("log")
      edge_lo, edge_hi = lo / 1.5, hi * 1.5
    else:
      pad = 0.08 * (hi - lo or 1.0)
      edge_lo, edge_hi = lo - pad, hi + pad
    clip = lambda v: min(max(v, edge_lo), edge_hi)  # noqa: E731
    for y, r in zip(ys, rs):
      color = DIRECTION_COLORS.get(heading(r), "tab:gray")
      low = float(r["low"]) if math.isfinite(float(r["low"])) and (not log or float(r["low"]) > 0) else edge_lo
      high = float(r["high"]) if math.isfinite(float(r["high"])) else edge_hi
      ax.plot([clip(low), clip(high)], [y, y], color=color, lw=2)
      if math.isfinite(float(r["estimate"])):
        ax.plot([clip(float(r["estimate"]))], [y], "o", color=color, ms=4)
      if r["paper_range"]:
        p_lo, p_hi = r["paper_range"]
        if p_lo == p_hi:
          ax.plot([clip(p_lo)], [y], "x", color="k", ms=6)
        else:
          ax.fill_betweenx([y - 0.5, y + 0.5], clip(p_lo), clip(p_hi), color="0.85", zorder=0)
    ax.axvline(rs[0]["null"], color="0.5", lw=0.8)
    ax.set_xlim(edge_lo, edge_hi)
    ax.set_ylim(span[1], span[0])
    ax.set_yticks(ys)
    ax.set_yticklabels(ls, fontsize=6)
    shared = rs[0]["claim"] if len({q["claim"] for q in rs}) == 1 else None
    title = f"{rs[0].get('statement') or rs[0]['claim']} ({rs[0].get('claim_kind') or 'direction'})"
    ax.set_title(wrap(title, 110) + (f"\nrows: {wrap(shared, 110)}" if shared else ""), fontsize=7, loc="left")
    ax.set_xlabel(SCALE_LABELS.get(scale, scale), fontsize=7)
  axes[0, 0].set_title(axes[0, 0].get_title(loc="left") + "\n" + wrap(
      "95 % intervals coloured by the verdict that heads each row (green holds / matches, red fails / differs, "
      "grey inconclusive); paper × or shaded range; grey line: no effect", 110), fontsize=7, loc="left")
  fig.tight_layout()
  return fig


def eps_figure(rows: Sequence[dict]):
  """The ε grids: for each claim family measured at several ε (the flip-rate ratio and excess rows), one panel
  per family and data set, a curve per attack of the estimate against ε with its 95 % interval as a band, the
  paper's range shaded and the no-effect value as a grey line. Returns the laid-out figure, or None without
  such rows."""
  grid = [r for r in rows if r["status"] == "measured" and _eps_of(r) is not None and not r["variant"]
          and r["estimate"] is not None]
  keys = list(dict.fromkeys((_family(r), r["claim_id"].split("_")[-2]) for r in grid))
  if not keys:
    return None
  fig, axes = plt.subplots(1, len(keys), figsize=(5.2 * len(keys), 4.2), squeeze=False)
  for ax, (family, task) in zip(axes[0], keys):
    rs = [r for r in grid if _family(r) == family and r["claim_id"].split("_")[-2] == task]
    log = rs[0]["scale"] == "ratio"
    for claim_id in dict.fromkeys(r["claim_id"] for r in rs):
      pts = sorted((_eps_of(r), r) for r in rs if r["claim_id"] == claim_id)
      eps = [e for e, _ in pts]
      est = [float(r["estimate"]) for _, r in pts]
      cap = (lambda v: v if math.isfinite(v) and (not log or v > 0) else math.nan)  # noqa: E731
      line, = ax.plot(eps, [cap(v) for v in est], "o-", ms=3, label=claim_id.split("_")[-1].upper())
      ax.fill_between(eps, [cap(float(r["low"])) for _, r in pts], [cap(float(r["high"])) for _, r in pts],
                      color=line.get_color(), alpha=0.2)
    if rs[0]["paper_range"]:
      ax.axhspan(*rs[0]["paper_range"], color="0.85", zorder=0, label="paper's range")
    ax.axhline(rs[0]["null"], color="0.5", lw=0.8)
    if log:
      ax.set_yscale("log")
    ax.set_xlabel("ε on [0, 1]", fontsize=8)
    ax.set_ylabel(SCALE_LABELS.get(rs[0]["scale"], rs[0]["scale"]), fontsize=7)
    ax.set_title(wrap(f"{rs[0].get('statement') or rs[0]['claim']} ({task})", 60), fontsize=7, loc="left")
    ax.legend(fontsize=6)
  fig.tight_layout()
  return fig


def plot_forest(rows: Sequence[dict], path) -> bool:
  """Saves ``forest_figure(rows)`` to ``path`` and ``eps_figure(rows)`` beside it (``claims_eps_grid.png``,
  removed when there is none). Returns False when no row was measured."""
  eps_path = Path(path).with_name("claims_eps_grid.png")
  curve = eps_figure(rows)
  if curve is None:
    eps_path.unlink(missing_ok=True)
  else:
    save(curve, eps_path)
  fig = forest_figure(rows)
  if fig is None:
    return False
  save(fig, path)
  return True


def headline_markdown(rows: Sequence[dict], choices: Sequence[dict] = ()) -> str:
  """The short table: each claim's primary row at the quick setting (no variant) with its kind, the verdict
  that heads it (``experiments.core.claim.heading``: the direction for a direction claim, the magnitude for a
  magnitude or equality claim, ...), its magnitude beside it, and, where the claim was measured under several
  choices, its verdict across them, naming its experiment's protocol choices that were not run (``choices``);
  rows not run are left out."""
  across = summaries(rows)
  from experiments.claims.job import experiment_of
  not_run: dict[str, list[str]] = {}
  for c in choices:
    if c.get("status") == "not run":
      not_run.setdefault(c["experiment"], []).append(c["choice"])
  lines = ["| claim | paper | ours [95 % interval] | n | kind | verdict | magnitude | across measurement choices |",
           "|---|---|---|---|---|---|---|---|"]
  for r in rows:
    if r["variant"] or not r.get("primary", True) or r["status"] == "not run":
      continue
    n = f"{r['n']} {r['unit']}" if r["status"] == "measured" else "–"
    summary = across.get((r["claim_id"], r["variant"]), "–")
    try:
      missing = not_run.get(experiment_of(r["claim_id"]), [])
    except ValueError:  # a row of an experiment this version no longer declares
      missing = []
    if missing:
      summary += "; protocol choices not run: " + "; ".join(missing)
    cells = [r["claim"], r["paper_value"], value_text(r), n, r.get("claim_kind") or "direction", _verdict_text(r),
             r["magnitude"] or "–", summary]
    lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
  return "\n".join(lines) + "\n"


def _verdict_text(row: dict) -> str:
  """The headline's verdict cell: the heading verdict; an unstable row gives its outcomes."""
  if row["direction"] == "unstable":
    return _direction_text(row)
  return heading(row)


def _choices_section(rows: Sequence[dict]) -> list[str]:
  """'## Measurement choices': each claim measured under several choices, with its verdict across them."""
  across = summaries(rows)
  if not across:
    return []
  claims = {(r["claim_id"], r["variant"]): r["claim"] for r in rows}
  return (["## Measurement choices", "",
           "Each claim below was measured under several defensible choices (★ in specification_curve.png marks "
           "the paper's own quantity); a verdict that holds or fails under every choice does not depend on "
           "them, otherwise the choices that flip it are named.", ""]
          + [f"- {claims[k]}" + (f" [{k[1]}]" if k[1] else "") + f": {text}" for k, text in across.items()] + [""])


def summary_markdown(rows: Sequence[dict], choices: Sequence[dict] = ()) -> str:
  """summary.md: the table, the reasons, the protocol choices (measured or the command to run them), the
  commands that fill the rows not run, and the verdict rules."""
  lines = ["# Claims under test", "",
           "Every headline claim of arXiv 2603.13085 (NTK non-convergence, influence malleability), arXiv "
           "2510.00517 (differential attention) and Havens et al., ICML 2024 (certification), as measured here "
           "on the embedded subsets: the paper's value (docs/theory.md#reported-figures), our setting, our "
           "value with its 95 % interval and the units behind it, and the verdict by the rules below.", "",
           "## Headline", "", "Each claim's primary row (the paper's own quantity, at the quick setting) and its verdict "
           "across the measurement choices; the full table follows.", "", headline_markdown(rows, choices),
           "## Every row", "", rows_markdown(rows), *_choices_section(rows), "## Why each verdict", "",
           *_reasons(rows), ""]
  if choices:
    lines += ["## Protocol choices, flipped one at a time from the quick setting", "",
              "The ε unit (the same workdir at ε = 0.3 on the standardised scale) and the kernel at "
              "initialisation vs trained (the width sweep's kinds) come from the quick workdirs themselves; "
              "the others need their own workdir (the next claims run reads it from DIR's subdirectories).", "",
              "| choice | experiment | status | command |", "|---|---|---|---|"]
    for c in choices:
      lines.append(f"| {c['choice']} | {c['experiment']} | {c['status']} | "
                   + (f"`{c['command']}`" if c["command"] else "(not a config field in this version)") + " |")
    lines.append("")
  not_run = [r for r in rows if r["status"] == "not run"]
  if not_run:
    lines += ["## Rows not run, and the commands that fill them", ""]
    for command in dict.fromkeys(r["command"] for r in not_run):
      ids = ", ".join(r["claim_id"] for r in not_run if r["command"] == command)
      lines.append(f"- `{command}` ({ids})")
    lines.append("")
  lines += [VERDICT_RULES, "Records: claims.jsonl (one per row). Plot: claims_forest.png.", ""]
  return "\n".join(lines)


def write_report(workdir) -> str:
  """Writes summary.md and claims_forest.png into ``workdir`` from its claims.jsonl; returns the summary.

  Raises:
    ValueError: claims.jsonl is absent.
  """
  workdir = Path(workdir)
  rows, choices = read_rows(workdir)
  drawn = plot_forest(rows, workdir / "claims_forest.png")
  curve = plot_specification_curve(rows, workdir / "specification_curve.png")
  if not curve:
    (workdir / "specification_curve.png").unlink(missing_ok=True)
  text = summary_markdown(rows, choices) + "\n".join(times_markdown(read_times(workdir)))
  if curve:
    text = text.replace("Plot: claims_forest.png.", "Plots: claims_forest.png, specification_curve.png.")
  if not drawn:  # no measured row: no plot (and none left over from an earlier run)
    (workdir / "claims_forest.png").unlink(missing_ok=True)
    text = text.replace("Plot: claims_forest.png.", "Plot: none (no row is measured yet).")
  text = stamp(text)
  (workdir / "summary.md").write_text(text)
  return text


def main(argv=None) -> None:
  report_cli("Redraw the claims table (summary.md) and forest plot.", write_report, argv,
             prog="python -m experiments.claims.report", records="claims.jsonl")


if __name__ == "__main__":
  main()
