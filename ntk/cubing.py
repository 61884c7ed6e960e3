"""The condition-number cubing of linearized attention, checked on data.

For X ∈ R^(n×d) (rows = images, raw pixels in [0, 1]), G = X Xᵀ and the attention features F = X Xᵀ X have
Gram matrix F Fᵀ = G³, so κ(G̃) = κ(G)³ (arXiv 2603.13085;
docs/theory.md#condition-number-cubing). Stacking k layers gives G^(2k+1)
("values" convention, the paper's) or G^(3^k) ("self"). The paper's width requirement for MLP-Attn is
m = Ω(κ(G)⁶/ε²) against Ω(1/ε²) for 2L-ReLU.

Everything is float64. Powers are taken through the eigenvalues of G (log10 κ(G^p) = p·log10 κ(G)); the
features' own Gram matrix is also formed and decomposed, which float64 resolves only while κ(G)³ ≲ 1/(n·eps),
so its deviation from the eigenvalue route is reported, not hidden. Past full rank (n > rank, e.g. more
MNIST images than the ~717 pixels that vary) the figures are pseudo-condition numbers over the eigenvalues
above rtol·λ_max, reported with the rank.
"""
from __future__ import annotations

import jax
import numpy as np

from attention._checks import check_no_overflow
from attention.linearized import stacked_gram_power
from ntk.analytic import arccos_ntk
from ntk.conditioning import gram_spectrum

EXPLICIT_MAX_N = 100


