"""Sharpness of a minimum: top Hessian eigenvalues by Lanczos on Hessian-vector products, and
filter-normalised loss landscapes (Li et al., "Visualizing the Loss Landscape of Neural Nets", NeurIPS 2018,
§4). Used to test arXiv 2603.13085's claim that 2L-ReLU sits in sharper minima than MLP-Attn.
Also the elementwise adaptive sharpness of Kwon et al. (arXiv 2102.11600), invariant to layer rescaling.
"""
from __future__ import annotations

import math
import warnings
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from influence.influence_function import hvp


LANCZOS_RESIDUAL_RTOL = 1e-3
"""``hessian_top_eigenvalues`` warns when a returned Ritz pair's residual exceeds this times max|θ|."""


def hessian_top_eigenvalues(objective: Callable, params, *, k: int = 1, num_iters: int = 40,
                            key=None) -> np.ndarray:
  """Largest-algebraic eigenvalues of ∇²objective(params) by Lanczos with full re-orthogonalisation.

  Args:
    objective: scalar function of the parameter pytree (e.g. the mean training loss).
    params: the point θ̂.
    k: number of eigenvalues to return (≤ num_iters).
    num_iters: Lanczos steps m (the Krylov dimension); cost m HVPs.
    key: PRNG key for the start vector (default PRNGKey(0)).

  Returns:
    [k] numpy array, descending.

  Raises:
    ValueError: k < 1, k > num_iters, k > the number of parameters, or a non-finite Hessian-vector product.

  Warns:
    RuntimeWarning: fewer than k eigenvalues, when the Krylov space closes early (a breakdown: β < 1e-10);
      or a returned Ritz pair not converged, residual > ``LANCZOS_RESIDUAL_RTOL``·max|θ| (raise num_iters).
  """
  if not 1 <= k <= num_iters:
    raise ValueError(f"need 1 ≤ k ≤ num_iters, got k={k}, num_iters={num_iters}")
  flat, unravel = ravel_pytree(params)
  if k > flat.size:
    raise ValueError(f"k must be <= the number of parameters ({flat.size}), got k={k}")
  num_iters = min(num_iters, flat.size)
  key = jax.random.PRNGKey(0) if key is None else key
  matvec = jax.jit(lambda v: ravel_pytree(hvp(objective, params, unravel(v)))[0])
  v = np.asarray(jax.random.normal(key, flat.shape, flat.dtype))
  v = v / np.linalg.norm(v)
  # The re-orthogonalisation runs in numpy on the host: the basis grows by one row per step, and as jnp
  # operations every new shape would compile anew (seconds per step); only the HVP is compiled, once.
  basis, alphas, betas = [v], [], []
  for i in range(num_iters):
    w = np.asarray(matvec(basis[-1]))
    if not np.all(np.isfinite(w)):
      raise ValueError("the Hessian-vector product is not finite: the objective is NaN/inf near params")
    alphas.append(float(np.vdot(w, basis[-1])))
    q = np.stack(basis)
    w = w - q.T @ (q @ w)
    w = w - q.T @ (q @ w)  # twice is enough (Kahan–Parlett)
    beta = float(np.linalg.norm(w))
    if i == num_iters - 1 or beta < 1e-10:
      break
    betas.append(beta)
    basis.append(w / beta)
  tri = np.diag(alphas) + np.diag(betas[:len(alphas) - 1], 1) + np.diag(betas[:len(alphas) - 1], -1)
  if len(alphas) < k:
    warnings.warn(f"the Krylov space closed after {len(alphas)} steps (the start vector lies in an invariant "
                  f"subspace): returning {len(alphas)} eigenvalues instead of k={k}; try another key",
                  RuntimeWarning, stacklevel=2)
  # Ritz residual ‖H y_i − θ_i y_i‖ = β_m |e_mᵀ u_i| for the eigenpairs (θ_i, u_i) of the tridiagonal matrix
  # (Golub & Van Loan, Matrix Computations, 4th ed., §10.1.4); β_m is the norm left after the last step.
  thetas, vecs = np.linalg.eigh(tri)
  top = np.argsort(thetas)[::-1][:k]
  residual = beta * np.abs(vecs[-1, top])
  scale = max(float(np.max(np.abs(thetas))), np.finfo(np.float64).tiny)
  if np.any(residual > LANCZOS_RESIDUAL_RTOL * scale):
    warnings.warn(f"Lanczos did not converge in num_iters={num_iters} steps: the top-{k} Ritz residuals "
                  f"‖Hy − θy‖ / max|θ| reach {float(np.max(residual)) / scale:.3g} > {LANCZOS_RESIDUAL_RTOL}; "
                  f"the eigenvalues are lower estimates, raise num_iters", RuntimeWarning, stacklevel=2)
  return np.sort(np.linalg.eigvalsh(tri))[::-1][:k]


