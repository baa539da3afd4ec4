"""Tests of the container spaces (`ingraph_rl/spaces/containers.py`)."""

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest
import tensorflow as tf
import torch
import tree

from ingraph_rl.errors import SpaceError
from ingraph_rl.executors.tf_spaces import tensor_spec
from ingraph_rl.spaces import (
  BoolBox,
  ContainerSpace,
  Dict,
  FloatBox,
  IntBox,
  TextBox,
  Tuple,
)

SETTINGS = hypothesis.settings(
  max_examples=50,
  deadline=None,
  suppress_health_check=[
    hypothesis.HealthCheck.too_slow,
    hypothesis.HealthCheck.filter_too_much,
  ],
)

# --- strategies ---------------------------------------------------------------

shapes = st.lists(st.integers(1, 4), max_size=3).map(tuple)
finite = st.floats(-100, 100, allow_nan=False, allow_infinity=False)


@st.composite
def float_boxes(draw):
  shape = draw(shapes)
  dtype = draw(st.sampled_from([np.float16, np.float32, np.float64]))
  low = draw(st.one_of(st.none(), finite))
  high = draw(st.one_of(st.none(), st.floats(1, 50)))
  if low is not None and high is not None:
    high = low + high
  return FloatBox(shape, low=low, high=high, dtype=dtype)


@st.composite
def int_boxes(draw):
  shape = draw(shapes)
  dtype = draw(st.sampled_from([np.int8, np.int32, np.int64, np.uint8]))
  info = np.iinfo(dtype)
  low = draw(st.one_of(st.none(), st.integers(max(int(info.min), -50), 50)))
  high = draw(st.one_of(st.none(), st.integers(max(low or 0, 0) + 1, 60)))
  if draw(st.booleans()) and shape and low is not None:  # Per-element bounds.
    n = int(np.prod(shape))
    lows = draw(st.lists(st.integers(low, low + 5), min_size=n, max_size=n))
    low = np.reshape(np.array(lows), shape)
    if high is not None:
      high = low + draw(st.integers(1, 5))
  return IntBox(high=high, shape=shape, low=low, dtype=dtype)


boxes = st.one_of(
  float_boxes(),
  int_boxes(),
  shapes.map(BoolBox),
  st.lists(st.integers(1, 2), max_size=1).map(lambda s: TextBox(tuple(s))),
)
keys = st.text(alphabet="abcxyz", min_size=1, max_size=3)


def containers_of(children):
  return st.one_of(
    st.dictionaries(keys, children, min_size=1, max_size=3).map(Dict),
    st.lists(children, min_size=1, max_size=3).map(Tuple),
  )


# Children carry no rank flags: the flags go on the top-level container.
depth1 = containers_of(boxes)
depth2 = containers_of(st.one_of(boxes, depth1))


@st.composite
def rank_flags(draw, batch=None):
  return dict(
    add_batch_rank=draw(st.booleans()) if batch is None else batch,
    add_time_rank=draw(st.booleans()),
    time_major=draw(st.booleans()),
  )


@st.composite
def nested_spaces(draw, batch=None):
  """A Dict or Tuple of depth 1 or 2 with random rank flags on the top."""
  inner = draw(st.one_of(depth1, depth2))
  flags = draw(rank_flags(batch))
  if isinstance(inner, Dict):
    return Dict(dict(inner.items()), **flags)
  return Tuple(*inner, **flags)


def sizes_for(space):
  n = space.num_leading_ranks
  if n == 0:
    return st.none()
  options = [st.none(), st.tuples(*[st.integers(1, 3)] * n)]
  if n == 1:
    options.append(st.integers(1, 3))
  return st.one_of(options)


@st.composite
def space_and_size(draw, batch=None):
  space = draw(nested_spaces(batch))
  return space, draw(sizes_for(space))


seeds = st.integers(0, 2**32 - 1)

# --- helpers ------------------------------------------------------------------


def expected_leading(space, size):
  if size is None:
    return (1,) * space.num_leading_ranks
  return (size,) if isinstance(size, int) else tuple(size)


