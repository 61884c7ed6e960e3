"""experiments.clip: the run end to end on a tiny config (records, resume, plots), the patch positions shared by
the models of a pair, the config's errors, and the claim rows: per budget at the family level, and the
every-budget intersection that holds only when every budget holds and fails when one budget fails at the
family level."""
import math

import jax
import numpy as np
import pytest

from attention.clip import WordTokenizer, prompt_table
from experiments.clip import claims as clip_claims
from experiments.clip import config as clip_config
from experiments.clip import report as clip_report
from experiments.clip import run as clip_run
from experiments.core.claim import around
from experiments.core.config import apply_overrides
from experiments.first_try import SETTINGS
from experiments.core.rows import Source
from experiments.core.verdicts import family_level

TINY = list(SETTINGS["clip"])  # the first-try setting (experiments.first_try), run here


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("clip")
  config = apply_overrides(clip_config.get_config(), TINY)
  records = clip_run.run(config, workdir)
  return config, workdir, records


@pytest.mark.long
@pytest.mark.slow  # trains and attacks two tiny models: about 10 compilations (30 s idle, 100 s on busy cores)
def test_a_tiny_run_trains_both_models_attacks_them_resumes_and_reports(finished_run):
  config, workdir, records = finished_run
  trains = {r["model"]: r for r in records if r["kind"] == "train"}
  assert set(trains) == {"clip", "diffclip"}
  # parameter-matched: DiffCLIP adds only each differential layer's λ vectors (4 · head width) and RMSNorm gain
  assert 0 < trains["diffclip"]["parameters"] - trains["clip"]["parameters"] <= 2 * 6 * 16  # two towers' λ and gains
  attacked = {(r["model"], r["attack"], r["size"]) for r in records if r["kind"] == "attack"}
  assert attacked == {(m, a, s) for m in ("clip", "diffclip") for a, s in (("pgd", 0), ("patch", 4), ("patch", 8))}
  for r in records:
    if r["kind"] == "attack":
      assert 0 <= r["n_success"] <= r["n_counted"] and len(r["success"]) == r["n_counted"]
      assert r["n_counted"] == round(r["clean_accuracy"] * r["n_attacked_pool"])
  assert clip_run.run(config, workdir) == records  # resumed: nothing new
  text = clip_report.write_report(workdir)
  assert (workdir / "asr_vs_eps.png").exists() and (workdir / "asr_vs_patch.png").exists()
  assert "standing in for the paper's pretrained CLIP / DiffCLIP" in text


def test_patch_positions_depend_on_the_image_index_only_and_stay_inside():
  key = jax.random.key(3)
  a = clip_run.patch_positions(key, 50, 8, 32, 32)
  assert np.array_equal(a, clip_run.patch_positions(key, 50, 8, 32, 32))
  assert a.min() >= 0 and a.max() <= 32 - 8 and len({tuple(p) for p in a}) > 10


@pytest.mark.parametrize("override, field", [("seeds=0", "seeds"), ("eps_255=2,1", "eps_255"),
                                             ("patch_sizes=0", "patch_sizes"), ("patch_sizes=40", "patch_sizes"),
                                             ("templates=a photo", "templates"), ("lambda_init=1.2", "lambda_init"),
                                             ("patch_alpha=0", "patch_alpha"), ("max_length=3", "max_length"),
                                             ("data.n_test=0", "data.n_test")])
def test_bad_configs_are_refused_naming_the_field(override, field):
  with pytest.raises(ValueError, match=field.split(".")[-1] if field != "max_length" else "max_length"):
    apply_overrides(clip_config.get_config(), [override]).validate()


def test_prompt_table_pads_each_class_and_template():
  tok = WordTokenizer.from_texts(["a photo of a cat.", "a photo of a dog."])
  table = prompt_table(tok, ["cat", "dog"], ["a photo of a {}."], 7)
  assert np.asarray(table).shape == (2, 1, 7)
  assert table[0][0][:6] != table[1][0][:6] and table[0][0][6] == 0


