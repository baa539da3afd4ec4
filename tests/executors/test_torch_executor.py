"""TorchExecutor: same meta graph, torch bodies, TF-layout weights."""

import numpy as np
import pytest
import torch

from ingraph_rl.components.layers import Dense
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError
from ingraph_rl.executors.torch import TorchExecutor
from ingraph_rl.spaces import FloatBox, IntBox
from ingraph_rl.testing.component_test import to_numpy
from ingraph_rl.testing.toy_components import Chain, Memoryish


def test_runs_the_same_wiring_eagerly():
  ex = TorchExecutor(Chain(), {"x": FloatBox((3,), add_batch_rank=True)})
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  out = ex.execute("call", x)
  assert isinstance(out, torch.Tensor)
  np.testing.assert_allclose(to_numpy(out), 3 * x + 1)


def test_missing_torch_body_is_named():
  class TFOnly(Component):
    @api
    def call(self, x):
      return self._graph_fn_f(x)

    @graph_fn
    def _graph_fn_f(self, x):
      return x

  with pytest.raises(
    BuildError,
    match=r"'tf_only'._graph_fn_f has no torch "
    r"body; register one with @_graph_fn_f.torch",
  ):
    TorchExecutor(TFOnly(), {"x": FloatBox()})


def test_weights_are_exchanged_in_tf_layout():
  ex = TorchExecutor(Dense(3), {"inputs": FloatBox((5,), add_batch_rank=True)})
  assert tuple(ex.registry.variables["dense/kernel"].shape) == (3, 5)
  w = ex.get_weights()
  assert w["dense/kernel"].shape == (5, 3)
  w["dense/kernel"] = np.arange(15, dtype=np.float32).reshape(5, 3)
  ex.set_weights(w)
  np.testing.assert_array_equal(
    ex.get_weights()["dense/kernel"], w["dense/kernel"]
  )
  x = np.eye(5, dtype=np.float32)[:2]
  np.testing.assert_allclose(
    to_numpy(ex.execute("call", x)), x @ w["dense/kernel"]
  )


def test_build_passes_leave_no_side_effects():
  ex = TorchExecutor(
    Memoryish(),
    {
      "index": IntBox(8, add_batch_rank=True),
      "values": FloatBox((2,), add_batch_rank=True),
    },
  )
  # The build ran `write` on sample data twice; the buffer is reset.
  np.testing.assert_array_equal(
    ex.get_weights()["root/store/buf"], np.zeros((8, 2))
  )


def test_acting_records_no_autograd_history():
  ex = TorchExecutor(Dense(3), {"inputs": FloatBox((5,), add_batch_rank=True)})
  out = ex.execute("call", np.ones((2, 5), np.float32))
  assert out.grad_fn is None and not out.requires_grad


def test_read_only_inputs_are_copied_not_shared():
  import warnings

  from ingraph_rl.executors.torch import to_torch

  space = FloatBox((3,), add_batch_rank=True)
  frozen = np.arange(6, dtype=np.float32).reshape(2, 3)
  frozen.flags.writeable = False  # As a TF tensor's .numpy() is.
  writable = frozen.copy()
  with warnings.catch_warnings():
    warnings.simplefilter("error", UserWarning)  # torch's "not writable".
    copied, shared = to_torch(frozen, space), to_torch(writable, space)
  copied.add_(1.0)
  np.testing.assert_array_equal(frozen, np.arange(6).reshape(2, 3))
  shared.add_(1.0)  # A writable array stays shared (no copy per call).
  np.testing.assert_array_equal(writable, np.arange(1, 7).reshape(2, 3))
