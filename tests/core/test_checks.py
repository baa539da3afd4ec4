"""In-graph value checks surface as SpaceErrors and stop state changes."""

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import SpaceError
from ingraph_rl.executors.checks import tf_check, torch_check
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.executors.torch import TorchExecutor
from ingraph_rl.spaces import FloatBox
from ingraph_rl.utils.lazy import torch


class Accumulator(Component):
  def __init__(self):
    super().__init__(scope="acc")

  def create_variables(self, input_spaces):
    self.total = self.add_variable("total", ())

  @api
  def add(self, values):
    return self._graph_fn_add(values)

  @graph_fn
  def _graph_fn_add(self, values):
    ok = tf.reduce_all(tf.math.is_finite(values) & (values > 0))
    with tf.control_dependencies(
      [tf_check(ok, self, "add", "values", "values must be finite and > 0")]
    ):
      self.total.assign_add(tf.reduce_sum(values))
    return tf.identity(self.total)

  @_graph_fn_add.torch
  def _graph_fn_add(self, values):
    torch_check(
      bool(torch.all(torch.isfinite(values) & (values > 0))),
      self,
      "add",
      "values",
      "values must be finite and > 0",
    )
    with torch.no_grad():
      self.total += values.sum()
    return self.total.detach().clone()


@pytest.mark.parametrize("executor", [TFExecutor, TorchExecutor])
@pytest.mark.parametrize("bad", [-1.0, 0.0, np.nan, np.inf])
def test_failed_value_check_is_a_space_error_and_changes_nothing(executor, bad):
  ex = executor(Accumulator(), {"values": FloatBox(add_batch_rank=True)})
  ex.execute("add", np.array([1.0, 2.0], np.float32))
  with pytest.raises(SpaceError) as e:
    ex.execute("add", np.array([3.0, bad], np.float32))
  where = "component 'acc', API method 'add', argument 'values': "
  if np.isfinite(bad):
    assert str(e.value) == where + "values must be finite and > 0"
  else:
    # The executor's own argument check refuses non-finite floats first.
    assert str(e.value).startswith(where + "non-finite values")
  assert float(ex.get_weights()["acc/total"]) == 3.0
