"""Trains the depth-1 and depth-8 ViT / DiffViT pairs on the full CIFAR-10 training files and prints clean
accuracy, PGD and APGD attack success rate at ε = 1/255 and 4/255, and wall times (arXiv 2510.00517: the
single-layer comparison and the depth crossover at depth 8).

  ATTN_DATA_DIR=/path/to/data python benchmarks/diff_attention_accelerator.py            # on a GPU
  ATTN_DATA_DIR=/path/to/data python benchmarks/diff_attention_accelerator.py --smoke    # a 1-minute CPU check

Sized for about 5 minutes on one recent GPU (an estimate from the CPU step times scaled by matmul
throughput; the script has not been run on an accelerator yet — the README says so): width 128, 4
standard / 2 differential heads, patch 4, 15 epochs, batch 256, crop/flip augmentation, warm-up and cosine
schedule; attacks on the first 1,000 images of the data directory's CIFAR-10 test split (which holds only the
first 1,000 official test images). Float32 matmuls on GPUs default to TF32; training keeps that default (it
is the usual accelerator recipe), attacks and accuracy run at "highest" precision so that ASR differences are
not rounding artefacts. A benchmark that prints measured figures, not a test.
"""
from __future__ import annotations

import argparse
import tempfile
import time

import jax
import numpy as np

import attacks
from experiments.core import config as config_lib
from experiments.trainers import vit as vit_training
from experiments.diff_attention.run import batched_attack


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
  parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script on a CPU in a minute")
  parser.add_argument("--epochs", type=int, default=15)
  parser.add_argument("--workdir", default=None, help="checkpoints (default: a temporary directory)")
  args = parser.parse_args(argv)
  smoke = args.smoke
  data = (config_lib.DataConfig(source="embedded", n_train=256, n_test=64) if smoke
          else config_lib.DataConfig(source="dir", n_train=None, n_test=None))
  config = vit_training.TrainViTConfig(
      dataset="cifar10", data=data, depths=(1, 8), lambda_inits=("0.8",), patch_size=4,
      dim=32 if smoke else 128, num_heads=4, mlp_ratio=2.0,
      train=config_lib.ClassifierTrainConfig(epochs=1 if smoke else args.epochs, batch_size=64 if smoke else 256,
                                             learning_rate=1e-3, warmup_epochs=0 if smoke else 1,
                                             augment="crop_flip"))
  config.validate()
  print(f"devices: {jax.devices()}")
  start = time.perf_counter()
  train, test = vit_training.load_data(config)
  n_attack = min(len(test.y), 64 if smoke else 1000)
  x, y = test.x[:n_attack], test.y[:n_attack]
  print(f"data: {len(train.y)} train, {len(test.y)} test images ({time.perf_counter() - start:.1f} s)")
  workdir = args.workdir or tempfile.mkdtemp(prefix="da_accel_")
  rows = []
  for point in vit_training.points(config):
    t0 = time.perf_counter()
    tm = vit_training.train_point(config, point, train, test, workdir)
    train_s = time.perf_counter() - t0
    with jax.default_matmul_precision("highest"):
      correct = vit_training.predict(tm.logits_fn, x) == y
      asr = {}
      t1 = time.perf_counter()
      for e255 in (1.0, 4.0):
        eps = e255 / 255
        key = jax.random.key(int(e255))
        for name, attack, kw in (("pgd", attacks.pgd_linf, dict(alpha=eps / 4, steps=10, key=key)),
                                 ("apgd", attacks.apgd, dict(steps=20, key=key))):
          success, _, _ = batched_attack(attack, tm.logits_fn, x[correct], y[correct], 500, eps=eps, **kw)
          asr[(name, e255)] = float(np.mean(success)) if success.size else float("nan")
      attack_s = time.perf_counter() - t1
    rows.append((point.name, tm.record["clean_accuracy"], int(correct.sum()), asr, train_s, attack_s))
    print(f"{point.name}: clean {tm.record['clean_accuracy']:.3f}, train {train_s:.0f} s, attacks {attack_s:.0f} s",
          flush=True)
  print("\n| model | clean acc. | n attacked | PGD 1/255 | APGD 1/255 | PGD 4/255 | APGD 4/255 | train s | attack s |")
  print("|---|---|---|---|---|---|---|---|---|")
  for name, acc, n, asr, train_s, attack_s in rows:
    print(f"| {name} | {acc:.3f} | {n} | " + " | ".join(f"{asr[(a, e)]:.3f}" for e in (1.0, 4.0) for a in ("pgd", "apgd"))
          + f" | {train_s:.0f} | {attack_s:.0f} |")
  print(f"\ntotal wall time: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
  main()
