"""Tests of `FrameStackReplay`
(ingraph_rl/components/memories/frame_stack_replay.py): frames stored once,
stacks rebuilt exactly as the agent saw them, n-step returns, against a
NumPy reference that stores whole transitions."""

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.components.memories.frame_stack_replay import FrameStackReplay
from ingraph_rl.core.variables import initial_value
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.spaces import BoolBox, Dict, FloatBox, IntBox
from ingraph_rl.testing import ComponentTest

BACKENDS = ["tf", "torch"]
S, C, K = 3, 12, 4  # Streams, steps per stream, frame stack.
FRAME = (3, 2)
G = 0.99  # FrameStackReplay's default discount.


def record_space(frame=FRAME, stack=K, **overrides):
  keys = dict(
    states=IntBox(256, frame + (stack,), dtype=np.uint8),
    actions=IntBox(5),
    rewards=FloatBox(),
    terminals=BoolBox(),
  )
  keys.update(overrides)
  return Dict(
    {k: v for k, v in keys.items() if v is not None}, add_batch_rank=True
  )


def input_spaces(records=None, streams=S, per_stream=C):
  return {
    "records": records or record_space(),
    # Range-checked: the samplings below ask for up to 200.
    "batch_size": IntBox(256, low=1),
    "indices": IntBox(streams * per_stream, add_batch_rank=True),
  }


def build(
  backend,
  episode_starts=64,
  streams=S,
  per_stream=C,
  stack=K,
  records=None,
  seed=0,
  **kwargs,
):
  return ComponentTest(
    FrameStackReplay(
      streams * per_stream,
      streams,
      stack,
      seed=seed,
      episode_starts=episode_starts,
      **kwargs,
    ),
    input_spaces(records, streams, per_stream),
    backend,
  )


