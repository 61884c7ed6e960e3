"""The rigorous certificate that experiments/certify/run.py records is rigorous: recomputed from the model it saved.

experiments/certify/run.py records per test image the certified radius of the *rigorous* certificate
(``radii_rigorous``; per ε the flags ``certified_rigorous_images``): closed-form key-side norm, no Krylov
estimate anywhere. Its Krylov-estimate certificate (``radii``, ``certified_krylov_images``) uses Lanczos
estimates of σ_K and of the layer Jacobian norm, which approach them from below, so it is not a proof. A bug
that computed the headline with the Krylov key-side norm passed every test before this one (the golden
certify record has rigorous = Krylov = 0.125).

Here a tiny certify run trains and saves a 2-layer, 2-head CertifiedViT; the model is restored from its orbax
checkpoint and the radii are recomputed independently of the certificate's code: every head constant in
float64 numpy from the layer's tokens and head matrices, σ_K from the library's closed-form function
(``attention.sensitivity.closed_form_key_norm``) and nothing from a Krylov estimate, the layer-wise
composition r₀ = ‖W̃_E‖₂ε, r_{l+1} = r_l + Σ_h min(B_naive,h(r_l), B_fine,h(r_l)), r_z = r_L/√n
(attention/certification.py, attention/sensitivity.py steps 1–6, docs/theory.md#certification), the per-pair
margin certificate, and the radius by float64 bisection.

Tolerance. The recorded radius comes from float32 arithmetic (unit roundoff u = 2⁻²⁴ ≈ 6.0e-8). Every
quantity it is built from (tokens, head constants, logits) is at most a few hundred float32 roundings away
from its exact value: the forward pass to a layer's input, products of length ≤ 16 and LAPACK SVD / eigvalsh
of matrices of side ≤ 16, backward stable with error O(16u) relative to the norm they return. 10³ roundings
give 6e-5, so each is taken to carry relative error ≤ REL = 1e-4. The composed r_z(ε) is a sum of products of
these with nonnegative coefficients, and its elasticity ε r_z'(ε)/r_z(ε) is ≥ 1 (every term is linear or
superlinear in ε, and min, sums and compositions keep that), so a relative error ≤ REL in r_z moves the
solution ε* of r_z(ε*) = margin/‖w_y − w_j‖ by ≤ REL·ε*; the margin f_y − f_j of float32 logits carries
relative error ≤ REL(|f_y| + |f_j|)/(f_y − f_j) (cancellation), which moves ε* by at most that relative
amount too. With the bisection's bracket eps_max·2⁻⁴⁰:
    tol_b = ε*_b · REL · (1 + max_j (|f_y| + |f_j|)/min_j (f_y − f_j)) + eps_max·2⁻⁴⁰.
Radii are compared to tol_b; a flag at ε is compared where |ε − ε*_b| > tol_b (away from its boundary).
Teeth: on this model the Krylov radii, and the radii with the Krylov σ_K put in place of the closed form,
differ from the rigorous ones by more than tol_b (asserted), so a certificate computed with the Krylov
key-side norm fails the comparison.
"""
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention import certification, sensitivity
from attention.certified_vit import forward_with_intermediates, head_matrices
from experiments.certify import config as certify_config
from experiments.certify import run as certify
from experiments.core import config as config_lib

DATASET, ALPHA = "mnist", 1.0
REL = 1e-4
U = 2.0 ** -24
# A ratio-1.5 grid of ε over the radii of this model (rigorous and Krylov radii differ by a factor ≈ 1.5, so
# some ε falls between them), every field explicit.
CONFIG = certify_config.CertifyConfig(
    datasets=(DATASET,), attention_bounds=(ALPHA,),
    epsilons=(0.002, 0.003, 0.0045, 0.007, 0.01, 0.015, 0.023, 0.035),
    data=config_lib.DataConfig(n_train=128, n_test=16, source="embedded", dir=None, seed=0, holdout=None,
                               preprocessing="raw"),
    validation_fraction=0.0, dim=16, depth=2, num_heads=2, sll_hidden=16, value_bound=1.0, noise_std=0.0,
    train=config_lib.ClassifierTrainConfig(epochs=10, batch_size=16, learning_rate=1e-2, l2=0.0, warmup_epochs=0,
                                           seed=0, augment="none", max_to_keep=1),
    power_iters=5, chunk=16, pgd=config_lib.AttackBudget(steps=1, restarts=1), tightness_samples=0,
    layer_pgd=config_lib.AttackBudget(steps=1, restarts=1))
EPS_MAX = 4.0 * max(CONFIG.epsilons)   # certify's bisection range [0, 4·max ε]


