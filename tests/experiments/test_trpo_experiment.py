"""experiments/trpo.py as a user runs it: TRPO's scalars, checkpoints and
resume, the exported complete agent played in a fresh process, its
one-line usage errors and its flagfiles' settings."""

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
  return on_policy_run.run("experiments.trpo", logdir, total, extra)


# PPO's twin of this test runs experiments/on_policy.py in the default
# run; TRPO's (~25 s alone) waits for `make test-all`.
@pytest.mark.slow
def test_runs_logs_exports_and_resumes(tmp_path):
  logdir = str(tmp_path / "run")
  out = run(logdir, 256)
  assert "trpo: 256 env steps" in out.stdout
  assert (
    "trpo: deterministic return of the exported agent in a fresh process:"
    in out.stdout
  )
  tags = scalar_tags(logdir)
  assert {
    "charts/episodic_return",
    "charts/SPS",
    "charts/line_search_fraction",
    "losses/policy_loss",
    "losses/value_loss",
    "losses/entropy",
    "losses/quadratic_kl",
    "losses/explained_variance",
    "eval/episodic_return",
  } <= tags
  # PPO's clipped-surrogate scalars do not exist for TRPO.
  assert not {"losses/clipfrac", "losses/approx_kl"} & tags
  agent = tf.saved_model.load(os.path.join(logdir, "saved_agent"))
  assert {"action", "update", "get_weights"} <= set(agent.signatures)
  assert "minibatch_step" not in agent.signatures
  out = run(logdir, 512)
  assert (
    f"trpo: resumed from {logdir}/checkpoints/ckpt-256 at env step 256"
  ) in out.stdout
  assert "trpo: 512 env steps" in out.stdout


@pytest.mark.slow
def test_bad_flag_is_one_line():
  out = subprocess.run(
    [sys.executable, "-m", "experiments.trpo", "--max_kl=0"],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert out.returncode == 2
  assert out.stderr.strip().splitlines()[-1] == (
    "error: --max_kl=0.0: TRPOConfig: max_kl must be > 0, cg_damping and "
    "accept_ratio >= 0"
  )


def test_hopper_flagfile_holds_baselines_settings():
  hopper = configs.flagfile_values(
    configs.TRPO_CLASSES, configs.TRPO_CARTPOLE, "trpo_hopper.cfg"
  )
  assert hopper["env"] == "Hopper-v5" and hopper["total_timesteps"] == 10**6
  assert (hopper["num_envs"], hopper["num_steps"]) == (1, 2048)
  assert (hopper["max_kl"], hopper["cg_iterations"]) == (0.01, 10)
  assert (hopper["cg_damping"], hopper["line_search_steps"]) == (0.1, 10)
  assert (hopper["gamma"], hopper["gae_lambda"]) == (0.99, 0.95)
  assert (hopper["value_epochs"], hopper["num_minibatches"]) == (5, 32)
  assert hopper["normalize_observations"] and not hopper["normalize_rewards"]
  assert not hopper["shared_torso"]
  cartpole = configs.flagfile_values(
    configs.TRPO_CLASSES, configs.TRPO_CARTPOLE, "trpo_cartpole.cfg"
  )
  assert cartpole == configs.trpo_values(flag_values=_empty_flags())


def _empty_flags():
  from absl import flags

  from experiments import config_flags

  fv = flags.FlagValues()
  config_flags.define_flags(*configs.TRPO_CLASSES, flag_values=fv)
  fv(["test"])
  return fv
