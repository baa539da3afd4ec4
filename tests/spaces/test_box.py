"""Tests of the box spaces (`ingraph_rl/spaces/box.py`, `space.py`)."""

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest
import tensorflow as tf
import torch
import tree

from ingraph_rl.errors import SpaceError
from ingraph_rl.executors.tf_spaces import tensor_spec, tf_dtype
from ingraph_rl.executors.torch_spaces import numpy_dtype, torch_dtype
from ingraph_rl.spaces import (
  BoolBox,
  BoxSpace,
  Dict,
  FloatBox,
  IntBox,
  TextBox,
  describe_value,
)

SETTINGS = hypothesis.settings(
  max_examples=50,
  deadline=None,
  suppress_health_check=[hypothesis.HealthCheck.too_slow],
)

FLOAT_DTYPES = [np.float16, np.float32, np.float64]
INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8]

# --- strategies ---------------------------------------------------------------

shapes = st.lists(st.integers(1, 4), max_size=3).map(tuple)
finite = st.floats(-100, 100, allow_nan=False, allow_infinity=False)


@st.composite
def rank_flags(draw):
  return dict(
    add_batch_rank=draw(st.booleans()),
    add_time_rank=draw(st.booleans()),
    time_major=draw(st.booleans()),
  )


@st.composite
def float_boxes_with_bounds(draw, ranks=None):
  """(FloatBox, low, high) with the bounds as given to the constructor."""
  shape = draw(shapes)
  ranks = draw(rank_flags()) if ranks is None else ranks
  dtype = draw(st.sampled_from(FLOAT_DTYPES))
  kind = draw(st.sampled_from(["none", "low", "high", "both", "array"]))
  low = high = None
  if kind in ("low", "both"):
    low = draw(finite)
  if kind == "high":
    high = draw(finite)
  if kind == "both":
    high = low + draw(st.floats(1, 50))  # Leaves room for float16 rounding.
  if kind == "array":
    n = int(np.prod(shape))
    lows, highs = [], []
    for _ in range(n):
      a, b = sorted(draw(st.tuples(finite, finite)))
      lo_inf, hi_inf = draw(st.booleans()), draw(st.booleans())
      lows.append(-np.inf if lo_inf else a)
      highs.append(np.inf if hi_inf else b + 1.0)
    low = np.reshape(np.array(lows), shape)
    high = np.reshape(np.array(highs), shape)
  return FloatBox(shape, low=low, high=high, dtype=dtype, **ranks), low, high


@st.composite
def int_boxes_with_bounds(draw, ranks=None):
  """(IntBox, low, high); high is exclusive, `low=None` means 0 if high is
  given."""
  shape = draw(shapes)
  ranks = draw(rank_flags()) if ranks is None else ranks
  dtype = draw(st.sampled_from(INT_DTYPES))
  info = np.iinfo(dtype)
  lo_min, hi_max = max(int(info.min), -1000), min(int(info.max), 1000)
  kind = draw(st.sampled_from(["none", "high", "low", "both", "array"]))
  low = high = None
  if kind == "high":
    high = draw(st.integers(1, hi_max + 1))
  elif kind == "low":
    low = draw(st.integers(lo_min, hi_max))
  elif kind == "both":
    low = draw(st.integers(lo_min, hi_max))
    high = draw(st.integers(low + 1, hi_max + 1))
  elif kind == "array":
    n = int(np.prod(shape))
    lows = draw(st.lists(st.integers(lo_min, hi_max), min_size=n, max_size=n))
    highs = [draw(st.integers(lo + 1, hi_max + 1)) for lo in lows]
    low = np.reshape(np.array(lows, np.int64), shape)
    high = np.reshape(np.array(highs, np.int64), shape)
  space = IntBox(high=high, shape=shape, low=low, dtype=dtype, **ranks)
  if low is None and high is not None:
    low = 0
  return space, low, high


@st.composite
def bool_boxes_with_bounds(draw, ranks=None):
  ranks = draw(rank_flags()) if ranks is None else ranks
  return BoolBox(draw(shapes), **ranks), None, None


@st.composite
def text_boxes_with_bounds(draw, ranks=None):
  ranks = draw(rank_flags()) if ranks is None else ranks
  return TextBox(draw(shapes), **ranks), None, None


def boxes_with_bounds(ranks=None, text=True):
  options = [
    float_boxes_with_bounds(ranks),
    int_boxes_with_bounds(ranks),
    bool_boxes_with_bounds(ranks),
  ]
  if text:
    options.append(text_boxes_with_bounds(ranks))
  return st.one_of(options)


