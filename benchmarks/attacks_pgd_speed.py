"""Times PGD-L∞ (10 steps, batch 256) in this package's JAX against torchattacks 3.5.1 on one machine.

  python benchmarks/attacks_pgd_speed.py                        # JAX and torch (see --torch-python)
  python benchmarks/attacks_pgd_speed.py --torch-python none    # JAX only
  python benchmarks/attacks_pgd_speed.py --threads 1            # one thread each (shared machines)

PyTorch is not a dependency of this project: the torch half runs in whatever interpreter has torch and
torchattacks (this one if it imports them, else `--torch-python PATH`; benchmarks/torch_interpreter.py says
how to make one), as a subprocess of this script that prints
one JSON line. Both halves attack the same MLP 784-1024-10 (ReLU) with the same numpy-seeded weights,
ε = 8/255, α = 2/255, 10 steps, random start. JAX runs twice: with the weights stored [out, in] as
torch.nn.Linear stores them (the like-for-like comparison) and [in, out] as flax.linen.Dense does.

Printed per implementation: wall ms per batch (median and best), µs per image, the attack's matmul
FLOP/s and its fraction of the machine's matmul peak, measured here with jnp.matmul (the larger of a
2048² square product and the attack's own 256×784×1024 product); and the same in process CPU time,
which other jobs on a shared machine disturb less (it is the fairer figure with --threads 1; with
several threads it also counts OpenMP spin-waiting). FLOPs counted: per step one forward
and one input-gradient backward through both layers, 4·B·(784·1024 + 1024·10); the weight gradients
are not needed and neither implementation computes them.

The small-ViT case (the issue's target: ≥ 2× faster than torchattacks, where eager execution pays per
operation) is benchmarks/attacks_pgd_vit_speed.py, against a weight-for-weight torch twin of
attention/vit.py. Mind the weight layout: flax.linen.Dense stores kernels as [in, out], which made this
MLP's step 0.6–1.1 ms slower in most runs on XLA:CPU (see the two JAX rows). Where the time goes, part by
part: benchmarks/attacks_pgd_breakdown.py.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import record  # noqa: E402
import torch_interpreter
import xla_cpu  # benchmarks/ is sys.path[0] when this runs as a script

TORCH_NEEDS = ("torch", "torchattacks")

SIZES = (784, 1024, 10)
EPS, ALPHA, STEPS = 8 / 255, 2 / 255, 10


def attack_flops(batch: int, steps: int = STEPS) -> float:
  """Matmul FLOPs of `steps` PGD steps: forward plus input-gradient backward through both layers."""
  per_pass = 2 * batch * sum(a * b for a, b in zip(SIZES[:-1], SIZES[1:]))
  return 2 * per_pass * steps


def make_data(batch: int, seed: int = 0) -> dict[str, np.ndarray]:
  """Weights ([in, out]), inputs in [0, 1] and labels, float32, from numpy's PCG64."""
  rng = np.random.default_rng(seed)
  d_in, hidden, classes = SIZES
  return dict(
      w1=(rng.standard_normal((d_in, hidden)) * np.sqrt(2 / d_in)).astype(np.float32),
      b1=np.zeros(hidden, np.float32),
      w2=(rng.standard_normal((hidden, classes)) * np.sqrt(1 / hidden)).astype(np.float32),
      b2=np.zeros(classes, np.float32),
      x=rng.uniform(0, 1, (batch, d_in)).astype(np.float32),
      y=rng.integers(0, classes, batch).astype(np.int64))


def _time(fn, reps: int) -> dict[str, list[float]]:
  """Wall-clock and process CPU seconds of `reps` calls after one warm-up call."""
  fn()  # warm-up: compilation (JAX) or allocator and thread-pool start-up (torch)
  wall, cpu = [], []
  for _ in range(reps):
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    fn()
    wall.append(time.perf_counter() - start_wall)
    cpu.append(time.process_time() - start_cpu)
  return dict(wall=wall, cpu=cpu)


def _peak(times: dict[str, list[float]], flops: float) -> dict[str, float]:
  return {k: flops / min(v) for k, v in times.items()}


