"""The linearisation at initialisation of the fixed-readout 2-layer ReLU network, trainable by any recipe.

For f(x; W) = relu(x W) a / √m (``ntk.models.two_layer_relu``, readout a fixed) the first-order Taylor
expansion in W around W₀ is exactly the same network with each ReLU's gate frozen at initialisation:
  f_lin(x; W) = f(x; W₀) + ⟨∇_W f(x; W₀), W − W₀⟩ = ((x W) ⊙ 1[x W₀ > 0]) a / √m,
since relu(z) = z·1[z > 0] and ∂relu(z)/∂z = 1[z > 0]. Its tangent kernel is the empirical NTK at W₀ for
every W, so f_lin trained by a recipe is the finite-width NTK model trained by that recipe (Lee et al.,
"Wide Neural Networks of Any Depth Evolve as Linear Models Under Gradient Descent", NeurIPS 2019,
arXiv 1902.06720, eq. (6); docs/theory.md#kernel-distance).

The gates ride along with the inputs (``gated_inputs``: rows [x | 1[x W₀ > 0]]), so the linearised model
is an ordinary ``apply_fn(params, rows)`` and the trainers' batching (``ntk.criterion.train_to_criterion``:
the same minibatches from the same key) applies to it unchanged.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ntk._checks import check_width


def gated_inputs(x_NxD, w0_DxM) -> np.ndarray:
  """Rows [x | 1[x W₀ > 0]] (float32 [n, d + m]): the inputs of ``linearized_two_layer_relu``.

  Args:
    x_NxD: network inputs (features) [n, d], finite.
    w0_DxM: the first layer at initialisation, [d, m].

  Raises:
    ValueError: mismatched shapes or non-finite inputs.
  """
  x, w0 = np.asarray(x_NxD, np.float32), np.asarray(w0_DxM, np.float32)
  if x.ndim != 2 or w0.ndim != 2 or x.shape[1] != w0.shape[0]:
    raise ValueError(f"x_NxD [n, d] and w0_DxM [d, m] must share d, got shapes {x.shape} and {w0.shape}")
  if not (np.all(np.isfinite(x)) and np.all(np.isfinite(w0))):
    raise ValueError("x_NxD and w0_DxM must be finite")
  gate = (np.asarray(jnp.asarray(x) @ jnp.asarray(w0)) > 0).astype(np.float32)
  return np.concatenate([x, gate], axis=1)


def _apply(d_in: int, width: int, params, rows_NxDM, **kwargs):
  del kwargs
  x, gate = rows_NxDM[:, :d_in], rows_NxDM[:, d_in:]
  a_MxC = jax.lax.stop_gradient(params["a"])
  return ((x @ params["W"]) * gate) @ a_MxC / jnp.sqrt(float(width))


@functools.lru_cache(maxsize=None)
def linearized_two_layer_relu(width: int, d_in: int):
  """``apply_fn(params, rows [n, d + m]) -> [n, C]`` of f_lin (module docstring), params ``{'W', 'a'}`` as
  ``two_layer_relu(width, d_in, readout='fixed')``'s (the readout's gradient stopped as there). Cached:
  equal arguments return the same function, so jitted trainers compile once per shape.

  Raises:
    ValueError: width or d_in not an integer ≥ 1.

  Source: Lee et al. 2019 (arXiv 1902.06720) eq. (6), for the network of arXiv 2603.13085 §3.
  """
  return functools.partial(_apply, check_width(d_in, "d_in"), check_width(width))
