"""Tests of `from_gymnasium` (`ingraph_rl/spaces/gymnasium_conversion.py`)."""

import gymnasium as gym
import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest
import tree

from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import (
  BoolBox,
  Dict,
  FloatBox,
  IntBox,
  TextBox,
  Tuple,
  from_gymnasium,
)

gs = gym.spaces

SETTINGS = hypothesis.settings(max_examples=50, deadline=None)


def gym_samples(space, n, seed=0):
  space.seed(seed)
  return [space.sample() for _ in range(n)]


def stack(values):
  return tree.map_structure(lambda *xs: np.stack(xs), *values)


def test_cartpole_observation_space_keeps_partly_infinite_bounds():
  env = gym.make("CartPole-v1")
  gym_space = env.observation_space
  space = from_gymnasium(gym_space)
  assert isinstance(space, FloatBox)
  assert space.shape == (4,) and space.dtype == np.float32
  assert space.num_leading_ranks == 0
  np.testing.assert_array_equal(space.low, gym_space.low)
  np.testing.assert_array_equal(space.high, gym_space.high)
  assert np.isinf(space.high[1]) and np.isinf(space.high[3])
  assert np.isfinite(space.high[0]) and np.isfinite(space.high[2])
  for obs in gym_samples(gym_space, 100):
    assert space.contains(obs)
  obs, _ = env.reset(seed=0)
  assert space.contains(obs)
  assert not space.contains(np.array([5.0, 0.0, 0.0, 0.0], np.float32))
  assert not space.contains(np.array([0.0, 0.0, -0.5, 0.0], np.float32))
  assert space.contains(np.array([4.8, 1e30, 0.0, -1e30], np.float32))
  assert not space.contains(np.zeros(4, np.float64))  # dtype is checked.
  # Our own samples lie in the gymnasium space.
  for value in space.sample(size=200, seed=0):
    assert gym_space.contains(value)


def test_unbounded_float_box_has_no_bounds():
  space = from_gymnasium(gs.Box(-np.inf, np.inf, (2, 3), np.float64))
  assert space == FloatBox((2, 3), dtype=np.float64)
  assert space.low is None and space.high is None
  half = from_gymnasium(gs.Box(0.0, np.inf, (2,), np.float32))
  assert half.high is None and float(half.low) == 0.0


def test_uint8_image_box_gets_an_exclusive_high_of_256():
  gym_space = gs.Box(0, 255, (8, 8, 3), np.uint8)
  space = from_gymnasium(gym_space, add_batch_rank=True)
  assert isinstance(space, IntBox)
  assert space.dtype == np.uint8 and space.shape == (8, 8, 3)
  assert int(space.low) == 0 and int(space.high) == 256
  assert space.num_categories == 256
  assert space.has_batch_rank
  images = stack(gym_samples(gym_space, 4))
  assert space.contains(images)
  assert space.contains(np.full((2, 8, 8, 3), 255, np.uint8))
  assert space.contains(space.zeros(2))
  own = space.sample(size=3, seed=0)
  assert own.dtype == np.uint8 and own.max() > 200  # 256 did not wrap to 0.
  for image in own:
    assert gym_space.contains(image)


def test_int_box_with_per_element_bounds():
  gym_space = gs.Box(np.array([-3, 0]), np.array([3, 10]), (2,), np.int32)
  space = from_gymnasium(gym_space)
  np.testing.assert_array_equal(space.low, [-3, 0])
  np.testing.assert_array_equal(space.high, [4, 11])  # Exclusive.
  assert space.contains(np.array([3, 10], np.int32))
  assert not space.contains(np.array([4, 10], np.int32))
  assert not space.contains(np.array([-4, 10], np.int32))
  for v in gym_samples(gym_space, 50):
    assert space.contains(v)


