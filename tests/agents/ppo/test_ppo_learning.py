"""PPO learns CartPole-v1 (the default suite's PPO learning test)."""

import numpy as np
import pytest

from experiments import configs
from ingraph_rl.agents.ppo import PPOBuilder
from ingraph_rl.environments import make_vector_env
from ingraph_rl.runners.evaluation import mean_greedy_return


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_ppo_learns_cartpole():
  """The embedded preset (8 envs x 128 steps, 4 epochs x 4 minibatches,
  lr 1e-3 annealed over 200k steps), trained for 120k env steps (~30-40 s
  here): the deterministic policy's mean return over 10 episodes must
  reach 195, CartPole's classic "solved" level (and the DQN test's), where
  the untrained policy gets ~10-40 (checked too). The 5-seed, 60 s
  measurement of reaching 500 is benchmarks/learning.py's ppo_cartpole."""
  values = configs.config_flags.resolve(
    configs.PPO_CLASSES, configs.PPO_CARTPOLE, flag_values=_no_flags()
  )
  env = make_vector_env("CartPole-v1", num_envs=values["num_envs"], seed=0)
  config = configs.ppo_config(values, env.action_space)
  agent = PPOBuilder(config).make_agent(env=env).build()

  def greedy():
    return mean_greedy_return(
      lambda o: agent.execute("get_actions", o, False)["actions"].numpy(),
      "CartPole-v1",
      10,
      seed=10_000,
    )

  untrained = greedy()
  assert untrained < 100
  agent.execute("reset_env", 0)
  env_steps = 0
  while env_steps < 120_000:
    out = agent.execute("rollout")
    stats = agent.execute("update", out["batch"])
    env_steps = int(out["stats"]["env_steps"])
  assert np.isfinite(float(stats["value_loss"]))
  trained = greedy()
  assert trained >= 195, (untrained, trained)


def _no_flags():
  from absl import flags

  fv = flags.FlagValues()
  configs.config_flags.define_flags(*configs.PPO_CLASSES, flag_values=fv)
  fv(["test"])
  return fv
