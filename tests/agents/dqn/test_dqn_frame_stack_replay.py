"""DQN with `frame_stack_replay`: one step per env per vector step in a
`FrameStackReplay`, n-step transitions sampled from it equal to what the
NStepAccumulator + ReplayMemory path stores for the same steps, `update`
trained on them, at about 1 / (2 * stack) of the bytes; `reset_env` ends
the stored episodes; settings and bad input refused; the memory in the
checkpoint."""

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.agents.dqn import DQNAgent, DQNBuilder, DQNConfig
from ingraph_rl.components.memories import FrameStackReplay
from ingraph_rl.components.preprocessing import (
  Cast,
  Divide,
  PreprocessorStack,
)
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.spaces import BoolBox, Dict, FloatBox, IntBox
from ingraph_rl.testing import ComponentTest
from ingraph_rl.testing.component_test import to_numpy
from ingraph_rl.testing.fuzz import changed, snapshot
from ingraph_rl.testing.references import (
  RecordingEnv,
  numpy_dqn_loss,
  observe_recorded,
)
from ingraph_rl.testing.stacked_frames_env import StackedFramesEnv

BACKENDS = ["tf", "torch"]
ENVS, N, DISCOUNT, PER_STREAM, STEPS = 3, 3, 0.9, 40, 60
FRAME = (84, 84)  # Atari's: the frames dominate the bytes.
OBS = IntBox(256, FRAME + (4,), dtype=np.uint8)


def StackedFrames(num_envs=ENVS, seed=0):
  """Atari-sized frames (they dominate the bytes); an episode terminates
  with probability 0.15 a step or is truncated after 7 steps."""
  return StackedFramesEnv(
    num_envs, seed, frame=FRAME, p_terminate=0.15, max_steps=7
  )


def frames_to_unit():
  return PreprocessorStack(Cast("float32"), Divide(255.0))


def config(**kwargs):
  base = dict(
    num_actions=3,
    network=(
      {"type": "flatten"},
      {"type": "dense", "units": 8, "activation": "relu"},
    ),
    n_step=N,
    discount=DISCOUNT,
    replay_capacity=ENVS * PER_STREAM,
    frame_stack_replay=True,
    batch_size=8,
    learning_starts=15,
    epsilon_steps=50,
    seed=3,
  )
  return DQNConfig(**{**base, **kwargs})


def agent(cfg, backend, env=None, obs=None):
  builder = DQNBuilder(cfg, preprocessor=frames_to_unit)
  return builder.make_agent(obs, env=env).build(backend)


def accumulator_rows(env):
  """{(env, start step): index} of the transitions in the accumulator
  agent's memory, whose order is `recompute_n_step`'s: by the step that
  completes them, then env, then start."""
  done = [s.terminated | s.truncated for _, s in env.steps]
  keys = []
  for i in range(env.num_envs):
    for t in range(len(done)):
      m = next(
        (k + 1 for k in range(N) if t + k < len(done) and done[t + k][i]), N
      )
      if t + m - 1 < len(done):
        keys.append((t + m - 1, i, t))
  return {(i, t): row for row, (_, i, t) in enumerate(sorted(keys))}


def memory_of(ex, backend):
  """The agent's replay memory, standing alone with the agent's variables
  and RNG state: its next `sample` is the batch of the agent's `update`."""
  records = Dict(
    states=OBS,
    actions=IntBox(3, dtype=np.int64),
    rewards=FloatBox(),
    terminals=BoolBox(),
    add_batch_rank=True,
  )
  memory = ComponentTest(
    FrameStackReplay(
      ENVS * PER_STREAM,
      ENVS,
      seed=3,
      n_step=N,
      discount=DISCOUNT,
      scope="memory",
    ),
    {
      "records": records,
      "batch_size": IntBox(64),
      "indices": IntBox(ENVS * PER_STREAM, add_batch_rank=True),
    },
    backend,
  )
  memory.set_weights(
    {
      k[len("dqn/") :]: v
      for k, v in ex.get_weights().items()
      if k.startswith("dqn/memory/")
    }
  )
  src, dst = (
    next(
      c._resources["rng"] for c in e.root.walk() if c.path.endswith("memory")
    )
    for e in (ex, memory.executor)
  )
  if isinstance(src, tf.random.Generator):
    dst.state.assign(src.state)
  else:
    dst.set_state(src.get_state())
  return memory


