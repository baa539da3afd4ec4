"""The Ape-X actor: initial priorities against a NumPy n-step double-DQN
recomputation, each actor's epsilon, shard choice, and bad input."""

import numpy as np
import pytest

from ingraph_rl.agents.apex import queues
from ingraph_rl.agents.apex.q_learning import PRIORITY_EPSILON
from ingraph_rl.environments import GymnasiumVectorEnv, make_vector_env
from ingraph_rl.errors import SpaceError
from ingraph_rl.runners.replay_driver import shard_order
from ingraph_rl.testing.component_test import to_numpy
from ingraph_rl.testing.queues import queue_executor
from ingraph_rl.testing.references import (
  RecordingEnv,
  np_bfloat16,
  recompute_n_step,
)

from .conftest import SMALL, numpy_td, small_builder


def drain(builder, obs_space, names, shard):
  """Every row waiting on shard `shard`'s insert queue."""
  feeder = queue_executor(
    queues.insert_queue(
      builder.record_space(obs_space), builder.config, names, shard, "inserts"
    ),
    api_names=("dequeue_many", "size"),
  )
  return to_numpy(feeder.execute("dequeue_many", feeder.execute("size")))


def numpy_priorities(records, weights, config):
  ones = np.ones(len(records["actions"]))
  return np.abs(numpy_td(records, ones, weights, config)[1]) + PRIORITY_EPSILON


def recorded_actor(builder, names, seed):
  """(env, actor, a fresh learner's weights): an actor of `builder` on 3
  recorded CartPole envs with a 15-step limit, so episodes end by
  termination and by truncation."""
  env = RecordingEnv(
    GymnasiumVectorEnv(
      "CartPole-v1", num_envs=3, seed=seed, max_episode_steps=15
    )
  )
  actor = builder.make_actor(env, names, 0, 1).build()
  weights = to_numpy(
    builder.make_learner(env.observation_space, names)
    .build()
    .execute("get_weights")
  )
  return env, actor, weights


@pytest.mark.slow
def test_initial_priorities_match_a_numpy_double_q_recomputation(names):
  """60 vector steps of 3 CartPole envs with a 15-step limit (episodes end
  by termination and by truncation): the rows on the shard's insert queue
  are exactly the n-step transitions recomputed from the recorded steps,
  and their priorities |TD| + 1e-6 of the actor's online and target
  networks, which differ (so double-Q matters)."""
  builder = small_builder(rollout_fragment_length=60, epsilon=1.0)
  n = names()
  env, actor, weights = recorded_actor(builder, n, seed=2)
  assert not np.allclose(
    weights["online"]["torso/dense_0/kernel"],
    weights["target"]["torso/dense_0/kernel"],
  )
  actor.execute("set_weights", weights)
  actor.execute("reset_env", 2)
  stats = to_numpy(actor.execute("rollout", 0))
  want, terminated, truncated = recompute_n_step(env, 3, 0.9)
  assert terminated > 0 and truncated > 0
  got = drain(builder, env.observation_space, n, 0)
  assert (
    int(stats["transitions"]) == len(got["priority"]) == len(want["rewards"])
  )
  for k in want:
    np.testing.assert_allclose(got["records"][k], want[k], rtol=1e-5, err_msg=k)
  expected = numpy_priorities(want, weights, SMALL)
  np.testing.assert_allclose(got["priority"], expected, rtol=1e-4, atol=1e-5)
  assert float(stats["priority_sum"]) == pytest.approx(expected.sum(), rel=1e-4)
  # The same numbers from the actor's own `priorities` API.
  np.testing.assert_allclose(
    to_numpy(actor.execute("priorities", got["records"])),
    expected,
    rtol=1e-4,
    atol=1e-5,
  )
  assert int(stats["env_steps"]) == 180


@pytest.mark.slow
def test_bfloat16_copies_hold_the_rounded_weights_and_price_with_them(names):
  """actor_weights_dtype=bfloat16: `set_weights` stores the learner's
  float32 torso weights rounded to bfloat16 (the head stays float32), and
  the rollout's priorities are the NumPy recomputation under those rounded
  weights, to bfloat16's precision (its products round too): nearer to it
  than to the float32 weights' priorities."""
  builder = small_builder(
    rollout_fragment_length=40, epsilon=1.0, actor_weights_dtype="bfloat16"
  )
  n = names()
  env, actor, weights = recorded_actor(builder, n, seed=4)
  actor.execute("set_weights", weights)
  stored = actor.get_weights()
  rounded = {}
  for net in ("online", "target"):
    rounded[net] = {}
    for path, value in weights[net].items():
      got = stored[f"actor/q/{net}/{path}"]
      torso = path.startswith("torso/")
      assert got.dtype.name == ("bfloat16" if torso else "float32"), path
      rounded[net][path] = np_bfloat16(value) if torso else value
      np.testing.assert_array_equal(
        got.astype(np.float32), rounded[net][path], err_msg=path
      )
  actor.execute("reset_env", 4)
  actor.execute("rollout", 0)
  want, _, _ = recompute_n_step(env, 3, 0.9)
  got = drain(builder, env.observation_space, n, 0)["priority"]
  expected = numpy_priorities(want, rounded, SMALL)
  np.testing.assert_allclose(got, expected, rtol=2e-2, atol=2e-2)
  exact = numpy_priorities(want, weights, SMALL)
  assert np.abs(got - expected).mean() < np.abs(got - exact).mean()


