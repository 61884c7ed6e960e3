"""Bad input on the command lines and in workdirs: one clear sentence before any work, a non-zero exit, no
traceback, no partial workdir, and nothing a user computed is lost (issue #35)."""
import warnings

import pytest

from experiments import __main__ as main_job
from experiments.claims import job as claims_job
from experiments.claims import protocol
from experiments.core import cli
from experiments.core import config as config_lib
from experiments.core import report as core_report
from experiments.core.workdir import Workdir, quarantine_unreadable, read_records, removed_if_unused
from experiments.flip_rate import SPEC as FLIP_RATE


def _exit_message(capsys, fn, *args):
  with pytest.raises(SystemExit) as exit_info:
    fn(*args)
  out = capsys.readouterr()
  assert exit_info.value.code == 2, out
  assert "Traceback" not in out.err and "Errno" not in out.err
  return out


def test_the_main_job_refuses_a_file_as_workdir_before_any_work(tmp_path, capsys):
  target = tmp_path / "a_file"
  target.write_text("not a directory")
  out = _exit_message(capsys, main_job.main, ["--workdir", str(target)])
  assert f"--workdir {target} exists and is not a directory" in out.err
  assert "[1/" not in out.out  # no experiment started


def test_the_main_job_refuses_a_workdir_under_a_file(tmp_path, capsys):
  (tmp_path / "f").write_text("")
  out = _exit_message(capsys, main_job.main, ["--workdir", str(tmp_path / "f" / "run")])
  assert "exists and is not a directory" in out.err


def test_the_main_job_takes_overrides_only_with_their_experiment(tmp_path, capsys):
  out = _exit_message(capsys, main_job.main, ["--workdir", str(tmp_path / "w"), "widths=-4"])
  assert "must name its experiment, as <experiment>.<field>=value" in out.err
  assert "width_sweep, cubing, flip_rate" in out.err
  assert not (tmp_path / "w").exists()


def test_a_main_job_override_is_checked_and_named_with_its_experiment(tmp_path, capsys):
  out = _exit_message(capsys, main_job.main, ["--workdir", str(tmp_path / "w"), "width_sweep.widths=-4"])
  assert out.err.startswith("error: width_sweep: ") and "widths must be integers ≥ 1, got (-4,)" in out.err
  assert not (tmp_path / "w").exists()


def test_main_job_overrides_reach_their_experiment_only():
  configs = main_job.main_job_configs(False, ["width_sweep.widths=16,64", "flip_rate.data.n_train=256"])
  assert configs["width_sweep"].widths == (16, 64)
  assert configs["flip_rate"].data.n_train == 256
  assert configs["cubing"] == main_job.main_job_configs(False)["cubing"]


def test_a_field_given_twice_is_refused(capsys, tmp_path):
  with pytest.raises(ValueError, match=r"widths is given twice \(widths=16, widths=32\)"):
    config_lib.apply_overrides(main_job.main_job_configs(False)["width_sweep"], ["widths=16", "widths=32"])
  out = _exit_message(capsys, cli.experiment_main, FLIP_RATE, ["--workdir", str(tmp_path / "w"), "seeds=0",
                                                               "seeds=1"])
  assert "seeds is given twice" in out.err


def test_the_claims_job_protocol_commands_name_each_field_once(tmp_path):
  for choice in protocol.protocol_choices([], str(tmp_path)):
    fields = [word.split("=", 1)[0] for word in choice["command"].split() if "=" in word]
    assert len(fields) == len(set(fields)), choice["command"]


def test_a_full_data_run_without_the_data_directory_stops_before_any_work(tmp_path, capsys, monkeypatch):
  monkeypatch.delenv("ATTN_DATA_DIR", raising=False)
  out = _exit_message(capsys, cli.experiment_main, FLIP_RATE, ["--workdir", str(tmp_path / "w"), "--full"])
  assert "ATTN_DATA_DIR" in out.err and "data.source='dir'" in out.err
  assert not (tmp_path / "w").exists()
  out = _exit_message(capsys, main_job.main, ["--workdir", str(tmp_path / "m"), "--full"])
  assert "ATTN_DATA_DIR" in out.err and not (tmp_path / "m").exists()


def test_a_data_directory_that_does_not_exist_is_named(tmp_path, monkeypatch):
  monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path / "missing"))
  with pytest.raises(ValueError, match=r"ATTN_DATA_DIR='.*missing' is not a directory"):
    config_lib.check_data_available(FLIP_RATE.get_config(full=True))


