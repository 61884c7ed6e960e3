"""experiments.certify.compare: LoFAST, CROWN and CROWN + LoFAST on the same test images of a finished certify
run. Its LoFAST flags are the run's own rigorous flags; no image any method certifies was broken by the run's
PGD-L2 (so a CROWN that certified a broken image fails here); it resumes per chunk; its report's paired
differences are Tango's score intervals of the flags; bad input is refused before anything is written."""

import numpy as np
import pytest

from experiments.certify import compare, compare_report
from experiments.certify import config as certify_config
from experiments.certify import run as certify
from experiments.certify.claims import paired_binary_difference
from experiments.core import config as config_lib

DATASET = "mnist"
EPSILONS = (0.01, 0.05)
CONFIG = certify_config.CertifyConfig(
    datasets=(DATASET,), attention_bounds=(1.0,), epsilons=EPSILONS,
    data=config_lib.DataConfig(n_train=512, n_test=8, source="embedded", dir=None, seed=0, holdout=None,
                               preprocessing="raw"),
    validation_fraction=0.0, dim=8, depth=1, num_heads=1, sll_hidden=8, value_bound=1.0, noise_std=0.0,
    train=config_lib.ClassifierTrainConfig(epochs=4, batch_size=16, learning_rate=1e-2, l2=0.0, warmup_epochs=0,
                                           seed=0, augment="none", max_to_keep=1),
    power_iters=5, chunk=8, pgd=config_lib.AttackBudget(steps=5, restarts=1), tightness_samples=0,
    layer_pgd=config_lib.AttackBudget(steps=1, restarts=1))
COMPARE = compare.CompareConfig(n_images=6, chunk=3, epsilons=EPSILONS, methods=("lofast", "crown", "crown_lofast"),
                                dataset=DATASET)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
  path = tmp_path_factory.mktemp("certify_compare")
  certify.run(CONFIG, path)
  return path


@pytest.mark.long
def test_compare_is_sound_agrees_with_the_run_and_resumes(workdir):
  records = compare.run(COMPARE, workdir)
  assert len(records) == len(EPSILONS) * 3 * 2          # ε × method × chunk
  run_records = [r for r in certify.Workdir(workdir, certify.KEY_FIELDS).records() if r["kind"] == "certify"]
  for eps in EPSILONS:
    (rec,) = [r for r in run_records if r["eps"] == eps]
    lofast = [v for r in sorted(records, key=lambda r: r["start"]) if r["eps"] == eps and r["method"] == "lofast"
              for v in r["certified_images"]]
    assert lofast == rec["certified_rigorous_images"][:6]     # the run's own rigorous flags
    for r in records:
      certified = np.asarray(r["certified_images"], bool)
      robust = np.asarray(rec["pgd_robust_images"], bool)[r["start"]:r["stop"]] if r["eps"] == eps else None
      if robust is not None:
        assert not np.any(certified & ~robust), (r["method"], eps)
        assert r["pgd_violations"] == 0
  assert any(r["certified_images"] and sum(r["certified_images"]) for r in records if r["method"] != "lofast")
  for r in records:   # every sound bound lies at or below the margin PGD-L2 reached, class by class
    assert r["margin_violations"] == 0, (r["method"], r["eps"])
    assert np.asarray(r["pgd_margins"]).shape == np.asarray(r["margin_lower_per_class"]).shape == (3, 9)
  by = {(r["eps"], r["start"], r["method"]): r for r in records}
  for (eps, start, method), r in by.items():   # LoFAST inside CROWN: never below CROWN alone, image by image
    if method == "crown_lofast":
      assert r["composition"] == compare.COMPOSITION
      assert np.all(np.asarray(r["margin_lower"]) >= np.asarray(by[(eps, start, "crown")]["margin_lower"]))
  assert compare.run(COMPARE, workdir) == records            # resumed: nothing recomputed
  import dataclasses
  grown = compare.run(dataclasses.replace(COMPARE, methods=("crown_ibp",)), workdir)   # another method: only it runs
  assert grown[:len(records)] == records and {r["method"] for r in grown[len(records):]} == {"crown_ibp"}
  assert len(grown) == len(records) + len(EPSILONS) * 2
  records = [r for r in grown if r["method"] != "crown_ibp"]
  text = compare_report.write_report(workdir)
  comp = compare_report.comparison(records)
  ci = paired_binary_difference(comp[0.01]["crown_lofast"].certified, comp[0.01]["crown"].certified)
  assert f"{100 * ci.estimate:+.1f} points [{100 * ci.low:+.1f}, {100 * ci.high:+.1f}]" in text
  assert (workdir / "crown" / "certified_methods.png").stat().st_size > 0


