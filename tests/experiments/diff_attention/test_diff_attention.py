"""The differential-attention experiment end to end on a tiny MNIST config (records, plots, summary,
resume), its config errors, the depth-crossover estimate, and the local Lipschitz estimator."""
import json
import math
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention.local_lipschitz import input_jacobian_norm, local_lipschitz
from experiments.core.config import apply_overrides
from experiments.first_try import SETTINGS
from experiments.diff_attention import config as diff_attention_config
from experiments.diff_attention import report as diff_attention_report
from experiments.diff_attention import run as diff_attention

TINY = list(SETTINGS["diff_attention"])  # the first-try setting (experiments.first_try), run here  # CW (compiled per model) is left to tests/test_attacks*.py and the real run


@pytest.fixture(scope="module")
def tiny_config():
  return apply_overrides(diff_attention_config.get_config(), TINY)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, tiny_config):
  workdir = tmp_path_factory.mktemp("diffattn")
  records = diff_attention.run(tiny_config, workdir)
  diff_attention_report.write_report(workdir)
  return workdir, records


def _key(r):
  return tuple(r[f] for f in diff_attention.KEY_FIELDS)


@pytest.mark.long
@pytest.mark.slow  # the shared fixture trains and analyses two tiny models (~40 s of CPU)
def test_records_plots_and_summary(finished_run):
  workdir, records = finished_run
  kinds = [(r["kind"], r["attack"]) for r in records]
  assert kinds.count(("train", "-")) == 2
  assert kinds.count(("attack", "pgd")) == kinds.count(("attack", "apgd")) == 2 * 2  # models × ε
  assert kinds.count(("lipschitz", "-")) == 2 * (2 + 1)  # models × (ε + layers)
  assert kinds.count(("alignment", "-")) == 1  # one DiffViT layer
  assert not any(a == "cw_l2" for _, a in kinds)
  assert len({_key(r) for r in records}) == len(records)
  for r in records:
    assert r["versions"]["jax"] and "wall_time_s" in r
    if r["kind"] == "attack":
      assert 0 <= r["n_success"] <= r["n_counted"] and r["convention"] == "clean_correct"
  params = {r["model"]: r["parameters"] for r in records if r["kind"] == "train"}
  assert params["diffvit"] - params["vit"] == 6 * 8  # one layer, head width 8
  (align,) = [r for r in records if r["kind"] == "alignment"]
  assert align["lemma1_max_relative_error"] < 1e-6
  assert align["theorem3_matches_map_norms"] == 1.0
  assert np.all(np.abs(np.asarray(align["cos_theta"])) <= 1 + 1e-9)
  assert json.loads((workdir / "config.json").read_text())["depths"] == [1]
  assert len(align["lipschitz_diffvit"]) == 2 and align["diffvit_more_sensitive"] == \
      [a > b for a, b in zip(align["lipschitz_diffvit"], align["lipschitz_vit"])]
  for name in ("asr_vs_eps.png", "depth_crossover.png", "alignment.png", "lipschitz.png", "summary.md"):
    assert (workdir / name).is_file(), name
  summary = (workdir / "summary.md").read_text()
  assert "Lemma 1" in summary and "0.8498" in summary and "CLIP" in summary


