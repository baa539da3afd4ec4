"""Memories: ring replay, prioritized replay on segment trees, frame-stack
replay, episode buffers, n-step accumulation in front of a memory. State
lives in variables; operations are graph functions, so an agent's
act/observe/update fuse them into one graph."""

from ingraph_rl.components.memories.episode_buffer import EpisodeBuffer
from ingraph_rl.components.memories.frame_stack_replay import FrameStackReplay
from ingraph_rl.components.memories.n_step import NStepAccumulator
from ingraph_rl.components.memories.prioritized_replay import PrioritizedReplay
from ingraph_rl.components.memories.replay_memory import ReplayMemory

__all__ = [
  "EpisodeBuffer",
  "FrameStackReplay",
  "NStepAccumulator",
  "PrioritizedReplay",
  "ReplayMemory",
]
