"""Influence malleability for any model: NTK leave-one-out influence at fixed parameters, and how it moves
when each training point is attacked against its own loss.

The paper's measure (arXiv 2603.13085 §5; docs/theory.md#flip-rate), for a model given only as a kernel
function and a logits function:
  1. I = NTK-LOO influence of the n training points on the t test points (``influence.ntk_loo``), with the
     empirical NTK of the model at its (fixed) parameters;
  2. each training image is attacked against its own label under the model's logits
     (``influence.malleability.perturb_rows``: FGSM, PGD-L∞, MIM, or the random-sign control of the same
     L∞ size) — for a model whose logits of one input depend only on that input this is the per-row
     attack of the paper;
  3. the kernel is recomputed at the perturbed training images (test images unchanged), the influence
     recomputed with the same parameters and labels, and the flip rate of the top-τ influential points
     and Spearman ρ recorded (``influence.flip_rate``).
ε = 0 returns the clean images, so its kernel is the clean one: 0 flips by construction (the control).
A model whose features depend on the whole training set (MLP-Attn's X Xᵀ X) is, through this interface,
treated with its training matrix fixed; ``experiments.flip_rate.run`` re-featurises instead.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from influence.flip_rate import flip_rate
from influence.malleability import ATTACKS, perturb_rows
from influence.ntk_loo import LOOInfluence, ntk_loo_influence


class MalleabilityPoint(NamedTuple):
  """One (attack, ε): flip rate and counts (``influence.flip_rate.FlipRate``), Spearman ρ, the mean
  ‖δ‖∞/ε of the perturbation actually applied (0 at ε = 0) and the attacked points' accuracy."""
  attack: str
  eps: float
  flip_rate: float
  n_flipped: int
  n_top: int
  spearman: float
  mean_linf_over_eps: float
  attacked_accuracy: float


def attack_key(key, attack_index: int, eps: float):
  """The key of one (attack, ε): fold_in(fold_in(key, 1 + attack_index), round(ε·1e6)), the scheme of
  ``experiments.flip_rate.run`` (so equal seeds draw equal random starts and signs)."""
  return jax.random.fold_in(jax.random.fold_in(key, 1 + attack_index), int(round(eps * 1e6)))


def influence_malleability(kernel_fn: Callable, logits_fn: Callable, x_train, y_train, x_test, y_test,
                           num_classes: int, *, eps: Sequence[float], attacks: Sequence[str] = ("fgsm", "pgd",
                                                                                                 "random_sign"),
                           key, top_fraction: float = 0.1, pgd_steps: int = 40, pgd_alpha: float | None = None,
                           mim_steps: int = 10, clean_kernels=None) -> tuple[LOOInfluence, list[MalleabilityPoint]]:
  """NTK-LOO influence of the training points and its flip rate under attacks on them (module docstring).

  Args:
    kernel_fn: ``kernel_fn(x1, x2) -> [n1, n2]`` empirical NTK at fixed parameters (x2 None: symmetric),
      e.g. ``ntk.model_kernel.model_ntk`` bound to a model.
    logits_fn: x [b, ...] -> logits [b, C], per sample (the attacks' target).
    x_train: training inputs [n, ...] in [0, 1]; y_train: labels int [n] in [0, C).
    x_test: test inputs [t, ...]; y_test: labels int [t].
    num_classes: C ≥ 2 (targets are one-hot).
    eps: L∞ budgets on the [0, 1] pixel scale, each in [0, 1].
    attacks: among ``influence.malleability.ATTACKS``; attack i uses ``attack_key(key, i, ε)``.
    key: PRNG key.
    top_fraction: τ ∈ (0, 1]; pgd_steps, pgd_alpha, mim_steps: as ``perturb_rows``.
    clean_kernels: optional (K_train [n, n], K_test_train [t, n]) already computed at the clean images.

  Returns:
    (the clean ``LOOInfluence``, one ``MalleabilityPoint`` per attack and ε, attack-major).

  Raises:
    ValueError: n < 2, labels out of range, unknown attacks, ε outside [0, 1], and as ``perturb_rows`` /
      ``ntk_loo_influence``.
  """
  y_train, y_test = np.asarray(y_train), np.asarray(y_test)
  if len(x_train) < 2 or len(y_train) != len(x_train) or len(y_test) != len(x_test) or len(x_test) < 1:
    raise ValueError(f"need n >= 2 training and t >= 1 test points with one label each, got {len(x_train)} / "
                     f"{len(y_train)} and {len(x_test)} / {len(y_test)}")
  for name, y in (("y_train", y_train), ("y_test", y_test)):
    if y.min() < 0 or y.max() >= num_classes:
      raise ValueError(f"{name} must hold labels in [0, {num_classes}), got [{y.min()}, {y.max()}]")
  bad = [a for a in attacks if a not in ATTACKS]
  if bad:
    raise ValueError(f"attacks must be among {ATTACKS}, got {bad}")
  if any(isinstance(e, (str, bool)) or not 0 <= e <= 1 for e in eps):
    raise ValueError(f"eps must be in [0, 1] (L∞ on the [0, 1] pixel scale), got {tuple(eps)}")
  onehot = np.eye(num_classes)
  y_tr, y_te = onehot[y_train], onehot[y_test]
  if clean_kernels is None:
    clean_kernels = (kernel_fn(x_train, None), kernel_fn(x_test, x_train))
  before = ntk_loo_influence(*clean_kernels, y_tr, y_te)
  x = jnp.asarray(x_train)
  y = jnp.asarray(y_train)
  points = []
  for i, attack in enumerate(attacks):
    for e in eps:
      e = float(e)
      x_adv = np.asarray(perturb_rows(attack, logits_fn, x, y, eps=e, key=attack_key(key, i, e),
                                      pgd_steps=pgd_steps, pgd_alpha=pgd_alpha, mim_steps=mim_steps))
      if e == 0:
        after = before     # x_adv = x: the clean kernels
      else:
        after = ntk_loo_influence(kernel_fn(x_adv, None), kernel_fn(x_test, x_adv), y_tr, y_te)
      fr = flip_rate(before.scores, after.scores, top_fraction)
      linf = np.abs(x_adv - np.asarray(x_train)).reshape(len(x_adv), -1).max(axis=1)
      acc = float(np.mean(np.argmax(np.asarray(logits_fn(jnp.asarray(x_adv))), 1) == y_train))
      points.append(MalleabilityPoint(attack, e, fr.rate, fr.n_flipped, fr.n_top, fr.spearman,
                                      float(np.mean(linf) / e) if e else 0.0, acc))
  return before, points
