"""experiments/ppo.py as a user runs it: CleanRL's flags and scalars,
checkpoints and resume, the exported complete agent played in a fresh
process, and the flagfiles' settings."""

import os
import subprocess
import sys

import pytest
import tensorflow as tf

from experiments import configs
from ingraph_rl.testing.fresh_process import ROOT
from ingraph_rl.testing.tensorboard import scalar_tags
from tests.experiments import on_policy_run


def run(logdir, total, extra=()):
  return on_policy_run.run("experiments.ppo", logdir, total, extra)


@pytest.mark.slow
def test_runs_logs_exports_and_resumes(tmp_path):
  logdir = str(tmp_path / "run")
  out = run(logdir, 1024)
  assert "ppo: 1024 env steps" in out.stdout
  assert (
    "ppo: deterministic return of the exported agent in a fresh process:"
    in out.stdout
  )
  tags = scalar_tags(logdir)
  assert {
    "charts/episodic_return",
    "charts/SPS",
    "charts/learning_rate",
    "losses/policy_loss",
    "losses/value_loss",
    "losses/entropy",
    "losses/approx_kl",
    "losses/clipfrac",
    "losses/explained_variance",
    "eval/episodic_return",
  } <= tags
  agent = tf.saved_model.load(os.path.join(logdir, "saved_agent"))
  assert {"action", "update", "minibatch_step", "get_weights"} <= set(
    agent.signatures
  )
  out = run(logdir, 2048)
  assert (
    f"ppo: resumed from {logdir}/checkpoints/ckpt-1024 at env step 1024"
  ) in out.stdout
  assert "ppo: 2048 env steps" in out.stdout


@pytest.mark.slow
def test_bad_flag_is_one_line(tmp_path):
  out = subprocess.run(
    [sys.executable, "-m", "experiments.ppo", "--num_minibatches=0"],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert out.returncode == 2
  assert out.stderr.strip().splitlines()[-1] == (
    "error: --num_minibatches=0: PPOConfig: num_minibatches must be >= 1"
  )


def test_flagfiles_hold_cleanrl_settings():
  pong = configs.flagfile_values(
    configs.PPO_CLASSES, configs.PPO_CARTPOLE, "ppo_pong.cfg"
  )
  assert (pong["num_envs"], pong["num_steps"], pong["clip_coef"]) == (
    8,
    128,
    0.1,
  )
  assert pong["torso"] == "nature" and pong["shared_torso"]
  assert pong["learning_rate"] == 2.5e-4 and pong["total_timesteps"] == 10**7
  cheetah = configs.flagfile_values(
    configs.PPO_CLASSES, configs.PPO_CARTPOLE, "ppo_halfcheetah.cfg"
  )
  assert (cheetah["num_envs"], cheetah["num_steps"]) == (1, 2048)
  assert (cheetah["update_epochs"], cheetah["num_minibatches"]) == (10, 32)
  assert cheetah["ent_coef"] == 0.0 and cheetah["learning_rate"] == 3e-4
  assert cheetah["normalize_observations"] and cheetah["normalize_rewards"]
  cartpole = configs.flagfile_values(
    configs.PPO_CLASSES, configs.PPO_CARTPOLE, "ppo_cartpole.cfg"
  )
  embedded = configs.ppo_values(flag_values=_empty_flags())
  assert cartpole == embedded  # The flagfile writes the preset out.


def _empty_flags():
  from absl import flags

  from experiments import config_flags

  fv = flags.FlagValues()
  config_flags.define_flags(*configs.PPO_CLASSES, flag_values=fv)
  fv(["test"])
  return fv
