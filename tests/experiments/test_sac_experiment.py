"""experiments/sac.py as a user runs it: CleanRL's flags and scalars,
checkpoints (with the replay memory) and resume, the exported complete
agent played deterministically in a fresh process, and the flagfiles."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from experiments import configs
from ingraph_rl.testing.fresh_process import ROOT
from ingraph_rl.testing.tensorboard import scalar_tags


def run(logdir, total, extra=()):
  cmd = [
    sys.executable,
    "-m",
    "experiments.sac",
    f"--total_timesteps={total}",
    "--steps_per_call=200",
    "--learning_starts=200",
    "--batch_size=32",
    "--hidden_units=16",
    "--eval_episodes=1",
    f"--logdir={logdir}",
    *extra,
  ]
  out = subprocess.run(
    cmd, cwd=ROOT, capture_output=True, text=True, timeout=900
  )
  assert out.returncode == 0, out.stderr[-3000:]
  return out


@pytest.mark.slow  # Two runs, each a build, an export and a fresh process.
def test_runs_logs_exports_and_resumes(tmp_path):
  logdir = str(tmp_path / "run")
  out = run(logdir, 400)
  assert "sac: 400 env steps" in out.stdout
  assert "deterministic return of the exported policy in a fresh" in out.stdout
  tags = scalar_tags(logdir)
  assert {
    "charts/episodic_return",
    "charts/SPS",
    "losses/qf1_values",
    "losses/qf_loss",
    "losses/actor_loss",
    "losses/alpha",
    "losses/alpha_loss",
    "eval/episodic_return",
  } <= tags
  agent = tf.saved_model.load(os.path.join(logdir, "saved_agent"))
  assert {"action", "observe", "update", "get_weights"} <= set(agent.signatures)
  # The replay memory is in the checkpoint.
  reader = tf.train.load_checkpoint(os.path.join(logdir, "checkpoints"))
  stored = [k for k in reader.get_variable_to_shape_map() if "memory" in k]
  assert stored
  a = agent.signatures["action"](
    states=tf.zeros([3, 3]), explore=tf.constant(False)
  )["actions"].numpy()
  assert a.shape == (3, 1) and np.all(np.abs(a) <= 2.0)
  out = run(logdir, 600)
  assert f"sac: resumed from {logdir}/checkpoints/ckpt-400 at env step 400" in (
    out.stdout
  )
  assert "sac: 600 env steps" in out.stdout


@pytest.mark.slow
def test_bad_flag_is_one_line():
  out = subprocess.run(
    [sys.executable, "-m", "experiments.sac", "--tau=0"],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert out.returncode == 2
  assert out.stderr.strip().splitlines()[-1].startswith("error: --tau=0.0: ")


def test_flagfiles_hold_cleanrl_settings():
  for name, env in (
    ("sac_halfcheetah.cfg", "HalfCheetah-v5"),
    ("sac_hopper.cfg", "Hopper-v5"),
  ):
    values = configs.flagfile_values(
      configs.SAC_CLASSES, configs.SAC_PENDULUM, name
    )
    assert values["env"] == env
    assert values["total_timesteps"] == 300_000
    assert (values["hidden_units"], values["batch_size"]) == (256, 256)
    assert (values["q_lr"], values["policy_lr"]) == (1e-3, 3e-4)
    assert values["policy_frequency"] == 2 and values["tau"] == 0.005
    assert values["learning_starts"] == 5000 and values["autotune"]
