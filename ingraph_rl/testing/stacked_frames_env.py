"""An Atari-like toy VectorEnv with stacked uint8 frames, for tests of
what stores and replays frame stacks (FrameStackReplay, env groups).

    >>> env = StackedFramesEnv(3, seed=1)
    >>> env.reset().shape
    (3, 6, 6, 4)
"""

import numpy as np

from ingraph_rl.environments.vector_env import StepResult, VectorEnv
from ingraph_rl.spaces import IntBox


class StackedFramesEnv(VectorEnv):
  """Stacks of the last 4 random uint8 frames of shape `frame` (newest
  last, zeros before an episode's first); reward = the action plus N(0, 1)
  noise; an episode terminates with probability `p_terminate` a step, or
  is truncated after `max_steps`. Env i draws from its own RNG, seeded
  `seed + i`, so groups of it (seeded at their first env's index) step as
  the whole, and equally seeded copies step alike for the same actions.
  """

  def __init__(
    self, num_envs, seed=0, frame=(6, 6), p_terminate=0.2, max_steps=6
  ):
    self.num_envs = num_envs
    self.frame = tuple(frame)
    self.p_terminate = p_terminate
    self.max_steps = max_steps
    self.observation_space = IntBox(256, self.frame + (4,), dtype=np.uint8)
    self.action_space = IntBox(3)
    self._seed(seed)

  def _seed(self, seed):
    self.rngs = [np.random.default_rng(seed + i) for i in range(self.num_envs)]

  def _frame(self, i):
    return self.rngs[i].integers(1, 256, self.frame, dtype=np.uint8)

  def _start(self, i):
    stack = np.zeros(self.frame + (4,), np.uint8)
    stack[..., -1] = self._frame(i)
    return stack

  def reset(self, seed=None):
    if seed is not None:
      self._seed(seed)
    self.stacks = np.stack([self._start(i) for i in range(self.num_envs)])
    self.lengths = np.zeros(self.num_envs, np.int32)
    self.returns = np.zeros(self.num_envs, np.float32)
    return self.stacks.copy()

  def step(self, actions):
    n = self.num_envs
    frames = np.stack([self._frame(i) for i in range(n)])
    final = np.concatenate([self.stacks[..., 1:], frames[..., None]], -1)
    rewards = np.array(
      [a + r.normal() for a, r in zip(actions, self.rngs)], np.float32
    )
    terminated = np.array([r.uniform() < self.p_terminate for r in self.rngs])
    self.lengths += 1
    self.returns += rewards
    truncated = (self.lengths >= self.max_steps) & ~terminated
    done = terminated | truncated
    returns = np.where(done, self.returns, 0).astype(np.float32)
    lengths = np.where(done, self.lengths, 0).astype(np.int32)
    self.stacks = final.copy()
    for i in np.flatnonzero(done):
      self.stacks[i] = self._start(i)
    self.lengths[done], self.returns[done] = 0, 0
    obs = self.stacks.copy()
    return StepResult(
      obs, rewards, terminated, truncated, final, returns, lengths
    )

  def close(self):
    pass
