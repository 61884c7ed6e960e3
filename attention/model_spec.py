"""A model handed to the sensitivity report: ``ModelSpec`` and its validation.

A ``ModelSpec`` wraps any classifier whose logits are a JAX function of its parameters and its input, so
the report's sections (attacks, local Lipschitz estimates, NTK, influence, attention bounds) can run on
models this project did not define. Attacks perturb the input in ``input_range`` (pixel space, [0, 1] for
images); a ``preprocess`` (e.g. per-channel standardisation) maps that input into ``apply_fn``'s domain:
the logits of an input x are ``apply_fn(params, preprocess(x))`` (``spec_logits``).

Example:
  >>> model = MyTransformer()
  >>> params = model.init(jax.random.key(0), x[:1])["params"]
  >>> spec = ModelSpec("mine", lambda p, x: model.apply({"params": p}, x), params, num_classes=10,
  ...                  module=model)
  >>> logits = validate_model_spec(spec, x[:8])     # [8, 10], or a one-line ValueError
"""
from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np


class ModelSpec(NamedTuple):
  """A classifier for the sensitivity report.

  Attributes:
    name: a non-empty label for tables and file names.
    apply_fn: ``apply_fn(params, x) -> logits`` with shape [batch, num_classes], float; x is the
      input after ``preprocess`` (the input itself when preprocess is None).
    params: the parameters, any pytree of float arrays.
    num_classes: number of classes C ≥ 2.
    init_params: optional parameters at initialisation (same tree structure and shapes as params), for
      the NTK kernel movement.
    module: optional Flax module (for reading attention layers by name; capture does not need it).
    input_range: (low, high), low < high, finite: the box the attacks clip the input to (ε on this scale).
    preprocess: optional ``preprocess(x) -> x'`` applied before apply_fn, so that attacks perturb x.
  """
  name: str
  apply_fn: Callable[[Any, jnp.ndarray], jnp.ndarray]
  params: Any
  num_classes: int
  init_params: Optional[Any] = None
  module: Optional[Any] = None
  input_range: tuple[float, float] = (0.0, 1.0)
  preprocess: Optional[Callable[[jnp.ndarray], jnp.ndarray]] = None

  @classmethod
  def from_nnx(cls, name: str, module, *, num_classes: int, params=None, init_params=None,
               input_range: tuple[float, float] = (0.0, 1.0), preprocess=None) -> "ModelSpec":
    """A ``ModelSpec`` of a Flax NNX model: ``nnx.split`` gives its parameters, ``apply_fn`` merges them back.

    ``apply_fn(params, x)`` runs ``nnx.merge(graphdef, params, rest)(x)``, where ``rest`` is the module's
    non-parameter state (batch statistics, RNG state) at the time of the call, held fixed. The spec holds
    params and init_params as pure dicts (``nnx.to_pure_dict``). The module's
    own ``__call__(x)`` must return logits [batch, num_classes]. Attention layers
    (``nnx.MultiHeadAttention``) are found by ``attention.capture`` as for Linen models.

    Args:
      name: label for tables and file names.
      module: an ``nnx.Module``.
      num_classes: C ≥ 2.
      params: parameters to report on, an ``nnx.State`` of the module's ``nnx.Param`` variables or its pure
        dict (``State.to_pure_dict()``); None: the module's current parameters.
      init_params: optional parameters at initialisation, in the same form (NTK kernel movement).
      input_range: the box the attacks clip inputs to (ε on this scale).
      preprocess: optional map from that box into the module's input domain.

    Returns:
      The ``ModelSpec`` (validate it with ``validate_model_spec``).

    Raises:
      ValueError: ``module`` is not an ``nnx.Module``.
    """
    from flax import nnx  # pylint: disable=g-import-not-at-top (Linen users never import NNX)
    if not isinstance(module, nnx.Module):
      raise ValueError(f"ModelSpec.from_nnx: module must be a flax.nnx.Module, got {type(module).__name__}")
    graphdef, own_params, rest = nnx.split(module, nnx.Param, ...)

    def pure(tree):  # one form for params and init_params, so their trees compare
      return nnx.to_pure_dict(tree) if isinstance(tree, nnx.State) else tree

    def apply_fn(p, x):
      return nnx.merge(graphdef, p, rest)(x)

    return cls(name, apply_fn, pure(own_params if params is None else params), num_classes,
               init_params=pure(init_params), module=module, input_range=input_range, preprocess=preprocess)


def spec_logits(spec: ModelSpec, params=None) -> Callable[[jnp.ndarray], jnp.ndarray]:
  """x -> apply_fn(params, preprocess(x)): logits [batch, num_classes] of inputs in ``input_range``.

  Args:
    spec: the model.
    params: parameters to use instead of ``spec.params`` (e.g. ``spec.init_params``).
  """
  params = spec.params if params is None else params
  if spec.preprocess is None:
    return lambda x: spec.apply_fn(params, x)
  return lambda x: spec.apply_fn(params, spec.preprocess(x))


def _one_line(error: BaseException) -> str:
  text = str(error).strip().splitlines()
  return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


