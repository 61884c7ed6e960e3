"""The torch benchmarks' --torch-python default: this interpreter when it has the modules, else one line."""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
import torch_interpreter  # noqa: E402


def test_default_is_the_running_interpreter_when_it_has_the_modules(capsys):
  assert torch_interpreter.resolve(None, ("json", "argparse")) == sys.executable
  assert capsys.readouterr().err == ""


def test_without_the_modules_it_says_in_one_line_how_to_provide_one(capsys):
  assert torch_interpreter.resolve(None, ("no_such_module_for_this_test",)) is None
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "--torch-python" in err and "pip install" in err
  assert torch_interpreter.resolve("/no/such/python", ("json",)) is None
  assert capsys.readouterr().err.count("\n") == 1
  assert torch_interpreter.resolve("none", ("json",)) is None
  assert capsys.readouterr().err == ""


def test_a_given_interpreter_without_the_modules_is_refused_before_any_work(capsys):
  assert torch_interpreter.resolve(sys.executable, ("json",)) == sys.executable
  assert torch_interpreter.resolve(sys.executable, ("no_such_module_for_this_test",)) is None
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "cannot import no_such_module_for_this_test" in err and "pip install" in err


def test_require_exits_with_one_line_for_none(capsys):
  with pytest.raises(SystemExit) as stop:
    torch_interpreter.require("none", ("torch",))
  assert stop.value.code == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "--torch-python 'none'" in err
  assert torch_interpreter.require(sys.executable, ("json",)) == sys.executable
