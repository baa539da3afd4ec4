"""Tests of `LSTM` (ingraph_rl/components/layers/lstm.py)."""

import numpy as np
import pytest
import tensorflow as tf
import torch

from ingraph_rl.components.layers import LSTM
from ingraph_rl.core import Component, api
from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import BoolBox, Dict, FloatBox, IntBox
from ingraph_rl.testing import ComponentTest, assert_parity

UNITS, FEATURES = 4, 3


def _spaces(time_major=False, units=UNITS, features=FEATURES, resets=True):
  seq = dict(add_batch_rank=True, add_time_rank=True, time_major=time_major)
  out = {
    "inputs": FloatBox((features,), **seq),
    "initial_state": Dict(
      {"c": FloatBox((units,)), "h": FloatBox((units,))}, add_batch_rank=True
    ),
    "batch_size": IntBox(9, low=1),
  }
  if resets:
    out["resets"] = BoolBox((), **seq)
  return out


def _data(batch=2, time=5, time_major=False, seed=0, reset_prob=0.3):
  rng = np.random.default_rng(seed)
  lead = (time, batch) if time_major else (batch, time)
  x = rng.normal(size=lead + (FEATURES,)).astype(np.float32)
  state = {
    "c": rng.normal(size=(batch, UNITS)).astype(np.float32),
    "h": rng.normal(size=(batch, UNITS)).astype(np.float32),
  }
  resets = rng.random(lead) < reset_prob
  return x, state, resets


# --- NumPy reference (independent of the library) -----------------------------


def np_sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def np_lstm(x, state, kernel, bias, resets=None, time_major=False):
  """Explicit loop over time; gates i, f, g, o of `[x, h] @ kernel + b`."""
  if not time_major:
    x = np.swapaxes(x, 0, 1)
    resets = None if resets is None else np.swapaxes(resets, 0, 1)
  c = state["c"].astype(np.float64)
  h = state["h"].astype(np.float64)
  u = c.shape[-1]
  outs = []
  for t in range(x.shape[0]):
    if resets is not None:
      c = np.where(resets[t][:, None], 0.0, c)
      h = np.where(resets[t][:, None], 0.0, h)
    z = np.concatenate([x[t], h], -1) @ kernel + bias
    i = np_sigmoid(z[:, :u])
    f = np_sigmoid(z[:, u : 2 * u])
    g = np.tanh(z[:, 2 * u : 3 * u])
    o = np_sigmoid(z[:, 3 * u :])
    c = f * c + i * g
    h = o * np.tanh(c)
    outs.append(h)
  outs = np.stack(outs, 0)
  if not time_major:
    outs = np.swapaxes(outs, 0, 1)
  return {"outputs": outs, "state": {"c": c, "h": h}}


def test_np_lstm_reference_itself():
  # One unit, one feature, hand-computed: kernel rows [x, h], all gates
  # pre-activations equal to x + 0*h; c = s(1)*0 + s(1)*tanh(1).
  kernel = np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
  out = np_lstm(
    np.ones((1, 1, 1)),
    {"c": np.zeros((1, 1)), "h": np.zeros((1, 1))},
    kernel,
    np.zeros(4),
  )
  c = np_sigmoid(1.0) * np.tanh(1.0)
  np.testing.assert_allclose(out["state"]["c"], [[c]])
  np.testing.assert_allclose(out["outputs"], [[[np_sigmoid(1.0) * np.tanh(c)]]])


