"""The README's first-try settings (experiments.first_try): every experiment has one, each is a valid setting
of that experiment, and each runs. The settings of diff_attention, clip, certify and dual_implications are
run by those experiments' own tests (they import SETTINGS); the other four run here."""
import pytest

from experiments import registry
from experiments.core.config import apply_overrides
from experiments.first_try import SETTINGS
from experiments.first_try.__main__ import main

RUN_ELSEWHERE = ("diff_attention", "clip", "certify", "dual_implications")


def test_every_experiment_with_a_command_has_a_first_try_setting():
  assert set(SETTINGS) == {s.name for s in registry.experiments() if s.name != "report"}  # report takes a model


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_each_setting_is_valid(name):
  apply_overrides(registry.get(name).get_config(), list(SETTINGS[name]))


@pytest.mark.long   # 10–20 s each on idle cores, compilation mostly: the suite keeps the four run elsewhere
@pytest.mark.parametrize("name", [n for n in SETTINGS if n not in RUN_ELSEWHERE])
def test_the_first_try_runs_and_writes_its_summary(name, tmp_path, capsys):
  assert main([name, "--root", str(tmp_path)]) == 0
  assert (tmp_path / name / "summary.md").is_file() and (tmp_path / name / "results.jsonl").is_file()
  assert f"python -m experiments.{name} --workdir" in capsys.readouterr().out


def test_an_unknown_name_is_refused(capsys):
  with pytest.raises(SystemExit):
    main(["widthsweep"])
  assert "invalid choice" in capsys.readouterr().err
