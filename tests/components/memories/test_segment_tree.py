"""Segment trees: layout, and every implementation (pure TF, C++ custom op,
torch) against a plain NumPy array of leaves."""

import numpy as np
import pytest
import tensorflow as tf
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ingraph_rl.components.memories import segment_tree

IMPLS = ["tf", "custom_op", "torch"]
EXAMPLES = settings(max_examples=40, deadline=None)


# --- the reference -----------------------------------------------------------


class NumpyReference:
  """`capacity` leaves in a plain array; batches applied one by one."""

  def __init__(self, capacity, op):
    self.op = op
    self.leaves = np.full(capacity, 0.0 if op == "sum" else np.inf, np.float32)

  def update(self, indices, values):
    for i, v in zip(indices, values):  # In order: the last one wins.
      self.leaves[i] = v

  def total(self):
    return np.sum(self.leaves, dtype=np.float64)

  def min(self):
    return np.min(self.leaves)

  def find(self, masses):
    return np.searchsorted(
      np.cumsum(self.leaves, dtype=np.float64), masses, side="right"
    )


def check_tree(tree, ref):
  """The whole array: leaves, padding, and every internal node."""
  capacity = len(ref.leaves)
  num_leaves = segment_tree.num_leaves_pow2(capacity)
  fill = 0.0 if ref.op == "sum" else np.inf
  assert tree.shape == (2 * num_leaves,) and tree.dtype == np.float32
  np.testing.assert_array_equal(
    tree[num_leaves : num_leaves + capacity], ref.leaves
  )
  np.testing.assert_array_equal(tree[num_leaves + capacity :], fill)
  combine = np.add if ref.op == "sum" else np.minimum
  np.testing.assert_array_equal(
    tree[1:num_leaves],
    combine(tree[2 : 2 * num_leaves : 2], tree[3 : 2 * num_leaves : 2]),
  )


# --- one interface over the three implementations ---------------------------


class Backend:
  """impl "tf" / "custom_op" on a tf.Variable (eager), or "torch"."""

  def __init__(self, impl, capacity, op):
    self.impl, self.op = impl, op
    init = segment_tree.initial_tree(capacity, op)
    if impl == "torch":
      self.tree = torch.from_numpy(init.copy())
    else:
      self.tree = tf.Variable(init)

  def update(self, indices, values):
    indices = np.asarray(indices, np.int32)
    values = np.asarray(values, np.float32)
    if self.impl == "torch":
      segment_tree.torch_update(
        self.tree, torch.from_numpy(indices), torch.from_numpy(values), self.op
      )
    else:
      segment_tree.update(self.tree, indices, values, self.op, impl=self.impl)

  def find(self, masses):
    masses = np.asarray(masses, np.float32)
    if self.impl == "torch":
      return segment_tree.torch_find_prefixsum_idx(
        self.tree, torch.from_numpy(masses)
      ).numpy()
    return segment_tree.find_prefixsum_idx(
      self.tree, masses, impl=self.impl
    ).numpy()

  def root(self):
    if self.impl == "torch":
      return float(self.tree[1])
    fn = segment_tree.total if self.op == "sum" else segment_tree.min_value
    return float(fn(self.tree).numpy())

  def array(self):
    return self.tree.numpy().copy()


# --- strategies ---------------------------------------------------------------

CAPACITIES = st.one_of(
  st.sampled_from([1, 2, 3, 5, 7, 8, 1000, 1024]), st.integers(1, 300)
)
# Multiples of 1/4 up to 64: every sum of up to 1024 of them is exact in
# float32, so the tree must match the float64 reference exactly.
EXACT_PRIORITIES = st.integers(0, 256).map(lambda k: k / 4)
# No subnormals: TF's CPU kernels run with flush-to-zero.
MIN_VALUES = st.one_of(
  st.floats(-1e6, 1e6, width=32, allow_subnormal=False), st.just(np.inf)
)


@st.composite
def update_batches(draw, capacity, values):
  """Batches of (indices, values) with many repeated indices."""
  pool = draw(st.lists(st.integers(0, capacity - 1), min_size=1, max_size=6))
  batches = []
  for _ in range(draw(st.integers(1, 4))):
    indices = draw(
      st.lists(
        st.one_of(st.sampled_from(pool), st.integers(0, capacity - 1)),
        max_size=40,
      )
    )
    vals = draw(st.lists(values, min_size=len(indices), max_size=len(indices)))
    batches.append((indices, vals))
  return batches


def masses_for(ref, fractions):
  """Random masses in [0, total) and every prefix-sum boundary below it."""
  total = np.float32(ref.total())
  below = np.nextafter(total, np.float32(0))
  masses = np.minimum(np.float32(fractions) * total, below)
  bounds = np.cumsum(ref.leaves, dtype=np.float64)
  bounds = bounds[bounds < total].astype(np.float32)
  return np.concatenate([[0.0], masses, bounds[:50]]).astype(np.float32)


