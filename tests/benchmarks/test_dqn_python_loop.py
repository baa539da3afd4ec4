"""The Python-driven DQN loop, benchmarks/dqn_loop.py's baseline (the
experiments run the agent's in-graph `train` only): it does the in-graph
loop's bookkeeping, step for step, with 1-step and n-step returns."""

import dataclasses

import numpy as np
import pytest

from benchmarks.dqn_loop import python_loop_steps
from ingraph_rl.agents.dqn import DQNBuilder, DQNConfig
from ingraph_rl.environments import make_vector_env
from ingraph_rl.testing.component_test import to_numpy


# n_step=1 (a special case of 3) runs in `make test-all` only: suite time.
@pytest.mark.slow
@pytest.mark.parametrize("n_step", [1, 3])
def test_python_loop_matches_the_in_graph_loop(n_step):
  config = DQNConfig(
    num_actions=2,
    batch_size=16,
    learning_starts=100,
    target_sync_every=50,
    n_step=n_step,
    seed=4,
  )
  env_py = make_vector_env("CartPole-v1", 4, seed=4)
  env_ig = make_vector_env("CartPole-v1", 4, seed=4)
  try:
    # Without an env, n-step windows need the rows per observe call.
    python = (
      DQNBuilder(dataclasses.replace(config, num_envs=4))
      .make_agent(env_py.observation_space)
      .build()
    )
    in_graph = DQNBuilder(config).make_agent(env=env_ig).build()
    obs = env_py.reset(4)
    in_graph.execute("reset_env", 4)
    counter = {"vector_steps": 0}
    got, _ = python_loop_steps(python, env_py, obs, 200, config, counter)
    want = to_numpy(in_graph.execute("train", 200))
    assert got["env_steps"] == int(want["env_steps"]) == 800
    assert counter["vector_steps"] == 200
    # Updates from env step 100 (vector step 25) on: steps 25..200.
    assert got["updates"] == int(want["updates"]) == 176
    for key in ("episodes", "length_sum"):
      assert got[key] == int(want[key]) > 0, key
    np.testing.assert_allclose(got["return_sum"], want["return_sum"], rtol=1e-6)
    np.testing.assert_allclose(got["loss_sum"], want["loss_sum"], rtol=1e-4)
  finally:
    env_py.close()
    env_ig.close()
