"""The machine a measurement ran on, for timing records and benchmark tables: CPU model, cores, vector ISA,
accelerator and library versions."""
from __future__ import annotations

import os
import platform
from pathlib import Path

ISA_FLAGS = ("avx512f", "avx2", "avx", "sse4_2", "neon", "asimd")   # the widest present is reported first


def describe() -> dict:
  """{'cpu': model name, 'cores': usable cores, 'isa': vector extensions present (widest first), 'device':
  JAX's default device kind, 'versions': {library: version}}. Reads /proc/cpuinfo where it exists (Linux);
  elsewhere ``platform.processor()`` and no ISA."""
  import jax
  cpu, flags = platform.processor() or platform.machine(), set()
  info = Path("/proc/cpuinfo")
  if info.exists():
    for line in info.read_text(errors="replace").splitlines():
      key, _, value = line.partition(":")
      if key.strip() == "model name" and cpu in ("", platform.processor(), platform.machine()):
        cpu = value.strip()
      elif key.strip() in ("flags", "Features"):
        flags |= set(value.split())
  cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
  return {"cpu": cpu, "cores": cores, "isa": [f for f in ISA_FLAGS if f in flags],
          "device": jax.devices()[0].device_kind, "versions": versions()}


def versions() -> dict:
  """Versions of the numerical libraries a timing depends on (absent ones left out)."""
  from importlib import metadata
  out = {}
  for name in ("jax", "jaxlib", "flax", "optax", "numpy", "torch", "torchattacks"):
    try:
      out[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
      pass
  return out


def one_line(m: dict | None = None) -> str:
  """'<cpu>, <cores> cores (<isa>), <device>' of ``describe()``."""
  m = describe() if m is None else m
  isa = m["isa"][0] if m["isa"] else "ISA unknown"
  return f"{m['cpu']}, {m['cores']} cores ({isa}), {m['device']}"