def _records(diff_by_budget: dict, n_seeds: int = 10, attack: str = "pgd", clip_asr: float = 0.5) -> list[dict]:
  """Attack records: CLIP's ASR ``clip_asr`` at every budget and seed, DiffCLIP's that + the budget's per-seed
  offsets, over 200 counted images (ASR = n_success / 200)."""
  recs = []
  for value, offsets in diff_by_budget.items():
    for s in range(n_seeds):
      for model, asr in (("clip", clip_asr), ("diffclip", clip_asr + offsets[s])):
        recs.append(dict(kind="attack", model=model, seed_index=s, attack=attack, source="zero_shot",
                         eps_255=value if attack == "pgd" else 0.0, size=0 if attack == "pgd" else int(value),
                         n_success=round(asr * 200), n_counted=200))
  return recs


def _rows(records, attack="pgd"):
  src = Source("clip", "/tmp/clip", {}, records, (), "python -m experiments.clip --workdir /tmp/clip")
  return {r["claim_id"]: r for r in clip_claims.attack_rows(src, attack)}


def test_per_budget_rows_are_read_at_the_family_level():
  rows = _rows(_records({1.0: around(0.1, 0.05), 2.0: around(0.1, 0.05), 4.0: around(0.0, 0.4),
                         8.0: around(-0.1, 0.05)}))
  assert rows["clip_asr_pgd_eps1"]["direction"] == "holds" and rows["clip_asr_pgd_eps8"]["direction"] == "fails"
  assert rows["clip_asr_pgd_eps4"]["direction"] == "inconclusive"
  assert all(rows[f"clip_asr_pgd_eps{e}"]["level"] == pytest.approx(family_level(4)) for e in (1, 2, 4, 8))
  assert rows["clip_asr_pgd_eps1"]["estimate"] == pytest.approx(0.1, abs=0.003)
  assert "standing in for the paper's pretrained" in rows["clip_asr_pgd_eps1"]["setting"]


def test_every_budget_holds_only_when_every_budget_holds():
  holds = _rows(_records({1.0: around(0.1, 0.05), 2.0: around(0.2, 0.05)}))["clip_asr_pgd_every_budget"]
  assert holds["direction"] == "holds" and holds["level"] == 0.95  # intersection–union: no correction
  assert "ε = 1/255" in holds["reason"]  # the lowest interval decided
  one_open = _rows(_records({1.0: around(0.1, 0.05), 2.0: around(0.0, 0.4)}))["clip_asr_pgd_every_budget"]
  assert one_open["direction"] == "inconclusive" and "ε = 2/255" in one_open["reason"]


def test_every_budget_fails_when_one_budget_fails_at_the_family_level():
  rows = _rows(_records({1.0: around(0.2, 0.05), 2.0: around(-0.2, 0.05), 4.0: around(0.2, 0.05)}, attack="patch"),
               attack="patch")
  every = rows["clip_asr_patch_every_size"]
  assert every["direction"] == "fails" and every["level"] == pytest.approx(family_level(3))
  assert "patch of side 2 px" in every["reason"]


def test_a_budget_below_zero_at_95_percent_only_is_no_failure_of_the_intersection():
  # per-seed differences whose 95 % sign-flip interval lies below 0 but whose Bonferroni (m = 4) one does not
  d = np.asarray(around(-0.015, 0.02))
  row = clip_claims.every_budget_row([d, d + 0.3, d + 0.3, d + 0.3], ["b0", "b1", "b2", "b3"], claim_id="x",
                                     claim="x", source="x", paper_value="x")
  from experiments.core.rows import paired_interval
  assert paired_interval(d, 0 * d).high < 0 < paired_interval(d, 0 * d, level=family_level(4)).high
  assert row["direction"] == "inconclusive" and "family level" in row["reason"]


def test_no_pairs_give_not_measured_rows_and_no_workdir_gives_not_run():
  rows = _rows([])
  assert rows["clip_asr_pgd_every_budget"]["status"] == "not measured"
  not_run = clip_claims.claim_rows([], "DIR", include_not_run=True)
  assert {r["claim_id"] for r in not_run} == {cid for cid, _ in clip_claims.CLIP_CLAIMS}
  assert all(r["status"] == "not run" and "--standard" in r["command"] for r in not_run)
  assert math.isfinite(family_level(3))


