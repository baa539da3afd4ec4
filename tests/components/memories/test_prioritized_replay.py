"""Prioritized replay against an independent NumPy reference of Schaul et
al.'s formulas: P(i) = p_i^a / sum_k p_k^a, w_i = (N P(i))^-b / max_j w_j."""

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest

from ingraph_rl.components.memories import segment_tree
from ingraph_rl.components.memories.prioritized_replay import PrioritizedReplay
from ingraph_rl.errors import SpaceError
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.executors.torch import TorchExecutor
from ingraph_rl.spaces import Dict, FloatBox, IntBox
from ingraph_rl.testing import ComponentTest
from ingraph_rl.testing.component_test import to_numpy

EXECUTORS = [TFExecutor, TorchExecutor]
RECORDS = Dict(obs=FloatBox((3,)), action=IntBox(4), add_batch_rank=True)


def spaces(capacity, max_batch=600):
  return {
    "records": RECORDS,
    "batch_size": IntBox(max_batch, low=1),
    "indices": IntBox(capacity, add_batch_rank=True),
    "priorities": FloatBox(low=0.1, high=5.0, add_batch_rank=True),
    "beta": FloatBox(low=0.0, high=1.0),
  }


class NumpyPER:
  """Reference: a plain array of priorities; last update of an index wins."""

  def __init__(self, capacity, alpha):
    self.capacity, self.alpha = capacity, alpha
    self.p = np.zeros(capacity)
    self.index = self.size = 0
    self.max_p = 1.0

  def insert(self, n):
    for _ in range(n):
      self.p[self.index] = self.max_p
      self.index = (self.index + 1) % self.capacity
      self.size = min(self.size + 1, self.capacity)

  def update(self, indices, priorities):
    for i, p in zip(indices, priorities):
      self.p[i] = p
    self.max_p = max(self.max_p, float(np.max(priorities)))

  def probs(self):
    pa = self.p[: self.size] ** self.alpha
    return pa / pa.sum()

  def weights(self, indices, beta):
    probs = self.probs()
    w = (self.size * probs[indices]) ** -beta
    return w / (self.size * probs.min()) ** -beta


def leaves(weights, name, capacity):
  tree = weights[f"prioritized_replay/{name}"]
  p = segment_tree.num_leaves_pow2(capacity)
  return tree[p : p + capacity]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_sampling_frequencies_match_priority_to_the_alpha(executor):
  capacity, alpha = 10, 0.7
  ex = executor(
    PrioritizedReplay(capacity, alpha=alpha, seed=1), spaces(capacity)
  )
  ref = NumpyPER(capacity, alpha)
  ex.execute("insert", RECORDS.sample(8, seed=0))  # Not full: 8 of 10.
  ref.insert(8)
  idx = np.arange(8, dtype=np.int32)
  pri = np.array([0.2, 1.0, 3.0, 0.5, 4.0, 0.1, 2.0, 1.5], np.float32)
  ex.execute("update_priorities", idx, pri)
  ref.update(idx, pri)
  counts = np.zeros(capacity)
  for _ in range(20):
    out = to_numpy(ex.execute("sample", 500, 0.5))
    counts += np.bincount(out["indices"], minlength=capacity)
  assert counts[8:].sum() == 0
  expected = ref.probs() * counts.sum()
  chi2 = ((counts[:8] - expected) ** 2 / expected).sum()
  assert chi2 < 24.3  # 99.9% quantile, 7 degrees of freedom.


@pytest.mark.slow
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("beta", [0.0, 0.4, 1.0])
def test_importance_weights_match_the_formula(executor, beta):
  capacity, alpha = 6, 0.6
  ex = executor(PrioritizedReplay(capacity, alpha=alpha), spaces(capacity))
  ref = NumpyPER(capacity, alpha)
  ex.execute("insert", RECORDS.sample(9, seed=1))  # Wraps: 9 > 6.
  ref.insert(9)
  idx = np.array([0, 2, 5, 1], np.int32)
  pri = np.array([0.3, 2.5, 1.2, 4.0], np.float32)
  ex.execute("update_priorities", idx, pri)
  ref.update(idx, pri)
  out = to_numpy(ex.execute("sample", 64, np.float32(beta)))
  np.testing.assert_allclose(
    out["weights"], ref.weights(out["indices"], beta), rtol=1e-5
  )
  assert out["weights"].max() <= 1.0 + 1e-6
  # The records come from the sampled ring positions.
  again = to_numpy(ex.execute("get_records", out["indices"]))
  np.testing.assert_array_equal(again["obs"], out["records"]["obs"])