def filter_normalized_direction(params, key):
  """A random direction d with, per weight matrix ("filter" = output unit, the last axis), ‖d_f‖ = ‖θ_f‖
  (Li et al. 2018, §4). 1-D leaves (biases) get zero. Returns a pytree like params."""
  leaves, treedef = jax.tree_util.tree_flatten(params)
  keys = jax.random.split(key, len(leaves))
  out = []
  for leaf, k in zip(leaves, keys):
    d = jax.random.normal(k, leaf.shape, leaf.dtype)
    if leaf.ndim <= 1:
      out.append(jnp.zeros_like(leaf))
      continue
    axes = tuple(range(leaf.ndim - 1))
    norm_d = jnp.sqrt(jnp.sum(d ** 2, axis=axes, keepdims=True))
    norm_p = jnp.sqrt(jnp.sum(leaf ** 2, axis=axes, keepdims=True))
    out.append(d / jnp.where(norm_d > 0, norm_d, 1.0) * norm_p)
  return jax.tree_util.tree_unflatten(treedef, out)


def loss_landscape(objective: Callable, params, directions, alphas) -> np.ndarray:
  """Loss along 1 or 2 directions: objective(θ + a·d₁ [+ b·d₂]) on the grid ``alphas``.

  Args:
    objective: scalar function of params.
    params: center θ̂.
    directions: one or two direction pytrees (``filter_normalized_direction``).
    alphas: [g] grid of step sizes.

  Returns:
    [g] array (1 direction) or [g, g] array (2 directions; rows = first direction).

  Raises:
    ValueError: alphas not a non-empty 1-D grid of finite numbers, or not one or two directions.
  """
  alphas = np.asarray(alphas, np.float32)
  if alphas.ndim != 1 or alphas.size == 0 or not np.isfinite(alphas).all():
    raise ValueError(f"alphas must be a non-empty 1-D grid of finite step sizes, got {alphas}")
  if len(directions) not in (1, 2):
    raise ValueError(f"directions must hold one or two direction pytrees, got {len(directions)}")
  f = jax.jit(lambda a, b: objective(jax.tree_util.tree_map(
      lambda p, d1, d2: p + a * d1 + b * d2, params, directions[0],
      directions[1] if len(directions) > 1 else jax.tree_util.tree_map(jnp.zeros_like, params))))
  if len(directions) == 1:
    return np.array([float(f(a, 0.0)) for a in alphas])
  return np.array([[float(f(a, b)) for b in alphas] for a in alphas])


