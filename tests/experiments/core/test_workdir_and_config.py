"""Workdir and config plumbing: results are never mixed or lost, bad values fail early and name the field."""
import json
import math

import numpy as np
import pytest

from experiments import __main__ as main_job
from experiments import registry
from experiments.core import cli
from experiments.core import config as config_lib
from experiments.core import report as core_report
from experiments.core.cli import experiment_main
from experiments.core.config import ClassifierTrainConfig
from experiments.core.workdir import Workdir, read_records
from experiments.flip_rate import config as flip_rate_config
from experiments.width_sweep import config as width_sweep_config


def test_checkpoints_count_as_results_and_move_aside_with_the_config(tmp_path):
  Workdir(tmp_path, ("k",), {"lr": 0.002})
  (tmp_path / "models" / "vit" / "checkpoints" / "2").mkdir(parents=True)  # trained, no record yet
  with pytest.raises(ValueError, match=r"different config \(fields \['lr'\]"):
    Workdir(tmp_path, ("k",), {"lr": 0.5})  # would resume the lr=0.002 checkpoints under lr=0.5
  Workdir(tmp_path, ("k",), {"lr": 0.5}, overwrite_config=True)
  (backup,) = tmp_path.glob("previous-*")
  assert (backup / "models" / "vit" / "checkpoints" / "2").is_dir()
  assert not (tmp_path / "models").exists()
  assert json.loads((backup / "config.json").read_text()) == {"lr": 0.002}
  assert json.loads((tmp_path / "config.json").read_text()) == {"lr": 0.5}


def test_two_overwrites_keep_both_old_runs(tmp_path):
  for lr in (1.0, 2.0, 3.0):
    wd = Workdir(tmp_path, ("k",), {"lr": lr}, overwrite_config=True)
    wd.append({"k": lr})
  assert sorted(read_records(b)[0]["k"] for b in tmp_path.glob("previous-*")) == [1.0, 2.0]


def _run_points(path, keys):
  """A resumable run: appends the points of ``keys`` not yet recorded (what every experiment does)."""
  wd = Workdir(path, ("k",), {"lr": 1.0})
  for k in keys:
    if (k,) not in wd.done():
      wd.append({"k": k, "loss": 1.0 / (k + 1)})


