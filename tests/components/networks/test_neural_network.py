"""Tests of `NeuralNetwork`
(ingraph_rl/components/networks/neural_network.py)."""

import math

import numpy as np
import pytest

from ingraph_rl.components.layers import Conv2D, Dense, Flatten
from ingraph_rl.components.networks import NeuralNetwork, layer_from_spec
from ingraph_rl.core import Component, api
from ingraph_rl.errors import AssemblyError, SpaceError
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

CONV_SPEC = [
  {
    "type": "conv2d",
    "filters": 3,
    "kernel_size": 3,
    "strides": 2,
    "padding": "same",
    "activation": "relu",
  },
  {"type": "flatten"},
  {"type": "dense", "units": 8, "activation": "tanh"},
  {"type": "dense", "units": 2},
]
IMAGE = (7, 6, 2)  # -> conv: (4, 3, 3) -> flatten: 36 -> 8 -> 2.

# --- NumPy references (independent of the library) ----------------------------


def np_relu(x):
  return np.maximum(x, 0.0)


def np_conv2d_same(x, kernel, bias, stride):
  """NHWC, TF 'SAME' padding (odd pixel bottom/right), square stride."""
  kh, kw, _, filters = kernel.shape
  lead = x.shape[:-3]
  x = x.reshape((-1,) + x.shape[-3:]).astype(np.float64)
  n, h, w, _ = x.shape
  out_h, out_w = math.ceil(h / stride), math.ceil(w / stride)
  ph = max((out_h - 1) * stride + kh - h, 0)
  pw = max((out_w - 1) * stride + kw - w, 0)
  x = np.pad(
    x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0))
  )
  out = np.empty((n, out_h, out_w, filters))
  for i in range(out_h):
    for j in range(out_w):
      patch = x[:, i * stride : i * stride + kh, j * stride : j * stride + kw]
      out[:, i, j] = np.einsum("nhwc,hwcf->nf", patch, kernel)
  out = out + bias
  return out.reshape(lead + out.shape[1:])


def np_dense(x, kernel, bias):
  return x.astype(np.float64) @ kernel + bias


def np_conv_net(x, w, prefix="network"):
  """conv2d(relu) -> flatten -> dense(tanh) -> dense, from TF-layout weights."""
  lead = x.shape[:-3]
  h = np_relu(
    np_conv2d_same(
      x, w[f"{prefix}/conv2d_0/kernel"], w[f"{prefix}/conv2d_0/bias"], 2
    )
  )
  h = h.reshape(lead + (-1,))
  h = np.tanh(
    np_dense(h, w[f"{prefix}/dense_2/kernel"], w[f"{prefix}/dense_2/bias"])
  )
  return np_dense(h, w[f"{prefix}/dense_3/kernel"], w[f"{prefix}/dense_3/bias"])


def _randomize_biases(test, seed=0):
  """Biases start at zero; random values make a dropped bias visible."""
  rng = np.random.default_rng(seed)
  weights = test.get_weights()
  for path, value in weights.items():
    if path.endswith("/bias"):
      weights[path] = rng.normal(size=value.shape).astype(value.dtype)
  test.set_weights(weights)
  return test.get_weights()


# --- composition --------------------------------------------------------------


def test_layers_from_spec():
  net = NeuralNetwork(CONV_SPEC)
  assert [type(layer) for layer in net.layers] == [
    Conv2D,
    Flatten,
    Dense,
    Dense,
  ]
  assert [layer.scope for layer in net.layers] == [
    "conv2d_0",
    "flatten_1",
    "dense_2",
    "dense_3",
  ]
  assert [layer.path for layer in net.layers] == [
    "network/conv2d_0",
    "network/flatten_1",
    "network/dense_2",
    "network/dense_3",
  ]
  assert net.layers[0].strides == (2, 2) and net.layers[0].padding == "same"
  assert net.layers[2].units == 8 and net.layers[2].activation == "tanh"


def test_layer_components_and_scopes():
  a = Dense(4, scope="hidden")
  net = NeuralNetwork([a, {"type": "dense", "units": 2, "scope": "out"}])
  assert net.layers[0] is a
  assert a.parent is net
  assert [layer.scope for layer in net.layers] == ["hidden", "out"]


@pytest.mark.parametrize(
  "layers,match",
  [
    ([], "at least one layer"),
    ([{"units": 3}], "must be a component or a dict with a 'type'"),
    (["dense"], "must be a component or a dict with a 'type'"),
    ([{"type": "lstm", "units": 3}], "unknown type 'lstm'"),
  ],
)
def test_bad_specs(layers, match):
  with pytest.raises(AssemblyError, match=match):
    NeuralNetwork(layers)


def test_layer_from_spec_index_in_message():
  with pytest.raises(AssemblyError, match="layer spec 5"):
    layer_from_spec({"type": "nope"}, 5)


# --- parity -------------------------------------------------------------------


