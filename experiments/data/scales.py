"""Two scales for pixels and perturbation budgets: the [0, 1] pixel scale and a data set's standardised
scale z = (x − μ_c) / σ_c, with one scalar mean μ_c and standard deviation σ_c per channel c computed on
the training split (e.g. MNIST's familiar (x − 0.1307) / 0.3081 on its full training set).

An L∞ budget ε on the pixel scale is ε / σ_c on the standardised scale, channel by channel: ε = 0.1 on
[0, 1] is about 0.32 in standardised MNIST units, the scale most MNIST attack code states ε in. The
[0, 1] box maps to the box [(0 − μ_c)/σ_c, (1 − μ_c)/σ_c]; an attack in standardised units must be
clipped to that image of the box to remain a valid image.

Images are [n, H, W, C] (channels last) or flattened [n, H·W·C] in HWC order (``experiments.data``'s
``flatten=True``), so the channel of flat feature j is j mod C; a single image [H, W, C] or row [d] works too.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


class ChannelStats(NamedTuple):
  """Per-channel scalar mean and standard deviation (float64, population std over all pixels of the
  channel in the training split).

  Fields:
    mean: shape [C], on the [0, 1] pixel scale.
    std: shape [C], > 0, on the [0, 1] pixel scale.
  """
  mean: np.ndarray
  std: np.ndarray

  @property
  def channels(self) -> int:
    return int(self.mean.shape[0])

  def as_record(self) -> dict:
    """JSON-ready ``{'mean': [...], 'std': [...]}`` for config.json / results records."""
    return {"mean": [float(v) for v in self.mean], "std": [float(v) for v in self.std]}


def _check_stats(stats: ChannelStats) -> ChannelStats:
  mean, std = np.asarray(stats.mean, np.float64), np.asarray(stats.std, np.float64)
  if mean.ndim != 1 or mean.shape != std.shape or mean.size == 0:
    raise ValueError(f"stats.mean and stats.std must be 1-D of equal length C ≥ 1, got shapes {mean.shape} "
                     f"and {std.shape}")
  if not (np.isfinite(mean).all() and np.isfinite(std).all() and (std > 0).all()):
    raise ValueError(f"stats must be finite with std > 0 in every channel, got std {std}")
  return ChannelStats(mean, std)


def _per_feature(values_C: np.ndarray, shape: tuple) -> np.ndarray:
  """Broadcasts a per-channel vector [C] against an array of ``shape`` (see the module docstring)."""
  c = values_C.shape[0]
  if len(shape) >= 3:
    if shape[-1] != c:
      raise ValueError(f"images with shape {shape} have {shape[-1]} channels (last axis), but the stats "
                       f"have {c}")
    return values_C
  if len(shape) in (1, 2):
    d = shape[-1]
    if d % c:
      raise ValueError(f"flattened inputs with {d} features cannot hold {c} channels in HWC order")
    return np.tile(values_C, d // c)
  raise ValueError(f"x must be [n, H, W, C], [H, W, C], [n, d] or [d]; got shape {shape}")


def channel_stats(x, *, channels: int | None = None) -> ChannelStats:
  """Per-channel mean and std of a training split on the [0, 1] scale.

  Args:
    x: training images [n, H, W, C] (channels last), or flattened [n, H·W·C] in HWC order with
      ``channels`` given; finite.
    channels: C for flattened input (1 for MNIST, 3 for CIFAR-10); must be None or equal to x.shape[-1] for
      image-shaped input.

  Returns:
    ``ChannelStats`` in float64.

  Raises:
    ValueError: flattened x without ``channels``, a feature count not divisible by it, non-finite x, or
      a channel of constant value (std 0).
  """
  x = np.asarray(x)
  if not np.isfinite(x).all():
    raise ValueError("x holds NaN or inf values; expected finite pixels")
  if x.ndim == 4:
    if channels is not None and channels != x.shape[-1]:
      raise ValueError(f"channels={channels} but x has {x.shape[-1]} channels on its last axis")
    per_channel = x.reshape(-1, x.shape[-1])
  elif x.ndim == 2:
    if channels is None or isinstance(channels, bool) or not isinstance(channels, (int, np.integer)) or (
        channels < 1 or x.shape[1] % channels):
      raise ValueError(f"channels must be an integer ≥ 1 dividing the {x.shape[1]} features of flattened "
                       f"x, got {channels!r}")
    per_channel = x.reshape(-1, int(channels))
  else:
    raise ValueError(f"x must be [n, H, W, C] or flattened [n, d], got shape {x.shape}")
  if per_channel.shape[0] == 0:
    raise ValueError("x holds no images")
  per_channel = per_channel.astype(np.float64)
  mean, std = per_channel.mean(axis=0), per_channel.std(axis=0)
  if not (std > 0).all():
    raise ValueError(f"a channel is constant (std 0): std = {std}")
  return ChannelStats(mean, std)


def eps_to_standardized(eps, std):
  """An L∞ budget on the [0, 1] pixel scale in standardised units: ε / σ_c (per channel).

  Args:
    eps: ε ≥ 0 on the [0, 1] scale (scalar or array).
    std: σ, scalar or per channel [C] (``ChannelStats.std``).

  Returns:
    ε / σ in float64, broadcast to the shape of eps × std (shape [C] for scalar ε and [C] std).

  Raises:
    ValueError: a negative or non-finite ε, or σ ≤ 0.
  """
  eps, std = _check_eps(eps), _check_std(std)
  return eps / std


def eps_to_pixels(eps_standardized, std):
  """Inverse of ``eps_to_standardized``: ε_z · σ_c on the [0, 1] scale (float64); round trip within 1 ulp.

  Raises:
    ValueError: a negative or non-finite ε, or σ ≤ 0.
  """
  eps, std = _check_eps(eps_standardized), _check_std(std)
  return eps * std


def _check_eps(eps):
  e = np.asarray(eps, np.float64)
  if not (np.isfinite(e).all() and (e >= 0).all()):
    raise ValueError(f"eps must be finite and ≥ 0, got {eps!r}")
  return e


def _check_std(std):
  s = np.asarray(std, np.float64)
  if not (np.isfinite(s).all() and (s > 0).all()):
    raise ValueError(f"std must be finite and > 0, got {std!r}")
  return s


def _float_dtype(x):
  return np.result_type(np.asarray(x).dtype, np.float32)


def standardize(x, stats: ChannelStats):
  """z = (x − μ_c) / σ_c, in x's float dtype (float32 for integer or float32 input).

  Args:
    x: pixels on [0, 1] with shape [n, H, W, C], [H, W, C], [n, d] or [d] (flattened HWC).
    stats: ``ChannelStats`` of the training split.

  Raises:
    ValueError: shapes that do not match the stats' channels, or invalid stats.
  """
  stats = _check_stats(stats)
  x = np.asarray(x)
  mean, std = _per_feature(stats.mean, x.shape), _per_feature(stats.std, x.shape)
  return ((x - mean) / std).astype(_float_dtype(x))


def unstandardize(z, stats: ChannelStats):
  """x = z · σ_c + μ_c, the inverse of ``standardize`` (same shapes and dtype rule).

  Raises:
    ValueError: as in ``standardize``.
  """
  stats = _check_stats(stats)
  z = np.asarray(z)
  mean, std = _per_feature(stats.mean, z.shape), _per_feature(stats.std, z.shape)
  return (z * std + mean).astype(_float_dtype(z))


class Box(NamedTuple):
  """The image of the [0, 1] pixel box on the standardised scale, per channel.

  Fields:
    low: (0 − μ_c) / σ_c, shape [C].
    high: (1 − μ_c) / σ_c, shape [C].
  """
  low: np.ndarray
  high: np.ndarray


def standardized_box(stats: ChannelStats) -> Box:
  """The per-channel box [(0 − μ)/σ, (1 − μ)/σ] that standardised images live in (float64)."""
  stats = _check_stats(stats)
  return Box((0.0 - stats.mean) / stats.std, (1.0 - stats.mean) / stats.std)


def clip_to_box(z, stats: ChannelStats):
  """Clips standardised images to ``standardized_box(stats)`` (what an attack in standardised units must
  do to stay a valid image), in z's float dtype; shapes as in ``standardize``.

  The box ends are rounded inward to z's dtype, so ``unstandardize`` of the result lies in [0, 1] up to the
  rounding of z · σ + μ (a few ulp).

  Raises:
    ValueError: as in ``standardize``.
  """
  box = standardized_box(stats)
  z = np.asarray(z)
  dtype = _float_dtype(z)
  low = _per_feature(box.low, z.shape).astype(dtype)
  high = _per_feature(box.high, z.shape).astype(dtype)
  low = np.where(low < _per_feature(box.low, z.shape), np.nextafter(low, dtype.type(np.inf)), low)
  high = np.where(high > _per_feature(box.high, z.shape), np.nextafter(high, dtype.type(-np.inf)), high)
  return np.clip(z.astype(dtype), low, high)