@pytest.mark.long
@pytest.mark.parametrize("override, message", [
    (dict(epsilons=(0.02,)), "not radii of the certification run"),
    (dict(n_images=9), "n_images must be ≤ the run's 8 test images"),
    (dict(dataset="cifar10"), "dataset must be one of the run's data sets"),
])
def test_compare_refuses_what_the_run_does_not_hold(workdir, override, message, tmp_path):
  import dataclasses
  with pytest.raises(ValueError, match=message):
    compare.run(dataclasses.replace(COMPARE, **override), workdir)


@pytest.mark.parametrize("field, value", [("n_images", 0), ("chunk", 0), ("epsilons", (-0.1,)),
                                          ("methods", ("alpha_beta_crown",))])
def test_compare_config_names_the_bad_field(field, value):
  import dataclasses
  with pytest.raises(ValueError, match=field):
    dataclasses.replace(COMPARE, **{field: value}).validate()


def test_comparison_uses_the_images_every_method_finished():
  def rec(method, start, stop, flags, first=False):
    return dict(eps=0.05, method=method, start=start, stop=stop, attention_bound=1.0, certified_images=flags,
                pgd_violations=0, seconds=float(stop - start), compiled_first=first)
  records = [rec("crown", 0, 2, [1, 0], True), rec("crown", 2, 4, [1, 1]),
             rec("lofast", 0, 2, [0, 0], True), rec("lofast", 4, 6, [1, 1])]   # a gap: lofast stops at 2
  comp = compare_report.comparison(records)[0.05]
  assert comp["crown"].certified.tolist() == [1, 0] and comp["lofast"].certified.tolist() == [0, 0]
  assert comp["crown"].seconds_per_image == 1.0          # the compiling chunk left out
  assert np.isnan(comp["lofast"].seconds_per_image)      # only its compiling chunk is contiguous
  grown = [rec("crown", 0, 2, [1, 0], True), rec("crown", 2, 3, [1]), rec("crown", 2, 4, [0, 1])]  # n 3 → 4
  assert compare_report.comparison(grown)[0.05]["crown"].certified.tolist() == [1, 0, 0, 1]


@pytest.mark.long
def test_compare_refuses_chunks_of_the_earlier_crown_lofast_composition(workdir, tmp_path):
  """A comparison workdir holding CROWN + LoFAST chunks without ``composition`` (the earlier composition, looser
  than CROWN) is refused, naming the way out, instead of mixing them with new chunks."""
  import json
  import shutil
  copy = tmp_path / "copy"
  shutil.copytree(workdir, copy)
  compare.run(COMPARE, copy)
  path = copy / compare.SUBDIR / "results.jsonl"
  lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
  for r in lines:
    r.pop("composition", None)
  path.write_text("".join(json.dumps(r) + "\n" for r in lines))
  with pytest.raises(ValueError, match="earlier composition.*--overwrite_config"):
    compare.run(COMPARE, copy)


@pytest.mark.long
def test_an_unsound_relaxation_is_caught_by_the_per_class_pgd_margins(workdir, tmp_path, monkeypatch):
  """A deliberately tightened (unsound) ReLU relaxation (its lines moved towards each other past the function)
  makes CROWN's bounds exceed margins that PGD-L2 reaches: the comparison counts them as margin violations."""
  import dataclasses
  import shutil
  import jax
  from attention import crown_relaxations
  copy = tmp_path / "copy"
  shutil.copytree(workdir, copy)
  shutil.rmtree(copy / compare.SUBDIR, ignore_errors=True)   # the certification run alone: every chunk is new
  sound = crown_relaxations.relu_lines

  def tightened(l, u):   # both lines lifted / lowered by 0.5: a "tighter" box around ReLU that excludes it
    lines = sound(l, u)
    return lines._replace(b_lower=lines.b_lower + 0.5, b_upper=lines.b_upper - 0.5)
  monkeypatch.setattr(crown_relaxations, "relu_lines", tightened)
  jax.clear_caches()
  try:
    records = compare.run(dataclasses.replace(COMPARE, epsilons=(0.05,), methods=("crown",)), copy)
  finally:
    jax.clear_caches()
  assert sum(r["margin_violations"] for r in records) > 0


