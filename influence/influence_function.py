"""The classic influence function (Koh & Liang, "Understanding Black-box Predictions via Influence
Functions", ICML 2017, eq. 2–3), in the same sign convention as ``ntk_loo``.

For θ̂ = argmin R(θ), R(θ) = (1/n) Σ_i ℓ(z_i, θ) + Ω(θ) (Ω a regulariser, e.g. (w/2)‖θ‖²), removing point j
moves the parameters by θ̂₋ⱼ − θ̂ ≈ (1/n) H⁻¹ ∇ℓ(z_j, θ̂), H = ∇²R(θ̂). To first order the change of the
test loss is
    I_j ≈ Σ_test [ℓ(z_t, θ̂₋ⱼ) − ℓ(z_t, θ̂)] ≈ (1/n) (Σ_t ∇ℓ(z_t, θ̂))ᵀ H⁻¹ ∇ℓ(z_j, θ̂),
so I_j > 0 means point j helps, as in ``ntk_loo``. H⁻¹v is solved by conjugate gradients on
Hessian-vector products (forward-over-reverse, never forming H), or exactly (dense H) for small models;
``damping`` adds δI to H (Koh & Liang's damping for non-convex models).
"""
from __future__ import annotations

import warnings
from typing import Callable, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree


@jax.default_matmul_precision("highest")
def hvp(objective: Callable, params, vector):
  """Hessian-vector product ∇²objective(params)·vector (forward-over-reverse); pytrees in and out."""
  return jax.jvp(jax.grad(objective), (params,), (vector,))[1]


CG_RESIDUAL_RTOL = 1e-3
"""A CG solve whose true relative residual ‖b − A s‖/‖b‖ ends above this warns (float32 CG reaches ~1e-6·κ)."""


class CGResult(NamedTuple):
  """Outcome of ``conjugate_gradient``'s iteration (arrays; checked on the host)."""
  x: jnp.ndarray           # the solution estimate, shape of b
  iterations: jnp.ndarray  # steps taken
  curvature: jnp.ndarray   # smallest pᵀAp/pᵀp seen; ≤ 0 is a breakdown (A not positive definite)


def _cg(matvec, b, tol, maxiter):
  """Plain conjugate gradients (Hestenes & Stiefel 1952), stopping at ‖r‖ ≤ max(tol, machine ε)·‖b‖ (below
  that the recursive residual is rounding, and pᵀAp would underflow), after maxiter steps, or at the first
  direction with pᵀAp ≤ 0 (returning the iterate before it)."""
  stop_sq = jnp.square(max(tol, float(jnp.finfo(b.dtype).eps))) * jnp.vdot(b, b)

  def cond(state):
    _, r, _, rr, k, curv = state
    return (rr > stop_sq) & (k < maxiter) & (curv > 0)

  def body(state):
    x, r, p, rr, k, curv = state
    ap = matvec(p)
    pap = jnp.vdot(p, ap)
    curv = jnp.minimum(curv, pap / jnp.vdot(p, p))
    ok = pap > 0
    alpha = jnp.where(ok, rr / jnp.where(ok, pap, 1.0), 0.0)
    x, r = x + alpha * p, r - alpha * ap
    rr_new = jnp.vdot(r, r)
    p = r + (rr_new / rr) * p
    return x, r, p, jnp.where(ok, rr_new, rr), k + 1, curv

  init = (jnp.zeros_like(b), b, b, jnp.vdot(b, b), jnp.zeros((), jnp.int32), jnp.asarray(jnp.inf, b.dtype))
  x, _, _, _, k, curv = jax.lax.while_loop(cond, body, init)
  return CGResult(x, k, curv)