@functools.lru_cache(maxsize=None)
def _jax_attack(batch: int, layout: str):
  """The compiled JAX attack on the benchmark MLP, as a zero-argument callable.

  layout "out_in" stores each weight as [out, in] and computes x @ Wᵀ, exactly like torch.nn.Linear;
  "in_out" stores [in, out] and computes x @ W, like flax.linen.Dense. Same function, different
  memory layout: on XLA:CPU the input-gradient GEMM g @ Wᵀ of "in_out" contracts W's minor axis,
  which Eigen runs markedly slower at these shapes.
  """
  import jax
  import jax.numpy as jnp

  from attacks import pgd_linf

  data = make_data(batch)
  if layout == "out_in":
    def apply(params, x):
      w1, b1, w2, b2 = params
      return jnp.maximum(x @ w1.T + b1[None, :], 0.0) @ w2.T + b2[None, :]
    params = tuple(jnp.asarray(data[k].T.copy() if k[0] == "w" else data[k])
                   for k in ("w1", "b1", "w2", "b2"))
  else:
    def apply(params, x):
      w1, b1, w2, b2 = params
      return jnp.maximum(x @ w1 + b1[None, :], 0.0) @ w2 + b2[None, :]
    params = tuple(jnp.asarray(data[k]) for k in ("w1", "b1", "w2", "b2"))
  logits_fn = jax.tree_util.Partial(apply, params)
  x, y = jnp.asarray(data["x"]), jnp.asarray(data["y"], jnp.int32)
  key = jax.random.key(0)

  def attack():
    pgd_linf(logits_fn, x, y, eps=EPS, alpha=ALPHA, steps=STEPS, key=key).x_adv.block_until_ready()
  return attack


def jax_matmul_peak(batch: int, reps: int) -> dict[str, float]:
  """Best float32 jnp.matmul FLOP per wall / CPU second over a 2048² product and the attack's
  256×784×1024 product."""
  import jax
  import jax.numpy as jnp
  peak = dict(wall=0.0, cpu=0.0)
  matmul = jax.jit(jnp.matmul)
  for m, k, n in ((2048, 2048, 2048), (batch, SIZES[0], SIZES[1])):
    a = jnp.asarray(np.random.default_rng(1).standard_normal((m, k)), jnp.float32)
    b = jnp.asarray(np.random.default_rng(2).standard_normal((k, n)), jnp.float32)
    this = _peak(_time(lambda: matmul(a, b).block_until_ready(), reps), 2 * m * k * n)
    peak = {key: max(peak[key], this[key]) for key in peak}
  return peak


def run_jax(batch: int, reps: int, layout: str) -> dict:
  import jax
  return dict(impl=f"jax {jax.__version__} attacks.pgd_linf, W [{layout.replace('_', ', ')}]",
              times=_time(_jax_attack(batch, layout), reps),
              matmul_peak=jax_matmul_peak(batch, max(reps, 10)))


def torch_mlp(data: dict):
  """The benchmark MLP as a torch.nn.Sequential in eval mode, weights copied from ``make_data``'s arrays."""
  import torch
  model = torch.nn.Sequential(torch.nn.Linear(SIZES[0], SIZES[1]), torch.nn.ReLU(),
                              torch.nn.Linear(SIZES[1], SIZES[2]))
  with torch.no_grad():
    for layer, w, b in ((model[0], "w1", "b1"), (model[2], "w2", "b2")):
      layer.weight.copy_(torch.from_numpy(data[w].T.copy()))
      layer.bias.copy_(torch.from_numpy(data[b]))
  return model.eval()


def run_torch(batch: int, reps: int, threads: int = 0) -> dict:
  import torch
  import torchattacks
  if threads:
    torch.set_num_threads(threads)

  data = make_data(batch)
  model = torch_mlp(data)
  x, y = torch.from_numpy(data["x"]), torch.from_numpy(data["y"])
  atk = torchattacks.PGD(model, eps=EPS, alpha=ALPHA, steps=STEPS, random_start=True)
  a = torch.randn(2048, 2048)
  b = torch.randn(2048, 2048)
  return dict(impl=f"torch {torch.__version__} + torchattacks {torchattacks.__version__} (PGD)",
              times=_time(lambda: atk(x, y), reps),
              matmul_peak=_peak(_time(lambda: a @ b, max(reps, 10)), 2 * 2048**3),
              threads=torch.get_num_threads())


def _torch_round(args) -> dict | None:
  """One round of the torch half: in this interpreter if it has torch, else in --torch-python."""
  try:
    import torch  # noqa: F401
    import torchattacks  # noqa: F401
    return run_torch(args.batch, args.reps, args.threads)
  except ImportError:
    pass
  if args.torch_python is None:
    return None
  done = subprocess.run([args.torch_python, __file__, "--only", "torch", "--batch", str(args.batch),
                         "--reps", str(args.reps), "--threads", str(args.threads)],
                        capture_output=True, text=True, check=False)
  if done.returncode != 0:
    print(f"torch half failed:\n{done.stderr[-2000:]}", file=sys.stderr)
    return None
  return json.loads(done.stdout.strip().splitlines()[-1])


def _merge(rounds: list[dict]) -> dict:
  return dict(rounds[0], times={k: [t for r in rounds for t in r["times"][k]] for k in ("wall", "cpu")},
              matmul_peak={k: max(r["matmul_peak"][k] for r in rounds) for k in ("wall", "cpu")})


