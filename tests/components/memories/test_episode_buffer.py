"""Tests of `EpisodeBuffer` (ingraph_rl/components/memories/episode_buffer.py):
recent steps and recent complete episodes, against a Python list reference,
with ring wrap-around, clears, TF vs torch."""

import numpy as np
import pytest

from ingraph_rl.components.memories.episode_buffer import EpisodeBuffer
from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import BoolBox, Dict, FloatBox, IntBox
from ingraph_rl.testing import ComponentTest

BACKENDS = ["tf", "torch"]
CAPACITY = 10
RECORDS = Dict(
  obs=FloatBox((2,)),
  action=IntBox(3),
  info=Dict(value=FloatBox(), flag=BoolBox()),
  terminals=BoolBox(),
  add_batch_rank=True,
)


def build(backend, records=RECORDS, capacity=CAPACITY):
  return ComponentTest(
    EpisodeBuffer(capacity),
    # Unbounded above (asking for more than is stored is fine); the
    # negative counts the component refuses come through.
    {
      "records": records,
      "num_records": IntBox(low=-5),
      "num_episodes": IntBox(low=-5),
    },
    backend,
  )


class Reference:
  """Every step ever inserted (as flat tuples) and what the buffer holds."""

  def __init__(self, capacity=CAPACITY):
    self.capacity = capacity
    self.steps = []  # (record dict of one step, is_start)
    self.first = 0  # Index of the first step since the last clear.

  def insert(self, batch):
    n = len(batch["terminals"])
    for i in range(n):
      prev_terminal = self.steps[-1][0]["terminals"] if self.steps else True
      step = {
        "obs": batch["obs"][i],
        "action": batch["action"][i],
        "info": {k: v[i] for k, v in batch["info"].items()},
        "terminals": bool(batch["terminals"][i]),
      }
      self.steps.append((step, bool(prev_terminal)))

  def clear(self):
    self.first = len(self.steps)

  def content(self):
    held = self.steps[self.first :]
    return held[max(len(held) - self.capacity, 0) :]

  def recent(self, n):
    held = self.content()
    return [s for s, _ in held[len(held) - min(n, len(held)) :]]

  def episodes(self, n):
    held = self.content()
    complete, current = [], []
    current_complete = bool(held) and held[0][1]
    for step, is_start in held:
      if is_start:
        current_complete = True
      current.append(step)
      if step["terminals"]:
        if current_complete:
          complete.append(current)
        current, current_complete = [], True
    chosen = complete[len(complete) - min(n, len(complete)) :]
    return [s for episode in chosen for s in episode]


def stacked(steps):
  """List of step dicts -> the record nest with a leading step dim."""

  def leaf(values, space):
    return np.array(values, dtype=space.dtype).reshape(
      (len(values),) + space.shape
    )

  return {
    "obs": leaf([s["obs"] for s in steps], RECORDS["obs"]),
    "action": leaf([s["action"] for s in steps], RECORDS["action"]),
    "info": {
      k: leaf([s["info"][k] for s in steps], RECORDS["info"][k])
      for k in ("flag", "value")
    },
    "terminals": leaf([s["terminals"] for s in steps], RECORDS["terminals"]),
  }


def assert_nest_equal(got, want, what):
  for key in ("obs", "action", "terminals"):
    assert got[key].dtype == want[key].dtype, (what, key)
    np.testing.assert_array_equal(got[key], want[key], err_msg=f"{what} {key}")
  for key in ("flag", "value"):
    np.testing.assert_array_equal(
      got["info"][key], want["info"][key], err_msg=f"{what} info {key}"
    )


def random_batch(rng, n, p_end=0.3):
  batch = RECORDS.sample(n, seed=rng)
  batch["terminals"] = rng.uniform(size=n) < p_end
  return batch


def test_matches_reference_with_wraps_and_clears_both_backends():
  rng = np.random.default_rng(0)
  ref = Reference()
  tests = {b: build(b) for b in BACKENDS}
  sizes = [3, 1, 4, 0, 6, 2, 13, 5, 1, 1, 2, 7, 3, 4, 2, 9, 1, 6, 3, 2, 5]
  nonempty_episodes = 0
  for step, n in enumerate(sizes):
    if step in (9, 16):
      ref.clear()
      for test in tests.values():
        assert int(test.test("clear")) == 0
    batch = random_batch(rng, n)
    ref.insert(batch)
    for test in tests.values():
      assert int(test.test("insert", batch)) == len(ref.content())
      assert int(test.test("get_size")) == len(ref.content())
    size = len(ref.content())
    for num in sorted({0, 1, 3, size, size + 4}):
      want = stacked(ref.recent(num))
      for b, test in tests.items():
        assert_nest_equal(
          test.test("get_records", num),
          want,
          f"{b} step {step} get_records({num})",
        )
    for num in (0, 1, 2, 3, 50):
      want_steps = ref.episodes(num)
      nonempty_episodes += bool(want_steps) and num > 0
      want = stacked(want_steps)
      for b, test in tests.items():
        assert_nest_equal(
          test.test("get_episodes", num),
          want,
          f"{b} step {step} get_episodes({num})",
        )
  assert nonempty_episodes > 20


