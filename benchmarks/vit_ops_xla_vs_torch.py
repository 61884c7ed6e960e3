"""Times the small ViT's individual operations in XLA:CPU (jitted JAX) and in PyTorch's eager CPU kernels,
at the shapes of the PGD benchmark (batch 256, 65 tokens, width 64, 4 heads of width 16, MLP width 128).

  python benchmarks/vit_ops_xla_vs_torch.py [--torch-python PATH] [--batch 256]   # default: this Python

It explains benchmarks/attacks_pgd_vit_speed.py: at batch 256 PGD on the ViT is bound by these kernels, not
by per-operation dispatch. The last row is one layer's whole attention core, softmax(QKᵀ/√d)V, forward and
input-gradient backward (what each PGD step runs per layer). The torch half runs in an interpreter that has torch (a subprocess; PyTorch is not
a project dependency). Printed: best-of-20 wall ms per op in each library and the ratio torch / XLA (> 1: XLA
faster), both on all cores. A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import torch_interpreter  # benchmarks/ is sys.path[0] when this runs as a script

HEADS, TOKENS, DIM, HIDDEN = 4, 65, 64, 128

# name -> (jax expression, torch expression) over the same named inputs.
OPS = {
    "dense q/k/v/out [B·N, 64] @ [64, 64]": ("x @ w", "x @ w"),
    "dense MLP in [B·N, 64] @ [64, 128]": ("x @ w1", "x @ w1"),
    "scores Q Kᵀ per head": ("jnp.einsum('bhnd,bhmd->bhnm', q, k)", "q @ k.transpose(-1, -2)"),
    "softmax over keys": ("jax.nn.softmax(s, axis=-1)", "torch.softmax(s, dim=-1)"),
    "A V per head": ("jnp.einsum('bhnm,bhme->bhne', s, v)", "s @ v"),
    "LayerNorm(64)": ("ln(x)", "torch.nn.functional.layer_norm(x, (64,), eps=1e-6)"),
    "GELU (tanh) on [B, N, 128]": ("jax.nn.gelu(h)", "torch.nn.functional.gelu(h, approximate='tanh')"),
    # One layer's attention core softmax(QKᵀ/√d)V, forward and input-gradient backward, as in a PGD step.
    "attention core fwd+bwd (one layer)": ("jax.vjp(attention, q, k, v)[1](ct)", "attention_vjp(q, k, v, ct)"),
}

TORCH_HALF = r'''
import json, sys, time, torch
B, H, N, D, F = (int(a) for a in sys.argv[1:6])
ops = json.loads(sys.argv[6])
d = D // H
g = torch.Generator().manual_seed(0)
x = torch.randn(B, N, D, generator=g); w = torch.randn(D, D, generator=g); w1 = torch.randn(D, F, generator=g)
q, k, v = (torch.randn(B, H, N, d, generator=g) for _ in range(3))
s = torch.randn(B, H, N, N, generator=g); h = torch.randn(B, N, F, generator=g)
ct = torch.randn(B, H, N, d, generator=g)
def attention_vjp(q, k, v, ct):
  q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
  out = torch.softmax((q * d ** -0.5) @ k.transpose(-1, -2), dim=-1) @ v
  return torch.autograd.grad(out, (q, k, v), ct)
out = {}
for name, expr in ops.items():
  fn = eval("lambda: " + expr)
  fn(); ts = []
  for _ in range(20):
    t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
  out[name] = min(ts)
print(json.dumps(dict(times=out, threads=torch.get_num_threads(), version=torch.__version__)))
'''


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
  torch_interpreter.add_argument(parser, ("torch",))
  parser.add_argument("--batch", type=int, default=256)
  args = parser.parse_args(argv)
  if args.batch < 1:
    parser.error(f"--batch must be >= 1, got {args.batch}")
  args.torch_python = torch_interpreter.require(args.torch_python, ("torch",))
  import flax.linen as nn
  import jax
  import jax.numpy as jnp

  b, d = args.batch, DIM // HEADS
  keys = iter(jax.random.split(jax.random.PRNGKey(0), 10))
  env = dict(jax=jax, jnp=jnp,
             x=jax.random.normal(next(keys), (b, TOKENS, DIM)), w=jax.random.normal(next(keys), (DIM, DIM)),
             w1=jax.random.normal(next(keys), (DIM, HIDDEN)),
             q=jax.random.normal(next(keys), (b, HEADS, TOKENS, d)),
             k=jax.random.normal(next(keys), (b, HEADS, TOKENS, d)),
             v=jax.random.normal(next(keys), (b, HEADS, TOKENS, d)),
             s=jax.random.normal(next(keys), (b, HEADS, TOKENS, TOKENS)),
             h=jax.random.normal(next(keys), (b, TOKENS, HIDDEN)),
             ct=jax.random.normal(next(keys), (b, HEADS, TOKENS, d)))
  env["attention"] = lambda q, k, v: jnp.einsum(
      "bhnm,bhme->bhne", jax.nn.softmax(jnp.einsum("bhnd,bhmd->bhnm", q * d ** -0.5, k), axis=-1), v)
  layer_norm = nn.LayerNorm(epsilon=1e-6)
  ln_params = layer_norm.init(next(keys), env["x"])
  env["ln"] = lambda t: layer_norm.apply(ln_params, t)  # params are small constants
  arrays = {k: a for k, a in env.items() if isinstance(a, jax.Array)}
  xla = {}
  for name, (expr, _) in OPS.items():
    # The inputs are arguments, not closed-over constants (XLA would constant-fold the op away).
    fn = jax.jit(eval(f"lambda {', '.join(arrays)}: {expr}", env))  # noqa: S307 - fixed expressions above
    jax.block_until_ready(fn(**arrays))
    times = []
    for _ in range(20):
      t0 = time.perf_counter()
      jax.block_until_ready(fn(**arrays))
      times.append(time.perf_counter() - t0)
    xla[name] = min(times)
  done = subprocess.run([args.torch_python, "-c", TORCH_HALF, str(b), str(HEADS), str(TOKENS), str(DIM),
                         str(HIDDEN), json.dumps({k: t for k, (_, t) in OPS.items()})],
                        capture_output=True, text=True)
  if done.returncode:
    sys.exit(f"torch half failed (is --torch-python an interpreter with torch?):\n{done.stderr[-2000:]}")
  torch_res = json.loads(done.stdout.strip().splitlines()[-1])
  print(f"batch {b}, {TOKENS} tokens, width {DIM}, {HEADS} heads; XLA:CPU (jax {jax.__version__}) vs torch "
        f"{torch_res['version']} ({torch_res['threads']} threads); best of 20, ms")
  print(f"{'op':40s} {'XLA':>8} {'torch':>8}  torch/XLA")
  for name in OPS:
    tx, tt = xla[name], torch_res["times"][name]
    print(f"{name:40s} {1e3 * tx:8.2f} {1e3 * tt:8.2f}  {tt / tx:5.2f}×")


if __name__ == "__main__":
  main()
