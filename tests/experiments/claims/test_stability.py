"""The claims job's stability pass (experiments.claims.stability): reruns read against the first run, the modes'
environments, and a verdict that moves under any mode marked unstable with every outcome."""
import dataclasses
import math
import os
import subprocess
import sys

import pytest
from claim_sources import flip_records, main_row, write_workdir

from experiments.claims import job as claims
from experiments.claims import stability


def _rows_with_stability(root, modes=("perturb",)):
  sources = claims.discover(root)
  return stability.apply_stability(claims.build_rows(sources, str(root)), root, sources,
                                   rerun_rows=claims.rerun_rows, run=False, modes=modes)


def test_a_rerun_that_agrees_keeps_the_verdict_and_records_it(tmp_path):
  write_workdir(tmp_path / "flip_rate", flip_records([3] * 10, [21] * 10))
  write_workdir(tmp_path / "flip_rate_stability", flip_records([3] * 10, [21] * 10))
  row = main_row(_rows_with_stability(tmp_path), "flip_ratio_mnist_pgd")
  assert row["direction"] == "holds" and row["magnitude"] == "matches"
  assert row["stability"] == {"perturb": "holds"}
  # the reruns are never read as sources of their own
  assert all(not stability.is_rerun_dir(os.path.basename(s.path)) for s in claims.discover(tmp_path))


def test_a_verdict_that_moves_under_one_mode_is_unstable_with_every_outcome(tmp_path):
  write_workdir(tmp_path / "flip_rate", flip_records([3] * 10, [21] * 10))
  write_workdir(tmp_path / "flip_rate_stability", flip_records([3] * 10, [21] * 10))  # perturb: agrees
  write_workdir(tmp_path / "flip_rate_stability_isa", flip_records([3] * 10, [6] * 10))  # 2×: holds, below the band
  row = main_row(_rows_with_stability(tmp_path, modes=("perturb", "isa", "serial")), "flip_ratio_mnist_pgd")
  assert row["direction"] == "unstable" and row["magnitude"] is None
  assert "holds, matches" in row["reason"] and "holds, differs" in row["reason"] and "under isa" in row["reason"]
  assert "under perturb" not in row["reason"]  # only the modes that moved it are named
  assert row["stability"] == {"perturb": "holds", "isa": "holds", "serial": None}
  assert row["estimate"] == 7.0  # the first run's figures stay


def test_a_perturbed_rerun_with_its_config_is_compared_not_labelled_a_variant(tmp_path):
  """The perturbation in the rerun's config.json is no protocol variant: reading it as one gave every rerun
  row another label, so no row was ever compared (the pass could not find a change)."""
  config = stability.stability_config("flip_rate")
  assert config.train.init_perturbation == stability.PERTURBATION
  write_workdir(tmp_path / "flip_rate", flip_records([3] * 10, [21] * 10), claims.quick_config("flip_rate"))
  write_workdir(tmp_path / "flip_rate_stability", flip_records([3, 20] * 5, [3, 21] * 5), config)
  row = main_row(_rows_with_stability(tmp_path), "flip_ratio_mnist_pgd")
  assert row["direction"] == "unstable"
  # 10 seeds each: the data's; the perturbed run's 2L-ReLU flips half its top set, so its ratio's ceiling lies
  # below the paper's 6× and no magnitude is read there (the ceiling rule)
  assert "holds, matches" in row["reason"] and "inconclusive (the interval" in row["reason"]


def test_stability_configs_perturb_only_the_initial_parameters():
  for name in stability.stability_experiments():
    quick, perturbed = claims.quick_config(name), stability.stability_config(name)
    assert stability.stability_config(name, 0.0) == quick
    train = perturbed.converged.train if name == "width_sweep" else perturbed.train
    assert train.init_perturbation == stability.PERTURBATION
    fixed = (dataclasses.replace(perturbed, converged=dataclasses.replace(perturbed.converged, train=quick.converged.train))
             if name == "width_sweep" else dataclasses.replace(perturbed, train=quick.train))
    assert fixed == quick


def test_mode_environments_change_only_what_they_name():
  base = {"XLA_FLAGS": "--xla_dump_to=/tmp/x", "PATH": "/bin"}
  serial = stability.mode_environment(stability.mode("serial"), base)
  assert serial["XLA_FLAGS"] == "--xla_dump_to=/tmp/x --xla_cpu_multi_thread_eigen=false"
  assert serial["OPENBLAS_NUM_THREADS"] == "1" and serial["PATH"] == "/bin"
  isa = stability.mode_environment(stability.mode("isa"), {}, cpu_flags=AVX512_CPU)
  assert isa["XLA_FLAGS"] == "--xla_cpu_max_isa=AVX" and isa["OPENBLAS_CORETYPE"] == "Sandybridge"
  assert isa["NPY_DISABLE_CPU_FEATURES"]  # numpy's dispatched targets, whatever this numpy calls them
  assert stability.mode_environment(stability.mode("perturb"), base) == base
  assert "--xla_force_host_platform_device_count=2" in stability.mode_environment(stability.mode("devices"), {})["XLA_FLAGS"]


