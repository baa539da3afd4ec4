"""The one vector-environment interface the agents step.

Every environment (gymnasium, ale-py's C++ Atari vector env, ...) is wrapped
as a `VectorEnv` of `num_envs` copies that step together and reset themselves
("same-step" autoreset): `step(actions)` returns a `StepResult` whose `obs` is
always the observation to act on next, i.e. the FIRST observation of a new
episode where one ended at this step, while `final_obs` holds the true last
observation of the episode that ended.

Terminated vs truncated (gymnasium >= 1.x): `terminated` means the MDP reached
a terminal state (the value of `final_obs` is 0); `truncated` means the episode
was cut short (a time limit), so a learner should bootstrap from
`V(final_obs)`. Both may be True at once (terminal state on the last allowed
step): then treat it as terminated.
"""

import abc
from typing import NamedTuple

import numpy as np


class StepResult(NamedTuple):
  """One step of `num_envs` environments. All fields have leading dim N.

  obs:             [N, ...] space dtype. Observation to act on next (after an
                   episode end: the first observation of the new episode).
  rewards:         [N] float32. Reward of this step.
  terminated:      [N] bool. The episode reached a terminal state.
  truncated:       [N] bool. The episode was cut short (time limit).
  final_obs:       [N, ...] space dtype. Where terminated | truncated: the
                   last observation of the ended episode; else equal to obs.
  episode_returns: [N] float32. Where terminated | truncated: the ended
                   episode's (undiscounted) return; else 0.
  episode_lengths: [N] int32. Where terminated | truncated: the ended
                   episode's number of steps; else 0.
  """

  obs: object
  rewards: object
  terminated: object
  truncated: object
  final_obs: object
  episode_returns: object
  episode_lengths: object

  def transition(self, obs, actions):
    """(obs, actions, rewards, final_obs, terminated, truncated): this step
    taken with `actions` from `obs`, as an agent's `observe` takes it."""
    return (
      obs,
      actions,
      self.rewards,
      self.final_obs,
      self.terminated,
      self.truncated,
    )


class VectorEnv(abc.ABC):
  """`num_envs` environments stepped as one; NumPy in, NumPy out.

  Subclasses set `num_envs`, `observation_space` and `action_space`
  (`ingraph_rl.spaces`, per environment: no batch rank) and implement
  `reset`, `step` and `close`.
  """

  num_envs: int
  observation_space: object
  action_space: object

  @abc.abstractmethod
  def reset(self, seed=None):
    """Resets all environments; returns obs [N, ...].

    An int `seed` seeds environment i with `seed + i`. `None` uses the
    constructor's seed on the first reset and continues the environments'
    random streams afterwards.
    """

  @abc.abstractmethod
  def step(self, actions):
    """Steps all environments with actions [N, ...]; returns a StepResult."""

  @abc.abstractmethod
  def close(self):
    """Releases the environments (processes, threads)."""

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


class EpisodeStatistics:
  """Running per-environment episode return (float64 sum) and length.

  `update(rewards, done)` adds this step's rewards, and returns the ended
  episodes' (returns float32 [N], lengths int32 [N]) -- 0 where not done --
  and restarts the counters of the environments that are done.
  """

  def __init__(self, num_envs):
    self._returns = np.zeros(num_envs, np.float64)
    self._lengths = np.zeros(num_envs, np.int64)

  def reset(self):
    self._returns[:] = 0.0
    self._lengths[:] = 0

  def update(self, rewards, done):
    self._returns += rewards
    self._lengths += 1
    returns = np.where(done, self._returns, 0.0).astype(np.float32)
    lengths = np.where(done, self._lengths, 0).astype(np.int32)
    self._returns[done] = 0.0
    self._lengths[done] = 0
    return returns, lengths