def adaptive_sharpness(objective: Callable, params, *, k: int = 1, num_iters: int = 40,
                       key=None) -> np.ndarray:
  """Elementwise adaptive sharpness: the largest eigenvalues of T H T, T = diag|θ|, H = ∇²objective(θ).

  Plain sharpness (``hessian_top_eigenvalues``) is not invariant to rescalings that leave the function
  unchanged: for a ReLU layer scaled by c > 0 and the next by 1/c, H becomes D⁻¹HD⁻¹ with D = diag(c, 1/c).
  The normalised Hessian T H T is invariant, since T becomes D T and diagonal matrices commute
  (Kwon et al., "ASAM: Adaptive Sharpness-Aware Minimization", ICML 2021, arXiv 2102.11600, §3, with
  the elementwise normalisation T_w = |w|). It is computed as the ordinary Hessian of
  u ↦ objective(θ + |θ| ⊙ u) at u = 0, whose Hessian is exactly T H T, by the same Lanczos iteration.

  Args:
    objective: scalar function of the parameter pytree (e.g. the mean training loss).
    params: the point θ̂; parameters equal to 0 contribute nothing (T has a zero there).
    k, num_iters, key: as in ``hessian_top_eigenvalues``.

  Returns:
    [k] numpy array, descending, in the loss's units (T H T is invariant to the units of θ).

  Raises:
    ValueError: as in ``hessian_top_eigenvalues``.
  """
  scale = jax.tree_util.tree_map(jnp.abs, params)

  def normalised(u):
    return objective(jax.tree_util.tree_map(lambda p, s, v: p + s * v, params, scale, u))

  return hessian_top_eigenvalues(normalised, jax.tree_util.tree_map(jnp.zeros_like, params), k=k,
                                 num_iters=num_iters, key=key)


def matched_loss_scale(loss_of_scale: Callable[[float], float], target: float) -> float:
  """The scale c ∈ [0, 1] of the first layer at which a 2-layer ReLU network's train loss equals ``target``:
  loss_of_scale(c) = target, found by Brent's method (``scipy.optimize.brentq``) between c = 0 (zero output)
  and c = 1 (the trained weights). For f(x) = (1/√m) Σ_r a_r relu(c·w_rᵀx) the output is c·f(x) (ReLU is
  positively homogeneous), so the activation pattern is unchanged: the network is compared with another at
  equal train loss without retraining it (the sharpness comparison of arXiv 2603.13085 at matched loss).

  Args:
    loss_of_scale: c -> train loss of the network with its first layer scaled by c.
    target: the train loss to reach, between loss_of_scale(1) and loss_of_scale(0).

  Returns:
    c; 1.0 when loss_of_scale(1) already equals ``target`` (to 1e-12 relative).

  Raises:
    ValueError: a non-finite target, or one outside the losses at c = 0 and c = 1 (no root on [0, 1]).
  """
  import scipy.optimize
  target = float(target)
  if not math.isfinite(target):
    raise ValueError(f"target must be a finite train loss, got {target!r}")
  at_one, at_zero = float(loss_of_scale(1.0)), float(loss_of_scale(0.0))
  if abs(at_one - target) <= 1e-12 * max(1.0, abs(target)):
    return 1.0
  if not min(at_one, at_zero) <= target <= max(at_one, at_zero):
    raise ValueError(f"target loss {target:.6g} lies outside [{min(at_one, at_zero):.6g}, "
                     f"{max(at_one, at_zero):.6g}], the losses at scales 1 and 0: no scale in [0, 1] reaches it")
  return float(scipy.optimize.brentq(lambda c: float(loss_of_scale(c)) - target, 0.0, 1.0, xtol=1e-12, rtol=1e-10))


def filter_normalized_rise(objective: Callable, params, key, step: float = 1.0) -> float:
  """The filter-normalised loss rise: ½[L(θ + step·d) + L(θ − step·d)] − L(θ) along a random filter-normalised
  direction d (``filter_normalized_direction``; Li et al. 2018, "Visualizing the Loss Landscape of Neural
  Nets", §4), a sharpness measure that filter normalisation makes insensitive to the weights' scale.

  Raises:
    ValueError: a non-finite or non-positive step.
  """
  if not (math.isfinite(step) and step > 0):
    raise ValueError(f"step must be finite and > 0, got {step!r}")
  d = filter_normalized_direction(params, key)
  # Three evaluations: called directly (loss_landscape's jit would compile for three points per call).
  at = lambda a: float(objective(jax.tree_util.tree_map(lambda p, q: p + a * q, params, d)))  # noqa: E731
  return (at(-step) + at(step)) / 2 - at(0.0)