def test_a_run_that_fails_before_its_first_record_leaves_no_workdir(tmp_path):
  def fail_after_config(path):
    Workdir(path / "sub", ("k",), {"lr": 1.0})  # config.json and .lock, then an error
    raise ValueError("bad data")
  with pytest.raises(ValueError):
    with removed_if_unused(tmp_path / "root"):
      fail_after_config(tmp_path / "root")
  assert not (tmp_path / "root").exists()


def test_the_cleanup_keeps_every_record_and_every_directory_that_was_there(tmp_path):
  (tmp_path / "old").mkdir()
  with pytest.raises(KeyboardInterrupt):
    with removed_if_unused(tmp_path):
      wd = Workdir(tmp_path / "done", ("k",), {"lr": 1.0})
      wd.append({"k": 1})
      Workdir(tmp_path / "empty", ("k",), {"lr": 1.0})
      raise KeyboardInterrupt
  assert (tmp_path / "old").is_dir() and [r["k"] for r in read_records(tmp_path / "done")] == [1]
  assert not (tmp_path / "empty").exists()


def _records(path, n):
  wd = Workdir(path, ("k",), {"lr": 1.0})
  for k in range(n):
    wd.append({"k": k})
  return path / "results.jsonl"


def test_a_garbage_line_in_the_middle_is_moved_aside_and_counted(tmp_path):
  results = _records(tmp_path, 3)
  lines = results.read_text().splitlines()
  results.write_text("\n".join([lines[0], "{not json", lines[1], lines[2]]) + "\n")
  with pytest.warns(RuntimeWarning, match=r"1 unreadable line\(s\) skipped, 3 records kept"):
    assert [r["k"] for r in read_records(tmp_path)] == [0, 1, 2]
  with pytest.warns(RuntimeWarning, match=r"1 unreadable line\(s\) \(9 bytes\) moved to .*corrupt-.*; 3 records kept"):
    Workdir(tmp_path, ("k",), {"lr": 1.0})
  (aside,) = tmp_path.glob("results.jsonl.corrupt-*")
  assert aside.read_text() == "{not json\n"
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    assert [r["k"] for r in read_records(tmp_path)] == [0, 1, 2]


def test_binary_garbage_is_moved_aside_without_losing_the_records(tmp_path):
  results = _records(tmp_path, 2)
  garbage = bytes(range(128, 256))
  results.write_bytes(results.read_bytes() + garbage + b"\n")
  with pytest.warns(RuntimeWarning, match=r"moved to .*corrupt-.*; 2 records kept"):
    assert quarantine_unreadable(results) is not None
  (aside,) = tmp_path.glob("results.jsonl.corrupt-*")
  assert aside.read_bytes() == garbage + b"\n"
  assert [r["k"] for r in read_records(tmp_path)] == [0, 1]


def test_binary_garbage_at_the_end_says_what_was_kept(tmp_path):
  results = _records(tmp_path, 2)
  results.write_bytes(results.read_bytes() + b"\xff\xfe\x00garbage")  # no newline: a torn tail
  with pytest.warns(RuntimeWarning, match=r"incomplete line \(10 bytes.*2 records kept"):
    Workdir(tmp_path, ("k",), {"lr": 1.0})
  assert [r["k"] for r in read_records(tmp_path)] == [0, 1]


def test_a_report_names_a_corrupt_config_file(tmp_path, capsys):
  _records(tmp_path, 1)
  (tmp_path / "config.json").write_text("{garbled")
  out = _exit_message(capsys, core_report.report_cli, "test",
                      lambda w: core_report.experiment_records(w, "flip_rate", ()), ["--workdir", str(tmp_path)])
  assert "config.json is not valid JSON" in out.err


def test_a_failed_claims_run_leaves_no_empty_sub_workdirs(tmp_path, capsys, monkeypatch):
  def refuse(*args, **kwargs):
    raise ValueError("refused by the test")
  monkeypatch.setattr(claims_job, "_run_into", lambda root, todo, what, overwrite_config: [
      Workdir(root / name, ("k",), {"x": 1}) for name, _, _ in todo] and refuse())
  out = _exit_message(capsys, claims_job.main, ["--workdir", str(tmp_path / "claims")])
  assert "refused by the test" in out.err
  assert not (tmp_path / "claims").exists()


def test_the_main_job_help_lists_the_experiment_overrides(capsys):
  with pytest.raises(SystemExit):
    main_job.main(["--help"])
  assert "<experiment>.<field>=value" in capsys.readouterr().out


