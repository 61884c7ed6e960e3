"""attention.crown: soundness before numbers. Every relaxation holds on its box (float64, random and degenerate
operands), a relaxation made unsound is caught by the same check, the whole network's bounds contain every
sampled and gradient-optimised point of the input set, a one-hidden-layer network's bound equals the CROWN
bound worked by hand, and no bound is looser than interval bound propagation."""
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention import crown
from attention import crown_relaxations as relax


def _intervals(rng, n=400):
  """Random [l, u]: straddling 0, all positive, all negative, zero width, and very narrow."""
  a, b = rng.normal(size=n) * 3, rng.normal(size=n) * 3
  l, u = np.minimum(a, b), np.maximum(a, b)
  l[:40] = u[:40]                       # zero width
  u[40:80] = l[40:80] + 1e-9            # narrow
  return l, u


def _line_violation(f, lines, l, u):
  """Largest violation of a_L x + b_L ≤ f(x) ≤ a_U x + b_U over a dense grid of each [l, u] (ends included)."""
  t = np.linspace(0.0, 1.0, 201)[:, None]
  x = l[None] + t * (u - l)[None]
  fx = f(x)
  below = np.asarray(lines.a_lower)[None] * x + np.asarray(lines.b_lower)[None] - fx
  above = fx - (np.asarray(lines.a_upper)[None] * x + np.asarray(lines.b_upper)[None])
  scale = 1.0 + np.abs(fx)
  return float(max((below / scale).max(), (above / scale).max()))


@pytest.mark.parametrize("name,f,positive", [("relu", lambda x: np.maximum(x, 0), False),
                                             ("exp", np.exp, False), ("reciprocal", lambda x: 1 / x, True)])
def test_every_unary_relaxation_holds_on_its_box(name, f, positive):
  rng = np.random.default_rng(0)
  l, u = _intervals(rng)
  if positive:
    l, u = np.exp(l / 3), np.exp(u / 3)
  with jax.enable_x64(True):
    lines = getattr(relax, f"{name}_lines")(jnp.asarray(l), jnp.asarray(u))
  assert _line_violation(f, lines, l, u) <= 1e-9


def _plane_violation(planes, lx, ux, ly, uy, rng):
  """Largest violation of the planes over random and corner points of each box."""
  worst = -np.inf
  pts = [(a, b) for a in (lx, ux) for b in (ly, uy)] + [
      (lx + rng.uniform(size=lx.shape) * (ux - lx), ly + rng.uniform(size=ly.shape) * (uy - ly)) for _ in range(50)]
  p = [np.asarray(v) for v in planes]
  for x, y in pts:
    xy = x * y
    low, high = relax.plane(p[0], p[1], x, y), relax.plane(p[2], p[3], x, y)
    worst = max(worst, float(((low - xy) / (1 + abs(xy))).max()), float(((xy - high) / (1 + abs(xy))).max()))
  return worst


def test_mccormick_planes_hold_on_their_box_and_a_swapped_plane_is_caught():
  rng = np.random.default_rng(1)
  lx, ux = _intervals(rng)
  ly, uy = _intervals(rng)
  with jax.enable_x64(True):
    planes = relax.mccormick_planes(*(jnp.asarray(v) for v in (lx, ux, ly, uy)))
  assert _plane_violation(planes, lx, ux, ly, uy, rng) <= 1e-12
  # The same check catches a plane with an operand's lower and upper bounds swapped: the lower plane
  # anchored at (l_x, u_y) instead of (l_x, l_y).
  swapped = planes._replace(y_lower=jnp.asarray(uy))
  assert _plane_violation(swapped, lx, ux, ly, uy, rng) > 1e-3


def test_a_relu_upper_line_through_the_wrong_corner_is_caught():
  rng = np.random.default_rng(2)
  l, u = _intervals(rng)
  with jax.enable_x64(True):
    lines = relax.relu_lines(jnp.asarray(l), jnp.asarray(u))
    crossing = (l < 0) & (u > 0)
    wrong = lines._replace(b_upper=jnp.where(crossing, -lines.a_upper * u, lines.b_upper))  # through (u, 0)
  assert _line_violation(lambda x: np.maximum(x, 0), lines, l, u) <= 1e-12
  assert _line_violation(lambda x: np.maximum(x, 0), wrong, l, u) > 1e-3


def _net(rng, kinds, d_in=3, tokens=None, width=4):
  """A random network of ``kinds`` as (graph, params) on float64."""
  shape = (d_in,) if tokens is None else (tokens, d_in)
  b = crown.Builder(shape)
  x, params, d = 0, {}, d_in
  for i, kind in enumerate(kinds):
    if kind == "dense":
      out = width if i < len(kinds) - 1 else 3
      params[f"{i}.W"], params[f"{i}.b"] = rng.normal(size=(d, out)) / math.sqrt(d), 0.3 * rng.normal(size=out)
      x, d = b.linear(x, str(i), out), out
    elif kind == "relu":
      x = b.relu(x)
    else:
      for n in ("q", "k", "v"):
        params[f"{i}.W{n}"], params[f"{i}.b{n}"] = rng.normal(size=(d, d)) / math.sqrt(d), np.zeros(d)
      x = b.attention(x, str(i), d, d)
  return b.graph(), {k: jnp.asarray(v) for k, v in params.items()}


