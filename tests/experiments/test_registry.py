"""The registry is the only list of experiments (experiments.registry): a toy experiment registered in a test
registry is identified, run and rendered by the claims job with no other edit; the single-process guard
follows ``SPEC.single_process``; every registered spec identifies its own workdirs."""
from __future__ import annotations

import dataclasses
import fnmatch
import json

import numpy as np
import pytest

from experiments import registry
from experiments.claims import job
from experiments.core import cli, distributed
from experiments.core.report import write_summary
from experiments.core.rows import make_row, mean_interval, not_run
from experiments.core.claim import Claim, ExperimentClaims, direction_cases
from experiments.core.spec import ExperimentSpec
from experiments.core.workdir import Workdir, jsonable

TOY_KEY_FIELDS = ("seed",)


@dataclasses.dataclass(frozen=True)
class ToyConfig:
  """A toy experiment: per seed, the mean of ``n`` normal draws of mean ``shift`` (closed form: E = shift)."""
  seeds: tuple[int, ...] = tuple(range(10))
  n: int = 400
  shift: float = 1.0
  toy_tag: str = "toy"

  def validate(self, group: str = "") -> None:
    if self.n < 1:
      raise ValueError(f"n must be >= 1, got {self.n}")


def toy_run(config: ToyConfig, workdir, *, overwrite_config: bool = False) -> list[dict]:
  config.validate()
  wd = Workdir(workdir, TOY_KEY_FIELDS, config, overwrite_config=overwrite_config)
  done = wd.done()
  for seed in config.seeds:
    if (seed,) not in done:
      draws = np.random.default_rng(seed).normal(config.shift, 1.0, config.n)
      wd.append(dict(seed=seed, toy_mean=float(draws.mean()), wall_time_s=0.0))
  return wd.records()


def toy_report(workdir) -> str:
  def render(records, _):
    return f"# Toy\n\n{len(records)} seeds, mean {np.mean([r['toy_mean'] for r in records]):.3f}\n"
  return write_summary(workdir, "toy", ("toy_mean",), render)


def toy_claim_rows(sources, root, include_not_run) -> list[dict]:
  return [make_row("toy_mean", "the toy's mean is positive", "a test", "positive",
                   interval=mean_interval([r["toy_mean"] for r in s.records]), paper_sign=1,
                   variant="; ".join(s.variant)) for s in sources]


def toy_not_run(root, why) -> list[dict]:
  return [not_run("toy_mean", "the toy's mean is positive", "a test", "positive",
                  f"python -m experiments.toy --workdir {root}/toy", why)]


TOY_SPEC = ExperimentSpec(
    name="toy", description="A toy experiment.", get_config=lambda full=False: ToyConfig(), run=toy_run,
    write_report=toy_report, config_signature=("toy_tag",), record_signature=("toy_mean",),
    grid_fields=frozenset({"seeds"}), protocol_choices=(("shift: −1", ("shift=-1.0",)),))
TOY_CLAIMS = ExperimentClaims(
    claims=(Claim("toy_mean", "the toy's mean is positive", "a test", "the mean of N(shift, 1) draws", "direction",
                  "Student's t interval above 0", paper_sign=+1, cases=direction_cases()),),
    claim_rows=toy_claim_rows, not_run_rows=toy_not_run, claims_config=ToyConfig)
TOY = (TOY_SPEC, TOY_CLAIMS)


def _claims(path):
  return [json.loads(line) for line in (path / "claims.jsonl").read_text().splitlines()]


def test_a_toy_experiment_in_a_test_registry_is_run_and_rendered_by_the_claims_job(tmp_path):
  root = tmp_path / "claims"
  with registry.registered((TOY,)):
    summary = job.run_claims(root)
    records = _claims(root)
    assert job.identify(root / "toy") == "toy" and job.experiment_of("toy_mean") == "toy"
  rows = [r for r in records if r["kind"] == "claim"]
  assert [r["claim_id"] for r in rows] == ["toy_mean"]
  (row,) = rows
  # The closed form: every seed's mean is 1 ± 1/√400, so the t-interval over 10 seeds lies above 0.
  assert row["direction"] == "holds" and 0.9 < row["low"] < row["estimate"] < row["high"] < 1.1 and row["n"] == 10
  assert "the toy's mean is positive" in summary and (root / "toy" / "summary.md").read_text().startswith("# Toy")
  (choices,) = [r["choices"] for r in records if r["kind"] == "protocol_choices"]
  assert choices == [dict(choice="shift: −1", experiment="toy", overrides=["shift=-1.0"], status="not run",
                          command=f"python -m experiments.toy --workdir {root}/toy_shift shift=-1.0")]
  with pytest.raises(ValueError, match="no experiment 'toy'"):
    registry.get("toy")  # the test registry is gone with its block
  assert job.identify(root / "toy") is None