def test_int_box_with_the_largest_int64_high_does_not_overflow():
  gym_space = gs.Box(0, np.iinfo(np.int64).max, (2,), np.int64)
  space = from_gymnasium(gym_space)
  assert space.dtype == np.int64
  assert int(space.low) == 0 and np.all(np.asarray(space.high) > 0)
  assert space.contains(np.array([0, 2**62], np.int64))
  assert not space.contains(np.array([-1, 0], np.int64))
  value = space.sample(size=5, seed=0)
  assert space.with_batch_rank().contains(value)


def test_bool_box():
  space = from_gymnasium(gs.Box(0, 1, (3,), np.bool_))
  assert space == BoolBox((3,))


def test_discrete_with_start():
  gym_space = gs.Discrete(5, start=-2)
  space = from_gymnasium(gym_space)
  assert isinstance(space, IntBox) and space.dtype == np.int64
  assert space.shape == ()
  assert int(space.low) == -2 and int(space.high) == 3
  assert space.num_categories == 5
  for v in (-2, 0, 2):
    assert space.contains(np.int64(v))
  assert not space.contains(np.int64(3))
  assert not space.contains(np.int64(-3))
  samples = gym_samples(gym_space, 100)
  assert all(space.contains(s) for s in samples)
  assert set(int(s) for s in samples) == {-2, -1, 0, 1, 2}
  assert (
    repr(from_gymnasium(gs.Discrete(3)))
    == "IntBox(shape=(), dtype=int64, low=0, high=3)"
  )


def test_multi_discrete():
  gym_space = gs.MultiDiscrete([3, 5, 2], start=[1, 0, -1])
  space = from_gymnasium(gym_space, add_batch_rank=True)
  assert space.shape == (3,) and space.dtype == np.int64
  np.testing.assert_array_equal(space.low, [1, 0, -1])
  np.testing.assert_array_equal(space.high, [4, 5, 1])
  assert space.contains(stack(gym_samples(gym_space, 30)))
  assert space.contains(np.array([[1, 0, -1], [3, 4, 0]], np.int64))
  assert not space.contains(np.array([[4, 0, -1]], np.int64))
  assert not space.contains(np.array([[1, 0, 1]], np.int64))
  nested = gs.MultiDiscrete(np.array([[2, 3], [4, 5]]))
  space2 = from_gymnasium(nested)
  assert space2.shape == (2, 2)
  np.testing.assert_array_equal(space2.high, [[2, 3], [4, 5]])
  assert int(space2.low) == 0
  assert all(space2.contains(s) for s in gym_samples(nested, 30))


def test_multi_binary():
  space = from_gymnasium(gs.MultiBinary(4))
  assert space == IntBox(2, shape=(4,), low=0, dtype=np.int8)
  assert all(space.contains(s) for s in gym_samples(gs.MultiBinary(4), 30))
  assert not space.contains(np.array([0, 1, 2, 0], np.int8))
  space2 = from_gymnasium(gs.MultiBinary([2, 3]))
  assert space2.shape == (2, 3)
  assert all(
    space2.contains(s) for s in gym_samples(gs.MultiBinary([2, 3]), 30)
  )


def test_text():
  gym_space = gs.Text(max_length=8)
  space = from_gymnasium(gym_space, add_batch_rank=True)
  assert space == TextBox((), add_batch_rank=True)
  samples = gym_samples(gym_space, 20)
  assert all(isinstance(s, str) for s in samples)
  assert space.strip_ranks().contains(samples[0])
  assert space.contains(np.array(samples, dtype=object))


