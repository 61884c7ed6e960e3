"""XLA:CPU settings the speed benchmarks can opt into (``--xla-cpu-tuned``, ``--devices N``), set through
``XLA_FLAGS`` before JAX starts its backend. What they change and what they gain: docs/performance.md#xlacpu-settings.

TUNED_FLAGS hands XLA:CPU's matrix products and convolutions to the YNNPACK library one at a time and leaves
the elementwise work around them to XLA's own loop fusions. By default (jax 0.12) XLA also folds elementwise
operations and broadcasts into YNNPACK fusions, which at the small ViT's shapes costs more than it saves
(materialised broadcasts of the LayerNorm gains, slower fused LayerNorm backward passes). The flag is
accepted by jaxlib 0.10.2 and 0.12; XLA aborts at start-up on a flag it does not know.
"""
from __future__ import annotations

import os
import sys

TUNED_FLAGS = ("--xla_cpu_experimental_ynn_fusion_type=individual_dot,individual_convolution",)


def add_flags(*flags: str) -> None:
  """Appends ``flags`` to ``$XLA_FLAGS`` (a flag whose name is already there is left as the user set it).

  Raises:
    RuntimeError: if JAX was already imported (XLA reads the variable once, when its backend starts).
    ValueError: if $XLA_FLAGS names a flag file (XLA reads a value without a leading "--" as one).
  """
  if "jax" in sys.modules:
    raise RuntimeError("XLA flags must be set before the first `import jax` of the process")
  current = os.environ.get("XLA_FLAGS", "").split()
  if current and not current[0].startswith("--"):
    raise ValueError(f"XLA_FLAGS names a flag file ({current[0]!r}); add {' '.join(flags)} to that file instead")
  names = {f.split("=", 1)[0] for f in current}
  os.environ["XLA_FLAGS"] = " ".join(current + [f for f in flags if f.split("=", 1)[0] not in names])


def tuned() -> bool:
  """Whether ``$XLA_FLAGS`` holds TUNED_FLAGS as they are (a user's own value of the flag is not the setting)."""
  current = os.environ.get("XLA_FLAGS", "").split()
  return all(flag in current for flag in TUNED_FLAGS)


def one_device_per_core(devices: int) -> tuple[str, ...]:
  """Flags for ``devices`` XLA CPU devices with one thread each (``attacks`` shards batches over them).

  Raises:
    ValueError: if devices is not an integer >= 1 (XLA's own error for 0 names no flag).
  """
  if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
    raise ValueError(f"devices must be an integer >= 1, got {devices!r}")
  return (f"--xla_force_host_platform_device_count={devices}", "--xla_cpu_multi_thread_eigen=false")
