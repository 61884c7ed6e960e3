"""Many models of one architecture attacked as one program: any attack of this package, vmapped (or mapped with
``lax.map``) over the models' stacked parameters (e.g. the training seeds of one configuration).

The attacks take their model as ``jax.tree_util.Partial(apply, params)`` and trace the params as array leaves
(``attacks._driver``), so vmapping the call over stacked params batches every step of the attack over the
models; each model's result equals the same attack on that model alone (tested, bit for bit on CPU). On 2 CPU
cores neither form beat the models one after another (docs/performance.md); vmap is for accelerators.
"""
from __future__ import annotations

from typing import Callable

import jax

from attacks.result import AttackResult


def over_models(attack: Callable, apply: Callable, params_S, x, y, *, vectorize: bool = True,
                **kwargs) -> AttackResult:
  """``attack`` on S models as one program: model s is ``Partial(apply, params_s)``.

  Args:
    attack: an attack of this package (``attacks.pgd_linf``, ``attacks.patch``, ...).
    apply: ``(params, x [batch, ...]) -> logits [batch, classes]``, one function object per architecture
      (``functools.lru_cache``d, as ``experiments.trainers.vit.apply_fns``), so the compiled program is reused.
    params_S: the models' parameters stacked along a leading axis of size S (every leaf [S, ...]).
    x, y: the images [batch, ...] and labels [batch] every model is attacked on (the same for all).
    vectorize: True (default): ``jax.vmap`` over the models (every step batched over them); False:
      ``jax.lax.map`` (one compiled loop, one model at a time, one model's memory).
    **kwargs: the attack's own arguments (eps, key, steps, ...), the same for every model; one key gives every
      model the same random starts.

  Returns:
    ``AttackResult`` whose fields carry a leading model axis: x_adv [S, batch, ...], success and zero_grad
    [S, batch].

  Raises:
    ValueError: params_S leaves whose leading axes differ, vectorize not a bool, or the attack's own errors.
  """
  if not isinstance(vectorize, bool):
    raise ValueError(f"vectorize must be True or False, got {vectorize!r}")
  leaves = jax.tree_util.tree_leaves(params_S)
  if not all(hasattr(leaf, "ndim") for leaf in leaves):
    raise ValueError(f"params_S must hold arrays stacked along a leading model axis, got leaves of types "
                     f"{sorted({type(leaf).__name__ for leaf in leaves})}")
  sizes = {leaf.shape[0] if leaf.ndim else None for leaf in leaves}
  if len(sizes) != 1 or None in sizes:
    raise ValueError(f"params_S must stack the models along one leading axis of every leaf, got leading sizes "
                     f"{sorted(map(str, sizes))}")
  one = lambda p: attack(jax.tree_util.Partial(apply, p), x, y, **kwargs)  # noqa: E731
  return jax.vmap(one)(params_S) if vectorize else jax.lax.map(one, params_S)