class Agent:
  """Vector env + the agent's own frame stacking, and the reference: every
  insert's full observation stack, action, reward, terminal, plus each
  step's episode start number and age (steps since its episode started).

  Start stacks per stream (the agent's preprocessing): stream 0 repeats the
  first frame, stream 1 pads with zeros, stream 2 with "noop" frames. The
  first insert of all streams has random older frames (the memory begins
  mid-run). Frames are 1..255, so a zeroed frame is never a real one.
  """

  MODES = ("repeat", "zeros", "noop")

  def __init__(self, seed, streams=S, stack=K, frame=FRAME, p_end=0.2):
    self.rng = np.random.default_rng(seed)
    self.streams, self.stack, self.frame = streams, stack, frame
    self.p_end = p_end
    self.obs = [[] for _ in range(streams)]
    self.actions = [[] for _ in range(streams)]
    self.rewards = [[] for _ in range(streams)]
    self.terminals = [[] for _ in range(streams)]
    self.start_no = [[] for _ in range(streams)]
    self.age = [[] for _ in range(streams)]
    self.num_starts = [0] * streams
    self.current = [None] * streams  # The agent's frame stack.
    self.done = [True] * streams

  def _frame(self):
    return self.rng.integers(1, 256, self.frame, dtype=np.uint8)

  def _start_stack(self, s, first):
    f = self._frame()
    mode = "noop" if first else self.MODES[s % len(self.MODES)]
    if mode == "repeat":
      older = [f] * (self.stack - 1)
    elif mode == "zeros":
      older = [np.zeros_like(f)] * (self.stack - 1)
    else:
      older = [self._frame() for _ in range(self.stack - 1)]
    return np.stack(older + [f], -1)

  def step(self):
    """One insert's records (all streams); extends the reference."""
    states = []
    for s in range(self.streams):
      if self.done[s]:
        self.current[s] = self._start_stack(s, not self.obs[s])
        self.num_starts[s] += 1
        age = 0
      else:
        self.current[s] = np.concatenate(
          [self.current[s][..., 1:], self._frame()[..., None]], -1
        )
        age = self.age[s][-1] + 1
      states.append(self.current[s])
      self.obs[s].append(self.current[s])
      self.start_no[s].append(self.num_starts[s] - 1)
      self.age[s].append(age)
    actions = self.rng.integers(0, 5, self.streams).astype(np.int32)
    rewards = self.rng.normal(size=self.streams).astype(np.float32)
    terminals = self.rng.uniform(size=self.streams) < self.p_end
    for s in range(self.streams):
      self.actions[s].append(actions[s])
      self.rewards[s].append(rewards[s])
      self.terminals[s].append(bool(terminals[s]))
      self.done[s] = bool(terminals[s])
    return {
      "states": np.stack(states),
      "actions": actions,
      "rewards": rewards,
      "terminals": terminals,
    }

  # --- what the memory must return (the documented rule) -------------------

  @property
  def num_inserts(self):
    return len(self.obs[0])

  def end_episodes(self):
    """The agent cut every episode short: its newest step counts as a
    terminal one, the next step starts an episode."""
    for s in range(self.streams):
      self.terminals[s][-1] = True
      self.done[s] = True

  def valid_steps(self, per_stream=C, n=1):
    """Sampleable global steps (per stream): the newest n are not; once the
    ring is full, neither are its stack - 1 oldest."""
    t = self.num_inserts
    size = min(t, per_stream)
    v = size - n if size < per_stream else per_stream - self.stack - n + 1
    return list(range(t - n - v, t - n))

  def expected_stack(self, s, t, episode_starts):
    obs = self.obs[s][t].copy()
    before = self.stack - 1 - min(self.age[s][t], self.stack - 1)
    alive = self.start_no[s][t] >= self.num_starts[s] - episode_starts
    if before and not (episode_starts and alive):
      obs[..., :before] = 0
    return obs

  def window(self, s, t, n):
    """Steps m of the n-step window at step t: up to its first terminal."""
    return next((k + 1 for k in range(n) if self.terminals[s][t + k]), n)

  def expected(self, s, t, episode_starts, n=1, discount=G):
    """The transition at step t, straight from the definition: a float64
    sum of the window's rewards, the observation m steps later."""
    m = self.window(s, t, n)
    ret = sum(discount**k * float(self.rewards[s][t + k]) for k in range(m))
    return {
      "states": self.expected_stack(s, t, episode_starts),
      "next_states": self.expected_stack(s, t + m, episode_starts),
      "actions": self.actions[s][t],
      "rewards": np.float32(ret),
      "terminals": self.terminals[s][t + m - 1],
      "discounts": np.float32(discount**m),
    }


def flat_index(s, t, per_stream=C):
  return s * per_stream + t % per_stream


def global_step(agent, index, per_stream=C, n=1):
  """(stream, global step) of a flat index among the sampleable steps."""
  s, slot = divmod(int(index), per_stream)
  matches = [
    t for t in agent.valid_steps(per_stream, n) if t % per_stream == slot
  ]
  assert len(matches) == 1, f"index {index} is no sampleable step"
  return s, matches[0]


def assert_transitions(
  agent, out, episode_starts, per_stream=C, n=1, discount=G
):
  for i, index in enumerate(out["indices"]):
    s, t = global_step(agent, index, per_stream, n)
    want = agent.expected(s, t, episode_starts, n, discount)
    for key, value in want.items():
      got = out[key][i]
      assert got.dtype == np.asarray(value).dtype, key
      msg = f"{key} of stream {s}, step {t}"
      if key == "rewards" and n > 1:  # float32 sums vs the float64 one.
        np.testing.assert_allclose(
          got, value, rtol=1e-6, atol=1e-6, err_msg=msg
        )
      else:
        np.testing.assert_array_equal(got, value, err_msg=msg)


def all_valid_indices(agent, per_stream=C, n=1):
  return np.array(
    [
      flat_index(s, t, per_stream)
      for s in range(agent.streams)
      for t in agent.valid_steps(per_stream, n)
    ],
    np.int32,
  )


# Checkpoints (number of inserts): before full, exactly full, just after the
# first overwrite, several wraps later.
CHECKPOINTS = (2, 3, 7, C - 1, C, C + 1, C + 5, 3 * C + 2)