boxes = boxes_with_bounds().map(lambda t: t[0])


@st.composite
def box_and_size(draw, spaces=boxes):
  """A space and a `size` argument that fits its leading ranks."""
  space = draw(spaces)
  return space, draw(sizes_for(space))


def sizes_for(space):
  n = space.num_leading_ranks
  if n == 0:
    return st.none()
  options = [st.none(), st.tuples(*[st.integers(1, 3)] * n)]
  if n == 1:
    options.append(st.integers(1, 3))
  return st.one_of(options)


def expected_leading(space, size):
  n = space.num_leading_ranks
  if size is None:
    return (1,) * n
  return (size,) if isinstance(size, int) else tuple(size)


def zero_in_bounds(space, low, high):
  """Independent statement of the bounds semantics for a value of 0."""
  if isinstance(space, IntBox):
    return (low is None or bool(np.all(np.asarray(low) <= 0))) and (
      high is None or bool(np.all(np.asarray(high) > 0))
    )
  if isinstance(space, FloatBox):
    return (low is None or bool(np.all(np.asarray(low) <= 0))) and (
      high is None or bool(np.all(np.asarray(high) >= 0))
    )
  return True


def other_dtype(dtype):
  dtype = np.dtype(dtype)
  if dtype.kind == "O":
    return np.dtype(np.int32)
  return np.dtype(np.float64 if dtype != np.float64 else np.float32)


def change_fixed_dim(value, axis):
  """`value` with one more entry along `axis`."""
  return np.concatenate([value, np.take(value, [0], axis=axis)], axis=axis)


def assert_space_error(space, value, *fragments):
  with pytest.raises(SpaceError) as info:
    space.check(value)
  for f in fragments:
    assert f in str(info.value), (f, str(info.value))
  assert not space.contains(value)
  return info.value


# --- properties ---------------------------------------------------------------


@SETTINGS
@hypothesis.given(box_and_size(), st.integers(0, 2**32 - 1))
def test_sample_is_contained_and_has_the_full_shape(space_size, seed):
  space, size = space_size
  value = space.sample(size, seed=seed)
  assert isinstance(value, np.ndarray)
  assert value.shape == expected_leading(space, size) + space.shape
  assert value.shape == space.full_shape(
    size if size is not None else (1,) * space.num_leading_ranks
  )
  assert value.dtype == space.dtype
  space.check(value)
  assert space.contains(value)
  # Same seed, same value; a Generator is accepted as seed too.
  again = space.sample(size, seed=seed)
  np.testing.assert_array_equal(value, again)
  gen_value = space.sample(size, seed=np.random.default_rng(seed))
  assert space.contains(gen_value)


@SETTINGS
@hypothesis.given(boxes_with_bounds(), st.data())
def test_zeros_contained_iff_zero_is_within_bounds(space_bounds, data):
  space, low, high = space_bounds
  size = data.draw(sizes_for(space))
  zeros = space.zeros(size)
  assert zeros.shape == expected_leading(space, size) + space.shape
  assert zeros.dtype == space.dtype
  space.check(zeros)
  assert space.contains(zeros) == zero_in_bounds(space, low, high)
  if isinstance(space, TextBox):
    assert all(z == "" for z in zeros.flat)
  else:
    assert not np.any(zeros)


@SETTINGS
@hypothesis.given(boxes_with_bounds(text=False), st.integers(0, 2**32 - 1))
def test_values_outside_the_bounds_are_not_contained(space_bounds, seed):
  space, low, high = space_bounds
  hypothesis.assume(low is not None or high is not None)
  value = space.sample(seed=seed)
  item_idx = (
    np.unravel_index(seed % max(int(np.prod(space.shape)), 1), space.shape)
    if space.shape
    else ()
  )
  lo = (
    np.broadcast_to(np.asarray(low, np.float64), space.shape)[item_idx]
    if low is not None
    else -np.inf
  )
  hi = (
    np.broadcast_to(np.asarray(high, np.float64), space.shape)[item_idx]
    if high is not None
    else np.inf
  )
  idx = (0,) * space.num_leading_ranks + tuple(item_idx)
  bad = value.copy()
  if isinstance(space, IntBox):
    # high is exclusive: the value `high` itself is already outside.
    if np.isfinite(hi) and hi <= np.iinfo(space.dtype).max:
      bad[idx] = int(hi)
    elif np.isfinite(lo) and lo > np.iinfo(space.dtype).min:
      bad[idx] = int(lo) - 1
    else:
      return
    assert not space.contains(bad)
    inside = value.copy()
    inside[idx] = int(lo) if np.isfinite(lo) else int(hi) - 1
    assert space.contains(inside)
  else:
    # Inclusive bounds: the next representable value past a bound is out.
    if np.isfinite(hi):
      bad[idx] = np.nextafter(
        np.asarray(hi, space.dtype), np.inf, dtype=space.dtype
      )
      if bad[idx] <= hi:  # hi not representable: step once more.
        bad[idx] = np.nextafter(bad[idx], np.inf, dtype=space.dtype)
    elif np.isfinite(lo):
      bad[idx] = np.nextafter(
        np.asarray(lo, space.dtype), -np.inf, dtype=space.dtype
      )
      if bad[idx] >= lo:
        bad[idx] = np.nextafter(bad[idx], -np.inf, dtype=space.dtype)
    else:
      return
    assert not space.contains(bad)