@pytest.mark.parametrize("ranks", list(RANKS))
def test_parity_conv_net(ranks):
  kwargs, lead = RANKS[ranks]
  tf_out, _ = assert_parity(
    NeuralNetwork(CONV_SPEC),
    {"inputs": FloatBox(IMAGE, **kwargs)},
    ["call", "call"],
    size=lead,
  )
  assert tf_out[0].shape == lead + (2,)


@pytest.mark.parametrize(
  "activation", [None, "relu", "tanh", "sigmoid", "elu", "softplus"]
)
@pytest.mark.parametrize("use_bias", [True, False])
def test_parity_mlp(activation, use_bias):
  spec = [
    {
      "type": "dense",
      "units": 6,
      "activation": activation,
      "use_bias": use_bias,
    },
    {"type": "dense", "units": 3, "activation": activation},
  ]
  assert_parity(
    NeuralNetwork(spec), {"inputs": FloatBox((4,), **BATCH)}, ["call"], size=5
  )


# --- against NumPy ------------------------------------------------------------


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize("ranks", list(RANKS))
def test_numpy_reference_conv_net(backend, ranks):
  kwargs, lead = RANKS[ranks]
  test = ComponentTest(
    NeuralNetwork(CONV_SPEC), {"inputs": FloatBox(IMAGE, **kwargs)}, backend
  )
  weights = _randomize_biases(test)
  assert {p: v.shape for p, v in weights.items()} == {
    "network/conv2d_0/kernel": (3, 3, 2, 3),
    "network/conv2d_0/bias": (3,),
    "network/dense_2/kernel": (36, 8),
    "network/dense_2/bias": (8,),
    "network/dense_3/kernel": (8, 2),
    "network/dense_3/bias": (2,),
  }
  x = np.random.default_rng(6).normal(size=lead + IMAGE).astype(np.float32)
  test.test("call", x, expected=np_conv_net(x, weights), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_numpy_reference_mlp(backend):
  spec = [
    {"type": "dense", "units": 5, "activation": "relu"},
    {"type": "dense", "units": 3, "activation": "tanh"},
    {"type": "dense", "units": 1},
  ]
  test = ComponentTest(
    NeuralNetwork(spec, scope="mlp"),
    {"inputs": FloatBox((4,), **BATCH)},
    backend,
  )
  w = _randomize_biases(test, seed=1)
  x = np.random.default_rng(7).normal(size=(6, 4)).astype(np.float32)
  h = np_relu(np_dense(x, w["mlp/dense_0/kernel"], w["mlp/dense_0/bias"]))
  h = np.tanh(np_dense(h, w["mlp/dense_1/kernel"], w["mlp/dense_1/bias"]))
  expected = np_dense(h, w["mlp/dense_2/kernel"], w["mlp/dense_2/bias"])
  test.test("call", x, expected=expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_weights_roundtrip_changes_outputs(backend):
  # set_weights reaches every layer: new weights give the new reference.
  test = ComponentTest(
    NeuralNetwork(CONV_SPEC), {"inputs": FloatBox(IMAGE, **BATCH)}, backend
  )
  x = np.random.default_rng(8).normal(size=(2,) + IMAGE).astype(np.float32)
  before = test.test("call", x)
  rng = np.random.default_rng(9)
  new = {
    p: (rng.normal(size=v.shape) * 0.3).astype(v.dtype)
    for p, v in test.get_weights().items()
  }
  test.set_weights(new)
  after = test.test(
    "call", x, expected=np_conv_net(x, new), rtol=1e-4, atol=1e-5
  )
  assert not np.allclose(before, after)


# --- bad inputs and output spaces -------------------------------------------


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_bad_input_space_names_first_layer(backend):
  with pytest.raises(SpaceError) as info:
    ComponentTest(
      NeuralNetwork(CONV_SPEC), {"inputs": FloatBox((7, 6), **BATCH)}, backend
    )
  msg = str(info.value)
  assert "component 'network/conv2d_0'" in msg
  assert "argument 'inputs'" in msg


class _Policy(Component):
  """Root whose network gets integer observations."""

  def __init__(self):
    super().__init__(scope="policy")
    self.net = NeuralNetwork([{"type": "dense", "units": 3}], scope="net")

  @api
  def act(self, obs):
    return self.net.call(obs)


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_bad_input_space_nested(backend):
  with pytest.raises(SpaceError) as info:
    ComponentTest(_Policy(), {"obs": IntBox(4, (3,), **BATCH)}, backend)
  assert info.value.component == "policy/net/dense_0"
  assert "argument 'inputs'" in str(info.value)


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize("ranks", list(RANKS))
def test_output_space(backend, ranks):
  kwargs, _ = RANKS[ranks]
  test = ComponentTest(
    NeuralNetwork(CONV_SPEC), {"inputs": FloatBox(IMAGE, **kwargs)}, backend
  )
  out = test.executor.apis["call"].output_space
  assert out == FloatBox((2,), **kwargs), out
  assert out.time_major == kwargs.get("time_major", False)
  assert list(test.executor.apis) == ["call"]
