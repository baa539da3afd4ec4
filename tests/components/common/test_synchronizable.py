"""Tests of `Synchronizable` (ingraph_rl/components/common/synchronizable.py):
target networks synced from online networks, hard and soft."""

import numpy as np
import pytest

from ingraph_rl.components.common import Synchronizable
from ingraph_rl.components.networks import NeuralNetwork
from ingraph_rl.core import Component, api
from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing import ComponentTest, assert_parity
from ingraph_rl.testing.references import np_bfloat16

BACKENDS = ["tf", "torch"]
BATCH = dict(add_batch_rank=True)
BATCH_TIME = dict(add_batch_rank=True, add_time_rank=True)

MLP = [
  {"type": "dense", "units": 5, "activation": "relu"},
  {"type": "dense", "units": 2},
]
CONV = [
  {
    "type": "conv2d",
    "filters": 2,
    "kernel_size": 3,
    "strides": 2,
    "padding": "same",
    "activation": "relu",
  },
  {"type": "flatten"},
  {"type": "dense", "units": 4, "activation": "tanh"},
  {"type": "dense", "units": 2},
]
# (spec, input space, leading dims of test values).
CASES = {
  "mlp": (MLP, FloatBox((3,), **BATCH), (4,)),
  "conv": (CONV, FloatBox((5, 6, 2), **BATCH), (3,)),
  "mlp_batch_time": (MLP, FloatBox((3,), **BATCH_TIME), (2, 3)),
}


class TargetNet(Synchronizable, NeuralNetwork):
  pass


class Agent(Component):
  """Root with an online network and a synchronizable target network."""

  def __init__(self, spec, target_spec=None, target_weights_dtype=None):
    super().__init__(scope="agent")
    self.online = NeuralNetwork(spec, scope="online")
    self.target = TargetNet(
      target_spec or spec, weights_dtype=target_weights_dtype, scope="target"
    )

  @api
  def call_online(self, inputs):
    return self.online.call(inputs)

  @api
  def call_target(self, inputs):
    return self.target.call(inputs)

  @api
  def sync(self):
    return self.target.sync(self.online.variables())

  @api
  def soft_sync(self):
    return self.target.sync(self.online.variables(), tau=0.5)


def _split(weights):
  """{relative path: array} of the online and target networks."""
  online = {
    p[len("agent/online/") :]: v
    for p, v in weights.items()
    if p.startswith("agent/online/")
  }
  target = {
    p[len("agent/target/") :]: v
    for p, v in weights.items()
    if p.startswith("agent/target/")
  }
  assert len(online) + len(target) == len(weights)
  return online, target


def _build(case, backend, seed=0):
  spec, space, lead = CASES[case]
  test = ComponentTest(Agent(spec), {"inputs": space}, backend, seed=seed)
  # Biases start at zero in both nets; make them differ too.
  rng = np.random.default_rng(seed + 100)
  w = test.get_weights()
  for path, value in w.items():
    if path.endswith("/bias"):
      w[path] = rng.normal(size=value.shape).astype(value.dtype)
  test.set_weights(w)
  x = (
    np.random.default_rng(seed + 7)
    .normal(size=lead + space.shape)
    .astype(np.float32)
  )
  return test, x


# --- hard sync ---------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(CASES))
def test_sync_makes_outputs_equal(backend, case):
  test, x = _build(case, backend)
  online_out = test.test("call_online", x)
  target_before = test.test("call_target", x)
  assert not np.allclose(online_out, target_before, atol=1e-3)
  online_w, target_w = _split(test.get_weights())
  assert set(online_w) == set(target_w) and online_w
  for path in online_w:
    assert not np.allclose(online_w[path], target_w[path]), path

  test.test("sync")
  test.test("call_target", x, expected=online_out, rtol=1e-6, atol=1e-6)
  online_after, target_after = _split(test.get_weights())
  for path in online_w:
    np.testing.assert_array_equal(target_after[path], online_w[path])
    # The source is left alone.
    np.testing.assert_array_equal(online_after[path], online_w[path])


@pytest.mark.parametrize("backend", BACKENDS)
def test_sync_into_bfloat16_weights_rounds_each_value(backend):
  """A target that stores its weights in bfloat16 (an actor's copy): each
  of its variables becomes the online value rounded to bfloat16 (NumPy
  reference), so its outputs follow to bfloat16's precision."""
  spec, space, lead = CASES["conv"]
  agent = Agent(spec, target_weights_dtype="bfloat16")
  test = ComponentTest(agent, {"inputs": space}, backend)
  x = np.random.default_rng(3).normal(size=lead + space.shape)
  x = x.astype(np.float32)
  test.test("sync")
  online, target = _split(test.get_weights())
  for path, value in online.items():
    assert target[path].dtype.name == "bfloat16", path
    np.testing.assert_array_equal(
      target[path].astype(np.float32), np_bfloat16(value), err_msg=path
    )
  out = test.test("call_target", x)
  assert out.dtype == np.float32
  np.testing.assert_allclose(
    out, test.test("call_online", x), rtol=3e-2, atol=3e-2
  )


@pytest.mark.parametrize("backend", BACKENDS)
def test_sync_is_repeatable(backend):
  # A second sync after the online weights change copies the new values:
  # the values are read at each call, not captured at build.
  test, x = _build("mlp", backend)
  test.test("sync")
  w = test.get_weights()
  rng = np.random.default_rng(1)
  new_online = {
    p: rng.normal(size=v.shape).astype(v.dtype)
    for p, v in w.items()
    if p.startswith("agent/online/")
  }
  w.update(new_online)
  test.set_weights(w)
  online_out = test.test("call_online", x)
  assert not np.allclose(test.test("call_target", x), online_out)
  test.test("sync")
  test.test("call_target", x, expected=online_out, rtol=1e-6, atol=1e-6)
  for p, v in new_online.items():
    np.testing.assert_array_equal(
      test.get_weights()[p.replace("/online/", "/target/")], v
    )