AVX512_CPU = {"sse4_2", "avx", "avx2", "fma", "avx512f"}
AVX_CPU = {"sse4_2", "avx"}


@pytest.mark.parametrize("cpu, xla_flags, current, lower", [
    (AVX512_CPU, "", "AVX512", ("AVX", "Sandybridge")),
    ({"sse4_2", "avx", "avx2", "fma"}, "", "AVX2", ("AVX", "Sandybridge")),
    (AVX_CPU, "", "AVX", ("SSE4_2", "Nehalem")),
    # a process already capped (the other machine of a comparison) reruns one step further down
    (AVX512_CPU, "--xla_dump_to=/tmp --xla_cpu_max_isa=AVX", "AVX", ("SSE4_2", "Nehalem")),
    (AVX512_CPU, "--xla_cpu_max_isa=avx2", "AVX2", ("AVX", "Sandybridge")),
    (AVX_CPU, "--xla_cpu_max_isa=AVX512", "AVX", ("SSE4_2", "Nehalem")),  # a cap above the CPU changes nothing
    (AVX512_CPU, '--xla_cpu_max_isa="AVX"', "AVX", ("SSE4_2", "Nehalem")),  # XLA strips the quotes, so do we
    (AVX512_CPU, "--xla_cpu_max_isa=AVX10", "AVX512", ("AVX", "Sandybridge")),  # XLA ignores unknown names
    (AVX512_CPU, "--xla_cpu_max_isa=AVX512_VNNI", "AVX512", ("AVX", "Sandybridge")),
])
def test_the_isa_mode_always_runs_an_older_instruction_set_than_this_process(cpu, xla_flags, current, lower):
  assert stability.current_isa(xla_flags, cpu) == current
  assert stability.lower_isa(xla_flags, cpu) == lower
  env = stability.mode_environment(stability.mode("isa"), {"XLA_FLAGS": xla_flags}, cpu_flags=cpu)
  assert env["XLA_FLAGS"].split()[-1] == f"--xla_cpu_max_isa={lower[0]}" and env["OPENBLAS_CORETYPE"] == lower[1]
  # the child reads its own environment: what it runs is older than what this process ran
  assert stability.current_isa(env["XLA_FLAGS"], cpu) == lower[0] != current


@pytest.mark.parametrize("cpu, xla_flags", [({"sse4_2"}, ""), (AVX512_CPU, "--xla_cpu_max_isa=SSE4_2"), (set(), "")])
def test_no_older_instruction_set_is_refused_and_the_serial_mode_stands_in(cpu, xla_flags, monkeypatch):
  with pytest.raises(ValueError, match="isa.*perturb, serial or devices"):
    stability.lower_isa(xla_flags, cpu)
  monkeypatch.setattr(stability, "_cpu_flags", lambda: cpu)
  monkeypatch.setenv("XLA_FLAGS", xla_flags)
  with pytest.warns(UserWarning, match="serial mode instead"):
    assert stability.always_modes() == ("perturb", "serial")


def test_every_run_reads_its_verdicts_against_a_perturbed_and_an_older_isa_rerun(monkeypatch):
  monkeypatch.setattr(stability, "_cpu_flags", lambda: AVX512_CPU)
  monkeypatch.delenv("XLA_FLAGS", raising=False)
  assert stability.always_modes() == ("perturb", "isa")


def test_a_child_rerun_runs_the_config_it_is_given(tmp_path, monkeypatch):
  """The main job's isa rerun is of its own (possibly overridden) config, passed to the child pickled."""
  calls = []
  class Child:
    def __init__(self, cmd, env, stdout, stderr):
      calls.append(cmd)
      self.out = stdout
    def wait(self):
      self.out.write("child output\n")
      return 0
  monkeypatch.setattr(stability.subprocess, "Popen", Child)
  config = dataclasses.replace(claims.quick_config("flip_rate"), eps=(0.0, 0.1))
  stability.run_mode("flip_rate", "serial", tmp_path / "rerun", config=config, log=tmp_path / "rerun" / "x.log")
  assert (tmp_path / "rerun" / "x.log").read_text() == "child output\n"   # a log gets the child's output
  assert calls[0][-1] == "--config_pickle"
  import pickle
  assert pickle.loads((tmp_path / "rerun" / stability.CONFIG_PICKLE).read_bytes()) == config
  captured = []
  monkeypatch.setattr(stability, "_rerun", lambda *a: captured.append(a))
  stability.main(calls[0][3:])
  assert captured[0][4] == config and captured[0][2].name == "serial"


