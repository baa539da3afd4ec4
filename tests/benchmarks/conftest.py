"""Fixtures of the benchmark smoke tests: a benchmark's --quick run in a
subprocess, writing its results into the test's temporary folder (not over
the committed results)."""

import json
import os
import subprocess
import sys

import pytest

from ingraph_rl.testing.fresh_process import ROOT


@pytest.fixture
def run_quick(tmp_path):
  """`run_quick(name, *args, timeout=240, unset=())` runs `python -m
  benchmarks.<name> --quick *args` from the checkout with
  INGRAPH_RL_BENCH_RESULTS=tmp_path and the env vars in `unset` removed;
  asserts it exits 0 and returns (the <name>.json it wrote, the
  CompletedProcess)."""

  def run(name, *args, timeout=240, unset=()):
    env = dict(os.environ, INGRAPH_RL_BENCH_RESULTS=str(tmp_path))
    for key in unset:
      env.pop(key, None)
    out = subprocess.run(
      [sys.executable, "-m", f"benchmarks.{name}", "--quick", *args],
      cwd=ROOT,
      env=env,
      capture_output=True,
      text=True,
      timeout=timeout,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    doc = json.loads((tmp_path / f"{name}.json").read_text())
    return doc, out

  return run