@pytest.mark.long
@pytest.mark.slow
def test_resume_after_interruption_recomputes_only_missing_points(tmp_path, tiny_config, finished_run):
  workdir, records = finished_run
  shutil.copytree(workdir, tmp_path / "run")
  lines = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
  # Killed during the last points: 3 records lost and a half-written line.
  (tmp_path / "run" / "results.jsonl").write_text("\n".join(lines[:-4]) + "\n" + lines[-4][: len(lines[-4]) // 2])
  resumed = diff_attention.run(tiny_config, tmp_path / "run")
  assert len(resumed) == len(records)
  assert len({_key(r) for r in resumed}) == len(resumed)
  ref = {_key(r): r for r in records}
  for r in resumed[-4:]:
    old = ref[_key(r)]
    for field in ("asr", "mean", "cos_theta_mean", "clean_accuracy"):
      if field in r:
        assert r[field] == pytest.approx(old[field], rel=1e-5), field
  assert len(diff_attention.run(tiny_config, tmp_path / "run")) == len(records)  # nothing left to do


@pytest.mark.long
@pytest.mark.slow
def test_resume_with_another_config_is_refused(finished_run, tiny_config):
  workdir, _ = finished_run
  with pytest.raises(ValueError, match="different config"):
    diff_attention.run(apply_overrides(tiny_config, ["pgd_steps=3"]), workdir)


@pytest.mark.parametrize("override, match", [
    ("lambda_inits=1.5", "lambda_init"),
    ("lambda_inits=abc", "lambda_init"),
    ("eps_255=-1,2", "eps_255"),
    ("eps_255=4,2", "increasing"),
    ("crossover_eps_255=3,8", "crossover_eps_255"),
    ("models=vit", "models"),
    ("depths=0", "depths"),
    ("alignment_samples=0", "alignment_samples"),
    ("alignment_samples=5", "alignment_samples"),
    ("lipschitz_layer_eps_255=3", "lipschitz_layer_eps_255"),
    ("dataset=imagenet", "dataset"),
    ("num_heads=3", "divisible|even"),
])
def test_bad_config_values_raise(tiny_config, override, match):
  with pytest.raises(ValueError, match=match):
    apply_overrides(tiny_config, [override])


def test_full_config_validates():
  diff_attention_config.get_config(full=True).validate()


def test_crossover_depth():
  assert diff_attention_report.crossover_depth([1, 2, 4, 8], [0.5] * 4, [0.9, 0.7, 0.6, 0.4]) == \
      pytest.approx(2 ** 2.5)
  assert diff_attention_report.crossover_depth([1, 2, 4], [0.5] * 3, [0.9, 0.7, 0.6]) is None
  assert diff_attention_report.crossover_depth([1, 2, 4], [0.5] * 3, [0.9, 0.5, 0.4]) == 2.0


def test_sanity_checks_report_violations():
  rec = lambda attack, eps, asr: dict(kind="attack", name="m", attack=attack, eps=eps, asr=asr)  # noqa: E731
  ok = [rec("pgd", 1 / 255, 0.2), rec("pgd", 2 / 255, 0.4), rec("apgd", 1 / 255, 0.3), rec("apgd", 2 / 255, 0.4)]
  assert diff_attention_report.sanity_checks(ok) == []
  bad = diff_attention_report.sanity_checks(ok[:2] + [rec("apgd", 1 / 255, 0.1), rec("apgd", 2 / 255, 0.05)])
  assert any("APGD" in b for b in bad) and any("falls" in b for b in bad)


# Local Lipschitz estimate ---------------------------------------------------------------------------


def _linear(w):
  return lambda x: x.reshape(x.shape[0], -1) @ w


def test_local_lipschitz_of_a_linear_map_is_sound_and_nearly_attained():
  """f(x) = xW: ‖f(x) − f(x')‖₁/‖x − x'‖∞ ≤ ‖W‖_{∞→1} ≤ Σ|W| (equality for one output), never above."""
  w = np.asarray(jax.random.normal(jax.random.key(0), (12, 1)))
  x = jnp.full((4, 3, 4), 0.5)
  values = np.asarray(local_lipschitz(_linear(jnp.asarray(w)), x, eps=0.01, key=jax.random.key(1)))
  bound = np.abs(w).sum()
  assert np.all(values <= bound * (1 + 1e-5))
  assert np.all(values >= 0.8 * bound)


def test_local_lipschitz_is_per_sample_and_checks_arguments():
  w = jax.random.normal(jax.random.key(0), (12, 3))
  x = jax.random.uniform(jax.random.key(2), (5, 12))
  full = np.asarray(local_lipschitz(_linear(w), x, eps=0.02, key=jax.random.key(3)))
  first = np.asarray(local_lipschitz(_linear(w), x[:2], eps=0.02, key=jax.random.key(3)))
  # A batch of 2 sums in another order than a batch of 5. The estimate is ‖f(x + δ) − f(x)‖/‖δ‖ with
  # ‖δ‖ ≤ ε: float32 rounding of f(x) (relative u = eps/2) is amplified by the cancellation ‖x‖/ε, so two
  # runs agree to about 4·eps·‖x‖/ε (here ≈ 8e-5), not to 1e-6. A sample mixed with another is off by O(1).
  cancellation = float(np.linalg.norm(np.asarray(x), axis=1).max()) / 0.02
  np.testing.assert_allclose(first, full[:2], rtol=4 * np.finfo(np.float32).eps * cancellation)
  jac = np.asarray(input_jacobian_norm(_linear(w), x))
  np.testing.assert_allclose(jac, np.full(5, np.linalg.norm(np.asarray(w))), rtol=1e-5)
  with pytest.raises(ValueError, match="eps"):
    local_lipschitz(_linear(w), x, eps=0.0, key=jax.random.key(0))
  with pytest.raises(ValueError, match="bounds"):
    local_lipschitz(_linear(w), x + 2.0, eps=0.1, key=jax.random.key(0))
  with pytest.raises(ValueError, match="steps"):
    local_lipschitz(_linear(w), x, eps=0.1, key=jax.random.key(0), steps=-1)
  for bad, match in ((dict(eps="0.1"), "eps must be a finite real"), (dict(step_size=math.nan), "step_size"),
                     (dict(init_std=math.inf), "init_std"), (dict(key=None), "key must be one PRNG key"),
                     (dict(key=0), "key must be one PRNG key"), (dict(bounds=(0.0, math.nan)), "bounds")):
    with pytest.raises(ValueError, match=match):
      local_lipschitz(_linear(w), x, **{"eps": 0.1, "key": jax.random.key(0), **bad})
  assert math.isfinite(float(np.asarray(full).mean()))
