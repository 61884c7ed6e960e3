"""TracIn (Pruthi et al., "Estimating Training Data Influence by Tracing Gradient Descent", NeurIPS 2020,
eq. 3, the checkpoint form TracInCP):
    TracIn(z_j, z_t) = Σ_k η_k ∇ℓ(θ_k, z_j) · ∇ℓ(θ_k, z_t)
over saved checkpoints θ_k with learning rates η_k. Summed over the test points it approximates the
decrease of the test loss due to training on z_j, so positive = helpful, as in ``ntk_loo`` (the scale differs:
TracIn is not a leave-one-out quantity; compare rankings).
"""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree


def tracin(loss_fn: Callable, checkpoints: Sequence, learning_rates: Sequence[float], train, test) -> np.ndarray:
  """TracInCP influence of every training point on the summed test loss.

  Args:
    loss_fn: per-example loss ``loss_fn(params, x, y) -> scalar``.
    checkpoints: parameter pytrees θ_k saved during training.
    learning_rates: η_k, one per checkpoint (the step size in effect there).
    train: ``(x_train [n, ...], y_train [n, ...])``; test: ``(x_test [t, ...], y_test [t, ...])``.

  Returns:
    [n] numpy array of Σ_k η_k ∇ℓ(θ_k, z_j)·Σ_t ∇ℓ(θ_k, z_t).

  Raises:
    ValueError: no checkpoints, or checkpoints and learning_rates of different lengths.
  """
  if len(checkpoints) == 0 or len(checkpoints) != len(learning_rates):
    raise ValueError(f"need one learning rate per checkpoint, got {len(checkpoints)} checkpoints and "
                     f"{len(learning_rates)} learning rates")
  one = jax.jit(functools.partial(checkpoint_scores, loss_fn, train=train, test=test))
  return np.asarray(sum(eta * one(p) for p, eta in zip(checkpoints, learning_rates)))


@jax.default_matmul_precision("highest")  # float32 gradient products: no TF32 on GPUs
def checkpoint_scores(loss_fn: Callable, params, train, test) -> jnp.ndarray:
  """∇ℓ(θ, z_j)·Σ_t ∇ℓ(θ, z_t) for every training point at one checkpoint θ, shape [n] (jit-friendly).

  Args: as ``tracin``, with one parameter pytree ``params``.
  """
  x_tr, y_tr = train
  x_te, y_te = test
  grads = jax.vmap(lambda x, y: ravel_pytree(jax.grad(loss_fn)(params, x, y))[0])(x_tr, y_tr)
  test_grad = ravel_pytree(jax.grad(
      lambda p: jnp.sum(jax.vmap(loss_fn, in_axes=(None, 0, 0))(p, x_te, y_te)))(params))[0]
  return grads @ test_grad