def test_a_saturated_budget_is_named_a_ceiling_in_its_row_and_the_intersection():
  rows = _rows(_records({1.0: around(0.1, 0.05)}) + _records({8.0: (0.0,) * 10}, clip_asr=1.0))
  assert "saturates" not in rows["clip_asr_pgd_eps1"]["note"]
  assert "ε = 8/255 both models' ASR is at least 0.99" in rows["clip_asr_pgd_eps8"]["note"]
  every = rows["clip_asr_pgd_every_budget"]
  assert every["direction"] == "inconclusive" and "ceiling" in every["note"]


def test_every_budget_needs_every_budget_and_reads_only_the_pairs_they_share():
  # a run killed before ε = 8/255 was attacked: 'every budget' cannot hold from ε = 1/255 alone
  rows = _rows(_records({1.0: around(0.2, 0.05)}) + [r for r in _records({8.0: around(0.2, 0.05)})
                                                      if r["model"] == "clip"])
  assert rows["clip_asr_pgd_eps8"]["status"] == "not measured"
  assert rows["clip_asr_pgd_every_budget"]["status"] == "not measured"
  assert "ε = 8/255" in rows["clip_asr_pgd_every_budget"]["reason"]
  # ε = 2/255 on seeds 5–9 only: the intersection reads those five pairs at both budgets, not seeds 0–4 at one
  late = [r for r in _records({2.0: around(0.2, 0.05)}) if r["seed_index"] >= 5]
  every = _rows(_records({1.0: around(0.2, 0.05)}) + late)["clip_asr_pgd_every_budget"]
  assert every["n"] == 5 and "the 5 seed pairs attacked at every budget" in every["setting"]


def _class_in_pixel(x):
  """Zero-shot logits of a stand-in model: the predicted class is the value of pixel (0, 0), channel 0."""
  return jax.nn.one_hot(x[:, 0, 0, 0].astype(np.int32), 3)


def test_attack_records_count_the_clean_correct_images_only(monkeypatch):
  """Catches an ASR over every attacked image instead of the clean-correct ones, a clean accuracy or count over
  the wrong set, a patch position not carried with its image, or a PGD step not scaled by ε: six images of which
  images 0, 1, 3, 5 are predicted correctly; the (stand-in) attack succeeds where channel 1 of pixel (0, 0) is
  set, on images 0, 2, 3, 4, so 2 of the 4 counted images (ASR 0.5, flags 1, 0, 1, 0 in image order), although
  4 of all 6 would be; an image marked done is skipped; with no clean-correct image the ASR is NaN of 0 counted."""
  import types
  pred, y = np.array([0, 1, 2, 1, 0, 2]), np.array([0, 1, 1, 1, 2, 2])
  correct = pred == y
  x = np.zeros((6, 4, 4, 3), np.float32)
  x[:, 0, 0, 0] = pred
  x[:, 0, 0, 1] = [1, 0, 1, 1, 1, 0]      # where the attack succeeds
  x[:, 0, 0, 2] = [0, 1, 0, 0, 0, 1]      # where its gradient vanished
  calls = []

  def fake_attack(attack, fn, xc, yc, batch_size, *, per_sample=None, **kwargs):
    calls.append(dict(xc=np.asarray(xc), yc=np.asarray(yc), per_sample=per_sample, **kwargs))
    return xc[:, 0, 0, 1] > 0.5, xc[:, 0, 0, 2] > 0.5, xc
  monkeypatch.setattr(clip_run, "batched_attack", fake_attack)
  config = types.SimpleNamespace(eps_255=(2.0, 4.0, 8.0), patch_sizes=(2,), pgd_step_ratio=0.25, pgd_steps=7,
                                 patch_alpha=0.1, patch_steps=5, attack_batch_size=4)
  key = jax.random.key(0)
  is_done = lambda model, seed, **f: f["attack"] == "pgd" and f["eps"] == 4.0 / 255  # noqa: E731
  fn = jax.tree_util.Partial(_class_in_pixel)
  recs = list(clip_run.attack_records(config, fn, "clip", 3, x, y, key, is_done))
  assert [(r["attack"], r["eps_255"], r["size"]) for r in recs] == [("pgd", 2.0, 0), ("pgd", 8.0, 0), ("patch", 0.0, 2)]
  for r, call in zip(recs, calls):
    assert (r["n_counted"], r["n_success"], r["asr"], r["success"]) == (4, 2, 0.5, [1, 0, 1, 0])
    assert (r["n_zero_grad"], r["n_attacked_pool"], r["clean_accuracy"]) == (2, 6, pytest.approx(4 / 6))
    assert (r["kind"], r["model"], r["seed_index"], r["convention"]) == ("attack", "clip", 3, "clean_correct")
    np.testing.assert_array_equal(call["xc"], x[correct])
    np.testing.assert_array_equal(call["yc"], y[correct])
  assert calls[0]["eps"] == pytest.approx(2 / 255) and calls[0]["alpha"] == pytest.approx(0.25 * 2 / 255)
  assert calls[1]["alpha"] == pytest.approx(0.25 * 8 / 255) and calls[1]["steps"] == 7
  positions = clip_run.patch_positions(jax.random.fold_in(key, 3), 6, 2, 4, 4)   # point 3: after three PGD budgets
  np.testing.assert_array_equal(calls[2]["per_sample"]["position"], positions[correct])
  assert (calls[2]["size"], calls[2]["alpha"], calls[2]["steps"]) == (2, 0.1, 5)
  none = list(clip_run.attack_records(config, fn, "clip", 0, x, np.full(6, 9), key, lambda *a, **f: False))
  assert len(none) == 4 and all(r["n_counted"] == 0 and math.isnan(r["asr"]) and r["success"] == [] for r in none)
  assert len(calls) == 3