@SETTINGS
@hypothesis.given(box_and_size(), st.integers(0, 2**32 - 1))
def test_flatten_value_round_trips(space_size, seed):
  space, size = space_size
  value = space.sample(size, seed=seed)
  leaves = space.flatten_value(value)
  assert len(leaves) == 1 and leaves[0] is value
  back = space.unflatten_value(leaves)
  tree.assert_same_structure(back, value)
  np.testing.assert_array_equal(back, value)
  assert space.flatten() == [((), space)]
  assert space.structure() is space
  assert [p for p, _ in tree.flatten_with_path(space.structure())] == [()]
  with pytest.raises(SpaceError, match="expected 1 leaf"):
    space.unflatten_value([value, value])


@SETTINGS
@hypothesis.given(box_and_size(), st.integers(0, 2**32 - 1))
def test_tensor_spec_matches_sampled_value(space_size, seed):
  space, size = space_size
  value = space.sample(size, seed=seed)
  spec = tensor_spec(space, name="x")
  assert isinstance(spec, tf.TensorSpec)
  assert spec.name == "x"
  n = space.num_leading_ranks
  assert spec.shape.as_list() == [None] * n + list(space.shape)
  expected_dtype = (
    tf.string if isinstance(space, TextBox) else tf.as_dtype(space.dtype)
  )
  assert spec.dtype == expected_dtype == tf_dtype(space)
  assert spec.is_compatible_with(tf.convert_to_tensor(value))


@SETTINGS
@hypothesis.given(boxes, rank_flags())
def test_with_ranks_round_trip_is_equal_and_hash_equal(space, flags):
  other = space.with_ranks(
    flags["add_batch_rank"], flags["add_time_rank"], flags["time_major"]
  )
  assert type(other) is type(space)
  assert other.has_batch_rank == flags["add_batch_rank"]
  assert other.has_time_rank == flags["add_time_rank"]
  assert other.time_major == (flags["time_major"] and flags["add_time_rank"])
  assert (other.shape, other.dtype) == (space.shape, space.dtype)
  back = other.with_ranks(
    space.has_batch_rank, space.has_time_rank, space.time_major
  )
  assert back == space and not back != space
  assert hash(back) == hash(space)
  assert len({space, back}) == 1
  # Same flags: equal; different flags: not equal.
  same_flags = (
    other.has_batch_rank,
    other.has_time_rank,
    other.time_major,
  ) == (space.has_batch_rank, space.has_time_rank, space.time_major)
  assert (other == space) == same_flags
  stripped = space.strip_ranks()
  assert stripped.num_leading_ranks == 0 and stripped.leading_rank_names() == ()
  assert stripped == space.with_ranks(False, False, False)
  assert stripped.with_batch_rank().has_batch_rank
  assert not stripped.with_batch_rank().has_time_rank
  tm = stripped.with_time_rank(time_major=True)
  assert tm.has_time_rank and tm.time_major and not tm.has_batch_rank
  assert space.with_ranks() == space


@SETTINGS
@hypothesis.given(box_and_size(), st.integers(0, 2**32 - 1), st.data())
def test_check_rejects_wrong_dtype_rank_and_shape(space_size, seed, data):
  space, size = space_size
  value = space.sample(size, seed=seed)
  n = space.num_leading_ranks

  retyped = (
    np.zeros(value.shape, other_dtype(space.dtype))
    if isinstance(space, TextBox)
    else value.astype(other_dtype(space.dtype))
  )
  assert_space_error(space, retyped, "dtype mismatch", str(space.dtype))
  assert_space_error(
    space,
    np.expand_dims(value, -1),
    "rank mismatch",
    f"expected rank {n + space.rank}",
    f"got rank {n + space.rank + 1}",
  )
  if value.ndim:
    assert_space_error(
      space, value[0], "rank mismatch", f"got rank {value.ndim - 1}"
    )
  if space.rank:
    axis = n + data.draw(st.integers(0, space.rank - 1))
    assert_space_error(
      space,
      change_fixed_dim(value, axis),
      f"shape mismatch at dim {axis}",
      f"expected {space.shape[axis - n]}",
      f"got {space.shape[axis - n] + 1}",
    )
  # Leading dims are free: another leading size still passes.
  if n:
    bigger = change_fixed_dim(value, 0)
    space.check(bigger)
    assert space.contains(bigger)


