"""Random starting points, drawn per sample from per-sample keys.

Sample i of a batch always uses `fold_in(key, i)`, so its random start (and hence its whole attack)
does not depend on how many or which other samples share the batch. Source: REFERENCE.md §3.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from attacks.projections import normalize_l2, normalize_linf, per_sample


def per_sample_keys(key, batch: int):
  """Keys fold_in(key, i) for i = 0 … batch − 1; shape [batch] (typed keys) or [batch, 2] (raw keys)."""
  return jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(batch))


def _uniform(keys, x, low, high):
  return jax.vmap(lambda k, x_i: jax.random.uniform(k, x_i.shape, x_i.dtype, low, high))(keys, x)


def _normal(keys, x):
  return jax.vmap(lambda k, x_i: jax.random.normal(k, x_i.shape, x_i.dtype))(keys, x)


def uniform_linf_start(keys, x, eps) -> jnp.ndarray:
  """δ ~ U(−ε, ε)^d per sample (Madry et al. 2018's random start); shape of x. ε = 0 gives δ = 0."""
  return eps * _uniform(keys, x, -1.0, 1.0)


def uniform_l2_ball_start(keys, x, eps) -> jnp.ndarray:
  """δ uniform in the ℓ2 ball of radius ε: direction z/‖z‖₂ with z ~ N(0, I), radius ε·U^(1/d).

  Shape of x; d is the number of features per sample. ε = 0 gives δ = 0.
  """
  d = x[0].size
  keys_direction = jax.vmap(lambda k: jax.random.fold_in(k, 0))(keys)
  keys_radius = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
  direction = normalize_l2(_normal(keys_direction, x))
  u_B = jax.vmap(lambda k: jax.random.uniform(k, (), x.dtype))(keys_radius)
  return direction * per_sample(eps * u_B ** (1.0 / d), x)


def apgd_linf_start(keys, x, eps) -> jnp.ndarray:
  """AutoAttack's L∞ start: δ = ε·t/‖t‖∞ with t ~ U(−1, 1)^d (one coordinate sits at ±ε). Shape of x."""
  return eps * normalize_linf(_uniform(keys, x, -1.0, 1.0))


def apgd_l2_start(keys, x, eps) -> jnp.ndarray:
  """AutoAttack's L2 start: δ = ε·z/‖z‖₂ with z ~ N(0, I), on the sphere's surface. Shape of x."""
  return eps * normalize_l2(_normal(keys, x))


_STARTS = {
    "uniform_linf": uniform_linf_start,
    "uniform_l2_ball": uniform_l2_ball_start,
    "apgd_linf": apgd_linf_start,
    "apgd_l2": apgd_l2_start,
}


@functools.partial(jax.jit, static_argnames=("kind", "restarts"))
def start_points(key, x, eps, lower, upper, *, kind: str, restarts: int | None = None) -> jnp.ndarray:
  """Random starting points clip(x + δ, lower, upper), one per sample (and restart).

  Compiled on its own, so its program depends only on x's shape and dtype and is shared by every
  model and attack; ε and the bounds are traced.

  Args:
    key: PRNG key; sample i uses fold_in(key, i), and restart r of sample i fold_in(fold_in(key, i), r).
    x: inputs with shape [batch, ...].
    eps: scalar budget ≥ 0.
    lower, upper: scalar pixel bounds.
    kind: "uniform_linf", "uniform_l2_ball", "apgd_linf" or "apgd_l2" (the functions above).
    restarts: None for one start per sample, or R ≥ 1 for R starts per sample.

  Returns:
    Array with shape [batch, ...], or [batch, R, ...] when restarts is given; dtype of x.
  """
  draw = _STARTS[kind]
  keys = per_sample_keys(key, x.shape[0])
  if restarts is None:
    return jnp.clip(x + draw(keys, x, eps), lower, upper)

  def one_restart(r):
    keys_r = jax.vmap(lambda k: jax.random.fold_in(k, r))(keys)
    return jnp.clip(x + draw(keys_r, x, eps), lower, upper)
  return jnp.moveaxis(jax.vmap(one_restart)(jnp.arange(restarts)), 0, 1)
