"""Havens et al., ICML 2024 (LoFAST), fine-grained local sensitivity of dot-product self-attention: its
reported figures (docs/theory.md#lofast-figures), a 3-layer ViT on CIFAR-10, certified ℓ2 accuracy in %."""
from __future__ import annotations

SOURCE = "Havens et al., ICML 2024"

CERTIFIED = {
    "LoFAST (paper)": {0.02: 29.1, 0.05: 16.0},
    "α,β-CROWN (paper)": {0.02: 41.2, 0.05: 14.1},
    "CROWN+LoFAST (paper)": {0.05: 20.03},
    "CROWN (paper)": {0.05: 14.35},
}
# Seconds per sample on CIFAR-10 (the paper's summary names no hardware): LoFAST alone, CROWN alone and
# CROWN + LoFAST (SVHN: CROWN 5.68, CROWN + LoFAST 1.44).
SECONDS_PER_SAMPLE = {"LoFAST": 0.055, "CROWN": 4.33, "CROWN + LoFAST": 1.71}
LOFAST_CERTIFIED = {eps: pct / 100 for eps, pct in CERTIFIED["LoFAST (paper)"].items()}  # as fractions
STRICT_ALPHA = 0.25  # the attention-norm bound ‖A_h‖₂ ≤ 0.25 that "hurts clean accuracy more than it helps"