# --- hand-computed cases -----------------------------------------------------


def test_int_box_high_is_exclusive():
  space = IntBox(4)
  assert space.low == 0 and space.high == 4
  assert space.num_categories == 4
  for v in range(4):
    assert space.contains(np.int32(v))
    assert space.contains(np.array(v, np.int32))
    assert space.contains(v)
  assert not space.contains(np.int32(4))
  assert not space.contains(np.int32(-1))
  values = space.sample(size=2000, seed=0)  # No leading rank: free dims.
  assert values.shape == (2000,)
  np.testing.assert_array_equal(np.unique(values), [0, 1, 2, 3])


def test_int_box_low_and_high():
  space = IntBox(high=10, low=5, shape=(2,))
  assert space.num_categories == 5
  assert space.contains(np.array([5, 9], np.int32))
  assert not space.contains(np.array([4, 9], np.int32))
  assert not space.contains(np.array([5, 10], np.int32))
  per_element = IntBox(high=[3, 5], shape=(2,))
  assert per_element.num_categories is None
  assert per_element.contains(np.array([2, 4], np.int32))
  assert not per_element.contains(np.array([3, 4], np.int32))
  assert IntBox().num_categories is None
  assert IntBox().low is None and IntBox().high is None


def test_int_box_low_only_samples_above_low():
  for dtype, low in [
    (np.int64, 200),
    (np.int8, 127),
    (np.uint8, 250),
    (np.int32, -5),
  ]:
    space = IntBox(low=low, dtype=dtype)
    assert space.high is None
    values = space.sample(size=50, seed=1)
    assert values.dtype == dtype
    assert np.all(values >= low), (dtype, low, values)
    assert space.contains(np.array(low + 7 if low < 100 else low, dtype))
    assert not space.contains(np.array(low - 1, dtype))


def test_unbounded_int_box_samples_small_values():
  values = IntBox(dtype=np.int64).sample(size=1000, seed=3)
  assert values.min() >= -100 and values.max() < 100
  values = IntBox(dtype=np.uint8).sample(size=1000, seed=3)
  assert values.min() >= 0 and values.max() < 100


def test_float_box_bounds_are_inclusive():
  space = FloatBox(low=0.0, high=1.0)
  assert space.contains(np.float32(0.0))
  assert space.contains(np.float32(1.0))
  assert space.contains(np.float32(0.5))
  assert not space.contains(np.nextafter(np.float32(1), np.float32(2)))
  assert not space.contains(np.nextafter(np.float32(0), np.float32(-1)))


def test_float_box_partly_infinite_bounds():
  space = FloatBox(
    shape=(3,), low=[0.0, -np.inf, -np.inf], high=[1.0, np.inf, 0.0]
  )
  assert space.contains(np.array([0.5, -1e30, -1e30], np.float32))
  assert not space.contains(np.array([0.5, 0.0, 1.0], np.float32))
  assert not space.contains(np.array([1.5, 0.0, 0.0], np.float32))
  values = space.sample(size=500, seed=0)
  assert values.shape == (500, 3)
  assert np.all(np.isfinite(values))
  assert np.all(values[:, 0] >= 0) and np.all(values[:, 0] <= 1)
  assert np.all(values[:, 2] <= 0)
  assert values[:, 1].min() < 0 < values[:, 1].max()  # Normal: both signs.