def test_the_isa_environment_really_turns_numpy_dispatch_off():
  env = stability.mode_environment(stability.mode("isa"))
  code = ("import numpy as np\ntry:\n from numpy._core._multiarray_umath import __cpu_features__ as f, __cpu_dispatch__ as d\n"
          "except ImportError:\n from numpy.core._multiarray_umath import __cpu_features__ as f, __cpu_dispatch__ as d\n"
          "print(any(f[k] for k in d))")
  out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
  assert out.stdout.strip() == "False"


@pytest.mark.parametrize("text, expected", [("all", stability.MODE_NAMES), ("isa", ("isa",)),
                                            ("serial, devices", ("serial", "devices"))])
def test_parse_modes(text, expected):
  assert stability.parse_modes(text) == expected


@pytest.mark.parametrize("text", ["", "fast", "isa,isa", ","])
def test_parse_modes_refuses_unknown_repeated_or_no_modes(text):
  with pytest.raises(ValueError, match="perturb"):
    stability.parse_modes(text)


def test_rerun_directory_names():
  assert stability.workdir_name("flip_rate", "perturb") == "flip_rate_stability"
  assert stability.workdir_name("landscape", "isa") == "landscape_stability_isa"
  assert all(stability.is_rerun_dir(stability.workdir_name(e, m)) for e in stability.stability_experiments()
             for m in stability.MODE_NAMES)
  assert not stability.is_rerun_dir("flip_rate") and not stability.is_rerun_dir("flip_rate_stability_fast")


def test_a_row_measured_here_but_not_under_a_mode_is_unstable(tmp_path):
  """As the sharpness rows on another CPU: measured on one machine, 'not measured' on the other."""
  write_workdir(tmp_path / "flip_rate", flip_records([3] * 10, [21] * 10))
  converged = lambda seed, model: model == "relu"  # noqa: E731  (MLP-Attn never reaches the criterion)
  write_workdir(tmp_path / "flip_rate_stability_serial", flip_records([3] * 10, [21] * 10, converged=converged))
  row = main_row(_rows_with_stability(tmp_path, modes=("serial",)), "flip_ratio_mnist_pgd")
  assert row["status"] == "measured" and row["direction"] == "unstable"
  assert "not measured" in row["reason"] and row["stability"] == {"serial": "not measured"}


def _row(measurement, low, high, *, measurement_id="", estimate=None):
  from experiments.core import rows
  from experiments.core.verdicts import Interval
  iv = Interval((low + high) / 2 if estimate is None else estimate, low, high, 0.95, 10, "seeds", "student_t")
  return rows.make_row("c", "the claim", "src", "p", interval=iv, paper_sign=+1, null=0.0, scale="difference",
                       measurement=measurement, measurement_id=measurement_id)


def _apply(rows, reruns, tmp_path):
  """apply_stability on ``rows`` with one perturb rerun whose rows are ``reruns`` (no workdir is read)."""
  (tmp_path / "flip_rate_stability").mkdir(exist_ok=True)
  source = claims.Source("flip_rate", str(tmp_path / "flip_rate"), {}, [])
  return stability.apply_stability(rows, tmp_path, [source], rerun_rows=lambda path, exp, variant: reruns,
                                   run=False, modes=("perturb",))


def test_rows_of_different_measurement_choices_are_never_matched_with_each_other(tmp_path):
  here = [_row("ε = 0.1", 0.2, 0.4), _row("ε = 0.3", -0.1, 0.3)]
  rerun = [_row("ε = 0.3", -0.1, 0.3), _row("ε = 0.1", 0.2, 0.4)]   # the same outcomes, in the other order
  out = _apply([dict(r) for r in here], rerun, tmp_path)
  assert [r["direction"] for r in out] == ["holds", "inconclusive"]
  moved = [_row("ε = 0.1", 0.2, 0.4), _row("ε = 0.3", 0.05, 0.3)]   # only ε = 0.3 moves (to holds)
  out = _apply([dict(r) for r in here], moved, tmp_path)
  assert [r["direction"] for r in out] == ["holds", "unstable"]


def test_a_row_still_matches_when_its_calibrated_eps_moves(tmp_path):
  """The calibrated ε* is in the measurement text and moves with the numerics; the row is matched by its
  measurement_id, so a verdict that moves with it is marked, not dropped from the comparison."""
  here = _row("ε calibrated by interpolation (ε* = 0.0573)", 0.02, 0.12, measurement_id="ε calibrated")
  rerun = _row("ε calibrated by interpolation (ε* = 0.0582)", -0.08, 0.12, measurement_id="ε calibrated")
  (row,) = _apply([dict(here)], [rerun], tmp_path)
  assert row["direction"] == "unstable" and row["stability"] == {"perturb": "inconclusive"}
  assert stability.row_key(here) == stability.row_key(rerun)


