"""Fixtures of the IMPALA tests: calls in background threads with bounded
waits, so a test of blocking never hangs."""

import threading

import pytest

# Every wait on a background call is bounded by this (seconds).
WAIT = 20.0


class Background:
  """`fn()` in a daemon thread; keeps its result or error."""

  def __init__(self, fn):
    self.result, self.error = None, None
    self.done = threading.Event()

    def target():
      try:
        self.result = fn()
      except BaseException as e:
        self.error = e
      finally:
        self.done.set()

    self.thread = threading.Thread(target=target, daemon=True)
    self.thread.start()

  def still_blocked(self, seconds=0.5):
    """True if the call has not returned after `seconds`."""
    return not self.done.wait(seconds)

  def finish(self, timeout=WAIT):
    """Waits (bounded) for the call; returns its result or raises its
    error."""
    assert self.done.wait(timeout), "background call did not return"
    self.thread.join(timeout)
    if self.error is not None:
      raise self.error
    return self.result


@pytest.fixture
def background():
  """`background(fn)` starts `fn()` in a daemon thread -> `Background`."""
  return Background
