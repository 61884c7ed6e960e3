"""Published attack settings, by name, to pass as keyword arguments (read-only mappings).

Example:
  >>> from attacks import pgd_linf, presets
  >>> result = pgd_linf(logits_fn, x, y, key=key, **presets.MADRY_MNIST_LINF)
"""
from __future__ import annotations

from types import MappingProxyType

# Madry et al., ICLR 2018, §5 and their mnist_challenge config: ε = 0.3, 40 steps of 0.01, random start.
MADRY_MNIST_LINF = MappingProxyType(dict(eps=0.3, alpha=0.01, steps=40, random_start=True))

# The common CIFAR-10 L∞ setting (docs/theory.md#pgd-linf; torchattacks' PGD defaults): ε = 8/255, α = 2/255,
# 10 steps, random start.
CIFAR10_LINF = MappingProxyType(dict(eps=8 / 255, alpha=2 / 255, steps=10, random_start=True))

# Dong et al., CVPR 2018, §4: MI-FGSM with ε = 16/255, T = 10, μ = 1 (α = ε/T is `mim`'s default).
DONG_MIM = MappingProxyType(dict(eps=16 / 255, steps=10, decay=1.0))