def test_float_box_samples_respect_bounds_not_representable_in_dtype():
  # Bounds the dtype cannot hold: rounding a sample to the dtype must not
  # cross them. Each interval holds exactly one value `v` of the dtype, and
  # about 10% of it lies nearer to the value below `low`.
  cases = []
  for dtype in [np.float16, np.float32]:
    v = np.asarray(0.7, dtype)
    ulp = float(np.spacing(v))
    cases.append(
      (
        FloatBox(
          low=float(v) - 0.6 * ulp, high=float(v) + 0.3 * ulp, dtype=dtype
        ),
        v,
      )
    )
    cases.append(
      (
        FloatBox(
          low=-float(v) - 0.3 * ulp, high=-float(v) + 0.6 * ulp, dtype=dtype
        ),
        -v,
      )
    )
  for space, v in cases:
    values = space.sample(size=1000, seed=0)  # Free leading dim.
    assert values.dtype == space.dtype
    np.testing.assert_array_equal(values, np.full(1000, v, space.dtype))
    assert space.with_batch_rank().contains(values), space
  # One-sided: 1000.2 lies below the midpoint of the float16s 1000.0 and
  # 1000.5, so 1 in 10 exponential tails would round out of the box.
  for space in [
    FloatBox(low=1000.2, dtype=np.float16),
    FloatBox(high=-1000.2, dtype=np.float16),
  ]:
    values = space.sample(size=1000, seed=0)
    assert space.with_batch_rank().contains(values), space
    assert np.all(np.abs(values) >= 1000.5)


def test_float_box_one_sided_bounds_sample_on_the_right_side():
  low_only = FloatBox(shape=(2,), low=3.0).sample(size=200, seed=0)
  assert np.all(low_only >= 3.0) and low_only.max() > 3.5
  high_only = FloatBox(high=-3.0).sample(size=200, seed=0)
  assert np.all(high_only <= -3.0) and high_only.min() < -3.5


def test_uniform_array_bounds_become_scalars_and_compare_equal():
  a = FloatBox(shape=(3,), low=np.zeros(3), high=np.ones(3))
  b = FloatBox(shape=(3,), low=0.0, high=1.0)
  assert np.ndim(a.low) == 0 and float(a.low) == 0.0
  assert a == b and hash(a) == hash(b)
  c = FloatBox(shape=(3,), low=[0.0, 1.0, 0.0], high=2.0)
  assert c.low.shape == (3,)
  with pytest.raises(ValueError):  # Stored bounds are read-only.
    c.low[0] = 5.0
  assert c != b
  d = FloatBox(shape=(2, 3), low=[0.0, 1.0, 2.0])  # Broadcast to the shape.
  assert d.low.shape == (2, 3)
  assert d.contains(np.array([[0, 1, 2], [5, 5, 5]], np.float32))
  assert not d.contains(np.array([[0, 1, 2], [5, 0.5, 5]], np.float32))


def test_equality_distinguishes_type_shape_dtype_bounds_and_ranks():
  base = FloatBox(shape=(2,), low=0.0)
  assert base == FloatBox(shape=(2,), low=0.0)
  assert base == FloatBox(shape=2, low=0.0)  # A scalar shape is a 1-tuple.
  different = [
    FloatBox(shape=(3,), low=0.0),
    FloatBox(shape=(2,), low=1.0),
    FloatBox(shape=(2,)),
    FloatBox(shape=(2,), low=0.0, high=1.0),
    FloatBox(shape=(2,), low=0.0, dtype=np.float64),
    FloatBox(shape=(2,), low=0.0, add_batch_rank=True),
    FloatBox(shape=(2,), low=0.0, add_time_rank=True),
    IntBox(shape=(2,), low=0),
    BoolBox(shape=(2,)),
    "FloatBox",
  ]
  for other in different:
    assert base != other and not base == other, other
  t = FloatBox(add_time_rank=True, time_major=True)
  assert t != FloatBox(add_time_rank=True)
  # time_major without a time rank means nothing.
  assert FloatBox(time_major=True) == FloatBox()
  assert not FloatBox(time_major=True).time_major
  assert FloatBox(add_batch_rank=True, time_major=True) == FloatBox(
    add_batch_rank=True
  )


def test_leading_dims_time_major_and_batch_major():
  tm = FloatBox(
    shape=(3,), add_batch_rank=True, add_time_rank=True, time_major=True
  )
  bm = FloatBox(shape=(3,), add_batch_rank=True, add_time_rank=True)
  assert tm.leading_rank_names() == ("time", "batch")
  assert bm.leading_rank_names() == ("batch", "time")
  assert FloatBox(add_batch_rank=True).leading_rank_names() == ("batch",)
  assert FloatBox(add_time_rank=True).leading_rank_names() == ("time",)
  assert FloatBox().leading_rank_names() == ()
  assert tm.num_leading_ranks == bm.num_leading_ranks == 2
  # `size` is in leading-dim order.
  assert tm.sample(size=(5, 2), seed=0).shape == (5, 2, 3)
  assert tm.zeros(size=(5, 2)).shape == (5, 2, 3)
  assert tm.full_shape() == (None, None, 3)
  assert tm.full_shape((5, 2)) == (5, 2, 3)
  assert tm.zeros().shape == (1, 1, 3)
  tm.check(np.zeros((7, 4, 3), np.float32))
  err = assert_space_error(tm, np.zeros((7, 3), np.float32), "rank mismatch")
  assert "[time, batch, 3]" in str(err)
  err = assert_space_error(bm, np.zeros((7, 3), np.float32), "rank mismatch")
  assert "[batch, time, 3]" in str(err)
  assert "time+batch" in repr(tm) and "batch+time" in repr(bm)
  with pytest.raises(SpaceError, match="does not match the leading ranks"):
    tm.sample(size=5)
  with pytest.raises(SpaceError, match="time"):
    tm.zeros(size=(1, 2, 3))
  with pytest.raises(SpaceError, match=r"\(none\)"):
    FloatBox().full_shape(size=(2,))


