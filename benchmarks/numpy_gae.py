"""GAE(lambda) in NumPy: what the Python-driven baselines of
`ppo_throughput` compute before their graph calls (CleanRL's loop)."""

import numpy as np


def numpy_gae(rewards, values, dones, bootstrap, gamma, lam):
  """GAE(lambda) of batch-major [B, T] arrays, CleanRL's backward loop
  (`dones[t]`: the episode ended at step t, so step t does not bootstrap)."""
  advantages = np.zeros_like(rewards)
  last = np.zeros(rewards.shape[0], np.float32)
  steps = rewards.shape[1]
  for t in reversed(range(steps)):
    next_values = bootstrap if t == steps - 1 else values[:, t + 1]
    live = 1.0 - dones[:, t].astype(np.float32)
    delta = rewards[:, t] + gamma * next_values * live - values[:, t]
    last = delta + gamma * lam * live * last
    advantages[:, t] = last
  return advantages, advantages + values
