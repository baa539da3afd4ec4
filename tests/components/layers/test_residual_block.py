"""Tests of `ResidualBlock` and `MaxPool2D`
(ingraph_rl/components/layers/residual_block.py, max_pool.py)."""

import math

import numpy as np
import pytest

from ingraph_rl.components.layers import MaxPool2D, ResidualBlock
from ingraph_rl.core import Component, api
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.spaces import FloatBox, IntBox
from ingraph_rl.testing import ComponentTest, assert_parity

BATCH = dict(add_batch_rank=True)
BATCH_TIME = dict(add_batch_rank=True, add_time_rank=True)
TIME_MAJOR = dict(add_batch_rank=True, add_time_rank=True, time_major=True)
RANKS = {
  "batch": (BATCH, (3,)),
  "batch_time": (BATCH_TIME, (2, 3)),
  "time_major": (TIME_MAJOR, (3, 2)),
}

# --- NumPy references (independent of the library) ----------------------------


def _same_pads(size, k, s):
  total = max((math.ceil(size / s) - 1) * s + k - size, 0)
  return total // 2, total - total // 2  # Odd pixel bottom/right (TF).


def np_conv3x3_same(x, kernel, bias):
  n, h, w, _ = x.shape
  x = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
  out = np.empty((n, h, w, kernel.shape[-1]))
  for i in range(h):
    for j in range(w):
      out[:, i, j] = np.einsum(
        "nhwc,hwcf->nf", x[:, i : i + 3, j : j + 3], kernel
      )
  return out + bias


def np_residual_block(x, w, prefix="residual_block"):
  lead = x.shape[:-3]
  x = x.reshape((-1,) + x.shape[-3:]).astype(np.float64)
  h = np.maximum(x, 0.0)
  h = np.maximum(
    np_conv3x3_same(
      h, w[f"{prefix}/conv2d_0/kernel"], w[f"{prefix}/conv2d_0/bias"]
    ),
    0.0,
  )
  h = np_conv3x3_same(
    h, w[f"{prefix}/conv2d_1/kernel"], w[f"{prefix}/conv2d_1/bias"]
  )
  out = x + h
  return out.reshape(lead + out.shape[1:])


def np_max_pool(x, k=3, s=2, padding="same"):
  lead = x.shape[:-3]
  x = x.reshape((-1,) + x.shape[-3:]).astype(np.float64)
  n, h, w, c = x.shape
  if padding == "same":
    ph, pw = _same_pads(h, k, s), _same_pads(w, k, s)
    x = np.pad(x, ((0, 0), ph, pw, (0, 0)), constant_values=-np.inf)
    out_h, out_w = math.ceil(h / s), math.ceil(w / s)
  else:
    out_h, out_w = (h - k) // s + 1, (w - k) // s + 1
  out = np.empty((n, out_h, out_w, c))
  for i in range(out_h):
    for j in range(out_w):
      out[:, i, j] = x[:, i * s : i * s + k, j * s : j * s + k].max(axis=(1, 2))
  return out.reshape(lead + out.shape[1:])


def test_np_max_pool_reference_itself():
  # 4x4 of 0..15: 3x3/2 SAME pads one -inf row/col at the bottom/right.
  x = np.arange(16.0).reshape(1, 4, 4, 1)
  np.testing.assert_array_equal(
    np_max_pool(x)[0, :, :, 0], [[10, 11], [14, 15]]
  )
  x = -np.arange(16.0).reshape(1, 4, 4, 1)  # Padding never wins.
  np.testing.assert_array_equal(
    np_max_pool(x)[0, :, :, 0], [[0, -2], [-8, -10]]
  )


def _random_weights(test, seed=0):
  rng = np.random.default_rng(seed)
  w = {
    p: (rng.normal(size=v.shape) * 0.3).astype(v.dtype)
    for p, v in test.get_weights().items()
  }
  test.set_weights(w)
  return w