def test_os_errors_are_one_line_without_errno_text(capsys):
  with pytest.raises(SystemExit) as exit_info:
    with cli.user_errors():
      raise PermissionError(13, "Permission denied", "/runs/locked/.lock")
  assert exit_info.value.code == 2
  assert capsys.readouterr().err == "error: /runs/locked/.lock: permission denied\n"


def test_warnings_print_as_one_line_on_the_command_line():
  default = warnings.formatwarning
  with cli.user_errors():
    assert warnings.formatwarning("3 records kept", RuntimeWarning, "workdir.py", 200) == "warning: 3 records kept\n"
  assert warnings.formatwarning is default


def test_a_list_with_an_empty_entry_is_refused():
  with pytest.raises(ValueError, match=r"widths='16,,32' has an empty entry"):
    config_lib.apply_overrides(main_job.main_job_configs(False)["width_sweep"], ["widths=16,,32"])


def test_another_experiments_records_are_refused_before_anything_is_written(tmp_path):
  wd = Workdir(tmp_path, ("dataset", "model", "width"), None)
  wd.append({"dataset": "mnist", "model": "relu", "width": 16})
  before = sorted(p.name for p in tmp_path.iterdir())
  with pytest.raises(ValueError, match=r"lack the field\(s\) \['n', 'seed'\].*another experiment's results"):
    Workdir(tmp_path, ("dataset", "n", "seed"), {"ns": [30]})
  assert sorted(p.name for p in tmp_path.iterdir()) == before   # no config.json written


def test_json_lines_that_are_no_record_object_are_moved_aside(tmp_path):
  results = _records(tmp_path, 2)
  results.write_text(results.read_text() + "42\n[\"a\"]\n")
  with pytest.warns(RuntimeWarning, match=r"2 unreadable line\(s\) skipped, 2 records kept"):
    assert [r["k"] for r in read_records(tmp_path)] == [0, 1]
  with pytest.warns(RuntimeWarning, match="moved to"):
    Workdir(tmp_path, ("k",), {"lr": 1.0})
  (aside,) = tmp_path.glob("results.jsonl.corrupt-*")
  assert aside.read_text() == "42\n[\"a\"]\n"


@pytest.mark.parametrize("content,message", [(b"", "is empty"), (b'{"kind": "claim"}\n42\n{garbage\n', "2 line"),
                                             (b'\x81\xff\n', "1 line")])
def test_a_damaged_or_empty_claims_file_is_refused_with_the_command_that_rebuilds_it(tmp_path, content, message):
  from experiments.claims import report as claims_report
  (tmp_path / "claims.jsonl").write_bytes(content)
  with pytest.raises(ValueError, match=message) as info:
    claims_report.read_rows(tmp_path)
  assert "--no_run rebuilds it" in str(info.value)


def test_verdict_diff_refuses_files_that_are_no_summary(tmp_path, capsys):
  from experiments.claims import verdict_diff
  (tmp_path / "a.md").write_text("| claim | paper | x |\n| c | p | holds |\n")
  (tmp_path / "results.jsonl").write_text('{"holds": 1}\n')
  (tmp_path / "bin.md").write_bytes(b"\xf5\xff")
  for other in ("results.jsonl", "bin.md", "missing.md"):
    assert verdict_diff.main([str(tmp_path / "a.md"), str(tmp_path / other)]) == 2
    assert "is not a summary.md" in capsys.readouterr().err
  assert verdict_diff.main([str(tmp_path / "a.md"), str(tmp_path / "a.md")]) == 0


# ---------------------------------------------------------------- issue 54: silent mix-ups, each reproduced


def test_main_job_widths_also_set_the_trained_widths():
  # README's own example trained L-BFGS networks at 256 and 1024 as well: widths did not reach converged.widths.
  configs = main_job.main_job_configs(False, ["width_sweep.widths=16,64"])
  assert configs["width_sweep"].converged.widths == (16, 64)
  other = config_lib.apply_overrides(configs["width_sweep"], ["widths=32,128"])
  assert other.converged.widths == (32, 128)  # none of the trained widths among them: the new ones


def test_trained_widths_set_on_their_own_stay_as_given():
  from experiments.width_sweep.config import get_config
  config = config_lib.apply_overrides(get_config(), ["widths=64", "converged.widths=16,64"])
  assert (config.widths, config.converged.widths) == ((64,), (16, 64))


@pytest.mark.parametrize("argv", [["--ful"], ["--work", "x"]])
def test_options_are_never_prefix_matched(tmp_path, capsys, argv):
  out = _exit_message(capsys, main_job.main, argv + ([] if "--work" in argv else ["--workdir", str(tmp_path / "w")]))
  assert "unrecognized arguments" in out.err or "required" in out.err