def test_a_toy_variant_stands_under_the_quick_row_and_flips_its_verdict(tmp_path):
  with registry.registered((TOY,)):
    toy_run(ToyConfig(), tmp_path / "toy")
    toy_run(ToyConfig(shift=-1.0), tmp_path / "toy_shift")
    sources = job.discover(tmp_path)
    assert sorted(s.variant for s in sources) == [(), ("shift=-1.0",)]
    rows = job.build_rows(sources, str(tmp_path))
  assert [(r["variant"], r["direction"]) for r in rows] == [("", "holds"), ("shift=-1.0", "fails")]
  assert rows[0]["protocol"] == [dict(variant="shift=-1.0", direction="fails", magnitude=None)]


def test_without_a_workdir_the_toy_rows_say_not_run_with_the_command(tmp_path):
  with registry.registered((TOY,)):
    (row,) = job.build_rows([], str(tmp_path))
  assert row["status"] == "not run" and row["command"] == f"python -m experiments.toy --workdir {tmp_path}/toy"
  assert "runs it unless --no_run" in row["reason"]


@pytest.mark.parametrize("single_process", [True, False])
def test_the_single_process_guard_follows_the_spec(tmp_path, monkeypatch, capsys, single_process):
  """A spec marked single_process refuses a second process before running a point; any other runs. The
  runner here lives in this test module, so a guard keyed on module names could not see it."""
  ran = []
  spec = dataclasses.replace(TOY_SPEC, single_process=single_process,
                             run=lambda config, workdir, overwrite_config=False: ran.append(workdir))
  monkeypatch.setattr(distributed, "initialize", lambda *args, **kwargs: 2)
  monkeypatch.setattr(distributed, "barrier", lambda *args, **kwargs: None)
  monkeypatch.setattr(distributed, "process_index", lambda: 1)  # the other process: no report
  if single_process:
    with pytest.raises(SystemExit) as e:
      cli.experiment_main(spec, ["--workdir", str(tmp_path)])
    assert e.value.code == 2 and not ran
    assert "experiments.toy runs as one process only" in capsys.readouterr().err
  else:
    cli.experiment_main(spec, ["--workdir", str(tmp_path)])
    assert ran == [str(tmp_path)]


def test_the_registered_single_process_experiments_are_those_with_orbax_checkpoints():
  assert {s.name for s in registry.experiments() if s.single_process} == {"certify", "train_vit", "diff_attention",
                                                                                  "clip"}


@pytest.mark.parametrize("spec", [s for s in registry.EXPERIMENTS if s.config_signature], ids=lambda s: s.name)
def test_every_registered_workdir_is_identified_as_its_own_experiment(spec, tmp_path):
  """A config.json of the experiment's quick config identifies it (and not an experiment earlier in the
  registry), and so does a record holding its record signature without config.json."""
  config_dir, records_dir = tmp_path / "config", tmp_path / "records"
  config_dir.mkdir()
  config = job.quick_config(spec.name)
  (config_dir / "config.json").write_text(json.dumps(jsonable(config)))
  assert job.identify(config_dir) == spec.name
  Workdir(records_dir, ("i",), {"unrelated": 1}).append({"i": 0, **{f: 1 for f in spec.record_signature}})
  (records_dir / "config.json").unlink()
  assert job.identify(records_dir) == spec.name


def test_registry_names_are_unique_and_every_claim_id_has_one_declaration():
  names = [s.name for s in registry.EXPERIMENTS]
  assert len(set(names)) == len(names)
  patterns = [(c.id, spec.name) for spec, claims in registry.with_claims() for c in claims.claims]
  for pattern, name in patterns:  # no declared id is also covered by another experiment's declaration
    concrete = pattern.replace("*", "x")
    assert [n for p, n in patterns if fnmatch.fnmatchcase(concrete, p)] == [name], pattern
  with pytest.raises(ValueError, match="duplicate"):
    with registry.registered((TOY, TOY)):
      pass


def test_every_protocol_choice_is_a_valid_override_that_changes_the_config():
  """Each registered experiment's protocol choices (the claims job's 'protocol choices not run') apply to its
  config and change it: a choice naming a field that does not exist, or one that only half reaches the grid,
  would run the unchanged experiment under the choice's name."""
  from experiments import registry
  from experiments.core.config import apply_overrides
  for spec in registry.experiments():
    base = spec.get_config()
    for name, overrides in spec.protocol_choices:
      changed = apply_overrides(base, list(overrides))
      assert changed != base, (spec.name, name)
  sweep = registry.get("width_sweep")
  (cifar,) = [o for n, o in sweep.protocol_choices if "CIFAR-10" in n]
  config = apply_overrides(sweep.get_config(), list(cifar))
  assert config.datasets == config.converged.datasets == config.train.datasets == ("cifar10",)
  (ridge,) = [o for n, o in sweep.protocol_choices if n.startswith("ridge")]
  assert apply_overrides(sweep.get_config(), list(ridge)).converged.ridge_scale == 1e-4