# --- ResidualBlock ------------------------------------------------------------


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize("ranks", list(RANKS))
def test_residual_block_numpy_reference(backend, ranks):
  kwargs, lead = RANKS[ranks]
  test = ComponentTest(
    ResidualBlock(3), {"inputs": FloatBox((5, 4, 3), **kwargs)}, backend
  )
  w = _random_weights(test)
  assert {p: v.shape for p, v in w.items()} == {
    "residual_block/conv2d_0/kernel": (3, 3, 3, 3),
    "residual_block/conv2d_0/bias": (3,),
    "residual_block/conv2d_1/kernel": (3, 3, 3, 3),
    "residual_block/conv2d_1/bias": (3,),
  }
  x = np.random.default_rng(1).normal(size=lead + (5, 4, 3)).astype(np.float32)
  out = test.test(
    "call", x, expected=np_residual_block(x, w), rtol=1e-5, atol=1e-5
  )
  assert out.shape == x.shape
  # The skip connection carries negative inputs (a relu after the sum, or
  # no skip, would not).
  assert (out < 0).any()


@pytest.mark.parametrize("ranks", list(RANKS))
def test_residual_block_parity(ranks):
  kwargs, lead = RANKS[ranks]
  assert_parity(
    ResidualBlock(4),
    {"inputs": FloatBox((6, 5, 4), **kwargs)},
    ["call", "call"],
    size=lead,
  )


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize("ranks", list(RANKS))
def test_residual_block_output_space(backend, ranks):
  kwargs, _ = RANKS[ranks]
  space = FloatBox((6, 5, 4), **kwargs)
  test = ComponentTest(ResidualBlock(4), {"inputs": space}, backend)
  out = test.executor.apis["call"].output_space
  assert out == space and out.time_major == space.time_major


class _Torso(Component):
  def __init__(self, layer):
    super().__init__(scope="agent")
    self.torso = layer

  @api
  def encode(self, image):
    return self.torso.call(image)


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize(
  "space,match",
  [
    (FloatBox((8,), **BATCH), "per-item rank 3"),
    (FloatBox((2, 8, 8, 4), **BATCH), "per-item rank 3"),
    (IntBox(256, (8, 8, 4), **BATCH), "FloatBox"),
    (FloatBox((8, 8, 3), **BATCH), "needs 4 input channels"),
  ],
  ids=["rank1", "rank4", "int", "channels"],
)
def test_residual_block_bad_input_space(backend, space, match):
  with pytest.raises(SpaceError, match=match) as info:
    ComponentTest(
      _Torso(ResidualBlock(4, scope="block")), {"image": space}, backend
    )
  msg = str(info.value)
  assert "component 'agent/block'" in msg
  assert "argument 'inputs'" in msg


# --- MaxPool2D ----------------------------------------------------------------


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize("n", [1, 2, 5, 6, 7, 84], ids=lambda n: f"n{n}")
@pytest.mark.parametrize("padding", ["same", "valid"])
def test_max_pool_numpy_reference(backend, n, padding):
  if padding == "valid" and n < 3:
    n += 3  # A VALID window must fit.
  test = ComponentTest(
    MaxPool2D(padding=padding),
    {"inputs": FloatBox((n, n + 1, 2), **BATCH)},
    backend,
  )
  # All negative, so a zero-padded pool would differ from -inf padding.
  x = (
    -np.random.default_rng(n).random(size=(2, n, n + 1, 2)).astype(np.float32)
    - 0.1
  )
  out = test.test("call", x, expected=np_max_pool(x, padding=padding))
  if padding == "same":
    assert out.shape == (2, math.ceil(n / 2), math.ceil((n + 1) / 2), 2)


@pytest.mark.parametrize("ranks", list(RANKS))
def test_max_pool_parity_and_output_space(ranks):
  kwargs, lead = RANKS[ranks]
  space = FloatBox((7, 6, 3), **kwargs)
  tf_out, _ = assert_parity(MaxPool2D(), {"inputs": space}, ["call"], size=lead)
  assert tf_out[0].shape == lead + (4, 3, 3)
  for backend in ("tf", "torch"):
    test = ComponentTest(MaxPool2D(), {"inputs": space}, backend)
    out = test.executor.apis["call"].output_space
    assert out == FloatBox((4, 3, 3), **kwargs), out
    assert out.time_major == space.time_major


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_max_pool_bad_input_space(backend):
  with pytest.raises(SpaceError, match="per-item rank 3") as info:
    ComponentTest(
      _Torso(MaxPool2D(scope="pool")),
      {"image": FloatBox((8, 8), **BATCH)},
      backend,
    )
  assert "component 'agent/pool'" in str(info.value)
  assert "argument 'inputs'" in str(info.value)


def test_max_pool_bad_padding():
  with pytest.raises(BuildError, match="padding"):
    MaxPool2D(padding="full")
