"""Helpers for tests that start processes and press Ctrl-C on them."""

import signal


def default_sigint():
  """`preexec_fn` for a child that must see Ctrl-C: SIGINT back to its
  default. A shell runs background jobs (`cmd &` without job control, as
  CI scripts and nohup'ed runs do) with SIGINT ignored, children inherit
  that, and Python then never raises KeyboardInterrupt: a Ctrl-C test
  would wait for an interrupt that cannot come.

      subprocess.Popen([...], preexec_fn=default_sigint)
  """
  signal.signal(signal.SIGINT, signal.SIG_DFL)
