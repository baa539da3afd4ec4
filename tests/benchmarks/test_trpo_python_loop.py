"""The Python-driven TRPO update (the baseline of ppo_throughput's TRPO
case) does the agent's work: from the same weights and batch it takes the
same natural-gradient step with the same line search as the agent's
one-call update."""

import numpy as np
import pytest

from benchmarks.trpo_python_loop import POLICY, PythonLoopTRPO
from ingraph_rl.agents.ppo.trpo_builder import TRPOBuilder
from ingraph_rl.agents.ppo.trpo_config import TRPOConfig
from ingraph_rl.environments import make_vector_env


# Two TRPO builds (~30-60 s on the shared 2 cores): `make test-all`.
@pytest.mark.slow
def test_python_loop_takes_the_agents_policy_step():
  env = make_vector_env("CartPole-v1", 2, 0)
  config = TRPOConfig(
    num_actions=2, num_steps=64, num_minibatches=4, value_epochs=1, seed=0
  )
  agent = TRPOBuilder(config).make_agent(env=env).build()
  agent.execute("reset_env", 0)
  batch = agent.execute("rollout")["batch"]
  loop = PythonLoopTRPO(config, env.observation_space, seed=0)
  theirs, mine = agent.variables(), loop.executor.variables()
  policy = [k for k in mine if any(p in k for p in POLICY)]
  assert len(policy) == 6  # 2 torso layers and the head (categorical).
  for path, variable in mine.items():
    variable.assign(theirs[path])
  start = {k: mine[k].numpy().copy() for k in policy}

  loop.update({k: v.numpy() for k, v in batch.items()})
  stats = agent.execute("update", batch)
  assert float(stats["quadratic_kl"]) == pytest.approx(config.max_kl, rel=1e-3)
  moved = 0.0
  for k in policy:
    np.testing.assert_allclose(
      mine[k].numpy(), theirs[k].numpy(), rtol=2e-3, atol=2e-5, err_msg=k
    )
    moved += float(np.abs(theirs[k].numpy() - start[k]).sum())
  assert moved > 1e-3  # The step was taken (not both left in place).
  env.close()