def test_records_without_their_config_are_moved_aside_unless_this_config_wrote_them(tmp_path):
  from experiments.width_sweep.config import get_config
  old, new = get_config(), config_lib.apply_overrides(get_config(), ["widths=16,64"])
  wd = Workdir(tmp_path, ("width", "seed"), old)
  wd.append(dict(width=1024, seed=0, value=1.0))
  del wd
  (tmp_path / "config.json").unlink()  # "not valid JSON; delete it", as advised
  with pytest.warns(RuntimeWarning, match="not written under this config"):
    wd = Workdir(tmp_path, ("width", "seed"), new)
  assert wd.records() == []  # the old widths are not mixed into the new run's results
  (aside,) = tmp_path.glob("previous-*")
  assert len(read_records(aside)) == 1
  wd.append(dict(width=16, seed=0, value=2.0))
  del wd
  (tmp_path / "config.json").unlink()
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    wd = Workdir(tmp_path, ("width", "seed"), new)  # written under this very config: adopted, said nothing
  assert [r["width"] for r in wd.records()] == [16]


def test_a_string_among_numbers_in_results_names_file_line_and_field(tmp_path):
  (tmp_path / "results.jsonl").write_text('{"width": 16, "d": 1.5}\n{"width": 64, "d": "oops"}\n')
  with pytest.raises(ValueError, match=r"results.jsonl, line 2: field 'd' is 'oops' where the file's other"):
    read_records(tmp_path)
  (tmp_path / "results.jsonl").write_text('{"width": 16, "d": 1.5}\n{"width": 64, "d": "nan"}\n')
  assert read_records(tmp_path)[1]["d"] != read_records(tmp_path)[1]["d"]  # the NaN encoding is no string


def test_make_embedded_says_what_directory_it_wants(tmp_path, capsys):
  from experiments.data import make_embedded
  for data_dir in (tmp_path / "missing", tmp_path):
    with pytest.raises(SystemExit) as exit_info:
      make_embedded.main(["--data_dir", str(data_dir), "--out_dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err and "--data_dir" in err and "mnist" in err


def test_diff_attention_reports_every_cross_field_error_at_once():
  from experiments.diff_attention.config import get_config
  with pytest.raises(ValueError) as info:
    config_lib.apply_overrides(get_config(), ["eps_255=1,2", "lipschitz_layer_eps_255=3", "alignment_samples=999",
                                              "crossover_eps_255=1,4"])
  message = str(info.value)
  assert message.startswith("3 fields are out of range") and "\n" not in message
  for field in ("lipschitz_layer_eps_255", "alignment_samples", "crossover_eps_255"):
    assert field in message


@pytest.mark.parametrize("name, overrides, named", [
    ("flip_rate", ["widths=0", "top_fraction=2", "data.n_train=3"], ["widths", "top_fraction", "data.n_train"]),
    ("width_sweep", ["models=x", "readout=y"], ["models", "readout"]),
    ("cubing", ["layers=0", "eps=-1"], ["layers", "eps"]),
    ("cubing", ["data.source=web", "data.split=bad"], ["data.source", "data.split"]),   # within one group
    ("landscape", ["train.optimizer=sgd", "data.holdout=0"], ["train.optimizer", "data.holdout"]),
    ("landscape", ["widths=0", "top_k=0"], ["widths", "top_k"]),
    ("report", ["sections=nothing", "top_fraction=2"], ["sections", "top_fraction"]),
    ("diff_attention", ["attack_samples=0", "apgd_restarts=0"], ["attack_samples", "apgd_restarts"]),
    ("certify", ["attention_bounds=-1", "tightness_samples=-1"], ["attention_bounds", "tightness_samples"]),
    ("clip", ["pgd_steps=-1", "attack_samples=0"], ["pgd_steps", "attack_samples"]),
    ("dual_implications", ["k=0", "ridge_scale=-1"], ["k and width", "ridge_scale"]),
])
def test_every_field_error_is_reported_in_one_run(name, overrides, named):
  """Several bad fields give one error naming each of them (not one error per run)."""
  from experiments import registry
  with pytest.raises(ValueError) as info:
    config_lib.apply_overrides(registry.get(name).get_config(), overrides)
  message = str(info.value)
  assert message.startswith(f"{len(named)} fields are out of range"), message
  for field in named:
    assert field in message, (field, message)
