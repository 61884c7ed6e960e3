"""Times PGD-L∞ (10 steps, batch 256) on this project's small ViT against torchattacks 3.5.1 on a
weight-for-weight PyTorch twin of it.

  python benchmarks/attacks_pgd_vit_speed.py [--torch-python /tmp/torchref/bin/python] [--threads 1]

The ViT is ``attention.vit.VisionTransformer`` with its default CPU config (CIFAR-10 32×32, patch 4, width
64, depth 2, 4 heads, class token). Its weights are exported to an npz file; the torch half (run as a
subprocess in an interpreter that has torch and torchattacks, see scripts/torchattacks_crosscheck.py for that
environment; PyTorch is not a project dependency) rebuilds the same network, checks that its logits equal
the JAX logits on the same images (prints the max abs difference), and times torchattacks' PGD. Both use
ε = 8/255, α = 2/255, 10 steps, random start, on the same 256 images. Printed: ms per batch (best of the
rounds, wall and process CPU time) and the ratio torch / JAX. A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

EPS, ALPHA, STEPS, BATCH = 8 / 255, 2 / 255, 10, 256

TORCH_HALF = r'''
import json, sys, time
import numpy as np, torch, torchattacks
torch.set_num_threads(int(sys.argv[3]))
z = np.load(sys.argv[1])
cfg = json.loads(sys.argv[2])
t = lambda a: torch.from_numpy(np.ascontiguousarray(a))

class Block(torch.nn.Module):
  def __init__(self, p, heads, dim):
    super().__init__()
    self.p, self.h, self.d = p, heads, dim // heads
  def ln(self, x, name):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], t(z[name + "/scale"]), t(z[name + "/bias"]), 1e-6)
  def forward(self, x):
    p, (b, n, dim) = self.p, x.shape
    y = self.ln(x, p + "norm_attention")
    split = lambda u: u.reshape(b, n, self.h, self.d).transpose(1, 2)
    q, k, v = (split(y @ t(z[p + "attention/" + w + "/kernel"])) for w in ("q_proj", "k_proj", "v_proj"))
    a = torch.softmax((q * self.d ** -0.5) @ k.transpose(-1, -2), dim=-1)
    o = (a @ v).transpose(1, 2).reshape(b, n, dim) @ t(z[p + "attention/out_proj/kernel"])
    x = x + o
    y = self.ln(x, p + "norm_mlp")
    y = torch.nn.functional.gelu(y @ t(z[p + "mlp_in/kernel"]) + t(z[p + "mlp_in/bias"]), approximate="tanh")
    return x + y @ t(z[p + "mlp_out/kernel"]) + t(z[p + "mlp_out/bias"])

class ViT(torch.nn.Module):
  def __init__(self):
    super().__init__()
    ps, dim = cfg["patch_size"], cfg["dim"]
    self.conv = torch.nn.Conv2d(3, dim, ps, stride=ps)
    with torch.no_grad():
      self.conv.weight.copy_(t(z["patch_embed/kernel"].transpose(3, 2, 0, 1)))
      self.conv.bias.copy_(t(z["patch_embed/bias"]))
    self.blocks = [Block(f"block_{l}/", cfg["num_heads"], dim) for l in range(cfg["depth"])]
  def forward(self, x_nchw):
    tok = self.conv(x_nchw).flatten(2).transpose(1, 2)
    b = tok.shape[0]
    tok = torch.cat([t(z["cls_token"]).expand(b, 1, -1), tok], 1) + t(z["pos_embed"])
    for blk in self.blocks:
      tok = blk(tok)
    tok = torch.nn.functional.layer_norm(tok, tok.shape[-1:], t(z["final_norm/scale"]), t(z["final_norm/bias"]), 1e-6)
    return tok[:, 0] @ t(z["head/kernel"]) + t(z["head/bias"])

model = ViT().eval()
x = t(z["x"].transpose(0, 3, 1, 2))
y = t(z["y"]).long()
with torch.no_grad():
  diff = float((model(x) - t(z["logits"])).abs().max())
atk = torchattacks.PGD(model, eps=%(eps)r, alpha=%(alpha)r, steps=%(steps)d, random_start=True)
atk(x, y)
wall, cpu = [], []
for _ in range(int(sys.argv[4])):
  w0, c0 = time.perf_counter(), time.process_time()
  atk(x, y)
  wall.append(time.perf_counter() - w0); cpu.append(time.process_time() - c0)
print(json.dumps(dict(max_abs_logit_diff=diff, wall=min(wall), cpu=min(cpu))))
''' % dict(eps=EPS, alpha=ALPHA, steps=STEPS)


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--torch-python", default="/tmp/torchref/bin/python")
  parser.add_argument("--threads", type=int, default=os.cpu_count())
  parser.add_argument("--rounds", type=int, default=3)
  args = parser.parse_args(argv)
  if args.threads == 1:
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
  import jax
  import jax.numpy as jnp
  from flax.traverse_util import flatten_dict

  import attacks
  from attention.vit import ViTConfig, VisionTransformer, init_params
  from experiments.data import load_dataset

  config = ViTConfig()
  params = init_params(config, key=jax.random.PRNGKey(0))
  data = load_dataset("cifar10", "test", n=BATCH, seed=0)
  model = VisionTransformer(config)
  apply = lambda p, x: model.apply({"params": p}, x)  # noqa: E731
  logits_fn = jax.tree_util.Partial(apply, params)
  x, y = jnp.asarray(data.x), jnp.asarray(data.y)
  run = lambda: jax.block_until_ready(  # noqa: E731
      attacks.pgd_linf(logits_fn, x, y, eps=EPS, alpha=ALPHA, steps=STEPS, key=jax.random.PRNGKey(1)).x_adv)
  run()
  wall, cpu = [], []
  for _ in range(args.rounds):
    w0, c0 = time.perf_counter(), time.process_time()
    run()
    wall.append(time.perf_counter() - w0)
    cpu.append(time.process_time() - c0)
  print(f"JAX ({jax.default_backend()}): {1e3 * min(wall):.1f} ms per batch of {BATCH} (wall), "
        f"{1e3 * min(cpu):.1f} ms (CPU)")
  weights = {"/".join(k): np.asarray(v) for k, v in flatten_dict(jax.device_get(params)).items()}
  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "vit.npz")
    np.savez(path, x=np.asarray(data.x), y=np.asarray(data.y), logits=np.asarray(apply(params, x)), **weights)
    cfg = json.dumps(dict(patch_size=config.patch_size, dim=config.dim, depth=config.depth,
                          num_heads=config.num_heads))
    out = subprocess.run([args.torch_python, "-c", TORCH_HALF, path, cfg, str(args.threads), str(args.rounds)],
                         capture_output=True, text=True)
  if out.returncode:
    sys.exit(f"torch half failed:\n{out.stderr[-2000:]}")
  torch_res = json.loads(out.stdout.strip().splitlines()[-1])
  print(f"torchattacks (twin, max |logit diff| = {torch_res['max_abs_logit_diff']:.2e}): "
        f"{1e3 * torch_res['wall']:.1f} ms (wall), {1e3 * torch_res['cpu']:.1f} ms (CPU)")
  print(f"ratio torch / JAX: {torch_res['wall'] / min(wall):.2f}x (wall), {torch_res['cpu'] / min(cpu):.2f}x (CPU)")


if __name__ == "__main__":
  main()
