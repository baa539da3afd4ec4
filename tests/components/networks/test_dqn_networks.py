"""Tests of `nature_dqn_network` and `DuelingHead`
(ingraph_rl/components/networks/dqn_networks.py, dueling_head.py)."""

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.components.networks import (
  NATURE_DQN_SPEC,
  DuelingHead,
  nature_dqn_network,
)
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import SpaceError
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
ATARI = (84, 84, 4)


class _AtariQ(Component):
  """uint8 frames -> float / 255 -> Nature torso -> dueling head."""

  def __init__(self, num_actions=6, dueling=True):
    super().__init__(scope="agent")
    self.torso = nature_dqn_network(scope="torso")
    self.head = DuelingHead(num_actions, scope="head") if dueling else None

  @api
  def features(self, frames):
    return self.torso.call(self._graph_fn_scale(frames))

  @api
  def q_values(self, frames):
    return self.head.call(self.features(frames))

  @graph_fn
  def _graph_fn_scale(self, frames):
    return tf.cast(frames, tf.float32) / 255.0

  @_graph_fn_scale.torch
  def _graph_fn_scale(self, frames):
    return frames.float() / 255.0


def _frames(lead, seed=0):
  return (
    np.random.default_rng(seed)
    .integers(0, 256, size=lead + ATARI)
    .astype(np.uint8)
  )


# --- Nature DQN ---------------------------------------------------------------


def test_nature_spec():
  net = nature_dqn_network()
  assert net.scope == "nature_dqn"
  assert [layer.scope for layer in net.layers] == [
    "conv2d_0",
    "conv2d_1",
    "conv2d_2",
    "flatten_3",
    "dense_4",
  ]
  convs = net.layers[:3]
  assert [
    (c.filters, c.kernel_size, c.strides, c.padding, c.activation)
    for c in convs
  ] == [
    (32, (8, 8), (4, 4), "valid", "relu"),
    (64, (4, 4), (2, 2), "valid", "relu"),
    (64, (3, 3), (1, 1), "valid", "relu"),
  ]
  assert (net.layers[4].units, net.layers[4].activation) == (512, "relu")
  # Each call gets fresh spec dicts: the module constant is not mutated.
  assert "scope" not in NATURE_DQN_SPEC[0]


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_nature_parameter_counts(backend):
  test = ComponentTest(
    _AtariQ(dueling=False),
    {"frames": IntBox(256, ATARI, dtype=np.uint8, **BATCH)},
    backend,
    api_names=["features"],
  )
  weights = test.get_weights()
  counts = {}
  for path, value in weights.items():
    layer = path.split("/")[2]
    counts[layer] = counts.get(layer, 0) + value.size
  assert counts == {
    "conv2d_0": 32 * 8 * 8 * 4 + 32,
    "conv2d_1": 64 * 4 * 4 * 32 + 64,
    "conv2d_2": 64 * 3 * 3 * 64 + 64,
    "dense_4": 3136 * 512 + 512,
  }
  assert sum(counts.values()) == 1_684_128
  assert weights["agent/torso/dense_4/kernel"].shape == (3136, 512)


@pytest.mark.slow
@pytest.mark.parametrize("ranks", ["batch", "time_major"])
def test_nature_uint8_parity_and_output_space(ranks):
  kwargs, lead = RANKS[ranks]
  lead = lead[:1] if ranks == "batch" else (2, 1)
  space = IntBox(256, ATARI, dtype=np.uint8, **kwargs)
  frames = _frames(lead)
  tf_out, _ = assert_parity(
    _AtariQ(),
    {"frames": space},
    [("features", (frames,)), ("q_values", (frames,))],
    atol=1e-4,
  )
  assert tf_out[0].shape == lead + (512,)
  assert tf_out[1].shape == lead + (6,)
  assert (tf_out[0] > 0).any() and (tf_out[0] >= 0).all()  # fc relu.
  for backend in ("tf", "torch"):
    test = ComponentTest(_AtariQ(), {"frames": space}, backend)
    assert test.executor.apis["features"].output_space == FloatBox(
      (512,), **kwargs
    )
    out = test.executor.apis["q_values"].output_space
    assert out == FloatBox((6,), **kwargs)
    assert out.time_major == kwargs.get("time_major", False)


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize(
  "space,match",
  [
    (FloatBox((84, 84), **BATCH), "per-item rank 3"),
    (FloatBox((1, 84, 84, 4), **BATCH), "per-item rank 3"),
  ],
  ids=["rank2", "rank4"],
)
def test_nature_bad_input_space(backend, space, match):
  with pytest.raises(SpaceError, match=match) as info:
    ComponentTest(
      _AtariQ(dueling=False), {"frames": space}, backend, api_names=["features"]
    )
  msg = str(info.value)
  assert "component 'agent/torso/conv2d_0'" in msg
  assert "argument 'inputs'" in msg


