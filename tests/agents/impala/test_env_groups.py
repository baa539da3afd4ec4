"""IMPALA actors with double-buffered env groups (`env_groups=2`): the
config takes it to the stepper, `make_actor_env(..., env_groups=2)` makes
the groups (env i seeded `seed + i` as in one env, DM Lab level sets
keeping each env's level). The rollouts themselves are checked in
tests/components/env_stepping."""

import numpy as np
import pytest

from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig
from ingraph_rl.environments import dmlab30
from ingraph_rl.environments.env_groups import GroupedVectorEnv
from ingraph_rl.errors import BuildError
from ingraph_rl.export.agent import env_stepping_ops
from ingraph_rl.runners.environments import make_actor_env
from ingraph_rl.testing.component_test import to_numpy
from ingraph_rl.testing.queues import unique_queue_name


def test_make_actor_env_groups_seed_envs_as_one_env():
  one = make_actor_env("CartPole-v1", 5, seed=3, max_episode_steps=4)
  grouped = make_actor_env(
    "CartPole-v1", 5, seed=3, env_groups=2, max_episode_steps=4
  )
  try:
    assert isinstance(grouped, GroupedVectorEnv)
    assert [g.num_envs for g in grouped.groups] == [3, 2]
    # Unseeded first reset: each group's own seed.
    np.testing.assert_array_equal(grouped.reset(), one.reset())
    actions = np.random.default_rng(0).integers(0, 2, (6, 5))
    for a in actions:  # Crosses truncations at step 4.
      x, y = grouped.step(a), one.step(a)
      for field, u, v in zip(x._fields, x, y):
        np.testing.assert_array_equal(u, v, err_msg=field)
  finally:
    one.close()
    grouped.close()


def test_dmlab_level_sets_keep_each_envs_level():
  kwargs = dict(
    lab_module="ingraph_rl.testing.fake_deepmind_lab", width=16, height=12
  )
  env = make_actor_env(
    "dmlab:dmlab30", 3, seed=0, level_offset=28, env_groups=2, **kwargs
  )
  try:
    assert env.levels == dmlab30.env_levels(3, offset=28)
  finally:
    env.close()


def test_env_groups_need_grouped_envs():
  with pytest.raises(BuildError, match="env_groups must be >= 1"):
    IMPALAConfig(num_actions=2, env_groups=0)
  builder = IMPALABuilder(IMPALAConfig(num_actions=2, env_groups=2))
  env = make_actor_env("CartPole-v1", 2)
  try:
    with pytest.raises(BuildError, match="make_actor_env"):
      builder.make_actor(env, unique_queue_name("test_env_groups"))
  finally:
    env.close()


@pytest.mark.slow
def test_actor_double_buffers_grouped_envs():
  """The config's env_groups reaches the actor's stepper: one env step
  per group in the unroll graph, the rollouts of all envs queued."""
  config = IMPALAConfig(
    num_actions=2, unroll_length=4, queue_capacity=6, env_groups=2
  )
  env = make_actor_env("CartPole-v1", 3, seed=3, env_groups=2)
  actor = IMPALABuilder(config).make_actor(
    env, unique_queue_name("test_env_groups")
  )
  try:
    executor = actor.build()
    steps = env_stepping_ops(executor.function("unroll"))
    assert [s.rsplit("/", 1)[-1] for s in steps] == [
      "env_step_0",
      "env_step_1",
    ]
    executor.execute("reset_env", 3)
    stats = to_numpy(executor.execute("unroll"))
    assert int(stats["queue_size"]) == 3
    assert int(stats["env_steps"]) == 3 * 4
  finally:
    env.close()
