"""Greedy evaluation of IMPALA weights on a plain gymnasium env, stepped in
Python (no queue, no stepper): what a trained policy scores, independent of
the actors' sampling."""

import numpy as np

from ingraph_rl.agents.impala.networks import IMPALAPolicy, make_network
from ingraph_rl.spaces import BoolBox, Dict, FloatBox, from_gymnasium


def weights_space(weights):
  """The space of a learner's `get_weights()` output (tensors or arrays)."""
  return Dict({path: FloatBox(tuple(np.shape(v)),
                              dtype=np.asarray(v).dtype)
               for path, v in weights.items()})


class GreedyPolicy:
  """An `IMPALAPolicy` executor loaded with `weights`; `act(observations
  [N, ...], state, resets [N])` -> (greedy actions [N], next state)."""

  def __init__(self, config, weights, observation_space):
    from ingraph_rl.executors.tensorflow import TFExecutor
    weights = {k: np.asarray(v) for k, v in weights.items()}
    self.network = make_network(config, observation_space)
    self.observation_space = observation_space
    spaces = {"observations":
                  observation_space.with_batch_rank().with_time_rank(),
              "state": self.network.state_space(),
              "resets": BoolBox(add_batch_rank=True, add_time_rank=True),
              "weights": weights_space(weights)}
    self.executor = TFExecutor(IMPALAPolicy(self.network, seed=config.seed),
                               spaces, api_names=["act", "set_weights"],
                               seed=config.seed)
    self.executor.execute("set_weights", weights)

  def zero_state(self, n):
    return self.network.zero_state(n)

  def act(self, observations, state, resets):
    obs = np.asarray(observations, self.observation_space.dtype)[:, None]
    out = self.executor.execute("act", obs, state,
                                np.asarray(resets, bool)[:, None])
    return (out["greedy_action"].numpy()[:, 0],
            {k: v.numpy() for k, v in out["state"].items()})


def evaluate(config, weights, env_id, num_episodes, seed=0,
             **make_kwargs):
  """Returns of `num_episodes` greedy episodes (the `greedy_action`, argmax
  of the logits) of `gymnasium.make(env_id, **make_kwargs)`; episode i
  runs in its own env from `reset(seed=seed + i)`. The episodes run side
  by side, one policy call per step for all of them; an LSTM's state is
  carried through an episode and reset at its first step, as the actors
  do.

  `weights`: a learner's `get_weights()` output (tensors or arrays).
  Returns a float64 array [num_episodes].
  """
  import gymnasium as gym
  envs = [gym.make(env_id, **make_kwargs) for _ in range(num_episodes)]
  try:
    policy = GreedyPolicy(config, weights,
                          from_gymnasium(envs[0].observation_space))
    obs = np.stack([env.reset(seed=seed + i)[0]
                    for i, env in enumerate(envs)])
    state = policy.zero_state(num_episodes)
    resets = np.ones(num_episodes, bool)
    running = np.ones(num_episodes, bool)
    returns = np.zeros(num_episodes)
    while running.any():
      actions, state = policy.act(obs, state, resets)
      resets[:] = False
      for i in np.flatnonzero(running):
        # Finished envs keep their last observation; their actions are
        # ignored.
        obs[i], reward, terminated, truncated, _ = envs[i].step(
            int(actions[i]))
        returns[i] += float(reward)
        running[i] = not (terminated or truncated)
    return returns
  finally:
    for env in envs:
      env.close()