# --- layout -------------------------------------------------------------------


@pytest.mark.parametrize(
  "capacity, leaves",
  [(1, 1), (2, 2), (3, 4), (5, 8), (8, 8), (1000, 1024), (1025, 2048)],
)
def test_layout(capacity, leaves):
  assert segment_tree.num_leaves_pow2(capacity) == leaves
  assert segment_tree.tree_size(capacity) == 2 * leaves
  s = segment_tree.initial_tree(capacity, "sum")
  m = segment_tree.initial_tree(capacity, "min")
  assert s.shape == m.shape == (2 * leaves,)
  assert s.dtype == m.dtype == np.float32
  assert np.all(s == 0) and np.all(np.isposinf(m))


def test_layout_rejects_bad_arguments():
  with pytest.raises(ValueError, match="capacity"):
    segment_tree.tree_size(0)
  with pytest.raises(ValueError, match="op"):
    segment_tree.initial_tree(4, "max")


# --- properties against the reference -----------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("impl", IMPLS)
@EXAMPLES
@given(data=st.data())
def test_sum_tree_matches_reference(impl, data):
  capacity = data.draw(CAPACITIES, "capacity")
  ref = NumpyReference(capacity, "sum")
  tree = Backend(impl, capacity, "sum")
  for indices, values in data.draw(update_batches(capacity, EXACT_PRIORITIES)):
    tree.update(indices, values)
    ref.update(indices, values)
    check_tree(tree.array(), ref)
    assert tree.root() == ref.total()
  if ref.total() > 0:
    fractions = data.draw(
      st.lists(
        st.floats(0, 1, exclude_max=True, width=32), min_size=1, max_size=30
      ),
      "fractions",
    )
    masses = masses_for(ref, fractions)
    found = tree.find(masses)
    np.testing.assert_array_equal(found, ref.find(masses))
    assert np.all(ref.leaves[found] > 0)  # Never an empty leaf.


@pytest.mark.slow
@pytest.mark.parametrize("impl", IMPLS)
@EXAMPLES
@given(data=st.data())
def test_min_tree_matches_reference(impl, data):
  capacity = data.draw(CAPACITIES, "capacity")
  ref = NumpyReference(capacity, "min")
  tree = Backend(impl, capacity, "min")
  for indices, values in data.draw(update_batches(capacity, MIN_VALUES)):
    tree.update(indices, values)
    ref.update(indices, values)
    check_tree(tree.array(), ref)
    assert tree.root() == ref.min()


@pytest.mark.parametrize("impl", IMPLS)
def test_last_occurrence_wins(impl):
  tree = Backend(impl, 5, "sum")
  tree.update([0, 3, 0, 3, 0], [1.0, 2.0, 4.0, 8.0, 16.0])
  np.testing.assert_array_equal(tree.array()[8:13], [16, 0, 0, 8, 0])
  assert tree.root() == 24.0
  np.testing.assert_array_equal(
    tree.find([0.0, 15.9, 16.0, 23.9]), [0, 0, 3, 3]
  )


@pytest.mark.parametrize("impl", IMPLS)
def test_empty_batch_and_capacity_one(impl):
  tree = Backend(impl, 1, "sum")
  tree.update([], [])
  np.testing.assert_array_equal(tree.array(), [0, 0])
  tree.update([0, 0], [3.0, 2.5])
  np.testing.assert_array_equal(tree.array(), [0, 2.5])  # Root = leaf.
  np.testing.assert_array_equal(tree.find([0.0, 2.4]), [0, 0])


@pytest.mark.parametrize("impl", IMPLS)
def test_rounding_never_reaches_an_empty_leaf(impl):
  """A mass at or past the total (float rounding in a caller) lands on the
  last non-empty leaf, never on padding beyond the capacity."""
  tree = Backend(impl, 5, "sum")
  tree.update([0, 1, 2], [0.1, 0.2, 0.3])
  total = tree.root()
  found = tree.find(
    [total, np.nextafter(np.float32(total), np.float32(1)), total * 2]
  )
  np.testing.assert_array_equal(found, [2, 2, 2])


@pytest.mark.parametrize("impl", IMPLS)
def test_out_of_range_indices_raise_and_change_nothing(impl):
  tree = Backend(impl, 5, "sum")
  tree.update([1], [1.0])
  before = tree.array()
  for bad in ([8], [-1], [2, 9]):  # P = 8 leaves.
    with pytest.raises((tf.errors.InvalidArgumentError, IndexError)):
      tree.update(bad, [1.0] * len(bad))
    np.testing.assert_array_equal(tree.array(), before)


