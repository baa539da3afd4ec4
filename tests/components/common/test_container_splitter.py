"""Tests of `ContainerSplitter` and `ContainerMerger`
(ingraph_rl/components/common/container_splitter.py)."""

import numpy as np
import pytest

from ingraph_rl.components.common import ContainerMerger, ContainerSplitter
from ingraph_rl.core import Component, api
from ingraph_rl.errors import AssemblyError, SpaceError
from ingraph_rl.spaces import Dict, FloatBox, IntBox, Tuple
from ingraph_rl.testing import ComponentTest, assert_parity

BATCH = dict(add_batch_rank=True)
BATCH_TIME = dict(add_batch_rank=True, add_time_rank=True)
TIME_MAJOR = dict(add_batch_rank=True, add_time_rank=True, time_major=True)
RANKS = {
  "batch": (BATCH, (3,)),
  "batch_time": (BATCH_TIME, (2, 3)),
  "time_major": (TIME_MAJOR, (3, 2)),
}
BACKENDS = ["tf", "torch"]


def dict_space(**ranks):
  return Dict(
    obs=FloatBox((4,)),
    action=IntBox(3),
    reward=FloatBox(),
    nested=Dict(a=FloatBox((2, 2)), b=IntBox(5, (3,))),
    **ranks,
  )


def tuple_space(**ranks):
  return Tuple(FloatBox((4,)), IntBox(3), FloatBox((2,)), **ranks)


class SplitMerge(Component):
  """Root: split two keys out of a Dict and merge them back under new keys
  (and as a tuple)."""

  def __init__(self):
    super().__init__(scope="root")
    self.splitter = ContainerSplitter("obs", "action", scope="splitter")
    self.to_dict = ContainerMerger("x", "a", scope="to_dict")
    self.to_tuple = ContainerMerger(scope="to_tuple")

  @api
  def split_merge(self, inputs):
    obs, action = self.splitter.split(inputs)
    return self.to_dict.merge(obs, action)

  @api
  def swap(self, inputs):
    obs, action = self.splitter.split(inputs)
    return self.to_tuple.merge(action, obs)


class Merge(Component):
  """Root around a merger: root APIs take named arguments, not *inputs."""

  def __init__(self, *keys):
    super().__init__(scope="root")
    self.merger = ContainerMerger(*keys, scope="merger")

  @api
  def merge3(self, a, b, c):
    return self.merger.merge(a, b, c)


# --- parity -------------------------------------------------------------------


@pytest.mark.parametrize("ranks", list(RANKS))
@pytest.mark.parametrize(
  "keys", [("obs",), ("action", "obs"), ("nested", "reward", "obs")], ids=str
)
@pytest.mark.slow
def test_parity_split_dict(ranks, keys):
  kwargs, lead = RANKS[ranks]
  tf_out, _ = assert_parity(
    ContainerSplitter(*keys),
    {"inputs": dict_space(**kwargs)},
    ["split"],
    size=lead,
    rtol=0,
    atol=0,
  )
  assert isinstance(tf_out[0], tuple) and len(tf_out[0]) == len(keys)


@pytest.mark.parametrize("ranks", list(RANKS))
def test_parity_split_tuple(ranks):
  kwargs, lead = RANKS[ranks]
  assert_parity(
    ContainerSplitter(2, 0),
    {"inputs": tuple_space(**kwargs)},
    ["split"],
    size=lead,
    rtol=0,
    atol=0,
  )


@pytest.mark.parametrize("ranks", list(RANKS))
def test_parity_split_merge(ranks):
  kwargs, lead = RANKS[ranks]
  assert_parity(
    SplitMerge(),
    {"inputs": dict_space(**kwargs)},
    ["split_merge", "swap"],
    size=lead,
    rtol=0,
    atol=0,
  )


@pytest.mark.parametrize("keys", [("c", "a", "b"), ()], ids=["dict", "tuple"])
def test_parity_merge(keys):
  spaces = {
    "a": FloatBox((2,), **BATCH),
    "b": IntBox(4, **BATCH),
    "c": dict_space(**BATCH),
  }
  assert_parity(Merge(*keys), spaces, ["merge3"], size=3, rtol=0, atol=0)


# --- against indexing ---------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("ranks", list(RANKS))
def test_split_dict_is_indexing(backend, ranks):
  kwargs, lead = RANKS[ranks]
  space = dict_space(**kwargs)
  test = ComponentTest(
    ContainerSplitter("reward", "nested", "obs"), {"inputs": space}, backend
  )
  x = space.sample(lead, seed=11)
  out = test.test(
    "split", x, expected=(x["reward"], x["nested"], x["obs"]), rtol=0, atol=0
  )
  assert out[1]["b"].dtype == np.int32
  assert out[0].shape == lead


