"""Closed-form infinite-width kernels of the 2-layer ReLU network (arc-cosine kernels of degree 0 and 1).

For w ~ N(0, I) and θ the angle between x and x':
  E[1(wᵀx > 0) 1(wᵀx' > 0)] = (π − θ) / (2π)                         (degree 0)
  E[relu(wᵀx) relu(wᵀx')]   = ‖x‖‖x'‖ (sin θ + (π − θ) cos θ) / (2π)   (degree 1, the NNGP)
so the fixed-readout NTK is K∞(x, x') = xᵀx' (π − θ) / (2π), which for unit-norm inputs is
xᵀx' (π − arccos(xᵀx')) / (2π); a trained readout adds the degree-1 term.

Source: Cho & Saul, "Kernel Methods for Deep Learning" (NeurIPS 2009); Du et al. (ICLR 2019), eq. (5);
arXiv 2603.13085 §3 (REFERENCE §1).
"""
from __future__ import annotations

import jax.numpy as jnp

from ntk._checks import check_inputs


def _angles(x1_NxD, x2_MxD):
  dots_NxM = x1_NxD @ x2_MxD.T
  norms_NxM = jnp.linalg.norm(x1_NxD, axis=1)[:, None] * jnp.linalg.norm(x2_MxD, axis=1)[None, :]
  cos_NxM = jnp.clip(dots_NxM / jnp.where(norms_NxM > 0, norms_NxM, 1.0), -1.0, 1.0)
  return dots_NxM, norms_NxM, jnp.arccos(cos_NxM)


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
  x1_NxD = check_inputs(x1_NxD, "x1")
  x2_MxD = x1_NxD if x2_MxD is None else check_inputs(x2_MxD, "x2", x1_NxD.shape[1])
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
  x1_NxD = check_inputs(x1_NxD, "x1")
  x2_MxD = x1_NxD if x2_MxD is None else check_inputs(x2_MxD, "x2", x1_NxD.shape[1])
  _, norms_NxM, theta_NxM = _angles(jnp.asarray(x1_NxD), jnp.asarray(x2_MxD))
  return norms_NxM * (jnp.sin(theta_NxM) + (jnp.pi - theta_NxM) * jnp.cos(theta_NxM)) / (2 * jnp.pi)
