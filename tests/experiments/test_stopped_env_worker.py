"""IMPALA, Ape-X and DQN stop cleanly when an env worker stops answering
(issue 40): SIGSTOP of one env worker process becomes a `WorkerDiedError`
after --env_step_timeout_s, the run saves a checkpoint, says which worker
and exits 1 (IMPALA hung before: the learner waited for rollouts forever;
Ape-X and DQN ended in a traceback without saving), and no env worker is
left. Real runs with env worker processes (Ape-X's and DQN's: the fake DM
Lab, the one env they step in workers)."""

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


@pytest.mark.slow  # ~40 s: the run trains a few seconds first.
def test_a_stopped_env_worker_stops_the_run_with_a_checkpoint(tmp_path):
  run = subprocess.Popen(
    [
      sys.executable,
      "-m",
      "experiments.impala",
      "--env_processes",
      "--num_actors=1",
      "--num_envs_per_actor=2",
      "--env_step_timeout_s=3",
      "--total_environment_frames=100000000",
      "--log_every_seconds=1",
      "--eval_episodes=0",
      f"--logdir={tmp_path}/run",
    ],
    cwd=ROOT,
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
  )
  try:
    out = stop_a_worker(run, "impala", "[impala] frames")
    assert re.search(r"\[impala\] saved \S+ckpt-\d+: a rerun", out)
  finally:
    run.kill()


def worker_children(pid):
  return [
    p
    for p in psutil.Process(pid).children()
    if "worker_main" in " ".join(p.cmdline())
  ]


def stop_a_worker(run, agent, first_line):
  """SIGSTOPs the second of `run`'s two env workers once it prints
  `first_line`; checks that the run then exits 1 within 60 s, without a
  traceback, with one `[agent] stopped: ...` line naming the worker and
  the timeout, and leaves no worker. Returns the run's output."""
  lines = []
  for line in run.stdout:
    lines.append(line)
    if line.startswith(first_line):
      break
  workers = worker_children(run.pid)
  assert len(workers) == 2, "".join(lines)[-3000:]
  stopped = workers[1]
  os.kill(stopped.pid, signal.SIGSTOP)
  t0 = time.monotonic()
  out = "".join(lines) + run.communicate(timeout=120)[0]
  assert run.returncode == 1, out[-3000:]
  assert time.monotonic() - t0 < 60
  # Was: the TF error's traceback (exit 1), or a hang (IMPALA).
  assert "Traceback" not in out, out[-3000:]
  m = re.search(rf"\[{agent}\] stopped: (?:actor 0 failed: )?(.*)", out)
  assert m, out[-3000:]
  assert m[1].startswith("WorkerDiedError: ") and f"pid {stopped.pid}" in m[1]
  assert "did not answer within 3 s while stepping" in m[1]
  assert not [p for p in workers if p.is_running() and p.status() != "zombie"]
  return out


@pytest.mark.slow  # ~60 s: five executors build, the learner trains first.
def test_a_stopped_env_worker_stops_apex_with_its_checkpoints(
  tmp_path, fake_dmlab
):
  logdir = tmp_path / "run"
  run = subprocess.Popen(
    [
      sys.executable,
      "-m",
      "experiments.apex",
      "--flagfile=experiments/flagfiles/apex_dmlab.cfg",
      "--num_actors=1",
      "--num_envs_per_actor=2",
      "--num_replay_shards=1",
      "--buffer_size=2000",
      "--learning_starts=200",
      "--train_batch_size=16",
      "--training_intensity=0",
      "--env_step_timeout_s=3",
      "--total_env_steps=100000000",
      "--log_every_seconds=0.5",
      "--eval_episodes=0",
      f"--logdir={logdir}",
    ],
    cwd=ROOT,
    env=fake_dmlab.env,
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
  )
  try:
    out = stop_a_worker(run, "apex", "[apex] env steps")
    assert "[apex] saved " in out and "a rerun with the same --logdir" in out
    for part in ("learner", "shard_0"):
      assert tf.train.latest_checkpoint(str(logdir / "checkpoints" / part))
  finally:
    run.kill()


def dqn_on_fake_dmlab(logdir, fake_dmlab, *extra):
  return subprocess.Popen(
    [
      sys.executable,
      "-m",
      "experiments.dqn",
      "--env=dmlab:seekavoid_arena_01",
      "--num_envs=2",
      "--steps_per_call=20",
      "--replay_capacity=2000",
      "--learning_starts=50",
      "--batch_size=16",
      "--env_step_timeout_s=3",
      "--total_env_steps=100000000",
      "--eval_episodes=0",
      f"--logdir={logdir}",
      *extra,
    ],
    cwd=ROOT,
    env=fake_dmlab.env,
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
  )


@pytest.mark.slow  # ~60 s: the run builds and trains, then its rerun.
def test_a_stopped_env_worker_stops_dqn_with_a_checkpoint(tmp_path, fake_dmlab):
  logdir = tmp_path / "run"
  run = dqn_on_fake_dmlab(logdir, fake_dmlab)
  try:
    out = stop_a_worker(run, "dqn", "[dqn] env steps")
    saved = re.search(r"\[dqn\] saved (\S+ckpt-(\d+)): a rerun", out)
    assert saved, out[-3000:]
    assert tf.train.latest_checkpoint(str(logdir / "checkpoints")) == saved[1]
    assert int(saved[2]) > 0
  finally:
    run.kill()
  # The rerun resumes at the saved env step.
  rerun = dqn_on_fake_dmlab(logdir, fake_dmlab, "--max_train_seconds=0")
  try:
    out = rerun.communicate(timeout=120)[0]
    assert rerun.returncode == 0, out[-3000:]
    assert f"dqn: resumed from {saved[1]} at env step {saved[2]}\n" in out
  finally:
    rerun.kill()
