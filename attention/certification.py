"""Certified robustness of ``CertifiedViT``: layer-wise composition of local bounds and margin certificates.

Composition (pixel perturbation δ with ‖δ‖₂ ≤ ε; all norms Frobenius over the token matrix):
  r₀ = ‖W̃_E‖₂ ε                           patches are a permutation of pixels, the embedding is linear;
  r_{l+1} = r_l + B_l(r_l)                 attention block X + MHA(N(X)): N is 1-Lipschitz so N(X') is
                                           within r_l of the clean N(X), where the layer's local bound B_l
                                           (``attention.sensitivity.layer_bound``) is evaluated; the SLL
                                           after it is 1-Lipschitz and leaves the radius unchanged;
  r_z = r_L / √n                           ‖mean_i Δ_i‖₂ ≤ (1/n)Σ_i‖Δ_i‖₂ ≤ ‖ΔX‖_F/√n, then the
                                           1-Lipschitz bounded normalisation.
Each B_l is increasing in its radius and every step is monotone, so r_z(ε) is increasing in ε.

Margin certificates for logits f = W z + b (W = head kernel, columns w_j):
  Tsuzuku et al. (NeurIPS 2018, Prop. 1): ‖Δf‖₂ ≤ ‖W‖₂ r_z, and the prediction y cannot change if
      f_y − max_{j≠y} f_j > √2 ‖W‖₂ r_z;
  per pair (last layer kept exact): |Δ(f_y − f_j)| = |(w_y − w_j)ᵀΔz| ≤ ‖w_y − w_j‖₂ r_z, so y is kept if
      f_y − f_j > ‖w_y − w_j‖₂ r_z for every j ≠ y   (never looser, since ‖w_y − w_j‖₂ ≤ √2‖W‖₂).
Source: docs/theory.md#certification. A sample counts as certified only if it is also classified correctly.

Bound kinds ("mode", per layer): "naive" (Σ_h B_naive), "fine" (Σ_h B_fine, the decomposition of
docs/theory.md#fine-grained-bound), "joint" (exact first order of the whole layer + the per-head higher-order terms), or "min"
= min(Σ_h min(B_naive, B_fine), B_joint), what we certify with. ``key_norm`` "power" (Krylov estimate:
power iteration as in LoFAST, accelerated by Lanczos) or "closed_form" (fully rigorous: closed-form key-side norm, no joint bound).
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attention import sensitivity
from attention.certified_vit import CertifiedViTConfig, forward_with_intermediates, head_matrices
from attention.sensitivity import KEY_NORMS, LAYER_MODES, LayerConstants, check_eps

MODES = LAYER_MODES
FORMS = ("per_pair", "tsuzuku")


def layer_constants(config: CertifiedViTConfig, params, x_BxHxWxC, *, key, power_iters: int = 100):
  """Logits and the ``LayerConstants`` of every attention layer at every image.

  Args:
    config: the model's ``CertifiedViTConfig``.
    params: its parameters.
    x_BxHxWxC: images in [0, 1], shape [B, H, W, C].
    key: PRNG key; layer l of sample b uses fold_in(fold_in(key, l), b) (heads fold in further).
    power_iters: Krylov iterations (Lanczos steps) for σ_K and the layer Jacobian norms.

  Returns:
    (logits [B, C], LayerConstants with head fields [B, depth, heads] and the rest [B, depth]).
  """
  config.validate()
  return _layer_constants(config, params, jnp.asarray(x_BxHxWxC), key, power_iters)


@functools.partial(jax.jit, static_argnums=(0, 4))
@jax.default_matmul_precision("highest")
def _layer_constants(config, params, x_BxHxWxC, key, power_iters):
  out = forward_with_intermediates(config, params, x_BxHxWxC)
  batch = x_BxHxWxC.shape[0]
  # All layers have the same shapes: stack them and vmap (one compiled body instead of `depth`).
  mats = [head_matrices(config, params[f"block_{layer}"]["attention"]) for layer in range(config.depth)]
  a_LxHxDxD = jnp.stack([a for a, _ in mats])
  wv_LxHxDxD = jnp.stack([w for _, w in mats])

  def one_layer(layer, a_HxDxD, wv_HxDxD, inputs_BxNxD):
    layer_key = jax.random.fold_in(key, layer)
    sample_keys = jax.vmap(lambda b: jax.random.fold_in(layer_key, b))(jnp.arange(batch))
    return jax.vmap(lambda x, k: sensitivity.layer_constants(x, a_HxDxD, wv_HxDxD, key=k,
                                                             power_iters=power_iters))(inputs_BxNxD, sample_keys)

  per_layer = jax.vmap(one_layer)(jnp.arange(config.depth), a_LxHxDxD, wv_LxHxDxD, out.attention_inputs)
  consts = jax.tree_util.tree_map(lambda f: jnp.swapaxes(f, 0, 1), per_layer)   # [L, B, ...] -> [B, L, ...]
  return out.logits, consts


def layer_radii(consts: LayerConstants, eps, *, embed_lipschitz, mode: str = "min",
                key_norm: str = "power") -> jnp.ndarray:
  """Radii r_0 … r_L of the token perturbation before each attention layer and after the last one.

  Args:
    consts: ``LayerConstants`` with head fields [B, L, H] (``layer_constants``).
    eps: pixel-space ℓ2 radius ε ≥ 0: a scalar or an array of shape [B].
    embed_lipschitz: ‖W̃_E‖₂ (``embedding_lipschitz``).
    mode: "naive", "fine", "joint" or "min" (``attention.sensitivity.layer_bound``).
    key_norm: "power" or "closed_form" (rigorous; then "min" excludes the joint bound).

  Returns:
    Array [L + 1, B].

  Raises:
    ValueError: negative or non-finite eps, unknown mode or key_norm.
  """
  eps = check_eps(eps)
  if key_norm not in KEY_NORMS:
    raise ValueError(f"key_norm must be one of {KEY_NORMS}, got {key_norm!r}")
  if mode not in MODES:
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
  if mode == "joint" and key_norm != "power":
    raise ValueError("mode='joint' uses a Krylov estimate of ‖∂G/∂X‖; it has no key_norm='closed_form' form")
  return _layer_radii(consts, eps, embed_lipschitz, mode, key_norm)


@functools.partial(jax.jit, static_argnums=(3, 4))
def _layer_radii(consts, eps, embed_lipschitz, mode, key_norm):
  batch, depth = consts.jacobian_norm.shape
  r_B = jnp.broadcast_to(embed_lipschitz * eps, (batch,))
  radii = [r_B]
  for layer in range(depth):
    lc = jax.tree_util.tree_map(lambda f: f[:, layer], consts)
    r_B = r_B + sensitivity.layer_bound(lc, r_B, mode=mode, key_norm=key_norm)
    radii.append(r_B)
  return jnp.stack(radii)


def feature_radius(consts: LayerConstants, eps, *, embed_lipschitz, mode: str = "min",
                   key_norm: str = "power") -> jnp.ndarray:
  """r_z(ε) ≥ ‖Δz‖₂ for the pooled, normalised feature z, shape [B] (module docstring)."""
  n_tokens = consts.heads.n_tokens[:, 0, 0]
  radii = layer_radii(consts, eps, embed_lipschitz=embed_lipschitz, mode=mode, key_norm=key_norm)
  return radii[-1] / jnp.sqrt(n_tokens)


def margin_certificate(logits_BxC, labels_B, head_kernel_DxC, radius_B, *, form: str = "per_pair") -> jnp.ndarray:
  """Whether each sample is classified correctly and provably keeps its label, bool [B].

  Args:
    logits_BxC: clean logits.
    labels_B: true labels, int in [0, C).
    head_kernel_DxC: last-layer kernel W (logits = z W + b), columns w_j.
    radius_B: r_z ≥ ‖Δz‖₂ per sample (scalar broadcasts).
    form: "per_pair" (f_y − f_j > ‖w_y − w_j‖₂ r_z ∀ j≠y) or "tsuzuku" (margin > √2‖W‖₂ r_z).

  Raises:
    ValueError: unknown form, mismatched shapes, labels out of range, a negative or NaN radius.
  """
  if form not in FORMS:
    raise ValueError(f"form must be one of {FORMS}, got {form!r}")
  logits_BxC, labels_B = jnp.asarray(logits_BxC), jnp.asarray(labels_B)
  if logits_BxC.ndim != 2 or labels_B.shape != logits_BxC.shape[:1]:
    raise ValueError(f"logits must be [B, C] and labels [B]; got {logits_BxC.shape} and {labels_B.shape}")
  num_classes = logits_BxC.shape[1]
  if head_kernel_DxC.shape[-1] != num_classes:
    raise ValueError(f"head_kernel must be [d, {num_classes}], got {tuple(head_kernel_DxC.shape)}")
  if not isinstance(labels_B, jax.core.Tracer):
    lab = np.asarray(labels_B)
    if lab.size and (lab.min() < 0 or lab.max() >= num_classes):
      raise ValueError(f"labels must lie in [0, {num_classes}), got range [{lab.min()}, {lab.max()}]")
  radius_B = jnp.broadcast_to(jnp.asarray(radius_B, logits_BxC.dtype), labels_B.shape)
  if not isinstance(radius_B, jax.core.Tracer) and not bool(jnp.all(radius_B >= 0)):  # NaN fails too
    raise ValueError(f"radius must be >= 0 (a bound on ‖Δz‖₂) and not NaN, got min {float(jnp.min(radius_B))}")
  return _margin_certificate(logits_BxC, labels_B, jnp.asarray(head_kernel_DxC), radius_B, form)


@functools.partial(jax.jit, static_argnums=4)
def _margin_certificate(logits_BxC, labels_B, head_kernel_DxC, radius_B, form):
  num_classes = logits_BxC.shape[1]
  f_y = jnp.take_along_axis(logits_BxC, labels_B[:, None], axis=1)                  # [B, 1]
  others = jax.nn.one_hot(labels_B, num_classes, dtype=bool) == False  # noqa: E712  [B, C]
  correct = jnp.argmax(logits_BxC, axis=1) == labels_B
  if form == "tsuzuku":
    margin = jnp.min(jnp.where(others, f_y - logits_BxC, jnp.inf), axis=1)
    lipschitz = jnp.linalg.svd(head_kernel_DxC, compute_uv=False)[0]
    return correct & (margin > jnp.sqrt(2.0) * lipschitz * radius_B)
  w_y_BxD = head_kernel_DxC.T[labels_B]
  pair_norm_BxC = jnp.linalg.norm(w_y_BxD[:, None, :] - head_kernel_DxC.T[None, :, :], axis=-1)
  ok = (f_y - logits_BxC) > pair_norm_BxC * radius_B[:, None]
  return correct & jnp.all(ok | ~others, axis=1)


def certified_radius(consts: LayerConstants, logits_BxC, labels_B, head_kernel_DxC, *, embed_lipschitz,
                     mode: str = "min", key_norm: str = "power", form: str = "per_pair",
                     eps_max: float = 1.0, iters: int = 40) -> jnp.ndarray:
  """The largest ε ∈ [0, eps_max] the certificate accepts, by bisection (r_z is increasing in ε).

  Returns:
    Array [B]: 0 for misclassified samples, a lower bound (to eps_max·2⁻ⁱᵗᵉʳˢ) on the certified radius
    otherwise, eps_max if even that is certified.

  Raises:
    ValueError: eps_max ≤ 0, iters < 1, and as ``margin_certificate``.
  """
  if not eps_max > 0 or not isinstance(iters, int) or iters < 1:
    raise ValueError(f"need eps_max > 0 and iters ≥ 1, got {eps_max}, {iters}")
  # Validates every argument once (concrete values) before the compiled bisection.
  margin_certificate(logits_BxC, labels_B, head_kernel_DxC,
                     feature_radius(consts, eps_max, embed_lipschitz=embed_lipschitz, mode=mode,
                                    key_norm=key_norm), form=form)
  return _certified_radius(consts, jnp.asarray(logits_BxC), jnp.asarray(labels_B), jnp.asarray(head_kernel_DxC),
                           embed_lipschitz, eps_max, mode, key_norm, form, iters)


@functools.partial(jax.jit, static_argnums=(6, 7, 8, 9))
def _certified_radius(consts, logits_BxC, labels_B, head_kernel_DxC, embed_lipschitz, eps_max, mode, key_norm,
                      form, iters):
  n_tokens = consts.heads.n_tokens[:, 0, 0]

  def certified(eps_B):
    r = _layer_radii(consts, eps_B, embed_lipschitz, mode, key_norm)[-1] / jnp.sqrt(n_tokens)
    return _margin_certificate(logits_BxC, labels_B, head_kernel_DxC, r, form)

  batch = labels_B.shape[0]
  lo = jnp.zeros(batch, logits_BxC.dtype)
  hi = jnp.full(batch, eps_max, logits_BxC.dtype)

  def body(_, bracket):
    lo, hi = bracket
    mid = 0.5 * (lo + hi)
    ok = certified(mid)
    return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid)

  top = certified(hi)
  lo, _ = jax.lax.fori_loop(0, iters, body, (lo, hi))
  correct = jnp.argmax(logits_BxC, axis=1) == labels_B
  return jnp.where(top, eps_max, jnp.where(correct, lo, 0.0))


def head_kernel(params) -> jnp.ndarray:
  """The last-layer kernel W [d, C] of a ``CertifiedViT``."""
  return params["head"]["kernel"]


def _check_layer_radii(consts: LayerConstants, radii_LxB) -> jnp.ndarray:
  batch, depth = jnp.shape(consts.jacobian_norm)
  radii_LxB = jnp.asarray(radii_LxB)
  if radii_LxB.shape != (depth + 1, batch):
    raise ValueError(f"radii_LxB must have shape [L + 1, B] = [{depth + 1}, {batch}] (``layer_radii``), got "
                     f"{tuple(radii_LxB.shape)}")
  if not isinstance(radii_LxB, jax.core.Tracer):
    check_eps(radii_LxB, "radii_LxB")
  return radii_LxB


class PerLayerBoundTerms(NamedTuple):
  """Bound terms of every attention layer l at the radius r_l the certificate propagates to it.

  Attributes:
    naive: B_naive of every head, [L, B, H].
    fine: B_fine of every head, [L, B, H].
    joint: B_joint of the whole layer, [L, B].
  """
  naive: jnp.ndarray
  fine: jnp.ndarray
  joint: jnp.ndarray


def per_layer_bound_terms(consts: LayerConstants, radii_LxB) -> PerLayerBoundTerms:
  """Per-head naive and fine bounds and the joint layer bound of every layer l at radius r_l.

  With the radii of ``layer_radii(mode="min")``, min(Σ_h min(naive, fine), joint) of layer l is exactly
  r_{l+1} − r_l (module docstring; Havens et al., ICML 2024, the layer-wise composition;
  docs/theory.md#joint-layer-bound).

  Args:
    consts: ``LayerConstants`` with head fields [B, L, H] and the rest [B, L] (``layer_constants``).
    radii_LxB: the token radii before each layer and after the last, [L + 1, B] (``layer_radii``); row L is
      not used.

  Returns:
    ``PerLayerBoundTerms`` (key_norm "power").

  Raises:
    ValueError: radii_LxB not of shape [L + 1, B], negative or non-finite.
  """
  return _per_layer_bound_terms(consts, _check_layer_radii(consts, radii_LxB))


@jax.jit
def _per_layer_bound_terms(consts, radii_LxB):
  naive, fine, joint = [], [], []
  for layer in range(radii_LxB.shape[0] - 1):
    lc = jax.tree_util.tree_map(lambda f: f[:, layer], consts)
    terms = sensitivity.bound_terms(lc.heads, radii_LxB[layer][:, None])
    naive.append(terms.naive)
    fine.append(terms.fine)
    joint.append(sensitivity.layer_bound_terms(lc, radii_LxB[layer]).joint)
  return PerLayerBoundTerms(jnp.stack(naive), jnp.stack(fine), jnp.stack(joint))


class BoundComparison(NamedTuple):
  """How the bound kinds compare over heads, layers and samples (``bound_comparison``); NaN where empty.

  Attributes:
    fine_tighter_fraction: share of (sample, layer, head) with B_fine < B_naive.
    fine_gain_median: median of B_naive/B_fine where B_fine < B_naive.
    naive_over_fine_median: median of B_naive/B_fine over all (sample, layer, head).
    joint_tighter_fraction: share of (sample, layer) with B_joint < Σ_h min(B_naive, B_fine).
    joint_gain_median: median of Σ_h min(B_naive, B_fine) / B_joint where the joint bound is tighter.
  """
  fine_tighter_fraction: float
  fine_gain_median: float
  naive_over_fine_median: float
  joint_tighter_fraction: float
  joint_gain_median: float


def bound_comparison(consts: LayerConstants, radii_LxB, correct_B) -> BoundComparison:
  """How often and by how much the fine-grained bound alone beats the naive one, per head, layer and
  selected sample at the radius the certificate propagates to that layer, and the joint bound the sum of
  the per-head minima (Havens et al., ICML 2024: fine-grained vs global-norm bounds).

  Args:
    consts: ``LayerConstants`` with head fields [B, L, H] (``layer_constants``).
    radii_LxB: token radii [L + 1, B] (``layer_radii``).
    correct_B: bool [B], the samples that count (e.g. the correctly classified ones).

  Returns:
    ``BoundComparison`` of Python floats (NaN where no sample, or no win, counts).

  Raises:
    ValueError: correct_B not a bool array of shape [B], and as ``per_layer_bound_terms``.
  """
  correct_B = np.asarray(correct_B)
  batch = jnp.shape(consts.jacobian_norm)[0]
  if correct_B.dtype != bool or correct_B.shape != (batch,):
    raise ValueError(f"correct_B must be a bool array of shape [B] = [{batch}], got {correct_B.dtype} "
                     f"{correct_B.shape}")
  terms = per_layer_bound_terms(consts, radii_LxB)
  fine_wins, gains, joint_wins, joint_gains, ratios = [], [], [], [], []
  for naive, fine, joint in zip(*terms):
    naive, fine, joint = np.asarray(naive)[correct_B], np.asarray(fine)[correct_B], np.asarray(joint)[correct_B]
    ratio = naive / fine
    ratios.append(ratio.ravel())
    fine_wins.append((fine < naive).ravel())
    gains.append(ratio[fine < naive])
    per_head = np.sum(np.minimum(naive, fine), axis=-1)
    joint_wins.append(joint < per_head)
    joint_gains.append((per_head / joint)[joint < per_head])
  cat = np.concatenate
  med = lambda v: float(np.median(v)) if v.size else float("nan")  # noqa: E731
  any_correct = bool(correct_B.any())
  return BoundComparison(
      fine_tighter_fraction=float(np.mean(cat(fine_wins))) if any_correct else float("nan"),
      fine_gain_median=med(cat(gains)), naive_over_fine_median=med(cat(ratios)),
      joint_tighter_fraction=float(np.mean(cat(joint_wins))) if any_correct else float("nan"),
      joint_gain_median=med(cat(joint_gains)))


def attack_layer(a_HxDxD, w_v_HxDxE, y_BxNxD, radius_B, keys_B, *, steps: int, restarts: int) -> jnp.ndarray:
  """Largest ‖G(Y + Δ) − G(Y)‖_F found by projected gradient ascent over ‖Δ‖_F ≤ r_b for each sample b,
  G the multi-head layer Σ_h rowsoftmax(Y A_h Yᵀ) Y W_V^h (``attention.sensitivity.max_deviation``, with
  the ± top-singular-vector starts). A lower estimate of the maximum, to set beside the layer bounds.

  Args:
    a_HxDxD: A_h of every head, [H, d, d]; w_v_HxDxE: W_V^h (times W_O^h), [H, d, e].
    y_BxNxD: the layer's (normalised) input tokens of each sample, [B, n, d].
    radius_B: Frobenius radius r_b ≥ 0 per sample, [B], in the units of the tokens.
    keys_B: one PRNG key per sample, [B].
    steps: ascent steps ≥ 0; restarts: random starts ≥ 0 (beside the two Jacobian starts).

  Returns:
    The attained deviations, [B].

  Raises:
    ValueError: negative steps or restarts, mismatched shapes, negative or non-finite radii.
  """
  for name, value in (("steps", steps), ("restarts", restarts)):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
      raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
  y_BxNxD, radius_B = jnp.asarray(y_BxNxD), jnp.asarray(radius_B)
  if y_BxNxD.ndim != 3 or radius_B.shape != y_BxNxD.shape[:1]:
    raise ValueError(f"y must be [B, n, d] and radius [B]; got {tuple(y_BxNxD.shape)} and {tuple(radius_B.shape)}")
  check_eps(radius_B, "radius_B")
  return _attack_layer(jnp.asarray(a_HxDxD), jnp.asarray(w_v_HxDxE), y_BxNxD, radius_B, keys_B, steps=steps,
                       restarts=restarts)


@functools.partial(jax.jit, static_argnames=("steps", "restarts"))
def _attack_layer(a_HxDxD, w_v_HxDxE, y_BxNxD, r_B, keys, *, steps, restarts):
  layer_fn = lambda y: sensitivity.multi_head_attention(y, a_HxDxD, w_v_HxDxE)  # noqa: E731
  return jax.vmap(lambda y, r, k: sensitivity.max_deviation(layer_fn, y, r, key=k, steps=steps,
                                                            restarts=restarts)[0])(y_BxNxD, r_B, keys)


class LayerTightness(NamedTuple):
  """Bound-to-attack ratios of one attention layer over the samples (``bound_tightness``).

  Attributes:
    layer: the layer index l.
    radius_median: median token radius r_l.
    attained_median: median deviation the attack found.
    ratio_min_median, ratio_fine_median, ratio_naive_median, ratio_joint_median: median of bound/attained
      for the layer bound kinds "min", "fine", "naive", "joint" (≥ 1 where the bound holds).
    ratio_min_max, ratio_min_min: largest and smallest min-bound/attained ratio.
    violations: samples whose attained deviation exceeds the min bound by more than the relative tolerance.
    jacobian_norm_median: median Krylov estimate of ‖∂G/∂X‖.
    n_samples: B.
  """
  layer: int
  radius_median: float
  attained_median: float
  ratio_min_median: float
  ratio_fine_median: float
  ratio_naive_median: float
  ratio_joint_median: float
  ratio_min_max: float
  ratio_min_min: float
  violations: int
  jacobian_norm_median: float
  n_samples: int


_forward = jax.jit(forward_with_intermediates, static_argnums=0)


def bound_tightness(config: CertifiedViTConfig, params, x_BxHxWxC, consts: LayerConstants, radii_LxB, *, key,
                    steps: int, restarts: int, rtol: float = 1e-4) -> list[LayerTightness]:
  """Bound / attained deviation of every attention layer (the whole multi-head layer) at the radius the
  certificate propagates to it: how loose the local bounds are where they are used (Havens et al., ICML
  2024, compare their bounds with attacks the same way).

  Args:
    config, params: the ``CertifiedViT``.
    x_BxHxWxC: images in [0, 1], [B, H, W, C].
    consts: their ``LayerConstants`` (head fields [B, L, H]).
    radii_LxB: token radii [L + 1, B] (``layer_radii``); layer l is attacked at r_l.
    key: PRNG key; layer l of sample b uses fold_in(fold_in(key, l), b).
    steps, restarts: the attack's budget (``attack_layer``).
    rtol: relative tolerance of a violation (attained > min bound · (1 + rtol)); it absorbs float32
      rounding and the Krylov estimates' convergence gap.

  Returns:
    One ``LayerTightness`` per layer.

  Raises:
    ValueError: rtol < 0, and as ``per_layer_bound_terms`` and ``attack_layer``.
  """
  if not rtol >= 0:
    raise ValueError(f"rtol must be >= 0, got {rtol!r}")
  radii_LxB = np.asarray(_check_layer_radii(consts, radii_LxB))
  out = _forward(config, params, jnp.asarray(x_BxHxWxC))
  batch = len(radii_LxB[0])
  tiny = np.finfo(np.float32).tiny
  rows = []
  for layer in range(config.depth):
    a, w_v = head_matrices(config, params[f"block_{layer}"]["attention"])
    r_B = radii_LxB[layer]
    keys = jax.vmap(lambda b: jax.random.fold_in(jax.random.fold_in(key, layer), b))(jnp.arange(batch))
    attained = np.asarray(attack_layer(a, w_v, out.attention_inputs[layer], jnp.asarray(r_B), keys, steps=steps,
                                       restarts=restarts))
    lc = jax.tree_util.tree_map(lambda f: f[:, layer], consts)
    terms = {k: np.asarray(v) for k, v in sensitivity.layer_bound_terms(lc, r_B)._asdict().items()}
    safe = np.maximum(attained, tiny)
    rows.append(LayerTightness(
        layer=layer, radius_median=float(np.median(r_B)), attained_median=float(np.median(attained)),
        **{f"ratio_{k}_median": float(np.median(terms[k] / safe)) for k in ("min", "fine", "naive", "joint")},
        ratio_min_max=float(np.max(terms["min"] / safe)), ratio_min_min=float(np.min(terms["min"] / safe)),
        violations=int(np.sum(attained > terms["min"] * (1 + rtol))),
        jacobian_norm_median=float(np.median(np.asarray(lc.jacobian_norm))), n_samples=batch))
  return rows
