"""Tests of `StagingArea` (ingraph_rl/components/queues/staging_area.py).
TF only: the torch executor refuses it. A call that can block runs in a
background thread with a bounded wait (see conftest.py)."""

import doctest

import numpy as np
import pytest
import tree

from ingraph_rl.components.queues import StagingArea
from ingraph_rl.components.queues import staging_area as staging_area_module
from ingraph_rl.core import Component, api
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.executors.torch import TorchExecutor
from ingraph_rl.spaces import BoolBox, Dict, FloatBox, IntBox, Tuple
from ingraph_rl.testing import ComponentTest
from ingraph_rl.testing.component_test import to_numpy

# A staged batch: nested, with uint8 frames.
RECORD = Dict(
  image=IntBox(256, shape=(4, 3), dtype=np.uint8),
  reward=FloatBox(),
  action=IntBox(5),
  extra=Tuple(FloatBox((2,), dtype=np.float64), BoolBox()),
  add_batch_rank=True,
)


def value(batch_size, seed):
  return RECORD.sample(batch_size, seed=seed)


def run(executor, api_name, *args):
  return to_numpy(executor.execute(api_name, *args))


def assert_same_records(expected, got):
  """Same structure, exact dtypes, equal values."""
  tree.assert_same_structure(expected, got)

  def leaf(e, g):
    e, g = np.asarray(e), np.asarray(g)
    assert g.dtype == e.dtype, (g.dtype, e.dtype)
    np.testing.assert_array_equal(g, e)

  tree.map_structure(leaf, expected, got)


@pytest.fixture
def guarded(background):
  """`guarded(executor, api_name, *args)`: runs the call in a thread with a
  bounded wait. A `get` left waiting is released by a put, a `put` (or a
  step) by a get, so a failing test never hangs."""

  def call(executor, api_name, *args):
    def unblock():
      if api_name == "get":
        executor.execute("put", value(1, 999))
      else:
        executor.execute("get")

    return background(unblock, run, executor, api_name, *args).finish()

  return call


# --- put / get / size ------------------------------------------------------


def test_put_then_get_returns_the_same_values(guarded):
  ex = TFExecutor(StagingArea(RECORD, capacity=2), {"records": RECORD})
  a, b = value(3, 1), value(1, 2)
  assert run(ex, "size") == 0
  assert guarded(ex, "put", a) == 1
  assert guarded(ex, "put", b) == 2
  assert run(ex, "size") == 2
  assert_same_records(a, guarded(ex, "get"))
  assert run(ex, "size") == 1
  assert_same_records(b, guarded(ex, "get"))
  size = run(ex, "size")
  assert size == 0 and size.dtype == np.int32 and size.shape == ()


def test_values_are_copies(guarded):
  ex = TFExecutor(StagingArea(RECORD), {"records": RECORD})
  a = value(2, 3)
  keep = tree.map_structure(np.copy, a)
  guarded(ex, "put", a)
  a["image"][...] = 0
  assert_same_records(keep, guarded(ex, "get"))


def test_get_blocks_until_a_put(background):
  ex = TFExecutor(StagingArea(RECORD), {"records": RECORD})
  get = background(lambda: ex.execute("put", value(1, 999)), run, ex, "get")
  assert get.still_blocked()
  a = value(2, 4)
  run(ex, "put", a)
  assert_same_records(a, get.finish())
  assert run(ex, "size") == 0


def test_put_blocks_while_full(background, guarded):
  ex = TFExecutor(StagingArea(RECORD, capacity=1), {"records": RECORD})
  a, b = value(2, 5), value(3, 6)
  assert guarded(ex, "put", a) == 1
  put = background(lambda: ex.execute("get"), run, ex, "put", b)
  assert put.still_blocked()
  assert_same_records(a, guarded(ex, "get"))
  assert put.finish() == 1
  assert_same_records(b, guarded(ex, "get"))


# --- the overlap pattern inside one API --------------------------------------


class Pipeline(Component):
  """Stages batch k+1 while batch k is used: `step` gets, then puts."""

  def __init__(self, capacity=1):
    super().__init__(scope="pipeline")
    self.stage = StagingArea(RECORD, capacity=capacity)

  @api
  def prime(self, records):
    return self.stage.put(records)

  @api
  def step(self, records):
    batch = self.stage.get()
    size = self.stage.put(records)
    return {"batch": batch, "size": size}

  @api
  def size(self):
    return self.stage.size()


def test_step_gets_batch_k_and_stages_batch_k_plus_1(guarded):
  # Capacity 1: this only completes if the get runs before the put, inside
  # the API's tf.function.
  ex = TFExecutor(Pipeline(), {"records": RECORD})
  batches = [value(2 + k, 10 + k) for k in range(4)]
  assert guarded(ex, "prime", batches[0]) == 1
  for k in range(1, 4):
    out = guarded(ex, "step", batches[k])
    assert_same_records(batches[k - 1], out["batch"])
    assert out["size"] == 1
  assert run(ex, "size") == 1


