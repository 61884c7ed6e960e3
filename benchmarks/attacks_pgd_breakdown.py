"""Where PGD-L∞ on the benchmark MLP spends its time, in JAX and in PyTorch: the parts of one step timed
separately, medians and spreads over several rounds.

  python benchmarks/attacks_pgd_breakdown.py                       # JAX and torch (see --torch-python)
  python benchmarks/attacks_pgd_breakdown.py --torch-python none   # JAX only

Same MLP 784-1024-10, weights, batch 256, ε = 8/255, α = 2/255 and 10 steps as
benchmarks/attacks_pgd_speed.py. Timed per implementation (each a compiled JAX function or a torch call
sequence, after one warm-up call):

  gemm       the two large products alone: x @ W₁ᵀ [256, 1024] forward and g @ W₁ [256, 784] for the input
             gradient (in the layout under test), nothing else;
  grad       forward plus input-gradient backward, the loss summed over the batch (what every step needs);
  step       one whole PGD step: grad, then x + α·sign(g), the projection onto the ε-box around x and the
             clip to [0, 1];
  project    the projection and clip alone on a [256, 784] batch (the elementwise tail of a step);
  attack     the whole attack as users call it (attacks.pgd_linf / torchattacks.PGD): random start, 10 steps,
             and in JAX the input checks and the final success scoring.

JAX runs with the weights stored [out, in] (torch.nn.Linear's layout, x @ Wᵀ) and [in, out] (flax's, x @ W).
For JAX it also prints, from the compiled HLO of one step, how many fusions and dot products it has and
whether the elementwise tail (sign, step, projection, clip) is one fused loop.

Each figure is the median over rounds × reps timed calls with its spread as [min, max] of the per-round
medians; the summary divides torch's medians by JAX's (> 1: JAX faster). PyTorch is not a dependency of
this project; the torch half runs as in attacks_pgd_speed.py.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys

import numpy as np

import torch_interpreter  # benchmarks/ is sys.path[0] when this runs as a script
from attacks_pgd_speed import ALPHA, EPS, STEPS, TORCH_NEEDS, _time, make_data, torch_mlp

PARTS = ("gemm", "grad", "step", "project", "attack")


def _jax_parts(batch: int, layout: str) -> dict:
  """Zero-argument callables for every part, and HLO facts of one step, for one weight layout."""
  import jax
  import jax.numpy as jnp

  from attacks import pgd_linf
  from attacks.losses import objective_and_grad
  from attacks.projections import project_linf

  data = make_data(batch)
  transpose = layout == "out_in"
  params = tuple(jnp.asarray(data[k].T.copy() if (k[0] == "w" and transpose) else data[k])
                 for k in ("w1", "b1", "w2", "b2"))

  def apply(params, x):
    w1, b1, w2, b2 = params
    if transpose:
      return jnp.maximum(x @ w1.T + b1[None, :], 0.0) @ w2.T + b2[None, :]
    return jnp.maximum(x @ w1 + b1[None, :], 0.0) @ w2 + b2[None, :]

  logits_fn = jax.tree_util.Partial(apply, params)
  x, y = jnp.asarray(data["x"]), jnp.asarray(data["y"], jnp.int32)
  x_t = jnp.clip(x + 0.5 * EPS, 0.0, 1.0)

  grad = jax.jit(lambda x_t: objective_and_grad(logits_fn, x_t, y)[2])
  w1 = params[0]
  g_h = jnp.asarray(np.random.default_rng(3).standard_normal((batch, w1.size // x.shape[1])), jnp.float32)
  if transpose:  # w1 is [out, in]
    gemm = jax.jit(lambda x_t, g: (x_t @ w1.T, g @ w1))
  else:  # w1 is [in, out]
    gemm = jax.jit(lambda x_t, g: (x_t @ w1, g @ w1.T))

  def one_step(x_t):
    g = objective_and_grad(logits_fn, x_t, y)[2]
    return project_linf(x_t + ALPHA * jnp.sign(g), x, EPS, 0.0, 1.0)

  step = jax.jit(one_step)
  project = jax.jit(lambda x_t: project_linf(x_t + ALPHA, x, EPS, 0.0, 1.0))
  key = jax.random.key(0)
  hlo = step.lower(x_t).compile().as_text()
  fusions = re.findall(r"^\s*%?\S*fusion\S* = .* fusion\(.*kind=(k\w+)", hlo, flags=re.M)
  tail_fused = any("sign" in block and "clamp" in block
                   for block in re.split(r"\n(?=\S)", hlo) if block.lstrip().startswith("%fused")
                   or block.lstrip().startswith("fused"))
  facts = dict(fusions=len(fusions), fusion_kinds=sorted(set(fusions)), dots=len(re.findall(r" dot\(", hlo)),
               loops=len(re.findall(r" while\(", hlo)),
               custom_calls=len(re.findall(r"custom-call\(", hlo)), tail_in_one_fusion=tail_fused)
  return dict(
      gemm=lambda: jax.block_until_ready(gemm(x_t, g_h)),
      grad=lambda: grad(x_t).block_until_ready(),
      step=lambda: step(x_t).block_until_ready(),
      project=lambda: project(x_t).block_until_ready(),
      attack=lambda: pgd_linf(logits_fn, x, y, eps=EPS, alpha=ALPHA, steps=STEPS, key=key).x_adv.block_until_ready(),
  ), facts


def _torch_parts(batch: int, threads: int) -> dict:
  import torch
  import torchattacks
  if threads:
    torch.set_num_threads(threads)
  data = make_data(batch)
  model = torch_mlp(data)
  for p in model.parameters():  # torchattacks leaves them on; off here measures the input gradient alone
    p.requires_grad_(False)
  x, y = torch.from_numpy(data["x"]), torch.from_numpy(data["y"])
  x_t = torch.clamp(x + 0.5 * EPS, 0, 1)
  loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")

  def grad():
    xa = x_t.clone().requires_grad_(True)
    return torch.autograd.grad(loss_fn(model(xa), y), xa)[0]

  def project(adv):  # torchattacks.PGD's update, line for line
    delta = torch.clamp(adv - x, min=-EPS, max=EPS)
    return torch.clamp(x + delta, min=0, max=1).detach()

  def step():
    return project(x_t + ALPHA * grad().sign())

  w1 = model[0].weight  # [out, in]
  g_h = torch.from_numpy(np.random.default_rng(3).standard_normal((batch, w1.shape[0])).astype(np.float32))

  def gemm():
    return x_t @ w1.T, g_h @ w1

  atk = torchattacks.PGD(model, eps=EPS, alpha=ALPHA, steps=STEPS, random_start=True)
  return dict(gemm=gemm, grad=grad, step=step, project=lambda: project(x_t + ALPHA), attack=lambda: atk(x, y))


def _round(parts: dict, reps: int) -> dict:
  return {name: _time(fn, reps)["wall"] for name, fn in parts.items()}


def run_torch_rounds(batch: int, reps: int, rounds: int, threads: int) -> dict:
  import torch
  import torchattacks
  parts = _torch_parts(batch, threads)
  return dict(impl=f"torch {torch.__version__} + torchattacks {torchattacks.__version__}",
              rounds=[_round(parts, reps) for _ in range(rounds)])


def _summary(rounds: list[dict]) -> dict:
  """{part: (median over all calls, min of round medians, max of round medians)} in seconds."""
  out = {}
  for part in PARTS:
    medians = [statistics.median(r[part]) for r in rounds]
    out[part] = (statistics.median([t for r in rounds for t in r[part]]), min(medians), max(medians))
  return out


def main() -> None:
  parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
  parser.add_argument("--batch", type=int, default=256)
  parser.add_argument("--reps", type=int, default=20, help="timed calls per part and round")
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--only", choices=("all", "jax", "torch"), default="all")
  parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: its default)")
  torch_interpreter.add_argument(parser, TORCH_NEEDS)
  args = parser.parse_args()
  for name in ("batch", "reps", "rounds"):
    if getattr(args, name) < 1:
      parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
  if args.only == "torch":
    print(json.dumps(run_torch_rounds(args.batch, args.reps, args.rounds, args.threads)))
    return

  results, facts = {}, {}
  import jax
  for layout in ("out_in", "in_out"):
    parts, facts[layout] = _jax_parts(args.batch, layout)
    results[f"jax {jax.__version__}, W [{layout.replace('_', ', ')}]"] = [
        _round(parts, args.reps) for _ in range(args.rounds)]
  torch_python = None if args.only == "jax" else torch_interpreter.resolve(args.torch_python, TORCH_NEEDS)
  if torch_python is not None:
    done = subprocess.run([torch_python, __file__, "--only", "torch", "--batch", str(args.batch), "--reps",
                           str(args.reps), "--rounds", str(args.rounds), "--threads", str(args.threads)],
                          capture_output=True, text=True, check=False)
    if done.returncode == 0:
      torch_result = json.loads(done.stdout.strip().splitlines()[-1])
      results[torch_result["impl"]] = torch_result["rounds"]
    else:
      print(f"torch half failed:\n{done.stderr[-2000:]}", file=sys.stderr)

  print(f"PGD-L∞ parts, MLP 784-1024-10, batch {args.batch}, {args.rounds} rounds × {args.reps} calls; "
        "ms: median [min, max of the round medians]")
  print(f"  {'implementation':40s}" + "".join(f"{p:>22s}" for p in PARTS))
  summaries = {impl: _summary(rounds) for impl, rounds in results.items()}
  for impl, summary in summaries.items():
    print(f"  {impl:40s}" + "".join(
        f"{1e3 * m:7.2f} [{1e3 * lo:5.2f}, {1e3 * hi:5.2f}]" for m, lo, hi in summary.values()))
  for impl, summary in summaries.items():
    s = {p: v[0] for p, v in summary.items()}
    print(f"  {impl}: step − grad = {1e3 * (s['step'] - s['grad']):.2f} ms (the elementwise tail inside a "
          f"step); attack − {STEPS}·step = {1e3 * (s['attack'] - STEPS * s['step']):.2f} ms (start, checks, "
          "scoring, loop)")
  for layout, f in facts.items():
    print(f"  HLO of one JAX step, W [{layout.replace('_', ', ')}]: {f['fusions']} fusions "
          f"({', '.join(f['fusion_kinds'])}), {f['dots']} dots, {f['loops']} while loops, {f['custom_calls']} custom "
          "calls; "
          f"sign/step/projection/clip in one fusion: {f['tail_in_one_fusion']}")
  torch_impl = next((i for i in summaries if i.startswith("torch")), None)
  if torch_impl is not None:
    for impl in summaries:
      if impl != torch_impl:
        print(f"  torch / {impl}: " + ", ".join(
            f"{p} {summaries[torch_impl][p][0] / summaries[impl][p][0]:.2f}×" for p in PARTS))


if __name__ == "__main__":
  main()
