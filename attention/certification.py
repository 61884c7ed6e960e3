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
Source: REFERENCE.md §5. A sample counts as certified only if it is also classified correctly.

Bound kinds ("mode", per layer): "naive" (Σ_h B_naive), "fine" (Σ_h B_fine, the decomposition of
REFERENCE §5), "joint" (exact first order of the whole layer + the per-head higher-order terms), or "min"
= min(Σ_h min(B_naive, B_fine), B_joint), what we certify with. ``key_norm`` "power" (Krylov estimate:
power iteration as in LoFAST, accelerated by Lanczos) or "closed_form" (fully rigorous: closed-form key-side norm, no joint bound).
"""
from __future__ import annotations

import functools

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


