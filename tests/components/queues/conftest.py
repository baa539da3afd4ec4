"""Fixtures of the queue tests: calls in background threads and polling,
both with bounded waits, so a failing test never hangs."""

import threading

import pytest

# Every wait in these tests is bounded by this (seconds); a correct
# implementation never gets close to it.
WAIT = 20.0


class Background:
  """Runs `fn(*args)` in a daemon thread; keeps its result or error."""

  def __init__(self, fn, *args):
    self.result = None
    self.error = None
    self.done = threading.Event()
    started = threading.Event()

    def target():
      started.set()
      try:
        self.result = fn(*args)
      except BaseException as e:
        self.error = e
      finally:
        self.done.set()

    self.thread = threading.Thread(target=target, daemon=True)
    self.thread.start()
    assert started.wait(WAIT)

  def still_blocked(self, seconds=0.3):
    """Waits `seconds`; True if the call has not returned by then (it is
    waiting, as it should; a call that does not block returns at once)."""
    return not self.done.wait(seconds)

  def finish(self):
    """Waits (bounded) for the call; returns its result or raises its
    error."""
    assert self.done.wait(WAIT), "background call did not return"
    self.thread.join(WAIT)
    if self.error is not None:
      raise self.error
    return self.result


@pytest.fixture
def background():
  """`background(unblock, fn, *args)` starts `fn` in a thread.

  `unblock()` runs at teardown if the call is still blocked (e.g. closes
  the queue with cancel), so a failing test never leaves a thread waiting.
  """
  started = []

  def start(unblock, fn, *args):
    bg = Background(fn, *args)
    started.append((bg, unblock))
    return bg

  yield start
  for bg, unblock in started:
    if not bg.done.is_set():
      try:
        unblock()
      except Exception:
        pass
    bg.done.wait(WAIT)


@pytest.fixture
def wait_until():
  """`wait_until(predicate, what)` polls `predicate` (bounded) until it
  holds."""

  def wait(predicate, what):
    pause = threading.Event()
    for _ in range(int(WAIT / 0.01)):
      if predicate():
        return
      pause.wait(0.01)
    raise AssertionError(f"timed out waiting until {what}")

  return wait