def fed_the_same_steps(env, backend):
  """An accumulator + ReplayMemory agent (no env) fed the recorded steps
  through `observe`: what that path stores for them."""
  cfg = config(frame_stack_replay=False, replay_capacity=1000, num_envs=ENVS)
  ex = agent(cfg, backend, obs=OBS)
  observe_recorded(ex, env.reset_obs, env.steps)
  return ex


@pytest.mark.parametrize(
  "backend",
  # torch: make test-all (~6 s); test_frame_stack_replay.py checks the
  # memory's torch body against the reference in make test.
  ["tf", pytest.param("torch", marks=pytest.mark.slow)],
)
@pytest.mark.slow
def test_samples_equal_the_accumulator_path_and_update_uses_them(
  backend, tmp_path
):
  """60 vector steps of the in-graph loop, updating (ring of 40 steps per
  env: wrapped); every transition the frame-stack memory can sample equals
  the accumulator path's for the same steps, except that a truncation ends
  the episode there without bootstrap; `update` trains on the sampled
  n-step batch; the checkpoint holds the memory; `reset_env` ends the
  stored episodes."""
  env = RecordingEnv(StackedFrames())
  ex = agent(config(), backend, env=env)
  ex.execute("reset_env", 7)
  stats = to_numpy(ex.execute("train", STEPS))
  # Updates from 15 env steps (vector step 5) on: steps 5..60.
  assert int(stats["updates"]) == STEPS - 4 and np.isfinite(stats["loss_sum"])
  w = ex.get_weights()
  assert int(w["dqn/memory/size"]) == PER_STREAM  # One step per env a step.
  assert not any(k.startswith("dqn/n_step/") for k in w)
  memory = memory_of(ex, backend)
  accumulator = fed_the_same_steps(env, backend)
  acc = {
    k[len("dqn/memory/buffer.") :]: v
    for k, v in accumulator.get_weights().items()
    if k.startswith("dqn/memory/buffer.")
  }
  rows = accumulator_rows(env)
  # Sampleable: step t + n stored, stack frames not overwritten.
  valid = range(STEPS - PER_STREAM + 3, STEPS - N)
  pairs = [(s, t) for s in range(ENVS) for t in valid]
  indices = [s * PER_STREAM + t % PER_STREAM for s, t in pairs]
  out = memory.test("get_transitions", np.array(indices, np.int32))
  truncated = np.array([s.truncated for _, s in env.steps])
  cases = {"terminal": 0, "truncated": 0, "bootstrap": 0}
  for j, (s, t) in enumerate(pairs):
    row = rows[(s, t)]
    for key in ("states", "actions", "rewards", "discounts"):
      np.testing.assert_array_equal(
        out[key][j], acc[key][row], err_msg=f"{key} of env {s}, step {t}"
      )
    m = int(round(np.log(acc["discounts"][row]) / np.log(DISCOUNT)))
    cut = truncated[t + m - 1, s] and not acc["terminals"][row]
    assert out["terminals"][j] == (acc["terminals"][row] or cut)
    if not out["terminals"][j]:
      np.testing.assert_array_equal(
        out["next_states"][j], acc["next_states"][row]
      )
    cases[
      "truncated" if cut else "terminal" if out["terminals"][j] else "bootstrap"
    ] += 1
  assert min(cases.values()) >= 3, cases
  # The update's batch is the memory's next sample: its loss, recomputed.
  ex.execute("sync_target")
  batch = memory.test("sample", 8)

  def q(states):
    return to_numpy(ex.execute("get_actions", states, False))["q_values"]

  want, _ = numpy_dqn_loss(
    q(batch["states"]),
    batch["actions"],
    batch["rewards"],
    batch["terminals"],
    q(batch["next_states"]),
    q(batch["next_states"]),
    np.ones(8),
    DISCOUNT,
    N,
    True,
    1.0,
    batch["discounts"],
  )
  got = float(to_numpy(ex.execute("update"))["loss"])
  np.testing.assert_allclose(got, want, rtol=1e-4)
  # Frames once: about 1 / (2 * stack) of the bytes per transition (the
  # accumulator agent's capacity is 1000, this one's 120).
  per_transition = {
    kind: sum(
      v.nbytes
      for k, v in e.get_weights().items()
      if k.startswith(("dqn/memory/", "dqn/n_step/"))
    )
    / e.get_weights()["dqn/memory/buffer.actions"].size
    for kind, e in (("frames", ex), ("accumulator", accumulator))
  }
  ratio = per_transition["frames"] / per_transition["accumulator"]
  assert 1 / 8 <= ratio < 1.1 / 8, ratio
  if backend == "tf":  # The module's checkpoint holds the memory.
    saved = ex.get_weights()
    path = tf.train.Checkpoint(agent=ex.module).write(str(tmp_path / "ckpt"))
    ex.execute("train", 5)
    tf.train.Checkpoint(agent=ex.module).read(path).assert_consumed()
    restored = ex.get_weights()
    for k in ("buffer.frames", "start_frames", "index", "last_terminal"):
      np.testing.assert_array_equal(
        restored[f"dqn/memory/{k}"], saved[f"dqn/memory/{k}"], err_msg=k
      )
  # A reset mid-episode ends the stored episodes: the newest steps become
  # terminal, no window reaches into the new episodes.
  w = ex.get_weights()
  assert not w["dqn/memory/last_terminal"].all()
  ex.execute("reset_env", 8)
  w = ex.get_weights()
  newest = (int(w["dqn/memory/index"]) - 1) % PER_STREAM
  assert w["dqn/memory/buffer.terminals"][newest].all()
  assert w["dqn/memory/last_terminal"].all()


