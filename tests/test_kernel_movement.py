"""Kernel movement measures (ntk.distance.kernel_movement_measures): each computed by hand on a 3×3 or 4×4
kernel pair in float64, their invariances, and the normalisation by the kernel at initialisation K₀."""
import math

import numpy as np
import pytest

from ntk.distance import kernel_movement_measures

K0 = np.array([[2.0, 1.0, 0.0], [1.0, 2.0, 1.0], [0.0, 1.0, 2.0]])
KT = np.array([[3.0, 1.0, 1.0], [1.0, 2.0, 0.0], [1.0, 0.0, 4.0]])


def test_each_measure_by_hand_on_a_3x3_pair():
  """K_T − K₀ has ‖·‖_F = 3 and ‖K₀‖_F = 4: raw 3/4. Centred (H = I − 11ᵀ/3): H(K_T − K₀)H =
  [[0, 0, 0], [0, 1, −1], [0, −1, 1]] (norm 2) and HK₀H = [[10, −2, −8], [−2, 4, −2], [−8, −2, 10]]/9
  (norm² 360/81): centred 2·9/√360 = 3/√10. HK_TH = HK₀H + H(K_T − K₀)H = [[10, −2, −8], [−2, 13, −11],
  [−8, −11, 19]]/9 (norm² 1008/81), ⟨HK₀H, HK_TH⟩ = 522/81: CKA = 522/√(360·1008)."""
  m = kernel_movement_measures(KT, K0, top_k=1)
  assert m.raw == pytest.approx(0.75, rel=1e-14)
  assert m.centred == pytest.approx(3 / math.sqrt(10), rel=1e-14)
  assert m.one_minus_cka == pytest.approx(1 - 522 / math.sqrt(360 * 1008), rel=1e-12)


def test_top_k_subspace_by_hand():
  """Diagonal kernels: the top eigenvector of diag(3, 2, 1) is e₁, of diag(1, 2, 3) e₃ (orthogonal: 1);
  the top-2 spaces {e₁, e₂} and {e₂, e₃} share e₂ (1 − 1/2). A 4×4 kernel rotated by θ in the (e₁, e₂) plane
  moves its top eigenvector by θ: sin²θ."""
  a, b = np.diag([3.0, 2.0, 1.0]), np.diag([1.0, 2.0, 3.0])
  assert kernel_movement_measures(b, a, top_k=1).top_k_subspace == pytest.approx(1.0, abs=1e-15)
  assert kernel_movement_measures(b, a, top_k=2).top_k_subspace == pytest.approx(0.5, abs=1e-15)
  theta = 0.3
  r = np.eye(4)
  r[:2, :2] = [[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]]
  k0 = np.diag([4.0, 1.0, 0.5, 0.25])
  m = kernel_movement_measures(r @ k0 @ r.T, k0, top_k=1)
  assert m.top_k_subspace == pytest.approx(math.sin(theta) ** 2, rel=1e-12) and m.top_k == 1
  assert kernel_movement_measures(r @ k0 @ r.T, k0, top_k=2).top_k_subspace == pytest.approx(0.0, abs=1e-14)
  assert kernel_movement_measures(k0, k0, top_k=10).top_k == 4  # k capped at n


def test_trained_kernel_twice_the_initial_one_moved_by_exactly_one():
  """K_T = 2K₀: ‖K_T − K₀‖_F/‖K₀‖_F = 1 exactly; normalised by the trained kernel it would be 1/2. The
  centred movement is 1 as well; the shape (CKA) and the eigenspaces have not moved."""
  rng = np.random.default_rng(0)
  a = rng.normal(size=(4, 6))
  k0 = a @ a.T
  m = kernel_movement_measures(2 * k0, k0, top_k=2)
  assert m.raw == 1.0 and m.centred == pytest.approx(1.0, rel=1e-14)
  assert m.one_minus_cka == pytest.approx(0.0, abs=1e-14) and m.top_k_subspace == pytest.approx(0.0, abs=1e-14)
  # and the other way round: K_T = K₀/2 moved by 1/2 of K₀, not by 1 of K_T
  assert kernel_movement_measures(k0 / 2, k0).raw == pytest.approx(0.5, rel=1e-15)


def test_centred_and_cka_measures_ignore_a_constant_added_to_both_kernels_and_cka_ignores_scale():
  rng = np.random.default_rng(1)
  a, b = rng.normal(size=(5, 7)), rng.normal(size=(5, 7))
  k0, kt = a @ a.T, a @ a.T + 0.3 * b @ b.T
  base = kernel_movement_measures(kt, k0)
  shifted = kernel_movement_measures(kt + 7.0, k0 + 7.0)  # + c·11ᵀ on both
  assert shifted.centred == pytest.approx(base.centred, rel=1e-12)
  assert shifted.one_minus_cka == pytest.approx(base.one_minus_cka, rel=1e-10)
  assert shifted.raw != pytest.approx(base.raw, rel=1e-3)  # the raw measure is not invariant
  scaled = kernel_movement_measures(5.0 * kt, 0.3 * k0)
  assert scaled.one_minus_cka == pytest.approx(base.one_minus_cka, rel=1e-10)
  assert 0 < base.one_minus_cka < 1 and base.top_k_subspace == pytest.approx(0.0, abs=1e-12)  # k = n: all of R^n
  assert 0 < kernel_movement_measures(kt, k0, top_k=2).top_k_subspace <= 1


def test_a_dead_network_moved_by_one_and_its_alignment_and_eigenspace_are_undefined():
  """K_T = 0 (every unit dead): raw and centred movement 1; CKA and the top-k eigenspace of K_T are not
  determined (NaN, left out of the claim rows); a rank-1 K₀ has no determined top-2 eigenspace."""
  m = kernel_movement_measures(np.zeros((3, 3)), K0, top_k=2)
  assert m.raw == 1.0 and m.centred == pytest.approx(1.0, rel=1e-14)
  assert math.isnan(m.one_minus_cka) and math.isnan(m.top_k_subspace)
  v = np.array([1.0, 2.0, -3.0])
  assert math.isnan(kernel_movement_measures(K0, np.outer(v, v), top_k=2).top_k_subspace)
  assert math.isfinite(kernel_movement_measures(K0, np.outer(v, v), top_k=1).top_k_subspace)


@pytest.mark.parametrize("kt,k0,kwargs,match", [
    (np.eye(3), np.eye(4), {}, "square and equal"),
    (np.eye(3), np.zeros((3, 3)), {}, "zero"),
    (np.eye(3), np.ones((3, 3)), {}, "constant after centring"),
    (np.eye(3), np.eye(3), {"top_k": 0}, "top_k"),
    (np.full((3, 3), np.nan), np.eye(3), {}, "NaN"),
])
def test_bad_input(kt, k0, kwargs, match):
  with pytest.raises(ValueError, match=match):
    kernel_movement_measures(kt, k0, **kwargs)
