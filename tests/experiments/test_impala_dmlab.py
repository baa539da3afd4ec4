"""The DM Lab flagfile runs unchanged through experiments/impala.py when a
`deepmind_lab` module is importable -- here the fake, put on the path under
the real module's name (nothing in the package knows about it). DM Lab
steps in env worker processes, which never import tensorflow: the fake,
like real DM Lab, dies in a process that did."""

import os
import re
import subprocess
import sys

import pytest

from ingraph_rl.testing.fresh_process import ROOT


# ~16 s; test_impala_dmlab30.py trains through the fake DM Lab in make test.
@pytest.mark.slow
def test_dmlab_flagfile_trains_with_a_deepmind_lab_module(tmp_path, fake_dmlab):
  logdir = tmp_path / "run"
  # The flagfile as is (deep ResNet torso, LSTM 256, 4 action repeats),
  # with a budget and actor count small enough for a test.
  out = fake_dmlab.run(
    "impala",
    "--flagfile=experiments/flagfiles/impala_dmlab.cfg",
    "--num_actors=1",
    "--num_envs_per_actor=2",
    "--unroll_length=10",
    "--batch_size=2",
    "--total_environment_frames=800",
    f"--logdir={logdir}",
    timeout=300,
  )
  assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
  # 800 frames = 10 updates of 2 rollouts x 10 steps x 4 repeats.
  assert re.search(
    r"\[impala\] 800 frames \(\d+ fps\), 10 updates", out.stdout
  ), out.stdout[-2000:]
  assert "[impala] dmlab:seekavoid_arena_01: 1 actors" in out.stdout
  assert (logdir / "saved_policy" / "saved_model.pb").exists()
  assert re.search(
    r"greedy return of the exported policy in a fresh "
    r"process: -?\d+\.\d over 20 episodes",
    out.stdout,
  )
  # play_policy.py plays it, DM Lab in a worker process: from /, isolated
  # (-I: no PYTHONPATH for the player itself; its workers get the shim).
  play = subprocess.run(
    [
      sys.executable,
      "-I",
      str(ROOT / "experiments" / "play_policy.py"),
      f"--saved_model={logdir / 'saved_policy'}",
      "--env=dmlab:seekavoid_arena_01",
      "--episodes=2",
      "--seed=3",
    ],
    cwd="/",
    env=dict(os.environ, PYTHONPATH=fake_dmlab.shim),
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert play.returncode == 0, play.stdout[-2000:] + play.stderr[-3000:]
  lines = play.stdout.strip().splitlines()
  assert [line.split()[:3] for line in lines[:2]] == [
    ["episode", "0", "return"],
    ["episode", "1", "return"],
  ]
  assert lines[-1].startswith("mean_return ")


@pytest.mark.slow
def test_without_deepmind_lab_the_error_says_how_to_install(tmp_path):
  out = subprocess.run(
    [
      sys.executable,
      "-m",
      "experiments.impala",
      "--env=dmlab:seekavoid_arena_01",
      f"--logdir={tmp_path}",
    ],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=120,
    env=dict(os.environ, PYTHONPATH=str(ROOT)),
  )
  # A usage error: one line naming the flag, exit 2, before anything builds.
  assert out.returncode == 2, out.stderr
  line = out.stderr.strip().splitlines()[-1]
  assert line.startswith("error: --env=dmlab:seekavoid_arena_01: ")
  assert "deepmind_lab" in line and "bazel" in line.lower()
