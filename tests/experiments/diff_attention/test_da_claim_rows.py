"""The differential-attention claim rows through the claims job (experiments.diff_attention.claims):
the rows, the depth crossover and a variant's label."""

import numpy as np
import pytest
from claim_sources import claim_rows_of, main_row

from experiments.claims import job as claims
from experiments.core import rows as core_rows


def _da_records(depths=(1, 2, 4), asr=None, lam_asr=None):
  """Differential-attention records: PGD attack records at ε = 1/255 and logits Lipschitz values."""
  out = []
  rng = np.random.default_rng(2)
  vit_values = rng.uniform(1, 2, size=40)
  for depth in depths:
    for model, lam in (("vit", "-"), ("diffvit", "0.8")):
      out.append(dict(kind="train", model=model, depth=depth, lambda_init=lam, attack="-", eps=0.0, layer=-1))
      n_success = (asr or {}).get((model, depth), 100)
      out.append(dict(kind="attack", model=model, depth=depth, lambda_init=lam, attack="pgd", eps=1 / 255,
                      eps_255=1.0, layer=-1, n_success=n_success, n_counted=200, asr=n_success / 200))
      values = vit_values + (0.5 if model == "diffvit" else 0.0)
      out.append(dict(kind="lipschitz", model=model, depth=depth, lambda_init=lam, attack="-", eps=1 / 255,
                      eps_255=1.0, layer=-1, values=list(values), mean=float(values.mean())))
  for lam, k in (lam_asr or {}).items():
    out.append(dict(kind="attack", model="diffvit", depth=1, lambda_init=lam, attack="pgd", eps=1 / 255,
                    eps_255=1.0, layer=-1, n_success=k, n_counted=200, asr=k / 200))
  return out

def test_diff_attention_rows(tmp_path):
  asr = {("vit", 4): 150, ("diffvit", 4): 60}
  rows = claim_rows_of(tmp_path, "da", _da_records(asr=asr, lam_asr={"0.5": 80, "0.95": 82}))
  lip = main_row(rows, "da_lipschitz")  # one seed: the seed × image bootstrap is an image bootstrap
  assert lip["estimate"] == pytest.approx(0.5) and lip["n"] == 1 and lip["direction"] == "holds"
  peak = main_row(rows, "lambda_peak")  # ASR(0.8) = 100/200 vs 82/200
  assert peak["estimate"] == pytest.approx((100 - 82) / 200) and peak["low"] < peak["estimate"] < peak["high"]
  cross = main_row(rows, "depth_crossover")
  assert cross["high"] < 0  # DiffViT is far below ViT at depth 4 ...
  assert cross["direction"] == "inconclusive" and "depth 4 < 8" in cross["reason"]  # ... but 8 is not measured

def test_depth_crossover_fails_at_depth_8_when_diffvit_stays_above(tmp_path):
  rows = claim_rows_of(tmp_path, "da", _da_records(depths=(1, 8), asr={("vit", 8): 40, ("diffvit", 8): 160}))
  cross = main_row(rows, "depth_crossover")
  assert cross["low"] > 0 and cross["direction"] == "fails"

def test_rows_of_a_differential_attention_variant_carry_its_label():
  """A CIFAR-10 workdir is a variant of the standard Fashion-MNIST grid: every row it measures carries
  'dataset=cifar10' (beside a row's own variant), and with no standard grid the 'not run' rows remain."""
  src = core_rows.Source("diff_attention", "c10", {"dataset": "cifar10"}, _da_records(depths=(1, 2)), ("dataset=cifar10",))
  rows = claims.build_rows([src], "DIR")
  measured = [r for r in rows if r["status"] == "measured"]
  assert measured and all("dataset=cifar10" in r["variant"] for r in measured)
  assert any("depth=2" in r["variant"] and "dataset=cifar10" in r["variant"] for r in measured)
  assert any(r["status"] == "not run" and r["claim_id"] == "da_asr_pgd" for r in rows)
