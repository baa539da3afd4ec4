"""One actor's envs in groups: a `VectorEnv` made of smaller ones.

The environment stepper's `env_groups=2` double-buffers them (Sample
Factory's scheme): group A's env step runs while the policy acts on group
B's observations, then they swap. Anything else steps a
`GroupedVectorEnv` as the one env it also is.

    >>> from ingraph_rl.environments import make_vector_env
    >>> env = GroupedVectorEnv(
    ...     [make_vector_env("CartPole-v1", n, seed=s) for n, s in [(2, 0),
    ...      (1, 2)]])
    >>> env.num_envs, env.offsets, env.reset(seed=0).shape
    (3, (0, 2), (3, 4))
    >>> env.close()
"""

import numpy as np
import tree

from ingraph_rl.environments.vector_env import StepResult, VectorEnv


def group_sizes(num_envs, num_groups):
  """Envs per group, as even as can be (the first groups the larger).

  >>> group_sizes(5, 2)
  (3, 2)
  """
  if num_groups < 1 or num_envs < num_groups:
    raise ValueError(
      f"{num_envs} envs do not make {num_groups} groups of at least one env"
    )
  small, extra = divmod(num_envs, num_groups)
  return tuple(small + (g < extra) for g in range(num_groups))


def make_groups(make_group, num_envs, num_groups):
  """A `GroupedVectorEnv` of `make_group(first, size)` per group (`first`:
  the index of the group's first env; sizes from `group_sizes`). If one
  group fails to build, the ones already made are closed.

  >>> from ingraph_rl.environments import make_vector_env
  >>> env = make_groups(
  ...     lambda first, size: make_vector_env("CartPole-v1", size, first),
  ...     5, 2)
  >>> env.offsets, env.num_envs
  ((0, 3), 5)
  >>> env.close()
  """
  groups = []
  try:
    first = 0
    for size in group_sizes(num_envs, num_groups):
      groups.append(make_group(first, size))
      first += size
  except BaseException:
    for group in groups:
      group.close()
    raise
  return GroupedVectorEnv(groups)


def _concat(values):
  """Per-group arrays (or nests of them, a Dict observation) -> one."""
  return tree.map_structure(lambda *xs: np.concatenate(xs), *values)


class GroupedVectorEnv(VectorEnv):
  """`groups` (VectorEnvs with one observation and action space) as ONE
  `VectorEnv` of all their envs, group by group: env i of group g is env
  `offsets[g] + i`. Its `step` and `reset` go through the groups in turn.

  `reset(seed)` seeds group g with `seed + offsets[g]` (env i with seed + i,
  as in one env); `reset()` leaves each group to its own seeding, so build
  group g with seed `seed + offsets[g]` (`make_actor_env(...,
  env_groups=2)` does). `levels`: each env's DM Lab level, where every
  group has them (else None).
  """

  def __init__(self, groups):
    self.groups = tuple(groups)
    if not self.groups:
      raise ValueError("GroupedVectorEnv needs at least one group")
    first = self.groups[0]
    for g, group in enumerate(self.groups[1:], 1):
      if (
        group.observation_space != first.observation_space
        or group.action_space != first.action_space
      ):
        raise ValueError(
          f"env group {g} has other spaces than group 0: "
          f"{group.observation_space!r}, {group.action_space!r} vs "
          f"{first.observation_space!r}, {first.action_space!r}"
        )
    sizes = [group.num_envs for group in self.groups]
    self.num_envs = sum(sizes)
    self.offsets = tuple(int(x) for x in np.cumsum([0] + sizes[:-1]))
    self.observation_space = first.observation_space
    self.action_space = first.action_space
    levels = [getattr(group, "levels", None) for group in self.groups]
    self.levels = (
      None
      if any(lv is None for lv in levels)
      else tuple(name for lv in levels for name in lv)
    )

  def reset(self, seed=None):
    return _concat(
      [
        group.reset(seed=None if seed is None else int(seed) + offset)
        for group, offset in zip(self.groups, self.offsets)
      ]
    )

  def step(self, actions):
    actions = np.asarray(actions)
    results = [
      group.step(actions[offset : offset + group.num_envs])
      for group, offset in zip(self.groups, self.offsets)
    ]
    return StepResult(*(_concat(field) for field in zip(*results)))

  def close(self):
    for group in self.groups:
      group.close()