def zero_in_bounds(box):
  low = None if box.low is None else np.asarray(box.low)
  high = None if box.high is None else np.asarray(box.high)
  if isinstance(box, IntBox):
    return (low is None or bool(np.all(low <= 0))) and (
      high is None or bool(np.all(high > 0))
    )
  if isinstance(box, FloatBox):
    return (low is None or bool(np.all(low <= 0))) and (
      high is None or bool(np.all(high >= 0))
    )
  return True


def assert_values_equal(a, b):
  tree.assert_same_structure(a, b)
  for x, y in zip(tree.flatten(a), tree.flatten(b)):
    assert type(x) is type(y)
    np.testing.assert_array_equal(x, y)
    assert np.asarray(x).dtype == np.asarray(y).dtype


def get_path(value, path):
  for k in path:
    value = value[k]
  return value


def replace_leaf(space, value, index, new_leaf):
  leaves = space.flatten_value(value)
  leaves[index] = new_leaf
  return space.unflatten_value(leaves)


def container_nodes(space, path=()):
  """(path, container space) of every container in `space`, top first."""
  out = [(path, space)]
  for k, child in (
    space.items() if isinstance(space, Dict) else enumerate(space)
  ):
    if isinstance(child, ContainerSpace):
      out.extend(container_nodes(child, path + (k,)))
  return out


def with_node_replaced(value, path, fn):
  """A copy of the nest `value` with the node at `path` replaced by
  `fn(node)`."""
  if not path:
    return fn(value)
  head, rest = path[0], path[1:]
  if isinstance(value, dict):
    out = dict(value)
    out[head] = with_node_replaced(value[head], rest, fn)
    return out
  out = list(value)
  out[head] = with_node_replaced(value[head], rest, fn)
  return tuple(out)


def assert_space_error(space, value, *fragments):
  with pytest.raises(SpaceError) as info:
    space.check(value)
  for f in fragments:
    assert f in str(info.value), (f, str(info.value))
  assert not space.contains(value)
  return info.value


# --- properties ---------------------------------------------------------------


@SETTINGS
@hypothesis.given(space_and_size(), seeds)
def test_sample_is_contained_and_has_the_structure(space_size, seed):
  space, size = space_size
  value = space.sample(size, seed=seed)
  tree.assert_same_structure(value, space.structure())
  for (path, box), leaf in zip(space.flatten(), tree.flatten(value)):
    assert isinstance(leaf, np.ndarray), path
    assert leaf.shape == expected_leading(space, size) + box.shape, path
    assert leaf.dtype == box.dtype, path
  space.check(value)
  assert space.contains(value)
  assert_values_equal(space.sample(size, seed=seed), value)
  assert space.contains(space.sample(size, seed=np.random.default_rng(seed)))


@SETTINGS
@hypothesis.given(space_and_size())
def test_zeros_contained_iff_every_leaf_allows_zero(space_size):
  space, size = space_size
  zeros = space.zeros(size)
  tree.assert_same_structure(zeros, space.structure())
  space.check(zeros)
  for (_, box), leaf in zip(space.flatten(), tree.flatten(zeros)):
    assert leaf.shape == expected_leading(space, size) + box.shape
    assert leaf.dtype == box.dtype
  expected = all(zero_in_bounds(box) for _, box in space.flatten())
  assert space.contains(zeros) == expected


@SETTINGS
@hypothesis.given(space_and_size(), seeds)
def test_flatten_value_round_trips(space_size, seed):
  space, size = space_size
  value = space.sample(size, seed=seed)
  leaves = space.flatten_value(value)
  flat = space.flatten()
  assert len(leaves) == len(flat)
  for (_, box), leaf in zip(flat, leaves):
    assert box.contains(leaf)  # Leaves pair up with `flatten()`.
  back = space.unflatten_value(leaves)
  tree.assert_same_structure(back, value)
  assert_values_equal(back, value)
  assert space.contains(back)
  # Leaf order and paths are dm-tree's.
  expected = tree.flatten_with_path(space.structure())
  assert [p for p, _ in flat] == [p for p, _ in expected]
  assert all(a is b for (_, a), (_, b) in zip(flat, expected))
  for (path, box), leaf in zip(flat, leaves):
    assert get_path(value, path) is leaf
    assert get_path(space.structure(), path) is box


