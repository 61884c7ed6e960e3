"""Runs every speed benchmark on this machine and writes one table (docs/performance.md, between its
``<!-- benchmarks/all.py -->`` markers), each row with the median and range over repeated runs.

  python benchmarks/all.py [--repeats 3] [--torch-python PATH] [--out docs/performance.md] [--only NAME ...]

Benchmarks (each a script of this folder, run as a subprocess ``--repeats`` times; its figures come back as
JSON lines through ``benchmarks/record.py``):

  pgd_mlp      attacks_pgd_speed.py        PGD-L∞ 10 steps, MLP 784-1024-10, batch 256, against torchattacks
  pgd_vit      attacks_pgd_vit_speed.py    PGD-L∞ 10 steps, small ViT, batch 256, against torchattacks
  pgd_diffvit  attacks_pgd_vit_speed.py    the same on the matched DiffViT, against a torch twin of it
  pgd_*_tuned  the three above under the tuned XLA:CPU settings (xla_cpu.py: TUNED_FLAGS, and for the
               ViTs one single-threaded XLA device per core, over which the attack shards its batch)
  ntk          ntk_fast_path.py            empirical NTK n = 1,000, widths 256 / 1024 / 4096, against
                                           neural-tangents' vector-product implementation
  train_seeds  train_seeds_vmap.py         10 ViT seeds as one vmapped program against one after another
                                           (train_seeds_tuned: 1 and 10 seeds under TUNED_FLAGS)
  attack_seeds attack_seeds_vmap.py        PGD-L∞ on 10 ViT seeds as one program (attacks.over_models),
                                           vmapped and mapped, against one after another
  crown_vit    crown_vit_speed.py          CROWN, CROWN + LoFAST and LoFAST per image on the certified ViT
                                           (run once: its compilation alone takes minutes; the range is
                                           over its timed images)

The torch rows need an interpreter with torch and torchattacks (``--torch-python``; PyTorch is not a project
dependency); without one they are left out and the table says so. The same scripts run unchanged on a GPU
(JAX's default device); the table names the device. A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
BEGIN, END = "<!-- benchmarks/all.py -->", "<!-- /benchmarks/all.py -->"
ONCE = {"crown_vit"}
DEFAULT_OUT = HERE.parent / "docs" / "performance.md"


def commands(torch_python: str | None) -> dict[str, list[str]]:
  py = sys.executable
  torch = ["--torch-python", torch_python] if torch_python else []
  out = {"ntk": [py, str(HERE / "ntk_fast_path.py"), "--skip_jacobian"],
         "train_seeds": [py, str(HERE / "train_seeds_vmap.py"), "--seeds", "1", "5", "10", "--images", "512",
                         "--repeats", "1"],
         "train_seeds_tuned": [py, str(HERE / "train_seeds_vmap.py"), "--seeds", "1", "10", "--images", "512",
                               "--repeats", "1", "--xla-cpu-tuned"],
         "attack_seeds": [py, str(HERE / "attack_seeds_vmap.py"), "--seeds", "10", "--repeats", "1"],
         "crown_vit": [py, str(HERE / "crown_vit_speed.py"), "--images", "3"]}
  if torch_python:
    mlp = [py, str(HERE / "attacks_pgd_speed.py"), "--rounds", "1", "--reps", "10", *torch]
    vit = [py, str(HERE / "attacks_pgd_vit_speed.py"), "--reps", "5", *torch]
    tuned = ["--devices", str(os.cpu_count()), "--xla-cpu-tuned"]
    diff = ["--attention", "differential"]
    out = {"pgd_mlp": mlp, "pgd_mlp_tuned": [*mlp, "--xla-cpu-tuned"], "pgd_vit": vit,
           "pgd_vit_tuned": [*vit, *tuned], "pgd_diffvit": [*vit, *diff], "pgd_diffvit_tuned": [*vit, *diff, *tuned],
           **out}
  return out


def _fmt(v: float) -> str:
  return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _spread(values) -> str:
  values = list(values)
  if len(values) == 1:
    return _fmt(values[0])
  return f"{_fmt(statistics.median(values))} [{_fmt(min(values))}, {_fmt(max(values))}]"


def table(lines: list[dict], repeats: int) -> list[str]:
  """Markdown rows from the benchmarks' JSON lines (median [min, max] over the runs)."""
  by = {}
  for line in lines:
    by.setdefault(line["benchmark"], []).append(line)
  rows = ["| benchmark | JAX | reference | reference / JAX (> 1: JAX faster) | JAX % of matmul peak |",
          "|---|---|---|---|---|"]
  models = {"pgd_mlp": {"standard": "MLP 784-1024-10"},
            "pgd_vit": {"standard": "small ViT (dim 64, depth 2, 4 heads, 65 tokens)",
                        "differential": "matched DiffViT (dim 64, depth 2, 2 differential heads, 65 tokens)"}}
  for name, model in models.items():
    for r in _settings(by.get(name, [])):
      label = f"PGD-L∞ 10 steps, {model[r[0].get('attention', 'standard')]}, batch 256{_setting(r[0])}"
      rows.append(f"| {label} | {_spread(x['jax_ms'] for x in r)} ms | torchattacks {_spread(x['torch_ms'] for x in r)} "
                  f"ms | {_spread(x['ratio'] for x in r)}× | {_spread(100 * x['jax_peak'] for x in r)} % |")
  for width in sorted({x["width"] for x in by.get("ntk", [])}):
    r = [x for x in by["ntk"] if x["width"] == width]
    rows.append(f"| empirical NTK, n = 1,000, width {width} | {_spread(x['fast_s'] for x in r)} s | neural-tangents "
                f"({r[0]['implementation']}) {_spread(x['nt_s'] for x in r)} s | {_spread(x['ratio'] for x in r)}× | |")
  for seeds, tuned in sorted({(x["seeds"], x.get("tuned", False)) for x in by.get("train_seeds", [])},
                             key=lambda k: (k[1], k[0])):
    r = [x for x in by["train_seeds"] if (x["seeds"], x.get("tuned", False)) == (seeds, tuned)]
    rows.append(f"| ViT training, {seeds} seed(s){_setting(r[0])}: seconds per model per epoch (512 images) | vmapped "
                f"{_spread(x['vmapped_s'] for x in r)} s | one after another {_spread(x['sequential_s'] for x in r)} s | "
                f"{_spread(x['ratio'] for x in r)}× | |")
  for r in [by["attack_seeds"]] if "attack_seeds" in by else []:
    for how, time_key, ratio_key in (("vmapped", "vmapped_s", "ratio"), ("mapped (lax.map)", "mapped_s", "map_ratio")):
      rows.append(f"| PGD-L∞ 10 steps on {r[0]['seeds']} ViT seeds, batch 128: seconds for all seeds | {how} "
                  f"{_spread(x[time_key] for x in r)} s | one after another {_spread(x['sequential_s'] for x in r)} s | "
                  f"{_spread(x[ratio_key] for x in r)}× | |")
  crown = {x["method"]: x for x in by.get("crown_vit", [])}
  for method, x in crown.items():
    rows.append(f"| {method} on the certified ViT (standard grid size): seconds per image after compilation "
                f"(compiling call {x['compile_s']:.0f} s; peak resident memory so far {x['peak_gb']:.2f} GB) | "
                f"{x['seconds']:.3g} s | | | |")
  return rows


