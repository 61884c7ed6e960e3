"""Influence of training points: NTK leave-one-out on kernel ridge regression, the classic influence
function, TracIn, flip rates under perturbation, attacks on the training rows that drive them
(``influence.malleability``), and sharpness of the minimum. Takes kernels, gradients
and loss functions as arrays/callables; never imports ``experiments``."""
from influence.flip_rate import FlipRate, flip_rate, relative_shift, top_count, top_influential
from influence.influence_function import hvp, influence_function
from influence.malleability import ATTACKS, feature_influence, perturb_rows, row_features, row_logits
from influence.ntk_loo import LOOInfluence, brute_force_loo_influence, default_ridge, ntk_loo_influence
from influence.sharpness import filter_normalized_direction, hessian_top_eigenvalues, loss_landscape
from influence.tracin import tracin

__all__ = [
    "ATTACKS", "FlipRate", "LOOInfluence", "brute_force_loo_influence", "default_ridge", "feature_influence",
    "filter_normalized_direction", "flip_rate", "hessian_top_eigenvalues", "hvp", "influence_function",
    "loss_landscape", "ntk_loo_influence", "perturb_rows", "relative_shift", "row_features", "row_logits", "top_count",
    "top_influential", "tracin",
]
