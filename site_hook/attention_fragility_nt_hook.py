"""Lets ``import neural_tangents`` work in this project's environment before anything of ours is imported.

neural-tangents 0.6.5 does not import on current JAX without ``ntk/_nt_compat.py`` (its module docstring:
the removed ``jax.core`` / ``jax.util`` names, and ``neural_tangents.experimental``, which needs TensorFlow).
``import ntk`` runs that module first; this hook covers a bare ``import neural_tangents``.

The project's install puts this file and ``attention_fragility_nt_hook.pth`` into site-packages (setup.py,
``data_files``); at interpreter start the .pth line calls ``install()``, which only puts a finder first in
``sys.meta_path`` (standard library only: no JAX import, nothing else runs). On the first import of
``neural_tangents`` the finder removes itself and, unless ``ntk._nt_compat`` already ran, runs that file
(found through the ``ntk`` package, which is not imported: ``ntk/__init__`` imports neural-tangents
itself) as ``ntk._nt_compat``; then the ordinary import proceeds. ``import ntk`` later reuses that module.
It is a copy: a change here takes effect on the next ``pip install -e .``.
"""
from __future__ import annotations

import importlib.util
import os
import sys

COMPAT = "ntk._nt_compat"


class NeuralTangentsCompatFinder:
  """A ``sys.meta_path`` entry that finds nothing: it runs ``ntk/_nt_compat.py`` before the first import
  of ``neural_tangents`` and leaves the import itself to the other finders."""

  @staticmethod
  def find_spec(name, path=None, target=None):  # pylint: disable=unused-argument
    if name != "neural_tangents":
      return None
    uninstall()
    if COMPAT not in sys.modules:
      run_compat()
    return None


def run_compat() -> bool:
  """Runs ``ntk/_nt_compat.py`` as ``ntk._nt_compat`` without importing ``ntk``; False where ``ntk`` is
  not importable (then neural-tangents' own import error stands). Errors of the file itself propagate."""
  ntk_spec = importlib.util.find_spec("ntk")
  if ntk_spec is None or not ntk_spec.submodule_search_locations:
    return False
  for directory in ntk_spec.submodule_search_locations:
    source = os.path.join(directory, "_nt_compat.py")
    if os.path.isfile(source):
      break
  else:
    return False
  spec = importlib.util.spec_from_file_location(COMPAT, source)
  module = importlib.util.module_from_spec(spec)
  sys.modules[COMPAT] = module
  try:
    spec.loader.exec_module(module)
  except BaseException:
    sys.modules.pop(COMPAT, None)
    raise
  return True


def install() -> None:
  """Puts the finder first in ``sys.meta_path`` (once; not after neural_tangents is imported)."""
  if "neural_tangents" not in sys.modules and NeuralTangentsCompatFinder not in sys.meta_path:
    sys.meta_path.insert(0, NeuralTangentsCompatFinder)


def uninstall() -> None:
  """Removes the finder from ``sys.meta_path``."""
  while NeuralTangentsCompatFinder in sys.meta_path:
    sys.meta_path.remove(NeuralTangentsCompatFinder)
