"""experiments/impala.py as a user runs it: defaults, TensorBoard scalars
with CleanRL names, checkpoints, resuming from --logdir, the exported
SavedModel played in a fresh process, and Ctrl-C."""

import os
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest
import tensorflow as tf

from ingraph_rl.testing.fresh_process import ROOT
from ingraph_rl.testing.processes import default_sigint
from ingraph_rl.testing.tensorboard import scalar_tags, scalars

FAST = ["--log_every_seconds=0.5", "--num_envs_per_actor=4"]


def run(logdir, frames, extra=()):
  cmd = [
    sys.executable,
    "-m",
    "experiments.impala",
    f"--total_environment_frames={frames}",
    "--eval_episodes=2",
    f"--logdir={logdir}",
    *FAST,
    *extra,
  ]
  out = subprocess.run(
    cmd, cwd=ROOT, capture_output=True, text=True, timeout=300
  )
  assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
  return out.stdout


SUMMARY = re.compile(
  r"^\[impala\] last-100 training return (-?[\d.]+) "
  r"\((\d+) of (\d+) episodes\); wall time ([\d.]+) s "
  r"\(training ([\d.]+) s\)$"
)


@pytest.mark.slow
def test_runs_logs_checkpoints_exports_and_resumes(tmp_path):
  logdir = str(tmp_path / "run")
  out = run(logdir, 16000)
  # 16000 frames = 100 updates of 8 rollouts x 20 steps.
  assert re.search(r"\[impala\] 16000 frames \(\d+ fps\), 100 updates", out)
  assert re.search(r"\[impala\] frames +\d+  fps +\d+", out)  # Progress.
  assert re.search(
    r"greedy return of the exported policy in a fresh "
    r"process: \d+\.\d over 2 episodes",
    out,
  )
  assert f"logs (TensorBoard): {logdir}" in out
  assert f"SavedModel: {logdir}/saved_policy" in out
  assert {
    "charts/episodic_return",
    "charts/episodes",
    "charts/episodic_return_last100",
    "charts/SPS",
    "losses/total_loss",
    "losses/policy_loss",
    "losses/value_loss",
    "losses/entropy",
    "eval/episodic_return",
  } <= scalar_tags(logdir)
  # Scalars every --summary_every_seconds (1 s), not every update (100),
  # plus the last update's at the end.
  train_s = float(SUMMARY.search(out.strip().splitlines()[-1])[5])
  losses = scalars(logdir, "losses/total_loss")
  assert 2 <= len(losses) <= train_s + 2 < 100 and losses[-1][0] == 16000
  checkpoints = os.path.join(logdir, "checkpoints")
  assert tf.train.latest_checkpoint(checkpoints).endswith("ckpt-16000")
  assert os.path.exists(os.path.join(logdir, "saved_policy", "saved_model.pb"))
  # The first run played the exported policy: the resumed one need not.
  out = run(logdir, 24000, extra=["--eval_episodes=0"])
  assert "resumed from" in out and "at frame 16000" in out
  assert "greedy return" not in out
  # The update count continues from the checkpoint: 150 in all.
  assert re.search(r"\[impala\] 24000 frames \(\d+ fps\), 150 updates", out)


@pytest.mark.slow  # ~12 s; benchmarks/learning.py runs this path too.
def test_time_budget_and_last100_return(tmp_path):
  logdir = str(tmp_path / "budget")
  out = run(logdir, 10**9, extra=["--max_train_seconds=5"])
  match = SUMMARY.search(out.strip().splitlines()[-1])
  assert match, out[-2000:]
  last100, count, total = float(match[1]), int(match[2]), int(match[3])
  wall, train = float(match[4]), float(match[5])
  # Stopped by the clock, then checkpointed, exported and evaluated.
  frames = int(re.search(r"\[impala\] (\d+) frames \(", out)[1])
  assert 5.0 <= train < 20.0 and wall > train and 0 < frames < 10**9
  assert tf.train.latest_checkpoint(
    os.path.join(logdir, "checkpoints")
  ).endswith(f"ckpt-{frames}")
  assert "greedy return of the exported policy in a fresh process" in out
  means = scalars(logdir, "charts/episodic_return")
  counts = scalars(logdir, "charts/episodes")
  rolling = scalars(logdir, "charts/episodic_return_last100")
  assert (
    [p[0] for p in means] == [p[0] for p in counts] == [p[0] for p in rolling]
  )
  assert sum(n for _, n in counts) == total > 100 and count == 100
  assert last100 == pytest.approx(rolling[-1][1], abs=0.006)
  # A point's episodes enter the window per (unroll, env), in an order the
  # points do not show: where the window starts inside a point, only the
  # points after it are known, and the rest of the window's episodes are
  # CartPole returns (1 to 500).
  seen, sums, exact = [], [], 0
  for (_, mean), (_, n), (_, value) in zip(means, counts, rolling):
    seen.append(int(n))
    sums.append(mean * n)
    if sum(seen) <= 100:
      exact += 1
      assert value == pytest.approx(sum(sums) / sum(seen), rel=1e-5)
      continue
    full = inside = 0.0
    for k in range(len(seen) - 1, -1, -1):
      if inside + seen[k] > 100:
        break
      inside += seen[k]
      full += sums[k]
    rest = 100 - inside  # Episodes of point k in it.
    assert (
      (full + rest) / 100 - 1e-3 <= value <= (full + 500 * rest) / 100 + 1e-3
    )
  assert exact >= 1 and len(seen) > exact


@pytest.mark.slow
def test_ctrl_c_stops_everything_within_10_s(tmp_path):
  logdir = str(tmp_path / "int")
  # Env subprocesses too; a terminal's Ctrl-C signals the whole group.
  proc = subprocess.Popen(
    [
      sys.executable,
      "-m",
      "experiments.impala",
      "--env_processes",
      "--total_environment_frames=100000000",
      f"--logdir={logdir}",
      *FAST,
    ],
    cwd=ROOT,
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
    start_new_session=True,
    preexec_fn=default_sigint,  # Even when run with SIGINT ignored.
  )
  try:
    lines = []
    for line in proc.stdout:
      lines.append(line)
      if line.startswith("[impala] frames"):
        break
    assert proc.poll() is None, "".join(lines[-30:])
    children = psutil.Process(proc.pid).children(recursive=True)
    assert len(children) >= 2 * 4  # 2 actors x 4 env procs.
    start = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    rest, _ = proc.communicate(timeout=30)
    elapsed = time.monotonic() - start
  finally:
    if proc.poll() is None:
      os.killpg(proc.pid, signal.SIGKILL)
  assert proc.returncode == 0, "".join(lines[-20:]) + rest[-3000:]
  assert elapsed < 10.0, elapsed
  assert "interrupted: saving a checkpoint" in rest
  assert tf.train.latest_checkpoint(os.path.join(logdir, "checkpoints"))
  assert not [
    c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE
  ]