def _steps(test, terminals, start=0):
  """Inserts steps whose obs are (start + i, 0) and the given terminals."""
  n = len(terminals)
  test.test(
    "insert",
    {
      "obs": np.stack([np.arange(start, start + n), np.zeros(n)], -1).astype(
        np.float32
      ),
      "action": np.zeros(n, np.int32),
      "info": {"flag": np.zeros(n, bool), "value": np.zeros(n, np.float32)},
      "terminals": np.array(terminals, bool),
    },
  )


def ids(out):
  return out["obs"][:, 0].astype(int).tolist()


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_episode_spanning_the_wrap(backend):
  test = build(backend, capacity=8)
  _steps(test, [False, False, False, True, False, True], start=0)  # 0..5
  # Episode 6..9 occupies ring slots 6, 7, 0, 1.
  _steps(test, [False, False, False, True, False], start=6)
  out = test.test("get_episodes", 1)
  assert ids(out) == [6, 7, 8, 9]
  assert out["terminals"].tolist() == [False, False, False, True]
  # Steps 0..2 were overwritten: episode 0..3 has lost its start.
  assert ids(test.test("get_episodes", 5)) == [4, 5, 6, 7, 8, 9]
  assert ids(test.test("get_records", 8)) == list(range(3, 11))
  assert ids(test.test("get_records", 3)) == [8, 9, 10]


@pytest.mark.parametrize("backend", BACKENDS)
def test_more_episodes_than_stored_and_incomplete_ones(backend):
  test = build(backend)
  assert ids(test.test("get_episodes", 3)) == []
  assert ids(test.test("get_records", 3)) == []
  _steps(test, [False, False])  # No terminal yet.
  assert ids(test.test("get_episodes", 3)) == []
  _steps(test, [True, True, False, False], start=2)  # 0..2, 3; 4, 5 open.
  assert ids(test.test("get_episodes", 1)) == [3]
  assert ids(test.test("get_episodes", 10)) == [0, 1, 2, 3]
  assert ids(test.test("get_episodes", 0)) == []
  assert ids(test.test("get_records", 100)) == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("backend", BACKENDS)
def test_clear_keeps_episode_bookkeeping(backend):
  test = build(backend)
  _steps(test, [False, True, False])
  assert int(test.test("clear")) == 0
  assert int(test.test("get_size")) == 0
  assert ids(test.test("get_records", 5)) == []
  # The episode that began before the clear is not complete here.
  _steps(test, [False, True, False, True], start=10)
  assert ids(test.test("get_episodes", 5)) == [12, 13]
  test.test("clear")
  # The last step before this clear was terminal: a complete episode.
  _steps(test, [False, True], start=20)
  assert ids(test.test("get_episodes", 5)) == [20, 21]


def test_batch_larger_than_capacity_keeps_the_last_steps():
  for backend in BACKENDS:
    test = build(backend, capacity=4)
    _steps(test, [False, True, False, False, True, False, True])
    # Steps 3..6 stay; step 3 does not start an episode (2 was no terminal).
    assert ids(test.test("get_records", 9)) == [3, 4, 5, 6]
    assert ids(test.test("get_episodes", 9)) == [5, 6]


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_input_raises_and_changes_nothing(backend):
  test = build(backend)
  _steps(test, [False, True, False])
  before = test.get_weights()
  for api, arg in (
    ("get_records", "num_records"),
    ("get_episodes", "num_episodes"),
  ):
    with pytest.raises(SpaceError, match=">= 0") as e:
      test.test(api, -1)
    assert (e.value.component, e.value.api, e.value.argument) == (
      "episode_buffer",
      api,
      arg,
    )
  good = RECORDS.sample(2, seed=0)
  bad = {
    "float actions": dict(good, action=good["action"].astype(np.float32)),
    "int terminals": dict(good, terminals=np.zeros(2, np.int32)),
    "missing terminals": {k: v for k, v in good.items() if k != "terminals"},
    "ragged batch": dict(good, terminals=np.zeros(3, bool)),
  }
  for name, records in bad.items():
    with pytest.raises(SpaceError) as e:
      test.test("insert", records)
    assert (e.value.component, e.value.api, e.value.argument) == (
      "episode_buffer",
      "insert",
      "records",
    ), name
  after = test.get_weights()
  for path in before:
    np.testing.assert_array_equal(after[path], before[path], err_msg=path)
  assert ids(test.test("get_records", 5)) == [0, 1, 2]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
  "records",
  [
    Dict(obs=FloatBox((2,)), add_batch_rank=True),
    Dict(obs=FloatBox((2,)), terminals=IntBox(2), add_batch_rank=True),
    Dict(obs=FloatBox((2,)), terminals=BoolBox((1,)), add_batch_rank=True),
    Dict(obs=FloatBox((2,)), terminals=BoolBox()),
    FloatBox((2,), add_batch_rank=True),
  ],
  ids=[
    "no terminals",
    "int terminals",
    "terminals not scalar",
    "no batch rank",
    "not a dict",
  ],
)
def test_record_space_checked_at_build(backend, records):
  with pytest.raises(SpaceError) as e:
    build(backend, records=records)
  assert (e.value.component, e.value.api, e.value.argument) == (
    "episode_buffer",
    "insert",
    "records",
  )


def test_no_sample_api():
  test = build("tf")
  assert "sample" not in test.executor.apis
  assert set(test.executor.apis) == {
    "insert",
    "get_records",
    "get_episodes",
    "get_size",
    "clear",
  }