def _check_fields(spec: ModelSpec) -> None:
  if not isinstance(spec, ModelSpec):
    raise ValueError(f"the model callable must return an attention.model_spec.ModelSpec, got "
                     f"{type(spec).__module__}.{type(spec).__qualname__}")
  if not isinstance(spec.name, str) or not spec.name.strip():
    raise ValueError(f"ModelSpec.name must be a non-empty string, got {spec.name!r}")
  if not callable(spec.apply_fn):
    raise ValueError(f"ModelSpec.apply_fn must be callable (params, x) -> logits, got {type(spec.apply_fn).__name__}")
  if spec.preprocess is not None and not callable(spec.preprocess):
    raise ValueError(f"ModelSpec.preprocess must be callable or None, got {type(spec.preprocess).__name__}")
  c = spec.num_classes
  if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c < 2:
    raise ValueError(f"ModelSpec.num_classes must be an integer >= 2, got {c!r}")
  try:
    low, high = (float(v) for v in spec.input_range)
  except (TypeError, ValueError):
    raise ValueError(f"ModelSpec.input_range must be a pair (low, high) of floats, got {spec.input_range!r}") from None
  if not (math.isfinite(low) and math.isfinite(high) and low < high):
    raise ValueError(f"ModelSpec.input_range must be finite with low < high, got {spec.input_range!r}")
  leaves = jax.tree_util.tree_leaves(spec.params)
  if not leaves:
    raise ValueError("ModelSpec.params must be a non-empty pytree of arrays, got no leaves")
  if spec.init_params is not None:
    # Tree structure and leaf shapes, compared separately: tree_map-ing shapes into an nnx.State gives a
    # State whose Variables do not compare equal even when the trees are the same.
    structure = jax.tree_util.tree_structure
    shapes = lambda tree: [tuple(np.shape(a)) for a in jax.tree_util.tree_leaves(tree)]  # noqa: E731
    if structure(spec.params) != structure(spec.init_params) or shapes(spec.params) != shapes(spec.init_params):
      raise ValueError("ModelSpec.init_params must have the same tree structure and leaf shapes as params")


def validate_model_spec(spec: ModelSpec, x_sample) -> jnp.ndarray:
  """Checks a ``ModelSpec`` on a data sample and returns its logits there.

  Args:
    spec: the model.
    x_sample: a batch of inputs in ``spec.input_range``, shape [batch, ...] with batch ≥ 1, float.

  Returns:
    The logits ``spec_logits(spec)(x_sample)``, float array with shape [batch, num_classes].

  Raises:
    ValueError (one line each): spec is not a ``ModelSpec``; a field out of range (name, apply_fn,
      preprocess, num_classes ≥ 2, input_range, params, init_params); x_sample empty, not finite or
      outside input_range; apply_fn failing on x_sample (data that does not fit the model); logits of
      the wrong shape or dtype, or holding NaN / inf.
  """
  try:
    return _validate(spec, x_sample)
  except ValueError as error:
    name = getattr(spec, "name", None)
    if isinstance(spec, ModelSpec) and isinstance(name, str) and name.strip():
      raise ValueError(f"model {name!r}: {error}") from error.__cause__
    raise


def range_tolerance(x_dtype, input_range) -> float:
  """How far data may lie outside ``input_range`` and still count as inside: 4 ulps of x's dtype at the
  range's magnitude, 4·eps·max(1, |low|, |high|) (a range computed in float64 against float32 data differs
  by rounding only: [-0.4242, 2.821] against [-0.424212917883804, 2.82148653034729])."""
  eps = float(np.finfo(x_dtype).eps) if np.issubdtype(np.dtype(x_dtype), np.floating) else 0.0
  return 4 * eps * max(1.0, *(abs(float(v)) for v in input_range))


def _validate(spec: ModelSpec, x_sample) -> jnp.ndarray:
  _check_fields(spec)
  x = np.asarray(x_sample)
  if x.ndim < 1 or x.shape[0] < 1:
    raise ValueError(f"x_sample must be a batch [batch, ...] with batch >= 1, got shape {x.shape}")
  if not np.issubdtype(x.dtype, np.floating) or not np.isfinite(x).all():
    raise ValueError(f"x_sample must hold finite floats, got dtype {x.dtype}")
  low, high = (float(v) for v in spec.input_range)
  tol = range_tolerance(x.dtype, spec.input_range)
  x_min, x_max = float(x.min()), float(x.max())  # compared in float64 (NumPy compares a float32 in float32)
  if x_min < low - tol or x_max > high + tol:
    raise ValueError(f"x_sample values lie in [{x_min:.6g}, {x_max:.6g}], outside input_range [{low:.6g}, "
                     f"{high:.6g}] (tolerance {tol:.2g})")
  try:
    logits = spec_logits(spec)(jnp.asarray(x))
  except Exception as error:  # noqa: BLE001 (any failure of user code is reported in one line)
    raise ValueError(f"apply_fn failed on data of shape {x.shape} (data that does not fit the model?): "
                     f"{_one_line(error)}") from error
  expected = (x.shape[0], int(spec.num_classes))
  shape = tuple(np.shape(logits))
  if shape != expected:
    raise ValueError(f"apply_fn must return logits [batch, num_classes] = {list(expected)}, got shape {list(shape)}")
  logits = jnp.asarray(logits)
  if not jnp.issubdtype(logits.dtype, jnp.floating):
    raise ValueError(f"apply_fn must return float logits, got dtype {logits.dtype}")
  if not bool(jnp.isfinite(logits).all()):
    raise ValueError(f"apply_fn returned NaN or inf logits on {int(jnp.sum(~jnp.isfinite(logits)))} entries")
  return logits