def main() -> None:
  parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
  parser.add_argument("--batch", type=int, default=256)
  parser.add_argument("--reps", type=int, default=10, help="timed attacks per round and implementation")
  parser.add_argument("--rounds", type=int, default=3,
                      help="alternating JAX / torch rounds, so load from other jobs hits both alike")
  parser.add_argument("--only", choices=("all", "jax", "torch"), default="all")
  torch_interpreter.add_argument(parser, TORCH_NEEDS)
  parser.add_argument("--threads", type=int, default=0,
                      help="intra-op threads for both libraries (0: each library's default, all cores); "
                           "1 is less sensitive to other jobs on a shared machine")
  parser.add_argument("--xla-cpu-tuned", action="store_true", help="add xla_cpu.TUNED_FLAGS to XLA_FLAGS")
  args = parser.parse_args()
  for name in ("batch", "reps", "rounds"):
    if getattr(args, name) < 1:
      parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
  if args.threads < 0:
    parser.error(f"--threads must be >= 0 (0: each library's default), got {args.threads}")
  if args.threads == 1:  # must precede the first jax import (XLA reads it at backend start-up)
    xla_cpu.add_flags("--xla_cpu_multi_thread_eigen=false")
  if args.xla_cpu_tuned:
    xla_cpu.add_flags(*xla_cpu.TUNED_FLAGS)
  elif args.threads > 1:
    print("--threads > 1 applies to torch only; XLA uses all cores", file=sys.stderr)
  if args.only == "all":
    args.torch_python = torch_interpreter.resolve(args.torch_python, TORCH_NEEDS)
  if args.only == "torch":
    try:
      import torchattacks  # noqa: F401
    except ImportError:
      parser.error("--only torch needs an interpreter with torch and torchattacks (see --torch-python)")
    print(json.dumps(run_torch(args.batch, args.reps, args.threads)))
    return

  jax_rounds = {"out_in": [], "in_out": []}
  torch_rounds = []
  for _ in range(args.rounds):
    for layout, rounds in jax_rounds.items():
      rounds.append(run_jax(args.batch, args.reps, layout))
    if args.only == "all":
      torch_round = _torch_round(args)
      if torch_round is not None:
        torch_rounds.append(torch_round)
  results = [_merge(r) for r in jax_rounds.values()] + ([_merge(torch_rounds)] if torch_rounds else [])
  peak = {k: max(r["matmul_peak"][k] for r in results[:2]) for k in ("wall", "cpu")}

  flops = attack_flops(args.batch)
  print(f"PGD-L∞, {STEPS} steps, batch {args.batch}, MLP {'-'.join(map(str, SIZES))}, "
        f"{os.cpu_count()} CPUs, threads={args.threads or 'default'}, "
        f"{args.rounds}×{args.reps} timed runs each; {flops / 1e9:.2f} GFLOP per batch")
  print(f"matmul peak (jnp.matmul, float32): {peak['wall'] / 1e9:.1f} GFLOP/s wall, "
        f"{peak['cpu'] / 1e9:.1f} GFLOP per CPU-second"
        + (f"; torch: {results[2]['matmul_peak']['wall'] / 1e9:.1f} and "
           f"{results[2]['matmul_peak']['cpu'] / 1e9:.1f}" if len(results) > 2 else ""))
  for r in results:
    wall, cpu = r["times"]["wall"], r["times"]["cpu"]
    r["median"], r["best"], r["cpu"] = statistics.median(wall), min(wall), statistics.median(cpu)
    print(f"  {r['impl']:50s} wall median {1e3 * r['median']:6.1f} ms/batch (best {1e3 * r['best']:6.1f})"
          f" = {1e6 * r['median'] / args.batch:5.1f} µs/image, {flops / r['median'] / 1e9:5.1f} GFLOP/s"
          f" = {flops / r['median'] / peak['wall']:4.0%} of peak (best {flops / r['best'] / peak['wall']:4.0%});"
          f" CPU {1e3 * r['cpu']:6.1f} ms = {flops / r['cpu'] / peak['cpu']:4.0%} of CPU peak")
  if len(results) > 2:
    like = results[0]          # weights [out, in], as torch stores them: the like-for-like comparison
    record.emit("pgd_mlp", tuned=xla_cpu.tuned(), jax_ms=1e3 * like["median"], torch_ms=1e3 * results[2]["median"],
                ratio=results[2]["median"] / like["median"], jax_peak=flops / like["median"] / peak["wall"],
                torch_peak=flops / results[2]["median"] / results[2]["matmul_peak"]["wall"])
    for jax_result in results[:2]:
      print(f"  torchattacks / JAX W [{jax_result['impl'].split('[')[1]}: "
            f"{results[2]['median'] / jax_result['median']:.2f}× wall median, "
            f"{results[2]['best'] / jax_result['best']:.2f}× wall best, "
            f"{results[2]['cpu'] / jax_result['cpu']:.2f}× CPU time (> 1: JAX faster)")
  print("  small ViT: python benchmarks/attacks_pgd_vit_speed.py")


if __name__ == "__main__":
  main()
