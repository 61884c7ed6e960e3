"""ε and pixels on the [0, 1] and standardised scales (experiments.data.scales)."""
import numpy as np
import pytest

from experiments.data import load_dataset
from experiments.data.scales import (
    ChannelStats,
    channel_stats,
    clip_to_box,
    eps_to_pixels,
    eps_to_standardized,
    standardize,
    standardized_box,
    unstandardize,
)


def test_mnist_stats_on_the_embedded_training_split_are_the_familiar_ones():
  """The full MNIST training set gives μ = 0.1307, σ = 0.3081; the embedded class-balanced subset is close."""
  x = load_dataset("mnist", "train", flatten=True).x
  stats = channel_stats(x, channels=1)
  assert stats.mean.shape == (1,) and stats.mean.dtype == np.float64
  np.testing.assert_allclose(stats.mean, [0.1307], atol=0.01)
  np.testing.assert_allclose(stats.std, [0.3081], atol=0.01)
  assert eps_to_standardized(0.1, stats.std)[0] == pytest.approx(0.1 / 0.3081, rel=0.05)  # ≈ 0.32


def test_flattened_hwc_and_image_shapes_give_the_same_per_channel_stats():
  rng = np.random.default_rng(0)
  scale = np.array([0.2, 0.5, 1.0])
  x = (rng.uniform(size=(40, 4, 5, 3)) * scale).astype(np.float32)
  a, b = channel_stats(x), channel_stats(x.reshape(40, -1), channels=3)
  np.testing.assert_allclose(a.mean, b.mean, rtol=1e-12)
  np.testing.assert_allclose(a.std, b.std, rtol=1e-12)
  np.testing.assert_allclose(a.mean, scale / 2, rtol=0.05)  # uniform on [0, s]: mean s/2, std s/√12
  np.testing.assert_allclose(a.std, scale / np.sqrt(12), rtol=0.05)
  z = standardize(x, a)
  np.testing.assert_allclose(z.reshape(40, -1), standardize(x.reshape(40, -1), a), rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(z.reshape(-1, 3).mean(axis=0), 0, atol=1e-5)
  np.testing.assert_allclose(z.reshape(-1, 3).std(axis=0), 1, rtol=1e-5)
  np.testing.assert_allclose(unstandardize(z, a), x, atol=1e-6)


@pytest.mark.parametrize("std", [0.3081, 0.2470, 0.2435, 1 / 3, 0.1])
def test_eps_round_trip_between_scales_is_within_one_ulp(std):
  eps = np.concatenate([np.linspace(0, 0.3, 13), [0.1, 0.05, 8 / 255, 1e-3, 1.0]])
  back = eps_to_pixels(eps_to_standardized(eps, std), std)
  assert np.all(np.abs(back - eps) <= np.spacing(eps))
  z = eps_to_standardized(eps, std)
  assert np.all(np.abs(eps_to_standardized(eps_to_pixels(z, std), std) - z) <= np.spacing(z))


def test_standardize_attack_then_back_to_pixels_stays_in_the_box_and_within_the_pixel_budget():
  rng = np.random.default_rng(1)
  x = rng.uniform(size=(64, 6, 6, 3)).astype(np.float32)
  x[:8] = 0.0  # saturated images: every sign step pushes half the pixels out of the box
  x[8:16] = 1.0
  stats = channel_stats(rng.uniform(size=(200, 6, 6, 3)) * [0.9, 0.5, 0.7])
  eps = 0.1
  z = standardize(x, stats)
  grad_sign = np.sign(rng.normal(size=z.shape)).astype(np.float32)
  z_adv = z + eps_to_standardized(eps, stats.std).astype(np.float32) * grad_sign  # one FGSM-like step
  unclipped = unstandardize(z_adv, stats)
  assert unclipped.min() < -0.05 and unclipped.max() > 1.05  # the step does leave the box
  x_adv = unstandardize(clip_to_box(z_adv, stats), stats)
  tol = 4 * np.finfo(np.float32).eps
  assert x_adv.min() >= -tol and x_adv.max() <= 1 + tol
  assert np.abs(x_adv - x).max() <= eps + tol  # the budget is ε on the pixel scale, per channel


def test_box_image_is_the_standardised_zero_and_one():
  stats = ChannelStats(np.array([0.1307]), np.array([0.3081]))
  box = standardized_box(stats)
  np.testing.assert_allclose(box.low, [-0.1307 / 0.3081], rtol=1e-15)
  np.testing.assert_allclose(box.high, [(1 - 0.1307) / 0.3081], rtol=1e-15)
  np.testing.assert_allclose(standardize(np.array([[0.0, 1.0]]), stats)[0], [box.low[0], box.high[0]])
  assert stats.as_record() == {"mean": [0.1307], "std": [0.3081]}


@pytest.mark.parametrize("call,match", [
    (lambda: channel_stats(np.zeros((4, 6))), "channels"),
    (lambda: channel_stats(np.zeros((4, 6)), channels=4), "channels"),
    (lambda: channel_stats(np.zeros((4, 2, 2, 1))), "constant"),
    (lambda: channel_stats(np.full((4, 2), np.nan), channels=1), "NaN"),
    (lambda: eps_to_standardized(-0.1, 0.3), "eps"),
    (lambda: eps_to_standardized(0.1, 0.0), "std"),
    (lambda: standardize(np.zeros((2, 3, 3, 1)), ChannelStats(np.zeros(3), np.ones(3))), "channels"),
    (lambda: standardize(np.zeros((2, 7)), ChannelStats(np.zeros(3), np.ones(3))), "HWC"),
    (lambda: standardize(np.zeros((2, 3)), ChannelStats(np.zeros(3), np.zeros(3))), "std > 0"),
])
def test_bad_input_raises_value_error_naming_the_argument(call, match):
  with pytest.raises(ValueError, match=match):
    call()