def test_a_verdict_inside_the_rounding_band_is_unstable(tmp_path):
  """Both runs hold, but the low end moved by 0.03 between them and sits 0.04 above 0: widened by twice the
  move it would contain 0, so another machine could read inconclusive. A low end 0.2 above 0 with the same
  move keeps its verdict."""
  (near,) = _apply([dict(_row("ε = 0.1", 0.04, 0.3))], [_row("ε = 0.1", 0.07, 0.31)], tmp_path)
  assert near["direction"] == "unstable" and "rounding band" in near["reason"]
  assert near["stability_outcomes"] == {"here": "holds", "perturb": "holds", "rounding band": "inconclusive"}
  assert near["stability_band"] == pytest.approx([0.04 - 2 * 0.03, 0.3 + 2 * 0.01])
  (far,) = _apply([dict(_row("ε = 0.1", 0.2, 0.5))], [_row("ε = 0.1", 0.23, 0.51)], tmp_path)
  assert far["direction"] == "holds" and "stability_band" not in far


def test_the_rounding_band_of_a_ratio_is_on_the_log_scale():
  from experiments.core.verdicts import Interval, stability_band
  iv = Interval(2.0, 1.2, 3.0, 0.95, 10, "seeds", "pooled")
  widened, move_lo, move_hi = stability_band(iv, [iv._replace(low=1.5, high=3.0)], "ratio")
  assert move_lo == pytest.approx(abs(math.log(1.5) - math.log(1.2))) and move_hi == 0.0
  assert widened.low == pytest.approx(1.2 * (1.2 / 1.5) ** 2) and widened.high == pytest.approx(3.0, rel=1e-15)
  assert stability_band(iv._replace(low=-math.inf), [iv], "ratio")[0].low == -math.inf   # nothing to widen


def test_reruns_beside_a_from_workdir_are_read_as_its_reruns(tmp_path):
  """A table rebuilt with --from from committed workdirs (results/...) reads the reruns committed beside them:
  the same moved verdict is unstable whether the reruns lie under the job's workdir or beside the source."""
  committed = tmp_path / "results" / "mnist"
  write_workdir(committed, flip_records([3] * 10, [21] * 10))
  write_workdir(tmp_path / "results" / "mnist_stability_isa", flip_records([3] * 10, [6] * 10))
  root = tmp_path / "job"
  sources = claims.discover(root, [committed])
  assert [os.path.basename(s.path) for s in sources] == ["mnist"]
  assert stability.rerun_dir(root, sources[0], "isa") == tmp_path / "results" / "mnist_stability_isa"
  assert stability.rerun_dir(root, sources[0], "perturb") is None
  rows = stability.apply_stability(claims.build_rows(sources, str(root)), root, sources, rerun_rows=claims.rerun_rows,
                                   run=False, modes=("perturb", "isa"))
  row = main_row(rows, "flip_ratio_mnist_pgd")
  assert row["direction"] == "unstable" and row["stability"] == {"perturb": None, "isa": "holds"}
  # one under the job's workdir comes first
  write_workdir(root / "flip_rate_stability_isa", flip_records([3] * 10, [21] * 10))
  assert stability.rerun_dir(root, sources[0], "isa") == root / "flip_rate_stability_isa"


def test_the_claims_job_runs_its_child_process_reruns_beside_the_in_process_one(tmp_path, monkeypatch):
  """Every (mode, experiment with a source) is rerun once: perturb here, in order; isa and serial in the
  background, each with its output in its workdir's rerun.log; an experiment without a source is not rerun."""
  import threading
  from experiments.core.rows import Source
  calls = []
  def fake(experiment, name, path, **kw):
    calls.append((experiment, name, path.name, kw.get("log"), threading.current_thread() is threading.main_thread()))
  monkeypatch.setattr(stability, "run_mode", fake)
  monkeypatch.setattr(stability, "stability_experiments", lambda: ("flip_rate", "width_sweep"))
  stability.run_reruns(tmp_path, [Source("flip_rate", str(tmp_path / "flip_rate"), {}, [])],
                       ("perturb", "isa", "serial"))
  assert sorted(c[:3] for c in calls) == [("flip_rate", "isa", "flip_rate_stability_isa"),
                                          ("flip_rate", "perturb", "flip_rate_stability"),
                                          ("flip_rate", "serial", "flip_rate_stability_serial")]
  here = [c for c in calls if c[4]]
  assert [c[1] for c in here] == ["perturb"] and here[0][3] is None
  assert all(c[3] == tmp_path / c[2] / stability.RERUN_LOG for c in calls if not c[4])
  assert [c[1] for c in calls if not c[4]] == ["isa", "serial"]     # one after the other, in the order asked
