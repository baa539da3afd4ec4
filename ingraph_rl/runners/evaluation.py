"""Greedy evaluation of a policy with given weights (any builder's
`make_policy`: IMPALA's, or an `ActorLearnerBuilder`'s) on a plain
gymnasium env (or DM Lab in env worker processes), stepped in Python (no
queue, no stepper): what a trained policy scores, independent of the
actors' sampling."""

import numpy as np

from ingraph_rl.spaces import TextBox, from_gymnasium


class GreedyPolicy:
  """`builder.make_policy(observation_space)` loaded with `weights`;
  `act(observations [N, ...], state, resets [N], last_rewards [N],
  last_actions [N])` -> (greedy actions [N], next state). Observations may
  be dicts (a Dict observation space)."""

  def __init__(self, builder, weights, observation_space):
    root = builder.make_policy(observation_space)
    self.state_space = root.input_spaces["state"]
    self.observation_space = observation_space
    self.executor = root.build()
    self.executor.execute(
      "set_weights", {k: np.asarray(v) for k, v in weights.items()}
    )

  def zero_state(self, n):
    """The policy's initial state for `n` episodes (NumPy zeros)."""
    return self.state_space.zeros(n)

  def act(self, observations, state, resets, last_rewards, last_actions):
    space = self.observation_space
    obs = space.unflatten_value(
      [
        np.asarray(x, object if isinstance(s, TextBox) else s.dtype)[:, None]
        for (_, s), x in zip(space.flatten(), space.flatten_value(observations))
      ]
    )
    out = self.executor.execute(
      "act",
      obs,
      state,
      np.asarray(resets, bool)[:, None],
      np.asarray(last_rewards, np.float32)[:, None],
      np.asarray(last_actions, np.int64)[:, None],
    )
    return (
      out["greedy_action"].numpy()[:, 0],
      {k: v.numpy() for k, v in out["state"].items()},
    )


class _SingleEnv:
  """gymnasium's single-env `reset` / `step` on a 1-env `VectorEnv` (its
  same-step autoreset is never seen: an episode's env is not stepped after
  its end)."""

  def __init__(self, env):
    self.env = env
    self.observation_space = env.observation_space

  @staticmethod
  def _first(obs):
    return (
      {k: v[0] for k, v in obs.items()} if isinstance(obs, dict) else obs[0]
    )

  def reset(self, seed=None):
    return self._first(self.env.reset(seed=seed)), {}

  def step(self, action):
    result = self.env.step(np.array([action], np.int64))
    return (
      self._first(result.obs),
      float(result.rewards[0]),
      bool(result.terminated[0]),
      bool(result.truncated[0]),
      {},
    )

  def close(self):
    self.env.close()


def make_eval_envs(env_id, num_episodes, seed=0, **make_kwargs):
  """(`num_episodes` envs with gymnasium's single-env API, their
  observation space). gymnasium ids: `gymnasium.make(env_id,
  **make_kwargs)`; DM Lab ids: `make_vector_env(env_id, 1, seed + i,
  **make_kwargs)` each (a worker process per env, as for the actors: DM
  Lab crashes in a process that imported tensorflow)."""
  from ingraph_rl.environments import is_dmlab_id, make_vector_env

  if is_dmlab_id(env_id):
    envs = []
    try:
      for i in range(num_episodes):
        envs.append(
          _SingleEnv(make_vector_env(env_id, 1, seed=seed + i, **make_kwargs))
        )
    except BaseException:
      for env in envs:
        env.close()
      raise
    return envs, envs[0].observation_space
  import gymnasium as gym

  envs = [gym.make(env_id, **make_kwargs) for _ in range(num_episodes)]
  return envs, from_gymnasium(envs[0].observation_space)


def _stack(observations):
  """One env's observations after another -> a batch [N, ...] (dicts of
  them for Dict observations; strings in object arrays, where a longer
  string fits later)."""
  if isinstance(observations[0], dict):
    return {k: _stack([o[k] for o in observations]) for k in observations[0]}
  values = [np.asarray(o) for o in observations]
  if values[0].dtype.kind not in "USO":
    return np.stack(values)
  out = np.empty((len(values),) + values[0].shape, object)
  for i, value in enumerate(values):
    out[i] = value.item() if value.ndim == 0 else value
  return out


def _set_row(batch, i, observation):
  if isinstance(batch, dict):
    for k, v in batch.items():
      _set_row(v, i, observation[k])
  else:
    batch[i] = observation


def evaluate(builder, weights, env_id, num_episodes, seed=0, **make_kwargs):
  """Returns of `num_episodes` greedy episodes (the `greedy_action`, argmax
  of the logits) of `gymnasium.make(env_id, **make_kwargs)` (DM Lab ids:
  see `make_eval_envs`); episode i runs in its own env from
  `reset(seed=seed + i)`. The episodes run side
  by side, one policy call per step for all of them; an LSTM's state is
  carried through an episode and reset at its first step, as the actors
  do.

  `builder`: the agent's builder (its `make_policy`); `weights`: a
  learner's `get_weights()` output (tensors or arrays).
  Observations may be Dicts (DM Lab's frame and instruction).
  Returns a float64 array [num_episodes].
  """
  envs, observation_space = make_eval_envs(
    env_id, num_episodes, seed, **make_kwargs
  )
  try:
    policy = GreedyPolicy(builder, weights, observation_space)
    obs = _stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)])
    state = policy.zero_state(num_episodes)
    resets = np.ones(num_episodes, bool)
    running = np.ones(num_episodes, bool)
    returns = np.zeros(num_episodes)
    # The reward and action that came with each observation (0 after a
    # reset, as in the actors).
    last_rewards = np.zeros(num_episodes, np.float32)
    last_actions = np.zeros(num_episodes, np.int64)
    while running.any():
      actions, state = policy.act(
        obs, state, resets, last_rewards, last_actions
      )
      resets[:] = False
      last_actions[:] = actions
      for i in np.flatnonzero(running):
        # Finished envs keep their last observation; their actions are
        # ignored.
        new_obs, reward, terminated, truncated, _ = envs[i].step(
          int(actions[i])
        )
        _set_row(obs, i, new_obs)
        last_rewards[i] = reward
        returns[i] += float(reward)
        running[i] = not (terminated or truncated)
    return returns
  finally:
    for env in envs:
      env.close()


def mean_greedy_return(act, env_id, num_episodes, seed=0, make_env=None):
  """The mean return of `num_episodes` episodes played side by side: the
  first episode of each env of a `num_episodes`-env vector env of
  `env_id` (env i seeded `seed + i`), `act(observations [N, ...]) ->
  actions [N]` choosing every action, one call per step for all of them:
  e.g. DQN's greedy `get_actions(obs, explore=False)`. An env's later
  episodes (its autoreset) are not counted. `make_env(num_envs, seed)`:
  the env (default `make_vector_env(env_id, ...)`), e.g. DM Lab in worker
  processes."""
  from ingraph_rl.environments import make_vector_env

  if make_env is None:
    env = make_vector_env(env_id, num_episodes, seed)
  else:
    env = make_env(num_episodes, seed)
  try:
    obs, returns = env.reset(), np.full(num_episodes, np.nan)
    while np.isnan(returns).any():
      step = env.step(np.asarray(act(obs)))
      obs = step.obs
      ended = (step.terminated | step.truncated) & np.isnan(returns)
      returns[ended] = step.episode_returns[ended]
    return float(np.mean(returns))
  finally:
    env.close()
