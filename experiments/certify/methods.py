"""The certification methods that ``experiments.certify.compare`` runs on the same images: their names and
labels, the pairs its report and claims compare, and where their records go (DIR/crown of a certification
workdir). Kept apart from the comparison's runner and report so that the package's claims can name them
without importing either."""
from __future__ import annotations

SUBDIR = "crown"   # the comparison's records: DIR/crown/results.jsonl
LABELS = {"lofast": "LoFAST", "crown": "CROWN", "crown_lofast": "CROWN + LoFAST",
          "crown_ibp": "CROWN (interval intermediate bounds)"}
PAPER = {"lofast": "LoFAST (paper)", "crown": "CROWN (paper)", "crown_lofast": "CROWN+LoFAST (paper)"}
PAIRS = (("crown_lofast", "crown"), ("crown", "lofast"), ("crown_lofast", "lofast"))
CROWN_NOTE = ("CROWN here is CROWN with adaptive ReLU slopes and CROWN intermediate bounds (Zhang et al., NeurIPS "
              "2018; softmax and bilinear relaxations of Shi et al., ICLR 2020), not α,β-CROWN (optimised slopes "
              "and branch and bound), whose figures the paper's crossover quotes")