# --- soft sync ----------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(CASES))
def test_soft_sync_averages(backend, case):
  test, x = _build(case, backend)
  online_w, target_w = _split(test.get_weights())
  test.test("soft_sync")
  online_after, target_after = _split(test.get_weights())
  for path in online_w:
    expected = 0.5 * (
      online_w[path].astype(np.float64) + target_w[path].astype(np.float64)
    )
    np.testing.assert_allclose(
      target_after[path], expected, rtol=1e-6, atol=1e-7, err_msg=path
    )
    np.testing.assert_array_equal(online_after[path], online_w[path])
  # Twice: the average of online and the first average.
  test.test("soft_sync")
  _, target_twice = _split(test.get_weights())
  for path in online_w:
    expected = 0.75 * online_w[path].astype(np.float64) + 0.25 * target_w[
      path
    ].astype(np.float64)
    np.testing.assert_allclose(
      target_twice[path], expected, rtol=1e-6, atol=1e-6, err_msg=path
    )
  # The target network computes with the averaged weights.
  outputs = test.test("call_target", x)
  assert not np.allclose(outputs, test.test("call_online", x), atol=1e-4)


class AgentWithTau(Agent):
  """Adds a soft sync whose tau is fed at run time (a tensor, not a
  Python number)."""

  @api
  def blend(self, tau):
    return self.target.sync(self.online.variables(), tau)


@pytest.mark.parametrize("backend", BACKENDS)
def test_soft_sync_with_tau_input(backend):
  # Regression: the TF body used `tau == 1.0` as a Python bool, which fails
  # in a TF graph when tau is a tensor (torch accepted it).
  spec, space, _ = CASES["mlp"]
  test = ComponentTest(
    AgentWithTau(spec), {"inputs": space, "tau": FloatBox()}, backend
  )
  online_w, target_w = _split(test.get_weights())
  for tau, done in [(0.25, 0.25), (1.0, 1.0)]:
    test.test("blend", np.float32(tau))
    online_after, target_after = _split(test.get_weights())
    for path in online_w:
      expected = (
        done * online_w[path].astype(np.float64) + (1 - done) * target_w[path]
      )
      np.testing.assert_allclose(
        target_after[path],
        expected,
        rtol=1e-6,
        atol=1e-6,
        err_msg=f"tau={tau} {path}",
      )
      np.testing.assert_array_equal(online_after[path], online_w[path])


def test_parity_tau_input():
  spec, space, lead = CASES["mlp"]
  x = (
    np.random.default_rng(4).normal(size=lead + space.shape).astype(np.float32)
  )
  tf_out, _ = assert_parity(
    AgentWithTau(spec),
    {"inputs": space, "tau": FloatBox()},
    [
      ("call_target", [x]),
      ("blend", [np.float32(0.3)]),
      ("call_target", [x]),
      ("blend", [np.float32(0.9)]),
      ("call_target", [x]),
      ("call_online", [x]),
    ],
  )
  assert not np.allclose(tf_out[0], tf_out[2])
  assert not np.allclose(tf_out[2], tf_out[4])


# --- parity: the same sequence of calls under TF and torch -------------------


@pytest.mark.parametrize("case", list(CASES))
def test_parity_call_sequence(case):
  spec, space, lead = CASES[case]
  x = (
    np.random.default_rng(3).normal(size=lead + space.shape).astype(np.float32)
  )
  tf_out, _ = assert_parity(
    Agent(spec),
    {"inputs": space},
    [
      ("call_online", [x]),
      ("call_target", [x]),
      ("soft_sync", []),
      ("call_target", [x]),
      ("sync", []),
      ("call_target", [x]),
    ],
  )
  assert not np.allclose(tf_out[1], tf_out[3])
  np.testing.assert_allclose(tf_out[5], tf_out[0], rtol=1e-6, atol=1e-6)


# --- structure mismatch -------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
  "target_spec,what",
  [
    (
      [
        {"type": "dense", "units": 6, "activation": "relu"},
        {"type": "dense", "units": 2},
      ],
      "layer size",
    ),
    (
      [
        {"type": "dense", "units": 5, "activation": "relu"},
        {"type": "dense", "units": 2, "use_bias": False},
      ],
      "missing bias",
    ),
    (
      [
        {"type": "dense", "units": 5, "activation": "relu", "scope": "hidden"},
        {"type": "dense", "units": 2},
      ],
      "other scope",
    ),
  ],
  ids=["size", "bias", "scope"],
)
def test_structure_mismatch(backend, target_spec, what):
  with pytest.raises(SpaceError) as info:
    ComponentTest(
      Agent(MLP, target_spec), {"inputs": FloatBox((3,), **BATCH)}, backend
    )
  msg = str(info.value)
  assert "'sync'" in msg, what
  assert "component 'agent/target'" in msg
  assert "argument 'values'" in msg
  assert "do not match" in msg


# --- output spaces ------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_spaces(backend):
  test, _ = _build("mlp_batch_time", backend)
  apis = test.executor.apis
  assert apis["call_online"].output_space == FloatBox((2,), **BATCH_TIME)
  assert apis["call_target"].output_space == FloatBox((2,), **BATCH_TIME)
  assert apis["sync"].arg_spaces == {}
  assert apis["sync"].output_space.dtype == np.bool_
  assert apis["sync"].output_space.shape == ()
  assert not apis["sync"].output_space.has_batch_rank
  assert list(apis) == ["call_online", "call_target", "sync", "soft_sync"]
