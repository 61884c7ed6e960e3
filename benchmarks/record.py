"""One JSON line of a benchmark's figures, for ``benchmarks/all.py``: appended to the file named by the
environment variable BENCHMARK_JSON when it is set (a benchmark run by hand prints only its table)."""
from __future__ import annotations

import json
import os

ENV = "BENCHMARK_JSON"


def emit(name: str, **figures) -> None:
  """Appends {"benchmark": name, **figures} (JSON-able numbers and strings) to $BENCHMARK_JSON, if set."""
  path = os.environ.get(ENV)
  if path:
    with open(path, "a") as f:
      f.write(json.dumps({"benchmark": name, **figures}) + "\n")
