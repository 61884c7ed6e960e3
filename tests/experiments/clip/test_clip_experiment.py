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
  """Attack records: CLIP's ASR ``clip_asr`` at every budget and seed (moved where DiffCLIP's would leave [0, 1]),
  DiffCLIP's that + the budget's per-seed offsets, over 200 images both classify correctly (ASR = n_success / 200)."""
  recs = []
  for value, offsets in diff_by_budget.items():
    for s in range(n_seeds):
      base = min(max(clip_asr, -offsets[s]), 1.0 - offsets[s])   # both ASRs in [0, 1], the difference kept
      for model, asr in (("clip", base), ("diffclip", base + offsets[s])):
        k = round(asr * 200)
        recs.append(dict(kind="attack", model=model, seed_index=s, attack=attack, source="zero_shot",
                         eps_255=value if attack == "pgd" else 0.0, size=0 if attack == "pgd" else int(value),
                         n_success=k, n_counted=200, clean_correct=[1] * 200, success=[1] * k + [0] * (200 - k)))
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
    assert r["clean_correct"] == [1, 1, 0, 1, 0, 1]   # per attacked image, in order: the claim rows pair on it
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


def test_a_resumed_run_attacks_again_the_points_recorded_without_their_masks():
  """Records written before the clean-correct masks were stored are not done (their point is attacked again, its
  newer record replacing them in the rows); training records, classifier columns and masked records are done."""
  base = dict(model="clip", seed_index=0, eps=0.0, size=0)
  recs = [dict(base, kind="train", attack="-", source="zero_shot"),
          dict(base, kind="attack", attack="pgd", eps=1 / 255, source="zero_shot"),
          dict(base, kind="attack", attack="pgd", eps=2 / 255, source="zero_shot", clean_correct=[1]),
          dict(base, kind="attack", attack="patch", size=2, source="classifier")]
  done = clip_run.done_keys(recs)
  assert done == {tuple(r[f] for f in clip_run.KEY_FIELDS) for r in (recs[0], recs[2], recs[3])}


def _asr_record(model, seed, correct, success, *, value=2.0, attack="pgd", **extra):
  """An attack record over len(correct) images: ``correct`` 0/1 per image, ``success`` 0/1 per correct image."""
  return {**dict(kind="attack", model=model, seed_index=seed, attack=attack, source="zero_shot",
                 n_success=sum(success), n_counted=sum(correct), asr=-1.0, clean_correct=list(correct),
                 success=list(success), eps_255=value if attack == "pgd" else 0.0,
                 size=int(value) if attack == "patch" else 0), **extra}


def test_paired_asr_counts_only_the_images_both_models_classify_correctly():
  """Catches an ASR over each model's own clean-correct images, success flags not carried back to their images,
  the models swapped, a classifier record or another budget mixed in, or a budget matched exactly instead of
  within rounding. Six images: CLIP classifies 0–3 correctly and turns 0, 2; DiffCLIP classifies 2–5 and turns
  2, 3, 5. Shared: images 2, 3; CLIP turns 1 of them, DiffCLIP 2: 0.5 and 1.0 (on their own images 0.5 and 0.75)."""
  clip = _asr_record("clip", 0, [1, 1, 1, 1, 0, 0], [1, 0, 1, 0])
  diff = _asr_record("diffclip", 0, [0, 0, 1, 1, 1, 1], [1, 1, 0, 1])
  noise = [_asr_record("diffclip", 0, [1] * 6, [0] * 6, source="classifier"),
           _asr_record("diffclip", 0, [1] * 6, [0] * 6, value=4.0),
           _asr_record("clip", 1, [1, 0], [1], value=2.0 + 1e-12), _asr_record("diffclip", 1, [1, 1], [0, 1])]
  paired = clip_claims.paired_differences([clip, diff, *noise], "pgd", 2.0)
  assert paired.seeds == [0, 1] and paired.shared == {0: 2, 1: 1}
  assert (paired.clip[0], paired.diff[0]) == (0.5, 1.0) and (paired.clip[1], paired.diff[1]) == (1.0, 0.0)
  np.testing.assert_array_equal(paired.differences, [0.5, -1.0])
  assert clip_claims.budgets([clip, diff, *noise[:2]], "pgd") == [2.0, 4.0]   # no classifier budget; increasing
  # no image shared: the pair is left out; a record without its mask (older runs) is named, not read
  apart = _asr_record("diffclip", 0, [0, 0, 0, 0, 1, 1], [1, 1])
  assert clip_claims.paired_differences([clip, apart], "pgd", 2.0).seeds == []
  old = {k: v for k, v in diff.items() if k != "clean_correct"}
  unmasked = clip_claims.paired_differences([clip, old], "pgd", 2.0)
  assert unmasked.seeds == [] and unmasked.unmasked == [0]
  # a re-attacked point's newer record (with its mask) replaces the older one
  assert clip_claims.paired_differences([clip, old, diff], "pgd", 2.0).seeds == [0]
  with pytest.raises(ValueError, match="success flags"):
    clip_claims.paired_differences([clip, {**diff, "success": [1]}], "pgd", 2.0)
  with pytest.raises(ValueError, match="attacked 6 images and DiffCLIP 2"):
    clip_claims.paired_differences([clip, _asr_record("diffclip", 0, [1, 1], [0, 0])], "pgd", 2.0)