@pytest.mark.parametrize("executor", EXECUTORS)
def test_duplicate_indices_last_occurrence_wins(executor):
  capacity, alpha = 5, 0.5  # Not a power of two.
  ex = executor(PrioritizedReplay(capacity, alpha=alpha), spaces(capacity))
  ex.execute("insert", RECORDS.sample(5, seed=2))
  ex.execute(
    "update_priorities",
    np.array([3, 1, 3, 3], np.int32),
    np.array([1.0, 2.0, 4.0, 0.25], np.float32),
  )
  w = ex.get_weights()
  expected = np.array([1, 2, 1, 0.25, 1]) ** alpha
  np.testing.assert_allclose(
    leaves(w, "sum_tree", capacity), expected, rtol=1e-6
  )
  np.testing.assert_allclose(
    leaves(w, "min_tree", capacity), expected, rtol=1e-6
  )
  np.testing.assert_allclose(
    w["prioritized_replay/sum_tree"][1], expected.sum(), rtol=1e-6
  )
  np.testing.assert_allclose(
    w["prioritized_replay/min_tree"][1], expected.min(), rtol=1e-6
  )
  assert w["prioritized_replay/max_priority"] == 4.0


@pytest.mark.slow
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("bad", [-1.0, 0.0, np.nan, np.inf])
def test_bad_priorities_are_rejected_and_change_nothing(executor, bad):
  capacity = 5
  ex = executor(PrioritizedReplay(capacity), spaces(capacity))
  ex.execute("insert", RECORDS.sample(4, seed=3))
  before = ex.get_weights()
  with pytest.raises(SpaceError) as e:
    ex.execute(
      "update_priorities",
      np.array([0, 1], np.int32),
      np.array([1.0, bad], np.float32),
    )
  where = (
    "component 'prioritized_replay', API method 'update_priorities', "
    "argument 'priorities': "
  )
  if np.isfinite(bad):
    assert str(e.value) == where + "priorities must be finite and > 0"
  else:  # The executor's argument check refuses NaN and inf first.
    assert str(e.value).startswith(where + "non-finite values")
  with pytest.raises(
    SpaceError,
    match="argument 'indices': indices must lie "
    r"in \[0, size\)",
  ):
    ex.execute(
      "update_priorities", np.array([4], np.int32), np.array([1.0], np.float32)
    )
  after = ex.get_weights()
  for k in before:
    np.testing.assert_array_equal(before[k], after[k])


def test_parity_of_state_and_weights():
  capacity = 7
  calls = [
    ("insert", [RECORDS.sample(5, seed=0)]),
    (
      "update_priorities",
      [np.array([4, 0, 4], np.int32), np.array([3.0, 0.5, 2.0], np.float32)],
    ),
    ("insert", [RECORDS.sample(4, seed=1)]),
  ]
  tests = [
    ComponentTest(PrioritizedReplay(capacity), spaces(capacity), b)
    for b in ("tf", "torch")
  ]
  for t in tests:
    for name, args in calls:
      t.test(name, *args)
  a, b = (t.get_weights() for t in tests)
  for key in ("sum_tree", "min_tree", "max_priority", "index", "size"):
    np.testing.assert_allclose(
      a[f"prioritized_replay/{key}"], b[f"prioritized_replay/{key}"], rtol=1e-6
    )


@hypothesis.settings(max_examples=25, deadline=None)
@hypothesis.given(
  capacity=st.integers(1, 12),
  ops=st.lists(
    st.one_of(
      st.tuples(st.just("insert"), st.integers(1, 15)),
      st.tuples(
        st.just("update"),
        st.lists(
          st.tuples(st.integers(0, 11), st.floats(0.01, 10.0)),
          min_size=1,
          max_size=8,
        ),
      ),
    ),
    min_size=1,
    max_size=8,
  ),
)
@pytest.mark.slow
def test_tree_state_matches_reference(capacity, ops):
  alpha = 0.6
  ex = _cached_executor(capacity)
  ref = NumpyPER(capacity, alpha)
  for op, arg in ops:
    if op == "insert":
      ex.execute("insert", RECORDS.sample(arg, seed=arg))
      ref.insert(arg)
    elif ref.size:
      pairs = [(i % ref.size, p) for i, p in arg]
      idx = np.array([i for i, _ in pairs], np.int32)
      pri = np.array([p for _, p in pairs], np.float32)
      ex.execute("update_priorities", idx, pri)
      ref.update(idx, pri.astype(np.float64))
  w = ex.get_weights()
  stored = np.zeros(capacity)
  stored[: ref.size] = ref.p[: ref.size] ** alpha
  np.testing.assert_allclose(leaves(w, "sum_tree", capacity), stored, rtol=1e-5)
  assert int(w["prioritized_replay/size"]) == ref.size
  if ref.size:
    np.testing.assert_allclose(
      w["prioritized_replay/sum_tree"][1], stored.sum(), rtol=1e-5
    )


_EXECUTORS = {}


