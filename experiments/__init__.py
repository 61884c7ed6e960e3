"""Experiments: one package per experiment (``experiments.registry``), each a CLI
``python -m experiments.<name>`` (``experiments.core.cli``) with its report ``python -m experiments.<name>.report``."""
import sys as _sys
import warnings as _warnings

# Each package imports its report module for its SPEC, so ``python -m experiments.<name>.report`` finds the module
# already imported; runpy then warns that it runs it a second time, as __main__. A report module keeps no state
# at import, so running it twice is harmless and the warning says nothing to a user.
_warnings.filterwarnings("ignore", message=r"'experiments\.\w+\.report' found in sys\.modules", category=RuntimeWarning)

# ``python -m experiments.<name>`` imports this package while it locates the module (sys.argv[0] is '-m'
# then), before anything imports JAX: the one moment XLA's CPU device flags can still be set.
if _sys.argv[:1] == ["-m"] and "jax" not in _sys.modules:
  from experiments.core import distributed as _distributed
  _argv = list(getattr(_sys, "orig_argv", []))
  _module = next((a for a in _argv[_argv.index("-m") + 1:][:1]), "") if "-m" in _argv else ""
  _distributed.configure_cpu_devices(_module, _argv)
