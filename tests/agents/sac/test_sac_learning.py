"""SAC learns Pendulum-v1 (the default suite's SAC learning test)."""

import numpy as np

from experiments import configs
from ingraph_rl.agents.sac import SACBuilder
from ingraph_rl.environments import make_vector_env
from ingraph_rl.runners.evaluation import mean_greedy_return

STEPS = 8_000


def test_sac_learns_pendulum():
  """The embedded preset (64x64 actor and Qs, batch 128, 1k random steps)
  trained for 8k env steps in 1k-step train calls: the deterministic
  policy's mean return over 10 episodes must reach -300 (a random or
  untrained policy gets about -1,200 to -1,500; checked too). The 5-seed
  measurement is benchmarks/learning.py's sac_pendulum."""
  values = configs.config_flags.resolve(
    configs.SAC_CLASSES, configs.SAC_PENDULUM, flag_values=_no_flags()
  )
  env = make_vector_env("Pendulum-v1", 1, seed=0)
  agent = (
    SACBuilder(configs.sac_config(values, env)).make_agent(env=env).build()
  )

  def deterministic():
    return mean_greedy_return(
      lambda o: agent.execute("get_actions", o, False)["actions"].numpy(),
      "Pendulum-v1",
      10,
      seed=10_000,
    )

  untrained = deterministic()
  assert untrained < -700
  agent.execute("reset_env", 0)
  steps = 0
  while steps < STEPS:
    stats = agent.execute("train", 1000)
    steps = int(stats["env_steps"])
  assert int(stats["updates"]) == 1000
  assert np.isfinite(float(stats["qf_loss_sum"]))
  trained = deterministic()
  env.close()
  assert trained >= -300, (untrained, trained)


def _no_flags():
  from absl import flags

  fv = flags.FlagValues()
  configs.config_flags.define_flags(*configs.SAC_CLASSES, flag_values=fv)
  fv(["test"])
  return fv
