"""A tiny language task with DM Lab-style Dict observations (a uint8 frame
and an instruction string), to test Dict and text observations end to end
(in-graph stepping, rollouts, queues, learner, export) without DM Lab.

>>> env = InstructionVectorEnv(2, seed=0)
>>> obs = env.reset()
>>> sorted(obs), obs["RGB_INTERLEAVED"].shape, obs["INSTR"].dtype
(['INSTR', 'RGB_INTERLEAVED'], (2, 8, 10, 3), dtype('O'))
"""

import numpy as np

from ingraph_rl.environments.vector_env import (
  EpisodeStatistics,
  StepResult,
  VectorEnv,
)
from ingraph_rl.spaces import Dict, IntBox, TextBox

# Instruction i asks for action i % num_actions.
INSTRUCTIONS = ("go left", "go right", "pick up the red ball")


class InstructionVectorEnv(VectorEnv):
  """`num_envs` copies of: each episode draws one of `instructions`;
  instruction i asks for action `i % num_actions`, which earns reward 1
  (any other action 0). Frames are uint8 noise, brighter in the top-left
  pixel with the step count. Episodes terminate after `episode_length`
  steps and are truncated after `max_episode_steps` (None: never); both
  at once count as both, as gymnasium's TimeLimit reports them.

  Observations: Dict(RGB_INTERLEAVED=IntBox(256, frame_shape, uint8),
  INSTR=TextBox()) (the keys are settable); text as object arrays of str.
  Same-step autoreset with `final_obs`, exact episode statistics; env i is
  seeded with `seed + i`.
  """

  def __init__(
    self,
    num_envs,
    seed=0,
    num_actions=3,
    frame_shape=(8, 10, 3),
    instructions=INSTRUCTIONS,
    episode_length=None,
    max_episode_steps=None,
    frame_key="RGB_INTERLEAVED",
    instruction_key="INSTR",
  ):
    self.num_envs = int(num_envs)
    self._seed = seed
    self.instructions = tuple(instructions)
    self.num_actions = int(num_actions)
    self.frame_shape = tuple(frame_shape)
    self.episode_length = episode_length
    self.max_episode_steps = max_episode_steps
    self.frame_key, self.instruction_key = frame_key, instruction_key
    self.observation_space = Dict(
      {
        frame_key: IntBox(256, self.frame_shape, dtype=np.uint8),
        instruction_key: TextBox(),
      }
    )
    self.action_space = IntBox(self.num_actions)
    self._rngs = None
    self._stats = EpisodeStatistics(self.num_envs)
    self._task = np.zeros(self.num_envs, np.int64)
    self._steps = np.zeros(self.num_envs, np.int64)

  def _new_episode(self, i):
    self._task[i] = self._rngs[i].integers(len(self.instructions))
    self._steps[i] = 0

  def _observe(self):
    frames = np.stack(
      [rng.integers(0, 256, self.frame_shape, np.uint8) for rng in self._rngs]
    )
    frames[:, 0, 0, :] = np.minimum(self._steps, 255)[:, None]
    text = np.empty(self.num_envs, dtype=object)
    text[:] = [self.instructions[k] for k in self._task]
    return {self.frame_key: frames, self.instruction_key: text}

  def reset(self, seed=None):
    if seed is None and self._rngs is None:
      seed = self._seed
    if seed is not None:
      self._rngs = [
        np.random.default_rng(seed + i) for i in range(self.num_envs)
      ]
    for i in range(self.num_envs):
      self._new_episode(i)
    self._stats.reset()
    return self._observe()

  def step(self, actions):
    actions = np.asarray(actions, np.int64)
    wanted = self._task % self.num_actions
    rewards = (actions == wanted).astype(np.float32)
    self._steps += 1
    terminated = np.zeros(self.num_envs, bool)
    truncated = np.zeros(self.num_envs, bool)
    if self.episode_length is not None:
      terminated = self._steps >= self.episode_length
    if self.max_episode_steps is not None:
      truncated = self._steps >= self.max_episode_steps
    done = terminated | truncated
    final_obs = self._observe()
    for i in np.flatnonzero(done):
      self._new_episode(i)
    obs = self._observe() if done.any() else final_obs
    if done.any():
      # Rows of envs that go on: the same observation in both.
      for key in obs:
        obs[key][~done] = final_obs[key][~done]
    returns, lengths = self._stats.update(rewards.astype(np.float64), done)
    return StepResult(
      obs, rewards, terminated, truncated, final_obs, returns, lengths
    )

  def close(self):
    pass