def _asr_record(model, seed, n_success, n_counted, *, value=2.0, attack="pgd", **extra):
  return {**dict(kind="attack", model=model, seed_index=seed, attack=attack, source="zero_shot", n_success=n_success,
                 n_counted=n_counted, asr=-1.0, eps_255=value if attack == "pgd" else 0.0,
                 size=int(value) if attack == "patch" else 0), **extra}


def test_per_seed_asr_is_successes_over_counted_images_of_zero_shot_records_at_the_budget():
  """Catches an ASR read from another field or over another count, a seed with no counted image kept (0/0), the
  classifier columns mixed in, or a budget matched exactly instead of within rounding: seed 0 has 3 of 4, seed 1
  no counted image, seed 2 a classifier record, seed 3 its ε recorded as 2 + 1e-12, seed 4 no source field; the
  budgets are the zero-shot ones, increasing."""
  recs = [_asr_record("clip", 0, 3, 4), _asr_record("clip", 1, 0, 0), _asr_record("clip", 2, 1, 2, source="classifier"),
          _asr_record("clip", 3, 1, 5, value=2.0 + 1e-12), _asr_record("diffclip", 0, 4, 4),
          _asr_record("clip", 0, 1, 1, attack="patch", value=2.0),
          {k: v for k, v in _asr_record("clip", 4, 2, 8).items() if k != "source"}]
  assert clip_claims.per_seed_asr(recs, "clip", "pgd", 2.0) == {0: 0.75, 3: 0.2, 4: 0.25}
  assert clip_claims.per_seed_asr(recs, "clip", "patch", 2.0) == {0: 1.0}
  extra = [_asr_record("clip", 0, 1, 1, value=8.0, source="classifier"), _asr_record("clip", 0, 1, 1, value=1.0)]
  assert clip_claims.budgets([r for r in recs if r["seed_index"] != 3] + extra, "pgd") == [1.0, 2.0]


def test_saturation_starts_at_exactly_the_threshold_on_every_pair():
  """Catches ``>`` for ``>=`` or a ceiling read from one model or one pair: ASRs of 99/100 for both models on every
  pair (exactly ``SATURATION``) saturate; one model at 98/100 on one pair does not."""
  assert clip_claims.SATURATION == 0.99
  recs = [_asr_record(m, s, 99 if s == 0 else 100, 100) for m in ("clip", "diffclip") for s in (0, 1)]
  clip, diff = (clip_claims.per_seed_asr(recs, m, "pgd", 2.0) for m in ("clip", "diffclip"))
  assert clip[0] == diff[0] == 0.99 and clip_claims.saturated(clip, diff, [0, 1])
  assert not clip_claims.saturated(clip, {**diff, 1: 0.98}, [0, 1])
  assert not clip_claims.saturated({**clip, 0: 0.98}, diff, [0, 1])
  assert clip_claims.saturated({**clip, 0: 0.98}, diff, [1])
