"""The smallest ½·MSE on one-hot targets that a 2-layer ReLU network with a fixed readout can reach.

The fixed-readout network (arXiv 2603.13085 §3; ``ntk.two_layer_relu(readout='fixed')``) computes
f(x) = aᵀ relu(Wᵀx)/√m with a ∈ {±1}^{m×C} drawn once and never trained. Its hidden vector h = relu(Wᵀx) is
non-negative, so whatever the first layer W and the input x, f(x) lies in the cone {aᵀh/√m : h ≥ 0}. For a
sample of class c the squared error is therefore at least

    e_c = min_{h ≥ 0} ‖aᵀh/√m − e_c‖²,

a non-negative least-squares problem (Lawson & Hanson 1974, ch. 23; ``scipy.optimize.nnls``). Half the mean
of e_y over the labels, divided by C (the ½·MSE averages over all n·C entries), is a floor under the ½·MSE
of every network with this readout: a loss target below it
cannot be reached by any optimiser, for any input features (docs/theory.md#fixed-readout-loss-floor). The
floor is 0 once the cone holds every e_c, which a random ±1 readout does with high probability at widths
≥ 64 for C = 10, and rarely at width 16.
"""
from __future__ import annotations

import numpy as np
import scipy.optimize


def fixed_readout_loss_floor(readout_MxC, labels_N) -> float:
  """A lower bound on the ½·MSE of f(x) = aᵀ relu(Wᵀx)/√m against one-hot targets, over every W and input.

  Args:
    readout_MxC: the fixed readout a, [m, C] (any real entries; the network's are ±1), finite.
    labels_N: integer class labels in [0, C), [n] with n ≥ 1.

  Returns:
    ½·mean over the n·C output entries of the smallest squared error each label allows,
    ½ · (1/(n·C)) · Σ_i min_{h ≥ 0} ‖aᵀh/√m − e_{y_i}‖² (float, ≥ 0), in the units of the ½·MSE train
    loss of ``ntk.criterion.train_to_criterion(loss='mse')``. Scaling a by any c > 0 leaves it unchanged.

  Raises:
    ValueError: readout not a finite real 2-D array, labels empty, not integers or outside [0, C).
  """
  a = np.asarray(readout_MxC)
  if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
    raise ValueError(f"readout_MxC must hold real numbers, got dtype {a.dtype}")
  a = a.astype(np.float64)
  if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
    raise ValueError(f"readout_MxC must be an [m, C] array with m, C ≥ 1, got shape {a.shape}")
  if not np.all(np.isfinite(a)):
    raise ValueError(f"readout_MxC must be finite, got {int(np.sum(~np.isfinite(a)))} NaN or infinite entries")
  labels = np.asarray(labels_N)
  m, c = a.shape
  if labels.ndim != 1 or labels.size == 0 or not np.issubdtype(labels.dtype, np.integer):
    raise ValueError(f"labels_N must be a non-empty 1-D integer array, got shape {labels.shape}, "
                     f"dtype {labels.dtype}")
  if labels.min() < 0 or labels.max() >= c:
    raise ValueError(f"labels_N must lie in [0, {c}) (C = readout_MxC.shape[1]), got [{labels.min()}, "
                     f"{labels.max()}]")
  per_class = np.array([scipy.optimize.nnls(a.T / np.sqrt(m), np.eye(c)[k])[1] ** 2 for k in range(c)])
  return float(0.5 * np.mean(per_class[labels]) / c)