@SETTINGS
@hypothesis.given(space_and_size(), seeds)
def test_tensor_spec_matches_sampled_value(space_size, seed):
  space, size = space_size
  value = space.sample(size, seed=seed)
  spec = tensor_spec(space)
  tree.assert_same_structure(spec, value)
  n = space.num_leading_ranks
  for (path, box), s, leaf in zip(
    space.flatten(), tree.flatten(spec), tree.flatten(value)
  ):
    assert isinstance(s, tf.TensorSpec), path
    assert s.shape.as_list() == [None] * n + list(box.shape), path
    assert s.dtype == (
      tf.string if isinstance(box, TextBox) else tf.as_dtype(box.dtype)
    ), path
    assert s.is_compatible_with(tf.convert_to_tensor(leaf)), path
  # tf.nest agrees with dm-tree about the order.
  assert tf.nest.flatten(spec) == tree.flatten(spec)


@SETTINGS
@hypothesis.given(nested_spaces(), rank_flags())
def test_with_ranks_round_trip_is_equal_and_hash_equal(space, flags):
  b, t, m = (
    flags["add_batch_rank"],
    flags["add_time_rank"],
    flags["time_major"],
  )
  other = space.with_ranks(b, t, m)
  assert type(other) is type(space)
  assert (other.has_batch_rank, other.has_time_rank, other.time_major) == (
    b,
    t,
    m and t,
  )
  # The flags reach every leaf.
  for (path, leaf), (path0, leaf0) in zip(other.flatten(), space.flatten()):
    assert path == path0
    assert (leaf.has_batch_rank, leaf.has_time_rank, leaf.time_major) == (
      b,
      t,
      m and t,
    ), path
    assert leaf.strip_ranks() == leaf0.strip_ranks()
  back = other.with_ranks(
    space.has_batch_rank, space.has_time_rank, space.time_major
  )
  assert back == space and not back != space
  assert hash(back) == hash(space)
  assert len({back, space}) == 1
  same = (b, t, m and t) == (
    space.has_batch_rank,
    space.has_time_rank,
    space.time_major,
  )
  assert (other == space) == same
  stripped = space.strip_ranks()
  assert stripped.num_leading_ranks == 0
  assert all(leaf.num_leading_ranks == 0 for _, leaf in stripped.flatten())
  assert space.with_ranks() == space


@SETTINGS
@hypothesis.given(space_and_size(), seeds, st.data())
def test_check_rejects_a_bad_leaf(space_size, seed, data):
  space, size = space_size
  value = space.sample(size, seed=seed)
  flat = space.flatten()
  n = space.num_leading_ranks
  i = data.draw(st.integers(0, len(flat) - 1))
  path, box = flat[i]
  leaf = space.flatten_value(value)[i]
  where = "at " + "".join(f"[{k!r}]" for k in path)

  retyped = (
    np.zeros(leaf.shape, np.int32)
    if isinstance(box, TextBox)
    else leaf.astype(np.float64 if box.dtype != np.float64 else np.float32)
  )
  err = assert_space_error(
    space,
    replace_leaf(space, value, i, retyped),
    where,
    "dtype mismatch",
    str(box.dtype),
  )
  assert err.expected == repr(box)
  assert_space_error(
    space,
    replace_leaf(space, value, i, np.expand_dims(leaf, -1)),
    where,
    "rank mismatch",
  )
  if leaf.ndim:
    assert_space_error(
      space, replace_leaf(space, value, i, leaf[0]), where, "rank mismatch"
    )
  if box.rank:
    axis = n + data.draw(st.integers(0, box.rank - 1))
    longer = np.concatenate([leaf, np.take(leaf, [0], axis=axis)], axis=axis)
    assert_space_error(
      space,
      replace_leaf(space, value, i, longer),
      where,
      f"shape mismatch at dim {axis}",
    )


