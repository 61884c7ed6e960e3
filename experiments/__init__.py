"""Experiments: each module's ``python -m experiments.<name>`` is a CLI (``experiments.core.config``)."""
import sys as _sys

# ``python -m experiments.<name>`` imports this package while it locates the module (sys.argv[0] is '-m'
# then), before anything imports JAX: the one moment XLA's CPU device flags can still be set.
if _sys.argv[:1] == ["-m"] and "jax" not in _sys.modules:
  from experiments.core import distributed as _distributed
  _argv = list(getattr(_sys, "orig_argv", []))
  _module = next((a for a in _argv[_argv.index("-m") + 1:][:1]), "") if "-m" in _argv else ""
  _distributed.configure_cpu_devices(_module, _argv)