def test_no_leading_ranks_size_adds_free_dims():
  space = IntBox(3, shape=(2,))
  assert space.sample(size=(4, 5), seed=0).shape == (4, 5, 2)
  assert space.zeros(size=4).shape == (4, 2)
  assert not space.contains(space.zeros(size=4))  # Rank no longer fits.


def test_python_values_accepted_per_kind():
  assert FloatBox().contains(1.5)
  assert FloatBox().contains(1)  # A python int is a fine float.
  assert FloatBox(shape=(2,)).contains([1.0, 2.5])
  assert_space_error(FloatBox(), True, "dtype mismatch")
  assert_space_error(FloatBox(shape=(2,)), [1.0], "shape mismatch at dim 0")
  assert_space_error(FloatBox(shape=(2,)), [[1.0, 2.0]], "rank mismatch")
  assert_space_error(FloatBox(), "1.0", "dtype mismatch")

  assert IntBox(5).contains(3)
  assert IntBox(5, shape=(2,)).contains([1, 4])
  assert not IntBox(5).contains(5)  # Passes check, fails the bounds.
  IntBox(5).check(5)
  assert_space_error(IntBox(5), 3.0, "dtype mismatch", "int32", "float64")
  assert_space_error(IntBox(5, shape=(2,)), [1, 2.5], "dtype mismatch")
  assert_space_error(IntBox(5), True, "dtype mismatch")
  assert_space_error(IntBox(5), [1, 2], "rank mismatch")

  assert BoolBox().contains(True)
  assert BoolBox(shape=(2,)).contains([True, False])
  assert_space_error(BoolBox(), 1, "dtype mismatch")

  assert TextBox().contains("abc")
  assert TextBox().contains(b"abc")
  assert TextBox(shape=(2,)).contains(["a", "bc"])
  assert_space_error(TextBox(), 3, "dtype mismatch")


def test_numpy_values_are_checked_by_exact_dtype():
  space = FloatBox()
  space.check(np.float32(1.0))
  space.check(np.array(1.0, np.float32))
  assert_space_error(space, np.array(1.0, np.float64), "dtype mismatch")
  assert_space_error(space, np.float64(1.0), "dtype mismatch", "float64")
  assert_space_error(space, np.float16(1.0), "dtype mismatch")
  assert_space_error(IntBox(3), np.int64(1), "dtype mismatch", "int64")
  IntBox(3, dtype=np.int64).check(np.int64(1))
  assert_space_error(BoolBox(), np.array(1, np.int8), "dtype mismatch")
  BoolBox().check(np.bool_(True))
  TextBox().check(np.array("x"))
  TextBox().check(np.array(["x"], dtype=object)[0:1].reshape(()))


def test_non_array_values_are_rejected():
  for value in [None, {"a": 1.0}, object(), [[1.0], [1.0, 2.0]]]:
    err = assert_space_error(
      FloatBox(shape=(2,)), value, "not an array-like value"
    )
    assert err.expected == repr(FloatBox(shape=(2,)))


def test_tf_tensors_are_checked_by_dtype_and_shape():
  space = FloatBox(shape=(3,), add_batch_rank=True)
  assert space.contains(tf.zeros((5, 3)))
  assert space.contains(tf.Variable(tf.zeros((2, 3))))
  assert_space_error(space, tf.zeros((5, 3), tf.float64), "dtype mismatch")
  assert_space_error(space, tf.zeros((5, 4)), "shape mismatch at dim 1")
  assert_space_error(space, tf.zeros((3,)), "rank mismatch")


