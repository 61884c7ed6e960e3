"""Every experiment's report command rebuilds its plots, derived.json and summary.md from results.jsonl
alone, and refuses an empty or another experiment's workdir with one line on stderr and exit status 2.

The finished workdirs are the golden records of each runner at its tiny config
(``tests/fixtures/golden/records.json``), written back as results.jsonl: real records, no rerun.
"""
from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest

from experiments import registry
from experiments.core.report import report_main
from experiments.core.workdir import jsonable, read_derived

GOLDEN = Path(__file__).parents[2] / "fixtures" / "golden" / "records.json"
EXPERIMENTS = ("cubing", "width_sweep", "flip_rate", "landscape", "train_vit", "diff_attention", "certify")
FOREIGN = {"cubing": "certify", "width_sweep": "flip_rate", "flip_rate": "landscape", "landscape": "flip_rate",
           "train_vit": "diff_attention", "diff_attention": "train_vit", "certify": "cubing"}
DERIVED = {"width_sweep", "flip_rate", "diff_attention"}  # reports with fitted / interval numbers


@pytest.fixture(scope="module")
def golden():
  return json.loads(GOLDEN.read_text())


def _workdir(path: Path, records) -> Path:
  path.mkdir(parents=True, exist_ok=True)
  (path / "results.jsonl").write_text("".join(json.dumps(jsonable(r)) + "\n" for r in records))
  return path


def _report(name):
  return importlib.import_module(f"experiments.{name}.report")


def _report_main(name, argv):
  report_main(registry.get(name), argv)


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_report_rebuilds_from_records_alone(name, golden, tmp_path, capsys):
  workdir = _workdir(tmp_path / name, golden[name])
  _report_main(name, ["--workdir", str(workdir)])
  summary = (workdir / "summary.md").read_text()
  assert summary.startswith("# ") and "wrote" in capsys.readouterr().out
  if name in DERIVED:
    first = read_derived(workdir)
    assert first
    (workdir / "derived.json").write_text("{}")  # a stale file is replaced on every report
    _report_main(name, ["--workdir", str(workdir)])
    assert read_derived(workdir) == first or json.dumps(jsonable(read_derived(workdir))) == json.dumps(
        jsonable(first))


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_report_errors_are_one_line_with_status_2(name, golden, tmp_path, capsys):
  empty = tmp_path / "empty"
  empty.mkdir()
  foreign = _workdir(tmp_path / "foreign", golden[FOREIGN[name]])
  for workdir, says in ((empty, "holds no records"), (foreign, "another experiment"),
                        (tmp_path / "missing", "does not exist")):
    with pytest.raises(SystemExit) as exit_info:
      _report_main(name, ["--workdir", str(workdir)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and says in err, err
    assert not (workdir / "summary.md").exists()


def test_width_sweep_derived_fits_recover_an_exact_power_law(tmp_path):
  """Records with ‖K_m − K∞‖/‖K∞‖ = 3·m^(−1/2) and ratio = 100·m^(−1/2) exactly: the fitted slopes are
  −1/2, and the ratio reaches 1 at m = 100² = 10⁴."""
  from experiments.width_sweep import report as width_sweep_report
  records = [dict(dataset="mnist", model=model, readout="fixed", width=m, seed=seed, kind="init", n_train=8,
                  n_test=4, kernel_path="fast", rel_frobenius_train=3 * m ** -0.5, spectral_ratio=100 * m ** -0.5,
                  lambda_min_inf=0.1)
             for model in ("relu", "mlp_attn") for m in (16, 64, 256) for seed in (0, 1)]
  width_sweep_report.write_report(_workdir(tmp_path, records))
  fits = read_derived(tmp_path)["fits"]
  assert len(fits) == 4
  for fit in fits:
    assert fit["slope"] == pytest.approx(-0.5, abs=1e-12) and fit["r_squared"] == pytest.approx(1.0)
    scale = 3.0 if fit["quantity"] == "rel_frobenius_train" else 100.0
    assert np.exp(fit["intercept"]) == pytest.approx(scale, rel=1e-10)
    assert fit["width_reaching_1"] == pytest.approx(scale ** 2, rel=1e-9)
  assert "1e+04" in (tmp_path / "summary.md").read_text()
