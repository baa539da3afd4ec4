"""experiments/dqn.py as a user runs it: flagfile, TensorBoard scalars with
CleanRL names, checkpoints, and resuming from --logdir."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.testing.fresh_process import ROOT
from ingraph_rl.testing.tensorboard import scalar_tags, scalars


def run(logdir, total, extra=()):
  cmd = [
    sys.executable,
    "-m",
    "experiments.dqn",
    "--flagfile=experiments/flagfiles/dqn_cartpole.cfg",
    f"--total_env_steps={total}",
    "--steps_per_call=100",
    "--eval_episodes=2",
    f"--logdir={logdir}",
    *extra,
  ]
  out = subprocess.run(
    cmd, cwd=ROOT, capture_output=True, text=True, timeout=300
  )
  assert out.returncode == 0, out.stderr[-3000:]
  return out


SUMMARY = re.compile(
  r"last-100 training return (-?[\d.]+) \((\d+) of (\d+) "
  r"episodes\); wall time ([\d.]+) s \(training ([\d.]+) "
  r"s\)$"
)
# experiments/progress.py's plain line (issue 40 item 8), and absl's log
# prefix (`I1127 21:10:32.127323 140524870686400 dqn.py:150] `), which
# progress lines must not carry.
PROGRESS = re.compile(r"^\[dqn\] env steps +(\d+)  SPS .*  wall [\d.]+$")
ABSL_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ \S+:\d+\] ")


@pytest.mark.slow  # ~10 s; benchmarks/learning.py runs this path too.
def test_time_budget_and_last100_return(tmp_path):
  logdir = str(tmp_path / "budget")
  out = run(logdir, 10**8, extra=["--max_train_seconds=4"])
  last = out.stdout.strip().splitlines()[-1]
  match = SUMMARY.search(last)
  assert last.startswith("dqn: ") and match, last
  last100, count, total = float(match[1]), int(match[2]), int(match[3])
  wall, train = float(match[4]), float(match[5])
  # Stopped by the clock (after the call that passed 4 s), then saved and
  # evaluated as usual.
  steps = int(re.search(r"dqn: (\d+) env steps", out.stdout)[1])
  assert 4.0 <= train < 60.0 and wall > train and steps < 10**8
  assert tf.train.latest_checkpoint(
    os.path.join(logdir, "checkpoints")
  ).endswith(f"ckpt-{steps}")
  assert "greedy eval return" in out.stdout
  # Per call: the mean return and its episodes; the last-100 mean counts a
  # call's k episodes k times at their mean.
  means = scalars(logdir, "charts/episodic_return")
  counts = scalars(logdir, "charts/episodes")
  rolling = scalars(logdir, "charts/episodic_return_last100")
  assert (
    [p[0] for p in means] == [p[0] for p in counts] == [p[0] for p in rolling]
  )
  assert sum(n for _, n in counts) == total > 100 and count == 100
  episodes = []
  for (_, mean), (_, n), (_, value) in zip(means, counts, rolling):
    episodes += [mean] * int(n)
    assert value == pytest.approx(np.mean(episodes[-100:]), rel=1e-5)
  assert last100 == pytest.approx(rolling[-1][1], abs=0.006)


@pytest.mark.slow
def test_runs_logs_checkpoints_and_resumes(tmp_path):
  logdir = str(tmp_path / "run")
  out = run(logdir, 2000)
  assert "dqn: 2000 env steps" in out.stdout
  # One plain progress line per train call, on stdout, the last at 2000.
  progress = [PROGRESS.match(x) for x in out.stdout.splitlines()]
  steps = [int(m[1]) for m in progress if m]
  assert steps and steps[-1] == 2000 and steps == sorted(steps), out.stdout
  assert not [
    x
    for x in (out.stdout + out.stderr).splitlines()
    if ABSL_PREFIX.match(x) and "env steps" in x
  ]
  assert f"logs and checkpoints: {logdir}" in out.stdout
  assert {
    "charts/episodic_return",
    "charts/episodes",
    "charts/episodic_return_last100",
    "charts/SPS",
    "losses/td_loss",
    "eval/episodic_return",
  } <= scalar_tags(logdir)
  assert tf.train.latest_checkpoint(os.path.join(logdir, "checkpoints"))
  out = run(logdir, 2800)
  assert (
    f"dqn: resumed from {logdir}/checkpoints/ckpt-2000 at env step 2000"
  ) in out.stdout
  assert "dqn: 2800 env steps" in out.stdout  # Continued from 2000.
