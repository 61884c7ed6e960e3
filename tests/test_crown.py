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


def _optimised_extremes(graph, params, x0, eps, norm, box, steps=60):
  """Per output, the smallest and largest value projected gradient descent/ascent finds in the input set (one
  compiled program: every output and both signs vmapped)."""
  n_out = int(np.prod(graph.nodes[-1].shape))

  def project(x):
    delta = x - x0
    if norm == "2":
      delta = delta * jnp.minimum(1.0, eps / (jnp.linalg.norm(delta) + 1e-30))
    else:
      delta = jnp.clip(delta, -eps, eps)
    x = x0 + delta
    return x if box is None else jnp.clip(x, *box)

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