def _settings(lines: list[dict]) -> list[list[dict]]:
  """The lines of one benchmark grouped by model and XLA setting, in a fixed order."""
  groups = {}
  for line in lines:
    groups.setdefault((line.get("attention", "standard"), line.get("tuned", False)), []).append(line)
  return [groups[k] for k in sorted(groups, key=lambda k: (k[0] != "standard", k))]


def _setting(line: dict) -> str:
  if not line.get("tuned"):
    return ""
  devices = line.get("devices", 1)
  return ", tuned XLA:CPU" + (f" ({devices} single-threaded devices)" if devices > 1 else "")


def render(lines, repeats: int, machine: str, versions: dict, torch_note: str) -> str:
  today = datetime.date.today().isoformat()
  vers = ", ".join(f"{k} {v}" for k, v in versions.items())
  return "\n".join([
      BEGIN, "", f"**Measured by `python benchmarks/all.py` on {today}**: {machine}; {vers}. Each row: the median "
      f"and [min, max] over {repeats} runs of the benchmark (the CROWN rows: one run, the range over its images is "
      f"in the script's output). {torch_note}", "", *table(lines, repeats), "", END])


def write_page(path: Path, section: str) -> None:
  """Replaces the marked section of the page, or puts it under the title and the rest under a History heading."""
  text = path.read_text() if path.exists() else "# Performance\n"
  if BEGIN in text and END in text:
    head, rest = text.split(BEGIN, 1)
    path.write_text(head + section + rest.split(END, 1)[1])
    return
  title, _, body = text.partition("\n")
  path.write_text(f"{title}\n\n{section}\n\n## History: tables of earlier runs on other machines\n{body}")


