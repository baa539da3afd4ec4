"""An on-policy experiment (experiments/ppo.py, experiments/trpo.py) run
as a user runs it, with a tiny budget: the one runner of both tests."""

import subprocess
import sys

from ingraph_rl.testing.fresh_process import ROOT


def run(module, logdir, total, extra=()):
  """`python -m <module>` with `total` env steps (2 envs x 64 steps);
  returns the finished process, which must have exited 0."""
  cmd = [
    sys.executable,
    "-m",
    module,
    f"--total_timesteps={total}",
    "--num_envs=2",
    "--num_steps=64",
    "--eval_episodes=2",
    f"--logdir={logdir}",
    *extra,
  ]
  out = subprocess.run(
    cmd, cwd=ROOT, capture_output=True, text=True, timeout=600
  )
  assert out.returncode == 0, out.stderr[-3000:]
  return out