@pytest.mark.parametrize("field, value, message", [
    ("clean_correct", [2, -1, 0, 1, 1, 1], "clean_correct must be a list of 0/1"),
    ("clean_correct", [0.5, 1, 1, 1, 1, 1], "clean_correct must be a list of 0/1"),
    ("clean_correct", [[1, 1, 1, 1, 0, 0]], "clean_correct must be a list of 0/1"),
    ("success", [1, 2, 0, 1], "success must be a list of 0/1"),
    ("success", ["1", "0", "0", "1"], "success must be a list of 0/1"),
    ("success", [1, 0, 1], "3 success flags for its 4 clean-correct images")])
def test_malformed_masks_and_flags_are_refused_naming_the_field(field, value, message):
  clip = _asr_record("clip", 0, [1, 1, 1, 1, 0, 0], [1, 0, 1, 0])
  diff = _asr_record("diffclip", 0, [0, 0, 1, 1, 1, 1], [1, 1, 0, 1])
  with pytest.raises(ValueError, match=message):
    clip_claims.paired_differences([{**clip, field: value}, diff], "pgd", 2.0)
  bad = [{**r, field: value} if r["model"] == "clip" else r for r in _records({1.0: around(0.2, 0.05)})]
  rows = clip_claims.rows(Source("clip", "/tmp/clip", {}, bad, (), "python -m experiments.clip --workdir /tmp/clip"))
  every = next(r for r in rows if r["claim_id"] == "clip_asr_pgd_every_budget")
  assert every["status"] == "not measured" and field in every["reason"]   # the claims table names the field


def test_pairs_without_masks_are_named_when_the_others_are_read_and_a_masked_record_wins_in_any_order():
  masked = _records({1.0: around(0.2, 0.05)})
  recs = [{k: v for k, v in r.items() if k != "clean_correct"} if r["seed_index"] >= 8 else r for r in masked]
  row = _rows(recs)["clip_asr_pgd_eps1"]
  assert row["n"] == 8 and "seed pairs [8, 9] left out" in row["setting"]
  # an older unmasked record read after the masked one (another file of the workdir) does not replace it
  old = [{**r, "clean_correct": None} for r in masked if r["seed_index"] == 0]
  assert clip_claims.paired_differences(masked + old, "pgd", 1.0).seeds == list(range(10))
  assert clip_run.done_keys(old) == set()   # a null mask is not done either: the point is attacked again


def test_records_without_masks_read_not_measured_with_the_command_that_reattacks_them():
  recs = [{k: v for k, v in r.items() if k != "clean_correct"} for r in _records({1.0: around(0.2, 0.05)})]
  rows = _rows(recs)
  assert rows["clip_asr_pgd_eps1"]["status"] == "not measured"
  assert "clean-correct masks" in rows["clip_asr_pgd_eps1"]["reason"]
  assert "python -m experiments.clip --workdir /tmp/clip" in rows["clip_asr_pgd_eps1"]["reason"]


def test_saturation_starts_at_exactly_the_threshold_on_every_pair():
  """Catches ``>`` for ``>=`` or a ceiling read from one model or one pair: ASRs of 0.99 for both models on every
  pair (exactly ``SATURATION``) saturate; one model at 0.98 on one pair does not."""
  assert clip_claims.SATURATION == 0.99
  clip, diff = {0: 0.99, 1: 1.0}, {0: 0.99, 1: 1.0}
  assert clip_claims.saturated(clip, diff, [0, 1])
  assert not clip_claims.saturated(clip, {**diff, 1: 0.98}, [0, 1])
  assert not clip_claims.saturated({**clip, 0: 0.98}, diff, [0, 1])
  assert clip_claims.saturated({**clip, 0: 0.98}, diff, [1])


def test_the_ceiling_rule_decides_a_saturated_budget_and_the_intersection():
  """Declared before the numbers: a budget where both models turn at least 99 % of the shared images on every
  pair reads *inconclusive* even when DiffCLIP's tiny excess is positive on every pair (its interval lies above
  0), and the every-budget row then cannot hold; a budget below the ceiling that fails still fails it."""
  high = _records({8.0: (0.005,) * 10}, clip_asr=0.99)   # DiffCLIP 0.995 vs 0.99 on every pair
  rows = _rows(_records({1.0: around(0.2, 0.05)}) + high)
  eight = rows["clip_asr_pgd_eps8"]
  assert eight["low"] > 0 and eight["direction"] == "inconclusive" and "ceiling rule" in eight["reason"]
  every = rows["clip_asr_pgd_every_budget"]
  assert every["direction"] == "inconclusive" and "ceiling rule" in every["reason"]
  below = _rows(_records({1.0: around(-0.2, 0.05)}) + high)["clip_asr_pgd_every_budget"]
  assert below["direction"] == "fails" and "ε = 1/255" in below["reason"]
  # just under the ceiling (0.985 for CLIP on one pair) the same excess is read as a difference
  under = _records({8.0: (0.005,) * 10}, clip_asr=0.99)
  under[0] = dict(under[0], n_success=197, success=[1] * 197 + [0] * 3)
  assert _rows(_records({1.0: around(0.2, 0.05)}) + under)["clip_asr_pgd_eps8"]["reason"].find("ceiling") < 0