def test_settings_are_checked():
  with pytest.raises(BuildError, match="does not support prioritized"):
    config(prioritized=True)
  with pytest.raises(BuildError, match="give DQNConfig\\(num_envs=...\\)"):
    DQNAgent(config(), observation_space=OBS)
  with pytest.raises(BuildError, match="shape \\[H, W, stack\\]"):
    DQNAgent(config(num_envs=2), observation_space=FloatBox((4,)))
  with pytest.raises(
    BuildError, match="must exceed \\(n_step \\+ 1\\) \\* num_envs = 12"
  ):
    DQNAgent(config(learning_starts=12), StackedFrames())
  DQNAgent(config(learning_starts=13), StackedFrames())
  with pytest.raises(BuildError, match="stack \\+ n_step = 7"):
    DQNAgent(
      config(num_envs=2, replay_capacity=12),
      observation_space=OBS,
    )


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_input_is_refused_and_changes_nothing(backend):
  ex = agent(config(num_envs=2), backend, obs=OBS)
  assert list(ex.apis["observe"].arg_spaces)[-1] == "truncated"
  rng = np.random.default_rng(0)

  def observe_args(rows):
    states = rng.integers(0, 256, (rows,) + FRAME + (4,), dtype=np.uint8)
    no = np.zeros(rows, bool)
    actions = np.zeros(rows, np.int64)
    return [states, actions, np.ones(rows, np.float32), states, no, no]

  ex.execute("observe", *observe_args(2))
  for args, where in (
    (observe_args(3), ("dqn/memory", "insert")),  # Not one row per env.
    (observe_args(2)[:1] + [np.array([0, 3])] + observe_args(2)[2:], None),
  ):
    before = snapshot(ex)
    with pytest.raises(SpaceError) as e:
      ex.execute("observe", *args)
    assert changed(before, snapshot(ex)) == []
    if where:
      assert (e.value.component, e.value.api) == where
  with pytest.raises(SpaceError, match="no transition can be sampled"):
    ex.execute("update")
