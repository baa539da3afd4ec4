"""Tests of `Conv2D` (ingraph_rl/components/layers/conv2d.py)."""

import numpy as np
import pytest

from ingraph_rl.components.layers import Conv2D
from ingraph_rl.core import Component, api
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.spaces import FloatBox, IntBox, Tuple
from ingraph_rl.testing import ComponentTest, assert_parity
from ingraph_rl.testing.references import numpy_conv2d

BATCH = dict(add_batch_rank=True)
BATCH_TIME = dict(add_batch_rank=True, add_time_rank=True)
TIME_MAJOR = dict(add_batch_rank=True, add_time_rank=True, time_major=True)

ACTIVATIONS = {
  None: lambda x: x,
  "relu": lambda x: np.maximum(x, 0.0),
  "tanh": np.tanh,
  "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
}


def _pair(x):
  return (x, x) if isinstance(x, int) else tuple(x)


def np_conv2d(
  x, kernel, bias=None, strides=1, padding="valid", activation=None
):
  return ACTIVATIONS[activation](
    numpy_conv2d(x, kernel, bias, strides, padding)
  )


def test_np_conv2d_reference_itself():
  # The reference against a hand-computed case: 3x3 input of 1..9, a 2x2
  # kernel of ones sums each 2x2 window; SAME pads one zero row/col at the
  # bottom/right only.
  x = np.arange(1, 10, dtype=np.float64).reshape(1, 3, 3, 1)
  k = np.ones((2, 2, 1, 1))
  np.testing.assert_array_equal(
    np_conv2d(x, k)[0, :, :, 0], [[12, 16], [24, 28]]
  )
  np.testing.assert_array_equal(
    np_conv2d(x, k, padding="same")[0, :, :, 0],
    [[12, 16, 9], [24, 28, 15], [15, 17, 9]],
  )
  np.testing.assert_array_equal(
    np_conv2d(x, k, strides=2, padding="same")[0, :, :, 0], [[12, 9], [15, 9]]
  )


# (padding, strides, input size, kernel size): odd and even sizes with
# strides 1/2/3, square and non-square kernels and strides.
GEOMETRIES = [
  (padding, s, n, 3)
  for padding in ("valid", "same")
  for s in (1, 2, 3)
  for n in (7, 8)
] + [
  ("same", 1, 6, 4),  # Even kernel: pads 1 top, 2 bottom.
  ("same", 2, 9, 4),
  ("valid", 2, 9, 4),
  ("same", (2, 1), (7, 6), (3, 2)),
  ("valid", (1, 3), (8, 9), (2, 3)),
  ("same", 3, 2, 3),  # Input smaller than the kernel.
  ("same", 3, 7, 2),  # Stride above the kernel size.
  ("valid", 3, 8, 2),
]


def _ids(geo):
  padding, s, n, k = geo
  return f"{padding}-s{s}-n{n}-k{k}".replace(" ", "")


def _space(n, channels=2, **kwargs):
  h, w = _pair(n)
  return FloatBox((h, w, channels), **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=_ids)
def test_parity_geometries(geometry):
  padding, strides, n, k = geometry
  assert_parity(
    Conv2D(3, k, strides=strides, padding=padding),
    {"inputs": _space(n, **BATCH)},
    ["call"],
    size=2,
  )


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("use_bias", [True, False])
def test_parity_activation_bias(activation, use_bias):
  assert_parity(
    Conv2D(
      2, 3, strides=2, padding="same", activation=activation, use_bias=use_bias
    ),
    {"inputs": _space(6, **BATCH)},
    ["call"],
    size=3,
  )


@pytest.mark.parametrize(
  "kwargs,size",
  [(BATCH_TIME, (2, 3)), (TIME_MAJOR, (3, 2)), ({}, None)],
  ids=["batch_time", "time_major", "no_batch"],
)
def test_parity_leading_ranks(kwargs, size):
  tf_out, _ = assert_parity(
    Conv2D(2, 3, strides=2, padding="same", activation="relu"),
    {"inputs": _space(5, **kwargs)},
    ["call"],
    size=size,
  )
  lead = () if size is None else size
  assert tf_out[0].shape == lead + (3, 3, 2)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=_ids)
