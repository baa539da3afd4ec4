"""Tests of `Flatten` (ingraph_rl/components/layers/flatten.py)."""

import numpy as np
import pytest

from ingraph_rl.components.layers import Flatten
from ingraph_rl.core import Component, api
from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import Dict, FloatBox, IntBox
from ingraph_rl.testing import ComponentTest, assert_parity

BATCH = dict(add_batch_rank=True)
BATCH_TIME = dict(add_batch_rank=True, add_time_rank=True)
TIME_MAJOR = dict(add_batch_rank=True, add_time_rank=True, time_major=True)

# (space kwargs, leading dims of the test values).
RANKS = {
  "none": ({}, ()),
  "batch": (BATCH, (3,)),
  "batch_time": (BATCH_TIME, (3, 2)),
  "time_major": (TIME_MAJOR, (2, 3)),
}
SHAPES = [(5,), (2, 3), (2, 3, 4)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("ranks", list(RANKS))
def test_parity(shape, ranks):
  kwargs, lead = RANKS[ranks]
  tf_out, _ = assert_parity(
    Flatten(),
    {"inputs": FloatBox(shape, **kwargs)},
    ["call"],
    size=lead or None,
  )
  assert tf_out[0].shape == lead + (int(np.prod(shape)),)


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("ranks", list(RANKS))
def test_numpy_reference(backend, shape, ranks):
  kwargs, lead = RANKS[ranks]
  test = ComponentTest(
    Flatten(), {"inputs": FloatBox(shape, **kwargs)}, backend
  )
  assert test.get_weights() == {}
  x = np.random.default_rng(5).normal(size=lead + shape).astype(np.float32)
  expected = x.reshape(lead + (-1,))
  out = test.test("call", x, expected=expected, rtol=0, atol=0)
  # Row-major order: element [..., i, j, k] lands at i*(J*K) + j*K + k.
  if len(shape) == 3:
    idx = (1, 2, 3)
    flat = np.ravel_multi_index(idx, shape)
    np.testing.assert_array_equal(out[(Ellipsis, flat)], x[(Ellipsis,) + idx])


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_int_inputs(backend):
  # No variables, so any dtype flattens (and keeps its dtype).
  test = ComponentTest(
    Flatten(), {"inputs": IntBox(12, (2, 2), **BATCH)}, backend
  )
  x = np.arange(12, dtype=np.int32).reshape(3, 2, 2)
  out = test.test("call", x, expected=x.reshape(3, 4), rtol=0, atol=0)
  assert out.dtype == np.int32
  assert test.executor.apis["call"].output_space == IntBox(None, (4,), **BATCH)


# --- bad inputs at build time -------------------------------------------------


class _Holder(Component):
  def __init__(self):
    super().__init__(scope="net")
    self.flat = Flatten(scope="flat")

  @api
  def call(self, x):
    return self.flat.call(x)


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize(
  "space",
  [FloatBox((), **BATCH), Dict(a=FloatBox((2, 3)), add_batch_rank=True)],
  ids=["rank0", "dict"],
)
def test_bad_input_space(backend, space):
  with pytest.raises(SpaceError) as info:
    ComponentTest(_Holder(), {"x": space}, backend)
  msg = str(info.value)
  assert "component 'net/flat'" in msg
  assert "argument 'inputs'" in msg
  assert repr(space) in msg


# --- output spaces ------------------------------------------------------------


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("ranks", list(RANKS))
def test_output_space(backend, shape, ranks):
  kwargs, _ = RANKS[ranks]
  test = ComponentTest(
    Flatten(), {"inputs": FloatBox(shape, **kwargs)}, backend
  )
  out = test.executor.apis["call"].output_space
  assert out == FloatBox((int(np.prod(shape)),), **kwargs), out
  assert out.time_major == kwargs.get("time_major", False)