def _ball_points(rng, x0, eps, norm, box, n):
  """Random points of the input set: on the sphere / cube surface and inside, clipped into the box (still in the
  ball: clipping towards a box that holds x0 only shortens the step)."""
  d = x0.size
  z = rng.normal(size=(n, d))
  if norm == "2":
    z = z / np.linalg.norm(z, axis=1, keepdims=True) * eps * rng.uniform(size=(n, 1)) ** (1 / d)
    z[: n // 4] *= eps / np.linalg.norm(z[: n // 4], axis=1, keepdims=True)
  else:
    z = rng.uniform(-eps, eps, size=(n, d))
    z[: n // 4] = np.sign(z[: n // 4]) * eps
  pts = x0.ravel()[None] + z
  if box is not None:
    pts = np.clip(pts, *box)
  return pts.reshape((n,) + x0.shape)


def _outputs(graph, params, points):
  """The flattened outputs [n, n_out] at each of the points (one compiled, vmapped forward pass)."""
  return np.asarray(jax.jit(jax.vmap(lambda x: crown.forward(graph, params, x)[-1].ravel()))(jnp.asarray(points)))


def _project(x, x0, eps, norm, box):
  """x projected onto the input set: the ℓ2 or ℓ∞ ball of radius eps around x0, intersected with box if given."""
  delta = x - x0
  if norm == "2":
    delta = delta * jnp.minimum(1.0, eps / (jnp.linalg.norm(delta) + 1e-30))
  else:
    delta = jnp.clip(delta, -eps, eps)
  return x0 + delta if box is None else jnp.clip(x0 + delta, *box)


def _optimised_extremes(graph, params, x0, eps, norm, box, steps=60):
  """Per output, the smallest and largest value projected gradient descent/ascent finds in the input set (one
  compiled program: every output and both signs vmapped)."""
  n_out = int(np.prod(graph.nodes[-1].shape))

  def project(x):
    return _project(x, x0, eps, norm, box)

  def extreme(j, sign):
    objective = lambda v: sign * crown.forward(graph, params, v)[-1].ravel()[j]  # noqa: E731

    def step(_, x):
      g = jax.grad(objective)(x)
      direction = g / (jnp.linalg.norm(g) + 1e-30) if norm == "2" else jnp.sign(g)
      return project(x - 0.1 * eps * direction)
    return crown.forward(graph, params, jax.lax.fori_loop(0, steps, step, x0))[-1].ravel()[j]

  run = jax.jit(jax.vmap(extreme, in_axes=(0, None)))
  js = jnp.arange(n_out)
  return np.asarray(run(js, 1.0)), np.asarray(run(js, -1.0))


CASES = [(("dense", "relu", "dense"), None), (("dense", "relu", "dense", "relu", "dense"), None),
         (("attention", "dense"), 3), (("dense", "attention", "relu", "dense"), 3)]
NORM_BOXES = [("2", None), ("inf", None), ("2", (0.0, 1.0))]
# The suite checks one input set per network (each network and set is a compile of its own); the long tests
# check every pair.
FAST = [(CASES[1], NORM_BOXES[1]), (CASES[0], NORM_BOXES[2]), (CASES[2], NORM_BOXES[0]), (CASES[3], NORM_BOXES[2])]
SOUNDNESS = [pytest.param(*case, *nb, marks=() if (case, nb) in FAST else pytest.mark.long)
             for case in CASES for nb in NORM_BOXES]


@pytest.mark.parametrize("kinds,tokens,norm,box", SOUNDNESS)
def test_network_bounds_contain_every_sampled_and_optimised_point(kinds, tokens, norm, box):
  rng = np.random.default_rng(3)
  with jax.enable_x64(True):
    graph, params = _net(rng, kinds, tokens=tokens)
    x0 = jnp.asarray(rng.uniform(0.2, 0.8, size=graph.nodes[0].shape))
    eps = 0.15
    lower, upper = crown.output_bounds(graph, params, x0, eps, norm, box)
    values = _outputs(graph, params, _ball_points(rng, np.asarray(x0), eps, norm, box, 300))
    lo_opt, hi_opt = _optimised_extremes(graph, params, x0, eps, norm, box)
  slack = 1e-9 * (1 + np.abs(values).max())
  assert np.all(values >= np.asarray(lower) - slack) and np.all(values <= np.asarray(upper) + slack)
  assert np.all(lo_opt >= np.asarray(lower) - slack) and np.all(hi_opt <= np.asarray(upper) + slack)


@pytest.mark.parametrize("kinds,tokens", [CASES[1], pytest.param(*CASES[3], marks=pytest.mark.long)])
def test_crown_is_never_looser_than_interval_propagation(kinds, tokens):
  rng = np.random.default_rng(4)
  with jax.enable_x64(True):
    graph, params = _net(rng, kinds, tokens=tokens)
    x0 = jnp.asarray(rng.uniform(0.2, 0.8, size=graph.nodes[0].shape))
    lo_c, hi_c = crown.output_bounds(graph, params, x0, 0.1, "inf", intermediate="crown")
    lo_i, hi_i = crown.output_bounds(graph, params, x0, 0.1, "inf", intermediate="ibp")
    boxes = crown.ibp(graph, params, crown.input_box(x0, 0.1, "inf"))
  ibp_lo, ibp_hi = np.ravel(boxes[-1].lower), np.ravel(boxes[-1].upper)
  for lo, hi in ((lo_c, hi_c), (lo_i, hi_i)):
    assert np.all(np.asarray(lo) >= ibp_lo - 1e-12) and np.all(np.asarray(hi) <= ibp_hi + 1e-12)
  assert np.all(np.asarray(lo_c) >= np.asarray(lo_i) - 1e-9)  # CROWN's intermediates tighten, never loosen
  if kinds.count("relu") + kinds.count("attention") >= 2:  # past the first nonlinearity they tighten somewhere
    assert np.any(np.asarray(hi_c) - np.asarray(lo_c) < np.asarray(hi_i) - np.asarray(lo_i) - 1e-9)


def test_one_hidden_layer_bound_equals_the_hand_worked_crown_bound():
  """x ∈ R², ℓ∞ ball of radius 0.5 around x0 = (0, 0); z = W₁x + b₁ with W₁ = [[1, 1], [1, −1]] (rows are units),
  b₁ = (0.5, −0.25); f = a·relu(z), a = (1, −2).

  Unit 1: z₁ = x₁ + x₂ + 0.5 ∈ [−0.5, 1.5] (crossing; u ≥ −l so the lower slope is 1), upper line
  s₁ = 1.5/2 = 0.75 through (−0.5, 0): 0.75·z₁ + 0.375. Unit 2: z₂ = x₁ − x₂ − 0.25 ∈ [−1.25, 0.75] (crossing,
  u < −l: lower slope 0), upper line s₂ = 0.75/2 = 0.375, intercept 0.375·1.25 = 0.46875.
  Lower bound of f: a₁ = 1 > 0 takes unit 1's lower line (slope 1), a₂ = −2 < 0 takes unit 2's upper line:
  f ≥ z₁ − 2(0.375 z₂ + 0.46875) = (x₁ + x₂ + 0.5) − 0.75(x₁ − x₂ − 0.25) − 0.9375
       = 0.25 x₁ + 1.75 x₂ − 0.25, whose minimum over the ball is −0.25 − 0.5(0.25 + 1.75) = −1.25.
  Upper bound: a₁ takes unit 1's upper line, a₂ unit 2's lower line (slope 0):
  f ≤ 0.75(x₁ + x₂ + 0.5) + 0.375 = 0.75 x₁ + 0.75 x₂ + 0.75, maximum 0.75 + 0.5·1.5 = 1.5.
  Interval propagation gives [−1.5, 1.5] (relu(z₁) ∈ [0, 1.5], relu(z₂) ∈ [0, 0.75]), so CROWN tightens the
  lower end only."""
  b = crown.Builder((2,))
  x = b.relu(b.linear(0, "1", 2))
  b.linear(x, "2", 1)
  params = {"1.W": jnp.array([[1.0, 1.0], [1.0, -1.0]]).T, "1.b": jnp.array([0.5, -0.25]),
            "2.W": jnp.array([[1.0], [-2.0]]), "2.b": jnp.zeros(1)}
  with jax.enable_x64(True):
    params = {k: jnp.asarray(v, jnp.float64) for k, v in params.items()}
    lower, upper = crown.output_bounds(b.graph(), params, jnp.zeros(2), 0.5, "inf", intermediate="ibp")
  assert float(lower[0]) == pytest.approx(-1.25, abs=1e-12)
  assert float(upper[0]) == pytest.approx(1.5, abs=1e-12)


def test_margin_bounds_are_the_bounds_of_the_differences():
  rng = np.random.default_rng(5)
  with jax.enable_x64(True):
    graph, params = _net(rng, ("dense", "relu", "dense"))
    x0 = jnp.asarray(rng.uniform(0.2, 0.8, size=3))
    margins = crown.margin_bounds(graph, params, x0, 1, 0.05, "2")
    values = _outputs(graph, params, _ball_points(rng, np.asarray(x0), 0.05, "2", None, 300))
    at_x0 = np.asarray(crown.forward(graph, params, x0)[-1])
    point = np.asarray(crown.margin_bounds(graph, params, x0, 1, 0.0, "2"))
  assert margins.shape == (2,)
  assert np.all(values[:, 1:2] - values[:, [0, 2]] >= np.asarray(margins) - 1e-9)
  assert point == pytest.approx(at_x0[1] - at_x0[[0, 2]], abs=1e-9)  # a ball of radius 0 is the point itself


def _write_net(path, rng):
  np.savez(path, kinds=np.array(["attention", "dense", "relu", "dense"]), **{
      "0.Wq": rng.normal(size=(4, 4)) / 2, "0.Wk": rng.normal(size=(4, 4)) / 2, "0.Wv": rng.normal(size=(4, 4)) / 2,
      "1.W": rng.normal(size=(4, 5)) / 2, "1.b": rng.normal(size=5) / 4, "3.W": rng.normal(size=(5, 2)) / 2,
      "3.b": np.zeros(2)})


def test_the_command_line_prints_sound_bounds_of_every_output(tmp_path, capsys):
  rng = np.random.default_rng(6)
  _write_net(tmp_path / "net.npz", rng)
  x = rng.uniform(0, 1, size=(3, 4))
  np.save(tmp_path / "x.npy", x)
  assert crown.main(["--net", str(tmp_path / "net.npz"), "--x", str(tmp_path / "x.npy"), "--eps", "0.05",
                     "--norm", "2", "--box", "0,1"]) == 0
  out = json.loads(capsys.readouterr().out)
  assert len(out["lower"]) == len(out["upper"]) == 6   # [T = 3, 2] outputs, flattened
  graph, params = crown.load_network(tmp_path / "net.npz", x.shape)
  with jax.enable_x64(True):
    params = {k: jnp.asarray(v) for k, v in params.items()}
    y = _outputs(graph, params, _ball_points(rng, x, 0.05, "2", (0.0, 1.0), 200))
  assert np.all(y >= np.array(out["lower"]) - 1e-9) and np.all(y <= np.array(out["upper"]) + 1e-9)


@pytest.mark.parametrize("args,message", [
    (["--eps", "-1"], "--eps must be finite and >= 0"),
    (["--eps", "nan"], "--eps must be finite"),
    (["--eps", "0.1", "--box", "1"], "--box '1': expected two numbers"),
])
def test_the_command_line_refuses_bad_input(tmp_path, capsys, args, message):
  rng = np.random.default_rng(7)
  _write_net(tmp_path / "net.npz", rng)
  np.save(tmp_path / "x.npy", rng.uniform(0, 1, size=(3, 4)))
  base = ["--net", str(tmp_path / "net.npz"), "--x", str(tmp_path / "x.npy"), "--norm", "inf"]
  assert crown.main(base + args) == 2
  assert message in capsys.readouterr().err


def test_a_bad_network_file_is_named(tmp_path):
  np.savez(tmp_path / "bad.npz", kinds=np.array(["dense", "softplus"]), **{"0.W": np.ones((4, 2)), "0.b": np.ones(2)})
  with pytest.raises(ValueError, match="layer 1 has kind 'softplus'"):
    crown.load_network(tmp_path / "bad.npz", (4,))
  np.savez(tmp_path / "shape.npz", kinds=np.array(["dense"]), **{"0.W": np.ones((3, 2)), "0.b": np.ones(2)})
  with pytest.raises(ValueError, match=r"W must be \[4, e\]"):
    crown.load_network(tmp_path / "shape.npz", (4,))
  with pytest.raises(ValueError, match="not a readable npz"):
    crown.load_network(tmp_path / "missing.npz", (4,))


def test_the_norm_lines_hold_on_their_box():
  """‖c‖ of each row of random boxes (straddling 0, one-sided, zero width, the single point 0): the lines
  hold at random points and corners of each box; a tangent plane taken at the box's far corner instead of
  its center is still a valid lower bound, but an upper line without the chord step (the tangent of √s
  applied to s itself) is not, and the check catches it."""
  rng = np.random.default_rng(8)
  l = rng.normal(size=(300, 5))
  u = l + rng.exponential(size=(300, 5)) * (rng.uniform(size=(300, 1)) > 0.1)
  l[:5] = u[:5] = 0.0
  with jax.enable_x64(True):
    lines = relax.norm_lines(jnp.asarray(l), jnp.asarray(u))
  lines = [np.asarray(v) for v in lines]

  def violation(a_l, b_l, a_u, b_u):
    worst = -np.inf
    for _ in range(200):
      c = l + rng.uniform(size=l.shape) * (u - l)
      if _ % 4 == 0:
        c = np.where(rng.uniform(size=l.shape) < 0.5, l, u)   # a corner
      n = np.linalg.norm(c, axis=-1)
      worst = max(worst, float(((a_l * c).sum(-1) + b_l - n).max()), float((n - (a_u * c).sum(-1) - b_u).max()))
    return worst
  assert violation(*lines) <= 1e-12
  s0 = 0.5 * (l * l + u * u).sum(-1)
  no_chord_upper = (np.zeros_like(l), np.sqrt(np.maximum(s0, 1e-30)) * 0.5)   # √s ≤ √s₀/2: wrong
  assert violation(lines[0], lines[1], *no_chord_upper) > 1e-3


def test_the_bounded_scale_lines_hold_on_their_interval():
  rng = np.random.default_rng(9)
  r = 2.0
  a, b = rng.exponential(size=500) * 3, rng.exponential(size=500) * 3
  l, u = np.minimum(a, b), np.maximum(a, b)
  l[:30] = u[:30]
  l[30:60], u[30:60] = np.minimum(l[30:60], r / 2), r + 1e-15   # the kink within rounding of the upper end
  with jax.enable_x64(True):
    lines = relax.bounded_scale_lines(jnp.asarray(l), jnp.asarray(u), r)
  g = lambda n: np.minimum(1.0, r / np.maximum(n, 1e-30))  # noqa: E731
  assert _line_violation(g, lines, l, u) <= 1e-9
  wrong = lines._replace(b_lower=np.where((l < r) & (u > r), 1.0, np.asarray(lines.b_lower)))  # g ≥ 1: false
  assert _line_violation(g, wrong, l, u) > 1e-3


def _normed_net(rng, tokens, d=4, radius=1.0):
  """dense → bounded normalisation → attention → residual → SLL-like block → mean pooling → bounded norm → head."""
  b = crown.Builder((tokens, d))
  params = {"e.W": rng.normal(size=(d, d)), "e.b": rng.normal(size=d), "pos": rng.normal(size=(tokens, d)) / 3}
  x = b.offset(b.linear(0, "e", d), "pos")
  params.update(crown.centring_params("n1", d))
  y = b.bounded_norm(x, "n1", radius)
  for n in ("q", "k", "v"):
    params[f"a.W{n}"], params[f"a.b{n}"] = rng.normal(size=(d, d)) / 2, np.zeros(d)
  x = b.add(x, b.attention(y, "a", d, d))
  params.update({"s1.W": rng.normal(size=(d, 3)), "s1.b": rng.normal(size=3), "s2.W": rng.normal(size=(3, d)) / 2,
                 "s2.b": np.zeros(d)})
  x = b.add(x, b.linear(b.relu(b.linear(x, "s1", 3)), "s2", d))
  params.update(crown.centring_params("n2", d))
  z = b.bounded_norm(b.row_mean(x), "n2", radius)
  params.update({"h.W": rng.normal(size=(d, 3)), "h.b": np.zeros(3)})
  b.linear(z, "h", 3)
  return b.graph(), {k: jnp.asarray(v) for k, v in params.items()}


@pytest.mark.parametrize("norm,box", [("2", (0.0, 1.0)), pytest.param("inf", None, marks=pytest.mark.long)])
def test_bounds_through_bounded_normalisation_residuals_and_pooling_are_sound(norm, box):
  rng = np.random.default_rng(10)
  with jax.enable_x64(True):
    graph, params = _normed_net(rng, tokens=3)
    x0 = jnp.asarray(rng.uniform(0.2, 0.8, size=(3, 4)))
    eps = 0.05
    lower, upper = crown.output_bounds(graph, params, x0, eps, norm, box)
    values = _outputs(graph, params, _ball_points(rng, np.asarray(x0), eps, norm, box, 300))
    lo_opt, hi_opt = _optimised_extremes(graph, params, x0, eps, norm, box)
  assert np.all(np.isfinite(np.asarray(lower))) and np.all(np.isfinite(np.asarray(upper)))
  assert np.all(values >= np.asarray(lower) - 1e-9) and np.all(values <= np.asarray(upper) + 1e-9)
  assert np.all(lo_opt >= np.asarray(lower) - 1e-9) and np.all(hi_opt <= np.asarray(upper) + 1e-9)


def test_the_bounded_normalisation_node_is_the_models_function():
  from attention.lipschitz_layers import bounded_norm
  rng = np.random.default_rng(11)
  b = crown.Builder((3, 5))
  b.bounded_norm(0, "n", 1.5)
  x = rng.normal(size=(3, 5)) * rng.uniform(0.1, 2, size=(3, 1))
  with jax.enable_x64(True):
    got = crown.forward(b.graph(), {k: jnp.asarray(v) for k, v in crown.centring_params("n", 5).items()},
                        jnp.asarray(x))[-1]
    np.testing.assert_allclose(np.asarray(got), np.asarray(bounded_norm(jnp.asarray(x), 1.5)), rtol=1e-12)


@pytest.mark.parametrize("intermediate", ["ibp", "crown"])
def test_an_overflowing_interval_bound_is_the_whole_line_not_nan(intermediate):
  """Large attention logits overflow the interval bound of exp to +inf; where it meets a zero weight inf·0 is NaN.
  Every box must then read (−inf, +inf), never NaN, and the bounds past it must stay sound (and contain the
  network's outputs) rather than NaN."""
  rng = np.random.default_rng(7)
  graph, params = _net(rng, ("attention", "dense"), tokens=3)
  params = {k: (200.0 * v if k.endswith(("Wq", "Wk")) else v) for k, v in params.items()}
  params = {k: v.astype(jnp.float32) for k, v in params.items()}
  x0 = jnp.asarray(rng.uniform(0.2, 0.8, size=graph.nodes[0].shape), jnp.float32)
  boxes = crown.ibp(graph, params, crown.input_box(x0, 0.5, "inf"))
  assert any(not np.all(np.isfinite(b.upper)) for b in boxes)   # the case this test is about: an overflow
  assert not any(np.isnan(b.lower).any() or np.isnan(b.upper).any() for b in boxes)
  lower, upper = crown.output_bounds(graph, params, x0, 0.5, "inf", intermediate=intermediate)
  assert not (np.isnan(np.asarray(lower)).any() or np.isnan(np.asarray(upper)).any())
  values = _outputs(graph, params, _ball_points(rng, np.asarray(x0), 0.5, "inf", None, 200))
  assert np.all(values >= np.asarray(lower) - 1e-3) and np.all(values <= np.asarray(upper) + 1e-3)


def test_a_zero_radius_gives_ordered_bounds_at_the_network_value():
  """At ε = 0 the lower and upper backward passes meet at f(x); rounding must not leave them crossed."""
  rng = np.random.default_rng(11)
  graph, params = _net(rng, CASES[2][0], tokens=CASES[2][1])
  x0 = jnp.asarray(rng.uniform(0.2, 0.8, size=graph.nodes[0].shape), jnp.float32)
  params = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float32), params)
  lower, upper = crown.output_bounds(graph, params, x0, 0.0, "2")
  value = _outputs(graph, params, np.asarray(x0)[None])[0]
  assert np.all(np.asarray(lower) <= np.asarray(upper))
  np.testing.assert_allclose(np.asarray(lower), value, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(np.asarray(upper), value, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("eps", [-0.1, float("nan"), float("inf"), np.float32(-1.0)])
def test_the_jitted_entry_points_refuse_a_bad_radius_as_the_others_do(eps):
  rng = np.random.default_rng(12)
  graph, params = _net(rng, CASES[0][0])
  x0 = jnp.asarray(rng.uniform(0.2, 0.8, size=graph.nodes[0].shape))
  with pytest.raises(ValueError, match="eps must be finite and >= 0"):
    crown.output_bounds(graph, params, x0, eps, "inf")
  with pytest.raises(ValueError, match="eps must be finite and >= 0"):
    crown.margin_bounds(graph, params, x0, 0, eps, "inf")


# Tests that catch planted bugs in the relaxations, the backward rules and the margins.


def _grid_intervals(ends):
  """Every interval [l, u] with l ≤ u both from ``ends`` (so the zero-width ones, those with an end exactly on a
  kink, and the symmetric ones l = −u are all there), as two float64 arrays."""
  ends = np.asarray(ends, np.float64)
  l, u = np.meshgrid(ends, ends, indexing="ij")
  keep = l <= u
  return l[keep], u[keep]


def _at(a, b, x):
  return np.asarray(a) * x + np.asarray(b)


def _assert_on_line(a, b, x, want, rtol=1e-12):
  """a·x + b = want up to rounding, relative to the sizes of the terms (a line's value far from 0 through a large
  intercept carries its intercept's rounding)."""
  a, b = np.asarray(a), np.asarray(b)
  err = np.abs(a * x + b - want)
  tol = rtol * (np.abs(want) + np.abs(a * x) + np.abs(b)) + 1e-300
  assert np.all(err <= tol), f"off the line by {err[err > tol]} (tolerance {tol[err > tol]})"


def _line_violation_of_terms(f, lines, l, u):
  """As ``_line_violation``, relative to the sizes of the terms a·x, b and f(x) (so a chord of exp across
  [−30, 30], whose intercept is ~10¹², may carry its rounding)."""
  t = np.linspace(0.0, 1.0, 201)[:, None]
  x = l[None] + t * (u - l)[None]
  fx = f(x)
  worst = 0.0
  for a, b, sign in ((lines.a_lower, lines.b_lower, 1.0), (lines.a_upper, lines.b_upper, -1.0)):
    a, b = np.asarray(a)[None], np.asarray(b)[None]
    scale = 1e-300 + np.abs(fx) + np.abs(a * x) + np.abs(b)
    worst = max(worst, float((sign * (a * x + b - fx) / scale).max()))
  return worst


def test_relu_lines_are_exact_when_stable_and_touch_the_relu_where_crown_says_when_crossing():
  """ReLU's lines on a grid of intervals with ends on and around the kink (l = 0, u = 0, u = −l, zero width, very
  wide): sound on a dense grid of each [l, u]; exact (slope 1 or 0, no intercept) when stable; when crossing, the
  upper line passes through both chord ends (l, 0) and (u, u) and the lower one is α·x with α = 1 exactly when
  u ≥ −l (boundary included). Catches the comparison moved off its boundary (``u > −l``), a loosened or shifted
  chord and a lower slope chosen the wrong way round (all sound, so the soundness checks miss them)."""
  l, u = _grid_intervals([-1e3, -3.0, -1.0, -0.5, -1e-9, 0.0, 1e-9, 0.5, 1.0, 3.0, 1e3])
  with jax.enable_x64(True):
    lines = relax.relu_lines(jnp.asarray(l), jnp.asarray(u))
  a_l, b_l, a_u, b_u = (np.asarray(v) for v in lines)
  assert _line_violation(lambda x: np.maximum(x, 0), lines, l, u) <= 1e-12
  active, inactive = l >= 0, u <= 0
  crossing = ~(active | inactive)
  assert crossing.sum() >= 20 and np.any(crossing & (u == -l))    # the cases this test is about are present
  np.testing.assert_array_equal(a_l[active], 1.0)
  np.testing.assert_array_equal(a_u[active], 1.0)
  np.testing.assert_array_equal(a_l[inactive & ~active], 0.0)
  np.testing.assert_array_equal(a_u[inactive & ~active], 0.0)
  np.testing.assert_array_equal(b_l, 0.0)
  np.testing.assert_array_equal(b_u[~crossing], 0.0)
  lc, uc = l[crossing], u[crossing]
  np.testing.assert_allclose(_at(a_u[crossing], b_u[crossing], lc), 0.0, atol=1e-12 * np.abs(lc).max())
  np.testing.assert_allclose(_at(a_u[crossing], b_u[crossing], uc), uc, rtol=1e-12)
  np.testing.assert_array_equal(a_l[crossing], (uc >= -lc).astype(float))


@pytest.mark.parametrize("name", ["exp", "reciprocal"])
def test_convex_lines_are_the_midpoint_tangent_and_the_chord_on_wide_and_degenerate_intervals(name):
  """exp on intervals up to [−30, 30] wide and 1/x on [0.01, 1000]-wide ones (as wide as softmax logit differences
  and denominators get at a large radius), zero-width ones included: sound on a dense grid; the upper line passes
  through (l, f(l)) and (u, f(u)) (the chord), the lower one through (t, f(t)) with slope f'(t) at the midpoint t
  (the tangent), and at l = u both are the tangent at l. Catches a chord or tangent moved to another point or
  with a wrong slope: the sound ones (a tangent at an end, a chord steeper than needed) that soundness misses,
  and the ones that break only on wide intervals."""
  if name == "exp":
    f, df = np.exp, np.exp
    l, u = _grid_intervals([-30.0, -8.0, -1.0, -1e-7, 0.0, 0.3, 1.0, 2.5, 8.0, 30.0])
  else:
    f, df = (lambda x: 1.0 / x), (lambda x: -1.0 / (x * x))
    l, u = _grid_intervals([0.01, 0.1, 0.5, 1.0, 1.0 + 1e-7, 1.5, 3.0, 20.0, 1000.0])
  with jax.enable_x64(True):
    lines = getattr(relax, f"{name}_lines")(jnp.asarray(l), jnp.asarray(u))
  a_l, b_l, a_u, b_u = (np.asarray(v) for v in lines)
  assert _line_violation_of_terms(f, lines, l, u) <= 1e-13
  assert (u - l).max() >= 50 if name == "exp" else (u / l).max() >= 1e4
  t = 0.5 * (l + u)
  for x in (l, u):   # the chord touches at both ends (and equals the tangent at l where l = u)
    _assert_on_line(a_u, b_u, x, f(x))
  _assert_on_line(a_l, b_l, t, f(t))
  np.testing.assert_allclose(a_l, df(t), rtol=1e-12)
  same = l == u
  assert same.sum() >= 9
  np.testing.assert_allclose(a_u[same], df(l[same]), rtol=1e-12)


def test_mccormick_planes_are_exact_on_the_edges_through_their_anchors_on_a_dense_grid():
  """The product planes on a grid of boxes (each side straddling 0, one-sided, zero width, wide): sound on a dense
  11 × 11 grid of each box (not only random points), and each plane is exact on the two box edges through its
  documented anchor: the lower one on x = l_x and y = l_y, the upper one on x = l_x and y = u_y. Catches an anchor
  moved to another corner (a sound but different plane, or an unsound one on part of the grid)."""
  ends = [-4.0, -1.0, -1e-9, 0.0, 0.5, 2.0, 40.0]
  l1, u1 = _grid_intervals(ends)
  lx, ly = (v.ravel() for v in np.meshgrid(l1, l1, indexing="ij"))
  ux, uy = (v.ravel() for v in np.meshgrid(u1, u1, indexing="ij"))
  with jax.enable_x64(True):
    planes = relax.mccormick_planes(*(jnp.asarray(v) for v in (lx, ux, ly, uy)))
  p = [np.asarray(v) for v in planes]
  t = np.linspace(0.0, 1.0, 11)
  worst = 0.0
  for s in t:
    for r in t:
      x, y = lx + s * (ux - lx), ly + r * (uy - ly)
      scale = 1.0 + np.abs(x * y)
      worst = max(worst, float(((relax.plane(p[0], p[1], x, y) - x * y) / scale).max()),
                  float(((x * y - relax.plane(p[2], p[3], x, y)) / scale).max()))
      for edge, low_exact, high_exact in (((lx, y), True, True), ((x, ly), True, False), ((x, uy), False, True)):
        ex, ey = edge
        if low_exact:
          np.testing.assert_allclose(relax.plane(p[0], p[1], ex, ey), ex * ey, rtol=1e-12, atol=1e-12)
        if high_exact:
          np.testing.assert_allclose(relax.plane(p[2], p[3], ex, ey), ex * ey, rtol=1e-12, atol=1e-12)
  assert worst <= 1e-12


def test_the_norm_lines_touch_the_norm_at_the_box_center_and_are_exact_on_a_point():
  """‖c‖ on random boxes (one-sided, straddling 0, wide) and on zero-width ones: the lower plane is the supporting
  plane at the center c₀ (value ‖c₀‖ there, no intercept); the upper line's value at the center is √s₀ with
  s₀ = Σ (l_i² + u_i²)/2 (the sum of the squares' chords at c₀ is Σ ((l_i + u_i)²/2 − l_i u_i) = s₀, where the
  tangent of √ is taken); on a zero-width box both are ‖l‖ exactly. Catches a lower plane taken at another point or
  scaled, or an upper tangent taken at another s₀ (e.g. a dropped ½): sound, looser lines the soundness check
  cannot see."""
  rng = np.random.default_rng(13)
  l = rng.normal(size=(200, 4)) * 3
  u = l + rng.exponential(size=(200, 4)) * 4
  l[:20] = u[:20]
  with jax.enable_x64(True):
    a_l, b_l, a_u, b_u = (np.asarray(v) for v in relax.norm_lines(jnp.asarray(l), jnp.asarray(u)))
  c0 = 0.5 * (l + u)
  n0 = np.linalg.norm(c0, axis=-1)
  np.testing.assert_array_equal(b_l, 0.0)
  np.testing.assert_allclose((a_l * c0).sum(-1), n0, rtol=1e-12)
  np.testing.assert_allclose(np.linalg.norm(a_l, axis=-1), 1.0, rtol=1e-12)   # a unit normal: ‖c‖ ≥ a·c
  s0 = 0.5 * (l * l + u * u).sum(-1)
  np.testing.assert_allclose((a_u * c0).sum(-1) + b_u, np.sqrt(s0), rtol=1e-12)
  np.testing.assert_allclose((a_u * l).sum(-1)[:20] + b_u[:20], np.linalg.norm(l[:20], axis=-1), rtol=1e-12)
  corners = np.where(rng.uniform(size=(64,) + l.shape) < 0.5, l, u)    # and still sound at the corners
  n = np.linalg.norm(corners, axis=-1)
  assert np.all((a_u * corners).sum(-1) + b_u >= n - 1e-9 * (1 + n))
  assert np.all((a_l * corners).sum(-1) <= n + 1e-9 * (1 + n))


def test_the_bounded_scale_lines_on_intervals_with_an_end_exactly_on_the_kink():
  """g(n) = min(1, r/n) (r = 2) on every interval with ends from a grid that holds r itself and r ± 1e-9: sound on
  a dense grid, and the lines the docstring names: u ≤ r (u = r included) exactly 1; l ≥ r (l = r included) the
  chord of r/n through (l, r/l) and (u, r/u) above and its tangent at the midpoint below; l < r < u the line
  through (r, 1) and (u, r/u) above and the constant r/u below. Catches ``u < r`` for ``u ≤ r`` or ``l ≤ r`` for
  ``l < r`` (each sends a boundary interval to the other, looser, case: sound, so the existing check misses it)."""
  r = 2.0
  l, u = _grid_intervals([0.0, 0.5, 1.0, r - 1e-9, r, r + 1e-9, 3.0, 10.0, 1e3])
  with jax.enable_x64(True):
    lines = relax.bounded_scale_lines(jnp.asarray(l), jnp.asarray(u), r)
  a_l, b_l, a_u, b_u = (np.asarray(v) for v in lines)
  g = lambda n: np.minimum(1.0, r / np.maximum(n, 1e-30))  # noqa: E731
  assert _line_violation_of_terms(g, lines, l, u) <= 1e-13
  flat = u <= r
  convex = (l >= r) & ~flat
  kink = ~flat & ~convex
  assert np.any(flat & (u == r)) and np.any(convex & (l == r)) and kink.sum() >= 10
  for v in (a_l, a_u):
    np.testing.assert_array_equal(v[flat], 0.0)
  for v in (b_l, b_u):
    np.testing.assert_array_equal(v[flat], 1.0)
  lc, uc, tc = l[convex], u[convex], 0.5 * (l[convex] + u[convex])
  _assert_on_line(a_u[convex], b_u[convex], lc, r / lc)
  _assert_on_line(a_u[convex], b_u[convex], uc, r / uc)
  _assert_on_line(a_l[convex], b_l[convex], tc, r / tc)
  np.testing.assert_allclose(a_l[convex], -r / tc ** 2, rtol=1e-12)
  _assert_on_line(a_u[kink], b_u[kink], r, 1.0)
  _assert_on_line(a_u[kink], b_u[kink], u[kink], r / u[kink])
  np.testing.assert_array_equal(a_l[kink], 0.0)
  np.testing.assert_allclose(b_l[kink], r / u[kink], rtol=1e-12)


def _flat_values(graph, params, points):
  """Every node's value at each point, flattened and concatenated: [n, total] (one compiled, vmapped pass)."""
  flat = lambda x: jnp.concatenate([v.ravel() for v in crown.forward(graph, params, x)])  # noqa: E731
  return np.asarray(jax.jit(jax.vmap(flat))(jnp.asarray(points)))


def _every_coordinate_extremes(graph, params, x0, eps, norm, box, steps=30):
  """For each coordinate of each node and each sign, the point of the input set that projected gradient descent on
  that coordinate ends at: [2·total, *input shape] (one compiled program, every coordinate and sign vmapped)."""
  x0 = jnp.asarray(x0)
  total = _flat_values(graph, params, np.asarray(x0)[None]).shape[1]

  def project(x):
    return _project(x, x0, eps, norm, box)

  def extreme(j, sign):
    objective = lambda v: sign * jnp.concatenate([a.ravel() for a in crown.forward(graph, params, v)])[j]  # noqa

    def step(_, x):
      g = jax.grad(objective)(x)
      return project(x - 0.2 * eps * (g / (jnp.linalg.norm(g) + 1e-30) if norm == "2" else jnp.sign(g)))
    start = project(x0 + 0.5 * eps * jnp.cos(j + jnp.arange(x0.size).reshape(x0.shape)))  # off the kinks at x0
    return jax.lax.fori_loop(0, steps, step, start)

  run = jax.jit(jax.vmap(extreme, in_axes=(0, None)))
  js = jnp.arange(total)
  return np.concatenate([np.asarray(run(js, 1.0)), np.asarray(run(js, -1.0))])


def _check_boxes_and_lines(graph, params, x0, eps, norm, box, n_samples=300, seed=0):
  """The node boxes of ``crown.node_bounds`` (CROWN intermediates) hold every node's value, and the final backward
  pass's lines Λ_L·x + c_L ≤ f(x) ≤ Λ_U·x + c_U hold pointwise, at sampled points of the input set and at the
  points gradient descent finds for each coordinate of each node (its extremes); and at radius 0 both lines are
  f's tangent at x0 (Λ = the Jacobian: every backward rule's indices and signs, whatever the slack at ε).
  Returns the boxes."""
  rng = np.random.default_rng(seed)
  boxes = crown.node_bounds(graph, params, x0, eps, norm, box)
  points = np.concatenate([_ball_points(rng, np.asarray(x0), eps, norm, box, n_samples),
                           _every_coordinate_extremes(graph, params, x0, eps, norm, box)])
  values = _flat_values(graph, params, points)
  lower = np.concatenate([np.ravel(b.lower) for b in boxes])
  upper = np.concatenate([np.ravel(b.upper) for b in boxes])
  slack = 1e-9 * (1 + np.abs(values))
  bad = (values < lower - slack) | (values > upper + slack)
  worst = np.max(np.maximum(lower - values, values - upper))
  assert not bad.any(), f"{bad.any(0).sum()} node coordinates leave their box, the worst by {worst}"
  n_out = int(np.prod(graph.nodes[-1].shape))
  spec = jnp.eye(n_out, dtype=jnp.asarray(x0).dtype).reshape((n_out,) + graph.nodes[-1].shape)
  (cl, kl), (cu, ku) = crown._backward(graph, params, boxes, len(graph.nodes) - 1, spec)
  flat_points = points.reshape(len(points), -1)
  out = values[:, -n_out:]
  low = flat_points @ np.asarray(cl).reshape(n_out, -1).T + np.asarray(kl)
  high = flat_points @ np.asarray(cu).reshape(n_out, -1).T + np.asarray(ku)
  scale = 1e-9 * (1 + np.abs(out) + np.abs(low) + np.abs(high))
  assert np.all(low <= out + scale) and np.all(out <= high + scale), (np.max(low - out), np.max(out - high))
  lo, hi = crown.spec_bounds_from(graph, params, boxes, x0, spec, eps, norm, box)
  assert np.all(out >= np.asarray(lo) - scale) and np.all(out <= np.asarray(hi) + scale)
  # At radius 0 every relaxation is exact at x0 with the function's own slope (the tangent of a zero-width
  # interval, McCormick's planes at a point), so both lines are f's first-order expansion at x0: Λ = ∂f/∂x.
  (cl, kl), (cu, ku) = crown._backward(graph, params, crown.node_bounds(graph, params, x0, 0.0, norm, box),
                                       len(graph.nodes) - 1, spec)
  jac = np.asarray(jax.jacrev(lambda x: crown.forward(graph, params, x)[-1].ravel())(x0)).reshape(n_out, -1)
  f0 = _flat_values(graph, params, np.asarray(x0)[None])[0, -n_out:]
  for c, k in ((cl, kl), (cu, ku)):
    np.testing.assert_allclose(np.asarray(c).reshape(n_out, -1), jac, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.asarray(c).reshape(n_out, -1) @ np.ravel(x0) + np.asarray(k), f0, rtol=1e-9,
                               atol=1e-9)
  return boxes


def _unstable(graph, boxes, op):
  """For each ``op`` node, its input's box (lower, upper) flattened, concatenated over the nodes."""
  ins = [boxes[n.inputs[0]] for n in graph.nodes if n.op == op]
  return np.concatenate([np.ravel(b.lower) for b in ins]), np.concatenate([np.ravel(b.upper) for b in ins])


@pytest.mark.parametrize("norm,box,eps", [("inf", None, 0.5), ("2", (0.0, 1.0), 0.8)])
def test_boxes_and_lines_of_a_relu_net_hold_at_a_radius_where_most_relus_cross_zero(norm, box, eps):
  """A dense net with two hidden ReLU layers of 8 at a radius where most ReLUs are unstable (their input's box
  crosses 0: counted, at least 10 of 16), so every ReLU relaxation and every sign case of the backward pass is
  used: each node's CROWN box holds the node's value, and the final lines hold pointwise, at sampled points and at
  each coordinate's gradient-descent extremes (and are the Jacobian at radius 0). Catches an unsound crossing-ReLU
  line or a backward rule with its lower and upper lines, their intercepts or the signs of Λ mixed up, which a
  small radius (stable ReLUs, whose two lines are the same) never reaches."""
  rng = np.random.default_rng(14)
  with jax.enable_x64(True):
    graph, params = _net(rng, ("dense", "relu", "dense", "relu", "dense"), d_in=3, width=8)
    x0 = jnp.asarray(rng.uniform(0.2, 0.8, size=3))
    boxes = _check_boxes_and_lines(graph, params, x0, eps, norm, box)
  lo, hi = _unstable(graph, boxes, "relu")
  assert np.sum((lo < 0) & (hi > 0)) >= 10, (lo, hi)


@pytest.mark.parametrize("norm,box,eps", [("inf", None, 0.45), ("2", (0.0, 1.0), 0.5)])
def test_boxes_and_lines_through_softmax_attention_hold_where_its_intervals_are_wide(norm, box, eps):
  """Softmax attention (2 tokens) at a radius where its relaxed intervals are wide (checked: some logit difference
  spans ≥ 2, some softmax denominator varies by a factor ≥ 4, the bilinear operands' boxes are ≥ 0.5 wide): each
  node's CROWN box holds the node's value, and the final lines hold pointwise, at sampled points and at each
  coordinate's gradient-descent extremes, and are the Jacobian at radius 0. Catches an exp / reciprocal line or a
  McCormick plane used on the wrong side (errors of the order of the squared width, invisible on the narrow
  intervals of a small radius), a too-tight interval rule (e.g. of the logit differences), and a backward rule of
  pairdiff, transpose or matmul with an index or sign wrong (hidden in the slack of wide intervals, exact at 0)."""
  rng = np.random.default_rng(15)
  with jax.enable_x64(True):
    graph, params = _net(rng, ("attention", "dense"), d_in=2, tokens=2)
    x0 = jnp.asarray(rng.uniform(0.2, 0.8, size=(2, 2)))
    boxes = _check_boxes_and_lines(graph, params, x0, eps, norm, box)
  lo, hi = _unstable(graph, boxes, "exp")
  assert (hi - lo).max() >= 2.0
  lo, hi = _unstable(graph, boxes, "reciprocal")
  assert (hi / lo).max() >= 4.0
  for node in graph.nodes:
    if node.op == "matmul":
      assert all(np.max(np.asarray(boxes[j].upper) - np.asarray(boxes[j].lower)) >= 0.5 for j in node.inputs)


@pytest.mark.parametrize("norm,eps", [("inf", 0.4), ("2", 0.8)])
def test_softmax_denominators_stay_at_least_one_and_attention_probabilities_at_most_one(norm, eps):
  """Each softmax row's denominator Σ_j exp(s_j − s_i) holds its own term exp(0) = 1, so it is ≥ 1 and each
  attention probability ≤ 1, whatever the radius. Catches intermediate boxes left at the first interval sweep's
  values after CROWN tightened their inputs: the exp of the exact difference [0, 0] then kept the interval
  sweep's exp([lo_i − hi_i, hi_i − lo_i]), and at ℓ∞ radius 0.4 the denominators went down to about 1e-4 and the
  probabilities up to about 9,000 (sound, but loose enough to lose most certificates through attention)."""
  rng = np.random.default_rng(15)
  with jax.enable_x64(True):
    graph, params = _net(rng, ("dense", "attention", "relu", "dense"), d_in=3, tokens=3, width=4)
    x0 = jnp.asarray(rng.uniform(0.2, 0.8, size=(3, 3)))
    boxes = crown.node_bounds(graph, params, x0, eps, norm)
  for i, node in enumerate(graph.nodes):
    if node.op == "reciprocal":
      denominator, probability = boxes[node.inputs[0]], boxes[i]
      assert np.asarray(denominator.lower).min() >= 1.0 - 1e-12
      assert np.asarray(probability.upper).max() <= 1.0 + 1e-12 and np.asarray(probability.lower).min() >= 0.0
      assert np.asarray(denominator.upper).max() > 1.5   # the radius is wide: the bound is not trivially tight
    if node.op == "exp":    # the diagonal exp(s_i − s_i) is exactly 1
      diagonal = [np.diagonal(np.asarray(e), axis1=-2, axis2=-1) for e in boxes[i]]
      np.testing.assert_allclose(diagonal, 1.0, rtol=0, atol=1e-12)


def test_interval_ends_of_affine_maps_survive_huge_boxes():
  """Catches the center-radius form c ± r of an affine map's interval: on an input box [0, 1e17]² with W = (1, 1)
  and b = −0.5, c − r rounds to 0 (the bias is lost), above the true minimum −0.5 at x = 0, and the final bounds
  took that unsound end (they keep the larger lower end). The two-attention-layer network below reached boxes of
  about 1e200 in its first interval sweep (about 1e12 with the softmax diagonal exact) and every one of 400 sampled
  outputs fell outside its final box; every node's box must hold the network's values."""
  with jax.enable_x64(True):
    b = crown.Builder((1, 2))
    b.linear(0, "L", 1)
    graph, params = b.graph(), {"L.W": jnp.asarray([[1.0], [1.0]]), "L.b": jnp.asarray([-0.5])}
    x0 = jnp.asarray([[5e16, 5e16]])
    assert float(crown.node_bounds(graph, params, x0, 5e16, "inf")[1].lower[0, 0]) <= -0.5
    assert float(crown.output_bounds(graph, params, x0, 5e16, "inf")[0][0]) <= -0.5
    rng = np.random.default_rng(1)
    graph, params = _net(rng, ("dense", "attention", "attention", "relu", "dense"), tokens=3)
    x0 = jnp.asarray(rng.normal(size=(3, 3)))
    boxes = crown.node_bounds(graph, params, x0, 0.5, "inf")
    first = [np.abs(np.asarray(bx.upper)) for bx in crown.ibp(graph, params, crown.input_box(x0, 0.5, "inf"))]
    assert max(float(u[np.isfinite(u)].max(initial=0.0)) for u in first) > 1e10   # the first sweep's boxes are huge
    points = np.asarray(x0)[None] + rng.uniform(-0.5, 0.5, size=(400,) + x0.shape)
    for point in [x0, *points]:
      for value, box in zip(crown.forward(graph, params, jnp.asarray(point)), boxes):
        assert bool(jnp.all(box.lower <= value + 1e-9)) and bool(jnp.all(value <= box.upper + 1e-9))


def test_softmax_denominators_stay_at_least_one_at_any_radius():
  """The diagonal s_i − s_i of a softmax's logit differences is exactly 0 in the interval rule too, so the
  denominator's box stays ≥ 1 and the probabilities' ≤ 1 even where CROWN's own bound of the difference has
  grown wide (two attention layers at ℓ∞ radius 10: the diagonal was [−12,555, 12,555], exp of it [0, ∞])."""
  rng = np.random.default_rng(2)
  with jax.enable_x64(True):
    graph, params = _net(rng, ("dense", "attention", "attention", "dense"), tokens=3)
    boxes = crown.node_bounds(graph, params, jnp.asarray(rng.normal(size=(3, 3))), 10.0, "inf")
  reciprocals = [i for i, node in enumerate(graph.nodes) if node.op == "reciprocal"]
  assert len(reciprocals) == 2
  for i in reciprocals:
    assert float(boxes[graph.nodes[i].inputs[0]].lower.min()) >= 1.0 - 1e-12
    assert float(boxes[i].upper.max()) <= 1.0 + 1e-12


@pytest.mark.parametrize("eps, x_nan, message", [(np.full((3, 3), 0.1), False, "one real number"),
                                                 (np.full((3, 3), -1.0), False, "one real number"),
                                                 (True, False, "one real number"), (0.1, True, "x0 must be finite")])
def test_array_radii_and_nan_points_are_refused(eps, x_nan, message):
  rng = np.random.default_rng(0)
  graph, params = _net(rng, ("dense", "attention", "dense"), tokens=3)
  x0 = rng.normal(size=(3, 3))
  if x_nan:
    x0[0, 0] = np.nan
  for call in (crown.node_bounds, crown.output_bounds):
    with pytest.raises(ValueError, match=message):
      call(graph, params, x0, eps, "inf")
  with pytest.raises(ValueError, match=message):
    crown.margin_bounds(graph, params, x0, 0, eps, "inf")


def _small_normed_net(rng, radius):
  """patches [2, 3] → dense + positions → bounded normalisation → mean over tokens → head [3]: the certified ViT's
  normalisation (centring, row norm, bounded scale, row product) and pooling, nothing else."""
  b = crown.Builder((2, 3))
  params = {"e.W": rng.normal(size=(3, 3)), "e.b": rng.normal(size=3) / 3, "pos": rng.normal(size=(2, 3)) / 3,
            "h.W": rng.normal(size=(3, 3)), "h.b": np.zeros(3)}
  params.update(crown.centring_params("n", 3))
  x = b.bounded_norm(b.offset(b.linear(0, "e", 3), "pos"), "n", radius)
  b.linear(b.row_mean(x), "h", 3)
  return b.graph(), {k: jnp.asarray(v) for k, v in params.items()}


@pytest.mark.parametrize("norm,box,eps,radius", [("2", (0.0, 1.0), 0.6, 1.5), ("inf", None, 0.35, 0.2)])
def test_boxes_and_lines_through_bounded_normalisation_hold_where_the_norm_crosses_its_radius(norm, box, eps, radius):
  """Bounded normalisation c·min(1, r/‖c‖) and mean pooling at a radius where the products c·g are relaxed on wide
  boxes and each row's norm interval [l, u] is in one of the scale's two non-trivial cases (checked): l < r < u
  (the kink of min(1, r/n)) with r = 1.5, or r ≤ l (the convex r/n, whose decreasing lower line sends a negative
  coefficient to the norm) with r = 0.2. Each node's CROWN box holds the node's value, the final lines hold
  pointwise at sampled points and each coordinate's gradient-descent extremes, and are the Jacobian at radius 0.
  Catches a wrong interval rule (the box's nearest point to 0, a decreasing scale's ends), a norm or scale line or
  a product plane taken on the wrong side in the backward pass, or a mean's dropped 1/T."""
  rng = np.random.default_rng(16)
  with jax.enable_x64(True):
    graph, params = _small_normed_net(rng, radius)
    x0 = jnp.asarray(rng.uniform(0.2, 0.8, size=(2, 3)))
    boxes = _check_boxes_and_lines(graph, params, x0, eps, norm, box)
  lo, hi = _unstable(graph, boxes, "bscale")
  assert np.all((lo < radius) & (hi > radius)) if radius > 1 else np.all(lo >= radius), (lo, hi)


def _linear_min_over_ball_and_box(g, x0, eps, lo, hi):
  """min of g·x over {‖x − x0‖₂ ≤ ε} ∩ [lo, hi] (x0 in the box), exactly: the minimiser is clip(x0 − t·g, lo, hi)
  for the t ≥ 0 at which it reaches the sphere (or t → ∞ when it never does; KKT), found by bisection."""
  point = lambda t: np.clip(x0 - t * g, lo, hi)  # noqa: E731
  if np.linalg.norm(point(1e12) - x0) <= eps:
    return float(g @ point(1e12))
  a, b = 0.0, 1e12
  for _ in range(200):
    m = 0.5 * (a + b)
    a, b = (m, b) if np.linalg.norm(point(m) - x0) < eps else (a, m)
  return float(g @ point(a))


@pytest.mark.parametrize("norm,box", [("2", None), ("inf", None), ("inf", (0.0, 1.0)), ("2", (0.0, 1.0))])
def test_a_linear_models_margin_and_output_bounds_are_their_closed_forms(norm, box):
  """f(x) = x W + b (4 inputs, 4 classes, no nonlinearity, so CROWN's bound is the concretization alone): the lower
  bound of a linear function a·x + c (a margin f_y − f_j, a = W[:, y] − W[:, j], for the first and the last label;
  or an output, and −the upper bound of one) is, with ε = 0.3: ℓ2 a·x₀ + c − ε‖a‖₂; ℓ∞ a·x₀ + c − ε‖a‖₁; ℓ∞ ∩ box
  the minimum over the box [max(x₀ − ε, 0), min(x₀ + ε, 1)] (exact); ℓ2 ∩ box the larger of the ℓ2 bound and that
  box's (each holds; x₀ is near the box's faces, and each is the larger for some margin), never above the exact
  minimum over the ball ∩ box. Catches a swapped sign or norm in the concretization, min/max of the two ℓ2 ∩ box
  bounds exchanged, an off-by-one in which margins are taken, and an interval bound of the spec (which every bound
  is intersected with) made too tight."""
  rng = np.random.default_rng(17)
  w, bias = rng.normal(size=(4, 4)), rng.normal(size=4)
  x0 = np.array([0.01, 0.99, 0.02, 0.6])
  eps = 0.3
  b = crown.Builder((4,))
  b.linear(0, "l", 4)
  lo, hi = (np.maximum(x0 - eps, 0.0), np.minimum(x0 + eps, 1.0)) if box else (x0 - eps, x0 + eps)

  def want(a, c):
    """The documented lower bound of a·x + c, for each column of a [d, k]."""
    ball = a.T @ x0 + c - eps * np.linalg.norm(a, ord=2 if norm == "2" else 1, axis=0)
    over_box = np.minimum(a * lo[:, None], a * hi[:, None]).sum(0) + c
    return ball if box is None else over_box if norm == "inf" else np.maximum(ball, over_box), over_box - ball

  with jax.enable_x64(True):
    params = {"l.W": jnp.asarray(w), "l.b": jnp.asarray(bias)}
    got = {y: np.asarray(crown.margin_bounds(b.graph(), params, jnp.asarray(x0), y, eps, norm, box)) for y in (0, 3)}
    out_lo, out_hi = (np.asarray(v) for v in crown.output_bounds(b.graph(), params, jnp.asarray(x0), eps, norm, box))
  which = []
  for y, bound in got.items():
    others = [j for j in range(4) if j != y]
    a, c = w[:, [y]] - w[:, others], bias[y] - bias[others]
    expected, gap = want(a, c)
    which.append(gap)
    np.testing.assert_allclose(bound, expected, rtol=1e-12, atol=1e-12)
    if norm == "2" and box is not None:
      exact = [_linear_min_over_ball_and_box(a[:, k], x0, eps, 0.0, 1.0) + c[k] for k in range(3)]
      assert np.all(bound <= np.array(exact) + 1e-12)
  which = np.concatenate(which)   # each of the two ℓ2 ∩ box bounds is the larger for some margin
  assert norm != "2" or box is None or (np.any(which > 0.1) and np.any(which < -0.1))
  np.testing.assert_allclose(out_lo, want(w, bias)[0], rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(out_hi, -want(-w, -bias)[0], rtol=1e-12, atol=1e-12)