def conjugate_gradient(matvec: Callable, b, *, tol: float = 1e-10, maxiter: int | None = None,
                       damping: float = 0.0) -> jnp.ndarray:
  """Solves A s = b for a symmetric positive-definite A = H + δI given only s ↦ A s, and checks the result.

  Args:
    matvec: v ↦ A v on flat vectors with the shape [p] of b (already including the damping δ).
    b: right-hand side, shape [p], floating.
    tol: stop at ‖r‖ ≤ tol·‖b‖.
    maxiter: most CG steps; None means 10·p.
    damping: the δ inside matvec, only for the messages.

  Returns:
    s with shape [p], dtype of b.

  Raises:
    ValueError: breakdown — a search direction p with pᵀAp ≤ 0, so A = H + δI is not positive definite
      (CG would divide by zero: NaN); or a non-finite result. The message names the damping δ.

  Warns:
    RuntimeWarning: the true relative residual ‖b − A s‖/‖b‖ exceeds ``CG_RESIDUAL_RTOL`` (not converged
      within maxiter, or lost to rounding); names the damping δ.

  Source: Hestenes & Stiefel (1952); Nocedal & Wright, Numerical Optimization (2nd ed.), Alg. 5.2; the
  damping is Koh & Liang (ICML 2017, §4.2).
  """
  b = jnp.asarray(b)
  maxiter = 10 * b.size if maxiter is None else int(maxiter)
  result = _cg(matvec, b, tol, maxiter)
  curvature = float(result.curvature)
  if not curvature > 0:
    raise ValueError(
        f"conjugate gradients broke down after {int(result.iterations)} steps: a direction p has "
        f"pᵀ(H + δI)p / pᵀp = {curvature:.3g} ≤ 0, so the damped Hessian is not positive definite (damping "
        f"δ = {damping}); raise damping above −λ_min(H) or use method='exact'")
  b_norm = float(jnp.linalg.norm(b))
  residual = float(jnp.linalg.norm(b - matvec(result.x)))
  if not np.isfinite(residual):
    raise ValueError(f"conjugate gradients returned a non-finite solution (damping δ = {damping}); the "
                     f"Hessian-vector products are not finite or H + δI is singular; raise damping")
  if residual > CG_RESIDUAL_RTOL * b_norm:
    warnings.warn(f"conjugate gradients stopped after {int(result.iterations)} of {maxiter} steps with relative "
                  f"residual {residual / b_norm:.3g} > {CG_RESIDUAL_RTOL} (damping δ = {damping}): the "
                  f"influence scores are inaccurate; raise damping (better conditioning), cg_maxiter, or use "
                  f"method='exact'", RuntimeWarning, stacklevel=3)
  return result.x



def influence_function(loss_fn: Callable, params, train, test, *, regularizer: Callable | None = None,
                       damping: float = 0.0, method: Literal["cg", "exact"] = "cg", cg_tol: float = 1e-10,
                       cg_maxiter: int | None = None) -> np.ndarray:
  """Influence-function estimate of every training point's leave-one-out influence on the test loss.

  Args:
    loss_fn: per-example loss ``loss_fn(params, x_D, y) -> scalar`` (vmapped over the batch here).
    params: trained parameters θ̂ (a pytree).
    train: ``(x_train [n, ...], y_train [n, ...])``.
    test: ``(x_test [t, ...], y_test [t, ...])``.
    regularizer: Ω(params) -> scalar added to the mean training loss (part of H), or None.
    damping: δ ≥ 0 added to the Hessian.
    method: ``'cg'`` (conjugate gradients on HVPs) or ``'exact'`` (dense Hessian solve; small models).
    cg_tol, cg_maxiter: conjugate-gradient settings.

  Returns:
    [n] numpy array of I_j (float64 if x64 is enabled, else float32); positive = helpful.

  Raises:
    ValueError: negative damping or unknown method; with method='cg', a CG breakdown (H + δI not positive
      definite) or a non-finite solve (``conjugate_gradient``).

  Warns:
    RuntimeWarning: CG did not reach a relative residual of ``CG_RESIDUAL_RTOL``.
  """
  if damping < 0:
    raise ValueError(f"damping must be ≥ 0, got {damping}")
  if method not in ("cg", "exact"):
    raise ValueError(f"method must be 'cg' or 'exact', got {method!r}")
  return np.asarray(_influence_scores(loss_fn, params, train, test, regularizer, damping, method, cg_tol,
                                      cg_maxiter))


@jax.default_matmul_precision("highest")  # float32 gradient and Hessian products: no TF32 on GPUs
def _influence_scores(loss_fn, params, train, test, regularizer, damping, method, cg_tol, cg_maxiter):
  x_tr, y_tr = train
  x_te, y_te = test
  n = len(x_tr)

  def objective(p):
    loss = jnp.mean(jax.vmap(loss_fn, in_axes=(None, 0, 0))(p, x_tr, y_tr))
    return loss + (regularizer(p) if regularizer is not None else 0.0)

  flat, unravel = ravel_pytree(params)
  test_grad = ravel_pytree(jax.grad(
      lambda p: jnp.sum(jax.vmap(loss_fn, in_axes=(None, 0, 0))(p, x_te, y_te)))(params))[0]
  if method == "exact":
    hess = jax.hessian(lambda f: objective(unravel(f)))(flat) + damping * jnp.eye(flat.size, dtype=flat.dtype)
    s_test = jnp.linalg.solve(hess, test_grad)
  else:
    def matvec(v):
      return ravel_pytree(hvp(objective, params, unravel(v)))[0] + damping * v
    s_test = conjugate_gradient(matvec, test_grad, tol=cg_tol, maxiter=cg_maxiter, damping=damping)
  train_grads = jax.vmap(lambda x, y: ravel_pytree(jax.grad(loss_fn)(params, x, y))[0])(x_tr, y_tr)
  return train_grads @ s_test / n
