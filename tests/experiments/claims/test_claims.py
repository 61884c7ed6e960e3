"""The claims report (experiments.claims, claim_rows, claims_report) on constructed records written into
temporary workdirs: the verdict rules reach holds / fails / inconclusive / inconclusive by design (fewer than 10
seeds), the flip-rate ratio is the ratio of pooled counts with the delta-t interval over seeds, paired
per-seed differences take the inverted sign-flip interval and one model's per-seed statistic Student's t,
absent experiments say "not run" with their command, and a protocol variant that changes the verdict is named
on the quick setting's row. No experiment is run."""
import dataclasses
import json

import pytest
from claim_sources import flip_records, write_workdir

from experiments.claims import job as claims
from experiments.claims import protocol
from experiments.claims import report as claims_report
from experiments.core.workdir import jsonable


def test_a_workdir_with_another_protocol_is_a_variant_row(tmp_path):
  quick = claims.quick_config("flip_rate")
  big = dataclasses.replace(quick, data=dataclasses.replace(quick.data, n_train=1000))
  write_workdir(tmp_path / "flip_rate", flip_records([3] * 10, [21] * 10), quick)
  write_workdir(tmp_path / "flip_rate_n", flip_records([10] * 10, [1] * 10), big)
  sources = claims.discover(tmp_path)
  assert sorted(s.variant for s in sources) == [(), ("data.n_train=1000",)]
  assert claims.missing_experiments(sources) == ["width_sweep", "cubing", "landscape", "dual_implications"]
  rows = [r for r in claims.build_rows(sources, str(tmp_path)) if r["claim_id"] == "flip_ratio_mnist_fgsm"]
  assert [r["variant"] for r in rows] == ["", "data.n_train=1000"]
  assert rows[0]["direction"] == "holds" and rows[1]["direction"] == "fails"
  assert rows[0]["protocol"][0]["variant"] == "data.n_train=1000"
  choice = [c for c in protocol.protocol_choices(sources, str(tmp_path)) if c["overrides"] == ["data.n_train=1000"]
            and c["experiment"] == "flip_rate"]
  assert choice[0]["status"] == "measured"

def test_absent_diff_attention_and_certify_say_not_run_with_their_command(tmp_path):
  rows = claims.build_rows([], str(tmp_path))
  by_exp = {}
  for r in rows:
    assert r["status"] == "not run" and r["direction"] == "not run" and r["command"].startswith("python -m ")
    by_exp.setdefault(claims.experiment_of(r["claim_id"]), []).append(r)
  from experiments.diff_attention.claims import DA_CLAIMS
  assert {r["claim_id"] for r in by_exp["diff_attention"]} == {c[0] for c in DA_CLAIMS}
  assert all(f"experiments.claims --workdir {tmp_path} --standard" in r["command"] for r in by_exp["diff_attention"])
  assert len(by_exp["certify"]) == 5 + 4        # LoFAST's five and the four comparisons with CROWN
  assert all("experiments.claims --workdir" in r["command"] and "--standard" in r["command"] for r in by_exp["certify"])
  assert sum(f"experiments.certify.compare --workdir {tmp_path}/certify" in r["command"] for r in by_exp["certify"]) == 4

def test_cli_no_run_writes_table_records_and_plot(tmp_path, capsys):
  write_workdir(tmp_path / "fr", flip_records([3] * 6, [21] * 6))
  claims.main(["--workdir", str(tmp_path / "claims"), "--from", str(tmp_path / "fr"), "--no_run"])
  rows, choices = claims_report.read_rows(tmp_path / "claims")
  assert {r["claim_id"] for r in rows} >= {"flip_ratio_mnist_pgd", "da_lipschitz", "certified_0.02_krylov"}
  assert choices and all(c["status"] in ("measured", "not run", "not available") for c in choices)
  text = (tmp_path / "claims" / "summary.md").read_text()
  assert "## Verdict rules" in text and "not run: `python -m experiments.claims --workdir" in text
  assert (tmp_path / "claims" / "claims_forest.png").stat().st_size > 0

