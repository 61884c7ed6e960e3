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

from typing import Callable, Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree


def hvp(objective: Callable, params, vector):
  """Hessian-vector product ∇²objective(params)·vector (forward-over-reverse); pytrees in and out."""
  return jax.jvp(jax.grad(objective), (params,), (vector,))[1]


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
    ValueError: negative damping or unknown method.
  """
  if damping < 0:
    raise ValueError(f"damping must be ≥ 0, got {damping}")
  if method not in ("cg", "exact"):
    raise ValueError(f"method must be 'cg' or 'exact', got {method!r}")
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
    s_test, _ = jax.scipy.sparse.linalg.cg(matvec, test_grad, tol=cg_tol, maxiter=cg_maxiter)
  train_grads = jax.vmap(lambda x, y: ravel_pytree(jax.grad(loss_fn)(params, x, y))[0])(x_tr, y_tr)
  return np.asarray(train_grads @ s_test / n)
