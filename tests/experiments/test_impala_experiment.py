"""experiments/impala.py as a user runs it: defaults, TensorBoard scalars
with CleanRL names, checkpoints, resuming from --logdir, the exported
SavedModel played in a fresh process, and Ctrl-C."""

import glob
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import psutil
import tensorflow as tf

ROOT = pathlib.Path(__file__).resolve().parents[2]
FAST = ["--log_every_seconds=0.5", "--num_envs_per_actor=4"]


def run(logdir, frames, extra=()):
  cmd = [sys.executable, "-m", "experiments.impala",
         f"--total_environment_frames={frames}", "--eval_episodes=2",
         f"--logdir={logdir}", *FAST, *extra]
  out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
  assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
  return out.stdout


def scalar_tags(logdir):
  tags = set()
  for path in glob.glob(os.path.join(logdir, "events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        tags.add(value.tag)
  return tags


def test_runs_logs_checkpoints_exports_and_resumes(tmp_path):
  logdir = str(tmp_path / "run")
  out = run(logdir, 16000)
  # 16000 frames = 100 updates of 8 rollouts x 20 steps.
  assert re.search(r"\[impala\] 16000 frames \(\d+ fps\), 100 updates", out)
  assert re.search(r"\[impala\] frames +\d+  fps +\d+", out)  # Progress.
  assert re.search(r"greedy return of the exported policy in a fresh "
                   r"process: \d+\.\d over 2 episodes", out)
  assert f"logs (TensorBoard): {logdir}" in out
  assert f"SavedModel: {logdir}/saved_policy" in out
  assert {"charts/episodic_return", "charts/SPS", "losses/total_loss",
          "losses/policy_loss", "losses/value_loss", "losses/entropy",
          "eval/episodic_return"} <= scalar_tags(logdir)
  checkpoints = os.path.join(logdir, "checkpoints")
  assert tf.train.latest_checkpoint(checkpoints).endswith("ckpt-16000")
  assert os.path.exists(os.path.join(logdir, "saved_policy",
                                     "saved_model.pb"))
  out = run(logdir, 24000)
  assert "resumed from" in out and "at frame 16000" in out
  # The update count continues from the checkpoint: 150 in all.
  assert re.search(r"\[impala\] 24000 frames \(\d+ fps\), 150 updates", out)


def test_ctrl_c_stops_everything_within_10_s(tmp_path):
  logdir = str(tmp_path / "int")
  # Env subprocesses too; a terminal's Ctrl-C signals the whole group.
  proc = subprocess.Popen(
      [sys.executable, "-m", "experiments.impala", "--env_processes",
       "--total_environment_frames=100000000", f"--logdir={logdir}", *FAST],
      cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      start_new_session=True)
  try:
    lines = []
    for line in proc.stdout:
      lines.append(line)
      if line.startswith("[impala] frames"):
        break
    assert proc.poll() is None, "".join(lines[-30:])
    children = psutil.Process(proc.pid).children(recursive=True)
    assert len(children) >= 2 * 4                 # 2 actors x 4 env procs.
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
  assert not [c for c in children if c.is_running() and
              c.status() != psutil.STATUS_ZOMBIE]