def test_dict_and_tuple():
  gym_space = gs.Dict(
    {
      "pos": gs.Box(-1.0, 1.0, (2,), np.float32),
      "id": gs.Discrete(4),
      "more": gs.Tuple((gs.MultiBinary(3), gs.Box(0, 9, (), np.int16))),
    }
  )
  space = from_gymnasium(gym_space)
  assert isinstance(space, Dict)
  assert list(space.keys()) == ["id", "more", "pos"]
  assert space == Dict(
    id=IntBox(4, dtype=np.int64),
    more=Tuple(
      IntBox(2, shape=(3,), dtype=np.int8), IntBox(10, low=0, dtype=np.int16)
    ),
    pos=FloatBox((2,), low=np.float32(-1.0), high=np.float32(1.0)),
  )
  samples = gym_samples(gym_space, 20)
  for s in samples:
    assert space.contains(s)
  batched = from_gymnasium(
    gym_space, add_batch_rank=True, add_time_rank=True, time_major=True
  )
  assert batched.leading_rank_names() == ("time", "batch")
  for _, leaf in batched.flatten():
    assert leaf.leading_rank_names() == ("time", "batch")
  assert batched.contains(stack([stack(samples[:5]), stack(samples[5:10])]))
  # Our samples lie in the gymnasium space.
  own = space.sample(seed=0)
  assert gym_space.contains(
    {"pos": own["pos"], "id": own["id"], "more": tuple(own["more"])}
  )

  tup = gs.Tuple((gs.Discrete(2), gs.Box(0.0, 1.0, (3,), np.float32)))
  tspace = from_gymnasium(tup, add_batch_rank=True)
  assert isinstance(tspace, Tuple) and len(tspace) == 2
  assert tspace[0] == IntBox(2, dtype=np.int64, add_batch_rank=True)
  assert tspace.contains(stack(gym_samples(tup, 6)))
  assert tspace.strip_ranks().contains(tup.sample())


def test_unsupported_spaces_raise_space_error():
  for unsupported in [
    gs.Sequence(gs.Discrete(3)),
    gs.Graph(node_space=gs.Discrete(3), edge_space=None),
    gs.Dict(ok=gs.Discrete(2), bad=gs.Sequence(gs.Discrete(3))),
  ]:
    with pytest.raises(SpaceError, match="cannot convert gymnasium space"):
      from_gymnasium(unsupported)
  with pytest.raises(SpaceError, match="cannot convert"):
    from_gymnasium("not a space")


# --- gymnasium samples and ours agree, for random discrete and box spaces -----


@st.composite
def gym_spaces(draw):
  kind = draw(
    st.sampled_from(
      ["discrete", "multi_discrete", "multi_binary", "int_box", "float_box"]
    )
  )
  shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
  if kind == "discrete":
    return gs.Discrete(
      draw(st.integers(1, 20)), start=draw(st.integers(-10, 10))
    )
  if kind == "multi_discrete":
    n = int(np.prod(shape))
    nvec = np.reshape(
      draw(st.lists(st.integers(1, 9), min_size=n, max_size=n)), shape
    )
    start = np.reshape(
      draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n)), shape
    )
    return gs.MultiDiscrete(nvec, start=start)
  if kind == "multi_binary":
    return gs.MultiBinary(list(shape))
  if kind == "int_box":
    dtype = draw(st.sampled_from([np.uint8, np.int8, np.int32, np.int64]))
    info = np.iinfo(dtype)
    # gymnasium clips its int samples to [min + 2, max - 2] of the dtype, so
    # its own samples would leave a box that reaches further.
    low = draw(st.integers(int(info.min) + 2, min(int(info.max) - 2, 100)))
    high = draw(st.integers(low, min(int(info.max) - 2, low + 300)))
    return gs.Box(low, high, shape, dtype)
  dtype = draw(st.sampled_from([np.float32, np.float64]))
  low = draw(st.one_of(st.just(-np.inf), st.floats(-10, 10)))
  high = draw(st.one_of(st.just(np.inf), st.floats(11, 20)))
  return gs.Box(low, high, shape, dtype)


@SETTINGS
@hypothesis.given(gym_spaces(), st.integers(0, 2**31 - 1))
def test_converted_space_contains_gymnasium_samples_and_vice_versa(
  gym_space, seed
):
  space = from_gymnasium(gym_space)
  for s in gym_samples(gym_space, 10, seed):
    assert space.contains(s), (space, s)
  batched = from_gymnasium(gym_space, add_batch_rank=True)
  assert batched == space.with_batch_rank()
  assert batched.contains(stack(gym_samples(gym_space, 3, seed)))
  for value in batched.sample(size=10, seed=seed):
    assert gym_space.contains(value), (gym_space, value)
