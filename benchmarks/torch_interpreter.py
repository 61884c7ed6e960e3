"""The Python interpreter that runs the PyTorch half of a benchmark (PyTorch is not a project dependency).

``--torch-python`` defaults to the running interpreter when it can import the needed modules (torch, and
torchattacks for the attack benchmarks); otherwise the benchmark says in one line how to provide one.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys

HOW_TO = ("python3 -m venv /tmp/torchref && /tmp/torchref/bin/pip install torch==2.13.0 torchattacks==3.5.1 numpy, "
          "then pass --torch-python /tmp/torchref/bin/python")


def add_argument(parser: argparse.ArgumentParser, needs: tuple[str, ...]) -> None:
  """Adds ``--torch-python`` (default: this interpreter if it imports every module in ``needs``)."""
  parser.add_argument(
      "--torch-python", default=None,
      help=f"interpreter with {' and '.join(needs)} (default: this one if it has them; 'none' skips torch)")


def resolve(value: str | None, needs: tuple[str, ...]) -> str | None:
  """The interpreter to run the torch half in, or None (after printing one line saying how to provide one).

  Args:
    value: the ``--torch-python`` argument: a path, 'none' / '' (no torch half), or None (the default).
    needs: modules the torch half imports, e.g. ("torch", "torchattacks").

  Returns:
    An executable path that imports every module in ``needs`` (checked by running it), or None when there is
    none to use.
  """
  if value is not None and value.lower() in ("", "none"):
    return None
  if value is None:
    if all(importlib.util.find_spec(name) is not None for name in needs):
      return sys.executable
    print(f"no interpreter with {' and '.join(needs)}: this one ({sys.executable}) cannot import them; {HOW_TO}",
          file=sys.stderr)
    return None
  if not (os.path.isfile(value) and os.access(value, os.X_OK)):
    print(f"--torch-python {value} is not an executable file; {HOW_TO}", file=sys.stderr)
    return None
  tried = subprocess.run([value, "-c", f"import {', '.join(needs)}"], capture_output=True, text=True)
  if tried.returncode:
    last = (tried.stderr.strip().splitlines() or ["exit status %d" % tried.returncode])[-1]
    print(f"--torch-python {value} cannot import {' and '.join(needs)} ({last}); {HOW_TO}", file=sys.stderr)
    return None
  return value


def require(value: str | None, needs: tuple[str, ...]) -> str:
  """``resolve`` for a benchmark that has nothing to run without torch: exits with status 2 and one line
  (resolve's, or one naming --torch-python none) when there is no interpreter to use."""
  path = resolve(value, needs)
  if path is None:
    if value is not None and value.lower() in ("", "none"):
      print(f"--torch-python {value!r}: this benchmark compares against {' and '.join(needs)} and has nothing "
            f"to run without them", file=sys.stderr)
    sys.exit(2)
  return path
