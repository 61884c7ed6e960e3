"""benchmarks/xla_cpu.py: the XLA:CPU flags the speed benchmarks opt into, and the table rows they label."""
import importlib
import os
import pathlib
import subprocess
import sys

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import all as all_benchmarks  # noqa: E402
import xla_cpu  # noqa: E402


def _add_flags_in_fresh_process(existing: str, *flags: str) -> str:
  code = ("import os, sys; sys.path.insert(0, sys.argv[1]); import xla_cpu; "
          "xla_cpu.add_flags(*sys.argv[2:]); print(os.environ['XLA_FLAGS'])")
  env = dict(os.environ, XLA_FLAGS=existing)
  return subprocess.run([sys.executable, "-c", code, str(BENCHMARKS), *flags], env=env, capture_output=True,
                        text=True, check=True).stdout.strip()


def test_add_flags_appends_and_keeps_what_the_user_set():
  assert _add_flags_in_fresh_process("", *xla_cpu.TUNED_FLAGS) == " ".join(xla_cpu.TUNED_FLAGS)
  user = "--xla_cpu_experimental_ynn_fusion_type=individual_dot"
  got = _add_flags_in_fresh_process(f"--xla_cpu_max_isa=AVX {user}", *xla_cpu.TUNED_FLAGS,
                                    *xla_cpu.one_device_per_core(2))
  assert got.split() == ["--xla_cpu_max_isa=AVX", user, "--xla_force_host_platform_device_count=2",
                         "--xla_cpu_multi_thread_eigen=false"]
  for bad in (0, -1, 2.5, True, None):
    with pytest.raises(ValueError, match="devices must be an integer >= 1"):
      xla_cpu.one_device_per_core(bad)


def test_tuned_is_true_only_for_the_tuned_flags_as_they_are(monkeypatch):
  monkeypatch.setenv("XLA_FLAGS", " ".join(("--xla_cpu_max_isa=AVX", *xla_cpu.TUNED_FLAGS)))
  assert xla_cpu.tuned()
  monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_experimental_ynn_fusion_type=individual_dot")  # the user's own value
  assert not xla_cpu.tuned()
  monkeypatch.delenv("XLA_FLAGS")
  assert not xla_cpu.tuned()


def test_add_flags_refuses_once_jax_is_imported():
  importlib.import_module("jax")  # the test process has it; XLA would ignore the variable from now on
  with pytest.raises(RuntimeError, match="before the first `import jax`"):
    xla_cpu.add_flags(*xla_cpu.TUNED_FLAGS)


def test_table_names_the_model_and_the_setting_of_every_attack_row():
  line = dict(jax_ms=1000.0, torch_ms=1200.0, ratio=1.2, jax_peak=0.3)
  lines = [dict(line, benchmark="pgd_vit", attention="standard", devices=1, tuned=False),
           dict(line, benchmark="pgd_vit", attention="differential", devices=2, tuned=True),
           dict(line, benchmark="pgd_mlp", tuned=True)]
  rows = all_benchmarks.table(lines, repeats=1)[2:]
  assert len(rows) == 3
  assert "MLP 784-1024-10, batch 256, tuned XLA:CPU |" in rows[0]
  assert "small ViT (dim 64, depth 2, 4 heads, 65 tokens), batch 256 |" in rows[1]
  assert "matched DiffViT (dim 64, depth 2, 2 differential heads, 65 tokens), batch 256, tuned XLA:CPU " \
         "(2 single-threaded devices) |" in rows[2]


def test_table_gives_the_vmapped_and_the_mapped_attack_seeds_rows():
  line = dict(benchmark="attack_seeds", model="vit", seeds=10, sequential_s=6.0, vmapped_s=8.0, ratio=0.75,
              mapped_s=5.0, map_ratio=1.2, equal=True, map_equal=True)
  rows = all_benchmarks.table([line], repeats=1)[2:]
  assert len(rows) == 2
  assert "| vmapped 8 s | one after another 6 s | 0.75× |" in rows[0]
  assert "| mapped (lax.map) 5 s | one after another 6 s | 1.2× |" in rows[1]


def test_all_refuses_a_partial_run_into_the_tracked_page_and_a_bad_out_before_running(tmp_path, capsys):
  """Checked before any benchmark runs: --only into docs/performance.md (it would replace the whole table),
  an --out that is a directory or in a missing directory."""
  for argv in (["--only", "ntk"], ["--out", str(tmp_path)], ["--out", str(tmp_path / "missing" / "perf.md")]):
    with pytest.raises(SystemExit) as stop:
      all_benchmarks.main([*argv, "--torch-python", "none"])
    assert stop.value.code == 2
  err = capsys.readouterr().err
  assert "give --out PATH for a partial run" in err and err.count("--out must be a file in an existing directory") == 2


def test_all_keeps_the_page_when_a_benchmark_fails(tmp_path, monkeypatch):
  page = tmp_path / "perf.md"
  page.write_text("# Performance\n\n<!-- benchmarks/all.py -->\nold table\n<!-- /benchmarks/all.py -->\n")
  failing = {"ntk": [sys.executable, "-c", "raise SystemExit(3)"]}
  monkeypatch.setattr(all_benchmarks, "commands", lambda torch_python: failing)
  assert all_benchmarks.main(["--out", str(page), "--repeats", "1", "--torch-python", "none"]) == 1
  assert "old table" in page.read_text()
