"""Shared test setup: quiet TF, deterministic and calm torch threads."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# On 2 cores, torch's spinning OpenMP threads make timings swing wildly.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

torch.set_num_threads(1)
