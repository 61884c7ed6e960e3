"""experiments.core.interrupts: a Ctrl-C that lands inside a gc callback (where Python swallows it) still stops
the run, in a child process that receives a real SIGINT there."""
import signal
import subprocess
import sys
import threading
import types
from pathlib import Path

import pytest

from experiments.core import interrupts

ROOT = Path(__file__).resolve().parents[3]

# The child spends its first gc callback in a loop until the parent's SIGINT arrives there: the handler's
# KeyboardInterrupt is raised inside the callback, and Python reports it as unraisable and goes on. Then it
# "runs" for 3 s: gc.collect() and as much Python work again outside it.
CHILD = """
import contextlib, gc, signal, sys, time
# Python installs its KeyboardInterrupt handler only when SIGINT is not ignored at startup, and a shell starts
# background jobs with SIGINT ignored (pytest run with `&` or under nohup): install it here, as a terminal has.
signal.signal(signal.SIGINT, signal.default_int_handler)
from experiments.core import cli, interrupts

first = []
def callback(phase, info):
  if phase == "start" and not first:
    first.append(1)
    print("in a gc callback", flush=True)
    end = time.monotonic() + 60
    while time.monotonic() < end:  # the SIGINT lands here
      pass

guard = {"none": contextlib.nullcontext, "ctrl_c_stops": interrupts.ctrl_c_stops,
         "user_errors": cli.user_errors}[sys.argv[1]]
gc.callbacks.append(callback)
with guard():
  try:
    gc.collect()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
      gc.collect()
      busy = time.perf_counter() + 0.001
      while time.perf_counter() < busy:
        pass
    print("ran on", flush=True)
  except KeyboardInterrupt:
    print("stopped", flush=True)
    raise
"""


def _interrupt_child_in_a_gc_callback(guard: str):
  child = subprocess.Popen([sys.executable, "-c", CHILD, guard], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
  try:
    assert child.stdout.readline().strip() == "in a gc callback"
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
  finally:
    if child.poll() is None:
      child.kill()
  return child.returncode, out, err


def test_without_the_hook_a_ctrl_c_in_a_gc_callback_is_swallowed():
  """The failure the hook exists for (if Python ever stops swallowing it, the hook is moot)."""
  code, out, err = _interrupt_child_in_a_gc_callback("none")
  assert (code, out.strip()) == (0, "ran on")
  assert "Exception ignored" in err and "KeyboardInterrupt" in err


def test_ctrl_c_stops_raises_a_swallowed_ctrl_c_again():
  code, out, err = _interrupt_child_in_a_gc_callback("ctrl_c_stops")
  assert out.strip() == "stopped" and code != 0
  assert "Exception ignored" not in err


def test_user_errors_turn_a_swallowed_ctrl_c_into_the_resume_note():
  code, out, err = _interrupt_child_in_a_gc_callback("user_errors")
  assert (code, out.strip()) == (130, "stopped")
  assert "rerun the same command to resume" in err and "Exception ignored" not in err


def _unraisable(exc: BaseException):
  return types.SimpleNamespace(exc_type=type(exc), exc_value=exc, exc_traceback=None, err_msg=None,
                               object=None)


def test_other_unraisable_exceptions_reach_the_previous_hook_and_it_is_restored():
  seen = []

  def record(unraisable):
    seen.append(unraisable)

  previous = sys.unraisablehook
  sys.unraisablehook = record
  try:
    with interrupts.ctrl_c_stops():
      with interrupts.ctrl_c_stops():  # re-entrant
        hook = sys.unraisablehook
        hook(_unraisable(ValueError("in __del__")))
      assert sys.unraisablehook is hook
    assert sys.unraisablehook is record
  finally:
    sys.unraisablehook = previous
  assert [type(u.exc_value) for u in seen] == [ValueError]


def test_a_keyboard_interrupt_outside_the_main_thread_is_not_redelivered():
  result = []
  thread = threading.Thread(target=lambda: result.append(
      interrupts.redeliver_swallowed_interrupt(_unraisable(KeyboardInterrupt()))))
  thread.start()
  thread.join()
  assert result == [False]
  assert interrupts.redeliver_swallowed_interrupt(_unraisable(RuntimeError())) is False


@pytest.mark.parametrize("handler", [signal.SIG_IGN, signal.SIG_DFL])
def test_no_redelivery_where_sigint_is_not_pythons(handler):
  previous = signal.signal(signal.SIGINT, handler)
  try:
    assert interrupts.redeliver_swallowed_interrupt(_unraisable(KeyboardInterrupt())) is False
  finally:
    signal.signal(signal.SIGINT, previous)
