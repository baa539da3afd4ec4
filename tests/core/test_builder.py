"""Build: spaces flow, create_variables runs once when input-complete,
output spaces are inferred, stalls are named."""

import numpy as np
import pytest

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import InputIncompleteError, SpaceError
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.executors.torch import TorchExecutor
from ingraph_rl.spaces import Dict, FloatBox, IntBox
from ingraph_rl.testing.component_test import to_numpy
from ingraph_rl.testing.toy_components import Chain, Memoryish

EXECUTORS = [TFExecutor, TorchExecutor]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_create_variables_runs_exactly_once(executor):
  chain = Chain()  # `counter` is reached from two root APIs.
  ex = executor(chain, {"x": FloatBox((3,), add_batch_rank=True)})
  assert chain.counter.create_calls == 1
  assert chain.counter.seen_spaces == {"x": FloatBox((3,), add_batch_rank=True)}
  assert list(ex.get_weights()) == ["chain/counter/offset"]
  assert ex.stats.assembly_s > 0 and ex.stats.build_s > 0


@pytest.mark.parametrize("executor", EXECUTORS)
def test_builder_waits_for_spaces_from_a_later_api(executor):
  # `read` comes first but Store's variables depend on `write`'s values.
  root = Memoryish()
  ex = executor(
    root,
    {
      "index": IntBox(8, add_batch_rank=True),
      "values": FloatBox((2,), add_batch_rank=True),
    },
  )
  assert list(ex.apis) == ["read", "write"]
  ex.execute(
    "write", np.array([1, 3], np.int32), np.array([[1, 2], [3, 4]], np.float32)
  )
  out = to_numpy(ex.execute("read", np.array([3, 0, 1], np.int32)))
  np.testing.assert_array_equal(out, [[3, 4], [0, 0], [1, 2]])
  assert ex.apis["read"].output_space == FloatBox((2,), add_batch_rank=True)
  assert ex.apis["write"].output_space == IntBox(shape=())


def test_never_complete_component_is_named():
  class OnlyReads(Component):
    def __init__(self):
      super().__init__(scope="root")
      from ingraph_rl.testing.toy_components import Store

      self.store = Store()

    @api
    def read(self, index):
      return self.store.read(index)

  with pytest.raises(
    InputIncompleteError,
    match=r"'root/store' misses the "
    r"spaces of \['values'\]",
  ) as e:
    TFExecutor(OnlyReads(), {"index": IntBox(8, add_batch_rank=True)})
  assert "'root/store'._graph_fn_read" in str(e.value)


def test_input_incomplete_cycle_is_named():
  class Loop(Component):
    """Its variables need `x`'s space, but `x` is its own output."""

    def __init__(self, scope="loop"):
      super().__init__(scope=scope)

    def create_variables(self, input_spaces):
      self.v = self.add_variable("v", input_spaces["x"].shape)

    @api
    def call(self, x):
      return self._graph_fn_f(x)

    @graph_fn
    def _graph_fn_f(self, x):
      return x + self.v

  class Root(Component):
    def __init__(self):
      super().__init__(scope="root")
      self.loop = Loop()

    @api
    def call(self, seed):
      return self.loop.call(self.loop.call(seed))

  # Loop's variables want both call sites' `x`; the second is its own
  # output, so with variable_args = None it would wait forever — unless
  # the first known space is used, which is what the builder does.
  ex = TFExecutor(Root(), {"seed": FloatBox((2,))})
  np.testing.assert_allclose(ex.execute("call", np.ones(2, np.float32)), [1, 1])

  class Stuck(Loop):
    variable_args = ("x", "y")

  class Root2(Component):
    def __init__(self):
      super().__init__(scope="root")
      self.loop = Stuck()

    @api
    def call(self, seed):
      return self.loop.call(seed)

  with pytest.raises(
    InputIncompleteError,
    match=r"'root/loop' misses the "
    r"spaces of \['y'\]",
  ):
    TFExecutor(Root2(), {"seed": FloatBox((2,))})


@pytest.mark.parametrize("executor", EXECUTORS)
def test_output_spaces_keep_batch_and_time_ranks(executor):
  class Ops(Component):
    @api
    def same(self, x):
      return self._graph_fn_same(x)

    @api
    def reduce(self, x):
      return self._graph_fn_reduce(x)

    @graph_fn(neutral=True)
    def _graph_fn_same(self, x):
      return {"double": x * 2, "flag": x > 0}

    @graph_fn
    def _graph_fn_reduce(self, x):
      import tensorflow as tf

      return tf.reduce_sum(x, axis=[0, 1])

    @_graph_fn_reduce.torch
    def _graph_fn_reduce(self, x):
      return x.sum(dim=(0, 1))

  space = FloatBox(
    (4,), add_batch_rank=True, add_time_rank=True, time_major=True
  )
  ex = executor(Ops(), {"x": space})
  out = ex.apis["same"].output_space
  assert isinstance(out, Dict)
  assert out["double"] == space
  assert out["flag"].has_time_rank and out["flag"].time_major
  assert ex.apis["reduce"].output_space == FloatBox((4,))


def test_space_errors_at_build_name_component_api_and_argument():
  from ingraph_rl.components.layers import Dense

  with pytest.raises(SpaceError) as e:
    TFExecutor(Dense(3), {"inputs": IntBox(5, add_batch_rank=True)})
  msg = str(e.value)
  assert "component 'dense'" in msg and "API method 'call'" in msg
  assert "argument 'inputs'" in msg and "expected: FloatBox" in msg
  assert "received: IntBox" in msg


def test_building_twice_is_refused():
  chain = Chain()
  TFExecutor(chain, {"x": FloatBox((3,))})
  from ingraph_rl.errors import AssemblyError

  with pytest.raises(
    AssemblyError,
    match="already built by the tensorflow executor; build a copy",
  ):
    TorchExecutor(chain, {"x": FloatBox((3,))})


@pytest.mark.parametrize("executor", EXECUTORS)
def test_time_only_inputs_give_time_only_outputs(executor):
  from ingraph_rl.components.layers import Dense

  ex = executor(Dense(7), {"inputs": FloatBox((4,), add_time_rank=True)})
  assert ex.apis["call"].output_space == FloatBox((7,), add_time_rank=True)


def test_torch_body_failing_on_build_samples_is_a_named_build_error():
  from ingraph_rl.errors import BuildError

  class NeedsSmall(Component):
    @api
    def call(self, x):
      return self._graph_fn_f(x)

    @graph_fn
    def _graph_fn_f(self, x):
      return x

    @_graph_fn_f.torch
    def _graph_fn_f(self, x):
      return x.reshape(2, 3, 5)  # Only valid for one batch size.

  with pytest.raises(
    BuildError,
    match=r"'needs_small'._graph_fn_f failed on "
    r"sample inputs during the torch build \(RuntimeError",
  ):
    TorchExecutor(
      NeedsSmall(),
      {"x": FloatBox((5,), add_batch_rank=True, add_time_rank=True)},
    )


@pytest.mark.parametrize("executor", EXECUTORS)
def test_declared_output_space_wins_over_inference(executor):
  declared = IntBox(5, shape=(2,), add_batch_rank=True, add_time_rank=True)

  class Declares(Component):
    @api
    def call(self, x):
      return self._graph_fn_f(x)

    @graph_fn(neutral=True, output_space=lambda self: declared)
    def _graph_fn_f(self, x):
      return x

  ex = executor(Declares(), {"x": IntBox(5, shape=(2,), add_batch_rank=True)})
  assert ex.apis["call"].output_space == declared
