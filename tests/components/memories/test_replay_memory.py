"""Uniform ring replay: wrap-around, uniform sampling, dtypes, parity, bad
input, against a plain Python list reference."""

import numpy as np
import pytest

from ingraph_rl.components.memories.replay_memory import ReplayMemory
from ingraph_rl.errors import SpaceError
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.executors.torch import TorchExecutor
from ingraph_rl.spaces import BoolBox, Dict, FloatBox, IntBox
from ingraph_rl.testing import assert_parity
from ingraph_rl.testing.component_test import to_numpy

EXECUTORS = [TFExecutor, TorchExecutor]
CAPACITY = 7
RECORDS = Dict(
  obs=FloatBox((4,)),
  action=IntBox(3),
  frame=IntBox(256, shape=(2, 2), dtype=np.uint8),
  terminal=BoolBox(),
  add_batch_rank=True,
)
SPACES = {
  "records": RECORDS,
  "batch_size": IntBox(9, low=1),
  "indices": IntBox(CAPACITY, add_batch_rank=True),
}


class ListReference:
  """The obvious ring: a Python list and a write index."""

  def __init__(self, capacity):
    self.capacity, self.items, self.index = capacity, [None] * capacity, 0
    self.size = 0

  def insert(self, batch):
    n = len(batch["action"])
    for i in range(n):
      self.items[self.index] = {k: v[i] for k, v in batch.items()}
      self.index = (self.index + 1) % self.capacity
      self.size = min(self.size + 1, self.capacity)


def _batch(n, seed):
  return RECORDS.sample(n, seed=seed)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_ring_wraps_around_like_the_reference(executor):
  ex = executor(ReplayMemory(CAPACITY), SPACES)
  ref = ListReference(CAPACITY)
  for step, n in enumerate([3, 3, 3, 1, 12, 2]):  # 12 > capacity.
    batch = _batch(n, step)
    size = int(to_numpy(ex.execute("insert", batch)))
    ref.insert(batch)
    assert size == ref.size == int(to_numpy(ex.execute("get_size")))
    got = to_numpy(
      ex.execute("get_records", np.arange(ref.size, dtype=np.int32))
    )
    for i in range(ref.size):
      for key in ("obs", "action", "frame", "terminal"):
        np.testing.assert_array_equal(got[key][i], ref.items[i][key])
  assert got["frame"].dtype == np.uint8 and got["terminal"].dtype == bool


@pytest.mark.parametrize("executor", EXECUTORS)
def test_sampling_is_uniform_over_stored_records(executor):
  ex = executor(
    ReplayMemory(50, seed=3),
    {
      **SPACES,
      "batch_size": IntBox(2001, low=1),
      "indices": IntBox(50, add_batch_rank=True),
    },
  )
  ex.execute("insert", _batch(20, 0))  # Not full: only 0..19 are valid.
  counts = np.zeros(50)
  for _ in range(10):
    out = to_numpy(ex.execute("sample", 2000))
    counts += np.bincount(out["indices"], minlength=50)
    # The records returned are the records at the returned indices.
    again = to_numpy(ex.execute("get_records", out["indices"]))
    np.testing.assert_array_equal(again["obs"], out["records"]["obs"])
  assert counts[20:].sum() == 0
  # Chi-square goodness of fit to uniform over the 20 stored records.
  expected = counts.sum() / 20
  chi2 = ((counts[:20] - expected) ** 2 / expected).sum()
  assert chi2 < 43.8  # 99.9% quantile of chi2 with 19 degrees of freedom.


def test_parity_of_inserts_and_reads():
  idx = np.array([0, 6, 3, 3], np.int32)
  calls = [
    ("insert", [_batch(5, 0)]),
    ("insert", [_batch(4, 1)]),
    ("get_records", [idx]),
    ("get_size", []),
  ]
  assert_parity(ReplayMemory(CAPACITY), SPACES, calls, rtol=0, atol=0)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_bad_records_are_rejected_and_change_nothing(executor):
  ex = executor(ReplayMemory(CAPACITY), SPACES)
  ex.execute("insert", _batch(3, 0))
  before = ex.get_weights()
  wrong_dtype = dict(_batch(2, 1), frame=np.zeros((2, 2, 2), np.float32))
  missing = {k: v for k, v in _batch(2, 1).items() if k != "terminal"}
  for bad, reason in (
    (wrong_dtype, "dtype mismatch"),
    (missing, r"missing keys \['terminal'\]"),
  ):
    with pytest.raises(SpaceError, match=reason) as e:
      ex.execute("insert", bad)
    assert (
      "component 'replay_memory', API method 'insert', argument "
      "'records'" in str(e.value)
    )
  with pytest.raises(
    SpaceError,
    match=r"'get_records', argument 'indices': "
    r"indices must lie in \[0, size\)",
  ):
    ex.execute("get_records", np.array([5], np.int32))
  after = ex.get_weights()
  for k in before:
    np.testing.assert_array_equal(before[k], after[k])


@pytest.mark.parametrize("executor", EXECUTORS)
def test_sampling_an_empty_memory_is_a_clear_error(executor):
  ex = executor(ReplayMemory(CAPACITY), SPACES)
  with pytest.raises(SpaceError, match="the memory is empty"):
    ex.execute("sample", 2)


def test_records_need_a_batch_rank():
  with pytest.raises(SpaceError, match="records need a batch rank"):
    TFExecutor(
      ReplayMemory(3),
      {
        "records": FloatBox((2,)),
        "batch_size": IntBox(),
        "indices": IntBox(add_batch_rank=True),
      },
    )


@pytest.mark.parametrize("executor", EXECUTORS)
def test_issue12_negative_and_overflowing_sizes_and_indices(executor):
  """A negative batch size is a SpaceError (not a raw op error); Python
  ints beyond int32 are refused before they wrap (a sample size, a record
  index past the range check); nothing changes, the RNG included."""
  from ingraph_rl.testing.fuzz import changed, snapshot

  records = Dict(obs=FloatBox((2,)), action=IntBox(3), add_batch_rank=True)
  ex = executor(
    ReplayMemory(8),
    {
      "records": records,
      "batch_size": IntBox(100, low=-100),
      "indices": IntBox(8, add_batch_rank=True),
    },
  )
  ex.execute("insert", records.sample(3, seed=0))
  before = snapshot(ex)
  cases = [
    ("sample", [-1], "batch_size must be >= 0"),
    ("sample", [2**32 + 2], "out of the int32 range"),
    ("get_records", [[2**32 + 1]], "out of the int32 range"),
    ("get_records", [[5]], r"indices must lie in \[0, size\)"),
    (
      "insert",
      [{"obs": np.zeros((2, 2), np.float32), "action": [1, 3]}],
      "out of range",
    ),
    (
      "insert",
      [{"obs": np.zeros((2, 2), np.float32), "action": [1, 2**32 + 1]}],
      "out of the int32 range",
    ),
  ]
  for api, args, reason in cases:
    with pytest.raises(SpaceError, match=reason) as e:
      ex.execute(api, *args)
    assert e.value.component == "replay_memory" and e.value.api == api
    assert changed(before, snapshot(ex)) == [], (api, args)
