"""The same verdict words under another machine's numerics: the main job run twice on this machine, with the
default numerics and with XLA's code generation capped at AVX and OpenBLAS's Sandy Bridge kernels, gives the same
verdict word in every row, apart from rows that either run marks *unstable* (the rounding band of
``experiments.claims.stability``).

The smallest main job that still reads verdicts: the flip-rate study keeps its 10 seeds (fewer read every row
*inconclusive* by the minimum-seeds rule), on 128 training images, three ε and the PGD attack with its two
controls; the width sweep two widths. On 2 busy cores one run took 372 s of CPU (about 3.5 min on idle cores), and
its table has 51 verdict rows: *inconclusive*, *unstable*, *differs*, *matches* and *undetermined*, as the README's main
job does (whose 90 rows read no *holds* or *fails* either). CI runs it on Python 3.12 (``-m numerics``); the
README's main job itself was compared the same way by hand (docs/stability.md).
"""
import os
import subprocess
import sys

import pytest

from experiments.claims import verdict_diff

OVERRIDES = ("width_sweep.datasets=mnist", "width_sweep.widths=16,64", "width_sweep.train.max_width=64",
             "width_sweep.converged.widths=16,64", "width_sweep.data.n_train=128", "flip_rate.data.n_train=128",
             "flip_rate.eps=0,0.1,0.3", "flip_rate.attacks=pgd,random_sign,interior_sign")
AVX_ONLY = {"XLA_FLAGS": "--xla_cpu_max_isa=AVX", "OPENBLAS_CORETYPE": "Sandybridge"}


def _start_main_job(workdir, extra_env):
  """The main job with OVERRIDES into ``workdir`` under ``extra_env``, started in a child process."""
  env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "OPENBLAS_CORETYPE", "ATTN_DATA_DIR")}
  env.update(extra_env)
  log = open(workdir.parent / f"{workdir.name}.log", "w")
  return subprocess.Popen([sys.executable, "-m", "experiments", "--workdir", str(workdir), *OVERRIDES], env=env,
                          stdout=log, stderr=subprocess.STDOUT), log


@pytest.mark.numerics
def test_the_main_job_reads_the_same_verdicts_under_avx_only_numerics(tmp_path):
  """Both jobs side by side (each is a few processes that do not fill 2 cores alone)."""
  jobs = {name: _start_main_job(tmp_path / name, env) for name, env in (("default", {}), ("avx", AVX_ONLY))}
  for name, (child, log) in jobs.items():
    try:
      status = child.wait(timeout=3600)
    finally:
      log.close()
    assert status == 0, (tmp_path / f"{name}.log").read_text()[-3000:]
  default, avx = ((tmp_path / name / "summary.md").read_text() for name in jobs)
  d = verdict_diff.compare(default, avx)
  assert d.rows[0] > 40 and d.rows[0] == d.rows[1]
  assert not d.differ and not d.only_one, (d.differ, d.only_one)


def test_the_comparison_ignores_unstable_rows_and_reads_a_moving_eps_star_as_one_name():
  row = "| **claim** — ε calibrated by interpolation (ε* = {}) | p | s | 1 [0, 2] | 10 seeds | {} | – | – |"  # older labels
  a = "\n".join([row.format("0.0573", "holds"), "| other | p | s | v | n | fails | – | – |",
                 "| third | p | s | v | n | unstable (here: holds; perturb: inconclusive) | – | – |"])
  b = "\n".join([row.format("0.0582", "holds"), "| other | p | s | v | n | inconclusive | – | – |",
                 "| third | p | s | v | n | holds | – | – |"])
  d = verdict_diff.compare(a, b)
  assert d.differ == ["other"] and d.unstable == ["third"] and not d.only_one
  assert not verdict_diff.compare(a, a).differ
