"""Makes neural-tangents 0.6.5 import on current JAX (≥ 0.10) without TensorFlow.

neural-tangents 0.6.5 (its last release, unmaintained since 2024) was written against JAX 0.4. On current
JAX its import fails in four places; this module fills each gap **only where the name is absent**, so on a
JAX that still has a name it changes nothing. It must run before ``neural_tangents`` is first imported:
``ntk/__init__.py`` imports it first, so every ``import ntk…`` (the packages, ``experiments``, the tests,
subprocesses, benchmarks) does. A bare ``import neural_tangents`` runs it through the install's import hook
(``site_hook/attention_fragility_nt_hook.py``, in site-packages); where that is absent (``python -S``, a
venv installed before the hook), ``import ntk._nt_compat`` first.

What it touches (docs/versions.md; docs/theory.md#neural-tangents-on-current-jax):

| gap in neural-tangents 0.6.5 | filled with |
|---|---|
| ``neural_tangents/__init__.py`` imports ``.experimental`` → ``jax.experimental.jax2tf``, TensorFlow, tf2jax | a stub ``neural_tangents.experimental`` module that raises on any attribute |
| ``jax.core.{Jaxpr, JaxprEqn, Literal, Primitive, Var}`` (moved in JAX 0.6) | the public ``jax.extend.core`` names |
| ``jax.util.{safe_map, safe_zip}`` (``jax.util`` removed) | a ``jax.util`` module with length-checked ``map`` / ``zip`` |
| ``jax.interpreters.ad.zeros_like_p`` (removed) | a fresh ``jax.extend.core.Primitive("zeros_like")``: neural-tangents only uses it as a dict key of its STRUCTURED_DERIVATIVES rules, and no JAX trace emits it |

Private JAX names used: none. The module writes the public attributes above into ``jax.core``,
``jax.interpreters.ad`` and ``sys.modules``; ``tests/test_nt_compat.py`` checks every one on each supported
version and that the kernels agree with closed forms.

Not supported: neural-tangents' STRUCTURED_DERIVATIVES and AUTO empirical-NTK implementations, which read
more of JAX's internals (``jax.core.get_aval``, ``lattice_join``, ``DShapedArray``,
``ad.source_info_util``, ``ad.reducing_transposes``, and ``ad.linearize``'s old signature). This project
uses JACOBIAN_CONTRACTION and NTK_VECTOR_PRODUCTS only (``ntk.empirical_ntk`` offers just those).
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import types

import jax
import jax.core
import jax.extend.core
import jax.interpreters.ad

#: The names this module may add, as "module.name" (what tests/test_nt_compat.py checks).
PATCHED_NAMES = (
    "jax.core.Jaxpr", "jax.core.JaxprEqn", "jax.core.Literal", "jax.core.Primitive", "jax.core.Var",
    "jax.util.safe_map", "jax.util.safe_zip", "jax.interpreters.ad.zeros_like_p",
    "neural_tangents.experimental",
)
#: What this call added on this JAX (empty where JAX still has every name).
ADDED: list[str] = []


def _safe_map(f, *iterables):
  """``map`` to a list, refusing iterables of unequal length (jax.util.safe_map's contract)."""
  lists = [list(it) for it in iterables]
  if len({len(items) for items in lists}) > 1:
    raise ValueError(f"safe_map: iterables of unequal lengths {[len(items) for items in lists]}")
  return list(map(f, *lists))


def _safe_zip(*iterables):
  """``zip`` to a list, refusing iterables of unequal length (jax.util.safe_zip's contract)."""
  lists = [list(it) for it in iterables]
  if len({len(items) for items in lists}) > 1:
    raise ValueError(f"safe_zip: iterables of unequal lengths {[len(items) for items in lists]}")
  return list(zip(*lists))


def _set_if_absent(owner, name: str, value, label: str) -> None:
  if not hasattr(owner, name):
    setattr(owner, name, value)
    ADDED.append(label)


def _experimental_stub() -> types.ModuleType:
  stub = types.ModuleType("neural_tangents.experimental")
  stub.__doc__ = "Stub: neural-tangents' TensorFlow port is not available here (ntk/_nt_compat.py)."

  def __getattr__(name: str):
    if name.startswith("__"):
      raise AttributeError(name)
    raise ImportError(f"neural_tangents.experimental.{name} needs TensorFlow and jax2tf; this project "
                      "replaces the module with a stub (ntk/_nt_compat.py) and does not use it")

  stub.__getattr__ = __getattr__
  return stub


def install() -> None:
  """Adds the absent names listed in ``PATCHED_NAMES``; idempotent. Called on import of this module.

  Raises:
    ImportError: neural-tangents is not installed (the message gives the install step).
    RuntimeError: ``neural_tangents`` was imported before this module (its own import would have failed
      on current JAX, or it came from a different environment).
  """
  if importlib.util.find_spec("neural_tangents") is None:
    raise ImportError("neural-tangents is not installed. It is the second step of the README's install "
                      "command: pip install --no-deps neural-tangents==0.6.5 (without --no-deps it would "
                      "pull in TensorFlow)")
  for name in ("Jaxpr", "JaxprEqn", "Literal", "Primitive", "Var"):
    _set_if_absent(jax.core, name, getattr(jax.extend.core, name), f"jax.core.{name}")
  if "jax.util" not in sys.modules:
    try:
      importlib.import_module("jax.util")  # present before JAX 0.6
    except ImportError:
      util = types.ModuleType("jax.util")
      util.__doc__ = "Stand-in for the removed jax.util, for neural-tangents (ntk/_nt_compat.py)."
      sys.modules["jax.util"] = util
      setattr(jax, "util", util)
  _set_if_absent(sys.modules["jax.util"], "safe_map", _safe_map, "jax.util.safe_map")
  _set_if_absent(sys.modules["jax.util"], "safe_zip", _safe_zip, "jax.util.safe_zip")
  _set_if_absent(jax.interpreters.ad, "zeros_like_p", jax.extend.core.Primitive("zeros_like"),
                 "jax.interpreters.ad.zeros_like_p")
  if "neural_tangents.experimental" not in sys.modules:
    if "neural_tangents" in sys.modules:
      raise RuntimeError("neural_tangents was imported before ntk._nt_compat; import ntk (or "
                         "ntk._nt_compat) first")
    sys.modules["neural_tangents.experimental"] = _experimental_stub()
    ADDED.append("neural_tangents.experimental")


install()
