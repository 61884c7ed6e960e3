"""Attention layers and their analysis: linearized attention (X Xᵀ X) and, later, differential attention
and local sensitivity bounds."""
from attention.linearized import (
    linearized_attention,
    linearized_attention_transductive,
    normalize_rows,
    stacked_gram_power,
    stacked_linearized_attention,
)

__all__ = [
    "linearized_attention",
    "linearized_attention_transductive",
    "normalize_rows",
    "stacked_gram_power",
    "stacked_linearized_attention",
]