def test_numpy_reference(backend, geometry):
  padding, strides, n, k = geometry
  test = ComponentTest(
    Conv2D(3, k, strides=strides, padding=padding, activation="tanh"),
    {"inputs": _space(n, **BATCH)},
    backend,
  )
  weights = test.get_weights()
  kh, kw = _pair(k)
  assert weights["conv2d/kernel"].shape == (kh, kw, 2, 3)
  weights["conv2d/bias"] = np.array([0.3, -0.4, 0.1], np.float32)
  test.set_weights(weights)
  h, w = _pair(n)
  x = np.random.default_rng(3).normal(size=(2, h, w, 2)).astype(np.float32)
  expected = np_conv2d(
    x,
    weights["conv2d/kernel"],
    weights["conv2d/bias"],
    strides,
    padding,
    "tanh",
  )
  test.test("call", x, expected=expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize(
  "kwargs,lead",
  [(BATCH_TIME, (2, 3)), (TIME_MAJOR, (3, 2)), ({}, ())],
  ids=["batch_time", "time_major", "no_batch"],
)
def test_numpy_reference_leading_ranks(backend, kwargs, lead):
  test = ComponentTest(
    Conv2D(4, 2, strides=2, padding="same", use_bias=False),
    {"inputs": _space((5, 4), 3, **kwargs)},
    backend,
  )
  weights = test.get_weights()
  assert set(weights) == {"conv2d/kernel"}
  x = np.random.default_rng(4).normal(size=lead + (5, 4, 3)).astype(np.float32)
  expected = np_conv2d(x, weights["conv2d/kernel"], None, 2, "same")
  out = test.test("call", x, expected=expected, rtol=1e-5, atol=1e-5)
  assert out.shape == lead + (3, 2, 4)


def test_bad_padding():
  with pytest.raises(BuildError, match="padding"):
    Conv2D(2, 3, padding="SAME_LOWER")


# --- bad inputs at build time -------------------------------------------------


class _Encoder(Component):
  def __init__(self):
    super().__init__(scope="agent")
    self.encoder = Conv2D(2, 3, scope="encoder")

  @api
  def encode(self, image):
    return self.encoder.call(image)


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize(
  "space",
  [
    FloatBox((8,), **BATCH),  # Per-item rank 1.
    FloatBox((8, 8), **BATCH),  # Per-item rank 2.
    FloatBox((2, 8, 8, 1), **BATCH),  # Per-item rank 4.
    IntBox(256, (8, 8, 1), **BATCH),  # Integer image.
    Tuple(FloatBox((8, 8, 1)), add_batch_rank=True),
  ],
  ids=["rank1", "rank2", "rank4", "int", "tuple"],
)
def test_bad_input_space(backend, space):
  with pytest.raises(SpaceError) as info:
    ComponentTest(_Encoder(), {"image": space}, backend)
  msg = str(info.value)
  assert "component 'agent/encoder'" in msg
  assert "argument 'inputs'" in msg
  assert "per-item rank 3" in msg
  assert repr(space) in msg


# --- output spaces ------------------------------------------------------------


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize(
  "padding,strides,n,out_n",
  [
    ("valid", 1, 7, 5),
    ("valid", 2, 8, 3),
    ("valid", 3, 7, 2),
    ("same", 1, 7, 7),
    ("same", 2, 8, 4),
    ("same", 3, 7, 3),
  ],
)
@pytest.mark.parametrize(
  "kwargs",
  [BATCH, BATCH_TIME, TIME_MAJOR],
  ids=["batch", "batch_time", "time_major"],
)
def test_output_space(backend, padding, strides, n, out_n, kwargs):
  test = ComponentTest(
    Conv2D(5, 3, strides=strides, padding=padding),
    {"inputs": _space(n, **kwargs)},
    backend,
  )
  out = test.executor.apis["call"].output_space
  assert out == FloatBox((out_n, out_n, 5), **kwargs), out
  assert out.time_major == kwargs.get("time_major", False)
