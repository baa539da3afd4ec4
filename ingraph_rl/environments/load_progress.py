"""One progress line while env workers load their levels.

    progress = LoadProgress(30)                  # 30 DM Lab levels
    envs = [WorkerVectorEnv(..., load_progress=progress) for ...]  # threads
    progress.finish()

prints `loading 30 DM Lab levels: 12/30`, rewritten in place on a terminal
(elsewhere, e.g. a log file, repeated at most every `interval_s` while the
count changes), and ends with the time it took:
`loading 30 DM Lab levels: 30/30 in 73.2 s`. Thread-safe: the env worker
vector envs of several actors can be built at once around one of these.
"""

import sys
import threading
import time


class LoadProgress:
  """Counts loaded envs (`loaded(n)`) against `total` and prints the line.

  Args:
    total: how many will load.
    what: what loads ("DM Lab levels").
    stream: where the line goes (default sys.stdout, with the run's lines).
    interval_s: least time between two lines where the stream is no
      terminal.
  """

  def __init__(self, total, what="DM Lab levels", stream=None, interval_s=30.0):
    self.total = int(total)
    if self.total < 0:
      raise ValueError(f"LoadProgress total must be >= 0, got {total}")
    self.what = what
    self.stream = stream
    self.interval_s = float(interval_s)
    self.count = 0
    self.failed = 0
    self.start = time.monotonic()
    self.seconds = None  # Set by finish().
    self._lock = threading.Lock()
    self._last_print = None
    self._tty = bool(getattr(self._out(), "isatty", lambda: False)())
    self._show(force=True)

  def _out(self):
    return self.stream if self.stream is not None else sys.stdout

  def text(self):
    failed = f" ({self.failed} failed)" if self.failed else ""
    return (
      f"loading {self.total} {self.what}: {self.count}/{self.total}{failed}"
    )

  def _show(self, force=False, end=""):
    now = time.monotonic()
    if not (force or self._tty) and (
      self._last_print is not None and now - self._last_print < self.interval_s
    ):
      return
    self._last_print = now
    out = self._out()
    if self._tty:
      out.write("\r" + self.text() + end)
    else:
      out.write(self.text() + (end or "\n"))
    out.flush()

  def loaded(self, n=1):
    """`n` more envs have loaded."""
    with self._lock:
      self.count += int(n)
      self._show()

  def fail(self, n=1):
    """`n` envs will not load (they still count as done)."""
    with self._lock:
      self.count += int(n)
      self.failed += int(n)
      self._show()

  def finish(self):
    """Prints the last line with the time it took; returns the seconds."""
    with self._lock:
      if self.seconds is None:
        self.seconds = time.monotonic() - self.start
        out = self._out()
        line = f"{self.text()} in {self.seconds:.1f} s\n"
        out.write(("\r" if self._tty else "") + line)
        out.flush()
      return self.seconds
