"""Local sensitivity bounds of a captured attention layer at its own tokens, beside a PGD attack on them.

For a layer captured by ``attention.capture`` with softmax dot-product heads, G(X) = Σ_h
rowsoftmax(X̃A_hX̃ᵀ) X̃ W_VO^h (+ a bias that cancels), and a radius ε, each sample's tokens X [T, D] get

  bound:     ``attention.sensitivity.layer_bound_terms`` at X̃ (the layer bounds "min", "fine", "naive",
             "joint" with Krylov norms, and "rigorous" = "min" with the closed-form key-side norm),
             each ≥ max_{‖Δ‖_F ≤ ε} ‖G(X + Δ) − G(X)‖_F;
  deviation: the largest ‖G(X + Δ) − G(X)‖_F that projected gradient ascent finds over ‖Δ‖_F ≤ ε
             (``attention.sensitivity.max_deviation``), a lower estimate of that maximum.

A bound below its deviation refutes the bound (up to float rounding and, for the Krylov modes, the
convergence gap ``jacobian_gap``). With augmented tokens X̃ = [X, 1] (query/key biases absorbed) the bound
covers every Δ̃ of X̃ in the ball while the attack moves X only, so it stays an upper bound
(``attention.capture``, module docstring). ε is the Frobenius norm of the perturbation of the layer's
input token matrix, in the units of those tokens (not pixels). Source: Havens et al. (ICML 2024),
derivation in ``attention.sensitivity``.
"""
from __future__ import annotations

import functools
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from attention import sensitivity
from attention.capture import AttentionLayer, SoftmaxHeads, augment_tokens

BOUND_KINDS = ("min", "fine", "naive", "joint", "rigorous")


class LayerBoundCheck(NamedTuple):
  """Bounds and attacks of one layer on each sample at each radius.

  Attributes:
    path: the layer's path (``AttentionLayer.path``).
    eps: radii ε, float [E] (Frobenius norm of the token perturbation).
    bounds: dict kind -> float [B, E] for kind in ``BOUND_KINDS`` (module docstring).
    deviation: the PGD deviation, float [B, E].
    jacobian_norm: ‖∂G/∂X̃‖ at each sample's tokens (Lanczos, a lower estimate of the first-order local
      Lipschitz constant), float [B].
    jacobian_gap: relative convergence gap of the layer-Jacobian Krylov estimate, float [B].
  """
  path: str
  eps: np.ndarray
  bounds: dict
  deviation: np.ndarray
  jacobian_norm: np.ndarray
  jacobian_gap: np.ndarray


@functools.partial(jax.jit, static_argnames=("augmented", "power_iters", "steps", "restarts"))
def _check(tokens_BxTxD, a_HxDxD, w_vo_HxDxF, eps_E, keys_B, *, augmented, power_iters, steps, restarts):
  def layer_fn(x_TxD):
    return sensitivity.multi_head_attention(augment_tokens(x_TxD, augmented), a_HxDxD, w_vo_HxDxF)

  def one(x_TxD, key):
    bound_key, attack_key = jax.random.split(key)
    lc = sensitivity.layer_constants(augment_tokens(x_TxD, augmented), a_HxDxD, w_vo_HxDxF, key=bound_key,
                                     power_iters=power_iters)
    terms = jax.vmap(lambda e: sensitivity.layer_bound_terms(lc, e))(eps_E)
    rigorous = jax.vmap(lambda e: sensitivity.layer_bound_terms(lc, e, key_norm="closed_form").min)(eps_E)
    bounds = {kind: getattr(terms, kind) for kind in ("min", "fine", "naive", "joint")}
    bounds["rigorous"] = rigorous
    deviation = jax.vmap(lambda e: sensitivity.max_deviation(layer_fn, x_TxD, e, key=attack_key, steps=steps,
                                                             restarts=restarts)[0])(eps_E)
    return bounds, deviation, lc.jacobian_norm, lc.jacobian_gap

  return jax.vmap(one)(tokens_BxTxD, keys_B)


def layer_bound_check(layer: AttentionLayer, eps, *, key, max_samples: Optional[int] = None,
                      power_iters: int = 100, pgd_steps: int = 100, pgd_restarts: int = 4) -> LayerBoundCheck:
  """The local sensitivity bounds of a captured layer at each sample's tokens, beside PGD deviations.

  Args:
    layer: an ``AttentionLayer`` with ``bound_applicable`` (softmax dot-product self-attention).
    eps: radii ε ≥ 0, a float or a 1-D sequence [E] (Frobenius norm of the token perturbation).
    key: PRNG key; sample b uses fold_in(key, b) (split between the Krylov starts and the attack).
    max_samples: use the first max_samples samples of the capture (None: all), ≥ 1.
    power_iters: Krylov iterations for σ_K and ‖∂G/∂X‖, ≥ 1.
    pgd_steps: ascent steps ≥ 0; pgd_restarts: random starts ≥ 0 (the Jacobian starts are added).

  Returns:
    ``LayerBoundCheck`` with numpy arrays.

  Raises:
    ValueError: the bound does not apply to the layer (its reason), eps not finite / negative / not 1-D,
      max_samples < 1, power_iters < 1, pgd_steps < 0 or pgd_restarts < 0.
  """
  if not layer.bound_applicable or not isinstance(layer.heads, SoftmaxHeads):
    raise ValueError(f"layer {layer.path!r}: {layer.reason or 'bound not applicable'}")
  eps_E = np.atleast_1d(np.asarray(eps, dtype=float))
  if eps_E.ndim != 1 or eps_E.size == 0:
    raise ValueError(f"eps must be a radius or a 1-D sequence of radii, got shape {np.shape(eps)}")
  sensitivity.check_eps(eps_E)
  for name, value, low in (("power_iters", power_iters, 1), ("pgd_steps", pgd_steps, 0),
                           ("pgd_restarts", pgd_restarts, 0)):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
      raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
  tokens = layer.tokens
  if max_samples is not None:
    if isinstance(max_samples, bool) or not isinstance(max_samples, int) or max_samples < 1:
      raise ValueError(f"max_samples must be an integer >= 1 or None, got {max_samples!r}")
    tokens = tokens[:max_samples]
  keys = jax.vmap(lambda b: jax.random.fold_in(key, b))(jnp.arange(tokens.shape[0]))
  bounds, deviation, jac, gap = _check(tokens, layer.heads.a, layer.heads.w_vo, jnp.asarray(eps_E, tokens.dtype), keys,
                                  augmented=layer.augmented, power_iters=power_iters, steps=pgd_steps,
                                  restarts=pgd_restarts)
  return LayerBoundCheck(layer.path, eps_E, {k: np.asarray(v) for k, v in bounds.items()}, np.asarray(deviation),
                         np.asarray(jac), np.asarray(gap))
