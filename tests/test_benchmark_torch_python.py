"""The torch benchmarks' --torch-python default: this interpreter when it has the modules, else one line."""
import pathlib
import sys

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
  assert torch_interpreter.resolve(sys.executable, ("no_such_module_for_this_test",)) == sys.executable
