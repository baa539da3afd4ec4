"""`evaluate` (ingraph_rl/runners/evaluation.py) of IMPALA's policy: greedy
returns of
hand-set weights equal a plain-Python run of the policy they encode, a
policy that also looks at the last action (fed as the actors feed it)."""

import gymnasium as gym
import numpy as np
import pytest

from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig
from ingraph_rl.runners.evaluation import evaluate


def test_greedy_returns_match_a_python_rollout():
  # One tanh unit sees theta (the pole angle); action 1 (push right) has
  # the logit 10 * unit, action 0 logit 0; the one-hot last action adds
  # 0.5 to the logit of the same action (the features are torso (3),
  # clipped last reward, one-hot last action (2)). So the greedy action is
  # 1 when 10 tanh(theta) beats the pull of the last one: a policy that
  # balances for a while, with returns that differ per episode.
  config = IMPALAConfig(
    num_actions=2, torso=({"type": "dense", "units": 3, "activation": "tanh"},)
  )
  kernel = np.zeros((4, 3), np.float32)
  kernel[2, 0] = 1.0
  head = np.zeros((6, 2), np.float32)
  head[0, 1] = 10.0
  head[4, 0] = head[5, 1] = 0.5
  weights = {
    "torso/dense_0/kernel": kernel,
    "torso/dense_0/bias": np.zeros(3, np.float32),
    "policy_head/kernel": head,
    "policy_head/bias": np.zeros(2, np.float32),
    "value_head/kernel": np.zeros((6, 1), np.float32),
    "value_head/bias": np.zeros(1, np.float32),
  }
  returns = evaluate(
    IMPALABuilder(config),
    weights,
    "CartPole-v1",
    5,
    seed=30,
    max_episode_steps=300,
  )
  expected = []
  sticky = 0
  for i in range(5):
    env = gym.make("CartPole-v1", max_episode_steps=300)
    obs, _ = env.reset(seed=30 + i)
    total, done, last = 0.0, False, 0  # Action 0 after a reset.
    while not done:
      push = 10.0 * np.tanh(np.float32(obs[2])) + 0.5 * last > 0.5 * (1 - last)
      sticky += push != (obs[2] > 0)
      last = int(push)
      obs, reward, terminated, truncated, _ = env.step(last)
      total += reward
      done = terminated or truncated
    expected.append(total)
    env.close()
  np.testing.assert_array_equal(returns, expected)
  assert len(set(expected)) > 1 and max(expected) > 20  # Not trivial.
  assert sticky > 0  # The last action changed some actions.


@pytest.mark.slow
def test_dict_observations_match_a_rollout_env_by_env():
  """DM Lab's Dict observations (frame + instruction; the fake DM Lab in
  worker processes): `evaluate` batches the episodes, and each one's
  return equals that of the same policy playing its env alone."""
  from ingraph_rl.environments import make_vector_env
  from ingraph_rl.runners.evaluation import GreedyPolicy

  level = "dmlab:contributed/dmlab30/language_select_located_object"
  fake = dict(
    lab_module="ingraph_rl.testing.fake_deepmind_lab",
    width=16,
    height=12,
    instructions=True,
  )
  probe = make_vector_env(level, 1, **fake)
  space = probe.observation_space
  probe.close()
  config = IMPALAConfig(
    num_actions=9,
    lstm_units=4,
    torso=(
      {"type": "flatten"},
      {"type": "dense", "units": 8, "activation": "tanh"},
    ),
    seed=4,
  )
  builder = IMPALABuilder(config)
  learner = builder.make_learner(space, "eval_dict_test").build()
  # Random weights of the learner's shapes, large enough that actions
  # change with the frames (not the near-uniform initial policy).
  rng = np.random.default_rng(0)
  weights = {
    k: rng.normal(0.0, 2.0 / np.sqrt(v.shape[0]), v.shape).astype(np.float32)
    for k, v in learner.execute("get_weights").items()
  }
  returns = evaluate(builder, weights, level, 3, seed=11, **fake)

  policy = GreedyPolicy(builder, weights, space)
  expected, texts = [], set()
  for i in range(3):
    env = make_vector_env(level, 1, seed=11 + i, **fake)
    obs, state = env.reset(seed=11 + i), policy.zero_state(1)
    first, reward, action, total, done = True, 0.0, 0, 0.0, False
    while not done:
      texts.add(obs["INSTR"][0])
      actions, state = policy.act(obs, state, [first], [reward], [action])
      step = env.step(actions)
      obs, reward, action = step.obs, float(step.rewards[0]), int(actions[0])
      total += reward
      first, done = False, bool(step.terminated[0] or step.truncated[0])
    expected.append(total)
    env.close()
  np.testing.assert_array_equal(returns, expected)
  assert len(set(expected)) > 1  # Episodes differ.
  assert len(texts) > 1  # So do their instructions.
