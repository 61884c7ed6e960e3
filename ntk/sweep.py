"""One point of the width sweep: kernel distance at initialisation, function distance after gradient
descent, and kernel movement, for a 2-layer ReLU network on given feature rows (arXiv 2603.13085 §4–5;
docs/theory.md#kernel-distance). The runner that loops over data sets, models, widths and seeds is
``experiments/width_sweep/run.py``; this module holds the measurements.
"""
from __future__ import annotations

from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ntk.analytic import arccos_ntk
from ntk.distance import kernel_movement_measures, relative_frobenius, spectral_distance
from ntk.empirical import empirical_ntk, two_layer_relu_ntk
from ntk.models import Model
from ntk.training import ntk_predict, train_gd

KernelPath = Literal["fast", "neural_tangents"]


class InfiniteWidthKernels(NamedTuple):
  """Arc-cosine NTKs in float64: train [n, n], test-train [t, n]."""
  train: np.ndarray
  test_train: np.ndarray


def infinite_width_kernels(train_NxD, test_TxD, *, readout: str) -> InfiniteWidthKernels:
  """Closed-form infinite-width NTK (``arccos_ntk``) computed in float64.

  Args:
    train_NxD, test_TxD: feature rows, shapes [n, d] and [t, d].
    readout: ``'fixed'`` or ``'trained'``.
  """
  with jax.enable_x64(True):
    tr = jnp.asarray(np.asarray(train_NxD, np.float64))
    te = jnp.asarray(np.asarray(test_TxD, np.float64))
    return InfiniteWidthKernels(np.asarray(arccos_ntk(tr, readout=readout)),
                                np.asarray(arccos_ntk(te, tr, readout=readout)))


def finite_width_kernel(model: Model, params, x1, x2=None, *, path: KernelPath = "fast") -> np.ndarray:
  """Empirical NTK by the closed-form fast path or by neural-tangents (the reference)."""
  if path == "fast":
    return np.asarray(two_layer_relu_ntk(model, params, x1, x2))
  if path == "neural_tangents":
    return empirical_ntk(model.apply_fn, params, x1, x2, implementation="ntk_vector_products")
  raise ValueError(f"kernel path must be 'fast' or 'neural_tangents', got {path!r}")


class KernelDistance(NamedTuple):
  """Distances of an empirical NTK K_m from the infinite-width K∞ (``kernel_distance``); Python floats.

  Attributes:
    rel_frobenius_train: ‖K_m − K∞‖_F / ‖K∞‖_F on the train block [n, n].
    rel_frobenius_test_train: the same on the test-train block [t, n].
    spectral_ratio: ‖K_m − K∞‖₂ / λ_min(K∞) on the train block (< 1: K_m keeps K∞'s conditioning).
    operator_norm: ‖K_m − K∞‖₂ (train block).
    lambda_min_inf, lambda_max_inf: extreme eigenvalues of K∞ (train block).
  """
  rel_frobenius_train: float
  rel_frobenius_test_train: float
  spectral_ratio: float
  operator_norm: float
  lambda_min_inf: float
  lambda_max_inf: float


def kernel_distance(model: Model, params, train_NxD, test_TxD, inf: InfiniteWidthKernels, *,
                    path: KernelPath = "fast") -> KernelDistance:
  """Distances of the empirical NTK at ``params`` from the infinite-width one.

  Args:
    model, params: the finite network (``ntk.two_layer_relu``) and its parameters.
    train_NxD, test_TxD: feature rows [n, d] and [t, d].
    inf: the infinite-width kernels of the same rows and readout (``infinite_width_kernels``).
    path: "fast" (closed-form empirical NTK) or "neural_tangents".

  Returns:
    ``KernelDistance``.

  Raises:
    ValueError: unknown path.
  """
  k_train = finite_width_kernel(model, params, train_NxD, path=path)
  k_test = finite_width_kernel(model, params, test_TxD, train_NxD, path=path)
  sd = spectral_distance(k_train, inf.train)
  return KernelDistance(
      rel_frobenius_train=relative_frobenius(k_train, inf.train),
      rel_frobenius_test_train=relative_frobenius(k_test, inf.test_train),
      spectral_ratio=sd.ratio_to_lambda_min,
      operator_norm=sd.operator_norm,
      lambda_min_inf=sd.lambda_min,
      lambda_max_inf=sd.lambda_max,
  )