def test_pgd_margins_are_upper_bounds_of_the_true_minimum_and_reach_it_for_two_classes():
  """``pgd_margins`` on linear models, where the smallest margin over the ℓ2 ball (inside the pixel box) is
  m_j(x) − ε‖w_y − w_j‖₂: never below it (it is a margin some point reaches), at most the clean margin, and
  with two classes (targeted cross-entropy then descends the margin itself) equal to it."""
  import jax
  import jax.numpy as jnp
  rng = np.random.default_rng(0)
  for classes, exact in ((2, True), (4, False)):
    w = jnp.asarray(rng.normal(size=(6, classes)))
    b = jnp.asarray(rng.normal(size=classes))
    apply_fn = lambda p, v: v @ p[0] + p[1][None, :]   # noqa: E731
    x = jnp.full((3, 6), 0.5)
    y = jnp.asarray([0, 1, classes - 1])
    eps = 0.1                                   # the ball stays inside [0, 1]: the box never binds
    found = compare.pgd_margins(apply_fn, (w, b), x, y, eps, key=jax.random.PRNGKey(0), steps=50)
    f = np.asarray(apply_fn((w, b), x))
    wn = np.asarray(w)
    for i, yi in enumerate(np.asarray(y)):
      others = [j for j in range(classes) if j != yi]
      clean = np.asarray([f[i, yi] - f[i, j] for j in others])
      true_min = clean - eps * np.asarray([np.linalg.norm(wn[:, yi] - wn[:, j]) for j in others])
      assert np.all(found[i] >= true_min - 1e-5) and np.all(found[i] <= clean + 1e-6)
      if exact:
        np.testing.assert_allclose(found[i], true_min, atol=5e-3)   # PGD-L2 converges along the sphere


@pytest.mark.parametrize("method, lofast, intermediate", [("crown", False, "crown"), ("crown_lofast", True, "crown"),
                                                          ("crown_ibp", False, "ibp")])
def test_an_image_is_certified_only_when_every_margin_bound_is_above_zero(monkeypatch, method, lofast, intermediate):
  """Catches ``>= 0`` for ``> 0`` or a certificate read from one class's bound: a lower bound of exactly 0 on some
  margin leaves that image uncertified, as does one negative class among positive ones; each method reaches
  the bound computation with its own options (LoFAST inside CROWN, interval intermediate bounds)."""
  from attention import crown_vit
  seen = {}
  bounds = np.array([[0.0, 1.0, 2.0], [0.1, 0.2, 1e-30], [3.0, -1e-9, 5.0], [2.0, 2.0, 2.0]])

  def fake(model_config, params, x, y, eps, *, lofast, intermediate, key, power_iters):
    seen.update(lofast=lofast, intermediate=intermediate, eps=eps)
    return bounds
  monkeypatch.setattr(crown_vit, "margin_lower_bounds", fake)
  flags, margins = compare._certified(method, None, None, np.zeros((4, 2)), np.zeros(4, int), 0.05, None, 3)
  assert flags.tolist() == [False, True, False, True] and margins is bounds
  assert seen == dict(lofast=lofast, intermediate=intermediate, eps=0.05)


def test_other_classes_drop_each_images_own_class_and_keep_class_order():
  """Catches a mask on the wrong axis or the true class kept: the margin columns are the classes j ≠ y_b in order."""
  values = np.arange(12.0).reshape(3, 4)
  np.testing.assert_array_equal(compare._other_classes(values, [0, 3, 1]),
                                [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [8.0, 10.0, 11.0]])


@pytest.mark.parametrize("field, value", [("n_images", 1), ("chunk", 1), ("epsilons", (1e-12,)),
                                          ("methods", ("crown",))])
def test_compare_config_accepts_the_edge_of_each_range(field, value):
  """Catches ``> 1`` for ``>= 1`` (or ε ≥ 0 for ε > 0 the other way): one image, chunks of one, the smallest
  positive radius and a single method are valid."""
  import dataclasses
  dataclasses.replace(COMPARE, **{field: value}).validate()
  with pytest.raises(ValueError, match="epsilons"):
    dataclasses.replace(COMPARE, epsilons=(0.0,)).validate()
