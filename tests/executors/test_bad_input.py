"""Bad input to any root API: a SpaceError naming component, API method,
argument, expected space and received value, raised before TF or torch sees
the value, and state left unchanged."""

import numpy as np
import pytest

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import SpaceError
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.executors.torch import TorchExecutor
from ingraph_rl.spaces import Dict, FloatBox, IntBox, Tuple
from ingraph_rl.testing.toy_components import Memoryish

EXECUTORS = [TFExecutor, TorchExecutor]


class Nested(Component):
  @api
  def call(self, obs, pair):
    return self._graph_fn_f(obs, pair)

  @graph_fn(neutral=True)
  def _graph_fn_f(self, obs, pair):
    return obs["image"] * 2, pair[0]


SPACES = {
  "obs": Dict(
    image=FloatBox((2, 2)), mask=IntBox(2, shape=(3,)), add_batch_rank=True
  ),
  "pair": Tuple(FloatBox(), IntBox(4), add_batch_rank=True),
}


def good():
  return (
    {
      "image": np.zeros((5, 2, 2), np.float32),
      "mask": np.zeros((5, 3), np.int32),
    },
    (np.zeros(5, np.float32), np.zeros(5, np.int32)),
  )


def with_change(which, value):
  obs, pair = good()
  if which == "obs":
    obs = value(obs)
  else:
    pair = value(pair)
  return obs, pair


CASES = {
  "rank": (
    "obs",
    lambda o: {**o, "image": np.zeros((5, 4), np.float32)},
    "rank mismatch: expected rank 3",
  ),
  "shape": (
    "obs",
    lambda o: {**o, "mask": np.zeros((5, 4), np.int32)},
    "shape mismatch at dim 1: expected 3, got 4",
  ),
  "dtype": (
    "obs",
    lambda o: {**o, "image": np.zeros((5, 2, 2))},
    "dtype mismatch: expected float32, got float64",
  ),
  "missing key": (
    "obs",
    lambda o: {"image": o["image"]},
    r"missing keys \['mask'\]",
  ),
  "extra key": (
    "obs",
    lambda o: {**o, "extra": o["mask"]},
    r"unexpected keys \['extra'\]",
  ),
  "not a dict": ("obs", lambda o: o["image"], "expected a dict"),
  "tuple length": ("pair", lambda p: p[:1], "expected a tuple of 2 items"),
  "batch disagree": (
    "obs",
    lambda o: {**o, "mask": o["mask"][:3]},
    "leaves disagree on the leading batch dims",
  ),
}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_names_everything(executor, case):
  ex = executor(Nested(), SPACES)
  ex.execute("call", *good())  # The good value passes.
  arg, change, reason = CASES[case]
  with pytest.raises(SpaceError, match=reason) as e:
    ex.execute("call", *with_change(arg, change))
  msg = str(e.value)
  assert f"component 'nested', API method 'call', argument '{arg}'" in msg
  assert "\n  expected: " in msg and "\n  received: " in msg
  assert e.value.component == "nested" and e.value.argument == arg


@pytest.mark.parametrize("executor", EXECUTORS)
def test_rejected_input_leaves_state_unchanged(executor):
  ex = executor(
    Memoryish(),
    {
      "index": IntBox(8, add_batch_rank=True),
      "values": FloatBox((2,), add_batch_rank=True),
    },
  )
  before = ex.get_weights()
  with pytest.raises(SpaceError, match="dtype mismatch"):
    ex.execute("write", np.array([0, 1], np.int32), np.ones((2, 2)))
  with pytest.raises(SpaceError, match="rank mismatch"):
    ex.execute("write", np.array([0, 1], np.int32), np.ones(2, np.float32))
  after = ex.get_weights()
  for k in before:
    np.testing.assert_array_equal(before[k], after[k])


def test_python_scalars_follow_the_space_kind():
  ex = TFExecutor(
    Memoryish(),
    {
      "index": IntBox(8, add_batch_rank=True),
      "values": FloatBox((2,), add_batch_rank=True),
    },
  )
  ex.execute("write", [1], [[1.5, 2.5]])  # Python lists are fine.
  np.testing.assert_allclose(ex.execute("read", [1]), [[1.5, 2.5]])
  with pytest.raises(SpaceError, match="dtype mismatch"):
    ex.execute("read", [1.5])  # Float index: rejected.


# --- issue 12: checks across arguments and of values -------------------------

PAIR_SPACES = {
  "index": IntBox(8, add_batch_rank=True),
  "values": FloatBox((2,), add_batch_rank=True),
}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
  "index,values,argument,reason",
  [
    ([0, 1], np.ones((3, 2), np.float32), "values", "batch size 3 differs"),
    ([0, 8], np.ones((2, 2), np.float32), "index", "values out of range"),
    ([0, -1], np.ones((2, 2), np.float32), "index", "values out of range"),
    ([0, 2**31], np.ones((2, 2), np.float32), "index", "int32 range"),
    (
      [0, 1],
      np.array([[0, np.nan], [1, 1]], np.float32),
      "values",
      "non-finite",
    ),
  ],
)
def test_refused_before_any_write(executor, index, values, argument, reason):
  from ingraph_rl.testing.fuzz import changed, snapshot

  ex = executor(Memoryish(), PAIR_SPACES)
  before = snapshot(ex)
  with pytest.raises(SpaceError, match=reason) as e:
    ex.execute("write", index, values)
  assert (e.value.component, e.value.api, e.value.argument) == (
    "root",
    "write",
    argument,
  )
  assert changed(before, snapshot(ex)) == []


def test_the_tf_function_checks_in_the_graph():
  """Called directly (as a SavedModel signature calls it), the function
  refuses bad values with a readable message and writes nothing."""
  import tensorflow as tf

  from ingraph_rl.executors.checks import space_error_from

  ex = TFExecutor(Memoryish(), PAIR_SPACES)
  before = ex.get_weights()
  for index, values, argument in (
    ([0, 9], np.ones((2, 2), np.float32), "index"),
    ([0, 1], np.ones((3, 2), np.float32), "values"),
  ):
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
      ex.function("write")(np.array(index, np.int32), values)
    assert "[ingraph_rl check] component `root`" in str(e.value)
    assert space_error_from(e.value).argument == argument
  after = ex.get_weights()
  assert all(np.array_equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_value_checks_can_be_turned_off(executor):
  ex = executor(Memoryish(), PAIR_SPACES, check_values=False)
  # Index 7 is in range; NaN values are accepted without the value checks.
  ex.execute("write", [7], np.full((1, 2), np.nan, np.float32))
  assert np.isnan(ex.get_weights()["root/store/buf"][7]).all()