def matched_time(k_train_NxN, y_train_NxC, *, loss_fraction: float) -> float:
  """The training time t at which the kernel predictor from f₀ = 0 has train loss ``loss_fraction``·L(0).

  Gradient descent on ½·mean‖f − y‖² in the kernel regime gives, with K = Σᵢ λᵢ uᵢuᵢᵀ and N = n·C outputs
  (``nt.predict.gradient_descent_mse``'s convention), L(t) = ½/N · Σᵢ e^{−2λᵢt/N} ‖uᵢᵀY‖², falling from
  L(0) = ½·mean(y²). Each model reaches the same fraction of its own target loss at its own t: a matched
  fraction of its spectrum, where a fixed t fits 245 of 2L-ReLU's 256 modes but 4 of MLP-Attn's
  (docs/theory.md#gradient-descent-vs-the-ntk-predictor). Solved by bisection on log t to 1e-10 relative.

  Args:
    k_train_NxN: the kernel [n, n], symmetric PSD (float64 recommended).
    y_train_NxC: targets [n, C].
    loss_fraction: in (0, 1).

  Returns:
    t > 0 (η·steps), or inf when the fraction lies below the loss of the kernel's null space (unreachable).

  Raises:
    ValueError: loss_fraction outside (0, 1), shapes that do not line up, non-finite entries, zero targets.
  """
  if not 0 < loss_fraction < 1:
    raise ValueError(f"loss_fraction must be in (0, 1), got {loss_fraction!r}")
  k = np.asarray(k_train_NxN, np.float64)
  y = np.asarray(y_train_NxC, np.float64)
  if y.ndim != 2 or k.shape != (y.shape[0], y.shape[0]):
    raise ValueError(f"k_train_NxN [n, n] and y_train_NxC [n, C] do not line up: {k.shape}, {y.shape}")
  if not (np.isfinite(k).all() and np.isfinite(y).all()):
    raise ValueError("k_train_NxN and y_train_NxC must be finite")
  if np.abs(y).max(initial=0) > 0:
    y = y / np.abs(y).max()  # the time is scale-invariant in y: no overflow or underflow at 1e±200
  lam, u = np.linalg.eigh((k + k.T) / 2)
  energy = np.sum((u.T @ y) ** 2, axis=1)
  total = float(energy.sum())
  if total == 0:
    raise ValueError("y_train_NxC is zero: every loss fraction is reached at t = 0")
  n_out = y.size
  positive = lam > max(lam.max(), 0.0) * lam.size * np.finfo(np.float64).eps

  def fraction(t):
    return float(np.sum(energy * np.where(positive, np.exp(-2 * np.clip(lam, 0, None) * t / n_out), 1.0))) / total

  if sum(energy[~positive]) / total >= loss_fraction:  # the null space's share never decays
    return float("inf")
  lo, hi = 0.0, n_out / float(lam.max())
  while fraction(hi) > loss_fraction:
    lo, hi = hi, hi * 2
  for _ in range(200):
    mid = 0.5 * (lo + hi)
    lo, hi = (mid, hi) if fraction(mid) > loss_fraction else (lo, mid)
    if hi - lo <= 1e-10 * hi:
      break
  return hi


def default_learning_rate(inf: InfiniteWidthKernels, n_outputs: int, scale: float = 1.0) -> float:
  """η = scale · nC / λ_max(K∞): half the gradient-descent stability limit 2nC/λ_max at scale 1
  (the loss is ½·mean over n·C entries, so the kernel step is η K / (nC))."""
  n = inf.train.shape[0]
  return float(scale * n * n_outputs / np.linalg.eigvalsh(inf.train)[-1])


class TrainingMetrics(NamedTuple):
  """Measurements of one network trained by gradient descent against the NTK predictor; Python scalars.

  Attributes:
    function_distance: ‖f_m − f_NTK‖_F over the [t, C] test outputs (un-normalised, as the paper's table).
    function_distance_rms: that divided by √(tC).
    function_distance_relative: that divided by ‖f_NTK − f₀‖_F, the predictor's own movement.
    kernel_movement: ‖K_T − K_0‖_F / ‖K_0‖_F of the empirical NTK (train block).
    test_accuracy_network, test_accuracy_ntk: test accuracy of the network and of the predictor.
    train_loss: ½·mean squared error of the trained network on the training set.
    learning_rate: η; steps: T; time: t = η·T.
    kernel_movement_centred, kernel_movement_one_minus_cka, kernel_movement_top_k, kernel_movement_k: the
      other measures of ``ntk.distance.kernel_movement_measures`` (centred ‖H(K_T − K₀)H‖_F/‖HK₀H‖_F,
      1 − CKA(K_T, K₀), top-k eigenspace movement 1 − ‖U_kᵀV_k‖_F²/k, and that k).
    function_distance_k0, function_distance_k0_relative: ‖f_m − f_K₀(t)‖_F and that over ‖f_K₀(t) − f₀‖_F,
      against the gradient-descent predictor of the network's own empirical NTK at initialisation K₀ at the
      same time t and f₀ (laziness: how far training left K₀'s linear model, beside the distance to K∞'s).
  """
  function_distance: float
  function_distance_rms: float
  function_distance_relative: float
  kernel_movement: float
  test_accuracy_network: float
  test_accuracy_ntk: float
  train_loss: float
  learning_rate: float
  steps: int
  time: float
  kernel_movement_centred: float
  kernel_movement_one_minus_cka: float
  kernel_movement_top_k: float
  kernel_movement_k: int
  function_distance_k0: float
  function_distance_k0_relative: float