def _restore_params(workdir: Path):
  """The parameters certify saved: the newest step of models/<data set>_alpha<α>/checkpoints (orbax)."""
  import orbax.checkpoint as ocp
  manager = ocp.CheckpointManager((workdir / "models" / f"{DATASET}_alpha{ALPHA:g}" / "checkpoints").resolve())
  try:
    step = manager.latest_step()
    assert step == CONFIG.train.epochs
    state = manager.restore(step, args=ocp.args.StandardRestore())
  finally:
    manager.close()
  return jax.tree_util.tree_map(jnp.asarray, state["params"])


def _spectral(m):
  return np.linalg.svd(m, compute_uv=False)[..., 0]


def _head_constants64(x, a, w):
  """The ε-independent constants of one head at X in float64 (sensitivity.py's HeadConstants fields, from
  their definitions), without the key-side norm."""
  x, a, w = (np.asarray(v, np.float64) for v in (x, a, w))
  s = x @ a @ x.T
  p = np.exp(s - s.max(axis=1, keepdims=True))
  p /= p.sum(axis=1, keepdims=True)
  v = x @ w
  b = p[:, :, None] * (v[None] - (p @ v)[:, None])      # B_i = J_i V, [n, n, e]
  xc = x - x.mean(axis=0)
  return dict(n=x.shape[0], p_norm=_spectral(p), p_max=p.max(), wv=_spectral(w), a=_spectral(a), x=_spectral(x),
              xa=_spectral(x @ a), xca=_spectral(xc @ a.T),
              query=max(_spectral(a @ x.T @ b[i]) for i in range(x.shape[0])),
              jv=_spectral(b).max(), rv=np.linalg.norm(v - v.mean(axis=0), axis=1).max())


def _head_bound(c, sigma_k, r):
  """min(B_naive(r), B_fine(r)) of one head (sensitivity.py steps 1–6), float64."""
  shift = (c["xca"] + c["xa"]) * r + c["a"] * r ** 2
  jac = np.minimum(0.5, c["p_max"] * np.exp(np.sqrt(2.0) * shift))
  fine = ((c["p_norm"] + jac * shift) * c["wv"] * r + c["query"] * r + sigma_k * r + c["a"] * c["jv"] * r ** 2
          + jac * c["rv"] * shift ** 2)
  naive = np.sqrt(c["n"]) * c["wv"] * r + 0.5 * c["a"] * (2 * c["x"] * r + r ** 2) * c["x"] * c["wv"]
  return np.minimum(naive, fine)


def _feature_radius(consts, sigma_k, embed_lipschitz, eps):
  """r_z(ε) of one image: r₀ = ‖W̃_E‖₂ε, r_{l+1} = r_l + Σ_h min(B_naive, B_fine)(r_l), r_z = r_L/√n."""
  r = embed_lipschitz * eps
  for layer_consts, layer_sigma in zip(consts, sigma_k):
    r = r + sum(_head_bound(c, s, r) for c, s in zip(layer_consts, layer_sigma))
  return r / np.sqrt(consts[0][0]["n"])


def _radius(consts, sigma_k, embed_lipschitz, f, label, w, iters=200):
  """The largest ε ∈ [0, EPS_MAX] the per-pair margin certificate accepts (certify's radius), float64
  bisection; 0 when misclassified."""
  others = [j for j in range(len(f)) if j != label]
  if f[label] <= max(f[j] for j in others):
    return 0.0
  need = min((f[label] - f[j]) / np.linalg.norm(w[:, label] - w[:, j]) for j in others)
  ok = lambda eps: _feature_radius(consts, sigma_k, embed_lipschitz, eps) < need  # noqa: E731
  if ok(EPS_MAX):
    return EPS_MAX
  lo, hi = 0.0, EPS_MAX
  for _ in range(iters):
    mid = 0.5 * (lo + hi)
    lo, hi = (mid, hi) if ok(mid) else (lo, mid)
  return lo


