"""Fixtures of the experiment tests: an experiment of the checkout run in a
subprocess with the fake DM Lab importable as `deepmind_lab`."""

import os
import subprocess
import sys

import pytest

from ingraph_rl.testing.deepmind_lab_shim import write_deepmind_lab_shim
from ingraph_rl.testing.fresh_process import ROOT


class FakeDmlab:
  """A shim directory in `tmp_path / "shim"` (`shim`) that makes the fake
  DM Lab importable as `deepmind_lab`; `env`: os.environ with PYTHONPATH
  the checkout and the shim."""

  def __init__(self, tmp_path):
    self.shim = write_deepmind_lab_shim(tmp_path / "shim")
    self.env = dict(
      os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), self.shim])
    )

  def run(self, module, *args, timeout):
    """`python -m experiments.<module> *args` from the checkout with
    `env`; returns the CompletedProcess (text, output captured)."""
    return subprocess.run(
      [sys.executable, "-m", f"experiments.{module}", *args],
      cwd=ROOT,
      env=self.env,
      capture_output=True,
      text=True,
      timeout=timeout,
    )


@pytest.fixture
def fake_dmlab(tmp_path):
  """`FakeDmlab`: runs experiments on the fake DM Lab (its shim written
  into the test's temporary folder)."""
  return FakeDmlab(tmp_path)
