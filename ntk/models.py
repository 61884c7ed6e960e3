"""The two networks of the influence-malleability paper as ``(init_fn, apply_fn, kernel_fn)`` triples.

* 2L-ReLU with a fixed ±1 readout (Du et al. 2018; the paper's model, docs/theory.md#two-layer-relu-network):
  f(x) = (1/√m) Σ_r a_r relu(w_rᵀ x), w_r ~ N(0, I_d), a_r ∈ {±1} fixed, only W trained.
* The standard neural-tangents ``stax`` Dense → Relu → Dense with NTK parameterisation, where the readout
  is trained too. The first layer uses W_std = √d_in so that its weights match w ~ N(0, I) (stax divides by
  √d_in); its NTK therefore equals the fixed-readout NTK plus the NNGP term of the readout.

MLP-Attn is either network applied to linearized-attention features (``ntk.features``).
Both models take flattened inputs of shape [n, d_in] and return [n, out_dim]. No biases.
"""
from __future__ import annotations

import functools
from typing import Callable, Literal, NamedTuple

import jax
import jax.numpy as jnp
from neural_tangents import stax

from ntk._checks import check_width

Readout = Literal["fixed", "trained"]
READOUTS = ("fixed", "trained")


class Model(NamedTuple):
  """A network as a neural-tangents style triple.

  Fields:
    init_fn: ``init_fn(key, input_shape) -> (output_shape, params)``.
    apply_fn: ``apply_fn(params, x_NxD) -> f_NxC`` (pure).
    kernel_fn: ``kernel_fn(x1_NxD, x2_MxD=None, get='ntk') -> [N, M]`` infinite-width kernel.
    readout: ``'fixed'`` or ``'trained'``.
    width: hidden width m.
  """
  init_fn: Callable
  apply_fn: Callable
  kernel_fn: Callable
  readout: str
  width: int


def _stax_two_layer(width: int, d_in: int, out_dim: int):
  return stax.serial(
      stax.Dense(width, W_std=float(d_in) ** 0.5, b_std=None, parameterization="ntk"),
      stax.Relu(),
      stax.Dense(out_dim, W_std=1.0, b_std=None, parameterization="ntk"),
  )


