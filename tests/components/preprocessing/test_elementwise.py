"""Tests of `Divide`, `Normalize`, `Clip`, `Cast` and `RewardClipping`
(ingraph_rl/components/preprocessing/) against NumPy and hand-computed
values."""

import numpy as np
import pytest

from ingraph_rl.components.preprocessing import (
  Cast,
  Clip,
  Divide,
  Normalize,
  RewardClipping,
)
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.spaces import FloatBox, IntBox
from ingraph_rl.testing import ComponentTest, assert_parity

BATCH = dict(add_batch_rank=True)
BATCH_TIME = dict(add_batch_rank=True, add_time_rank=True)
TIME_MAJOR = dict(add_batch_rank=True, add_time_rank=True, time_major=True)


def _run(component, space, x, backend="tf"):
  return ComponentTest(component, {"inputs": space}, backend).test("call", x)


BACKENDS = pytest.mark.parametrize("backend", ["tf", "torch"])


@BACKENDS
def test_divide(backend):
  x = np.arange(0, 256, 17, dtype=np.uint8).reshape(1, 4, 4)
  out = _run(
    Divide(255.0), IntBox(256, (4, 4), dtype=np.uint8, **BATCH), x, backend
  )
  assert out.dtype == np.float32
  np.testing.assert_allclose(out, x / 255.0, rtol=1e-6)
  assert out[0, 0, 0] == 0.0 and out[0, -1, -1] == 1.0


@BACKENDS
def test_normalize_per_channel(backend):
  x = np.random.default_rng(0).normal(size=(3, 2, 5, 2)).astype(np.float32)
  mean, std = [1.0, -2.0], [0.5, 4.0]
  out = _run(Normalize(mean, std), FloatBox((5, 2), **BATCH_TIME), x, backend)
  np.testing.assert_allclose(
    out, (x - np.array(mean)) / np.array(std), rtol=1e-5, atol=1e-6
  )


def test_normalize_checks():
  with pytest.raises(BuildError, match="std"):
    Normalize(0.0, [1.0, 0.0])
  with pytest.raises(BuildError, match="3 entries"):
    ComponentTest(
      Normalize([0, 0, 0], 1.0), {"inputs": FloatBox((4, 2), **BATCH)}
    )


@BACKENDS
@pytest.mark.parametrize(
  "dtype,low,high",
  [(np.float32, -0.5, 0.25), (np.uint8, 10, 200), (np.int32, -3, 3)],
)
def test_clip(backend, dtype, low, high):
  rng = np.random.default_rng(1)
  if dtype == np.float32:
    space, x = FloatBox((6,), **BATCH), rng.normal(size=(4, 6))
  else:
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -10), min(info.max, 250)
    space = IntBox(hi + 1, (6,), low=lo, dtype=dtype, **BATCH)
    x = rng.integers(lo, hi + 1, size=(4, 6))
  x = x.astype(dtype)
  out = _run(Clip(low, high), space, x, backend)
  assert out.dtype == dtype
  np.testing.assert_array_equal(out, np.clip(x, low, high))


def test_clip_bounds_checked():
  with pytest.raises(BuildError):
    Clip(1, 0)
  with pytest.raises(BuildError, match="do not fit"):
    ComponentTest(
      Clip(-1, 300), {"inputs": IntBox(256, dtype=np.uint8, **BATCH)}
    )


CAST_X = np.array(
  [[-3.0, -0.5, 0.4, 0.5, 1.5, 2.5, 127.49, 254.5, 255.6, 1e4]], np.float32
)


@BACKENDS
def test_cast_float_to_uint8_rounds_and_saturates(backend):
  out = _run(Cast(np.uint8), FloatBox((10,), **BATCH), CAST_X, backend)
  assert out.dtype == np.uint8
  # Ties to even (cvRound), then saturation at 0 and 255.
  np.testing.assert_array_equal(out[0], [0, 0, 0, 0, 2, 2, 127, 254, 255, 255])


@BACKENDS
def test_cast_truncating(backend):
  out = _run(
    Cast(np.uint8, round=False), FloatBox((10,), **BATCH), CAST_X, backend
  )
  np.testing.assert_array_equal(out[0], [0, 0, 0, 0, 1, 2, 127, 254, 255, 255])


