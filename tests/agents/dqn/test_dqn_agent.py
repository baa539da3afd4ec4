"""The DQN agent: config checks, API spaces and errors, TF-vs-torch parity of
acting, the in-graph loop's bookkeeping, and learning CartPole."""

import numpy as np
import pytest

from ingraph_rl.agents.dqn import DQNAgent, DQNConfig
from ingraph_rl.environments import GymnasiumVectorEnv, make_vector_env
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing.component_test import to_numpy

OBS = FloatBox((4,))


def test_config_checks_name_every_problem():
  with pytest.raises(BuildError) as e:
    DQNConfig(num_actions=1, discount=1.5, batch_size=0, n_step=3)
  msg = str(e.value)
  for part in ("num_actions must be >= 2", "discount must lie in [0, 1]",
               "n_step > 1", "batch_size"):
    assert part in msg


@pytest.mark.parametrize("prioritized", [False, True])
def test_apis_and_output_spaces(prioritized):
  agent = DQNAgent(DQNConfig(num_actions=3, prioritized=prioritized,
                             batch_size=8, learning_starts=8))
  ex = agent.build(OBS)
  assert set(ex.apis) == {"get_actions", "observe", "update", "sync_target"}
  out = ex.apis["get_actions"].output_space
  assert out["actions"].num_categories == 3
  states = FloatBox((4,), add_batch_rank=True).sample(16, seed=0)
  actions = np.arange(16) % 3
  ex.execute("observe", states, actions, np.ones(16, np.float32), states,
             np.zeros(16, bool))
  stats = {k: float(v) for k, v in ex.execute("update").items()}
  assert set(stats) == {"loss", "grad_norm", "mean_q"}
  assert np.isfinite(list(stats.values())).all()
  assert bool(ex.execute("sync_target"))


def test_bad_input_is_named():
  ex = DQNAgent(DQNConfig(num_actions=2)).build(OBS)
  with pytest.raises(SpaceError, match="component 'dqn', API method "
                     "'get_actions', argument 'states': shape mismatch"):
    ex.execute("get_actions", np.zeros((2, 5), np.float32), True)
  with pytest.raises(SpaceError, match="argument 'actions': dtype mismatch"):
    s = np.zeros((2, 4), np.float32)
    ex.execute("observe", s, np.zeros(2, np.int32), np.zeros(2, np.float32),
               s, np.zeros(2, bool))


def test_greedy_actions_match_between_backends():
  config = DQNConfig(num_actions=2)
  tf_ex = DQNAgent(config).build(OBS)
  torch_ex = DQNAgent(config).build(OBS, backend="torch")
  torch_ex.set_weights(tf_ex.get_weights())
  states = FloatBox((4,), add_batch_rank=True).sample(32, seed=1)
  a = to_numpy(tf_ex.execute("get_actions", states, False))
  b = to_numpy(torch_ex.execute("get_actions", states, False))
  np.testing.assert_allclose(b["q_values"], a["q_values"], rtol=1e-5,
                             atol=1e-6)
  np.testing.assert_array_equal(b["actions"], a["actions"])
  np.testing.assert_array_equal(a["actions"], a["q_values"].argmax(-1))


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_in_graph_loop_bookkeeping(backend):
  env = GymnasiumVectorEnv("CartPole-v1", num_envs=2, seed=3)
  config = DQNConfig(num_actions=2, batch_size=16, learning_starts=40,
                     target_sync_every=7)
  ex = DQNAgent(config, env).build(backend=backend)
  ex.execute("reset_env", 3)
  stats = {k: int(v) if "sum" not in k else float(v)
           for k, v in ex.execute("train", 60).items()}
  assert stats["env_steps"] == 120
  # Updates once 40 env steps (20 vector steps) are in: steps 20..60.
  assert stats["updates"] == 41
  assert int(ex.execute("get_actions", np.zeros((1, 4), np.float32),
                        False)["actions"].shape[0]) == 1
  # CartPole pays 1 per step: finished returns equal finished lengths.
  assert stats["return_sum"] == stats["length_sum"] > 0
  assert stats["episodes"] >= 1
  assert int(ex.get_weights()["dqn/memory/size"]) == 120


def evaluate(executor, episodes, seed):
  env = make_vector_env("CartPole-v1", 1, seed)
  obs, returns = env.reset(), []
  while len(returns) < episodes:
    actions = to_numpy(executor.execute("get_actions", obs, False)["actions"])
    step = env.step(actions)
    obs = step.obs
    if step.terminated[0] or step.truncated[0]:
      returns.append(float(step.episode_returns[0]))
  return float(np.mean(returns))


def learn_cartpole(seed, max_rounds=10):
  """Best greedy 20-episode mean return, evaluated every 8k env steps."""
  env = GymnasiumVectorEnv("CartPole-v1", num_envs=4, seed=seed)
  config = DQNConfig(num_actions=2, learning_rate=2.5e-4,
                     target_sync_every=500, epsilon_steps=10_000, seed=seed)
  ex = DQNAgent(config, env).build()
  ex.execute("reset_env", seed)
  best = 0.0
  for _ in range(max_rounds):       # Each round: 2000 vector steps = 8k env steps.
    for _ in range(4):
      ex.execute("train", 500)
    best = max(best, evaluate(ex, 20, seed=1000))
    if best >= 195:
      break
  return best


def test_learns_cartpole():
  """DQN with the in-graph loop reaches a greedy mean return >= 195 over 20
  episodes within 80k env steps.

  Settings: 4 envs, Adam 2.5e-4, replay 50k, batch 64, target sync every
  500 vector steps, epsilon 1 -> 0.05 over 10k env steps, double-Q, dueling;
  greedy evaluation every 8k env steps. Flakiness, measured with
  `learn_cartpole(seed)` for seeds 0-4: 5 of 5 passed (best returns 209.6,
  208.3, 229.9, 197.9, 199.5; 8-36 s each on this 2-core machine, with
  another process running). Seed 0 is fixed here.
  """
  best = learn_cartpole(seed=0)
  assert best >= 195, best