@pytest.mark.slow
@pytest.mark.parametrize("episode_starts", [64, 1, 0])
def test_matches_reference_both_backends(episode_starts):
  agent = Agent(seed=episode_starts)
  tests = {b: build(b, episode_starts) for b in BACKENDS}
  zeroed = 0
  for step in range(1, CHECKPOINTS[-1] + 1):
    records = agent.step()
    for test in tests.values():
      assert int(test.test("insert", records)) == S * min(step, C)
      assert int(test.test("get_size")) == S * min(step, C)
    if step not in CHECKPOINTS:
      continue
    indices = all_valid_indices(agent)
    assert len(indices) == S * len(agent.valid_steps())
    outs = {b: t.test("get_transitions", indices) for b, t in tests.items()}
    for b in BACKENDS:
      assert_transitions(agent, outs[b], episode_starts)
    for key in outs["tf"]:  # Parity: identical arrays.
      assert outs["tf"][key].dtype == outs["torch"][key].dtype, key
      np.testing.assert_array_equal(
        outs["tf"][key], outs["torch"][key], err_msg=key
      )
    for test in tests.values():
      sampled = test.test("sample", 64)
      assert sampled["states"].dtype == np.uint8
      assert sampled["states"].shape == (64,) + FRAME + (K,)
      assert_transitions(agent, sampled, episode_starts)
    # How often the documented zeroing differs from what the agent saw.
    for s, t in (global_step(agent, i) for i in indices):
      zeroed += not np.array_equal(
        agent.expected_stack(s, t, episode_starts), agent.obs[s][t]
      )
  if episode_starts == 64:
    assert zeroed == 0  # Every stack exactly as the agent saw it.
  else:
    assert zeroed > 0  # The reference really exercises the zeroing.


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 3])
def test_n_step_transitions_match_reference_both_backends(n):
  """n-step windows against the definition (float64 sums), before and
  after wrap-around, with terminals inside windows and episode starts;
  TF and torch return identical arrays."""
  discount = 0.9
  agent = Agent(seed=10 + n, p_end=0.3)
  tests = {b: build(b, n_step=n, discount=discount, seed=n) for b in BACKENDS}
  seen = {"cut": 0, "full": 0, "starts": 0, "wrapped": 0}
  for step in range(1, 3 * C + 3):
    records = agent.step()
    for test in tests.values():
      test.test("insert", records)
    if step <= n:  # Step t + n must be stored.
      for test in tests.values():
        with pytest.raises(SpaceError, match=f"needs {n + 1} stored steps"):
          test.test("sample", 4)
      continue
    if step not in (n + 1, C - 1, C, C + 1, 2 * C + 5, 3 * C + 2):
      continue
    indices = all_valid_indices(agent, n=n)
    per_stream = min(step, C) - n if step < C else C - K - n + 1
    assert len(indices) == S * per_stream
    outs = {b: t.test("get_transitions", indices) for b, t in tests.items()}
    for b in BACKENDS:
      assert_transitions(agent, outs[b], 64, n=n, discount=discount)
    for key in outs["tf"]:
      np.testing.assert_array_equal(
        outs["tf"][key], outs["torch"][key], err_msg=key
      )
    for test in tests.values():
      sampled = test.test("sample", 64)
      assert_transitions(agent, sampled, 64, n=n, discount=discount)
    for i in indices:
      st, t = global_step(agent, i, n=n)
      m = agent.window(st, t, n)
      seen["cut" if m < n else "full"] += 1
      seen["starts"] += agent.age[st][t + m] == 0 or agent.age[st][t] == 0
      seen["wrapped"] += t >= C
  assert min(seen.values()) > 5, seen  # Every case was exercised.


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 3])
def test_end_episodes_cuts_every_stream(n):
  """After `end_episodes` the newest steps are terminal and the next
  insert starts an episode in every stream (its stack prefix is kept)."""
  agent = Agent(seed=4, p_end=0.1)
  tests = {b: build(b, n_step=n) for b in BACKENDS}
  for test in tests.values():
    assert int(test.test("end_episodes")) == 0  # Empty: nothing to cut.
  for _ in range(7):
    records = agent.step()
    for test in tests.values():
      test.test("insert", records)
  running = sum(not agent.done[s] for s in range(S))
  assert running > 0
  agent.end_episodes()
  for test in tests.values():
    assert int(test.test("end_episodes")) == running
    assert int(test.test("end_episodes")) == 0  # Already ended.
  for _ in range(5):
    records = agent.step()
    for test in tests.values():
      test.test("insert", records)
  indices = all_valid_indices(agent, n=n)
  for test in tests.values():
    assert_transitions(agent, test.test("get_transitions", indices), 64, n=n)


