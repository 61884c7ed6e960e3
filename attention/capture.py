"""Finding the attention layers of any Flax model, without touching its code, and rebuilding their heads.

``capture_attention(apply_fn, params, x)`` runs the model once under Flax's method interception
(``flax.linen.intercept_methods``) with jit disabled, so every call of a recognised attention module is
seen with concrete arrays. Recognised: ``flax.linen.MultiHeadDotProductAttention`` (and its subclass
``SelfAttention``), ``flax.nnx.MultiHeadAttention`` (NNX models: its ``__call__`` is wrapped for the
duration of the capture), ``attention.differential.MultiHeadSelfAttention``,
``attention.differential.DifferentialAttention`` and ``attention.certified_vit.MultiHeadAttention``
(CertifiedViT's). For each call it records the input tokens X [batch, T, D], the output, and the
weights read from the module's own variables (the params subtree at its path), from which the heads are
rebuilt:

  softmax heads:       layer(X) = Σ_h rowsoftmax(X̃ A_h X̃ᵀ) X̃ W_VO^h + b,
                       A_h = W̃_Q^h W̃_K^hᵀ / √d,   W_VO^h = W̃_V^h W_O^h;
  differential heads:  layer(X) = Σ_h (1 − λ_init)·RMSNorm((A₁^h − λA₂^h) X̃ W̃_V^h)·g W_O^h + b,
                       A_j^h = W̃_Q^{h,j} W̃_K^{h,j}ᵀ / √d   (Ye et al., ICLR 2025, eq. 1–3).

Biases. With query/key biases the logits are (XW_Q + 1b_Qᵀ)(XW_K + 1b_Kᵀ)ᵀ/√d = X̃ A X̃ᵀ with the
augmented tokens X̃ = [X, 1] [T, D + 1] and W̃ = [W; bᵀ] (``augmented`` = True). The local bound of
``attention.sensitivity`` holds for every perturbation Δ̃ of X̃ with ‖Δ̃‖_F ≤ ε; the perturbations of the
real tokens are Δ̃ = [Δ, 0] with ‖Δ̃‖_F = ‖Δ‖_F, a subset of that ball, so the bound evaluated at X̃
remains an upper bound on the layer's deviation (possibly looser, never smaller). A softmax head's value
bias adds P·1 b_Vᵀ W_O = 1 b_Vᵀ W_O (rows of P sum to 1), a constant: it is moved into the output bias b
(which cancels in differences), and W_VO^h gets a zero row for the constant token. A differential head's
value bias passes through the RMSNorm, so it stays in W̃_V^h.

Not covered by the bound (``bound_applicable`` False, with the reason; heads None when the layer cannot
be rebuilt as above): an attention mask, ``normalize_qk``, cross-attention (inputs_q ≠ inputs_k/v),
a decode cache, active dropout, a custom ``attention_fn`` or einsum, NNX's ``is_causal`` and grouped-query
heads (``num_kv_heads`` < ``num_heads``), and differential heads (rebuilt, but
the bound covers softmax dot-product heads only). A layer whose weights cannot be read, or that runs
inside a JAX transformation that traces even with jit disabled (e.g. ``nn.vmap``), is listed as unreadable.

Transformations. ``jax.checkpoint`` / ``jax.remat`` trace their function even with jit disabled; they change
only what is stored for the backward pass, never the forward values, so for the duration of the capture they
return the function as it is, and the layers under a checkpoint applied while the model runs (``nn.remat``,
whose lifted transform calls ``jax.remat`` at every call; ``nnx.remat`` called inside ``__call__``) are read.
A function wrapped before the capture (e.g. a method decorated with ``nnx.remat``) still traces. ``nn.scan``
with jit disabled runs its body once per step with concrete arrays, after one abstract pass of Flax's own
(``flax.core.axes_scan``'s check of the broadcast variables): calls made in that pass are not layers and are
not recorded, so a scanned stack of d layers, with or without ``nn.remat`` inside, gives d layers.

Source of the bound's setting: Havens et al., "Fine-grained local sensitivity analysis of standard
dot-product self-attention" (ICML 2024); see ``attention.sensitivity``.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import math
import sys
from typing import Any, Callable, NamedTuple, Optional, Union

import flax.linen as nn
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

from attention.certified_vit import MultiHeadAttention as CertifiedAttention
from attention.certified_vit import head_matrices as certified_head_matrices
from attention.differential import (RMS_NORM_EPS, DifferentialAttention, MultiHeadSelfAttention,
                                    reparameterized_lambda)

HIGHEST = jax.lax.Precision.HIGHEST

KIND_FLAX = "flax.linen.MultiHeadDotProductAttention"
KIND_NNX = "flax.nnx.MultiHeadAttention"
KIND_SELF = "MultiHeadSelfAttention"
KIND_DIFFERENTIAL = "DifferentialAttention"
KIND_CERTIFIED = "CertifiedViT.MultiHeadAttention"
KINDS = (KIND_FLAX, KIND_NNX, KIND_SELF, KIND_DIFFERENTIAL, KIND_CERTIFIED)


class SoftmaxHeads(NamedTuple):
  """Softmax dot-product heads of one layer, on tokens of width D' (D + 1 when augmented).

  Attributes:
    a: A_h = W̃_Q^h W̃_K^hᵀ / √d, float32 [H, D', D'].
    w_vo: W_VO^h = W_V^h W_O^h, float32 [H, D', F] (a zero last row when augmented).
  """
  a: jnp.ndarray
  w_vo: jnp.ndarray


class DifferentialHeads(NamedTuple):
  """Differential heads of one layer (Ye et al., ICLR 2025), on tokens of width D'.

  Attributes:
    a1, a2: the two maps' A_h, float32 [H, D', D'].
    w_v: value maps W̃_V^h, float32 [H, D', 2d] (bias row when augmented).
    w_o: output maps W_O^h, float32 [H, 2d, F].
    gain: RMSNorm gain, float32 [2d] (ones when not learnable).
    lam: λ of the layer, float32 scalar.
    lambda_init: λ_init ∈ [0, 1), float.
  """
  a1: jnp.ndarray
  a2: jnp.ndarray
  w_v: jnp.ndarray
  w_o: jnp.ndarray
  gain: jnp.ndarray
  lam: jnp.ndarray
  lambda_init: float


Heads = Union[SoftmaxHeads, DifferentialHeads]


class AttentionLayer(NamedTuple):
  """One captured call of an attention layer.

  Attributes:
    path: the module path, "/"-joined ("block_0/attention"); "#k" is appended to the k-th repeat call.
    kind: one of ``KINDS``.
    tokens: input tokens X, float [batch, T, D] (leading batch axes flattened; None if unreadable).
    output: the layer's output, float [batch, T, F] (None if unreadable).
    heads: ``SoftmaxHeads`` or ``DifferentialHeads``, or None when the layer cannot be rebuilt.
    output_bias: b, float [F] (None with heads None).
    augmented: whether the heads act on [X, 1] (query/key biases absorbed; module docstring).
    bound_applicable: whether ``attention.sensitivity``'s local bound applies (softmax self-attention).
    reason: why not ("" when applicable).
    weights: for a Linen or NNX dot-product layer whose heads cannot be rebuilt (a mask, ``normalize_qk``,
      cross-attention, ...), the attention weights the layer itself computed, [batch, H, T_q, T_k] (its
      ``dot_product_attention_weights``, masks included), so that entropy and the largest weight, which
      need no bound, can still be reported; None otherwise.
  """
  path: str
  kind: str
  tokens: Optional[jnp.ndarray]
  output: Optional[jnp.ndarray]
  heads: Optional[Heads]
  output_bias: Optional[jnp.ndarray]
  augmented: bool
  bound_applicable: bool
  reason: str
  weights: Optional[jnp.ndarray] = None


class Capture(NamedTuple):
  """Result of ``capture_attention``: the logits and every attention call, in call order."""
  logits: Any
  layers: tuple[AttentionLayer, ...]


class _NotApplicable(Exception):
  """A layer the heads cannot describe (the message is the reason)."""


def _mm(subscripts: str, *operands) -> jnp.ndarray:
  return jnp.einsum(subscripts, *operands, precision=HIGHEST)


def _kind(module) -> Optional[str]:
  if isinstance(module, nn.MultiHeadDotProductAttention):
    return KIND_FLAX
  if isinstance(module, nnx.MultiHeadAttention):
    return KIND_NNX
  if isinstance(module, DifferentialAttention):
    return KIND_DIFFERENTIAL
  if isinstance(module, MultiHeadSelfAttention):
    return KIND_SELF
  if isinstance(module, CertifiedAttention):
    return KIND_CERTIFIED
  return None


def _bind(module, args, kwargs) -> dict:
  """The call's arguments by name (defaults filled in), from the module class's own signature."""
  bound = inspect.signature(type(module).__call__).bind(module, *args, **kwargs)
  bound.apply_defaults()
  return dict(bound.arguments)


def _flatten_tokens(x) -> jnp.ndarray:
  """[..., T, D] -> [batch, T, D] (an unbatched [T, D] gets batch 1)."""
  x = jnp.asarray(x)
  if x.ndim < 2:
    raise ValueError(f"attention input must have shape [..., T, D], got {tuple(x.shape)}")
  return x.reshape((-1,) + x.shape[-2:])


def _same_input(a, b) -> bool:
  if b is None or b is a:
    return True
  a, b = np.asarray(a), np.asarray(b)
  return a.shape == b.shape and bool(np.array_equal(a, b))


def _with_bias_row(w_DxHxK, b_HxK):
  """[D, H, k] kernel -> [D + 1, H, k] with the bias as the last row (for the augmented token 1)."""
  return jnp.concatenate([w_DxHxK, b_HxK[None]], axis=0)


def _softmax_heads(wq, bq, wk, bk, wv, bv, wo, bo, use_bias: bool):
  """Heads from kernels wq, wk, wv [D, H, d], wo [H, d, F] and biases [H, d], bo [F] (or None)."""
  d = wq.shape[-1]
  if use_bias:
    wq, wk = _with_bias_row(wq, bq), _with_bias_row(wk, bk)
  a = _mm("dhk,ehk->hde", wq, wk) / math.sqrt(d)
  w_vo = _mm("dhk,hkf->hdf", wv, wo)
  bias = jnp.zeros(wo.shape[-1], w_vo.dtype) if bo is None else jnp.asarray(bo)
  if use_bias:
    w_vo = jnp.concatenate([w_vo, jnp.zeros_like(w_vo[:, :1])], axis=1)
    bias = bias + _mm("hk,hkf->f", bv, wo)
  return SoftmaxHeads(a, w_vo), bias


def _check_dot_product_call(module, call: dict, default_attention_fn) -> None:
  """Raises _NotApplicable where a Linen or NNX dot-product attention call is not X A Xᵀ self-attention."""
  if call.get("mask") is not None:
    raise _NotApplicable("attention mask given: the bound assumes every query attends to every key")
  inputs_q = call["inputs_q"]
  inputs_k = call.get("inputs_k")
  inputs_v = call.get("inputs_v")
  if call.get("inputs_kv") is not None:
    inputs_k = inputs_v = call["inputs_kv"]
  if not (_same_input(inputs_q, inputs_k) and _same_input(inputs_q, inputs_v)):
    raise _NotApplicable("cross-attention (inputs_q ≠ inputs_k/inputs_v): the bound assumes self-attention")
  if module.normalize_qk:
    raise _NotApplicable("normalize_qk: LayerNorm on queries and keys, so the logits are not X A Xᵀ")
  decode = call.get("decode")
  if module.decode if decode is None else decode:
    raise _NotApplicable("decode=True: keys and values come from the autoregressive cache")
  if module.attention_fn is not default_attention_fn:
    raise _NotApplicable(f"custom attention_fn {getattr(module.attention_fn, '__name__', module.attention_fn)!r}")
  custom = [name for name in ("qkv_dot_general", "out_dot_general", "qkv_dot_general_cls", "out_dot_general_cls",
                              "qk_attn_weights_einsum_cls", "attn_weights_value_einsum_cls")
            if getattr(module, name, None) is not None]
  if custom:
    raise _NotApplicable(f"custom products {custom}: the heads cannot be read as matrices")
  deterministic = call.get("deterministic")
  deterministic = module.deterministic if deterministic is None else deterministic
  if module.dropout_rate > 0 and not deterministic:
    raise _NotApplicable("dropout active on the attention weights (call with deterministic=True)")


def _dot_product_heads(p, use_bias: bool):
  """Heads from a {query, key, value, out: {kernel, bias}} tree (Linen's and NNX's layout)."""
  bias = lambda name: p[name]["bias"] if use_bias else None  # noqa: E731
  return _softmax_heads(p["query"]["kernel"], bias("query"), p["key"]["kernel"], bias("key"),
                        p["value"]["kernel"], bias("value"), p["out"]["kernel"], bias("out"), use_bias)


def _read_flax(module, call: dict):
  """Heads of a ``flax.linen.MultiHeadDotProductAttention`` call (raises _NotApplicable)."""
  _check_dot_product_call(module, call, nn.dot_product_attention)
  return _dot_product_heads(module.variables["params"], module.use_bias)


def _read_nnx(module, call: dict):
  """Heads of a ``flax.nnx.MultiHeadAttention`` call (raises _NotApplicable)."""
  if call.get("is_causal"):
    raise _NotApplicable("is_causal=True: a causal mask, the bound assumes every query attends to every key")
  if module.num_kv_heads != module.num_heads:
    raise _NotApplicable(f"grouped-query attention ({module.num_kv_heads} key/value heads for "
                         f"{module.num_heads} query heads)")
  _check_dot_product_call(module, call, nnx.dot_product_attention)
  names = ("query", "key", "value", "out")
  p = {name: {"kernel": getattr(module, name).kernel[...]} for name in names}
  if module.use_bias:
    for name in names:
      p[name]["bias"] = getattr(module, name).bias[...]
  return _dot_product_heads(p, module.use_bias)


def _split(kernel_DxM, parts):
  return kernel_DxM.reshape((kernel_DxM.shape[0],) + tuple(parts))


def _read_self_attention(module, call: dict):
  """Heads of ``attention.differential.MultiHeadSelfAttention`` (column h·d + k is head h, width k)."""
  p = module.variables["params"]
  h, d = module.num_heads, module.head_dim
  kernel = lambda name: _split(p[name]["kernel"], (h, d))  # noqa: E731
  bias = lambda name: p[name]["bias"].reshape(h, d) if module.use_bias else None  # noqa: E731
  wo = p["out_proj"]["kernel"].reshape(h, d, -1)
  bo = p["out_proj"]["bias"] if module.use_bias else None
  return _softmax_heads(kernel("q_proj"), bias("q_proj"), kernel("k_proj"), bias("k_proj"), kernel("v_proj"),
                        bias("v_proj"), wo, bo, module.use_bias)


def _read_differential(module, call: dict):
  """Heads of ``attention.differential.DifferentialAttention``: query/key head 2h + j is map j of head h."""
  p = module.variables["params"]
  h, d, use_bias = module.num_heads, module.head_dim, module.use_bias

  def qk(name):  # -> [2 maps, D', H, d]
    w = _split(p[name]["kernel"], (h, 2, d))
    if use_bias:
      w = jnp.concatenate([w, p[name]["bias"].reshape(1, h, 2, d)], axis=0)
    return jnp.moveaxis(w, 2, 0)

  q, k = qk("q_proj"), qk("k_proj")
  a1, a2 = (_mm("dhk,ehk->hde", q[j], k[j]) / math.sqrt(d) for j in (0, 1))
  w_v = _split(p["v_proj"]["kernel"], (h, 2 * d))
  if use_bias:
    w_v = _with_bias_row(w_v, p["v_proj"]["bias"].reshape(h, 2 * d))
  w_v = jnp.transpose(w_v, (1, 0, 2))
  w_o = p["out_proj"]["kernel"].reshape(h, 2 * d, -1)
  lam = reparameterized_lambda(*(p[name] for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2")),
                               module.lambda_init)
  gain = p["norm_gain"] if module.learnable_gain else jnp.ones(2 * d, w_v.dtype)
  bias = p["out_proj"]["bias"] if use_bias else jnp.zeros(w_o.shape[-1], w_o.dtype)
  return DifferentialHeads(a1, a2, w_v, w_o, gain, lam, float(module.lambda_init)), bias


def _read_certified(module, call: dict):
  """Heads of CertifiedViT's bias-free attention (``attention.certified_vit.head_matrices``)."""
  p = module.variables["params"]
  a, w_v = certified_head_matrices(module.config, p)
  return SoftmaxHeads(a, w_v), p["b_o"]


_READERS = {KIND_FLAX: _read_flax, KIND_NNX: _read_nnx, KIND_SELF: _read_self_attention, KIND_DIFFERENTIAL: _read_differential,
            KIND_CERTIFIED: _read_certified}
_FIRST_ARG = {KIND_FLAX: "inputs_q", KIND_NNX: "inputs_q", KIND_SELF: "x_BxNxD", KIND_DIFFERENTIAL: "x_BxNxD", KIND_CERTIFIED: "x_BxNxD"}


def _one_line(error: BaseException) -> str:
  lines = str(error).strip().splitlines()
  return f"{type(error).__name__}: {lines[0] if lines else ''}"


def _is_traced(tree) -> bool:
  return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(tree))


def _read_layer(module, kind: str, path: str, args, kwargs, out) -> AttentionLayer:
  unreadable = lambda why: AttentionLayer(path, kind, None, None, None, None, False, False,  # noqa: E731
                                          f"unreadable layer: {why}")
  try:
    call = _bind(module, args, kwargs)
    x = call[_FIRST_ARG[kind]]
    out = out[0] if isinstance(out, tuple) else out
    weights = nnx.state(module) if kind == KIND_NNX else module.variables
    if _is_traced((x, out, weights)):
      return unreadable("it runs inside a JAX transformation that traces even with jit disabled "
                        "(e.g. nn.scan, nn.remat)")
    tokens, output = _flatten_tokens(x), _flatten_tokens(out)
  except Exception as error:  # noqa: BLE001 (any user layer failing to read is reported, not raised)
    return unreadable(_one_line(error))
  augmented = kind != KIND_CERTIFIED and bool(module.use_bias)
  try:
    heads, bias = _READERS[kind](module, call)
  except _NotApplicable as why:
    return AttentionLayer(path, kind, tokens, output, None, None, False, False, f"bound not applicable: {why}")
  except Exception as error:  # noqa: BLE001
    return unreadable(_one_line(error))
  if kind == KIND_DIFFERENTIAL:
    return AttentionLayer(path, kind, tokens, output, heads, bias, augmented, False,
                          "bound not applicable: differential heads (the bound covers softmax dot-product heads)")
  return AttentionLayer(path, kind, tokens, output, heads, bias, augmented, True, "")


def capture_attention(apply_fn: Callable, params, x) -> Capture:
  """Runs ``apply_fn(params, x)`` once and captures every recognised attention layer (module docstring).

  The call runs with jit disabled (``jax.disable_jit``), so a jitted apply_fn still exposes concrete
  arrays; a layer that is still traced is listed as unreadable, not raised. Nothing of the model's code
  or parameters is changed.

  Args:
    apply_fn: ``apply_fn(params, x) -> logits`` built on Flax Linen or NNX modules.
    params: its parameters.
    x: a batch of inputs in apply_fn's domain.

  Returns:
    ``Capture(logits, layers)``, the layers (``AttentionLayer``) in call order.
  """
  layers: list[AttentionLayer] = []
  active: set[int] = set()
  seen: dict[str, int] = {}

  weights_seen: list[list] = []  # one list per active recognised call: the weights its attention computed

  def record(module, kind: str, path: str, call, args, kwargs):
    # Only the outermost __call__ of a module: SelfAttention.__call__ calls its parent's __call__.
    # Nothing from Flax scan's abstract pass: the steps that follow are the layers (module docstring).
    if id(module) in active or _in_flax_scan_trace():
      return call(*args, **kwargs)
    active.add(id(module))
    weights_seen.append([])
    try:
      out = call(*args, **kwargs)
    finally:
      active.discard(id(module))
      computed = weights_seen.pop()
    seen[path] = seen.get(path, 0) + 1
    if seen[path] > 1:
      path = f"{path}#{seen[path]}"
    layer = _read_layer(module, kind, path, args, kwargs, out)
    if layer.heads is None and len(computed) == 1 and not _is_traced(computed[0]):
      layer = layer._replace(weights=jnp.reshape(computed[0], (-1,) + tuple(computed[0].shape[-3:])))
    layers.append(layer)
    return out

  def on_weights(weights):
    if weights_seen:
      weights_seen[-1].append(weights)

  def interceptor(next_fun, args, kwargs, context):
    module = context.module
    kind = _kind(module)
    if kind is None or context.method_name != "__call__":
      return next_fun(*args, **kwargs)
    try:
      path = "/".join(str(part) for part in module.path)
    except Exception:  # noqa: BLE001 (an unbound module has no path)
      path = type(module).__name__
    return record(module, kind, path, next_fun, args, kwargs)

  nnx_paths = _nnx_paths(params)

  def nnx_call(original, module, *args, **kwargs):
    call = functools.partial(original, module)
    return record(module, KIND_NNX, _nnx_path(nnx_paths, module), call, args, kwargs)

  with jax.disable_jit(), nn.intercept_methods(interceptor), _wrapped_nnx_attention(nnx_call), \
      _observed_attention_weights(on_weights), _transparent_checkpoint():
    logits = apply_fn(params, x)
  return Capture(logits, _drop_tracing_passes(layers))


_TRACED = "unreadable layer: it runs inside a JAX transformation"


def _in_flax_scan_trace() -> bool:
  """Whether the current call runs inside ``flax.core.axes_scan``'s abstract pass over the scan body (its
  ``body_fn`` called with ``init_mode=True``, which checks that the broadcast variables are loop invariants
  before the loop runs). That pass is not a step of the loop: under ``nn.scan`` of depth d the body is seen
  d + 1 times, the first one abstract."""
  frame = sys._getframe(1)  # pylint: disable=protected-access
  while frame is not None:
    if (frame.f_code.co_name == "body_fn" and frame.f_globals.get("__name__") == "flax.core.axes_scan"
        and frame.f_locals.get("init_mode") is True):
      return True
    frame = frame.f_back
  return False


def _drop_tracing_passes(layers: list[AttentionLayer]) -> tuple[AttentionLayer, ...]:
  """Drops the traced call of a layer that also ran concretely, and renumbers the repeats.

  A fallback for a tracing pass that ``_in_flax_scan_trace`` does not recognise: a layer seen traced once
  and then concretely was traced to build a loop (as Flax's scan does before running its d steps); the traced
  pass is not a layer. Layers that only ever run traced stay listed as unreadable.
  """
  base = lambda path: path.split("#")[0]  # noqa: E731
  concrete = {base(l.path) for l in layers if not l.reason.startswith(_TRACED)}
  kept = [l for l in layers if not (l.reason.startswith(_TRACED) and base(l.path) in concrete)]
  counts: dict[str, int] = {}
  out = []
  for layer in kept:
    counts[base(layer.path)] = counts.get(base(layer.path), 0) + 1
    k = counts[base(layer.path)]
    out.append(layer._replace(path=base(layer.path) if k == 1 else f"{base(layer.path)}#{k}"))
  return tuple(out)


def _nnx_paths(params) -> list[tuple[str, Any]]:
  """(module path "a/b", query kernel) for every ``.../query/kernel`` leaf of ``params``."""
  paths = []
  for key_path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
    keys = [str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in key_path]
    if keys[-1:] == ["value"] and isinstance(key_path[-1], jax.tree_util.GetAttrKey):
      keys = keys[:-1]  # an nnx.State leaf is its Variable's .value
    if keys[-2:] == ["query", "kernel"]:
      paths.append(("/".join(keys[:-2]), leaf))
  return paths


def _nnx_path(paths: list[tuple[str, Any]], module) -> str:
  """The path of an NNX attention layer: the params entry holding its query kernel (else its class name).

  An NNX module does not know its path, so it is found from the parameters ``apply_fn`` was given: the
  entry whose query kernel is this layer's (the same array, or equal values).
  """
  try:
    kernel = module.query.kernel[...]
  except Exception:  # noqa: BLE001 (a layer without the usual weights gets its class name)
    return type(module).__name__
  for path, leaf in paths:
    if leaf is kernel:
      return path
  for path, leaf in paths:
    if np.shape(leaf) == np.shape(kernel) and not isinstance(leaf, jax.core.Tracer) and \
        np.array_equal(np.asarray(leaf), np.asarray(kernel)):
      return path
  return type(module).__name__


@contextlib.contextmanager
def _observed_attention_weights(on_weights):
  """Hands every attention-weight array that Linen's and NNX's ``dot_product_attention`` compute to
  ``on_weights`` while open (their module-level ``dot_product_attention_weights`` is wrapped)."""
  import flax.linen.attention as linen_attention  # pylint: disable=g-import-not-at-top
  import flax.nnx.nn.attention as nnx_attention  # pylint: disable=g-import-not-at-top
  originals = [(m, m.dot_product_attention_weights) for m in (linen_attention, nnx_attention)]

  def wrap(original):
    @functools.wraps(original)
    def wrapped(*args, **kwargs):
      weights = original(*args, **kwargs)
      on_weights(weights)
      return weights
    return wrapped

  for module, original in originals:
    module.dot_product_attention_weights = wrap(original)
  try:
    yield
  finally:
    for module, original in originals:
      module.dot_product_attention_weights = original


def _run_as_is(fun: Callable, *args, **kwargs) -> Callable:
  """Stands in for ``jax.checkpoint`` / ``jax.remat`` during a capture: ``fun`` itself (same forward values;
  rematerialisation only changes what the backward pass stores)."""
  del args, kwargs  # prevent_cse, policy, static_argnums, concrete: backward-pass and compilation options
  return fun


@contextlib.contextmanager
def _transparent_checkpoint():
  """``jax.checkpoint`` and ``jax.remat`` return their function unchanged while open, so a checkpoint applied
  while the model runs (``nn.remat``'s lifted transform looks ``jax.remat`` up at every call) lets its layers
  run with concrete arrays and be read."""
  originals = {name: getattr(jax, name) for name in ("checkpoint", "remat")}
  for name in originals:
    setattr(jax, name, _run_as_is)
  try:
    yield
  finally:
    for name, original in originals.items():
      setattr(jax, name, original)


@contextlib.contextmanager
def _wrapped_nnx_attention(nnx_call):
  """Routes every ``nnx.MultiHeadAttention.__call__`` through ``nnx_call(original, module, ...)`` while open."""
  original = nnx.MultiHeadAttention.__call__

  @functools.wraps(original)
  def wrapped(module, *args, **kwargs):
    return nnx_call(original, module, *args, **kwargs)

  nnx.MultiHeadAttention.__call__ = wrapped
  try:
    yield
  finally:
    nnx.MultiHeadAttention.__call__ = original


def augment_tokens(tokens, augmented: bool) -> jnp.ndarray:
  """[..., T, D] -> [..., T, D + 1] with a constant-1 last feature when augmented, else unchanged."""
  tokens = jnp.asarray(tokens)
  if not augmented:
    return tokens
  return jnp.concatenate([tokens, jnp.ones(tokens.shape[:-1] + (1,), tokens.dtype)], axis=-1)


def _layer_tokens(layer: AttentionLayer, tokens):
  if layer.heads is None:
    raise ValueError(f"layer {layer.path!r} has no rebuilt heads: {layer.reason}")
  tokens = layer.tokens if tokens is None else jnp.asarray(tokens)
  if tokens.ndim != 3 or tokens.shape[-1] != layer.tokens.shape[-1]:
    raise ValueError(f"tokens must have shape [batch, T, {layer.tokens.shape[-1]}] for layer {layer.path!r}, "
                     f"got {tuple(tokens.shape)}")
  return augment_tokens(tokens, layer.augmented)


def head_probs(layer: AttentionLayer, tokens=None):
  """Attention weights of the rebuilt heads at ``tokens`` (default: the captured ones), float32.

  Returns:
    Softmax heads: P [batch, H, T, T], rows summing to 1. Differential heads: (P₁, P₂), each of that shape.

  Raises:
    ValueError: the layer has no heads (not rebuildable), or tokens of the wrong shape.
  """
  x = _layer_tokens(layer, tokens)
  maps = lambda a: jax.nn.softmax(_mm("btd,hde,bse->bhts", x, a, x), axis=-1)  # noqa: E731
  if isinstance(layer.heads, DifferentialHeads):
    return maps(layer.heads.a1), maps(layer.heads.a2)
  return maps(layer.heads.a)


def layer_output(layer: AttentionLayer, tokens=None) -> jnp.ndarray:
  """The layer's output recomputed from its rebuilt heads (module docstring), float32 [batch, T, F].

  Args:
    layer: a captured layer with heads.
    tokens: input tokens [batch, T, D] (default: the captured ones).

  Raises:
    ValueError: as ``head_probs``.
  """
  x = _layer_tokens(layer, tokens)
  heads = layer.heads
  if isinstance(heads, SoftmaxHeads):
    return _mm("bhts,bsd,hdf->btf", head_probs(layer, tokens), x, heads.w_vo) + layer.output_bias[None, None]
  p1, p2 = head_probs(layer, tokens)
  v = _mm("bsd,hde->bhse", x, heads.w_v)
  o = _mm("bhts,bhse->bhte", p1 - heads.lam * p2, v)
  o = o * jax.lax.rsqrt(jnp.mean(jnp.square(o), axis=-1, keepdims=True) + RMS_NORM_EPS)
  o = o * heads.gain[None, None, None] * (1.0 - heads.lambda_init)
  return _mm("bhte,hef->btf", o, heads.w_o) + layer.output_bias[None, None]
