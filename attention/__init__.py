"""Attention layers and their analysis: linearized attention (X Xᵀ X), differential attention and
ViT / DiffViT with gradient-alignment and Lipschitz analysis, and local sensitivity bounds with certified
Lipschitz ViTs."""
# Linearized attention X Xᵀ X (influence malleability, arXiv 2603.13085).
from attention.linearized import (
    linearized_attention,
    linearized_attention_transductive,
    normalize_rows,
    stacked_gram_power,
    stacked_linearized_attention,
)

# Differential attention, ViT / DiffViT, gradient alignment and local Lipschitz estimates
# (arXiv 2510.00517, REFERENCE §4).
from attention.alignment import (
    HeadAlignment,
    cosine_alignment,
    head_alignment,
    jacobian_gram,
    lemma1_norm,
    theorem3_predicts_da_more_sensitive,
    theorem3_threshold,
)
from attention.differential import (
    AttentionMaps,
    DifferentialAttention,
    MultiHeadSelfAttention,
    differential_combine,
    head_rms_norm,
    lambda_init_schedule,
    reparameterized_lambda,
    softmax_attention_map,
)
from attention.local_lipschitz import input_jacobian_norm, lipschitz_ratio, local_lipschitz
from attention.vit import ViTConfig, VisionTransformer, attention_maps, init_params, matched_configs, parameter_count

# Local sensitivity bounds of dot-product self-attention and certified Lipschitz ViTs (LoFAST,
# REFERENCE §5).
from attention.certification import (
    certified_radius,
    feature_radius,
    layer_constants as network_layer_constants,
    layer_radii,
    margin_certificate,
)
from attention.certified_vit import CertifiedViT, CertifiedViTConfig, forward_with_intermediates
from attention.lipschitz_layers import SLL, SpectralDense, bounded_norm, sll, spectral_normalized
from attention.operator_norm import SingularValueEstimate, top_singular_value
from attention.sensitivity import (
    HeadConstants,
    LayerConstants,
    bound_terms,
    fine_grained_bound,
    head_constants,
    key_side_operator,
    layer_bound,
    layer_constants,
    local_bound,
    max_deviation,
    multi_head_attention,
    naive_bound,
    query_side_operator,
    self_attention,
)

__all__ = [
    "AttentionMaps",
    "CertifiedViT",
    "CertifiedViTConfig",
    "DifferentialAttention",
    "HeadAlignment",
    "HeadConstants",
    "LayerConstants",
    "MultiHeadSelfAttention",
    "SLL",
    "SingularValueEstimate",
    "SpectralDense",
    "ViTConfig",
    "VisionTransformer",
    "attention_maps",
    "bound_terms",
    "bounded_norm",
    "certified_radius",
    "cosine_alignment",
    "differential_combine",
    "feature_radius",
    "fine_grained_bound",
    "forward_with_intermediates",
    "head_alignment",
    "head_constants",
    "head_rms_norm",
    "init_params",
    "input_jacobian_norm",
    "jacobian_gram",
    "key_side_operator",
    "lambda_init_schedule",
    "layer_bound",
    "layer_constants",
    "layer_radii",
    "lemma1_norm",
    "linearized_attention",
    "linearized_attention_transductive",
    "lipschitz_ratio",
    "local_bound",
    "local_lipschitz",
    "margin_certificate",
    "matched_configs",
    "max_deviation",
    "multi_head_attention",
    "naive_bound",
    "network_layer_constants",
    "normalize_rows",
    "parameter_count",
    "query_side_operator",
    "reparameterized_lambda",
    "self_attention",
    "sll",
    "softmax_attention_map",
    "spectral_normalized",
    "stacked_gram_power",
    "stacked_linearized_attention",
    "theorem3_predicts_da_more_sensitive",
    "theorem3_threshold",
    "top_singular_value",
]