def test_tf_tensor_int_and_bounds():
  space = IntBox(4, add_batch_rank=True)
  assert space.contains(tf.constant([0, 3], tf.int32))
  assert not space.contains(tf.constant([0, 4], tf.int32))
  assert_space_error(space, tf.constant([0, 3], tf.int64), "dtype mismatch")
  assert TextBox(add_batch_rank=True).contains(tf.constant(["a", "b"]))
  assert BoolBox().contains(tf.constant(True))


def test_symbolic_tf_tensors_with_unknown_dims():
  space = FloatBox(shape=(3,), add_batch_rank=True)
  results = []

  @tf.function(
    input_signature=[tf.TensorSpec([None, 3], tf.float32)], autograph=False
  )
  def ok(x):
    space.check(x)
    results.append("ok")
    return x

  ok.get_concrete_function()
  assert results == ["ok"]

  @tf.function(
    input_signature=[tf.TensorSpec([None, 4], tf.float32)], autograph=False
  )
  def bad(x):
    space.check(x)
    return x

  with pytest.raises(SpaceError, match="shape mismatch at dim 1"):
    bad.get_concrete_function()

  @tf.function(
    input_signature=[tf.TensorSpec([None, None], tf.float32)], autograph=False
  )
  def unknown_item_dim(x):
    space.check(x)  # Unknown dims cannot be told wrong.
    results.append("unknown")
    return x

  unknown_item_dim.get_concrete_function()
  assert results == ["ok", "unknown"]


def test_torch_tensors_are_checked_by_dtype_and_shape():
  space = FloatBox(shape=(3,), add_batch_rank=True, low=-1.0, high=1.0)
  assert space.contains(torch.zeros(5, 3))
  assert not space.contains(torch.full((5, 3), 2.0))
  assert_space_error(
    space, torch.zeros(5, 3, dtype=torch.float64), "dtype mismatch"
  )
  assert_space_error(space, torch.zeros(5, 4), "shape mismatch at dim 1")
  assert_space_error(space, torch.zeros(3), "rank mismatch")
  ints = IntBox(4, shape=(2,), dtype=np.int64)
  assert ints.contains(torch.tensor([0, 3]))
  assert not ints.contains(torch.tensor([0, 4]))
  assert_space_error(
    ints, torch.tensor([0, 3], dtype=torch.int32), "dtype mismatch"
  )
  assert BoolBox().contains(torch.tensor(True))


def test_framework_dtypes():
  assert tf_dtype(FloatBox()) == tf.float32
  assert torch_dtype(FloatBox(dtype=np.float64)) == torch.float64
  assert tf_dtype(IntBox(3)) == tf.int32
  assert torch_dtype(IntBox(3)) == torch.int32
  assert tf_dtype(IntBox(3, dtype=np.uint8)) == tf.uint8
  assert tf_dtype(BoolBox()) == tf.bool and torch_dtype(BoolBox()) == torch.bool
  assert tf_dtype(TextBox()) == tf.string
  assert numpy_dtype(torch.uint8) == np.uint8
  assert numpy_dtype(torch_dtype(np.int16)) == np.int16
  assert TextBox().dtype == np.dtype(object)


def test_constructor_rejects_bad_dtype_and_shape():
  with pytest.raises(SpaceError, match="FloatBox cannot have dtype int32"):
    FloatBox(dtype=np.int32)
  with pytest.raises(SpaceError, match="IntBox cannot have dtype float32"):
    IntBox(3, dtype=np.float32)
  with pytest.raises(SpaceError, match="BoolBox cannot have dtype"):
    BoolBox(dtype=np.int8)
  with pytest.raises(SpaceError, match="negative dimension"):
    FloatBox(shape=(2, -1))
  assert issubclass(SpaceError, ValueError)
  assert isinstance(FloatBox(), BoxSpace)


def test_bool_and_text_boxes():
  b = BoolBox(shape=(2,), add_batch_rank=True)
  values = b.sample(size=300, seed=0)
  assert values.dtype == np.bool_ and values.any() and not values.all()
  assert b.low is None and b.high is None
  assert b.with_ranks(time=True).low is None
  t = TextBox(shape=(2,), add_batch_rank=True)
  s = t.sample(size=3, seed=0)
  assert s.dtype == object and s.shape == (3, 2)
  assert all(isinstance(x, str) and 1 <= len(x) <= 7 for x in s.flat)
  assert t.contains(s)
  assert list(t.zeros(2).flat) == [""] * 4