# On jax 0.10.2 (Python 3.11) the certify run below hung in XLA (block_until_ready in _certify_constants for over
# 10 minutes) when it ran after the rest of the suite in one process; alone it passed in 25 s, and a rerun in a
# fresh interpreter did not finish in 200 s either. Cause not found: the module runs on Python >= 3.12 (the
# newest JAX), where it passes in the full suite.
pytestmark = pytest.mark.skipif(sys.version_info < (3, 12), reason="hangs in XLA on jax 0.10.2 after the rest of "
                                "the suite (cause not found); runs on Python >= 3.12")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  """certify's records of the tiny run, and the radii recomputed from the saved model."""
  workdir = tmp_path_factory.mktemp("certify_rigorous")
  records = certify.run(CONFIG, workdir)
  params = _restore_params(workdir)
  model_config = CONFIG.model_config(DATASET, ALPHA)
  test = certify.load_test(CONFIG, DATASET)
  x, y = jnp.asarray(test.x), np.asarray(test.y)
  out = forward_with_intermediates(model_config, params, x)
  f = np.asarray(out.logits, np.float64)
  w = np.asarray(params["head"]["kernel"], np.float64)
  embed_lipschitz = min(1.0, float(_spectral(np.asarray(params["embed"]["kernel"], np.float64))))
  mats = [[np.asarray(m) for m in head_matrices(model_config, params[f"block_{l}"]["attention"])]
          for l in range(model_config.depth)]
  # The Krylov σ_K as certify computed it (one chunk: key fold_in(fold_in(PRNGKey(seed), 0), 0)), for the teeth.
  key = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(CONFIG.train.seed), 0), 0)
  krylov = np.asarray(certification.layer_constants(model_config, params, x, key=key,
                                                    power_iters=CONFIG.power_iters)[1].heads.key_norm)
  rigorous, with_krylov_key, tol = [], [], []
  for b in range(len(y)):
    tokens = [np.asarray(out.attention_inputs[l, b]) for l in range(model_config.depth)]
    consts = [[_head_constants64(tokens[l], a[h], wv[h]) for h in range(model_config.num_heads)]
              for l, (a, wv) in enumerate(mats)]
    closed = [[float(sensitivity.closed_form_key_norm(tokens[l], a[h], wv[h])) for h in range(model_config.num_heads)]
              for l, (a, wv) in enumerate(mats)]
    rigorous.append(_radius(consts, closed, embed_lipschitz, f[b], y[b], w))
    with_krylov_key.append(_radius(consts, krylov[b], embed_lipschitz, f[b], y[b], w))
    margin = min(f[b, y[b]] - f[b, j] for j in range(f.shape[1]) if j != y[b])
    scale = max(abs(f[b, y[b]]) + abs(f[b, j]) for j in range(f.shape[1]) if j != y[b])
    tol.append(rigorous[-1] * REL * (1 + scale / abs(margin)) + EPS_MAX * 2.0 ** -40)
  return dict(records=records, rigorous=np.array(rigorous), with_krylov_key=np.array(with_krylov_key),
              tol=np.array(tol), correct=np.argmax(f, axis=1) == y)


@pytest.mark.long
def test_the_fixture_tells_the_rigorous_certificate_from_the_krylov_one(run):
  """Teeth: radii that used a Krylov estimate differ from the rigorous ones by more than the tolerance."""
  (radius,) = [r for r in run["records"] if r["kind"] == "radius"]
  rigorous, tol = run["rigorous"], run["tol"]
  assert np.sum(rigorous > 0) >= 3, "too few certified images for the comparison to mean anything"
  assert np.sum(np.abs(np.asarray(radius["radii"]) - rigorous) > tol) >= 2        # the recorded Krylov radii
  assert np.sum(np.abs(run["with_krylov_key"] - rigorous) > tol) >= 2             # only σ_K swapped
  assert np.all(run["with_krylov_key"] >= rigorous - tol)   # the closed form bounds σ_K from above
  # ... and at some ε the Krylov certificate accepts an image the rigorous one does not (away from ε*).
  flips = 0
  for rec in (r for r in run["records"] if r["kind"] == "certify"):
    away = np.abs(rec["eps"] - rigorous) > tol
    flips += int(np.sum(away & (np.asarray(rec["certified_krylov_images"]) != (rec["eps"] < rigorous))))
  assert flips >= 1


def test_recorded_rigorous_radii_are_the_closed_form_certificate(run):
  """The 'radius' record's radii_rigorous equal the radii recomputed with the closed-form key-side norm."""
  (radius,) = [r for r in run["records"] if r["kind"] == "radius"]
  recorded = np.asarray(radius["radii_rigorous"])
  assert recorded.shape == run["rigorous"].shape
  np.testing.assert_array_less(np.abs(recorded - run["rigorous"]), run["tol"] + 1e-300)
  assert np.array_equal(recorded > 0, run["rigorous"] > 0)


def test_recorded_rigorous_flags_are_the_closed_form_certificate(run):
  """At every ε, certified_rigorous_images is 'ε < ε*' of the recomputed radius, on every image whose ε* is
  farther than the tolerance from ε; certified_rigorous is their mean where no image is that close."""
  rigorous, tol = run["rigorous"], run["tol"]
  certify_records = [r for r in run["records"] if r["kind"] == "certify"]
  assert sorted(r["eps"] for r in certify_records) == sorted(CONFIG.epsilons)
  compared = 0
  for rec in certify_records:
    flags = np.asarray(rec["certified_rigorous_images"], bool)
    expected = rec["eps"] < rigorous
    away = np.abs(rec["eps"] - rigorous) > tol
    assert np.array_equal(flags[away], expected[away]), rec["eps"]
    assert not np.any(flags & ~run["correct"])
    compared += int(away.sum())
    if away.all():
      assert rec["certified_rigorous"] == pytest.approx(expected.mean(), abs=1e-12)
  assert compared >= 0.9 * len(certify_records) * len(rigorous)   # boundaries are rare