class TrainingResult(NamedTuple):
  """Measurements of one trained network against the NTK predictor (see ``train_and_compare``).

  Attributes:
    metrics: ``TrainingMetrics``.
    arrays: test outputs of both, ``{"f_test_network": [t, C], "f_test_ntk": [t, C]}``.
  """
  metrics: TrainingMetrics
  arrays: dict


def train_and_compare(model: Model, params, train_NxD, test_TxD, y_train_NxC, y_test_T,
                      inf: InfiniteWidthKernels, *, learning_rate: float, steps: int,
                      path: KernelPath = "fast") -> TrainingResult:
  """Trains by full-batch GD and compares with the infinite-width predictor at t = steps · lr.

  The predictor gets the network's own initial outputs f₀ (so an antisymmetric init, f₀ ≡ 0, needs no
  special case).

  Args:
    model, params: the network at initialisation.
    train_NxD, test_TxD: feature rows.
    y_train_NxC: one-hot targets [n, C]; y_test_T: integer test labels [t].
    inf: infinite-width kernels of the same features and readout.
    learning_rate, steps: gradient descent settings.

  Returns:
    ``TrainingResult`` with ``TrainingMetrics`` and the test outputs of both.

  Raises:
    ValueError: as ``train_gd`` and ``ntk_predict``.
  """
  f0_train = np.asarray(model.apply_fn(params, train_NxD))
  f0_test = np.asarray(model.apply_fn(params, test_TxD))
  trained = train_gd(model.apply_fn, params, train_NxD, y_train_NxC, learning_rate=learning_rate,
                     steps=steps)
  f_test = np.asarray(model.apply_fn(trained, test_TxD))
  f_train = np.asarray(model.apply_fn(trained, train_NxD))
  pred = ntk_predict(inf.train, inf.test_train, y_train_NxC, time=learning_rate * steps,
                     fx_train_0=f0_train, fx_test_0=f0_test)
  k0 = finite_width_kernel(model, params, train_NxD, path=path)
  k_t = finite_width_kernel(model, trained, train_NxD, path=path)
  k0_test = finite_width_kernel(model, params, test_TxD, train_NxD, path=path)
  pred_k0 = ntk_predict(k0, k0_test, y_train_NxC, time=learning_rate * steps, fx_train_0=f0_train,
                        fx_test_0=f0_test)
  movement = kernel_movement_measures(k_t, k0)
  dist = float(np.linalg.norm(f_test - pred.test))
  dist_k0 = float(np.linalg.norm(f_test - pred_k0.test))
  metrics = TrainingMetrics(
      function_distance=dist,
      function_distance_rms=dist / np.sqrt(f_test.size),
      function_distance_relative=dist / max(float(np.linalg.norm(pred.test - f0_test)), 1e-30),
      kernel_movement=relative_frobenius(k_t, k0),
      test_accuracy_network=float(np.mean(np.argmax(f_test, 1) == np.asarray(y_test_T))),
      test_accuracy_ntk=float(np.mean(np.argmax(pred.test, 1) == np.asarray(y_test_T))),
      train_loss=float(0.5 * np.mean((f_train - np.asarray(y_train_NxC)) ** 2)),
      learning_rate=float(learning_rate),
      steps=int(steps),
      time=float(learning_rate * steps),
      kernel_movement_centred=movement.centred,
      kernel_movement_one_minus_cka=movement.one_minus_cka,
      kernel_movement_top_k=movement.top_k_subspace,
      kernel_movement_k=movement.top_k,
      function_distance_k0=dist_k0,
      function_distance_k0_relative=dist_k0 / max(float(np.linalg.norm(pred_k0.test - f0_test)), 1e-30),
  )
  return TrainingResult(metrics, {"f_test_network": f_test, "f_test_ntk": pred.test})