@pytest.mark.parametrize("backend", BACKENDS)
def test_split_tuple_is_indexing(backend):
  space = tuple_space(**BATCH)
  test = ComponentTest(ContainerSplitter(2, 0, 1), {"inputs": space}, backend)
  x = space.sample(5, seed=12)
  test.test("split", x, expected=(x[2], x[0], x[1]), rtol=0, atol=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_split_single_key_gives_1_tuple(backend):
  space = dict_space(**BATCH)
  test = ComponentTest(ContainerSplitter("action"), {"inputs": space}, backend)
  x = space.sample(4, seed=13)
  out = test.test("split", x)
  assert isinstance(out, tuple) and len(out) == 1
  np.testing.assert_array_equal(out[0], x["action"])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("ranks", list(RANKS))
def test_split_merge_is_indexing(backend, ranks):
  kwargs, lead = RANKS[ranks]
  space = dict_space(**kwargs)
  test = ComponentTest(SplitMerge(), {"inputs": space}, backend)
  x = space.sample(lead, seed=14)
  test.test(
    "split_merge", x, expected={"x": x["obs"], "a": x["action"]}, rtol=0, atol=0
  )
  test.test("swap", x, expected=(x["action"], x["obs"]), rtol=0, atol=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_merge_keys_follow_argument_order(backend):
  spaces = {
    "a": FloatBox((2,), **BATCH),
    "b": IntBox(4, **BATCH),
    "c": dict_space(**BATCH),
  }
  test = ComponentTest(Merge("z", "y", "x"), spaces, backend)
  a, b, c = test.sample("merge3", size=3, seed=15)
  out = test.test(
    "merge3", a, b, c, expected={"z": a, "y": b, "x": c}, rtol=0, atol=0
  )
  # Not only the same leaves: each key holds its own argument.
  np.testing.assert_array_equal(out["z"], a)
  np.testing.assert_array_equal(out["x"]["nested"]["b"], c["nested"]["b"])
  plain = ComponentTest(Merge(), spaces, backend)
  out = plain.test("merge3", a, b, c, expected=(a, b, c), rtol=0, atol=0)
  assert isinstance(out, tuple)


# --- bad inputs ---------------------------------------------------------------


class _Agent(Component):
  def __init__(self, *keys):
    super().__init__(scope="agent")
    self.preprocess = ContainerSplitter(*keys, scope="pre")

  @api
  def act(self, obs):
    return self.preprocess.split(obs)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
  "keys,space,missing",
  [
    (("obs", "goal"), dict_space(**BATCH), "['goal']"),
    (("a",), dict_space(**BATCH), "['a']"),
    ((0, 3), tuple_space(**BATCH), "[3]"),
    (("obs",), tuple_space(**BATCH), "['obs']"),
    ((0,), dict_space(**BATCH), "[0]"),
  ],
  ids=[
    "dict-missing",
    "dict-nested-key",
    "tuple-index",
    "tuple-str",
    "dict-int",
  ],
)
def test_missing_key(backend, keys, space, missing):
  with pytest.raises(SpaceError) as info:
    ComponentTest(_Agent(*keys), {"obs": space}, backend)
  msg = str(info.value)
  assert "component 'agent/pre'" in msg
  assert "API method 'split'" in msg
  assert "argument 'inputs'" in msg
  assert f"keys {missing} not in the input" in msg
  assert repr(space) in msg


@pytest.mark.parametrize("backend", BACKENDS)
def test_not_a_container(backend):
  space = FloatBox((4,), **BATCH)
  with pytest.raises(SpaceError) as info:
    ComponentTest(_Agent("obs"), {"obs": space}, backend)
  msg = str(info.value)
  assert "component 'agent/pre'" in msg and "argument 'inputs'" in msg
  assert "Dict or Tuple" in msg


def test_splitter_needs_keys():
  with pytest.raises(AssemblyError, match="at least one key"):
    ContainerSplitter(scope="empty")


class _BadMerge(Component):
  def __init__(self):
    super().__init__(scope="root")
    self.merger = ContainerMerger("a", "b", "c", scope="merger")

  @api
  def merge(self, a, b):
    return self.merger.merge(a, b)


def test_merger_wrong_number_of_values():
  with pytest.raises(AssemblyError, match=r"'root/merger'.merge got 2 values"):
    ComponentTest(_BadMerge(), {"a": FloatBox(**BATCH), "b": FloatBox(**BATCH)})


# --- output spaces ------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("ranks", list(RANKS))
def test_output_spaces(backend, ranks):
  kwargs, _ = RANKS[ranks]
  space = dict_space(**kwargs)
  test = ComponentTest(SplitMerge(), {"inputs": space}, backend)
  out = test.executor.apis["split_merge"].output_space
  assert isinstance(out, Dict) and sorted(out.keys()) == ["a", "x"]
  assert out["x"] == FloatBox((4,), **kwargs)
  # Inferred from tensors: dtype, shape and ranks (bounds are not tracked).
  assert out["a"] == IntBox(None, (), dtype=np.int32, **kwargs)
  swap = test.executor.apis["swap"].output_space
  assert isinstance(swap, Tuple) and len(swap) == 2
  assert swap[1] == FloatBox((4,), **kwargs)
  for leaf in (out["a"], out["x"], swap[0], swap[1]):
    assert leaf.time_major == kwargs.get("time_major", False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_split_output_space(backend):
  space = dict_space(**TIME_MAJOR)
  test = ComponentTest(
    ContainerSplitter("nested", "reward"), {"inputs": space}, backend
  )
  out = test.executor.apis["split"].output_space
  assert isinstance(out, tuple) and len(out) == 2
  assert out[0]["a"] == FloatBox((2, 2), **TIME_MAJOR)
  assert out[0]["b"].shape == (3,) and out[0]["b"].time_major
  assert out[1] == FloatBox((), **TIME_MAJOR)
  values = test.test("split", space.sample((2, 3), seed=0))
  out[1].check(values[1])
  out[0].check(values[0])


def test_merger_refuses_repeated_keys():
  from ingraph_rl.errors import AssemblyError

  with pytest.raises(AssemblyError, match=r"merge keys repeat: \['a', 'a'\]"):
    ContainerMerger("a", "a")