def test_repr_and_describe_value():
  assert (
    repr(FloatBox(shape=(2,), low=0.0, high=1.0))
    == "FloatBox(shape=(2,), dtype=float32, low=0.0, high=1.0)"
  )
  assert (
    repr(IntBox(3, add_batch_rank=True))
    == "IntBox(shape=(), dtype=int32, low=0, high=3, batch)"
  )
  assert "low=array(2,)" in repr(FloatBox(shape=(2,), low=[0.0, 1.0]))
  assert (
    describe_value(np.zeros((2, 3), np.float32))
    == "ndarray with shape (2, 3) and dtype float32"
  )
  assert describe_value(None) == "NoneType None"


def test_error_carries_expected_and_received():
  space = FloatBox(shape=(2,))
  err = assert_space_error(space, np.zeros(3, np.float32), "shape mismatch")
  assert err.expected == repr(space)
  assert err.received == "ndarray with shape (3,) and dtype float32"
  assert "expected: FloatBox" in str(err) and "received: ndarray" in str(err)


def test_empty_ranges_are_refused():
  with pytest.raises(SpaceError, match="empty range"):
    IntBox(high=-5)  # low defaults to 0: nothing in [0, -5).
  with pytest.raises(SpaceError, match="empty range"):
    IntBox(3, low=3)
  with pytest.raises(SpaceError, match="empty range"):
    FloatBox(low=1.0, high=0.5)
  assert FloatBox(low=1.0, high=1.0).contains(np.float32(1.0))
  assert IntBox(4, low=3).contains(np.int32(3))


# --- issue 12: Python numbers and value checks -----------------------------


@pytest.mark.parametrize(
  "space,value,reason",
  [
    (IntBox(), 2**32 + 1, "out of the int32 range"),
    (IntBox(add_batch_rank=True), [1, 2**40], "out of the int32 range"),
    (IntBox(add_batch_rank=True), [1, 2**70], "out of the int32 range"),
    (IntBox(dtype=np.int64), 2**63, "out of the int64 range"),
    (IntBox(dtype=np.int64, add_batch_rank=True), [0, 2**63], "int64 range"),
    (IntBox(dtype=np.uint8), -1, "out of the uint8 range"),
    (FloatBox(), 1e39, "out of the float32 range"),
    (FloatBox(dtype=np.float64), 10**400, "out of the float64 range"),
  ],
)
def test_python_numbers_are_checked_against_the_dtype_range(
  space, value, reason
):
  with pytest.raises(SpaceError, match=reason):
    space.check(value)


def test_python_numbers_within_range_pass():
  IntBox(dtype=np.int64).check(2**63 - 1)
  IntBox().check(-(2**31))
  FloatBox().check(3)
  FloatBox().check(float("inf"))  # Finiteness is a value check.


def test_value_checks():
  box = IntBox(4, add_batch_rank=True)
  assert box.has_value_checks
  assert box.value_problem(np.array([0, 3], np.int32)) is None
  assert "out of range" in box.value_problem(np.array([0, 4], np.int32))
  assert "out of range" in box.value_problem(np.array([-1], np.int32))
  # Bounds that cover the dtype: nothing to check.
  assert not IntBox(256, dtype=np.uint8).has_value_checks
  assert not IntBox().has_value_checks
  floats = FloatBox(add_batch_rank=True)
  assert floats.has_value_checks and not BoolBox().has_value_checks
  assert "NaN" in floats.value_problem(np.array([0, np.nan], np.float32))
  assert "inf" in floats.value_problem(np.array([-np.inf], np.float32))
  with pytest.raises(SpaceError, match=r"at \['b'\]: values out of range"):
    Dict(a=FloatBox(), b=IntBox(2), add_batch_rank=True).check_values(
      {"a": np.zeros(2, np.float32), "b": np.array([0, 2], np.int32)}
    )


@pytest.mark.parametrize(
  "bounds",
  [
    dict(high=float("inf")),
    dict(high=float("-inf")),
    dict(low=float("nan"), high=3),
    dict(high=2.5),
    dict(high=2**70),
    dict(high=[1, float("inf")], shape=(2,)),
    dict(high="4"),
  ],
  ids=["inf", "-inf", "nan_low", "fraction", "beyond_int64", "array", "str"],
)
def test_int_box_refuses_non_integer_bounds(bounds):
  """A SpaceError naming the bound, not NumPy's OverflowError (inf) or a
  silent rounding (2.5 -> 2)."""
  with pytest.raises(SpaceError, match="IntBox bounds must be integers"):
    IntBox(**bounds)


def test_int_box_takes_integral_floats_and_numpy_ints():
  assert IntBox(high=3.0).high == 3
  assert IntBox(high=np.int64(5), low=np.int8(1)).num_categories == 4
