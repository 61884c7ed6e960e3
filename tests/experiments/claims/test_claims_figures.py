"""The claims figures are readable: rendered from synthetic rows, every text lies inside the canvas (matplotlib's
text extents), every row label is unique and names its measurement choice, and no label holds an unfilled
template slot."""
import re

import matplotlib.text
import pytest

from claim_sources import claim_rows_of, flip_records
from experiments import registry
from experiments.claims import report, specification_curve
from experiments.core.claim import synthetic_row
from experiments.core.plotting import plt
from experiments.core.rows import make_row
from experiments.core.verdicts import Interval

SLOT = re.compile(r"\{[^}]*\}|\[\s*\]|\(\s*\)| at \]|\[ ")


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("figures")
  records = [r for eps in (0.05, 0.1, 0.2, 0.3) for r in flip_records([3 + int(20 * eps)] * 10, [21] * 10, eps=eps)]
  out = claim_rows_of(tmp, "fr", records)
  out += [synthetic_row(c, case) for _, claims in registry.with_claims() for c in claims.claims for case in c.cases]
  long = "a measurement choice whose name is long enough to need wrapping (K∞ modes fitted at this training time: 2L-ReLU 235/236 of 256)"
  for i, (measurement, low) in enumerate(((long, 0.1), ("raw ‖K_T − K₀‖_F/‖K₀‖_F", -0.3), (long + " again", 0.2))):
    out.append(make_row("feature_learning", "MLP-Attn is in the feature-learning regime: its kernel moves more than "
                        "2L-ReLU's during training", "arXiv 2603.13085", "more", paper_sign=+1, primary=i == 0,
                        interval=Interval(low + 0.1, low, low + 0.2, 0.95, 10, "seeds", "t"), measurement=measurement))
  return out


def _check_readable(fig):
  """Every drawn text inside the canvas: the figure's tight bounding box (the extent of every artist drawn,
  tick labels outside the view excluded) within the figure, and each title, axis label and y tick label inside
  it by its own extent; unique y labels per panel; no unfilled template slot."""
  fig.canvas.draw()
  renderer = fig.canvas.get_renderer()
  box = fig.bbox
  tight = fig.get_tightbbox(renderer).transformed(fig.dpi_scale_trans)
  assert (tight.x0 >= box.x0 - 1 and tight.y0 >= box.y0 - 1 and tight.x1 <= box.x1 + 1
          and tight.y1 <= box.y1 + 1), f"text leaves the canvas: drawn extent {tight} in {box}"
  texts = [t for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text().strip()]
  def in_view(ax, t):  # a tick label outside the axis' limits is not drawn
    low, high = sorted(ax.get_ylim())
    return low <= t.get_position()[1] <= high
  named = [t for ax in fig.axes for t in (ax.title, ax._left_title, ax.xaxis.label, ax.yaxis.label,
                                          *(t for t in ax.get_yticklabels() if in_view(ax, t)))]
  named += [fig._suptitle] if fig._suptitle else []
  for t in named:
    if not (t.get_visible() and t.get_text().strip()):
      continue
    extent = t.get_window_extent(renderer)
    assert (extent.x0 >= box.x0 - 1 and extent.y0 >= box.y0 - 1 and extent.x1 <= box.x1 + 1
            and extent.y1 <= box.y1 + 1), f"text leaves the canvas: {t.get_text()!r} at {extent} in {box}"
  headings = [t for ax in fig.axes for t in (ax.title, ax._left_title, ax.xaxis.label)] + (
      [fig._suptitle] if fig._suptitle else [])
  headings = [(t, t.get_window_extent(renderer)) for t in headings if t.get_visible() and t.get_text().strip()]
  for i, (a, box_a) in enumerate(headings):
    for b, box_b in headings[i + 1:]:
      assert not box_a.overlaps(box_b), f"texts overlap: {a.get_text()!r} and {b.get_text()!r}"
  for t in texts:
    assert t.get_text().startswith("$") or not SLOT.search(t.get_text()), f"unfilled slot in {t.get_text()!r}"
  for ax in fig.axes:
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert len(labels) == len(set(labels)), labels
    ticks = [(t, t.get_window_extent(renderer)) for t in ax.get_yticklabels() if t.get_text() and in_view(ax, t)]
    for (a, box_a), (b, box_b) in zip(ticks, ticks[1:]):
      assert not box_a.overlaps(box_b), f"texts overlap: {a.get_text()!r} and {b.get_text()!r}"
  plt.close(fig)
  return texts


def test_forest_labels_are_unique_inside_the_canvas_and_name_the_measurement(rows):
  fig = report.forest_figure(rows)
  labels = [t.get_text().replace("\n", " ") for ax in fig.axes for t in ax.get_yticklabels()]
  texts = _check_readable(fig)  # unique within each panel; the panel's title names the claim
  chosen = [r for r in rows if r["status"] == "measured" and r.get("measurement") and r.get("primary", True)
            and r["claim_id"] == "flip_ratio_mnist_pgd"]
  assert chosen and all(any(r["measurement"] in label for label in labels) for r in chosen)
  assert len(fig.axes) == len({report._family(r) for r in rows if r["status"] == "measured" and r["estimate"] is not None})
  assert any("measured as" in t.get_text() for t in texts)


def test_eps_grid_is_a_curve_per_attack_inside_the_canvas(rows):
  fig = report.eps_figure(rows)
  assert fig is not None
  legends = {t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts()}
  assert {"FGSM", "PGD", "MIM"} <= legends
  _check_readable(fig)


def test_specification_curve_is_inside_the_canvas_with_whole_labels(rows):
  fig = specification_curve.specification_figure(rows)
  texts = [t.get_text() for t in _check_readable(fig)]
  assert any("again" in t for t in texts)  # the long label is wrapped whole, not cut


def test_titles_drawn_over_each_other_are_caught():
  fig = plt.figure(figsize=(6, 3))
  for shift in (0.0, 0.02):  # two panels whose titles land on each other
    fig.add_axes((0.1 + shift, 0.1, 0.8, 0.6)).set_title("a panel's title, long enough to collide", loc="left")
  with pytest.raises(AssertionError, match="overlap"):
    _check_readable(fig)


def test_a_label_cut_off_the_canvas_is_caught():
  fig, ax = plt.subplots(figsize=(2, 1))
  ax.set_title("a title far too long for a figure two inches wide, which runs past both of its edges")
  with pytest.raises(AssertionError, match="leaves the canvas"):
    _check_readable(fig)