@SETTINGS
@hypothesis.given(space_and_size(), seeds, st.data())
def test_check_rejects_a_bad_structure(space_size, seed, data):
  space, size = space_size
  value = space.sample(size, seed=seed)
  path, node = data.draw(st.sampled_from(container_nodes(space)))
  where = "".join(f"[{k!r}]" for k in path) or "top level"
  if isinstance(node, Dict):
    key = data.draw(st.sampled_from(sorted(node.keys())))
    removed = with_node_replaced(
      value, path, lambda d: {k: v for k, v in d.items() if k != key}
    )
    assert_space_error(
      space, removed, "structure mismatch", where, f"missing keys [{key!r}]"
    )
    added = with_node_replaced(
      value, path, lambda d: dict(d, extra_key=np.zeros(1))
    )
    assert_space_error(
      space, added, "structure mismatch", where, "unexpected keys ['extra_key']"
    )
    as_list = with_node_replaced(value, path, lambda d: list(d.values()))
    assert_space_error(
      space, as_list, "structure mismatch", where, "expected a dict"
    )
  else:
    longer = with_node_replaced(value, path, lambda t: tuple(t) + (t[0],))
    assert_space_error(
      space,
      longer,
      "structure mismatch",
      where,
      f"expected a tuple of {len(node)} items",
      f"of {len(node) + 1} items",
    )
    shorter = with_node_replaced(value, path, lambda t: tuple(t)[:-1])
    assert_space_error(
      space,
      shorter,
      "structure mismatch",
      where,
      f"expected a tuple of {len(node)} items",
    )
    as_dict = with_node_replaced(
      value, path, lambda t: {str(j): v for j, v in enumerate(t)}
    )
    assert_space_error(space, as_dict, "structure mismatch", where)
  # A leaf where a container belongs.
  assert_space_error(
    space,
    with_node_replaced(value, path, lambda _: np.zeros(3)),
    "structure mismatch",
    where,
  )


@SETTINGS
@hypothesis.given(space_and_size(batch=True), seeds, st.data())
def test_leaves_must_agree_on_leading_dims(space_size, seed, data):
  space, size = space_size
  flat = space.flatten()
  hypothesis.assume(len(flat) >= 2)
  lead = expected_leading(space, size)
  value = space.sample(lead, seed=seed)
  i = data.draw(st.integers(0, len(flat) - 1))
  axis = data.draw(st.integers(0, space.num_leading_ranks - 1))
  other_lead = list(lead)
  other_lead[axis] += 1
  _, box = flat[i]
  bad = replace_leaf(space, value, i, box.sample(tuple(other_lead), seed))
  box.check(box.sample(tuple(other_lead), seed))  # The leaf alone is fine.
  err = assert_space_error(
    space,
    bad,
    "leaves disagree on the leading",
    "/".join(space.leading_rank_names()),
  )
  assert str(tuple(lead)) in str(err) and str(tuple(other_lead)) in str(err)
  # All leaves with the new leading dims agree again.
  space.check(space.sample(tuple(other_lead), seed))


# --- hand-computed cases -----------------------------------------------------


def test_batched_dict_leaves_disagreeing_on_batch_size():
  space = Dict(a=FloatBox(shape=(2,)), b=IntBox(3), add_batch_rank=True)
  space.check({"a": np.zeros((4, 2), np.float32), "b": np.zeros(4, np.int32)})
  with pytest.raises(
    SpaceError,
    match="leaves disagree on the leading batch"
    r" dims \(\['a'\]: \(4,\), \['b'\]: \(5,\)\)",
  ):
    space.check({"a": np.zeros((4, 2), np.float32), "b": np.zeros(5, np.int32)})
  assert not space.contains(
    {"a": np.zeros((4, 2), np.float32), "b": np.zeros(5, np.int32)}
  )