@pytest.mark.parametrize("impl", ["tf", "custom_op"])
def test_bad_arguments(impl):
  var = tf.Variable(segment_tree.initial_tree(5, "sum"))
  with pytest.raises(ValueError, match="op"):
    segment_tree.update(var, [0], [1.0], "max", impl=impl)
  with pytest.raises(ValueError, match="impl"):
    segment_tree.update(var, [0], [1.0], "sum", impl="numpy")
  with pytest.raises(TypeError, match="int32 or int64"):
    segment_tree.update(var, [0.0], [1.0], "sum", impl=impl)
  with pytest.raises(ValueError, match="power of two"):
    segment_tree.find_prefixsum_idx(
      tf.Variable(np.zeros(6, np.float32)), [0.0], impl=impl
    )
  with pytest.raises((ValueError, tf.errors.InvalidArgumentError)):
    segment_tree.update(var, [0, 1], [1.0], "sum", impl=impl)
  with pytest.raises(ValueError, match="1-D"):
    segment_tree.update(var, [[0]], [[1.0]], "sum", impl=impl)
  with pytest.raises(TypeError, match="tf.Variable"):
    segment_tree.update(tf.zeros(16), [0], [1.0], "sum", impl=impl)
  np.testing.assert_array_equal(var.numpy(), 0)


def test_torch_rejects_mismatched_values():
  tree = torch.zeros(16)
  with pytest.raises(ValueError, match="2 indices but 1 values"):
    segment_tree.torch_update(tree, [0, 1], [1.0], "sum")


def test_int64_indices():
  for impl in ("tf", "custom_op"):
    var = tf.Variable(segment_tree.initial_tree(3, "min"))
    segment_tree.update(
      var, tf.constant([2, 0], tf.int64), [5.0, 7.0], "min", impl=impl
    )
    np.testing.assert_array_equal(
      var.numpy(), [np.inf, 5, 7, 5, 7, np.inf, 5, np.inf]
    )


def test_leaf_values():
  var = tf.Variable(segment_tree.initial_tree(5, "sum"))
  segment_tree.update(var, [4, 1], [2.0, 3.0], "sum")
  np.testing.assert_array_equal(
    segment_tree.leaf_values(var, [1, 4, 0]), [3, 2, 0]
  )


# --- inside tf.function -------------------------------------------------------


@pytest.mark.parametrize(
  "impl, jit", [("tf", False), ("custom_op", False), ("tf", True), (None, True)]
)
@pytest.mark.slow
def test_in_graph_update_then_find(impl, jit):
  """One traced function writes and then reads the trees: automatic control
  dependencies must order the reads after the writes. Batch size changes
  never retrace."""
  capacity = 37
  sums = tf.Variable(segment_tree.initial_tree(capacity, "sum"))
  mins = tf.Variable(segment_tree.initial_tree(capacity, "min"))
  spec = tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.float32)

  @tf.function(
    input_signature=[*spec, tf.TensorSpec([None], tf.float32)], jit_compile=jit
  )
  def step(indices, values, fractions):
    segment_tree.update(sums, indices, values, "sum", impl=impl)
    segment_tree.update(mins, indices, values, "min", impl=impl)
    total = segment_tree.total(sums)
    found = segment_tree.find_prefixsum_idx(sums, fractions * total, impl=impl)
    return total, segment_tree.min_value(mins), found

  ref_sum = NumpyReference(capacity, "sum")
  ref_min = NumpyReference(capacity, "min")
  rng = np.random.default_rng(0)
  for size in (1, 7, 64, 3):
    indices = rng.integers(0, capacity, size).astype(np.int32)
    values = (rng.integers(1, 100, size) / 4).astype(np.float32)
    fractions = np.sort(rng.uniform(0, 1, 16)).astype(np.float32)
    total, minimum, found = step(indices, values, fractions)
    ref_sum.update(indices, values)
    ref_min.update(indices, values)
    assert total.numpy() == ref_sum.total()
    assert minimum.numpy() == ref_min.min()
    masses = fractions * np.float32(ref_sum.total())
    np.testing.assert_array_equal(found.numpy(), ref_sum.find(masses))
    check_tree(sums.numpy(), ref_sum)
    check_tree(mins.numpy(), ref_min)
  assert step.experimental_get_tracing_count() == 1


def test_custom_op_unavailable_is_a_clear_error(monkeypatch):
  monkeypatch.setattr(segment_tree._ops, "load_segment_tree_ops", lambda: None)
  var = tf.Variable(segment_tree.initial_tree(4, "sum"))
  with pytest.raises(RuntimeError, match="custom_op"):
    segment_tree.update(var, [0], [1.0], "sum", impl="custom_op")
  segment_tree.update(var, [0], [1.0], "sum", impl="tf")
  assert segment_tree.total(var).numpy() == 1.0


def test_custom_op_under_xla_is_a_clear_error():
  var = tf.Variable(segment_tree.initial_tree(4, "sum"))

  @tf.function(jit_compile=True)
  def find():
    return segment_tree.find_prefixsum_idx(var, [0.0], impl="custom_op")

  with pytest.raises(ValueError, match="XLA"):
    find()
