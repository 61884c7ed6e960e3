"""Ctrl-C that stops a run even where it lands inside a callback that swallows it.

Python runs the SIGINT handler (which raises ``KeyboardInterrupt``) at the next bytecode boundary of the
main thread. When that boundary is inside a garbage-collector callback (JAX registers one,
``jax._src.lib._xla_gc_callback``, and collections are frequent while a run imports, traces and compiles),
a ``__del__`` method or a weakref finalizer, the interpreter cannot propagate the exception: it prints
"Exception ignored in ..." through ``sys.unraisablehook`` and the run goes on. ``ctrl_c_stops`` installs an
unraisable hook that recognises such a swallowed ``KeyboardInterrupt`` and sends SIGINT to the main thread
again, from a helper thread after ``REDELIVER_DELAY_S``, so that it is raised where the run can see it (and
``experiments.core.cli.user_errors`` turns it into the resume note). Every other unraisable exception goes to
the previous hook unchanged.

``experiments.core.cli.user_errors`` enters it, so every experiment CLI, report CLI and the main job have it.
"""
from __future__ import annotations

import _thread
import contextlib
import signal
import sys
import threading
import time

#: Seconds between a swallowed Ctrl-C and its redelivery: long enough for the swallowing callback to
#: return (microseconds), short against a person's reaction. A redelivery that lands in a callback again
#: is redelivered again.
REDELIVER_DELAY_S = 0.01

_installed: dict = {"depth": 0, "previous": None}


def _send_sigint() -> None:
  time.sleep(REDELIVER_DELAY_S)
  if hasattr(signal, "pthread_kill"):  # a real signal: also wakes a main thread blocked in a system call
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
  else:
    _thread.interrupt_main()


def redeliver_swallowed_interrupt(unraisable) -> bool:
  """The core of the hook: if ``unraisable`` (a ``sys.UnraisableHookArgs``) is a ``KeyboardInterrupt``
  swallowed in the main thread while Python's SIGINT handler is installed, schedules SIGINT to the main
  thread again and returns True; otherwise returns False and does nothing."""
  if not (isinstance(unraisable.exc_value, KeyboardInterrupt)
          or (isinstance(unraisable.exc_type, type) and issubclass(unraisable.exc_type, KeyboardInterrupt))):
    return False
  if threading.current_thread() is not threading.main_thread() or not callable(signal.getsignal(signal.SIGINT)):
    return False  # not a Ctrl-C (another thread raised it, or SIGINT is ignored / at its OS default)
  threading.Thread(target=_send_sigint, name="ctrl-c-redelivery", daemon=True).start()
  return True


def _hook(unraisable) -> None:
  if not redeliver_swallowed_interrupt(unraisable):
    (_installed["previous"] or sys.__unraisablehook__)(unraisable)


@contextlib.contextmanager
def ctrl_c_stops():
  """Within the block, a Ctrl-C swallowed by a gc callback, ``__del__`` or weakref finalizer is raised
  again in the main thread (module docstring). Re-entrant; restores the previous ``sys.unraisablehook``
  on leaving the outermost block (unless something else replaced the hook meanwhile)."""
  if _installed["depth"] == 0:
    _installed["previous"] = sys.unraisablehook
    sys.unraisablehook = _hook
  _installed["depth"] += 1
  try:
    yield
  finally:
    _installed["depth"] -= 1
    if _installed["depth"] == 0:
      if sys.unraisablehook is _hook:
        sys.unraisablehook = _installed["previous"]
      _installed["previous"] = None