def cubing_check(x_NxD, *, layers=(1, 2, 3), eps=(0.1, 0.01), explicit_max_n: int = EXPLICIT_MAX_N,
                 rtol: float | None = None) -> dict:
  """Condition numbers of G, of the attention features' Gram matrix, and of the stacked powers.

  Args:
    x_NxD: raw flattened images, shape [n, d] (not centred, not normalised).
    layers: stacking depths k for G^(2k+1) and G^(3^k).
    eps: target accuracies ε for the implied widths κ⁶/ε² and 1/ε².
    explicit_max_n: form G³ explicitly and compare with F Fᵀ only when n ≤ this (forming G³ loses
      accuracy as κ³·eps).
    rtol: relative eigenvalue threshold (default n·eps64) for ranks and pseudo-condition numbers.

  Returns:
    A flat dict of floats/ints/bools (JSON-ready): ``log10_kappa_G``, ``rank_G``, ``full_rank``,
    ``threshold_G``; ``log10_kappa_Gtilde`` (= 3·log10 κ(G) via eigenvalues), ``log10_kappa_Gtilde_direct``
    and ``rank_Gtilde_direct`` (from F Fᵀ), ``cubing_deviation_direct`` (direct − eigenvalue route, log10);
    ``log10_kappa_Gtilde_normalised`` and ``cubing_deviation_normalised`` for ℓ2-normalised feature rows;
    ``explicit_identity_rel_error`` and ``explicit_identity_tolerance`` (κ(G)³·eps) when n ≤
    explicit_max_n; ``log10_kappa_values_k{k}`` (G^(2k+1)) and ``log10_kappa_self_k{k}`` (G^(3^k));
    ``log10_width_attn_eps{ε}`` = 6·log10 κ(G) + 2·log10(1/ε) and ``log10_width_relu_eps{ε}``;
    ``log10_kappa_Kinf_relu``, ``log10_kappa_Kinf_mlp_attn`` (the infinite-width fixed-readout NTK on each
    model's unit feature rows) and ``log10_kappa_Kinf_gap`` (their difference; the cubing argument
    predicts 2·log10 κ(G)).

  Raises:
    ValueError: x not a finite [n, d] matrix, n < 2, rows so large that F Fᵀ overflows float64, or
      non-positive ε.
  """
  x = np.asarray(x_NxD, np.float64)
  if x.ndim != 2 or x.shape[0] < 2 or not np.isfinite(x).all():
    raise ValueError(f"x must be a finite [n, d] matrix with n ≥ 2, got shape {x.shape}")
  if any(isinstance(e, (str, bool)) or not (np.isfinite(e) and e > 0) for e in eps):
    raise ValueError(f"eps values must be finite numbers > 0, got {eps!r}")
  n, d = x.shape
  # F Fᵀ with F = X Xᵀ X has entries ≤ n²·max‖x‖⁶ (Cauchy–Schwarz): refuse what float64 cannot hold.
  check_no_overflow(x, "x", degree=6, terms=n * n, what="attention features' Gram F Fᵀ, F = X Xᵀ X")
  g = x @ x.T
  sg = gram_spectrum(g, rtol=rtol)
  feats = x @ (x.T @ x) if d <= n else g @ x
  s_direct = gram_spectrum(feats @ feats.T, rtol=rtol)
  norms = np.linalg.norm(feats, axis=1, keepdims=True)
  normed = feats / np.where(norms > 0, norms, 1.0)  # an all-zero image stays zero
  s_norm = gram_spectrum(normed @ normed.T, rtol=rtol)
  out = {
      "n": n, "d": d,
      "log10_kappa_G": sg.log10_condition_number, "rank_G": sg.rank, "full_rank": sg.full_rank,
      "threshold_G": sg.threshold, "rtol": sg.rtol,
      "log10_kappa_Gtilde": 3 * sg.log10_condition_number,
      "log10_kappa_Gtilde_direct": s_direct.log10_condition_number,
      "rank_Gtilde_direct": s_direct.rank,
      "cubing_deviation_direct": s_direct.log10_condition_number - 3 * sg.log10_condition_number,
      "log10_kappa_Gtilde_normalised": s_norm.log10_condition_number,
      "rank_Gtilde_normalised": s_norm.rank,
      "cubing_deviation_normalised": s_norm.log10_condition_number - 3 * sg.log10_condition_number,
  }
  # The kernels the networks actually use: K∞ of the fixed-readout 2-layer ReLU on each model's unit
  # feature rows (docs/theory.md#condition-number-cubing). The cubing argument predicts their log10 κ
  # differ by 2·log10 κ(G) (κ(G̃) = κ(G)³ against κ(G)); these say by how much they do.
  unit_rows = x / np.where((r := np.linalg.norm(x, axis=1, keepdims=True)) > 0, r, 1.0)
  for model, rows in (("relu", unit_rows), ("mlp_attn", normed)):
    with jax.enable_x64(True):
      kernel = np.asarray(arccos_ntk(rows))
    out[f"log10_kappa_Kinf_{model}"] = gram_spectrum(kernel, rtol=rtol).log10_condition_number
  out["log10_kappa_Kinf_gap"] = out["log10_kappa_Kinf_mlp_attn"] - out["log10_kappa_Kinf_relu"]
  if n <= explicit_max_n:
    # Relative error, so scale-invariant: computed from X / 2^k (exact) with max|x| in [1, 2), where neither
    # ‖G³‖ overflows (large x) nor underflows (tiny x).
    xs = x / 2.0 ** (np.frexp(np.abs(x).max())[1] - 1) if np.abs(x).max() > 0 else x
    gs = xs @ xs.T
    fs = xs @ (xs.T @ xs) if d <= n else gs @ xs
    g3 = gs @ gs @ gs
    out["explicit_identity_rel_error"] = float(np.linalg.norm(fs @ fs.T - g3) / np.linalg.norm(g3))
    out["explicit_identity_tolerance"] = float(sg.condition_number ** 3 * np.finfo(np.float64).eps)
  for k in layers:
    for stacking, name in (("values", "values"), ("self", "self")):
      out[f"log10_kappa_{name}_k{k}"] = stacked_gram_power(k, stacking) * sg.log10_condition_number
  for e in eps:
    out[f"log10_width_attn_eps{e:g}"] = 6 * sg.log10_condition_number + 2 * np.log10(1 / e)
    out[f"log10_width_relu_eps{e:g}"] = 2 * np.log10(1 / e)
  return out