@functools.lru_cache(maxsize=256)
def two_layer_relu(
    width: int,
    d_in: int,
    *,
    out_dim: int = 1,
    readout: Readout = "fixed",
    antisymmetric: bool = False,
) -> Model:
  """A 2-layer ReLU network in NTK parameterisation.

  Args:
    width: hidden width m ≥ 1 (even when ``antisymmetric``).
    d_in: input dimension d (flattened features).
    out_dim: number of outputs C (1 for the paper's scalar model; 10 for one-hot targets).
    readout: ``'fixed'`` — the paper's model, readout a ∈ {±1}^(m×C) drawn at init and never trained
      (``apply_fn`` stops its gradient, so the empirical NTK and gradient descent see only W);
      ``'trained'`` — neural-tangents' stax Dense→Relu→Dense, readout V ~ N(0, 1) trained.
    antisymmetric: initialise the hidden units in pairs (w, a) and (w, −a) so that f₀ ≡ 0 up to float
      rounding (Chizat et al. 2019's antisymmetric trick). The infinite-width kernel is unchanged; the empirical
      NTK has the same distribution as at width m/2 with duplicated units.

  Returns:
    ``Model`` (cached: equal arguments return the same object, so jitted code that takes ``apply_fn`` as
    a static argument — training, attacks, neural-tangents kernels — compiles once per architecture, not
    once per seed) whose params are ``{'W': [d, m], 'a': [m, C]}`` for the fixed readout and the stax
    params ``[(W [d, m], None), (), (V [m, C], None)]`` for the trained readout.

  Raises:
    ValueError: non-positive width, d_in or out_dim; unknown readout; odd width with antisymmetric.

  Source: Du et al., "Gradient Descent Provably Optimizes Over-parameterized Neural Networks" (ICLR 2019),
    eq. (1); arXiv 2603.13085 §3.
  """
  width = check_width(width)
  d_in = check_width(d_in, "d_in")
  out_dim = check_width(out_dim, "out_dim")
  if readout not in READOUTS:
    raise ValueError(f"readout must be one of {READOUTS}, got {readout!r}")
  if antisymmetric and width % 2:
    raise ValueError(f"width must be even when antisymmetric=True, got {width}")
  stax_init, stax_apply, stax_kernel = _stax_two_layer(width, d_in, out_dim)

  if readout == "trained":
    def init_fn(key, input_shape):
      out_shape, params = stax_init(key, input_shape)
      if antisymmetric:
        (w, _), _, (v, _) = params
        half = width // 2
        w = jnp.concatenate([w[:, :half], w[:, :half]], axis=1)
        v = jnp.concatenate([v[:half], -v[:half]], axis=0)
        params = [(w, None), (), (v, None)]
      return out_shape, params

    return Model(init_fn, stax_apply, stax_kernel, readout, width)

  def init_fn(key, input_shape):
    if input_shape[-1] != d_in:
      raise ValueError(f"input_shape[-1] = {input_shape[-1]} but d_in = {d_in}")
    key_w, key_a = jax.random.split(key)
    cols = width // 2 if antisymmetric else width
    w_DxM = jax.random.normal(key_w, (d_in, cols))
    a_MxC = jnp.where(jax.random.bernoulli(key_a, 0.5, (cols, out_dim)), 1.0, -1.0)
    if antisymmetric:
      w_DxM = jnp.concatenate([w_DxM, w_DxM], axis=1)
      a_MxC = jnp.concatenate([a_MxC, -a_MxC], axis=0)
    return tuple(input_shape[:-1]) + (out_dim,), {"W": w_DxM, "a": a_MxC}

  def apply_fn(params, x_NxD, **kwargs):
    del kwargs
    a_MxC = jax.lax.stop_gradient(params["a"])
    h_NxM = jax.nn.relu(x_NxD @ params["W"])
    return h_NxM @ a_MxC / jnp.sqrt(float(width))

  def kernel_fn(x1, x2=None, get="ntk", **kwargs):
    # The fixed readout removes the readout's NNGP term from the stax NTK; the NNGP is unchanged.
    k = stax_kernel(x1, x2, ("nngp", "ntk"), **kwargs)
    if get == "ntk":
      return k.ntk - k.nngp
    if get == "nngp":
      return k.nngp
    if isinstance(get, (tuple, list)):
      return tuple(k.ntk - k.nngp if g == "ntk" else k.nngp for g in get)
    raise ValueError(f"get must be 'ntk', 'nngp' or a tuple of them, got {get!r}")

  return Model(init_fn, apply_fn, kernel_fn, readout, width)


def first_layer_weights(model: Model, params) -> jnp.ndarray:
  """Returns W with shape [d, m] (w_r ~ N(0, I) in both variants)."""
  return params["W"] if model.readout == "fixed" else params[0][0]


def readout_weights(model: Model, params) -> jnp.ndarray:
  """Returns the readout with shape [m, C] (a ∈ {±1} or the trained V)."""
  return params["a"] if model.readout == "fixed" else params[2][0]


def penalized_leaves(params) -> list:
  """The parameter leaves an L2 penalty applies to: every leaf except a fixed readout's ``'a'``.

  The fixed ±1 readout (``readout='fixed'``, params ``{'W', 'a'}``) is not trained: ``apply_fn`` stops its
  data gradient, but a penalty (l2/2)·‖a‖² would still shrink it (Adam turns the gradient l2·a into
  steps of about the learning rate), driving f to 0. Trained-readout (stax) params are all penalised.
  """
  if isinstance(params, dict) and set(params) == {"W", "a"}:
    return [params["W"]]
  return jax.tree_util.tree_leaves(params)
