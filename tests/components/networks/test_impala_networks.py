"""Tests of `ImpalaSmallNetwork` and `ImpalaLargeNetwork`
(ingraph_rl/components/networks/impala_networks.py)."""

import math

import numpy as np
import pytest

from ingraph_rl.components.layers import LSTM, Conv2D, MaxPool2D, ResidualBlock
from ingraph_rl.components.networks import (
  ImpalaLargeNetwork,
  ImpalaSmallNetwork,
)
from ingraph_rl.core import Component, api
from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import BoolBox, Dict, FloatBox, IntBox
from ingraph_rl.testing import ComponentTest, assert_parity

BATCH = dict(add_batch_rank=True)
ATARI = (84, 84, 4)
IMAGE = (9, 7, 3)  # Small frames for the large net: 9x7 -> 5x4 -> 3x2
# -> 2x1, so the head sees 2*1*32 = 64 features.
UNITS, LSTM_UNITS = 16, 8


def _large_spaces(time_major=False, image=IMAGE, lstm_units=LSTM_UNITS):
  seq = dict(add_batch_rank=True, add_time_rank=True, time_major=time_major)
  return {
    "inputs": FloatBox(image, **seq),
    "initial_state": Dict(
      {"c": FloatBox((lstm_units,)), "h": FloatBox((lstm_units,))},
      add_batch_rank=True,
    ),
    "resets": BoolBox((), **seq),
    "batch_size": IntBox(9, low=1),
  }


def _large_data(batch=2, time=3, time_major=False, seed=0):
  rng = np.random.default_rng(seed)
  lead = (time, batch) if time_major else (batch, time)
  x = rng.normal(size=lead + IMAGE).astype(np.float32)
  state = {
    k: rng.normal(size=(batch, LSTM_UNITS)).astype(np.float32)
    for k in ("c", "h")
  }
  resets = np.zeros(lead, bool)
  resets[(1, 0) if time_major else (0, 1)] = True  # One episode start.
  return x, state, resets


# --- NumPy reference (independent of the library) -----------------------------


def np_conv3x3_same(x, kernel, bias):
  n, h, w, _ = x.shape
  x = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
  out = np.empty((n, h, w, kernel.shape[-1]))
  for i in range(h):
    for j in range(w):
      out[:, i, j] = np.einsum(
        "nhwc,hwcf->nf", x[:, i : i + 3, j : j + 3], kernel
      )
  return out + bias


def np_max_pool_3x3_2_same(x):
  n, h, w, c = x.shape
  out_h, out_w = math.ceil(h / 2), math.ceil(w / 2)
  ph, pw = max((out_h - 1) * 2 + 3 - h, 0), max((out_w - 1) * 2 + 3 - w, 0)
  x = np.pad(
    x,
    ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)),
    constant_values=-np.inf,
  )
  out = np.empty((n, out_h, out_w, c))
  for i in range(out_h):
    for j in range(out_w):
      out[:, i, j] = x[:, 2 * i : 2 * i + 3, 2 * j : 2 * j + 3].max(axis=(1, 2))
  return out


def np_sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def np_impala_large(x, state, resets, w, time_major=False):
  """scalable_agent's deep torso + LSTM, from TF-layout weights."""
  p = "impala_large"
  if time_major:
    x, resets = np.swapaxes(x, 0, 1), np.swapaxes(resets, 0, 1)
  b, t = x.shape[:2]
  h = x.reshape((b * t,) + x.shape[2:]).astype(np.float64)
  index = 0
  for filters, blocks in ((16, 2), (32, 2), (32, 2)):
    conv = f"{p}/stages/conv2d_{index}"
    h = np_conv3x3_same(h, w[f"{conv}/kernel"], w[f"{conv}/bias"])
    assert h.shape[-1] == filters
    h = np_max_pool_3x3_2_same(h)
    index += 2
    for _ in range(blocks):
      block = f"{p}/stages/residual_block_{index}"
      r = np.maximum(h, 0.0)
      r = np.maximum(
        np_conv3x3_same(
          r, w[f"{block}/conv2d_0/kernel"], w[f"{block}/conv2d_0/bias"]
        ),
        0.0,
      )
      h = h + np_conv3x3_same(
        r, w[f"{block}/conv2d_1/kernel"], w[f"{block}/conv2d_1/bias"]
      )
      index += 1
  h = np.maximum(h, 0.0).reshape(b, t, -1)
  h = np.maximum(
    h @ w[f"{p}/head/dense_1/kernel"] + w[f"{p}/head/dense_1/bias"], 0.0
  )
  kernel, bias = w[f"{p}/lstm/kernel"], w[f"{p}/lstm/bias"]
  u = bias.shape[0] // 4
  c_t, h_t = state["c"].astype(np.float64), state["h"].astype(np.float64)
  outs = []
  for step in range(t):
    keep = ~resets[:, step, None]
    c_t, h_t = c_t * keep, h_t * keep
    z = np.concatenate([h[:, step], h_t], -1) @ kernel + bias
    c_t = np_sigmoid(z[:, u : 2 * u]) * c_t + np_sigmoid(z[:, :u]) * np.tanh(
      z[:, 2 * u : 3 * u]
    )
    h_t = np_sigmoid(z[:, 3 * u :]) * np.tanh(c_t)
    outs.append(h_t)
  outs = np.stack(outs, 0 if time_major else 1)
  return {"outputs": outs, "state": {"c": c_t, "h": h_t}}


