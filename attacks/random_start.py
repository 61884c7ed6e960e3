"""Random starting points, drawn per sample from per-sample keys.

Sample i of a batch draws only from `fold_in(key, i)`, so its random start (and hence its whole attack)
does not depend on how many or which other samples share the batch. The starts are compiled on their
own (`start_points`), so one program per input shape serves every model and attack. Source:
docs/theory.md#pgd-l2.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from attacks.projections import safe_sqrt

KINDS = ("uniform_linf", "uniform_l2_ball", "apgd_linf", "apgd_l2")


def per_sample_keys(key, batch: int):
  """Keys fold_in(key, i) for i = 0 … batch − 1; shape [batch] (typed keys) or [batch, 2] (raw keys)."""
  return jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(batch))


def _unit_rows(v_BxRxD, norm_BxR):
  norm_BxR = jnp.where(norm_BxR > 0, norm_BxR, jnp.ones_like(norm_BxR))
  return v_BxRxD / norm_BxR[..., None]


def perturbations(keys, restarts: int, features: int, dtype, eps, kind: str) -> jnp.ndarray:
  """Random perturbations δ, `restarts` per sample, each sample from its own key.

  Kinds:
    * "uniform_linf": δ ~ U(−ε, ε)^d (Madry et al. 2018's PGD start).
    * "uniform_l2_ball": δ uniform in the ℓ2 ball of radius ε, i.e. direction z/‖z‖₂ (z ~ N(0, I)) and
      radius ε·U^(1/d); drawn as the first d coordinates of z/‖z‖₂ with z ~ N(0, I_{d+2}), which has
      exactly that law (Voelker, Gosmann & Stewart 2017, "Efficiently sampling vectors and coordinates
      from the n-sphere and n-ball").
    * "apgd_linf": δ = ε·t/‖t‖∞, t ~ U(−1, 1)^d, so one coordinate sits at ±ε (AutoAttack).
    * "apgd_l2": δ = ε·z/‖z‖₂, z ~ N(0, I_d), on the sphere's surface (AutoAttack).
  ε = 0 gives δ = 0 exactly (never NaN).

  Args:
    keys: per-sample keys, shape [batch] (or [batch, 2] raw).
    restarts: starts per sample R ≥ 1; all R come from one draw of the sample's key.
    features: d, the number of features per sample.
    dtype: floating dtype of the result.
    eps: scalar budget ≥ 0.
    kind: one of KINDS.

  Returns:
    Array with shape [batch, R, d].
  """
  shape = (restarts, features + 2 if kind == "uniform_l2_ball" else features)
  if kind in ("uniform_linf", "apgd_linf"):
    draw = jax.vmap(lambda k: jax.random.uniform(k, shape, dtype, -1.0, 1.0))(keys)
  else:
    draw = jax.vmap(lambda k: jax.random.normal(k, shape, dtype))(keys)
  if kind == "uniform_linf":
    return eps * draw
  if kind == "apgd_linf":
    return eps * _unit_rows(draw, jnp.max(jnp.abs(draw), axis=-1))
  unit = _unit_rows(draw, safe_sqrt(jnp.sum(jnp.square(draw), axis=-1)))
  return eps * (unit[..., :features] if kind == "uniform_l2_ball" else unit)


@functools.partial(jax.jit, static_argnames=("kind", "restarts"))
def start_points(key, x, eps, lower, upper, *, kind: str, restarts: int | None = None) -> jnp.ndarray:
  """Random starting points clip(x + δ, lower, upper), one per sample (or R per sample).

  Compiled on its own: the program depends only on x's shape and dtype and is shared by every model
  and attack; ε and the bounds are traced.

  Args:
    key: PRNG key; sample i draws from fold_in(key, i) (restart r is the r-th of its R draws, so the
      starts depend on R).
    x: inputs with shape [batch, ...].
    eps: scalar budget ≥ 0.
    lower, upper: scalar pixel bounds.
    kind: one of KINDS (see `perturbations`).
    restarts: None for one start per sample, or R ≥ 1 for R starts per sample.

  Returns:
    Array with shape [batch, ...], or [batch, R, ...] when restarts is given; dtype of x.
  """
  batch, features = x.shape[0], x[0].size
  delta = perturbations(per_sample_keys(key, batch), restarts or 1, features, x.dtype, eps, kind)
  delta = delta.reshape((batch, restarts or 1) + x.shape[1:])
  starts = jnp.clip(x[:, None] + delta, lower, upper)
  return starts[:, 0] if restarts is None else starts
