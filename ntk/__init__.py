"""Neural tangent kernels of the paper's models: finite width (neural-tangents and a closed-form fast
path), infinite width (neural-tangents and the arc-cosine closed form), and condition numbers."""
from ntk import _nt_compat  # noqa: F401  (first: neural-tangents on current JAX)
from ntk.analytic import arccos_nngp, arccos_ntk
from ntk.conditioning import Spectrum, condition_number, gram_spectrum
from ntk.empirical import empirical_ntk, two_layer_relu_ntk
from ntk.features import MODEL_NAMES, model_features, row_replaced_features
from ntk.models import READOUTS, Model, first_layer_weights, readout_weights, two_layer_relu

__all__ = [
    "MODEL_NAMES", "READOUTS", "Model", "Spectrum", "arccos_nngp", "arccos_ntk", "condition_number",
    "empirical_ntk", "first_layer_weights", "gram_spectrum", "model_features", "readout_weights", "row_replaced_features",
    "two_layer_relu", "two_layer_relu_ntk",
]