def test_time_major_containers_order_the_leading_dims():
  space = Dict(
    x=FloatBox(shape=(3,)),
    y=Tuple(IntBox(2), BoolBox()),
    add_batch_rank=True,
    add_time_rank=True,
    time_major=True,
  )
  assert space.leading_rank_names() == ("time", "batch")
  for _, leaf in space.flatten():
    assert leaf.leading_rank_names() == ("time", "batch")
  value = space.sample(size=(5, 2), seed=0)
  assert value["x"].shape == (5, 2, 3)
  assert value["y"][0].shape == (5, 2) and value["y"][1].shape == (5, 2)
  assert space.contains(value)
  assert space.zeros((5, 2))["x"].shape == (5, 2, 3)
  batch_major = space.with_ranks(time_major=False)
  assert batch_major.leading_rank_names() == ("batch", "time")
  assert batch_major != space
  # Batch and time dims disagree: caught as "time/batch".
  bad = {
    "x": np.zeros((5, 2, 3), np.float32),
    "y": (np.zeros((2, 5), np.int32), np.zeros((2, 5), bool)),
  }
  with pytest.raises(SpaceError, match="leading time/batch dims"):
    space.check(bad)
  with pytest.raises(SpaceError, match="does not match the leading ranks"):
    space.sample(size=5)


def test_nested_error_names_the_path():
  space = Dict(a=Tuple(FloatBox(), Dict(b=IntBox(3, shape=(2,)))))
  with pytest.raises(SpaceError) as info:
    space.check({"a": (np.float32(1.0), {"b": np.zeros(3, np.int32)})})
  assert "at ['a'][1]['b']: shape mismatch at dim 0" in str(info.value)
  with pytest.raises(SpaceError) as info:
    space.check({"a": (np.float32(1.0), {})})
  assert str(info.value).startswith(
    "structure mismatch at ['a'][1]: missing keys ['b'], unexpected keys []"
  )
  with pytest.raises(SpaceError, match="structure mismatch at top level"):
    space.check([np.float32(1.0)])


def test_bounds_of_container_leaves():
  space = Dict(
    action=IntBox(4),
    obs=FloatBox(shape=(2,), low=-1.0, high=1.0),
    add_batch_rank=True,
  )
  ok = {
    "action": np.array([0, 3], np.int32),
    "obs": np.array([[1, -1], [0, 0]], np.float32),
  }
  assert space.contains(ok)
  assert not space.contains(dict(ok, action=np.array([0, 4], np.int32)))
  assert not space.contains(dict(ok, obs=np.full((2, 2), 1.5, np.float32)))
  t = Tuple(IntBox(2), Tuple(IntBox(5, low=3)))
  assert t.contains((np.int32(1), (np.int32(4),)))
  assert not t.contains((np.int32(1), (np.int32(2),)))
  assert t.contains([np.int32(1), [np.int32(3)]])  # Lists are fine too.


def test_python_list_leaves_in_batched_containers():
  space = Dict(
    a=FloatBox(shape=(2,)), b=FloatBox(shape=(2,)), add_batch_rank=True
  )
  value = {"a": np.zeros((1, 2), np.float32), "b": [[1.0, 2.0]]}
  space.check(value)
  assert space.contains(value)
  leaves = space.flatten_value(value)
  assert len(leaves) == 2 and leaves[1] == [[1.0, 2.0]]
  back = space.unflatten_value(leaves)
  assert back["b"] == [[1.0, 2.0]] and back["a"] is value["a"]
  with pytest.raises(SpaceError, match="leaves disagree"):
    space.check(
      {"a": np.zeros((1, 2), np.float32), "b": [[1.0, 2.0], [3.0, 4.0]]}
    )
  t = Tuple(IntBox(3, shape=(2,)), IntBox(3), add_batch_rank=True)
  assert t.contains([[[0, 1], [2, 2]], [1, 2]])
  assert not t.contains([[[0, 1], [2, 2]], [1, 2, 0]])


def test_inner_container_leading_dims_are_checked_too():
  inner = Dict(a=FloatBox(), b=FloatBox(), add_batch_rank=True)
  outer = Dict(x=inner, y=IntBox(3))
  assert not outer.has_batch_rank and outer["x"].has_batch_rank
  good = {
    "x": {"a": np.zeros(2, np.float32), "b": np.zeros(2, np.float32)},
    "y": np.int32(1),
  }
  assert outer.contains(good)
  bad = {
    "x": {"a": np.zeros(2, np.float32), "b": np.zeros(3, np.float32)},
    "y": np.int32(1),
  }
  assert not inner.contains(bad["x"])
  with pytest.raises(SpaceError, match="leaves disagree"):
    outer.check(bad)


