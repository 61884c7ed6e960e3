"""The sharpness claim rows (experiments.landscape.claims) from synthetic records: each verdict's statistic
and when it holds."""
import math

import numpy as np
import pytest
import scipy.stats
from claim_sources import claim_rows_of


def test_sharpness_ratio_is_the_geometric_mean_and_holds_when_relu_is_sharper(tmp_path):
  rng = np.random.default_rng(0)
  factors = np.exp(rng.normal(np.log(10), 0.1, size=10))
  records = []
  for seed, f in enumerate(factors):
    for model, lam in (("relu", 0.05 * f), ("mlp_attn", 0.05)):
      records.append(dict(task="mnist", model=model, width=1024, seed=seed, top_eigenvalues=[lam, lam / 2],
                          adaptive_sharpness=[1.0, 0.5], train_loss=0.04, converged=True,
                          landscape_1d=[0.0], alphas=[0.0]))
  rows = claim_rows_of(tmp_path, "ls", records, claim_id="sharpness")
  main, adaptive = rows
  assert main["estimate"] == pytest.approx(math.exp(np.mean(np.log(factors))))
  # Student's t on the log scale: exp(mean ∓ t_{0.975, 9}·sd/√10) of the log ratios
  logs = np.log(factors)
  half = scipy.stats.t.ppf(0.975, 9) * logs.std(ddof=1) / math.sqrt(10)
  assert (main["low"], main["high"]) == pytest.approx((math.exp(logs.mean() - half), math.exp(logs.mean() + half)),
                                                      rel=1e-9)
  assert main["n"] == 10 and main["method"] == "student_t_log"
  assert main["direction"] == "holds" and main["magnitude"] is None
  assert "adaptive" in adaptive["variant"] and adaptive["estimate"] == pytest.approx(1.0)
  assert adaptive["direction"] == "inconclusive"