def _random_weights(test, seed=1):
  rng = np.random.default_rng(seed)
  weights = {
    p: (rng.normal(size=v.shape) * 0.5).astype(v.dtype)
    for p, v in test.get_weights().items()
  }
  test.set_weights(weights)
  return weights


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize(
  "time_major", [False, True], ids=["batch_major", "time_major"]
)
@pytest.mark.parametrize(
  "with_resets", [False, True], ids=["no_resets", "resets"]
)
def test_numpy_reference(backend, time_major, with_resets):
  spaces = _spaces(time_major, resets=with_resets)
  test = ComponentTest(LSTM(UNITS), spaces, backend)
  w = _random_weights(test)
  assert {p: v.shape for p, v in w.items()} == {
    "lstm/kernel": (FEATURES + UNITS, 4 * UNITS),
    "lstm/bias": (4 * UNITS,),
  }
  x, state, resets = _data(time_major=time_major)
  if with_resets:
    assert resets.any() and not resets.all()
  expected = np_lstm(
    x,
    state,
    w["lstm/kernel"],
    w["lstm/bias"],
    resets if with_resets else None,
    time_major,
  )
  args = (x, state, resets) if with_resets else (x, state)
  out = test.test("call", *args, expected=expected, rtol=1e-5, atol=1e-5)
  assert out["outputs"].shape == x.shape[:2] + (UNITS,)


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_resets_zero_the_state(backend):
  # Resetting every step makes each output independent of the history and
  # of the initial state: equal to a one-step LSTM from zeros.
  test = ComponentTest(LSTM(UNITS), _spaces(), backend)
  w = _random_weights(test, seed=2)
  x, state, _ = _data(batch=3, time=4, seed=3)
  out = test.test("call", x, state, np.ones((3, 4), bool))
  zeros = {"c": np.zeros((3, UNITS)), "h": np.zeros((3, UNITS))}
  for t in range(4):
    one = np_lstm(x[:, t : t + 1], zeros, w["lstm/kernel"], w["lstm/bias"])
    np.testing.assert_allclose(
      out["outputs"][:, t], one["outputs"][:, 0], rtol=1e-5, atol=1e-5
    )
  no_reset = test.test("call", x, state, np.zeros((3, 4), bool))
  assert not np.allclose(no_reset["outputs"][:, 0], out["outputs"][:, 0])


@pytest.mark.parametrize(
  "time_major", [False, True], ids=["batch_major", "time_major"]
)
def test_parity(time_major):
  x, state, resets = _data(batch=3, time=6, time_major=time_major, seed=4)
  tf_out, _ = assert_parity(
    LSTM(UNITS),
    _spaces(time_major),
    [("call", (x, state, resets)), ("zero_state", (np.int32(3),))],
  )
  np.testing.assert_array_equal(tf_out[1]["c"], np.zeros((3, UNITS)))
  np.testing.assert_array_equal(tf_out[1]["h"], np.zeros((3, UNITS)))
  assert not np.allclose(tf_out[0]["state"]["h"], state["h"])


def test_gate_order_matches_keras_and_torch():
  # The documented mapping to Keras (kernel | recurrent_kernel stacked) and
  # to torch.nn.LSTM (weight_ih | weight_hh, transposed; biases summed).
  test = ComponentTest(LSTM(UNITS), _spaces(resets=False), "tf")
  w = _random_weights(test, seed=5)
  kernel, bias = w["lstm/kernel"], w["lstm/bias"]
  x, state, _ = _data(batch=2, time=5, seed=6)
  out = test.test("call", x, state)

  keras = tf.keras.layers.LSTM(UNITS, return_sequences=True, return_state=True)
  keras.build((None, None, FEATURES))
  keras.set_weights([kernel[:FEATURES], kernel[FEATURES:], bias])
  seq, h, c = keras(
    tf.constant(x),
    initial_state=[tf.constant(state["h"]), tf.constant(state["c"])],
  )
  np.testing.assert_allclose(out["outputs"], seq.numpy(), atol=1e-5)
  np.testing.assert_allclose(out["state"]["c"], c.numpy(), atol=1e-5)

  lstm = torch.nn.LSTM(FEATURES, UNITS, batch_first=True)
  with torch.no_grad():
    lstm.weight_ih_l0.copy_(torch.from_numpy(kernel[:FEATURES].T.copy()))
    lstm.weight_hh_l0.copy_(torch.from_numpy(kernel[FEATURES:].T.copy()))
    lstm.bias_ih_l0.copy_(torch.from_numpy(bias))
    lstm.bias_hh_l0.zero_()
    seq, (h, c) = lstm(
      torch.from_numpy(x),
      (torch.from_numpy(state["h"])[None], torch.from_numpy(state["c"])[None]),
    )
  np.testing.assert_allclose(out["outputs"], seq.numpy(), atol=1e-5)
  np.testing.assert_allclose(out["state"]["h"], h[0].numpy(), atol=1e-5)


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_initial_weights_forget_bias(backend):
  test = ComponentTest(LSTM(UNITS), _spaces(), backend)
  bias = test.get_weights()["lstm/bias"]
  expected = np.zeros(4 * UNITS)
  expected[UNITS : 2 * UNITS] = 1.0
  np.testing.assert_array_equal(bias, expected)
  test = ComponentTest(LSTM(UNITS, forget_bias=0.0), _spaces(), backend)
  np.testing.assert_array_equal(test.get_weights()["lstm/bias"], 0.0)


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_new_batch_and_time_sizes(backend):
  test = ComponentTest(LSTM(UNITS), _spaces(resets=False), backend)
  w = test.get_weights()
  for batch, time in ((1, 1), (4, 9)):
    x, state, _ = _data(batch=batch, time=time, seed=batch)
    test.test(
      "call",
      x,
      state,
      expected=np_lstm(x, state, w["lstm/kernel"], w["lstm/bias"]),
      rtol=1e-5,
      atol=1e-5,
    )


