"""kill -9 during training, then a rerun with the same --logdir: the run
resumes from the latest periodic checkpoint with exactly its step counter,
so it loses only the steps since that checkpoint."""

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
import tensorflow as tf

from ingraph_rl.testing.fresh_process import ROOT

TIMEOUT_S = 45.0  # Bound on each wait (a start imports TF: ~10 s).


class Process:
  """An experiment as a subprocess (its own session), its output lines
  read in the background."""

  def __init__(self, module, flags):
    self.proc = subprocess.Popen(
      [sys.executable, "-m", module, *flags],
      cwd=ROOT,
      stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT,
      text=True,
      start_new_session=True,
    )
    self.lines, self._queue = [], queue.Queue()
    threading.Thread(target=self._read, daemon=True).start()

  def _read(self):
    for line in self.proc.stdout:
      self._queue.put(line)
    self._queue.put(None)

  def wait_for(self, predicate, timeout_s=TIMEOUT_S):
    """Reads lines until predicate(line) holds; returns that line."""
    deadline = time.monotonic() + timeout_s
    while True:
      try:
        line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
      except queue.Empty:
        raise AssertionError(
          "timed out; output:\n" + "".join(self.lines[-30:])
        ) from None
      if line is None:
        raise AssertionError(
          f"exited ({self.proc.wait()}); output:\n" + "".join(self.lines[-30:])
        )
      self.lines.append(line)
      if predicate(line):
        return line

  def kill(self):
    os.killpg(self.proc.pid, signal.SIGKILL)  # Its session: ours only.
    self.proc.wait(timeout=30)

  def finish(self, timeout_s=TIMEOUT_S):
    """All output after the process exits (asserting exit code 0)."""
    try:
      self.proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
      self.kill()
      raise
    while True:
      line = self._queue.get(timeout=10)
      if line is None:
        break
      self.lines.append(line)
    out = "".join(self.lines)
    assert self.proc.returncode == 0, out[-3000:]
    return out


def latest_number(checkpoints):
  latest = tf.train.latest_checkpoint(checkpoints)
  return None if latest is None else int(latest.rsplit("-", 1)[1])


def train_until_checkpoint_then_kill(module, flags, checkpoints, progress):
  """Starts the run, waits for a periodic checkpoint and a progress line
  (steps parsed by the `progress` regex) past it, then kills -9. Returns
  the last steps printed before the kill."""
  run = Process(module, flags)
  try:

    def past_a_checkpoint(line):
      match = re.search(progress, line)
      number = latest_number(checkpoints)
      return match and number is not None and int(match.group(1)) > number

    run.wait_for(past_a_checkpoint)
  finally:
    run.kill()
  return [int(s) for s in re.findall(progress, "".join(run.lines))][-1]


@pytest.mark.slow  # ~10 s; utils/test_checkpoints kills saves in make test.
def test_dqn_resumes_at_the_killed_runs_latest_checkpoint(tmp_path):
  logdir = str(tmp_path / "run")
  checkpoints = os.path.join(logdir, "checkpoints")
  flags = [
    "--flagfile=experiments/flagfiles/dqn_cartpole.cfg",
    "--steps_per_call=100",
    "--checkpoint_every_minutes=0.02",
    f"--logdir={logdir}",
    "--eval_episodes=1",
  ]
  progress = r"env steps (\d+)  SPS"
  last = train_until_checkpoint_then_kill(
    "experiments.dqn",
    flags + ["--total_env_steps=1000000"],
    checkpoints,
    progress,
  )
  number = latest_number(checkpoints)
  # The checkpoint holds the step counter of its name (4 envs).
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(checkpoints))
  steps = reader.get_tensor(
    "agent/variables_by_path/dqn.Svector_steps/.ATTRIBUTES/VARIABLE_VALUE"
  )
  assert int(steps) * 4 == number <= last

  run = Process(
    "experiments.dqn", flags + [f"--total_env_steps={number + 800}"]
  )
  out = run.finish(timeout_s=2 * TIMEOUT_S)
  assert (
    f"dqn: resumed from {checkpoints}/ckpt-{number} at env step {number}"
  ) in out
  # The counter continues from the checkpoint: 2 calls of 400 env steps.
  resumed = [int(s) for s in re.findall(progress, out)]
  assert resumed == [number + 400, number + 800]
  assert f"dqn: {number + 800} env steps" in out
  assert latest_number(checkpoints) == number + 800


@pytest.mark.slow  # ~10 s; utils/test_checkpoints kills saves in make test.
def test_impala_resumes_at_the_killed_runs_latest_checkpoint(tmp_path):
  logdir = str(tmp_path / "run")
  checkpoints = os.path.join(logdir, "checkpoints")
  flags = [
    "--checkpoint_every_minutes=0.02",
    "--num_envs_per_actor=4",
    "--log_every_seconds=0.5",
    "--eval_episodes=0",
    f"--logdir={logdir}",
  ]
  progress = r"\[impala\] frames +(\d+)  fps"
  last = train_until_checkpoint_then_kill(
    "experiments.impala",
    flags + ["--total_environment_frames=10000000"],
    checkpoints,
    progress,
  )
  number = latest_number(checkpoints)
  # An update trains on 8 rollouts x 20 steps = 160 frames.
  assert number % 160 == 0 and number <= last

  run = Process(
    "experiments.impala",
    flags + [f"--total_environment_frames={number + 1600}"],
  )
  out = run.finish(timeout_s=2 * TIMEOUT_S)
  assert (
    f"[impala] resumed from {checkpoints}/ckpt-{number} at frame {number}"
  ) in out
  # The frame count and the update count (the optimizer's step) continue
  # from the checkpoint: 10 more updates.
  updates = (number + 1600) // 160
  assert re.search(
    rf"\[impala\] {number + 1600} frames \(\d+ fps\), "
    rf"{updates} updates",
    out,
  ), out[-2000:]
  assert latest_number(checkpoints) == number + 1600