def _cached_executor(capacity):
  """A fresh-state executor per example; builds are cached per capacity and
  reset by restoring the initial weights."""
  if capacity not in _EXECUTORS:
    ex = TFExecutor(PrioritizedReplay(capacity, alpha=0.6), spaces(capacity))
    _EXECUTORS[capacity] = (ex, ex.get_weights())
  ex, initial = _EXECUTORS[capacity]
  ex.set_weights(initial)
  return ex


@pytest.mark.parametrize(
  "executor,impl",
  [(TFExecutor, "tf"), (TFExecutor, "custom_op"), (TorchExecutor, None)],
)
@pytest.mark.slow
def test_issue12_lengths_that_differ_change_nothing(executor, impl):
  """Indices and priorities of different lengths: a SpaceError from the
  executor's argument check and, with that check off (the memory fed in a
  graph), from the memory's own; the trees and the running maximum stay
  as they were on both segment-tree paths."""
  from ingraph_rl.testing.fuzz import changed, snapshot

  if impl == "custom_op" and segment_tree.DEFAULT_IMPL != "custom_op":
    pytest.skip("the custom op library is not built")
  before_impl = segment_tree.DEFAULT_IMPL
  if impl is not None:
    segment_tree.DEFAULT_IMPL = impl
  try:
    checked = executor(PrioritizedReplay(5), spaces(5))
    unchecked = executor(
      PrioritizedReplay(5), spaces(5), check_inputs=False, check_values=False
    )
  finally:
    segment_tree.DEFAULT_IMPL = before_impl
  indices = np.array([0, 1], np.int32)
  priorities = np.array([4.0, 4.0, 4.0], np.float32)  # Above the max: 1.
  for ex, reason in (
    (checked, "batch size 3 differs from the batch size 2"),
    (unchecked, "indices and priorities differ in length"),
  ):
    ex.execute("insert", RECORDS.sample(4, seed=3))
    before = snapshot(ex)
    with pytest.raises(SpaceError, match=reason) as e:
      ex.execute("update_priorities", indices, priorities)
    assert e.value.api == "update_priorities"
    assert e.value.argument == "priorities"
    assert changed(before, snapshot(ex)) == []
    assert ex.get_weights()["prioritized_replay/max_priority"] == 1.0


@pytest.mark.slow
@pytest.mark.parametrize("executor", EXECUTORS)
def test_insert_with_priorities_matches_the_reference(executor):
  """Each record keeps its own priority (the ring wraps: a batch over the
  free room overwrites the oldest; a batch over capacity keeps its last
  rows); the running maximum follows, and later plain inserts get it."""
  alpha = 0.7
  ex = executor(PrioritizedReplay(6, alpha=alpha), spaces(6))
  ref = NumpyPER(6, alpha)

  def insert_with(n, p, seed):
    out = ex.execute(
      "insert_with_priorities",
      RECORDS.sample(n, seed=seed),
      np.asarray(p, np.float32),
    )
    for value in p:  # One at a time: the reference's ring.
      ref.p[ref.index] = value
      ref.index = (ref.index + 1) % ref.capacity
      ref.size = min(ref.size + 1, ref.capacity)
    ref.max_p = max(ref.max_p, max(p))
    return int(out)

  assert insert_with(4, [0.5, 2.0, 0.25, 3.0], 0) == 4
  assert insert_with(3, [1.5, 0.1, 0.2], 1) == 6  # Wraps to slot 0.
  assert insert_with(8, np.linspace(0.3, 4.5, 8), 2) == 6  # Last 6 kept.
  ex.execute("insert", RECORDS.sample(1, seed=3))
  ref.insert(1)
  w = ex.get_weights()
  tree = to_numpy(w["prioritized_replay/sum_tree"])
  leaves = tree[8 : 8 + 6]
  np.testing.assert_allclose(leaves, ref.p**alpha, rtol=1e-5)
  assert float(w["prioritized_replay/max_priority"]) == pytest.approx(4.5)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_insert_with_bad_priorities_writes_nothing(executor):
  from ingraph_rl.testing.fuzz import changed, snapshot

  ex = executor(
    PrioritizedReplay(5), spaces(5), check_inputs=False, check_values=False
  )
  ex.execute("insert", RECORDS.sample(2, seed=3))
  for priorities, reason in (
    ([1.0, np.nan], "finite and > 0"),
    ([1.0, 0.0], "finite and > 0"),
    ([1.0], "records and priorities differ in length"),
  ):
    before = snapshot(ex)
    with pytest.raises(SpaceError, match=reason) as e:
      ex.execute(
        "insert_with_priorities",
        RECORDS.sample(2, seed=4),
        np.asarray(priorities, np.float32),
      )
    assert e.value.api == "insert_with_priorities"
    assert e.value.argument == "priorities"
    assert changed(before, snapshot(ex)) == []