# The formula's ends in `make test`, the middle actor in `make test-all`.
@pytest.mark.parametrize(
  "index", [0, pytest.param(1, marks=pytest.mark.slow), 2]
)
@pytest.mark.slow
def test_each_actor_explores_with_its_own_epsilon(names, index):
  """Actor i of 3 reports eps_i and takes a non-greedy action in about
  eps_i * (1 - 1/2) of 4000 rows."""
  builder = small_builder()
  env = make_vector_env("CartPole-v1", num_envs=2)
  actor = builder.make_actor(env, names(), index, 3).build()
  states = np.random.default_rng(0).normal(size=(4000, 4)).astype(np.float32)
  out = to_numpy(actor.execute("get_actions", states, True))
  eps = SMALL.actor_epsilon(index, 3)
  assert float(out["epsilon"]) == pytest.approx(eps)
  greedy = to_numpy(actor.execute("get_actions", states, False))["actions"]
  rate = np.mean(out["actions"] != greedy)
  assert abs(rate - eps / 2) < 4 * np.sqrt(eps / 2 / 4000) + 1e-3


@pytest.mark.slow
def test_per_env_epsilons_explore_each_env_at_its_rate(names):
  """Actor 1 of 2 with 2 envs and epsilon_per_env: rows alternate between
  its envs' rates eps_2 and eps_3 of 4 (4000 rows: 2000 per env)."""
  builder = small_builder(epsilon=0.8, epsilon_alpha=1.0, epsilon_per_env=True)
  env = make_vector_env("CartPole-v1", num_envs=2)
  actor = builder.make_actor(env, names(), 1, 2).build()
  states = np.random.default_rng(1).normal(size=(4000, 4)).astype(np.float32)
  out = to_numpy(actor.execute("get_actions", states, True))
  rates = [0.8 ** (1 + g / 3) for g in (2, 3)]
  np.testing.assert_allclose(out["epsilon"], rates, rtol=1e-6)
  greedy = to_numpy(actor.execute("get_actions", states, False))["actions"]
  non_greedy = (out["actions"] != greedy).reshape(-1, 2).mean(0)
  for got, eps in zip(non_greedy, rates):
    assert abs(got - eps / 2) < 4 * np.sqrt(eps / 2 / 2000) + 1e-3


@pytest.mark.slow
def test_shards_are_fed_round_robin(names):
  """`shard_order` cycles from the actor's start; a rollout for shard k
  lands on shard k's insert queue only."""
  order = shard_order(3, start=1)
  assert [next(order) for _ in range(7)] == [1, 2, 0, 1, 2, 0, 1]
  builder = small_builder()
  n = names(num_shards=2)
  env = make_vector_env("CartPole-v1", num_envs=2, seed=0)
  actor = builder.make_actor(env, n, 0, 1).build()
  actor.execute("reset_env", 0)
  sizes = []
  for shard in (1, 0, 1):
    actor.execute("rollout", shard)
    sizes.append(
      [
        len(drain(builder, env.observation_space, n, i)["priority"])
        for i in range(2)
      ]
    )
  assert sizes[0][0] == 0 and sizes[0][1] > 0
  assert sizes[1][0] > 0 and sizes[1][1] == 0
  assert sizes[2][0] == 0 and sizes[2][1] > 0


@pytest.mark.slow
def test_bad_input_is_named(names):
  builder = small_builder()
  env = make_vector_env("CartPole-v1", num_envs=2)
  actor = builder.make_actor(env, names(num_shards=2), 0, 1).build()
  with pytest.raises(SpaceError) as e:
    actor.execute("rollout", 2)
  assert "actor" in str(e.value) and "rollout" in str(e.value)
  assert "shard" in str(e.value)
  with pytest.raises(SpaceError) as e:
    actor.execute("get_actions", np.zeros((3, 5), np.float32), True)
  assert "get_actions" in str(e.value) and "states" in str(e.value)
