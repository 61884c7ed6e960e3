"""Times PGD-L∞ (10 steps) on this project's small ViT against torchattacks 3.5.1 on a weight-for-weight
PyTorch twin of it, over batch sizes.

  python benchmarks/attacks_pgd_vit_speed.py                          # batch 256, XLA's default threading
  python benchmarks/attacks_pgd_vit_speed.py --batch 1 8 32 256       # where per-op overhead matters
  python benchmarks/attacks_pgd_vit_speed.py --devices 2              # one single-threaded XLA device per core
  python benchmarks/attacks_pgd_vit_speed.py --devices 2 --xla-cpu-tuned --attention differential

The ViT is ``attention.vit.VisionTransformer`` with its default CPU config (CIFAR-10 32×32, patch 4, width
64, depth 2, 4 heads, class token); ``--attention differential`` times its matched DiffViT (2 differential
heads, the λ_init depth schedule) against a torch twin of differential attention. Its weights are exported
to an npz file; the torch half (run as a subprocess in an interpreter that has torch and torchattacks: this
one if it imports them, else `--torch-python PATH`; PyTorch is not a project dependency) rebuilds the same
network, checks that its logits equal the JAX logits on the same images (prints the max abs
difference), and times torchattacks' PGD. Both use ε = 8/255, α = 2/255, 10 steps, random start, on the
same CIFAR-10 test images.

``--devices N`` splits the host into N XLA CPU devices with single-threaded Eigen each
(``--xla_force_host_platform_device_count``); ``attacks`` then shards every batch over them (data
parallel over cores). ``--xla-cpu-tuned`` adds ``xla_cpu.TUNED_FLAGS`` (XLA:CPU hands only its matrix
products and convolutions to the YNNPACK library, one at a time, and fuses the elementwise work itself;
docs/performance.md#xlacpu-settings). torch always uses its intra-op thread pool (``--threads``, default all
cores).

Printed per batch size: ms per batch (median and best of the timed runs, wall-clock), µs per image, median
process CPU time, the ratio torch / JAX (> 1: JAX faster), and the matmul FLOP/s each reaches as a fraction of the
machine's float32 matmul peak (measured here with a 2048² product in each library). Matmul FLOPs counted
per PGD step: one forward and one input-gradient backward; a linear layer costs one product in the
backward (w.r.t. its input), the two attention products (QKᵀ and AV) two each; plus the forward that
scores the final iterate (JAX's AttackResult.success; torchattacks has no such pass). A benchmark, not a
test.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import record  # noqa: E402
import torch_interpreter
import xla_cpu  # benchmarks/ is sys.path[0] when this runs as a script

EPS, ALPHA, STEPS = 8 / 255, 2 / 255, 10

TORCH_HALF = r'''
import json, sys, time
import numpy as np, torch, torchattacks
path, cfg, threads, reps = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
batches = [int(b) for b in sys.argv[5].split(",")]
torch.set_num_threads(threads)
z = np.load(path)
t = lambda a: torch.from_numpy(np.ascontiguousarray(a))

class Block(torch.nn.Module):
  def __init__(self, p, heads, dim, lambda_init):
    super().__init__()
    self.p, self.h, self.d, self.lambda_init = p, heads, dim // heads, lambda_init
  def ln(self, x, name):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], t(z[name + "/scale"]), t(z[name + "/bias"]), 1e-6)
  def attention(self, y):
    p, (b, n, dim) = self.p + "attention/", y.shape
    q, k, v = (y @ t(z[p + w + "/kernel"]) for w in ("q_proj", "k_proj", "v_proj"))
    if cfg["attention"] == "standard":
      split = lambda u: u.reshape(b, n, self.h, self.d).transpose(1, 2)
      a = torch.softmax((split(q) * self.d ** -0.5) @ split(k).transpose(-1, -2), dim=-1)
      return (a @ split(v)).transpose(1, 2).reshape(b, n, dim) @ t(z[p + "out_proj/kernel"])
    h, d = self.h // 2, self.d  # differential heads; query/key head 2i + j is map j of head i
    pairs = lambda u: u.reshape(b, n, h, 2, d).permute(0, 2, 3, 1, 4)
    q, k, v = pairs(q), pairs(k), v.reshape(b, n, h, 2 * d).transpose(1, 2)
    a1, a2 = (torch.softmax((q[:, :, j] * d ** -0.5) @ k[:, :, j].transpose(-1, -2), dim=-1) for j in (0, 1))
    lam = (torch.exp((t(z[p + "lambda_q1"]) * t(z[p + "lambda_k1"])).sum())
           - torch.exp((t(z[p + "lambda_q2"]) * t(z[p + "lambda_k2"])).sum()) + self.lambda_init)
    o = (a1 - lam * a2) @ v
    o = o * torch.rsqrt(o.square().mean(-1, keepdim=True) + 1e-5) * t(z[p + "norm_gain"]) * (1 - self.lambda_init)
    return o.transpose(1, 2).reshape(b, n, dim) @ t(z[p + "out_proj/kernel"])
  def forward(self, x):
    p = self.p
    x = x + self.attention(self.ln(x, p + "norm_attention"))
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
    self.blocks = [Block(f"block_{l}/", cfg["num_heads"], dim, cfg["lambda_init"][l]) for l in range(cfg["depth"])]
  def forward(self, x_nchw):
    tok = self.conv(x_nchw).flatten(2).transpose(1, 2)
    b = tok.shape[0]
    tok = torch.cat([t(z["cls_token"]).expand(b, 1, -1), tok], 1) + t(z["pos_embed"])
    for blk in self.blocks:
      tok = blk(tok)
    tok = torch.nn.functional.layer_norm(tok, tok.shape[-1:], t(z["final_norm/scale"]), t(z["final_norm/bias"]), 1e-6)
    return tok[:, 0] @ t(z["head/kernel"]) + t(z["head/bias"])

model = ViT().eval()
x_all = t(z["x"].transpose(0, 3, 1, 2))
y_all = t(z["y"]).long()
with torch.no_grad():
  diff = float((model(x_all) - t(z["logits"])).abs().max())

def timed(fn, reps):
  fn()
  wall, cpu = [], []
  for _ in range(reps):
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    wall.append(time.perf_counter() - w0); cpu.append(time.process_time() - c0)
  return dict(wall=wall, cpu=cpu)

a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
peak = 2 * 2048 ** 3 / min(timed(lambda: a @ b, 10)["wall"])
atk = torchattacks.PGD(model, eps=%(eps)r, alpha=%(alpha)r, steps=%(steps)d, random_start=True)
times = {str(n): timed(lambda: atk(x_all[:n], y_all[:n]), reps) for n in batches}
print(json.dumps(dict(max_abs_logit_diff=diff, times=times, matmul_peak=peak, threads=torch.get_num_threads(),
                      versions=f"torch {torch.__version__} + torchattacks {torchattacks.__version__}")))
''' % dict(eps=EPS, alpha=ALPHA, steps=STEPS)


def vit_matmul_flops(config, batch: int, steps: int = STEPS) -> float:
  """Matmul FLOPs of PGD on the ViT: `steps` × (forward + input-gradient backward) + one scoring forward.

  Per image and forward: patch embedding 2·P·(p²·C)·D (P patches), per block 2·N·D·(4D + 2·hidden) for
  the linear layers and 2·2·N²·D for QKᵀ and AV (N tokens), the head 2·D·classes. The backward costs the
  linear products once and the attention products twice.
  """
  n, d = config.num_tokens, config.dim
  patches = (config.image_size // config.patch_size) ** 2
  hidden = max(1, int(round(config.mlp_ratio * d)))
  linear = 2 * patches * config.patch_size ** 2 * 3 * d + config.depth * 2 * n * d * (4 * d + 2 * hidden) \
      + 2 * d * config.num_classes
  attention = config.depth * 2 * 2 * n * n * d
  return batch * (steps * (2 * linear + 3 * attention) + linear + attention)


def _timed(fn, reps: int) -> dict[str, list[float]]:
  fn()  # compilation
  wall, cpu = [], []
  for _ in range(reps):
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    wall.append(time.perf_counter() - w0)
    cpu.append(time.process_time() - c0)
  return dict(wall=wall, cpu=cpu)


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
  parser.add_argument("--batch", type=int, nargs="+", default=[256], help="batch sizes (≤ 1000)")
  parser.add_argument("--devices", type=int, default=1,
                      help="XLA CPU devices, single-threaded each (1: one device using every core)")
  torch_interpreter.add_argument(parser, ("torch", "torchattacks"))
  parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch intra-op threads")
  parser.add_argument("--reps", type=int, default=5, help="timed attacks per batch size and library")
  parser.add_argument("--attention", choices=("standard", "differential"), default="standard",
                      help="the ViT or its matched DiffViT")
  parser.add_argument("--xla-cpu-tuned", action="store_true", help="add xla_cpu.TUNED_FLAGS to XLA_FLAGS")
  args = parser.parse_args(argv)
  if args.devices < 1 or args.reps < 1 or args.threads < 1 or any(not 1 <= b <= 1000 for b in args.batch):
    parser.error("--devices, --reps and --threads must be >= 1 and every --batch in [1, 1000]")
  args.torch_python = torch_interpreter.require(args.torch_python, ("torch", "torchattacks"))
  if args.devices > 1:  # must precede the first jax import: XLA reads it when the backend starts
    xla_cpu.add_flags(*xla_cpu.one_device_per_core(args.devices))
  if args.xla_cpu_tuned:
    xla_cpu.add_flags(*xla_cpu.TUNED_FLAGS)
  import jax
  import jax.numpy as jnp
  from flax.traverse_util import flatten_dict

  import attacks
  from attention.vit import ViTConfig, VisionTransformer, init_params, matched_configs
  from experiments.data import load_dataset

  config = matched_configs(ViTConfig())[args.attention == "differential"]
  params = init_params(config, key=jax.random.PRNGKey(0))
  data = load_dataset("cifar10", "test", n=max(args.batch), seed=0)
  model = VisionTransformer(config)
  apply = lambda p, x: model.apply({"params": p}, x)  # noqa: E731
  logits_fn = jax.tree_util.Partial(apply, params)
  x_all, y_all = jnp.asarray(data.x), jnp.asarray(data.y)
  key = jax.random.PRNGKey(1)
  jax_times = {}
  for n in args.batch:
    x, y = x_all[:n], y_all[:n]
    jax_times[n] = _timed(lambda: jax.block_until_ready(attacks.pgd_linf(  # noqa: B023
        logits_fn, x, y, eps=EPS, alpha=ALPHA, steps=STEPS, key=key).x_adv), args.reps)
  a = jnp.asarray(np.random.default_rng(0).standard_normal((2048, 2048)), jnp.float32)
  matmul = jax.jit(jnp.matmul)
  jax_peak = 2 * 2048 ** 3 / min(_timed(lambda: matmul(a, a).block_until_ready(), 10)["wall"])

  weights = {"/".join(k): np.asarray(v) for k, v in flatten_dict(jax.device_get(params)).items()}
  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "vit.npz")
    np.savez(path, x=np.asarray(data.x), y=np.asarray(data.y), logits=np.asarray(apply(params, x_all)),
             **weights)
    cfg = json.dumps(dict(patch_size=config.patch_size, dim=config.dim, depth=config.depth,
                          num_heads=config.num_heads, attention=config.attention,
                          lambda_init=[config.lambda_init_at(l) for l in range(config.depth)]))
    out = subprocess.run([args.torch_python, "-c", TORCH_HALF, path, cfg, str(args.threads), str(args.reps),
                          ",".join(map(str, args.batch))], capture_output=True, text=True)
  if out.returncode:
    sys.exit(f"torch half failed:\n{out.stderr[-2000:]}")
  torch_res = json.loads(out.stdout.strip().splitlines()[-1])

  standard = config.attention == "standard"
  heads = f"{config.num_heads} heads" if standard else f"{config.num_heads // 2} differential heads"
  print(f"PGD-L∞ {STEPS} steps on the small {'ViT' if standard else 'DiffViT'} (dim {config.dim}, "
        f"depth {config.depth}, {heads}, {config.num_tokens} tokens), {os.cpu_count()} CPUs, {args.reps} timed runs")
  print(f"JAX {jax.__version__}: {len(jax.devices())} XLA device(s) "
        f"({'one thread each' if args.devices > 1 else 'Eigen thread pool'}"
        f"{', xla_cpu.TUNED_FLAGS' if xla_cpu.tuned() else ''}); matmul peak "
        f"{jax_peak / 1e9:.0f} GFLOP/s. {torch_res['versions']}: {torch_res['threads']} threads; matmul peak "
        f"{torch_res['matmul_peak'] / 1e9:.0f} GFLOP/s. Twin's max |logit diff| = "
        f"{torch_res['max_abs_logit_diff']:.2e}")
  print(f"{'batch':>5}  {'JAX ms (best)':>15} {'µs/img':>7} {'CPU ms':>7} {'peak':>5}   {'torch ms (best)':>16} "
        f"{'µs/img':>7} {'CPU ms':>7} {'peak':>5}   torch/JAX wall, CPU")
  for n in args.batch:
    flops = vit_matmul_flops(config, n)
    j, t = jax_times[n], torch_res["times"][str(n)]
    jm, tm = statistics.median(j["wall"]), statistics.median(t["wall"])
    jc, tc = statistics.median(j["cpu"]), statistics.median(t["cpu"])
    print(f"{n:5d}  {1e3 * jm:7.1f} ({1e3 * min(j['wall']):6.1f}) {1e6 * jm / n:7.0f} {1e3 * jc:7.1f} "
          f"{flops / jm / jax_peak:5.0%}   {1e3 * tm:8.1f} ({1e3 * min(t['wall']):6.1f}) {1e6 * tm / n:7.0f} "
          f"{1e3 * tc:7.1f} {flops / tm / torch_res['matmul_peak']:5.0%}   {tm / jm:5.2f}×, {tc / jc:5.2f}×")
    record.emit("pgd_vit", attention=config.attention, devices=len(jax.devices()), tuned=xla_cpu.tuned(), batch=n,
                jax_ms=1e3 * jm, torch_ms=1e3 * tm, ratio=tm / jm, jax_peak=flops / jm / jax_peak,
                torch_peak=flops / tm / torch_res["matmul_peak"], cpu_ratio=tc / jc)


if __name__ == "__main__":
  main()