def test_staged_values_come_out_in_order(guarded):
  calls = [
    ("put", [value(2, 20)]),
    ("size", []),
    ("put", [value(1, 21)]),
    ("get", []),
    ("put", [value(3, 22)]),
    ("size", []),
    ("get", []),
    ("get", []),
    ("size", []),
  ]
  ex = TFExecutor(StagingArea(RECORD, capacity=2), {"records": RECORD})
  outs = [guarded(ex, name, *args) for name, args in calls]
  assert [int(outs[i]) for i in (0, 1, 2, 4, 5, 8)] == [1, 1, 2, 2, 2, 0]
  for got, put in [(3, 0), (6, 2), (7, 4)]:  # FIFO.
    assert_same_records(calls[put][1][0], outs[got])


# --- spaces, independence ----------------------------------------------------


def test_output_spaces_are_fixed():
  specs = TFExecutor(StagingArea(RECORD), {"records": RECORD}).apis
  want = [(p, s.dtype, s.shape, True) for p, s in RECORD.flatten()]
  got = specs["get"].output_space
  assert [
    (p, s.dtype, s.shape, s.has_batch_rank) for p, s in got.flatten()
  ] == want
  for name in ["put", "size"]:
    assert specs[name].output_space == IntBox(None, (), dtype=np.int32)


def test_the_torch_executor_refuses_a_staging_area_by_name():
  # Staging holds no number to compare, so the torch mirror has none.
  with pytest.raises(BuildError, match="staging_area"):
    TorchExecutor(StagingArea(RECORD), {"records": RECORD})


class TwoStages(Component):
  def __init__(self):
    super().__init__(scope="two")
    self.first = StagingArea(RECORD, scope="first")
    self.second = StagingArea(RECORD, scope="second")

  @api
  def put_first(self, records):
    return self.first.put(records)

  @api
  def sizes(self):
    return {"first": self.first.size(), "second": self.second.size()}


def test_each_staging_area_has_its_own_buffer(guarded):
  ex = TFExecutor(TwoStages(), {"records": RECORD})
  guarded(ex, "put_first", value(2, 30))
  sizes = run(ex, "sizes")
  assert (sizes["first"], sizes["second"]) == (1, 0)
  # Two builds of copies of one component do not share either.
  stage = StagingArea(RECORD)
  a = ComponentTest(stage, {"records": RECORD}, "tf").executor
  b = ComponentTest(stage, {"records": RECORD}, "tf").executor
  guarded(a, "put", value(1, 31))
  assert run(a, "size") == 1 and run(b, "size") == 0


# --- bad input ---------------------------------------------------------------


@pytest.mark.parametrize("case", ["dtype", "missing_key", "no_batch_rank"])
def test_bad_put_input(case, guarded):
  ex = TFExecutor(StagingArea(RECORD, capacity=2), {"records": RECORD})
  guarded(ex, "put", value(2, 40))
  bad = value(2, 41)
  if case == "dtype":
    bad["image"] = bad["image"].astype(np.float32)
  elif case == "missing_key":
    del bad["reward"]
  else:
    bad = RECORD.strip_ranks().sample(seed=1)
  with pytest.raises(SpaceError) as info:
    ex.execute("put", bad)
  msg = str(info.value)
  assert "component 'staging_area'" in msg
  assert "API method 'put'" in msg and "argument 'records'" in msg
  assert run(ex, "size") == 1


def test_mismatched_space_is_a_build_error():
  wrong = Dict(
    image=FloatBox(shape=(4, 3)),
    reward=FloatBox(),
    action=IntBox(5),
    extra=Tuple(FloatBox((2,), dtype=np.float64), BoolBox()),
    add_batch_rank=True,
  )
  with pytest.raises(SpaceError) as info:
    TFExecutor(Pipeline(), {"records": wrong})
  msg = str(info.value)
  assert "component 'pipeline/staging_area'" in msg
  assert "API method 'put'" in msg and "argument 'records'" in msg


def test_constructor_checks():
  with pytest.raises(SpaceError, match="unknown dim"):
    StagingArea(FloatBox(shape=(None,), add_batch_rank=True))
  with pytest.raises(SpaceError, match="not a Space"):
    StagingArea(np.zeros(3))
  for capacity in [-1, 1.0, False, None]:
    with pytest.raises(BuildError, match="capacity"):
      StagingArea(RECORD, capacity)
  assert StagingArea(RECORD, capacity=0).capacity == 0  # Unbounded.


def test_docstring_example_runs():
  result = doctest.testmod(staging_area_module)
  assert result.attempted >= 6
  assert result.failed == 0


def test_get_keeps_time_rank_and_bounds_of_the_record_space():
  record = Dict(
    frames=IntBox(256, shape=(3,), dtype=np.uint8),
    add_batch_rank=True,
    add_time_rank=True,
    time_major=True,
  )
  ex = TFExecutor(StagingArea(record), {"records": record})
  assert ex.apis["get"].output_space == record
