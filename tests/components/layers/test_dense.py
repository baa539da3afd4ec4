"""Tests of `Dense` (ingraph_rl/components/layers/dense.py)."""

import numpy as np
import pytest

from ingraph_rl.components.layers import Dense
from ingraph_rl.core import Component, api
from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import Dict, FloatBox, IntBox
from ingraph_rl.testing import ComponentTest, assert_parity

ACTIVATIONS = {
  None: lambda x: x,
  "linear": lambda x: x,
  "relu": lambda x: np.maximum(x, 0.0),
  "tanh": np.tanh,
  "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
  "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
  "softplus": lambda x: np.log1p(np.exp(x)),
}

BATCH = dict(add_batch_rank=True)
BATCH_TIME = dict(add_batch_rank=True, add_time_rank=True)
TIME_MAJOR = dict(add_batch_rank=True, add_time_rank=True, time_major=True)
# (space kwargs, leading size for sampling).
RANKS = {
  "batch": (BATCH, 4),
  "batch_time": (BATCH_TIME, (3, 2)),
  "time_major": (TIME_MAJOR, (2, 3)),
}


def np_dense(x, kernel, bias, activation):
  out = x.astype(np.float64) @ kernel.astype(np.float64)
  if bias is not None:
    out = out + bias
  return ACTIVATIONS[activation](out)


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("use_bias", [True, False])
def test_parity_activations(activation, use_bias):
  spaces = {"inputs": FloatBox((5,), **BATCH)}
  tf_out, torch_out = assert_parity(
    Dense(3, activation=activation, use_bias=use_bias),
    spaces,
    ["call", "call"],
    size=6,
  )
  assert tf_out[0].shape == (6, 3)
  assert torch_out[1].shape == (6, 3)


@pytest.mark.parametrize("ranks", list(RANKS))
def test_parity_leading_ranks(ranks):
  kwargs, size = RANKS[ranks]
  spaces = {"inputs": FloatBox((4,), **kwargs)}
  tf_out, _ = assert_parity(
    Dense(2, activation="tanh"), spaces, ["call"], size=size
  )
  lead = (size,) if isinstance(size, int) else size
  assert tf_out[0].shape == lead + (2,)


def test_parity_per_item_rank_2():
  # Dense acts on the last axis; the other per-item axes pass through.
  spaces = {"inputs": FloatBox((3, 4), **BATCH)}
  tf_out, _ = assert_parity(Dense(2, activation="relu"), spaces, ["call"])
  assert tf_out[0].shape == (4, 3, 2)


def test_parity_without_copying_weights_differs():
  # The parity check does look at the numbers: torch built from another
  # seed (no weight copy) gives other outputs.
  spaces = {"inputs": FloatBox((4,), **BATCH)}
  with pytest.raises(AssertionError, match="TF vs torch differ"):
    assert_parity(Dense(3), spaces, ["call"], copy_weights=False)


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("use_bias", [True, False])
def test_numpy_reference(backend, activation, use_bias):
  test = ComponentTest(
    Dense(3, activation=activation, use_bias=use_bias),
    {"inputs": FloatBox((5,), **BATCH)},
    backend,
  )
  weights = test.get_weights()
  expected_paths = {"dense/kernel"} | ({"dense/bias"} if use_bias else set())
  assert set(weights) == expected_paths
  assert weights["dense/kernel"].shape == (5, 3)
  bias = None
  if use_bias:
    # Zero-initialised: give it values so that a dropped bias shows.
    bias = np.array([0.5, -1.0, 2.0], np.float32)
    weights["dense/bias"] = bias
    test.set_weights(weights)
  x = np.random.default_rng(1).normal(size=(6, 5)).astype(np.float32)
  expected = np_dense(x, weights["dense/kernel"], bias, activation)
  test.test("call", x, expected=expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize("ranks", list(RANKS))
def test_numpy_reference_leading_ranks(backend, ranks):
  kwargs, size = RANKS[ranks]
  test = ComponentTest(
    Dense(3, activation="relu"), {"inputs": FloatBox((4,), **kwargs)}, backend
  )
  weights = test.get_weights()
  weights["dense/bias"] = np.array([0.1, -0.2, 0.3], np.float32)
  test.set_weights(weights)
  lead = (size,) if isinstance(size, int) else size
  x = np.random.default_rng(2).normal(size=lead + (4,)).astype(np.float32)
  expected = np_dense(x, weights["dense/kernel"], weights["dense/bias"], "relu")
  out = test.test("call", x, expected=expected, rtol=1e-5, atol=1e-5)
  assert out.shape == lead + (3,)


def test_custom_initializer_and_float64():
  kernel = np.arange(12, dtype=np.float64).reshape(4, 3) / 10.0
  test = ComponentTest(
    Dense(3, kernel_initializer=kernel),
    {"inputs": FloatBox((4,), dtype=np.float64, **BATCH)},
  )
  np.testing.assert_array_equal(test.get_weights()["dense/kernel"], kernel)
  x = np.ones((2, 4), np.float64)
  out = test.test("call", x, expected=x @ kernel, rtol=1e-12, atol=1e-12)
  assert out.dtype == np.float64
  assert test.executor.apis["call"].output_space == FloatBox(
    (3,), dtype=np.float64, **BATCH
  )


# --- bad inputs at build time -------------------------------------------------


class _Holder(Component):
  """Root with a Dense below it, so the error names a nested path."""

  def __init__(self):
    super().__init__(scope="agent")
    self.policy = Dense(2, scope="policy")

  @api
  def act(self, obs):
    return self.policy.call(obs)


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize(
  "space",
  [
    IntBox(5, (4,), **BATCH),  # Not float.
    FloatBox((), **BATCH),  # Per-item rank 0.
    Dict(a=FloatBox((4,)), add_batch_rank=True),  # Not a single tensor.
  ],
  ids=["int", "rank0", "dict"],
)
def test_bad_input_space(backend, space):
  with pytest.raises(SpaceError) as info:
    ComponentTest(_Holder(), {"obs": space}, backend)
  msg = str(info.value)
  assert "component 'agent/policy'" in msg
  assert "argument 'inputs'" in msg
  assert "API method 'call'" in msg
  assert repr(space) in msg
  assert info.value.component == "agent/policy"
  assert info.value.argument == "inputs"


def test_bad_input_space_root():
  with pytest.raises(
    SpaceError,
    match=r"component 'dense'.*argument "
    r"'inputs'",
  ):
    ComponentTest(Dense(3), {"inputs": IntBox(3, (4,), **BATCH)})


# --- output spaces ------------------------------------------------------------


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize(
  "kwargs",
  [{}, BATCH, BATCH_TIME, TIME_MAJOR],
  ids=["none", "batch", "batch_time", "time_major"],
)
def test_output_space(backend, kwargs):
  test = ComponentTest(Dense(7), {"inputs": FloatBox((4,), **kwargs)}, backend)
  out = test.executor.apis["call"].output_space
  assert out == FloatBox((7,), **kwargs), out
  assert out.time_major == kwargs.get("time_major", False)


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_output_space_matches_values(backend):
  test = ComponentTest(
    Dense(5), {"inputs": FloatBox((3, 4), **BATCH_TIME)}, backend
  )
  out_space = test.executor.apis["call"].output_space
  assert out_space == FloatBox((3, 5), **BATCH_TIME)
  out = test.test("call", *test.sample("call", size=(2, 6)))
  out_space.check(out)
  assert out.shape == (2, 6, 3, 5)
