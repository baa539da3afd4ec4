"""One leaf of a Dict observation as the whole observation.

Agents whose networks take one box (the Q-networks of DQN and Ape-X) run
on envs with Dict observations (DM Lab's RGB_INTERLEAVED frame and INSTR
text) through this wrapper: the network sees the frame, the rest is
dropped.

    >>> from ingraph_rl.testing.instruction_env import InstructionVectorEnv
    >>> env = SelectedObservation(InstructionVectorEnv(2), "RGB_INTERLEAVED")
    >>> env.observation_space.shape, env.reset(seed=0).shape
    ((8, 10, 3), (2, 8, 10, 3))
    >>> env.close()
"""

from ingraph_rl.environments.vector_env import StepResult, VectorEnv
from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import BoxSpace, Dict, TextBox


class SelectedObservation(VectorEnv):
  """`env` with observations (and final observations) `obs[key]`.

  `key` must name a numeric box leaf at the top of `env`'s Dict
  observation space; anything else is a SpaceError naming the keys there
  are. Other attributes (`levels` of DM Lab envs, ...) pass through to
  `env`.
  """

  def __init__(self, env, key):
    space = env.observation_space
    if not isinstance(space, Dict) or key not in space.keys():
      keys = sorted(space.keys()) if isinstance(space, Dict) else None
      raise SpaceError(
        f"observation_key {key!r}: the env's observations are "
        f"{'a Dict with keys ' + str(keys) if keys else repr(space)}",
        expected="the key of a box leaf of a Dict observation",
        received=repr(key),
      )
    if not isinstance(space[key], BoxSpace) or isinstance(space[key], TextBox):
      raise SpaceError(
        f"observation_key {key!r} names {space[key]!r}, not a numeric box",
        expected="the key of a numeric box leaf",
        received=repr(space[key]),
      )
    self.env = env
    self.key = key
    self.num_envs = env.num_envs
    self.observation_space = space[key]
    self.action_space = env.action_space

  def reset(self, seed=None):
    return self.env.reset(seed=seed)[self.key]

  def step(self, actions):
    r = self.env.step(actions)
    return StepResult(
      r.obs[self.key],
      r.rewards,
      r.terminated,
      r.truncated,
      r.final_obs[self.key],
      r.episode_returns,
      r.episode_lengths,
    )

  def close(self):
    self.env.close()

  def __getattr__(self, name):
    # Only called for attributes this wrapper lacks.
    if name == "env":
      raise AttributeError(name)
    return getattr(self.env, name)
