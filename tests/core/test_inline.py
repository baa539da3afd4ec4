"""Inline APIs: a graph function runs a sub-component API inside its own
control flow (a tf.while_loop in TF, a Python loop in torch)."""

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn, inline
from ingraph_rl.errors import AssemblyError, InputIncompleteError
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.executors.torch import TorchExecutor
from ingraph_rl.spaces import FloatBox, IntBox
from ingraph_rl.testing.component_test import to_numpy
from ingraph_rl.testing.toy_components import Counter, Scale


class Looper(Component):
  """run(x, n): n times x <- counter(scale(x)) = 3x + 1, in ONE graph."""

  def __init__(self):
    super().__init__(scope="looper")
    self.scale = Scale(3.0)
    self.counter = Counter()

  @api
  def step(self, x):
    return self.counter.call(self.scale.call(x))

  @api
  def run(self, x, num_steps):
    return self._graph_fn_run(x, num_steps, inline(self.step))

  @graph_fn
  def _graph_fn_run(self, x, num_steps, step):
    _, out = tf.while_loop(
      lambda i, _: i < num_steps,
      lambda i, v: (i + 1, step(v)),
      (tf.constant(0), x),
      parallel_iterations=1,
    )
    return out

  @_graph_fn_run.torch
  def _graph_fn_run(self, x, num_steps, step):
    for _ in range(int(num_steps)):
      x = step(x)
    return x


SPACES = {
  "x": FloatBox((2,), add_batch_rank=True),
  "num_steps": IntBox(6, low=0),
}


@pytest.mark.parametrize("executor", [TFExecutor, TorchExecutor])
def test_loop_runs_the_inline_api(executor):
  ex = executor(Looper(), SPACES)
  x = np.array([[0.0, 1.0]], np.float32)
  ref = x.copy()
  for _ in range(4):
    ref = 3 * ref + 1
  np.testing.assert_allclose(to_numpy(ex.execute("run", x, 4)), ref)
  np.testing.assert_allclose(to_numpy(ex.execute("run", x, 0)), x)


def test_inline_sees_variable_updates():
  ex = TFExecutor(Looper(), SPACES)
  ex.set_weights({"looper/counter/offset": np.array([0.0, 10.0], np.float32)})
  x = np.zeros((1, 2), np.float32)
  # x <- 3x + [0, 10], twice: [0, 40].
  np.testing.assert_allclose(ex.execute("run", x, 2), [[0.0, 40.0]])


def test_inline_components_need_a_root_api_that_builds_them():
  class OnlyInline(Looper):
    """No `step` root API: the counter's variables are never made."""

  with pytest.raises(InputIncompleteError, match="'looper/counter'"):
    TFExecutor(OnlyInline(), SPACES, api_names=["run"])


def test_inline_outside_subtree_is_an_assembly_error():
  stranger = Scale(scope="stranger")

  class Bad(Component):
    @api
    def run(self, x):
      return self._graph_fn_f(x, inline(stranger.call))

    @graph_fn(neutral=True)
    def _graph_fn_f(self, x, fn):
      return fn(x)

  with pytest.raises(AssemblyError, match="not one of its sub-components"):
    TFExecutor(Bad(), {"x": FloatBox((2,))})