def test_tf_and_torch_leaves():
  space = Dict(a=FloatBox(shape=(3,)), b=IntBox(4), add_batch_rank=True)
  assert space.contains({"a": tf.zeros((2, 3)), "b": tf.constant([0, 3])})
  assert not space.contains({"a": tf.zeros((2, 3)), "b": tf.constant([0, 4])})
  assert_space_error(
    space,
    {"a": tf.zeros((2, 3), tf.float64), "b": tf.constant([0, 3])},
    "at ['a']: dtype mismatch",
  )
  assert space.contains(
    {"a": torch.zeros(2, 3), "b": torch.tensor([0, 3], dtype=torch.int32)}
  )
  assert_space_error(
    space,
    {"a": torch.zeros(2, 3), "b": torch.tensor([0, 3], dtype=torch.int32)[:1]},
    "leaves disagree",
  )


def test_dict_keys_are_sorted_and_validated():
  space = Dict({"z": FloatBox(), "a": IntBox(2)}, m=BoolBox())
  assert list(space.keys()) == ["a", "m", "z"]
  assert list(space) == ["a", "m", "z"] and len(space) == 3
  assert [p for p, _ in space.flatten()] == [("a",), ("m",), ("z",)]
  assert space["a"] == IntBox(2)
  assert repr(space) == (
    "Dict(a=IntBox(shape=(), dtype=int32, low=0, high=2)"
    ", m=BoolBox(shape=(), dtype=bool), "
    "z=FloatBox(shape=(), dtype=float32))"
  )
  assert space == Dict(a=IntBox(2), m=BoolBox(), z=FloatBox())
  with pytest.raises(SpaceError, match="keys must be strings"):
    Dict({1: FloatBox()})
  with pytest.raises(SpaceError, match="'a' is not a Space"):
    Dict(a=3)
  with pytest.raises(SpaceError, match="entry 1 is not a Space"):
    Tuple(FloatBox(), "x")


def test_tuple_construction_and_equality():
  a = Tuple(FloatBox(), IntBox(3))
  assert a == Tuple([FloatBox(), IntBox(3)]) == Tuple((FloatBox(), IntBox(3)))
  assert (
    len(a) == 2 and a[1] == IntBox(3) and list(a) == [FloatBox(), IntBox(3)]
  )
  assert a != Tuple(IntBox(3), FloatBox())
  assert a != Tuple(FloatBox(), IntBox(3), add_batch_rank=True)
  assert a != Dict(a=FloatBox(), b=IntBox(3))
  assert Dict(a=FloatBox()) != Dict(b=FloatBox())
  assert Dict(a=FloatBox()) != Dict(a=FloatBox(), add_batch_rank=True)
  assert hash(a) == hash(Tuple(FloatBox(), IntBox(3)))
  assert a.structure() == (FloatBox(), IntBox(3))
  assert [p for p, _ in a.flatten()] == [(0,), (1,)]


def test_rank_flags_reach_nested_leaves():
  space = Tuple(
    Dict(a=FloatBox(), b=Tuple(IntBox(2))), BoolBox(), add_time_rank=True
  )
  assert all(
    leaf.has_time_rank and not leaf.has_batch_rank
    for _, leaf in space.flatten()
  )
  assert space[0].has_time_rank and space[0]["b"].has_time_rank
  assert space.with_batch_rank()[0]["b"][0].has_batch_rank
  stripped = space.strip_ranks()
  assert stripped == Tuple(Dict(a=FloatBox(), b=Tuple(IntBox(2))), BoolBox())


def test_empty_containers():
  for space in [Dict(), Tuple(), Dict(add_batch_rank=True)]:
    assert space.flatten() == []
    assert space.contains(space.sample(seed=0))
    assert space.flatten_value(space.sample(seed=0)) == []
  assert Dict().sample() == {} and Tuple().sample() == ()
