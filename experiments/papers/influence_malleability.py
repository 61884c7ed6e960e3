"""arXiv 2603.13085 (Miñoza, Medina, Ibañez, 2026), "Linearized Attention Cannot Enter the Kernel Regime at Any
Practical Width": its reported figures (docs/theory.md#influence-malleability-figures)."""
from __future__ import annotations

SOURCE = "arXiv 2603.13085"

# κ(G) of the pixel Gram matrix (n not stated), and the widths it implies: m ≫ 1e18 (MNIST), ≫ 1e24 (CIFAR-10).
KAPPA = {"mnist": 1.2e3, "cifar10": 8.7e3}
WIDTH_EXPONENT = {"mnist": 18.0, "cifar10": 24.0}

# NTK distance ‖f_m − f_NTK‖ by width (norm and sample size not stated).
FUNCTION_DISTANCE = {
    ("mnist", "relu"): {16: 45.1, 1024: 39.9, 4096: 39.2},
    ("mnist", "mlp_attn"): {16: 10.3, 1024: 33.3, 4096: 43.4},
    ("cifar10", "relu"): {16: 246.2, 1024: 101.7, 4096: 56.9},
    ("cifar10", "mlp_attn"): {16: 3.7, 1024: 10.4, 4096: 12.6},
}

# Flip rates in %, ε = 0.3 (unit not stated), FGSM / PGD / MIM; 10-class unless named.
EPS = 0.3
FLIP_RATES = {
    ("mnist", "relu"): (4.1, 3.3, 3.4), ("mnist", "mlp_attn"): (34.6, 28.9, 21.9),
    ("cifar10", "relu"): (3.3, 3.1, 3.2), ("cifar10", "mlp_attn"): (26.4, 19.1, 20.5),
    ("mnist_3v8", "relu"): (8.4, 8.4, 8.6), ("mnist_3v8", "mlp_attn"): (25.9, 41.0, 40.5),
    ("cifar_cars_planes", "relu"): (15.2, 15.5, 15.3), ("cifar_cars_planes", "mlp_attn"): (14.3, 14.0, 14.8),
}
RATIO_RANGE = (6.0, 9.0)  # "MLP-Attn flips 6–9× more often than 2L-ReLU"
# PGD flip rate before → after adversarial training, in %.
AT_PGD = {("mnist", "relu"): (3.3, 43.4), ("mnist", "mlp_attn"): (28.9, 42.2),
          ("cifar10", "relu"): (3.1, 36.5), ("cifar10", "mlp_attn"): (19.1, 38.6)}