def test_n_step_settings_are_checked():
  with pytest.raises(BuildError, match="stack \\+ n_step = 7"):
    FrameStackReplay(12, num_streams=2, stack=4, n_step=3)  # 6 per stream.
  with pytest.raises(BuildError, match="n_step must be >= 1"):
    FrameStackReplay(100, num_streams=2, n_step=0)
  with pytest.raises(BuildError, match="discount"):
    FrameStackReplay(100, num_streams=2, n_step=2, discount=1.5)
  for rewards in (IntBox(3), FloatBox((2,))):
    with pytest.raises(SpaceError, match="'rewards' a FloatBox"):
      build("tf", n_step=2, records=record_space(rewards=rewards))


@pytest.mark.slow
@pytest.mark.parametrize("stack", [1, 2])
def test_short_stacks_and_default_episode_starts(stack):
  streams, per_stream = 2, 7
  agent = Agent(seed=stack, streams=streams, stack=stack)
  space = record_space(stack=stack)
  tests = {
    b: ComponentTest(
      FrameStackReplay(streams * per_stream, streams, stack),
      input_spaces(space, streams, per_stream),
      b,
    )
    for b in BACKENDS
  }
  assert tests["tf"].component.episode_starts == (1 if stack > 1 else 0)
  for _ in range(2 * per_stream + 3):
    records = agent.step()
    for test in tests.values():
      test.test("insert", records)
  indices = all_valid_indices(agent, per_stream)
  assert len(indices) == streams * (per_stream - stack)
  outs = [test.test("get_transitions", indices) for test in tests.values()]
  for out in outs:
    assert_transitions(agent, out, 1, per_stream)
  for key in outs[0]:
    np.testing.assert_array_equal(outs[0][key], outs[1][key], err_msg=key)


@pytest.mark.slow
def test_episode_start_stacks_are_what_the_agent_saw():
  """A hand-made case: repeat-padding at a start, a one-step episode, and
  the first insert of a fresh memory with real older frames."""
  f = [np.full((1, 1), v, np.uint8) for v in range(1, 20)]
  stacks, terminals = [], []

  def stack(*frames):
    return np.stack(frames, -1)

  # Episode A (fresh memory, mid-run: older frames 1, 2, 3), 2 steps.
  stacks += [stack(f[0], f[1], f[2], f[3]), stack(f[1], f[2], f[3], f[4])]
  terminals += [False, True]
  # Episode B: one step, repeat padding.
  stacks += [stack(f[5], f[5], f[5], f[5])]
  terminals += [True]
  # Episode C: zero padding, 3 steps.
  z = np.zeros((1, 1), np.uint8)
  stacks += [
    stack(z, z, z, f[6]),
    stack(z, z, f[6], f[7]),
    stack(z, f[6], f[7], f[8]),
  ]
  terminals += [False, False, False]
  space = record_space(frame=(1, 1))
  for backend in BACKENDS:
    test = build(backend, streams=1, per_stream=10, records=space)
    for st, term in zip(stacks, terminals):
      test.test(
        "insert",
        {
          "states": st[None],
          "actions": np.zeros(1, np.int32),
          "rewards": np.zeros(1, np.float32),
          "terminals": np.array([term]),
        },
      )
    out = test.test("get_transitions", np.arange(5, dtype=np.int32))
    for t in range(5):
      np.testing.assert_array_equal(out["states"][t], stacks[t])
      np.testing.assert_array_equal(out["next_states"][t], stacks[t + 1])
    # Step 5 is the newest: not sampleable.
    with pytest.raises(SpaceError, match="get_transitions"):
      test.test("get_transitions", np.array([5], np.int32))