def _random_weights(test, seed=0):
  """Kernels ~ N(0, 1/fan_in), biases ~ N(0, 0.1^2): activations stay O(1),
  so the LSTM gates do not saturate and every weight matters."""
  rng = np.random.default_rng(seed)
  w = {
    p: (
      rng.normal(size=v.shape)
      * (0.1 if v.ndim == 1 else 1.0 / math.sqrt(math.prod(v.shape[:-1])))
    ).astype(v.dtype)
    for p, v in test.get_weights().items()
  }
  test.set_weights(w)
  return w


# --- large network ------------------------------------------------------------


def test_large_structure():
  net = ImpalaLargeNetwork()
  kinds = [type(layer) for layer in net.stages.layers]
  assert kinds == [Conv2D, MaxPool2D, ResidualBlock, ResidualBlock] * 3
  convs = [layer for layer in net.stages.layers if type(layer) is Conv2D]
  assert [(c.filters, c.kernel_size, c.strides, c.padding) for c in convs] == [
    (f, (3, 3), (1, 1), "same") for f in (16, 32, 32)
  ]
  pools = [layer for layer in net.stages.layers if type(layer) is MaxPool2D]
  assert all(
    (p.pool_size, p.strides, p.padding) == ((3, 3), (2, 2), "same")
    for p in pools
  )
  assert [b.filters for b in net.stages.layers if type(b) is ResidualBlock] == [
    16,
    16,
    32,
    32,
    32,
    32,
  ]
  assert net.head.layers[1].units == 256
  assert isinstance(net.lstm, LSTM) and net.lstm.units == 256


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize(
  "time_major", [False, True], ids=["batch_major", "time_major"]
)
@pytest.mark.slow
def test_large_numpy_reference(backend, time_major):
  test = ComponentTest(
    ImpalaLargeNetwork(units=UNITS, lstm_units=LSTM_UNITS),
    _large_spaces(time_major),
    backend,
  )
  w = _random_weights(test)
  assert w["impala_large/head/dense_1/kernel"].shape == (2 * 1 * 32, UNITS)
  assert w["impala_large/lstm/kernel"].shape == (
    UNITS + LSTM_UNITS,
    4 * LSTM_UNITS,
  )
  x, state, resets = _large_data(time_major=time_major)
  expected = np_impala_large(x, state, resets, w, time_major)
  out = test.test(
    "call", x, state, resets, expected=expected, rtol=1e-4, atol=1e-4
  )
  assert out["outputs"].shape == x.shape[:2] + (LSTM_UNITS,)
  assert 0.05 < np.abs(out["outputs"]).max() < 0.95  # Not saturated.


@pytest.mark.parametrize(
  "time_major", [False, True], ids=["batch_major", "time_major"]
)
@pytest.mark.slow
def test_large_parity(time_major):
  x, state, resets = _large_data(batch=3, time=2, time_major=time_major, seed=1)
  tf_out, torch_out = assert_parity(
    ImpalaLargeNetwork(units=UNITS, lstm_units=LSTM_UNITS),
    _large_spaces(time_major),
    [("call", (x, state, resets)), ("zero_state", (np.int32(4),))],
    rtol=1e-4,
    atol=1e-4,
  )
  assert tf_out[1]["c"].shape == (4, LSTM_UNITS)
  assert not np.allclose(tf_out[0]["state"]["h"], 0.0)


