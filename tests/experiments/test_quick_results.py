"""The main job's records ship with the code: results/quick holds the workdirs of one run of
``python -m experiments`` (the three experiments and their rounding-band reruns: results.jsonl and config.json),
and docs/quick_summary.md is what the main job writes from them alone, unstable marks included."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUBDIRS = ("width_sweep", "cubing", "flip_rate", "width_sweep_stability", "width_sweep_stability_isa",
           "flip_rate_stability", "flip_rate_stability_isa")


def _normalised(text: str) -> list[str]:
  """The summary's lines without the one figure that depends on the invocation (its own wall time)."""
  return [re.sub(r"this invocation took \d+ s", "this invocation took N s", line) for line in text.splitlines()]


@pytest.mark.slow  # the main job finds every point done and writes its reports: about 30 s of CPU
def test_the_committed_quick_summary_is_what_the_committed_records_rebuild(tmp_path):
  """Copies results/quick to runs/quick under a scratch directory and runs the main job there: every point is
  found done (nothing is trained), and the summary it writes must equal docs/quick_summary.md line for line (the
  invocation's wall time aside). A hand edit of the summary, records changed after it was made, or a change of
  the readers or verdict rules that moves a row fail here."""
  committed = (ROOT / "docs" / "quick_summary.md").read_text()
  assert sorted(p.name for p in (ROOT / "results" / "quick").iterdir()) == sorted(SUBDIRS)
  shutil.copytree(ROOT / "results" / "quick", tmp_path / "runs" / "quick")
  env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "OPENBLAS_CORETYPE", "ATTN_DATA_DIR")}
  env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
  done = subprocess.run([sys.executable, "-m", "experiments", "--workdir", "runs/quick"], cwd=tmp_path, env=env,
                        capture_output=True, text=True, timeout=900)
  assert done.returncode == 0, done.stderr[-3000:]
  for sub in SUBDIRS:   # nothing was computed: no record was added
    assert (tmp_path / "runs" / "quick" / sub / "results.jsonl").read_bytes() == \
        (ROOT / "results" / "quick" / sub / "results.jsonl").read_bytes(), sub
  rebuilt = (tmp_path / "runs" / "quick" / "summary.md").read_text()
  assert _normalised(rebuilt) == _normalised(committed), (
      "docs/quick_summary.md is not the main job's summary of results/quick: rerun the main job on a copy of "
      "results/quick as runs/quick and commit its summary.md (or commit the records of the run that made it)")
