"""The cubing check on real images: identity to float64 precision, rank-deficient subsets reported."""
import numpy as np
import pytest

from experiments.core.config import apply_overrides
from experiments.cubing import config as cubing_config
from experiments.cubing import report as cubing_report
from experiments.cubing import run as cubing
from experiments.data import load_dataset
from ntk.cubing import cubing_check


def test_cubing_identity_holds_on_real_mnist_rows():
  x = load_dataset("mnist", "train", n=60, seed=0, flatten=True).x
  out = cubing_check(x)
  assert out["full_rank"] and out["rank_G"] == 60
  # κ(G̃) from the formed features equals κ(G)³ (float64 resolves it at this n) ...
  assert abs(out["cubing_deviation_direct"]) < 1e-6 * out["log10_kappa_Gtilde"]
  # ... and F Fᵀ = G³ within κ(G)³·eps.
  assert out["explicit_identity_rel_error"] <= max(out["explicit_identity_tolerance"], 1e-14)
  assert out["log10_kappa_values_k2"] == pytest.approx(5 * out["log10_kappa_G"])
  assert out["log10_kappa_self_k2"] == pytest.approx(9 * out["log10_kappa_G"])
  assert out["log10_width_attn_eps0.1"] == pytest.approx(6 * out["log10_kappa_G"] + 2)


def test_rank_deficient_subset_gives_finite_pseudo_condition_number():
  x = load_dataset("mnist", "train", n=120, seed=1, flatten=True).x[:, 300:360]  # d = 60 < n
  x = np.vstack([x, x[:5]])  # and duplicate images
  out = cubing_check(x)
  assert not out["full_rank"] and out["rank_G"] <= 60
  for key in ("log10_kappa_G", "log10_kappa_Gtilde", "log10_kappa_Gtilde_direct", "threshold_G"):
    assert np.isfinite(out[key]), key


def test_cubing_runner_and_report(tmp_path):
  config = apply_overrides(cubing_config.get_config(), ["datasets=mnist,cifar10", "ns=30,80", "seeds=0"])
  records = cubing.run(config, tmp_path)
  assert len(records) == 4
  text = cubing_report.write_report(tmp_path)
  assert "| mnist | 30 |" in text and (tmp_path / "kappa_vs_n.png").stat().st_size > 0
  assert len(cubing.run(config, tmp_path)) == 4  # resume: nothing recomputed or duplicated


def test_bad_input():
  with pytest.raises(ValueError, match="finite"):
    cubing_check(np.array([[np.nan, 1.0], [0.0, 1.0]]))
  with pytest.raises(ValueError, match="eps"):
    cubing_check(np.eye(3), eps=(-0.1,))
  with pytest.raises(ValueError, match="ns"):
    apply_overrides(cubing_config.get_config(), ["ns=1"])


@pytest.mark.parametrize("eps", [(0.1, "0.01"), (0.0,), (float("nan"),)])
def test_cubing_check_rejects_bad_eps(eps):
  with pytest.raises(ValueError, match="eps values must be finite numbers > 0"):
    cubing_check(np.eye(3, 4), eps=eps)