def test_a_line_torn_by_a_kill_is_moved_aside_on_resume(tmp_path):
  _run_points(tmp_path / "clean", range(4))
  clean = (tmp_path / "clean" / "results.jsonl").read_text().splitlines()
  run = tmp_path / "killed"
  _run_points(run, range(2))
  with open(run / "results.jsonl", "a") as f:  # killed half way through appending point 2
    f.write(clean[2][: len(clean[2]) // 2])
  with pytest.warns(RuntimeWarning, match=r"results\.jsonl\.torn-") as caught:
    _run_points(run, range(4))  # resume
  (torn,) = run.glob("results.jsonl.torn-*")
  assert str(torn) in str(caught[0].message)
  assert torn.read_text() == clean[2][: len(clean[2]) // 2]
  lines = (run / "results.jsonl").read_text().splitlines()
  assert len(lines) == len(clean) == 4
  assert [json.loads(line)["k"] for line in lines] == [0, 1, 2, 3]  # every line parses
  assert [r["k"] for r in read_records(run)] == [0, 1, 2, 3]


def test_a_whole_last_record_without_its_newline_is_kept(tmp_path):
  _run_points(tmp_path, range(2))
  path = tmp_path / "results.jsonl"
  path.write_text(path.read_text().rstrip("\n"))  # killed just before the newline
  _run_points(tmp_path, range(3))
  assert [json.loads(line)["k"] for line in path.read_text().splitlines()] == [0, 1, 2]
  assert not list(tmp_path.glob("*.torn-*"))


def test_non_finite_numbers_are_standard_json_and_come_back_as_floats(tmp_path):
  wd = Workdir(tmp_path, ("k",))
  wd.append({"k": 0, "scalar": float("nan"), "np_scalar": np.float32(np.inf),
             "array": np.array([1.0, np.nan, -np.inf]), "nested": {"x": [np.float64("nan")]}})
  line = (tmp_path / "results.jsonl").read_text()
  json.loads(line, parse_constant=lambda c: pytest.fail(f"non-standard JSON literal {c}"))
  (r,) = read_records(tmp_path)
  assert math.isnan(r["scalar"]) and r["np_scalar"] == math.inf and math.isnan(r["nested"]["x"][0])
  assert r["array"][0] == 1.0 and math.isnan(r["array"][1]) and r["array"][2] == -math.inf


def test_a_corrupt_config_file_is_named(tmp_path):
  (tmp_path / "config.json").write_text("{garbled")
  with pytest.raises(ValueError, match="config.json is not valid JSON"):
    Workdir(tmp_path, ("k",), {"lr": 1.0})


@pytest.mark.parametrize("name,override,match", [
    ("width_sweep", "train.lr_scale=nan", "train.lr_scale must be a finite number"),
    ("width_sweep", "train.lr_scale=inf", "train.lr_scale must be a finite number"),
    ("flip_rate", "train.learning_rates=0.01,nan", "train.learning_rates must be a finite number"),
    ("cubing", "eps=0.1,nan", "eps must be a finite number"),
    ("cubing", "seeds=0,-1", "seeds must be an integer >= 0"),
    ("width_sweep", "data.seed=-3", "data.seed must be an integer >= 0"),
    ("cubing", "datasets=mnist,mnist", "datasets holds a value twice"),
    ("cubing", "ns=50,50", "ns holds a value twice"),
    ("cubing", "data.split=bogus", "data.split must be one of"),
    ("width_sweep", "train.datasets=imagenet", "train.datasets"),
    ("width_sweep", "train.max_width=-1", "train.max_width must be >= 1"),
    ("flip_rate", "mim_steps=0", "mim_steps must be an integer >= 1"),
    ("flip_rate", "pgd_alpha=2", "pgd_alpha must be in"),
    ("train_vit", "lambda_inits=0.8,0.80", "names one λ_init twice"),
    ("train_vit", "data.source=web", "data.source must be one of"),
    ("certify", "data.n_train=0", "data.n_train must be >= 1"),
    ("width_sweep", "data.preprocessing=centered", "data.preprocessing='centered' is not supported here"),
    ("certify", "data.preprocessing=centered", "only the flip-rate and landscape experiments centre"),
    ("train_vit", "data.preprocessing=centered", "data.preprocessing='centered' is not supported here"),
])
def test_bad_values_are_rejected_by_the_parser_naming_the_field(name, override, match):
  with pytest.raises(ValueError, match=match):
    config_lib.apply_overrides(registry.get(name).get_config(), [override])


@pytest.mark.parametrize("field,value,match", [
    ("learning_rate", float("nan"), "learning_rate must be finite and > 0"),
    ("l2", float("nan"), "l2 must be finite and >= 0"),
    ("warmup_epochs", -3, "warmup_epochs must be >= 0"),
    ("batch_size", 0, "batch_size must be >= 1"),
])
def test_train_config_rejects_out_of_range_values(field, value, match):
  with pytest.raises(ValueError, match=match):
    ClassifierTrainConfig(**{field: value}).validate()


def test_user_errors_turn_ctrl_c_into_a_resume_note(capsys):
  with pytest.raises(SystemExit) as exit_info:
    with cli.user_errors():
      raise KeyboardInterrupt
  assert exit_info.value.code == 130
  assert "rerun the same command to resume" in capsys.readouterr().err


@pytest.mark.parametrize("error, message", [
    (ValueError("holds no records"), "error: holds no records"),
    (KeyError("readout"), "lack the field 'readout': is it a workdir of this experiment?"),  # another's workdir
])
def test_report_cli_errors_are_one_line_with_status_2(tmp_path, capsys, error, message):
  def write_report(workdir):
    raise error
  with pytest.raises(SystemExit) as exit_info:
    core_report.report_cli("test", write_report, ["--workdir", str(tmp_path)])
  assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_main_job_passes_overwrite_config_to_every_stage(tmp_path, monkeypatch):
  seen = {}
  monkeypatch.setattr(main_job, "_run_all", lambda root, configs, overwrite: seen.update(
      root=root, configs=configs, overwrite=overwrite) or ("", "", ""))
  main_job.main(["--workdir", str(tmp_path), "--overwrite_config"])
  assert seen == {"root": tmp_path, "configs": main_job.main_job_configs(False), "overwrite": True}


def test_a_workdir_in_use_by_another_process_is_refused(tmp_path):
  fcntl = pytest.importorskip("fcntl")
  other = open(tmp_path / ".lock", "a+")  # a separate open file: flock treats it as another job's
  fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
  with pytest.raises(ValueError, match="in use by another running job"):
    Workdir(tmp_path, ("k",), {"lr": 1.0})
  other.close()
  first = Workdir(tmp_path, ("k",), {"lr": 1.0})
  second = Workdir(tmp_path, ("k",), {"lr": 1.0})  # objects of one process share the lock
  second.append({"k": 1})
  assert first.done() == {(1,)}
  Workdir(tmp_path, ("k",), {"lr": 2.0}, overwrite_config=True)
  assert (tmp_path / ".lock").exists() and not list(tmp_path.glob("previous-*/.lock"))  # the lock stays put


def test_dotted_overrides_reach_the_nested_groups_and_are_recorded_whole(tmp_path):
  config = config_lib.apply_overrides(flip_rate_config.get_config(), ["data.n_train=512", "train.max_epochs=30",
                                                                      "train.l2=0.001"])
  assert (config.data.n_train, config.train.max_epochs, config.train.l2) == (512, 30, 0.001)
  assert config.data.n_test == flip_rate_config.get_config().data.n_test  # the rest of the group is kept
  Workdir(tmp_path, ("k",), config)
  recorded = json.loads((tmp_path / "config.json").read_text())
  assert recorded["data"]["n_train"] == 512 and recorded["train"]["l2"] == 0.001
  with pytest.raises(ValueError, match="data is a group of fields"):
    config_lib.apply_overrides(flip_rate_config.get_config(), ["data=3"])
  with pytest.raises(ValueError, match=r"unknown config field 'data.n_trian'.*'data.n_train'"):
    config_lib.apply_overrides(flip_rate_config.get_config(), ["data.n_trian=3"])
  with pytest.raises(ValueError, match="unknown config field 'tasks.x'"):
    config_lib.apply_overrides(flip_rate_config.get_config(), ["tasks.x=3"])
  with pytest.raises(ValueError, match=r"train.optimizer must be one of \('adam', 'lbfgs', 'gauss_newton'\), got 'sgd'"):
    config_lib.apply_overrides(flip_rate_config.get_config(), ["train.optimizer=sgd"]).validate()


def test_help_lists_every_dotted_field(capsys):
  with pytest.raises(SystemExit):
    experiment_main(registry.get('certify'), ["--help"])
  out = capsys.readouterr().out
  for field in ("data.n_train=None", "train.l2=0.0", "train.seed=0", "pgd.steps=20", "layer_pgd.restarts=2"):
    assert f"  {field}\n" in out, field


def test_help_lists_the_allowed_values_and_validation_agrees_with_them(capsys):
  with pytest.raises(SystemExit):
    experiment_main(registry.get('flip_rate'), ["--help"])
  out = capsys.readouterr().out
  assert "  train.optimizer=lbfgs  (one of: adam | lbfgs | gauss_newton)\n" in out
  assert "  data.preprocessing=raw  (one of: raw | centered; centered: flip_rate and landscape only)\n" in out
  for name in ("certify", "cubing", "flip_rate", "train_vit", "width_sweep"):
    config = registry.get(name).get_config()
    for field, allowed in config_lib.field_choices(config).items():
      with pytest.raises(ValueError, match=field.replace(".", r"\.")):  # outside the listed set: refused
        config_lib.apply_overrides(config, [f"{field}=bogus"]).validate()
      for value in allowed.split(";")[0].split(" | "):
        if value not in ("centered", "gauss_newton"):  # refused where they cannot apply (tested elsewhere)
          config_lib.apply_overrides(config, [f"{field}={value}"]).validate()


def test_a_workdir_of_the_flat_layout_is_refused_naming_overwrite_config(tmp_path):
  flat = {"tasks": ["mnist"], "n_train": 256, "n_test": 100, "epochs": 500, "weight_decay": 0.0}
  (tmp_path / "config.json").write_text(json.dumps(flat))
  (tmp_path / "results.jsonl").write_text('{"k": 1}\n')
  with pytest.raises(ValueError, match="--overwrite_config") as info:
    Workdir(tmp_path, ("k",), flip_rate_config.get_config())
  assert "\n" not in str(info.value) and "another layout" in str(info.value)
  assert json.loads((tmp_path / "config.json").read_text()) == flat  # untouched, not reinterpreted
  Workdir(tmp_path, ("k",), flip_rate_config.get_config(), overwrite_config=True)
  recorded = json.loads((tmp_path / "config.json").read_text())
  assert recorded["data"]["n_train"] == flip_rate_config.get_config().data.n_train
  assert [json.loads((b / "config.json").read_text()) for b in tmp_path.glob("previous-*")] == [flat]


def test_the_configs_optimizer_names_are_the_trainers():
  from ntk.criterion import (
    OPTIMIZERS,  # experiments.core.config keeps its own copy to stay free of JAX
  )
  assert config_lib.OPTIMIZERS == OPTIMIZERS


def test_gauss_newton_is_refused_at_config_time_where_it_cannot_train():
  with pytest.raises(ValueError, match=r"train.optimizer='gauss_newton'.*cross-entropy task"):
    config_lib.apply_overrides(flip_rate_config.get_config(), ["train.optimizer=gauss_newton"]).validate()
  binary = config_lib.apply_overrides(flip_rate_config.get_config(),
                                      ["train.optimizer=gauss_newton", "tasks=mnist_3v8"])
  binary.validate()  # binary tasks train on ½·MSE: allowed
  with pytest.raises(ValueError, match=r"converged.train.optimizer='gauss_newton'.*readout must be 'fixed'"):
    config_lib.apply_overrides(width_sweep_config.get_config(), ["converged.train.optimizer=gauss_newton",
                                                                 "readout=trained"]).validate()
  with pytest.raises(ValueError, match=r"converged.train.l2 = 0.001 \(must be 0\)"):
    config_lib.apply_overrides(width_sweep_config.get_config(), ["converged.train.optimizer=gauss_newton",
                                                                 "converged.train.l2=0.001"]).validate()



def test_an_empty_workdir_is_refused_and_a_directory_error_is_one_line(tmp_path, capsys, monkeypatch):
  """``--workdir ""`` would write into the current directory: refused with exit status 2. A directory where
  a file belongs (or the reverse) ends in one line too."""
  monkeypatch.chdir(tmp_path)
  with pytest.raises(SystemExit) as e:
    experiment_main(registry.get("cubing"), ["--workdir", ""])
  assert e.value.code == 2 and "--workdir must name a directory" in capsys.readouterr().err
  assert list(tmp_path.iterdir()) == []
  with pytest.raises(SystemExit) as e:
    with cli.user_errors():
      open(tmp_path)  # noqa: SIM115 (raises IsADirectoryError)
  assert e.value.code == 2 and capsys.readouterr().err.startswith("error: ")


def test_main_job_prints_every_phase_with_its_wall_time(tmp_path, monkeypatch, capsys):
  """Each experiment, each rounding-band rerun and the reports are timed and printed once: the in-process phases
  in the order run, with their shares, the older-instruction-set rerun (a child process) in the background beside
  them, not in the sum."""
  import types
  ran = []
  def spec(name, stable):
    return types.SimpleNamespace(name=name, description=name, stability=stable,
                                 run=lambda config, path, overwrite_config: ran.append(name),
                                 write_report=lambda path: f"# {name}")
  monkeypatch.setattr(main_job, "main_job_experiments", lambda: [spec("a", True), spec("b", False)])
  monkeypatch.setattr(main_job.stability, "always_modes", lambda: ("perturb", "isa"))
  monkeypatch.setattr(main_job.stability, "run_mode", lambda exp, mode, path, **kw: ran.append(f"{exp}/{mode}"))
  assert main_job._run_all(tmp_path, {"a": None, "b": None}, False) == ["# a", "# b"]
  assert [r for r in ran if r != "a/isa"] == ["a", "b", "a/perturb"] and ran.count("a/isa") == 1
  out = capsys.readouterr().out
  assert "a rerun under isa" in out and "in the background" in out
  table, background = out.split("wall time per phase")[1].split("in the background, beside the phases above:")
  lines = table.splitlines()[1:]
  assert [line.split()[0] for line in lines] == ["a", "b", "a", "waiting", "reports", "sum"]
  assert "rerun (perturb)" in lines[2]
  shares = [float(line.split()[-2]) for line in lines[:-1]]
  assert abs(sum(shares) - 100) < 0.5
  assert [line.split()[:3] for line in background.strip().splitlines()] == [["a", "rerun", "(isa)"]]
  assert main_job.phase_times_text([("x", 3.0), ("y", 1.0)]).splitlines()[1:] == [
      "  x        3.0 s   75.0 %", "  y        1.0 s   25.0 %", "  sum      4.0 s"]


def test_a_failing_background_rerun_is_raised_and_an_error_here_stops_it(tmp_path, monkeypatch):
  """A child rerun that fails reaches the main job as its error (after the work here finished); an error here
  stops the background reruns before the next one starts."""
  import types
  from experiments.claims import stability
  def failing(exp, mode, path, **kw):
    raise RuntimeError(f"{exp} under {mode} exited with status 1")
  monkeypatch.setattr(stability, "run_mode", failing)
  spec = types.SimpleNamespace(name="a", description="a", stability=True, run=lambda *a, **k: None,
                               write_report=lambda path: "# a")
  monkeypatch.setattr(main_job, "main_job_experiments", lambda: [spec])
  monkeypatch.setattr(stability, "always_modes", lambda: ("isa",))
  with pytest.raises(RuntimeError, match="a under isa exited with status 1"):
    main_job._run_all(tmp_path, {"a": None}, False)
  ran, ended = [], __import__("threading").Event()
  class Child:  # what stop() sees of a running child process
    def poll(self):
      return None
    def terminate(self):
      ended.set()
  def running(exp, mode, path, started, **kw):
    ran.append(exp)
    started(Child())
    assert ended.wait(30), "stop() did not end the running child"
  monkeypatch.setattr(stability, "run_mode", running)
  background = stability.BackgroundReruns([("x", "isa", tmp_path / "x", None), ("y", "isa", tmp_path / "y", None)])
  background.start()
  while not ran:
    __import__("time").sleep(0.01)
  background.stop()       # ends x's child; y never starts
  assert [name for name, _ in background.join()] == ["x rerun (isa)"] and ran == ["x"]
  with pytest.raises(ValueError, match="runs in this process"):
    stability.BackgroundReruns([("x", "perturb", tmp_path, None)])


def test_results_files_are_named_per_process_and_read_single_first_then_in_name_order(tmp_path):
  """Catches a moved single-process rule (``count == 1``) or a lost zero padding: one process writes
  results.jsonl, process i of P results-<i>-of-<P>.jsonl with 5 digits each, so process 10 of 12 sorts after
  process 2; ``read_records`` reads results.jsonl first, then the per-process files in that order."""
  from experiments.core import workdir as wd_lib
  assert wd_lib.results_name(0, 1) == "results.jsonl"
  assert wd_lib.results_name(0, 2) == "results-00000-of-00002.jsonl"
  assert wd_lib.results_name(10, 12) == "results-00010-of-00012.jsonl"
  for k, (i, count) in enumerate(((0, 1), (10, 12), (2, 12))):
    (tmp_path / wd_lib.results_name(i, count)).write_text(json.dumps({"k": k}) + "\n")
  assert [r["k"] for r in read_records(tmp_path)] == [0, 2, 1]


def test_a_string_among_numbers_is_named_by_its_one_based_line(tmp_path):
  """Catches an off-by-one in the line the error names (lines counted from 1) or a field check that misses the
  string: the third line's 'x' is a string where the others hold numbers; 'nan' strings decode to floats and
  are no error."""
  path = tmp_path / "results.jsonl"
  path.write_text('{"k": 1, "x": 1.5}\n{"k": 2, "x": "nan"}\n{"k": 3, "x": "1.5e"}\n')
  with pytest.raises(ValueError, match=r"results\.jsonl, line 3: field 'x' is '1\.5e'"):
    read_records(tmp_path)
  path.write_text('{"k": 1, "x": 1.5}\n{"k": 2, "x": "nan"}\n')
  assert math.isnan(read_records(tmp_path)[1]["x"])


def test_removed_if_unused_removes_new_bookkeeping_only_directories_two_levels_down(tmp_path):
  """Catches a search that stops one level short, or that removes a directory holding a result or one made
  before the block: on an error the new directories holding only config.json or the lock go, at the root's
  children and grandchildren (a grandchild emptied first, then its parent); a directory with a record, one
  that existed before and one holding a deeper directory stay."""
  from experiments.core.workdir import removed_if_unused
  root = tmp_path / "root"
  (root / "old").mkdir(parents=True)
  with pytest.raises(KeyboardInterrupt):
    with removed_if_unused(root):
      for d, name in (("a", "config.json"), ("b/c", ".lock"), ("d", "results.jsonl"), ("e/f/g", "config.json")):
        (root / d).mkdir(parents=True)
        (root / d / name).write_text("{}")
      raise KeyboardInterrupt
  assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_dir()) == [
      "d", "e", "e/f", "e/f/g", "old"]


_OK, _BAD = "ok", "bad"


@pytest.mark.parametrize("make, field, value, expected", [
    (config_lib.DataConfig, "n_train", 1, _OK), (config_lib.DataConfig, "n_train", 0, _BAD),
    (config_lib.DataConfig, "n_test", 0, _OK), (config_lib.DataConfig, "n_test", -1, _BAD),
    (config_lib.DataConfig, "seed", 0, _OK), (config_lib.DataConfig, "seed", -1, _BAD),
    (config_lib.DataConfig, "holdout", 1, _OK), (config_lib.DataConfig, "holdout", 0, _BAD),
    (config_lib.TrainConfig, "loss_target", 0.0, _OK), (config_lib.TrainConfig, "loss_target", -1e-12, _BAD),
    (config_lib.TrainConfig, "max_epochs", 1, _OK), (config_lib.TrainConfig, "max_epochs", 0, _BAD),
    (config_lib.TrainConfig, "check_every", 1, _OK), (config_lib.TrainConfig, "check_every", 0, _BAD),
    (config_lib.TrainConfig, "batch_size", 1, _OK), (config_lib.TrainConfig, "batch_size", 0, _BAD),
    (config_lib.TrainConfig, "l2", 0.0, _OK), (config_lib.TrainConfig, "l2", -1e-12, _BAD),
    (config_lib.TrainConfig, "validation_fraction", 1e-9, _OK),
    (config_lib.TrainConfig, "validation_fraction", 0.0, _BAD),
    (config_lib.TrainConfig, "validation_fraction", 1 - 1e-9, _OK),
    (config_lib.TrainConfig, "validation_fraction", 1.0, _BAD),
    (config_lib.TrainConfig, "init_perturbation", 0.0, _OK), (config_lib.TrainConfig, "init_perturbation", 0.01, _OK),
    (config_lib.TrainConfig, "init_perturbation", 0.0100001, _BAD),
    (config_lib.TrainConfig, "init_perturbation", -1e-12, _BAD),
    (config_lib.TrainConfig, "learning_rates", (1e-12,), _OK), (config_lib.TrainConfig, "learning_rates", (0.0,), _BAD),
    (config_lib.TrainConfig, "learning_rates", (), _BAD),
    (ClassifierTrainConfig, "epochs", 0, _OK), (ClassifierTrainConfig, "epochs", -1, _BAD),
    (ClassifierTrainConfig, "batch_size", 1, _OK), (ClassifierTrainConfig, "batch_size", 0, _BAD),
    (ClassifierTrainConfig, "learning_rate", 1e-12, _OK), (ClassifierTrainConfig, "learning_rate", 0.0, _BAD),
    (ClassifierTrainConfig, "l2", 0.0, _OK), (ClassifierTrainConfig, "l2", -1e-12, _BAD),
    (ClassifierTrainConfig, "warmup_epochs", 0, _OK), (ClassifierTrainConfig, "warmup_epochs", -1, _BAD),
    (ClassifierTrainConfig, "seed", 0, _OK), (ClassifierTrainConfig, "seed", -1, _BAD),
    (ClassifierTrainConfig, "max_to_keep", 1, _OK), (ClassifierTrainConfig, "max_to_keep", 0, _BAD),
    (config_lib.PlateauRule, "min_epochs", 0, _OK), (config_lib.PlateauRule, "min_epochs", -1, _BAD),
    (config_lib.PlateauRule, "window", 0, _OK), (config_lib.PlateauRule, "window", -1, _BAD),
    (config_lib.PlateauRule, "min_gain", 0.0, _OK), (config_lib.PlateauRule, "min_gain", 1.0, _OK),
    (config_lib.PlateauRule, "min_gain", 1.0000001, _BAD), (config_lib.PlateauRule, "min_gain", -1e-12, _BAD),
    (lambda **kw: config_lib.AttackBudget(**{"steps": 5, **kw}), "steps", 0, _OK),
    (lambda **kw: config_lib.AttackBudget(**{"steps": 5, **kw}), "steps", -1, _BAD),
    (lambda **kw: config_lib.AttackBudget(**{"steps": 5, **kw}), "restarts", 1, _OK),
    (lambda **kw: config_lib.AttackBudget(**{"steps": 5, **kw}), "restarts", 0, _BAD),
])
def test_each_config_range_is_accepted_on_its_edge_and_refused_just_past_it(make, field, value, expected):
  """Catches a range check with ``>`` for ``>=`` (or the reverse): every field's edge value is accepted and the
  value just past it refused, with the field named."""
  config = make(**{field: value})
  if expected == _OK:
    config.validate()
  else:
    with pytest.raises(ValueError, match=field):
      config.validate()


def test_rate_selection_and_plateau_activity_by_rule():
  """Catches a one-entry grid counted as a search (``len == 1``) or a plateau rule on at window 0: L-BFGS and
  Gauss–Newton choose no rate, a one-rate Adam grid is that rate, a longer grid follows lr_selection; the
  plateau rule is on from window 1."""
  assert config_lib.TrainConfig(optimizer="lbfgs").selection() == "none"
  assert config_lib.TrainConfig(optimizer="gauss_newton", learning_rates=(1e-3, 1e-2)).selection() == "none"
  assert config_lib.TrainConfig(learning_rates=(1e-3,)).selection() == "fixed"
  assert config_lib.TrainConfig(learning_rates=(1e-3, 1e-2)).selection() == "per_point"
  assert config_lib.TrainConfig(learning_rates=(1e-3, 1e-2), lr_selection="per_model_dataset").selection() == \
      "per_model_dataset"
  assert not config_lib.PlateauRule(window=0).active and config_lib.PlateauRule(window=1).active