@pytest.mark.slow
def test_large_without_resets():
  # `resets` is optional: leaving it out equals passing all False.
  spaces = _large_spaces()
  x, state, _ = _large_data(seed=2)
  with_r = ComponentTest(
    ImpalaLargeNetwork(units=UNITS, lstm_units=LSTM_UNITS), spaces
  )
  del spaces["resets"]
  without = ComponentTest(
    ImpalaLargeNetwork(units=UNITS, lstm_units=LSTM_UNITS), spaces
  )
  without.set_weights(with_r.get_weights())
  a = with_r.test("call", x, state, np.zeros(x.shape[:2], bool))
  without.test("call", x, state, expected=a, rtol=1e-6, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_large_full_size_parameter_counts_and_spaces(backend):
  test = ComponentTest(
    ImpalaLargeNetwork(), _large_spaces(image=ATARI, lstm_units=256), backend
  )
  weights = test.get_weights()
  total = sum(v.size for v in weights.values())
  convs = (
    (3 * 3 * 4 * 16 + 16) + (3 * 3 * 16 * 32 + 32) + (3 * 3 * 32 * 32 + 32)
  )
  blocks = 4 * (3 * 3 * 16 * 16 + 16) + 8 * (3 * 3 * 32 * 32 + 32)
  fc = 11 * 11 * 32 * 256 + 256  # 84 -> 42 -> 21 -> 11.
  lstm = (256 + 256) * 4 * 256 + 4 * 256
  assert total == convs + blocks + fc + lstm
  assert weights["impala_large/head/dense_1/kernel"].shape == (3872, 256)
  out = test.executor.apis["call"].output_space
  assert out["outputs"] == FloatBox(
    (256,), add_batch_rank=True, add_time_rank=True
  )
  assert out["state"]["c"] == FloatBox((256,), add_batch_rank=True)
  assert out["state"]["h"] == FloatBox((256,), add_batch_rank=True)
  zero = test.executor.apis["zero_state"].output_space
  assert zero.flatten() == out["state"].flatten()


class _Agent(Component):
  def __init__(self):
    super().__init__(scope="agent")
    self.net = ImpalaLargeNetwork(
      units=UNITS, lstm_units=LSTM_UNITS, scope="net"
    )

  @api
  def unroll(self, frames, state):
    return self.net.call(frames, state)


_STATE = Dict(
  {"c": FloatBox((LSTM_UNITS,)), "h": FloatBox((LSTM_UNITS,))},
  add_batch_rank=True,
)


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize(
  "frames,state,component,argument,match",
  [
    (
      FloatBox((9, 7), add_batch_rank=True, add_time_rank=True),
      _STATE,
      "agent/net/stages/conv2d_0",
      "inputs",
      "per-item rank 3",
    ),
    (
      FloatBox((1, 9, 7, 3), add_batch_rank=True, add_time_rank=True),
      _STATE,
      "agent/net/stages/conv2d_0",
      "inputs",
      "per-item rank 3",
    ),
    (
      FloatBox(IMAGE, add_batch_rank=True),
      _STATE,
      "agent/net/lstm",
      "inputs",
      "batch and time ranks",
    ),
    (
      FloatBox(IMAGE, add_batch_rank=True, add_time_rank=True),
      Dict({"c": FloatBox((3,)), "h": FloatBox((3,))}, add_batch_rank=True),
      "agent/net/lstm",
      "initial_state",
      "bad LSTM state space",
    ),
  ],
  ids=["rank2", "rank4", "no_time", "state_units"],
)
def test_large_bad_input_space(
  backend, frames, state, component, argument, match
):
  with pytest.raises(SpaceError, match=match) as info:
    ComponentTest(_Agent(), {"frames": frames, "state": state}, backend)
  msg = str(info.value)
  assert f"component '{component}'" in msg
  assert f"argument '{argument}'" in msg


# --- small network ------------------------------------------------------------


def test_small_structure_and_parameter_counts():
  net = ImpalaSmallNetwork()
  assert [
    (c.filters, c.kernel_size, c.strides, c.padding, c.activation)
    for c in net.layers[:2]
  ] == [
    (16, (8, 8), (4, 4), "valid", "relu"),
    (32, (4, 4), (2, 2), "valid", "relu"),
  ]
  test = ComponentTest(net, {"inputs": FloatBox(ATARI, **BATCH)})
  counts = {}
  for path, value in test.get_weights().items():
    layer = path.split("/")[1]
    counts[layer] = counts.get(layer, 0) + value.size
  # 84 -> 20 -> 9: 9*9*32 = 2592 features.
  assert counts == {
    "conv2d_0": 16 * 8 * 8 * 4 + 16,
    "conv2d_1": 32 * 4 * 4 * 16 + 32,
    "dense_3": 2592 * 256 + 256,
  }


@pytest.mark.parametrize(
  "kwargs,lead",
  [
    (BATCH, (2,)),
    (dict(add_batch_rank=True, add_time_rank=True, time_major=True), (2, 1)),
  ],
  ids=["batch", "time_major"],
)
def test_small_parity_and_output_space(kwargs, lead):
  space = FloatBox(ATARI, **kwargs)
  tf_out, _ = assert_parity(
    ImpalaSmallNetwork(),
    {"inputs": space},
    ["call"],
    size=lead,
    rtol=1e-4,
    atol=1e-4,
  )
  assert tf_out[0].shape == lead + (256,)
  assert (tf_out[0] > 0).any()
  for backend in ("tf", "torch"):
    test = ComponentTest(ImpalaSmallNetwork(), {"inputs": space}, backend)
    out = test.executor.apis["call"].output_space
    assert out == FloatBox((256,), **kwargs)
    assert out.time_major == kwargs.get("time_major", False)


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_small_bad_input_space(backend):
  with pytest.raises(SpaceError, match="per-item rank 3") as info:
    ComponentTest(
      ImpalaSmallNetwork(), {"inputs": FloatBox((84, 84), **BATCH)}, backend
    )
  assert "component 'impala_small/conv2d_0'" in str(info.value)
  assert "argument 'inputs'" in str(info.value)
