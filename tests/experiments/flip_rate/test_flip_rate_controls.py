"""The flip-rate readings that must survive the control and the multiplicity (issue: seeds, controls and
corrections): the neutral interior random-sign control, the shift of XᵀX each perturbation causes, flip counts
and the ≥ 5-flip rule for ratios, and the ε grid read as one Bonferroni family."""
import jax
import numpy as np
import pytest

from claim_sources import claim_rows_of, flip_records, main_row
from experiments.flip_rate import claims as fc
from influence import malleability


def _images(seed=0, n=64, d=100):
  rng = np.random.default_rng(seed)
  x = rng.uniform(0, 1, (n, d))
  x[:, : d // 2] = 0.0  # half the pixels black, as most of MNIST's
  return x.astype(np.float32)


def test_interior_sign_moves_only_pixels_both_signs_keep_inside_the_box():
  x, eps = _images(), 0.1
  out = np.asarray(malleability.perturb_rows("interior_sign", None, x, None, eps=eps, key=jax.random.PRNGKey(0)))
  delta = out - x
  inside = (x >= eps) & (x <= 1 - eps)
  assert np.all(delta[~inside] == 0) and np.allclose(np.abs(delta[inside]), eps, atol=1e-6)
  assert out.min() >= 0 and out.max() <= 1
  assert abs(delta[inside].mean()) < 0.01 * eps * 10  # signs balanced: mean ≈ 0 (2,400 draws: se ≈ 0.02·ε)


def test_the_clipped_random_sign_brightens_black_pixels_and_moves_xtx_more_than_the_neutral_control():
  x, eps = _images(), 0.1
  key = jax.random.PRNGKey(1)
  clipped = np.asarray(malleability.perturb_rows("random_sign", None, x, None, eps=eps, key=key))
  neutral = np.asarray(malleability.perturb_rows("interior_sign", None, x, None, eps=eps, key=key))
  black = x == 0
  assert clipped[black].mean() == pytest.approx(eps / 2, rel=0.1)  # +ε/2 on average where x = 0
  assert neutral[black].max() == 0
  assert malleability.gram_shift(x, clipped) > 2 * malleability.gram_shift(x, neutral)


def test_gram_shift_closed_forms_and_bad_input():
  x = _images(2)
  assert malleability.gram_shift(x, x) == 0.0
  assert malleability.gram_shift(x, 1.1 * x) == pytest.approx(1.1 ** 2 - 1, rel=1e-6)
  base = x.astype(np.float64).T @ x.astype(np.float64)
  assert malleability.gram_shift(x, 1.1 * x, base_DxD=base) == pytest.approx(malleability.gram_shift(x, 1.1 * x))
  with pytest.raises(ValueError, match="one shape"):
    malleability.gram_shift(x, x[:3])
  with pytest.raises(ValueError, match="zero"):
    malleability.gram_shift(np.zeros((3, 4)), np.ones((3, 4)))


def test_family_level_is_bonferroni():
  assert fc.family_level(10) == pytest.approx(0.995) and fc.family_level(1) == 0.95 and fc.family_level(0) == 0.95


def test_the_eps_grid_is_one_family_and_the_primary_is_read_at_95(tmp_path):
  records = [r for eps in (0.05, 0.1, 0.2, 0.3) for r in flip_records([10] * 10, [21] * 10, eps=eps)]
  rows = [r for r in claim_rows_of(tmp_path, "fr", records) if r["claim_id"] == "flip_ratio_mnist_pgd"
          and not r["variant"]]
  primary = main_row(rows, "flip_ratio_mnist_pgd")
  grid = [r for r in rows if not r["primary"] and r["measurement"].startswith("ε = ")]
  assert primary["level"] == 0.95 and len(grid) == 3
  assert all(r["level"] == pytest.approx(1 - 0.05 / 3) and "Bonferroni" in r["setting"] for r in grid)
  # the same counts at every ε: the corrected interval is wider than the primary's
  assert all(r["low"] < primary["low"] and r["high"] > primary["high"] for r in grid)
  assert "flips: MLP-Attn 210 of 260, 2L-ReLU 100 of 260" in primary["setting"]


def test_a_ratio_resting_on_fewer_than_five_flips_is_not_read(tmp_path):
  relu = [1, 0, 0, 1, 0, 0, 1, 0, 0, 1]  # 4 flips in all
  row = main_row(claim_rows_of(tmp_path, "fr", flip_records(relu, [20] * 10)), "flip_ratio_mnist_pgd")
  assert row["low"] > 1  # the interval alone would read holds
  assert (row["direction"], row["magnitude"]) == ("inconclusive", "undetermined") and "< 5" in row["reason"]
  row = main_row(claim_rows_of(tmp_path, "fr5", flip_records([1] * 5 + [0] * 5, [20] * 10)), "flip_ratio_mnist_pgd")
  assert row["direction"] == "holds"


def test_excess_rows_subtract_the_neutral_control_and_keep_the_clipped_one_as_secondary(tmp_path):
  records = flip_records([3] * 10, [9] * 10, attacks=("fgsm", "pgd", "mim"))
  records += flip_records([2] * 10, [2] * 10, attacks=("interior_sign",), extra=dict(gram_shift=0.001))
  records += flip_records([1] * 10, [8] * 10, attacks=("random_sign",), extra=dict(gram_shift=0.1))
  for r in records:
    r.setdefault("gram_shift", 0.02)
  rows = claim_rows_of(tmp_path, "fr", records)
  neutral = main_row(rows, "flip_excess_mnist_pgd")
  clipped = main_row(rows, "flip_excess_clipped_mnist_pgd")
  assert "interior random sign" in neutral["claim"] and "clipped" in clipped["claim"]
  # neutral: (9 − 2) − (3 − 2) = 6 flips of 26 above; clipped: (9 − 8) − (3 − 1) = −1 of 26
  assert neutral["estimate"] == pytest.approx(6 / 26) and clipped["estimate"] == pytest.approx(-1 / 26)
  assert "XᵀX moves 2 % under PGD, 0.1 % under the interior random sign" in neutral["setting"]