@pytest.mark.parametrize("argv_tail,message", [(["--from", "MISSING"], "no such directory"),
                                               (["--from", "EMPTY"], "not a workdir")])
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv_tail, message):
  (tmp_path / "EMPTY").mkdir()
  argv = ["--workdir", str(tmp_path / "c"), "--no_run"] + [str(tmp_path / a) if a.isupper() else a for a in argv_tail]
  with pytest.raises(SystemExit) as e:
    claims.main(argv)
  err = capsys.readouterr().err.strip()
  assert e.value.code == 2 and message in err and "\n" not in err

def test_main_job_rows_render_only_what_its_runs_support(tmp_path):
  write_workdir(tmp_path / "flip_rate", flip_records([3] * 6, [21] * 6))
  text = claims.supported_rows_markdown([tmp_path / "flip_rate", tmp_path / "cubing"])
  assert "flip rate exceeds" in text and "not run" not in text and "κ(G̃)" not in text

def test_cli_workdir_that_is_a_file_is_refused(tmp_path, capsys):
  (tmp_path / "f").write_text("")
  with pytest.raises(SystemExit) as e:
    claims.main(["--workdir", str(tmp_path / "f"), "--no_run"])
  assert e.value.code == 2 and "not a directory" in capsys.readouterr().err

def test_compute_times_are_summed_per_quick_experiment_and_rendered(tmp_path):
  from experiments.claims import report as claims_report
  recs = [dict(r, wall_time_s=1.5) for r in flip_records([3] * 10, [21] * 10)]
  write_workdir(tmp_path / "flip_rate", recs)
  times = claims.compute_times(claims.discover(tmp_path))
  assert times == {"flip_rate": pytest.approx(1.5 * len(recs))}
  claims.write_rows(tmp_path, [], (), times)
  assert claims_report.read_times(tmp_path) == times
  text = "\n".join(claims_report.times_markdown(times))
  assert f"| flip_rate | {1.5 * len(recs):.0f} |" in text and "| total |" in text

def test_a_standard_flip_rate_grid_is_a_labelled_variant_not_a_second_quick_source(tmp_path, monkeypatch):
  """The standard grid has the quick protocol (no protocol field differs), so without a label its rows would
  stand as a second set of main rows; it reads as a 'standard grid' variant, and the quick config does not."""
  import dataclasses

  from experiments.flip_rate import config as flip_rate_config
  monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path))
  standard = flip_rate_config.standard_config("mnist")
  for name, config in (("standard", standard), ("quick", claims.quick_config("flip_rate")),
                       ("fewer_seeds", dataclasses.replace(standard, seeds=(0, 1)))):
    (tmp_path / name).mkdir()
    (tmp_path / name / "config.json").write_text(json.dumps(jsonable(dataclasses.asdict(config))))
    (tmp_path / name / "results.jsonl").write_text("")
  assert claims.load_source(tmp_path / "standard", "flip_rate").variant == (
      "standard grid (flip_rate_standard: 30 seeds, disjoint subsets of the full training files)",)
  assert claims.load_source(tmp_path / "quick", "flip_rate").variant == ()
  assert claims.load_source(tmp_path / "fewer_seeds", "flip_rate").variant == ()   # not the standard grid


def test_the_claims_job_runs_the_adversarial_training_flip_rate_run_when_missing(tmp_path, monkeypatch):
  """The adversarial-training row is no longer left 'not run': run_missing adds the flip-rate claims'
  extra run (adversarial_training=true) unless a source already holds that config."""
  from experiments.claims import job
  from experiments.flip_rate.claims import adversarial_training_config
  seen = []
  monkeypatch.setattr(job, "_run_into", lambda root, todo, what, overwrite_config: seen.append(
      [name for name, _, _ in todo]) or [])
  monkeypatch.setattr(job, "missing_experiments", lambda sources: [])
  job.run_missing(tmp_path, [])
  assert seen[-1] == ["flip_rate_adversarial_training"]
  from experiments.core.rows import Source
  from experiments.core.workdir import jsonable
  held = Source("flip_rate", str(tmp_path / "elsewhere"), jsonable(adversarial_training_config()), [])
  job.run_missing(tmp_path, [held])
  assert seen[-1] == []
