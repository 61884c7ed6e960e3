"""Levenberg–Marquardt (damped Gauss–Newton) training of the fixed-readout 2-layer network on ½·MSE, in
function space through its full empirical NTK.

For residuals r = f_θ(X) − Y (all n·C entries) and the Jacobian J = ∂f/∂W ([n·C, d·m]), the damped
Gauss–Newton step is δ = −(JᵀJ + μI)⁻¹Jᵀr = −Jᵀ(JJᵀ + μI)⁻¹r (push-through identity), and JJᵀ is the
empirical NTK with its output blocks, Θ[(i, c), (j, c')] = (x_i·x_j)/m · Σ_r a_rc a_rc' 1[w_r·x_i > 0]
1[w_r·x_j > 0] (``full_ntk_fixed_readout``): an [n·C, n·C] solve instead of one over the d·m weights.
μ adapts (Levenberg 1944; Marquardt 1963; Nocedal & Wright 2006, §10.3): a step that lowers the loss is
taken and μ shrinks, one that does not is refused and μ grows.

Why here: the function distance at convergence compares the trained network with the kernel regression of
its NTK at initialisation, which interpolates. MLP-Attn reaches no ½·MSE target of 1e-3 with Adam or
L-BFGS (docs/theory.md#why-l-bfgs). Every step lies in the row space of J, as gradient descent's do, so for
a model that is linear in its parameters the iterates from θ₀ converge to the same interpolant as gradient
flow, θ₀ + Jᵀ(JJᵀ)⁻¹(Y − f₀): the kernel-regression limit the comparison is about
(docs/theory.md#function-distance-at-convergence).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

MAX_REFUSALS = 30  # consecutive refused steps (μ ×4 each) before giving up: μ has grown by 4³⁰ ≈ 1e18
ZERO_KERNEL = "zero kernel (every ReLU inactive on every input: J = 0, no step can move f)"
DAMPING_FLOOR = 1e-12  # μ never falls below this times max(1, largest kernel diagonal): K + μI stays definite


def full_ntk_fixed_readout(params, x_NxD) -> np.ndarray:
  """The empirical NTK of ``ntk.two_layer_relu(readout='fixed')`` with its output blocks, float64.

  Args:
    params: ``{'W': [d, m], 'a': [m, C]}`` (the fixed ±1 readout is not a parameter: its gradient is stopped).
    x_NxD: inputs [n, d].

  Returns:
    Θ as an [n·C, n·C] float64 array, rows and columns ordered (i, c) with c fastest, so that
    Θ = J Jᵀ for J = ∂ vec(f(X)) / ∂W with vec taking f [n, C] row by row.

  Raises:
    ValueError: params are not a fixed-readout dict, or the shapes do not line up.
  """
  if not (isinstance(params, dict) and set(params) == {"W", "a"}):
    raise ValueError("full_ntk_fixed_readout needs the fixed-readout params {'W', 'a'} of ntk.two_layer_relu")
  w = np.asarray(params["W"], np.float64)
  a = np.asarray(params["a"], np.float64)
  x = np.asarray(x_NxD, np.float64)
  if x.ndim != 2 or x.shape[1] != w.shape[0] or a.shape[0] != w.shape[1]:
    raise ValueError(f"x [n, d], W [d, m] and a [m, C] do not line up: {x.shape}, {w.shape}, {a.shape}")
  n, m, c = x.shape[0], w.shape[1], a.shape[1]
  active = (x @ w > 0).astype(np.float64)                       # [n, m]
  units = (active[:, :, None] * a[None, :, :]).transpose(0, 2, 1).reshape(n * c, m)  # rows (i, c)
  gram = np.repeat(np.repeat(x @ x.T, c, axis=0), c, axis=1)    # (x_i·x_j) on every (c, c') block entry
  return (units @ units.T) * gram / m


def train_gauss_newton(apply_fn, params, x_NxD, y_NxC, *, target_loss: float, max_iterations: int):
  """Levenberg–Marquardt on ½·mean((f − y)²) until the first iterate at or below ``target_loss``.

  Args:
    apply_fn: the fixed-readout ``ntk.two_layer_relu`` apply function.
    params: its params ``{'W', 'a'}`` (initial).
    x_NxD: training inputs [n, d]; y_NxC: targets [n, C].
    target_loss: the ½·MSE target ≥ 0.
    max_iterations: the cap on taken steps ≥ 0.

  Returns:
    (params, loss, iterations, stop_reason): the last iterate, its ½·MSE (float64 of the float32 outputs),
    the number of steps taken, and why it stopped short of the target ("" when it reached it or ran
    max_iterations): "zero kernel (every ReLU inactive on every input: J = 0, no step can move f)", or
    "MAX_REFUSALS refused steps in a row". μ starts at 1e-3·tr(K)/(nC) and never falls below
    DAMPING_FLOOR·max(1, max K_ii), so a singular or zero K never reaches the Cholesky factorisation.

  Raises:
    ValueError: params are not a fixed-readout dict, or apply_fn is not that network's.
  """
  if not (isinstance(params, dict) and set(params) == {"W", "a"}):
    raise ValueError("optimizer='gauss_newton' needs the fixed-readout network (params {'W', 'a'})")
  x, y = jnp.asarray(x_NxD), np.asarray(y_NxC, np.float64)
  readout = params["a"]
  w0, a0 = np.asarray(params["W"], np.float64), np.asarray(readout, np.float64)
  rows = np.asarray(x[:8], np.float64)
  expected = np.maximum(rows @ w0, 0) @ a0 / np.sqrt(w0.shape[1])
  if not np.allclose(np.asarray(apply_fn(params, x[:8]), np.float64), expected, rtol=1e-4,
                     atol=1e-5 * max(1.0, np.abs(expected).max())):
    raise ValueError("optimizer='gauss_newton' needs ntk.two_layer_relu's fixed-readout apply_fn "
                     "(f = relu(x W) a / √m): its kernel is that model's closed form")

  def outputs(w):
    return apply_fn({"W": w, "a": readout}, x)

  def half_mse(f):
    return 0.5 * float(np.mean((np.asarray(f, np.float64) - y) ** 2))

  w = params["W"]
  f = outputs(w)
  value = half_mse(f)
  kernel = full_ntk_fixed_readout(params, x)

  def floor(k):
    return DAMPING_FLOOR * max(1.0, float(np.max(np.diag(k))))

  mu = max(1e-3 * float(np.trace(kernel)) / kernel.shape[0], floor(kernel))
  iterations = refusals = 0
  while value > target_loss and math.isfinite(value) and iterations < max_iterations:
    if not np.any(kernel):
      return {"W": w, "a": readout}, value, iterations, ZERO_KERNEL
    residual = (np.asarray(f, np.float64) - y).reshape(-1)
    _, pullback = jax.vjp(outputs, w)
    while True:
      z = scipy.linalg.cho_solve(scipy.linalg.cho_factor(kernel + mu * np.eye(kernel.shape[0])), residual)
      step = pullback(jnp.asarray(z.reshape(y.shape), f.dtype))[0]        # Jᵀ z
      candidate = w - step
      f_new = outputs(candidate)
      new_value = half_mse(f_new)
      if new_value < value:
        w, f, value, mu, refusals = candidate, f_new, new_value, mu / 10, 0
        break
      mu, refusals = mu * 4, refusals + 1
      if refusals >= MAX_REFUSALS:
        return {"W": w, "a": readout}, value, iterations, f"{MAX_REFUSALS} refused steps in a row"
    iterations += 1
    if value > target_loss:
      kernel = full_ntk_fixed_readout({"W": w, "a": readout}, x)
      mu = max(mu, floor(kernel))
  return {"W": w, "a": readout}, value, iterations, ""