# --- Dueling head -------------------------------------------------------------


def np_dueling(x, w, units, prefix="dueling_head"):
  def stream(name):
    h = x.astype(np.float64)
    i = 0
    if units is not None:
      h = np.maximum(
        h @ w[f"{prefix}/{name}/dense_0/kernel"]
        + w[f"{prefix}/{name}/dense_0/bias"],
        0.0,
      )
      i = 1
    return (
      h @ w[f"{prefix}/{name}/dense_{i}/kernel"]
      + w[f"{prefix}/{name}/dense_{i}/bias"]
    )

  v, a = stream("value"), stream("advantage")
  return {
    "q_values": v + a - a.mean(-1, keepdims=True),
    "value": v[..., 0],
    "advantages": a,
  }


def _random_weights(test, seed=0):
  rng = np.random.default_rng(seed)
  w = {
    p: (rng.normal(size=v.shape) * 0.5).astype(v.dtype)
    for p, v in test.get_weights().items()
  }
  test.set_weights(w)
  return w


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize("units", [None, 7])
@pytest.mark.parametrize("ranks", list(RANKS))
def test_dueling_numpy_reference(backend, units, ranks):
  kwargs, lead = RANKS[ranks]
  test = ComponentTest(
    DuelingHead(5, units=units), {"inputs": FloatBox((6,), **kwargs)}, backend
  )
  w = _random_weights(test)
  hidden = (
    {}
    if units is None
    else {
      f"dueling_head/{s}/dense_0/{k}": shape
      for s in ("value", "advantage")
      for k, shape in (("kernel", (6, 7)), ("bias", (7,)))
    }
  )
  i, fan_in = (0, 6) if units is None else (1, 7)
  assert {p: v.shape for p, v in w.items()} == {
    **hidden,
    f"dueling_head/value/dense_{i}/kernel": (fan_in, 1),
    f"dueling_head/value/dense_{i}/bias": (1,),
    f"dueling_head/advantage/dense_{i}/kernel": (fan_in, 5),
    f"dueling_head/advantage/dense_{i}/bias": (5,),
  }
  x = np.random.default_rng(1).normal(size=lead + (6,)).astype(np.float32)
  expected = np_dueling(x, w, units)
  streams = test.test("streams", x, expected=expected, rtol=1e-5, atol=1e-5)
  q = test.test("call", x, expected=expected["q_values"], rtol=1e-5, atol=1e-5)
  # Identifiability: the mean over actions of Q is V; Q is not V + A.
  np.testing.assert_allclose(q.mean(-1), streams["value"], atol=1e-5)
  assert not np.allclose(
    q, streams["value"][..., None] + streams["advantages"], atol=1e-3
  )


@pytest.mark.parametrize("units", [None, 7])
def test_dueling_parity(units):
  assert_parity(
    DuelingHead(4, units=units),
    {"inputs": FloatBox((6,), **BATCH_TIME)},
    ["call", "streams"],
    size=(2, 3),
  )


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize("ranks", list(RANKS))
def test_dueling_output_spaces(backend, ranks):
  kwargs, _ = RANKS[ranks]
  test = ComponentTest(
    DuelingHead(4), {"inputs": FloatBox((6,), **kwargs)}, backend
  )
  assert test.executor.apis["call"].output_space == FloatBox((4,), **kwargs)
  streams = test.executor.apis["streams"].output_space
  assert streams["q_values"] == FloatBox((4,), **kwargs)
  assert streams["advantages"] == FloatBox((4,), **kwargs)
  assert streams["value"] == FloatBox((), **kwargs)
  assert streams["value"].time_major == kwargs.get("time_major", False)


class _Head(Component):
  def __init__(self):
    super().__init__(scope="agent")
    self.head = DuelingHead(3, scope="head")

  @api
  def q(self, features):
    return self.head.call(features)


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize(
  "space,match",
  [
    (FloatBox((), **BATCH), "per-item rank >= 1"),
    (IntBox(4, (6,), **BATCH), "FloatBox"),
  ],
  ids=["rank0", "int"],
)
def test_dueling_bad_input_space(backend, space, match):
  with pytest.raises(SpaceError, match=match) as info:
    ComponentTest(_Head(), {"features": space}, backend)
  msg = str(info.value)
  assert "component 'agent/head/" in msg
  assert "argument 'inputs'" in msg
