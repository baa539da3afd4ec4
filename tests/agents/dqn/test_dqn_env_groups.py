"""DQN's in-graph loop with double-buffered env groups (`env_groups=2`):
one env step per group in the train graph, and for the same actions the
same memory, stats, update count and epsilon schedule as with one group:
greedy (the same actions) against a one-group loop, exploring (the
agent's own random actions) against the actions replayed in Python on a
plain env and fed through `observe`. A plain env is refused;
experiments/dqn.py's --env_groups=2 groups the same envs."""

import subprocess
import sys

import numpy as np
import pytest

from ingraph_rl.agents.dqn import DQNBuilder, DQNConfig
from ingraph_rl.components.preprocessing import (
  Cast,
  Divide,
  PreprocessorStack,
)
from ingraph_rl.environments import StepResult, make_vector_env
from ingraph_rl.environments.env_groups import GroupedVectorEnv, group_sizes
from ingraph_rl.errors import BuildError
from ingraph_rl.export.agent import env_stepping_ops
from ingraph_rl.testing.component_test import to_numpy
from ingraph_rl.testing.fresh_process import ROOT
from ingraph_rl.testing.references import RecordingEnv, observe_recorded
from ingraph_rl.testing.stacked_frames_env import StackedFramesEnv

ENVS, SEED = 5, 11  # Groups of 3 and 2 envs.
CALLS = (7, 13)  # Vector steps per train call: the pending actions cross.


def Frames(num_envs, seed=0):
  """6x6 frames; terminates with p 0.2 a step, truncated after 6 steps."""
  return StackedFramesEnv(num_envs, seed)


def make_env(kind, num_envs, seed):
  if kind == "frames":
    return Frames(num_envs, seed)
  return make_vector_env(
    "CartPole-v1", num_envs, seed=seed, max_episode_steps=9
  )


def grouped(kind):
  """ENVS envs of `kind` (env i seeded SEED + i) in two recorded groups."""
  sizes = group_sizes(ENVS, 2)
  return GroupedVectorEnv(
    [
      RecordingEnv(make_env(kind, size, SEED + first))
      for size, first in zip(sizes, (0, sizes[0]))
    ]
  )


def config(kind, **kwargs):
  base = dict(
    num_actions=3 if kind == "frames" else 2,
    network=(({"type": "flatten"},) if kind == "frames" else ())
    + ({"type": "dense", "units": 8, "activation": "relu"},),
    n_step=1 if kind == "replay" else 3,
    discount=0.9,
    frame_stack_replay=kind == "frames",
    replay_capacity=1000,
    batch_size=8,
    learning_starts=25,  # From vector step 5 on.
    update_every=2,
    target_sync_every=3,
    epsilon_from=1.0,
    epsilon_to=1.0,
    seed=3,
  )
  return DQNConfig(**{**base, **kwargs})


def builder(config):
  def frames_to_unit():
    return PreprocessorStack(Cast("float32"), Divide(255.0))

  frames = config.frame_stack_replay
  return DQNBuilder(config, preprocessor=frames_to_unit if frames else None)


def train(config, env, backend="tf"):
  ex = builder(config).make_agent(env=env).build(backend)
  ex.execute("reset_env", SEED)
  stats = [to_numpy(ex.execute("train", t)) for t in CALLS]
  totals = {k: sum(s[k] for s in stats) for k in stats[0]}
  totals["env_steps"] = stats[-1]["env_steps"]
  return ex, totals


def state(ex):
  """The agent's variables but the networks and optimizer (they differ
  with the updates' batches)."""
  return {
    k: v
    for k, v in ex.get_weights().items()
    if not k.startswith(("dqn/online", "dqn/target", "dqn/adam"))
  }


def recorded_steps(env):
  """(reset observations, [(actions, step)]) of all envs, group by group."""
  groups = env.groups
  steps = []
  for parts in zip(*(g.steps for g in groups)):
    actions = np.concatenate([a for a, _ in parts])
    step = StepResult(*(np.concatenate(x) for x in zip(*(s for _, s in parts))))
    steps.append((actions, step))
  return np.concatenate([g.reset_obs for g in groups]), steps


@pytest.mark.slow
def test_greedy_loop_matches_one_group():
  """Greedy without updates both loops take the same actions: the memory
  (3-step windows included), stats, last observations and epsilon step
  are equal to the bit."""
  greedy = dict(epsilon_from=0.0, epsilon_to=0.0, learning_starts=10**6)
  one_env = RecordingEnv(make_env("n_step", ENVS, SEED))
  one, one_stats = train(config("n_step", **greedy), one_env)
  env = grouped("n_step")
  two, two_stats = train(config("n_step", env_groups=2, **greedy), env)
  steps = sum(CALLS)
  assert two_stats.keys() == one_stats.keys()
  for k in one_stats:
    np.testing.assert_array_equal(two_stats[k], one_stats[k], err_msg=k)
  assert int(two_stats["episodes"]) > 3 and int(two_stats["updates"]) == 0
  _, two_steps = recorded_steps(env)
  assert len(two_steps) == len(one_env.steps) == steps
  for (a, _), (b, _) in zip(two_steps, one_env.steps):
    np.testing.assert_array_equal(a, b)
  one_state, two_state = state(one), state(two)
  assert two_state.keys() == one_state.keys()
  for k in one_state:
    np.testing.assert_array_equal(two_state[k], one_state[k], err_msg=k)
  assert int(two_state["dqn/memory/size"]) > 60
  assert int(two_state["dqn/epsilon_greedy/timestep"]) == steps
  assert int(two_state["dqn/vector_steps"]) == steps
  # Double-buffered: one env step per group in the train graph.
  assert [
    s.rsplit("/", 1)[-1] for s in env_stepping_ops(two.function("train"))
  ] == ["env_step_0", "env_step_1"]