def main(argv=None) -> int:
  sys.path.insert(0, str(HERE))
  import torch_interpreter
  from experiments.core.machine import describe, one_line
  parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0].replace("\n", " "))
  parser.add_argument("--repeats", type=int, default=3, help="runs of each benchmark (default 3)")
  parser.add_argument("--out", default=str(DEFAULT_OUT),
                      help="the page whose marked section is rewritten (default: the repository's "
                           "docs/performance.md, a tracked file)")
  parser.add_argument("--only", nargs="+", default=None,
                      help="benchmark names: pgd_mlp, pgd_vit, pgd_diffvit and their *_tuned forms (these need "
                           "--torch-python), ntk, train_seeds, attack_seeds, crown_vit (default: all available)")
  torch_interpreter.add_argument(parser, ("torch", "torchattacks"))
  args = parser.parse_args(argv)
  if args.repeats < 1:
    parser.error("--repeats must be ≥ 1")
  out = Path(args.out)
  if out.is_dir() or not out.parent.is_dir():
    parser.error(f"--out must be a file in an existing directory, got {args.out}")
  if args.only and out.resolve() == DEFAULT_OUT.resolve():
    parser.error("--only runs part of the benchmarks, and its table would replace the whole run's table in "
                 f"{DEFAULT_OUT.relative_to(HERE.parent)}: give --out PATH for a partial run")
  torch_python = torch_interpreter.resolve(args.torch_python, ("torch", "torchattacks"))
  todo = commands(torch_python)
  if args.only:
    unknown = sorted(set(args.only) - set(todo))
    if unknown:
      parser.error(f"--only: unknown or unavailable benchmarks {unknown}; available: {sorted(todo)}"
                   + ("" if torch_python else " (the pgd_* benchmarks need --torch-python)"))
    todo = {k: v for k, v in todo.items() if k in args.only}
  with tempfile.TemporaryDirectory() as tmp:
    sink = Path(tmp) / "figures.jsonl"
    env = dict(os.environ, BENCHMARK_JSON=str(sink))
    failed = []
    for name, cmd in todo.items():
      for run in range(1 if name in ONCE else args.repeats):
        print(f"[{name} run {run + 1}] {' '.join(cmd[1:])}", flush=True)
        done = subprocess.run(cmd, env=env, cwd=HERE.parent)
        if done.returncode:
          print(f"{name} failed (exit {done.returncode})", file=sys.stderr)
          failed.append(name)
    lines = [json.loads(line) for line in sink.read_text().splitlines()] if sink.exists() else []
  m = describe()
  versions = dict(m["versions"])
  if torch_python:
    got = subprocess.run([torch_python, "-c", "import torch, torchattacks; print(torch.__version__, "
                          "torchattacks.__version__)"], capture_output=True, text=True).stdout.split()
    if len(got) == 2:
      versions.update(torch=got[0], torchattacks=got[1])
  note = ("" if torch_python else "No interpreter with torch and torchattacks was given, so the rows against "
          "torchattacks are left out. ") + (f"Device: {m['device']}." if m["device"] else "")
  section = render(lines, args.repeats, one_line(m), versions, note)
  print(section)
  if failed:  # a table without some of the runs is not one run's table: the page keeps its old one
    print(f"not written to {args.out}: these benchmarks failed: {', '.join(sorted(set(failed)))}", file=sys.stderr)
    return 1
  write_page(out, section)
  return 0


if __name__ == "__main__":
  sys.exit(main())
