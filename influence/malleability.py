"""Influence malleability: attacking each training row against its own loss, with the other rows fixed.

For the influence paper's two models (arXiv 2603.13085 §5) the network f_θ is a 2-layer ReLU network on
feature rows: the ℓ2-normalised pixels (2L-ReLU) or the rows of the linearized attention X Xᵀ X (MLP-Attn),
whose keys and values come from the whole training matrix. Row i is attacked with only row i of the
training matrix replaced by its candidate x'_i (``ntk.row_replaced_features``), so each row's loss depends
on its own perturbation only and a batched attack stays per-sample. The random-sign control moves every
pixel by ±ε at random (clipped to [0, 1]), the same budget without a gradient; on images whose pixels mostly
sit at 0 (81 % of MNIST's) the clipping turns it into a brightening (+ε/2 on average there), which moves the
shared XᵀX by itself. The neutral control moves by ±ε only the pixels where both signs stay inside [0, 1]
(ε ≤ x ≤ 1 − ε), so every pixel's perturbation has mean 0. The influence of the
perturbed rows is then recomputed with the parameters fixed (NTK leave-one-out at the trained θ,
``influence.ntk_loo``) and compared with the clean one (``influence.flip_rate``);
docs/theory.md#attacking-training-rows and docs/theory.md#flip-rate.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import attacks
import ntk
from influence.ntk_loo import LOOInfluence, ntk_loo_influence

ATTACKS = ("fgsm", "pgd", "mim", "random_sign", "interior_sign")
CONTROLS = ("random_sign", "interior_sign")  # gradient-free perturbations of the same ε


def row_features(model_name: str, x_clean_NxD, gram_DxD, x_rows_BxD):
  """Features of each candidate row with only its own training row replaced, shape [b, d].

  ``ntk.row_replaced_features`` with the rows last, so that ``jax.tree_util.Partial(row_features, model_name,
  x_clean, gram)`` is a per-row feature map (for ``ntk.training.adversarial_train_adam``).

  Args:
    model_name: 'relu' or 'mlp_attn' (``ntk.MODEL_NAMES``).
    x_clean_NxD: the clean training rows [n, d], in [0, 1].
    gram_DxD: X_cleanᵀ X_clean, [d, d].
    x_rows_BxD: candidate rows [b, d].
  """
  return ntk.row_replaced_features(model_name, x_rows_BxD, x_clean_NxD, gram_DxD)


def row_logits(apply_fn, model_name: str, params, x_clean_NxD, gram_DxD, x_rows_BxD):
  """Logits [b, C] of each candidate row with only its own training row replaced (``row_features``).

  Bind all but the rows with ``jax.tree_util.Partial`` to get the per-row ``logits_fn`` the attacks take;
  at x_rows = x_clean it gives the network's logits on its training features.
  """
  return apply_fn(params, row_features(model_name, x_clean_NxD, gram_DxD, x_rows_BxD))


def perturb_rows(attack: str, logits_fn, x_NxD, y_N, *, eps: float, key, pgd_steps: int = 40,
                 pgd_alpha: float | None = None, mim_steps: int = 10) -> jnp.ndarray:
  """Attacks every row of x against its own loss under ``logits_fn``, L∞ budget ε on the [0, 1] pixel scale.

  Args:
    attack: 'fgsm' (one signed step of ε; Goodfellow et al., arXiv 1412.6572), 'pgd' (PGD-L∞ with random
      start; Madry et al., arXiv 1706.06083), 'mim' (momentum iterative, α = ε/steps; Dong et al., arXiv
      1710.06081), 'random_sign' (x + ε·sign(N(0, 1)) clipped to [0, 1]: the gradient-free control) or
      'interior_sign' (the neutral control: x + ε·sign(N(0, 1)) only where ε ≤ x ≤ 1 − ε, so neither sign
      is clipped and the perturbation has mean 0 at every pixel; the other pixels stay).
    logits_fn: per-row logits, rows [n, d] -> [n, C] (e.g. a ``row_logits`` Partial); row i of the output
      may depend only on row i of the input.
    x_NxD: training rows [n, d], float in [0, 1].
    y_N: integer labels [n].
    eps: ε in [0, 1]; ε = 0 returns x (every attack).
    key: PRNG key (PGD's random start, the controls' signs; unused by FGSM and MIM).
    pgd_steps: PGD steps ≥ 1; pgd_alpha: PGD step size in (0, 1], None for ε/30 (Madry et al.'s α = 0.01
      for 40 steps at ε = 0.3).
    mim_steps: MIM steps ≥ 1.

  Returns:
    x_adv [n, d] in [0, 1] with ‖x_adv_i − x_i‖∞ ≤ ε.

  Raises:
    ValueError: unknown attack, ε outside [0, 1], steps < 1, pgd_alpha outside (0, 1], and as the attacks.
  """
  if attack not in ATTACKS:
    raise ValueError(f"attack must be one of {ATTACKS}, got {attack!r}")
  if isinstance(eps, (str, bool)) or not 0 <= eps <= 1:
    raise ValueError(f"eps must be in [0, 1] (L∞ on the [0, 1] pixel scale), got {eps!r}")
  for name, value in (("pgd_steps", pgd_steps), ("mim_steps", mim_steps)):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
      raise ValueError(f"{name} must be an integer ≥ 1, got {value!r}")
  if pgd_alpha is not None and not 0 < pgd_alpha <= 1:
    raise ValueError(f"pgd_alpha must be in (0, 1] or None (α = ε/30), got {pgd_alpha!r}")
  if attack in CONTROLS:
    signs = jnp.sign(jax.random.normal(key, jnp.shape(x_NxD)))
    if attack == "interior_sign":
      x = jnp.asarray(x_NxD)
      return jnp.where((x >= eps) & (x <= 1.0 - eps), x + eps * signs, x)
    return jnp.clip(x_NxD + eps * signs, 0.0, 1.0)
  if attack == "fgsm":
    return attacks.fgsm(logits_fn, x_NxD, y_N, eps=eps).x_adv
  if attack == "pgd":
    alpha = pgd_alpha if pgd_alpha is not None else eps / 30
    return attacks.pgd_linf(logits_fn, x_NxD, y_N, eps=eps, alpha=alpha, steps=pgd_steps, key=key).x_adv
  return attacks.mim(logits_fn, x_NxD, y_N, eps=eps, steps=mim_steps).x_adv


INFLUENCE_KERNELS = ("empirical", "infinite")


def feature_influence(model: ntk.Model, params, f_train_NxD, f_test_TxD, y_train_NxC, y_test_TxC, *,
                      kernel: str = "empirical", ridge_scale: float = 1e-3) -> LOOInfluence:
  """NTK leave-one-out influence of every training row on the test loss, from feature rows: the kernel on
  train [n, d] and test-train [t, n], in float64, then ``ntk_loo_influence`` (ridge λ = ridge_scale·tr(K)/n;
  I_j > 0 = helpful). Targets are one-hot, [n, C] and [t, C].

  Args:
    kernel: 'empirical', the 2-layer network's empirical NTK at ``params`` (``ntk.two_layer_relu_ntk``: pass
      the trained parameters for the trained kernel, the initial ones for K₀), or 'infinite', its
      infinite-width NTK K∞ (``ntk.arccos_ntk``, the model's readout; params unused).
    ridge_scale: λ/(tr(K)/n) > 0 (1e-3, the default of ``influence.ntk_loo``).

  Raises:
    ValueError: an unknown kernel, ridge_scale ≤ 0, or as ``ntk_loo_influence`` (shapes, non-finite kernels).
  """
  if kernel not in INFLUENCE_KERNELS:
    raise ValueError(f"kernel must be one of {INFLUENCE_KERNELS}, got {kernel!r}")
  if not (np.isfinite(ridge_scale) and ridge_scale > 0):
    raise ValueError(f"ridge_scale must be finite and > 0, got {ridge_scale!r}")
  if kernel == "empirical":
    k_tr = np.asarray(ntk.two_layer_relu_ntk(model, params, f_train_NxD), np.float64)
    k_te = np.asarray(ntk.two_layer_relu_ntk(model, params, f_test_TxD, f_train_NxD), np.float64)
  else:
    with jax.enable_x64(True):
      tr = jnp.asarray(np.asarray(f_train_NxD, np.float64))
      te = jnp.asarray(np.asarray(f_test_TxD, np.float64))
      k_tr = np.asarray(ntk.arccos_ntk(tr, readout=model.readout))
      k_te = np.asarray(ntk.arccos_ntk(te, tr, readout=model.readout))
  ridge = float(ridge_scale * np.trace(k_tr) / k_tr.shape[0])
  return ntk_loo_influence(k_tr, k_te, y_train_NxC, y_test_TxC, ridge=ridge if ridge > 0 else None)


def gram_shift(x_NxD, x_adv_NxD, *, base_DxD=None) -> float:
  """‖X'ᵀX' − XᵀX‖_F / ‖XᵀX‖_F in float64: how far a perturbation of the training rows moves the [d, d] matrix
  that the linearised attention X Xᵀ X shares across rows (arXiv 2603.13085's f_att), e.g. an attack's
  against its control's.

  Args:
    x_NxD, x_adv_NxD: the clean and perturbed rows, [n, d] each.
    base_DxD: XᵀX of the clean rows in float64, when the caller already has it (one per training set, however
      many perturbations are compared); None computes it.

  Raises:
    ValueError: shapes that differ or are not 2-D, or a zero XᵀX.
  """
  x, xa = np.asarray(x_NxD, np.float64), np.asarray(x_adv_NxD, np.float64)
  if x.ndim != 2 or x.shape != xa.shape:
    raise ValueError(f"x and x_adv must be [n, d] of one shape, got {x.shape} and {xa.shape}")
  base = x.T @ x if base_DxD is None else np.asarray(base_DxD, np.float64)
  norm = float(np.linalg.norm(base))
  if norm == 0:
    raise ValueError("XᵀX is zero: no relative shift")
  return float(np.linalg.norm(xa.T @ xa - base) / norm)