@pytest.mark.parametrize(
  "kind",
  [
    # make test-all (the make test budget); the greedy test above runs
    # in make test.
    pytest.param("replay", marks=pytest.mark.slow),
    pytest.param("n_step", marks=pytest.mark.slow),
    pytest.param("frames", marks=pytest.mark.slow),
  ],
)
def test_memory_holds_the_replayed_steps(kind):
  """Exploring and updating with env_groups=2: the actions the loop took,
  replayed on a plain env and fed through `observe` to an agent without
  an env, give the same memory; stats, update count and epsilon steps are
  those of one group."""
  env = grouped(kind)
  ex, stats = train(config(kind, env_groups=2), env)
  reset_obs, steps = recorded_steps(env)
  plain = make_env(kind, ENVS, SEED)
  np.testing.assert_array_equal(plain.reset(seed=SEED), reset_obs)
  reference = (
    builder(config(kind, num_envs=ENVS))
    .make_agent(plain.observation_space)
    .build()
  )
  for actions, step in steps:
    replayed = plain.step(actions)
    for field, x, y in zip(step._fields, replayed, step):
      np.testing.assert_array_equal(x, y, err_msg=field)
  obs = observe_recorded(
    reference, reset_obs, steps, truncated=kind != "replay"
  )
  got, want = state(ex), state(reference)
  memory = [k for k in want if k.startswith(("dqn/memory/", "dqn/n_step/"))]
  assert memory and set(memory) <= set(got)
  for k in memory:
    np.testing.assert_array_equal(got[k], want[k], err_msg=k)
  np.testing.assert_array_equal(got["dqn/last_obs"], obs)
  # As with one group: each vector step's episodes, one epsilon step a
  # vector step, updates at vector steps 6, 8, ..., 20.
  done = [s.terminated | s.truncated for _, s in steps]
  assert int(stats["episodes"]) == int(np.sum(done)) > 3
  np.testing.assert_allclose(
    stats["return_sum"],
    sum(s.episode_returns.sum() for _, s in steps),
    rtol=1e-6,
  )
  assert int(stats["length_sum"]) == sum(
    int(s.episode_lengths.sum()) for _, s in steps
  )
  vector_steps = sum(CALLS)
  assert int(stats["env_steps"]) == vector_steps * ENVS
  assert int(stats["updates"]) == 8 and np.isfinite(stats["loss_sum"])
  assert int(got["dqn/epsilon_greedy/timestep"]) == vector_steps
  # Random actions from the agent's RNG: both groups explore.
  actions = np.stack([a for a, _ in steps])
  assert all(len(np.unique(actions[:, i])) > 1 for i in range(ENVS))


@pytest.mark.slow
def test_torch_steps_the_groups_as_one_env():
  env = grouped("replay")
  _, stats = train(config("replay", env_groups=2), env, "torch")
  assert int(stats["env_steps"]) == sum(CALLS) * ENVS
  assert int(stats["updates"]) == 8


def test_env_groups_need_a_grouped_env():
  with pytest.raises(BuildError, match="env_groups must be >= 1"):
    DQNConfig(num_actions=2, env_groups=0)
  builder = DQNBuilder(DQNConfig(num_actions=2, env_groups=2))
  env = make_vector_env("CartPole-v1", 2)
  try:
    with pytest.raises(BuildError, match="needs an env of that many groups"):
      builder.make_agent(env=env)
  finally:
    env.close()
  three = DQNBuilder(DQNConfig(num_actions=2, env_groups=3))
  with pytest.raises(BuildError, match="GroupedVectorEnv"):
    three.make_agent(env=grouped("replay"))


# experiments/dqn.py's env with --env_groups=2 (the same envs, grouped),
# then a short run of it; in a subprocess, as the experiment defines its
# flags at import.
EXPERIMENT = r"""
import sys
import numpy as np
from absl import app
from experiments import dqn
from ingraph_rl.environments import make_vector_env

grouped = dqn.make_env("CartPole-v1", 5, 3, env_groups=2)
one = make_vector_env("CartPole-v1", 5, 3)
assert [g.num_envs for g in grouped.groups] == [3, 2]
np.testing.assert_array_equal(grouped.reset(), one.reset())
for a in np.random.default_rng(0).integers(0, 2, (30, 5)):
  for x, y in zip(grouped.step(a), one.step(a)):
    np.testing.assert_array_equal(x, y)
grouped.close()
one.close()
app.run(dqn.main, argv=["dqn"] + sys.argv[1:])
"""


@pytest.mark.slow  # ~6 s, a subprocess: make test-all.
def test_experiment_makes_and_trains_grouped_envs(tmp_path):
  out = subprocess.run(
    [
      sys.executable,
      "-c",
      EXPERIMENT,
      "--flagfile=experiments/flagfiles/dqn_cartpole.cfg",
      "--env_groups=2",
      "--total_env_steps=400",
      "--steps_per_call=50",
      "--eval_episodes=1",
      f"--logdir={tmp_path}",
    ],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=240,
  )
  assert out.returncode == 0, out.stderr[-3000:]
  assert "dqn: 400 env steps" in out.stdout
