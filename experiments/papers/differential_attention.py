"""arXiv 2510.00517 (ICLR 2026), differential attention's fragility: its reported figures
(docs/theory.md#differential-attention-figures)."""
from __future__ import annotations

SOURCE = "arXiv 2510.00517"

# Single-layer CIFAR-10, PGD at ε = 1/255: λ_init -> (attack success rate, clean accuracy); ViT clean ≈ 0.86.
SINGLE_LAYER = {"0.5": (0.4074, 0.8605), "0.8": (0.8498, 0.8700), "0.95": (0.4164, 0.8468)}
LAMBDA_ASR = {lam: asr for lam, (asr, _) in SINGLE_LAYER.items()}
