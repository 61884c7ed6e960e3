"""Freezes torchattacks 3.5.1 FGSM and PGD (no random start) outputs as test fixtures.

Runs in a separate virtual environment that has PyTorch; the project itself never imports torch:

  python3 -m venv /tmp/torchref
  /tmp/torchref/bin/pip install torch==2.13.0 torchattacks==3.5.1 numpy
  /tmp/torchref/bin/python scripts/torchattacks_crosscheck.py --out tests/fixtures/attacks

Writes `torchattacks_reference.npz` (inputs, labels, targets, the MLP's weights and every reference
output) and `torchattacks_reference.json` (library versions, model, seed, attack settings, command).
`tests/test_attacks_reference.py` checks `attacks.fgsm` and `attacks.pgd_linf` against them.

Model: a 64-32-10 ReLU MLP on 1×8×8 inputs in [0, 1], float32, weights drawn from numpy's PCG64 with
`--seed`; torch's `nn.Linear` stores W transposed, so the npz holds W as [in, out] (JAX's x @ W + b).
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import platform
import sys

import numpy as np

IN_SHAPE = (1, 8, 8)
HIDDEN, CLASSES, BATCH = 32, 10, 16

# name -> (attack, settings, targeted); eps/alpha on the [0, 1] pixel scale.
CASES = {
    "fgsm_eps8": ("FGSM", dict(eps=8 / 255), False),
    "fgsm_eps8_targeted": ("FGSM", dict(eps=8 / 255), True),
    "pgd_eps8_alpha2_steps10": ("PGD", dict(eps=8 / 255, alpha=2 / 255, steps=10, random_start=False), False),
    "pgd_eps8_alpha2_steps10_targeted": (
        "PGD", dict(eps=8 / 255, alpha=2 / 255, steps=10, random_start=False), True),
    "pgd_eps0.3_alpha0.01_steps40": ("PGD", dict(eps=0.3, alpha=0.01, steps=40, random_start=False), False),
    "pgd_eps0.1_alpha0.1_steps3": ("PGD", dict(eps=0.1, alpha=0.1, steps=3, random_start=False), False),
}


def make_data(seed: int) -> dict[str, np.ndarray]:
  """Weights ([in, out] layout), inputs, labels (the model's clean predictions, with two flipped so
  some samples start wrong) and targets (≠ labels)."""
  rng = np.random.default_rng(seed)
  d = int(np.prod(IN_SHAPE))
  data = dict(
      w1=(rng.standard_normal((d, HIDDEN)) * np.sqrt(2.0 / d)).astype(np.float32),
      b1=(0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
      w2=(rng.standard_normal((HIDDEN, CLASSES)) * np.sqrt(1.0 / HIDDEN)).astype(np.float32),
      b2=(0.1 * rng.standard_normal(CLASSES)).astype(np.float32),
      x=rng.uniform(0.0, 1.0, (BATCH, *IN_SHAPE)).astype(np.float32))
  x_BxD = data["x"].reshape(BATCH, -1)
  logits = np.maximum(x_BxD @ data["w1"] + data["b1"], 0) @ data["w2"] + data["b2"]
  y = logits.argmax(-1)
  y[:2] = (y[:2] + 1) % CLASSES
  data["y"] = y.astype(np.int64)
  data["target"] = ((y + rng.integers(1, CLASSES, BATCH)) % CLASSES).astype(np.int64)
  return data


def run_torchattacks(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
  import torch
  import torchattacks
  torch.set_default_dtype(torch.float32)
  d = int(np.prod(IN_SHAPE))
  model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(d, HIDDEN), torch.nn.ReLU(),
                              torch.nn.Linear(HIDDEN, CLASSES))
  with torch.no_grad():
    model[1].weight.copy_(torch.from_numpy(data["w1"].T.copy()))
    model[1].bias.copy_(torch.from_numpy(data["b1"]))
    model[3].weight.copy_(torch.from_numpy(data["w2"].T.copy()))
    model[3].bias.copy_(torch.from_numpy(data["b2"]))
  model.eval()
  x = torch.from_numpy(data["x"])
  y = torch.from_numpy(data["y"])
  target = torch.from_numpy(data["target"])
  out = {}
  for name, (attack, settings, targeted) in CASES.items():
    atk = getattr(torchattacks, attack)(model, **settings)
    if targeted:
      atk.set_mode_targeted_by_label(quiet=True)
    out[name] = atk(x, target if targeted else y).detach().numpy()
  return out


def main() -> None:
  parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
  parser.add_argument("--out", default="tests/fixtures/attacks")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()
  import torch
  import torchattacks

  data = make_data(args.seed)
  outputs = run_torchattacks(data)
  out_dir = pathlib.Path(args.out)
  out_dir.mkdir(parents=True, exist_ok=True)
  np.savez_compressed(out_dir / "torchattacks_reference.npz", **data,
                      **{f"adv_{k}": v for k, v in outputs.items()})
  provenance = dict(
      created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
      command=" ".join([pathlib.Path(sys.executable).as_posix(), *sys.argv]),
      versions=dict(torch=torch.__version__, torchattacks=torchattacks.__version__,
                    numpy=np.__version__, python=platform.python_version()),
      platform=platform.platform(),
      seed=args.seed, rng="numpy.random.default_rng (PCG64)",
      model=dict(layers=f"Flatten -> Linear({int(np.prod(IN_SHAPE))}, {HIDDEN}) -> ReLU -> "
                 f"Linear({HIDDEN}, {CLASSES})", input_shape=list(IN_SHAPE), dtype="float32",
                 weight_layout="npz w1, w2 are [in, out]; torch.nn.Linear.weight = w.T"),
      data=dict(batch=BATCH, x="uniform [0, 1]", y="clean argmax, first two shifted by +1 (start wrong)",
                target="(y + U{1..9}) mod 10"),
      cases={name: dict(attack=f"torchattacks.{attack}", targeted=targeted,
                        mode="set_mode_targeted_by_label" if targeted else "default", **settings,
                        npz_key=f"adv_{name}")
             for name, (attack, settings, targeted) in CASES.items()},
      conventions="torchattacks: CrossEntropyLoss(mean); targeted cost = -CE(target); PGD step "
                  "alpha*sign(grad), delta clamped to [-eps, eps], image clamped to [0, 1].")
  (out_dir / "torchattacks_reference.json").write_text(json.dumps(provenance, indent=2) + "\n")
  print(f"wrote {out_dir}/torchattacks_reference.npz and .json ({len(outputs)} cases)")


if __name__ == "__main__":
  main()
