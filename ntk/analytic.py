"""Closed-form infinite-width kernels of the 2-layer ReLU network (arc-cosine kernels of degree 0 and 1).

For w ~ N(0, I) and θ the angle between x and x':
  E[1(wᵀx > 0) 1(wᵀx' > 0)] = (π − θ) / (2π)                         (degree 0)
  E[relu(wᵀx) relu(wᵀx')]   = ‖x‖‖x'‖ (sin θ + (π − θ) cos θ) / (2π)   (degree 1, the NNGP)
so the fixed-readout NTK is K∞(x, x') = xᵀx' (π − θ) / (2π), which for unit-norm inputs is
xᵀx' (π − arccos(xᵀx')) / (2π); a trained readout adds the degree-1 term.

Source: Cho & Saul, "Kernel Methods for Deep Learning" (NeurIPS 2009); Du et al. (ICLR 2019), eq. (5);
arXiv 2603.13085 §3 (docs/theory.md#arc-cosine-kernels).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from attention.safe_math import pow2_row_scale, safe_arccos, safe_divide, safe_norm
from ntk._checks import as_float, check_inputs


@jax.default_matmul_precision("highest")
def _angles(x1_NxD, x2_MxD):
  """(xᵀx', ‖x‖‖x'‖, θ) for every pair, with values and gradients finite at every boundary.

  θ = π/2 where either row is zero (the kernels are 0 there whatever θ is, and neural-tangents uses the same
  fill), and θ has derivative 0 at ρ = ±1 (attention.safe_math), so k(x, x) has gradient x and a zero row
  gradient 0, as the closed form and neural-tangents' own kernel give.
  """
  dots_NxM = x1_NxD @ x2_MxD.T
  # Norms and cosines from rows scaled by powers of two (exact: the same values), so ‖x‖² cannot overflow.
  (u1, s1), (u2, s2) = pow2_row_scale(x1_NxD), pow2_row_scale(x2_MxD)
  n1, n2 = safe_norm(u1, axis=1), safe_norm(u2, axis=1)
  norms_NxM = (n1 * s1[:, 0])[:, None] * (n2 * s2[:, 0])[None, :]
  cos_NxM = safe_divide(u1 @ u2.T, n1[:, None] * n2[None, :], 0.0)
  return dots_NxM, norms_NxM, safe_arccos(cos_NxM)


def arccos_ntk(x1_NxD, x2_MxD=None, *, readout: str = "fixed") -> jnp.ndarray:
  """Infinite-width NTK of the 2-layer ReLU network with w ~ N(0, I), no biases.

  Args:
    x1_NxD: inputs, shape [n, d] (any norm; the paper feeds unit-norm rows).
    x2_MxD: second inputs, shape [m, d]; defaults to x1.
    readout: ``'fixed'`` (only W trained: xᵀx'(π − θ)/(2π)) or ``'trained'`` (adds the NNGP term
      ‖x‖‖x'‖(sin θ + (π − θ) cos θ)/(2π)).

  Returns:
    Kernel with shape [n, m], dtype of the inputs (pass float64 arrays under x64 for float64).

  Raises:
    ValueError: wrong ranks, mismatched d, NaN inputs, unknown readout.
  """
  x1_NxD, x2_MxD = as_float(x1_NxD), None if x2_MxD is None else as_float(x2_MxD)
  if x2_MxD is not None:
    check_inputs(x2_MxD, "x2")  # finite first, so an overflow check of x1 never reads a NaN partner
  x1_NxD = check_inputs(x1_NxD, "x1", kernel=True, partner=x2_MxD)
  x2_MxD = x1_NxD if x2_MxD is None else check_inputs(x2_MxD, "x2", x1_NxD.shape[1], kernel=True, partner=x1_NxD)
  if readout not in ("fixed", "trained"):
    raise ValueError(f"readout must be 'fixed' or 'trained', got {readout!r}")
  dots_NxM, norms_NxM, theta_NxM = _angles(jnp.asarray(x1_NxD), jnp.asarray(x2_MxD))
  k_NxM = dots_NxM * (jnp.pi - theta_NxM) / (2 * jnp.pi)
  if readout == "trained":
    k_NxM = k_NxM + arccos_nngp(x1_NxD, x2_MxD)
  return k_NxM


def arccos_nngp(x1_NxD, x2_MxD=None) -> jnp.ndarray:
  """Degree-1 arc-cosine kernel E[relu(wᵀx) relu(wᵀx')], w ~ N(0, I): the 2-layer NNGP.

  Args/Returns: as ``arccos_ntk``; shape [n, m].
  """
  x1_NxD, x2_MxD = as_float(x1_NxD), None if x2_MxD is None else as_float(x2_MxD)
  if x2_MxD is not None:
    check_inputs(x2_MxD, "x2")  # finite first, so an overflow check of x1 never reads a NaN partner
  x1_NxD = check_inputs(x1_NxD, "x1", kernel=True, partner=x2_MxD)
  x2_MxD = x1_NxD if x2_MxD is None else check_inputs(x2_MxD, "x2", x1_NxD.shape[1], kernel=True, partner=x1_NxD)
  dots_NxM, norms_NxM, theta_NxM = _angles(jnp.asarray(x1_NxD), jnp.asarray(x2_MxD))
  # ‖x‖‖x'‖cos θ written as xᵀx', so a zero row gets neural-tangents' gradient x'(π − θ)/(2π), θ = π/2.
  return (norms_NxM * jnp.sin(theta_NxM) + (jnp.pi - theta_NxM) * dots_NxM) / (2 * jnp.pi)
