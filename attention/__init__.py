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

# Local sensitivity bounds of dot-product self-attention and certified Lipschitz ViTs (LoFAST, REFERENCE §5).
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

__all__ += [
    "CertifiedViT",
    "CertifiedViTConfig",
    "HeadConstants",
    "LayerConstants",
    "SLL",
    "SingularValueEstimate",
    "SpectralDense",
    "bound_terms",
    "bounded_norm",
    "certified_radius",
    "feature_radius",
    "fine_grained_bound",
    "forward_with_intermediates",
    "head_constants",
    "key_side_operator",
    "layer_bound",
    "layer_constants",
    "layer_radii",
    "local_bound",
    "margin_certificate",
    "max_deviation",
    "multi_head_attention",
    "naive_bound",
    "network_layer_constants",
    "query_side_operator",
    "self_attention",
    "sll",
    "spectral_normalized",
    "top_singular_value",
]