@pytest.mark.slow
def test_lost_start_prefix_is_zero():
  """episode_starts=1: only the newest start's older frames are kept."""
  space = record_space(frame=(1,), stack=3)
  for backend in BACKENDS:
    test = build(
      backend,
      episode_starts=1,
      streams=1,
      per_stream=10,
      stack=3,
      records=space,
    )
    for st, term in [((9, 9, 1), True), ((8, 8, 2), False), ((8, 2, 3), False)]:
      test.test(
        "insert",
        {
          "states": np.array(st, np.uint8).reshape(1, 1, 3),
          "actions": np.zeros(1, np.int32),
          "rewards": np.zeros(1, np.float32),
          "terminals": np.array([term]),
        },
      )
    out = test.test("get_transitions", np.array([0, 1], np.int32))
    # Step 0's start (prefix 9, 9) was pushed out by step 1's start.
    np.testing.assert_array_equal(out["states"][:, 0], [[0, 0, 1], [8, 8, 2]])
    np.testing.assert_array_equal(
      out["next_states"][:, 0], [[8, 8, 2], [8, 2, 3]]
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_sampling_is_uniform_over_valid_steps_only(backend):
  agent = Agent(seed=7)
  test = build(backend)
  for _ in range(2 * C + 3):  # Wrapped: stacks may not reach old slots.
    test.test("insert", agent.step())
  valid = set(all_valid_indices(agent).tolist())
  assert len(valid) == S * (C - K)
  counts = dict.fromkeys(valid, 0)
  for _ in range(10):
    for i in test.test("sample", 200)["indices"].tolist():
      assert i in valid, f"sampled invalid index {i}"
      counts[i] += 1
  # 2000 draws over 24 pairs: each expected 83 times.
  assert min(counts.values()) > 40 and max(counts.values()) < 140, counts


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_and_unsampleable_memory(backend):
  agent = Agent(seed=3)
  test = build(backend)
  assert int(test.test("get_size")) == 0
  with pytest.raises(SpaceError, match="no transition can be sampled") as e:
    test.test("sample", 4)
  assert e.value.component == "frame_stack_replay" and e.value.api == "sample"
  test.test("insert", agent.step())
  with pytest.raises(SpaceError, match="no transition can be sampled"):
    test.test("sample", 4)
  test.test("insert", agent.step())
  out = test.test("sample", 30)
  # Only step 0 of each stream is sampleable.
  assert set(out["indices"].tolist()) <= {0, C, 2 * C}


@pytest.mark.parametrize("backend", BACKENDS)
def test_get_transitions_rejects_unsampleable_indices(backend):
  agent = Agent(seed=5)
  test = build(backend)
  for _ in range(C + 2):
    test.test("insert", agent.step())
  t = agent.num_inserts
  newest = flat_index(1, t - 1)
  oldest = flat_index(1, t - C)  # Stack reaches overwritten slots.
  for bad in (
    [newest],
    [oldest],
    [flat_index(2, t - C + K - 2)],
    [-1],
    [S * C],
    [flat_index(0, t - 2), newest],
  ):
    with pytest.raises(SpaceError) as e:
      test.test("get_transitions", np.array(bad, np.int32))
    assert (e.value.component, e.value.api, e.value.argument) == (
      "frame_stack_replay",
      "get_transitions",
      "indices",
    )
  ok = test.test(
    "get_transitions",
    np.array([flat_index(2, t - 2), flat_index(0, t - C + K - 1)], np.int32),
  )
  assert_transitions(agent, ok, 64)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_inserts_raise_and_change_nothing(backend):
  agent = Agent(seed=11)
  test = build(backend)
  for _ in range(5):
    test.test("insert", agent.step())
  before = test.get_weights()
  good = agent.step()
  bad_cases = {
    "too many streams": dict(
      good, **{k: np.concatenate([v, v[:1]]) for k, v in good.items()}
    ),
    "too few streams": {k: v[:2] for k, v in good.items()},
    "float frames": dict(good, states=good["states"].astype(np.float32)),
    "int64 actions": dict(good, actions=good["actions"].astype(np.int64)),
    "missing key": {k: v for k, v in good.items() if k != "rewards"},
    "extra key": dict(good, discounts=good["rewards"]),
    "wrong stack": dict(good, states=good["states"][..., :3]),
  }
  for name, records in bad_cases.items():
    with pytest.raises(SpaceError) as e:
      test.test("insert", records)
    assert (e.value.component, e.value.api, e.value.argument) == (
      "frame_stack_replay",
      "insert",
      "records",
    ), name
    after = test.get_weights()
    for path in before:
      np.testing.assert_array_equal(
        after[path], before[path], err_msg=f"{name}: {path} changed"
      )
  assert "3 streams" in str(_error(test, bad_cases["too many streams"]))
  assert int(test.test("insert", good)) == S * 6  # Still works.


def _error(test, records):
  with pytest.raises(SpaceError) as e:
    test.test("insert", records)
  return e.value


BAD_SPACES = {
  "stack not last": record_space(frame=(4, 3), stack=2),
  "terminals not bool": record_space(terminals=IntBox(2)),
  "terminals not scalar": record_space(terminals=BoolBox((2,))),
  "no batch rank": Dict(
    states=IntBox(256, FRAME + (K,), dtype=np.uint8),
    actions=IntBox(5),
    rewards=FloatBox(),
    terminals=BoolBox(),
  ),
  "missing rewards": record_space(rewards=None),
  "extra key": Dict(
    states=IntBox(256, FRAME + (K,), dtype=np.uint8),
    actions=IntBox(5),
    rewards=FloatBox(),
    terminals=BoolBox(),
    discounts=FloatBox(),
    add_batch_rank=True,
  ),
  "bool frames": record_space(states=BoolBox(FRAME + (K,))),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(BAD_SPACES))
def test_record_spaces_are_checked_at_build(backend, case):
  with pytest.raises(SpaceError) as e:
    build(backend, records=BAD_SPACES[case])
  assert (e.value.component, e.value.api, e.value.argument) == (
    "frame_stack_replay",
    "insert",
    "records",
  )


def test_bad_settings():
  with pytest.raises(BuildError, match="stack \\+ n_step = 5"):
    FrameStackReplay(8, num_streams=2, stack=4)  # 4 steps per stream.
  with pytest.raises(BuildError):
    FrameStackReplay(100, num_streams=0)
  with pytest.raises(BuildError):
    FrameStackReplay(100, num_streams=2, episode_starts=-1)


def test_nested_actions_and_float_frames():
  """Actions may be a nest; float frames keep their dtype."""
  space = record_space(
    states=FloatBox(FRAME + (K,)),
    actions=Dict(move=IntBox(3), fire=BoolBox(), aim=FloatBox((2,))),
  )
  agent = Agent(seed=2)
  rng = np.random.default_rng(0)
  inserts = []
  for _ in range(C + 3):
    records = agent.step()
    records["states"] = records["states"].astype(np.float32)
    records["actions"] = {
      "move": rng.integers(0, 3, S).astype(np.int32),
      "fire": rng.uniform(size=S) < 0.5,
      "aim": rng.normal(size=(S, 2)).astype(np.float32),
    }
    inserts.append(records)
  indices = all_valid_indices(agent)
  outs = {}
  for backend in BACKENDS:
    test = build(backend, records=space)
    for records in inserts:
      test.test("insert", records)
    out = outs[backend] = test.test("get_transitions", indices)
    assert out["states"].dtype == np.float32
    for i, index in enumerate(indices):
      s, t = global_step(agent, index)
      for k, v in inserts[t]["actions"].items():
        np.testing.assert_array_equal(out["actions"][k][i], v[s])
      np.testing.assert_array_equal(
        out["states"][i], agent.expected_stack(s, t, 64)
      )
  for k in outs["tf"]["actions"]:
    np.testing.assert_array_equal(
      outs["tf"]["actions"][k], outs["torch"]["actions"][k]
    )


@pytest.mark.slow
def test_atari_layout_stores_each_frame_once():
  """84x84x4 uint8: one uint8 frame per step and stream, zeros-initialized
  (made by the backend, no NumPy copy); sampled stacks stay uint8."""
  streams, per_stream = 2, 6
  space = record_space(frame=(84, 84))
  test = build(
    "tf",
    episode_starts=1,
    streams=streams,
    per_stream=per_stream,
    records=space,
  )
  specs = test.executor.registry.specs
  frames = specs["frame_stack_replay/buffer.frames"]
  assert frames.shape == (per_stream, streams, 84, 84)
  assert frames.dtype == np.uint8 and frames.initializer == "zeros"
  frame_bytes = per_stream * streams * 84 * 84
  big = {p: s for p, s in specs.items() if np.prod(s.shape) >= 84 * 84}
  assert set(big) == {
    "frame_stack_replay/buffer.frames",
    "frame_stack_replay/start_frames",
  }
  assert specs["frame_stack_replay/start_frames"].shape == (
    streams,
    1,
    3,
    84,
    84,
  )
  small = sum(
    np.prod(s.shape) * s.dtype.itemsize
    for p, s in specs.items()
    if p not in big
  )
  assert small <= per_stream * streams * 32 + 64
  rng = np.random.default_rng(0)
  for _ in range(per_stream + 1):
    test.test(
      "insert",
      {
        "states": rng.integers(0, 256, (streams, 84, 84, 4), dtype=np.uint8),
        "actions": np.zeros(streams, np.int32),
        "rewards": np.zeros(streams, np.float32),
        "terminals": np.zeros(streams, bool),
      },
    )
  out = test.test("sample", 5)
  assert out["states"].dtype == out["next_states"].dtype == np.uint8
  assert out["states"].shape == (5, 84, 84, 4)
  # No API reads a whole frame buffer (a capacity-sized copy): only
  # gathers and scatters touch them.
  for name in ("insert", "sample", "get_transitions", "get_size"):
    graph = test.executor.function(name).get_concrete_function().graph
    frame_gathers = 0
    for op in graph.get_operations():
      for t in op.outputs:
        if t.shape.is_fully_defined():
          assert t.shape.num_elements() < frame_bytes // 2, (name, op.name)
      # At 1e6 steps the frames have 7e9 elements: GatherNd refuses int32
      # indices into more than 2^31 ("too large for int32 indexing").
      if op.type == "ResourceGatherNd" and op.outputs[0].shape[
        -2:
      ].as_list() == [84, 84]:
        frame_gathers += 1
        assert op.get_attr("Tindices") == tf.int64, (name, op.name)
    assert frame_gathers == (
      2 * 2 if name in ("sample", "get_transitions") else 0
    ), name


class _SpecOnly:
  """Stands in for an executor in `create_variables`: records the variable
  specs and allocates nothing."""

  backend = "tensorflow"

  def __init__(self):
    self.specs = {}

  def make_variable(self, component, spec):
    self.specs[spec.path] = spec
    return None

  def make_resource(self, component, path, factory):
    return None


def test_one_million_atari_transitions_need_frames_only():
  """Variable specs of the 1e6 memory (nothing allocated): about
  1e6 * 84 * 84 bytes, all big variables uint8 zeros that the backend makes
  directly (no NumPy initial value)."""
  memory = FrameStackReplay(1_000_000, num_streams=4, stack=4)
  memory._build_backend = _SpecOnly()
  memory.create_variables({"records": record_space(frame=(84, 84))})
  specs = memory._build_backend.specs
  total = sum(
    np.prod(s.shape, dtype=np.int64) * s.dtype.itemsize for s in specs.values()
  )
  frames = 1_000_000 * 84 * 84
  assert frames <= total <= 1.02 * frames, total / frames
  rng = np.random.default_rng(0)
  for spec in specs.values():
    if np.prod(spec.shape, dtype=np.int64) > 1_000_000:
      assert spec.dtype == np.uint8, spec.path
      assert initial_value(spec, rng) is None, spec.path