# --- output spaces ------------------------------------------------------------


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize(
  "time_major", [False, True], ids=["batch_major", "time_major"]
)
def test_output_spaces(backend, time_major):
  test = ComponentTest(LSTM(UNITS), _spaces(time_major), backend)
  state = Dict({"c": FloatBox((UNITS,)), "h": FloatBox((UNITS,))})
  state = state.with_ranks(True, False, False)
  call = test.executor.apis["call"].output_space
  assert call["outputs"] == FloatBox(
    (UNITS,), add_batch_rank=True, add_time_rank=True, time_major=time_major
  )
  assert call["outputs"].time_major == time_major
  assert call["state"].flatten() == state.flatten()
  zero = test.executor.apis["zero_state"].output_space
  assert zero.flatten() == state.flatten()
  out = test.test("zero_state", np.int32(5))
  assert out["c"].shape == (5, UNITS) and out["h"].shape == (5, UNITS)


# --- bad inputs ---------------------------------------------------------------


class _Core(Component):
  def __init__(self):
    super().__init__(scope="agent")
    self.core = LSTM(UNITS, scope="core")

  @api
  def step(self, seq, state):
    return self.core.call(seq, state)


_STATE = Dict(
  {"c": FloatBox((UNITS,)), "h": FloatBox((UNITS,))}, add_batch_rank=True
)


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize(
  "seq,state,argument,match",
  [
    (
      FloatBox((3, 2), add_batch_rank=True, add_time_rank=True),
      _STATE,
      "inputs",
      "per-item rank 1",
    ),
    (
      FloatBox((), add_batch_rank=True, add_time_rank=True),
      _STATE,
      "inputs",
      "per-item rank 1",
    ),
    (
      FloatBox((3,), add_batch_rank=True),
      _STATE,
      "inputs",
      "batch and time ranks",
    ),
    (
      IntBox(5, (3,), add_batch_rank=True, add_time_rank=True),
      _STATE,
      "inputs",
      "FloatBox",
    ),
    (
      FloatBox((3,), add_batch_rank=True, add_time_rank=True),
      Dict(
        {"c": FloatBox((UNITS + 1,)), "h": FloatBox((UNITS + 1,))},
        add_batch_rank=True,
      ),
      "initial_state",
      "bad LSTM state space",
    ),
    (
      FloatBox((3,), add_batch_rank=True, add_time_rank=True),
      FloatBox((UNITS,), add_batch_rank=True),
      "initial_state",
      "bad LSTM state space",
    ),
  ],
  ids=["rank2", "rank0", "no_time", "int", "state_units", "state_box"],
)
def test_bad_input_space(backend, seq, state, argument, match):
  with pytest.raises(SpaceError, match=match) as info:
    ComponentTest(_Core(), {"seq": seq, "state": state}, backend)
  msg = str(info.value)
  assert "component 'agent/core'" in msg
  assert f"argument '{argument}'" in msg


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_bad_resets_space(backend):
  spaces = _spaces()
  spaces["resets"] = BoolBox(
    (), add_batch_rank=True, add_time_rank=True, time_major=True
  )
  with pytest.raises(SpaceError, match="bad resets space") as info:
    ComponentTest(LSTM(UNITS), spaces, backend)
  assert "argument 'resets'" in str(info.value)
