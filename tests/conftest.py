"""Shared test setup: quiet TF, deterministic and calm torch threads; the
checkout's `experiments` and `benchmarks` importable."""

import os
import pathlib
import sys

ROOT = str(pathlib.Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# As experiments/__init__.py: TF's import skips Keras 3 and matplotlib
# (~1 s in every test worker and fresh process).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# On 2 cores, torch's spinning OpenMP threads make timings swing wildly.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

torch.set_num_threads(1)


import pytest  # noqa: E402

from ingraph_rl.testing.fresh_process import run_fresh  # noqa: E402


@pytest.fixture
def fresh_python():
  """`run_fresh`: a script in `python -I` without ingraph_rl."""
  return run_fresh