@BACKENDS
def test_cast_int_saturates_and_to_float(backend):
  x = np.array([[-300, -1, 0, 77, 255, 256, 10**6]], np.int32)
  out = _run(
    Cast(np.uint8), IntBox(shape=(7,), dtype=np.int32, **BATCH), x, backend
  )
  np.testing.assert_array_equal(out[0], [0, 0, 0, 77, 255, 255, 255])
  out = _run(
    Cast(np.float32), IntBox(shape=(7,), dtype=np.int32, **BATCH), x, backend
  )
  assert out.dtype == np.float32
  np.testing.assert_array_equal(out, x.astype(np.float32))


def test_reward_clipping_abs_one_by_hand():
  r = np.array([-7.0, -1.0, -0.3, 0.0, 0.5, 1.0, 3.0], np.float32)
  out = _run(RewardClipping("abs_one"), FloatBox(**BATCH), r)
  np.testing.assert_array_equal(
    out, np.array([-1, -1, -0.3, 0, 0.5, 1, 1], np.float32)
  )


@BACKENDS
def test_reward_clipping_soft_asymmetric_by_hand(backend):
  # squeezed = tanh(r / 5); r < 0: 0.3 * squeezed * 5, else squeezed * 5.
  # tanh(1) = 0.76159416, tanh(0.2) = 0.19737532, tanh(4) = 0.99932930.
  r = np.array([[-5.0, -1.0, 0.0], [1.0, 5.0, 20.0]], np.float32)
  out = _run(
    RewardClipping("soft_asymmetric"), FloatBox(**BATCH_TIME), r, backend
  )
  np.testing.assert_allclose(
    out,
    [[-1.1423912, -0.2960630, 0.0], [0.9868766, 3.8079708, 4.9966465]],
    rtol=1e-6,
  )


def test_reward_clipping_mode_checked():
  with pytest.raises(BuildError, match="mode"):
    RewardClipping("sign")


@pytest.mark.parametrize(
  "component,space",
  [
    (Divide(3.0), IntBox(256, (3, 2), dtype=np.uint8, **BATCH_TIME)),
    (Normalize(0.5, 2.0), FloatBox((3,), **TIME_MAJOR)),
    (Clip(-1.0, 2.0), FloatBox((2, 2), **BATCH)),
    (Cast(np.uint8), FloatBox((4,), low=-5, high=300, **BATCH_TIME)),
    (Cast(np.float32), IntBox(256, (4,), dtype=np.uint8, **BATCH)),
    (RewardClipping("abs_one"), FloatBox(low=-3, high=3, **BATCH_TIME)),
    (
      RewardClipping("soft_asymmetric"),
      FloatBox(low=-30, high=30, **TIME_MAJOR),
    ),
  ],
  ids=[
    "divide",
    "normalize",
    "clip",
    "cast_uint8",
    "cast_float",
    "abs_one",
    "soft_asymmetric",
  ],
)
def test_parity(component, space):
  size = (3, 4) if space.has_time_rank else 5
  (out,), _ = assert_parity(
    component, {"inputs": space}, ["call"], size=size, rtol=1e-6, atol=1e-6
  )
  assert out.shape[: space.num_leading_ranks] == (
    size if isinstance(size, tuple) else (size,)
  )


@pytest.mark.parametrize(
  "component,space",
  [
    (RewardClipping(), IntBox(3, **BATCH)),  # Rewards are floats.
    (Divide(2.0), FloatBox((3,))),  # No batch rank.
    (Clip(0, 1), IntBox(2, dtype=np.int32)),
  ],
  ids=["reward_int", "divide_no_batch", "clip_no_batch"],
)
def test_bad_input_space_is_space_error(component, space):
  with pytest.raises(SpaceError) as info:
    ComponentTest(component, {"inputs": space})
  e = info.value
  assert (e.component, e.api, e.argument) == (component.scope, "call", "inputs")


def test_bad_value_is_space_error():
  t = ComponentTest(RewardClipping(), {"inputs": FloatBox(**BATCH)})
  with pytest.raises(SpaceError, match="dtype") as info:
    t.test("call", np.zeros((3,), np.int64))
  assert (info.value.component, info.value.api, info.value.argument) == (
    "reward_clipping",
    "call",
    "inputs",
  )
