"""The parity helper itself: it passes equal backends and catches a wrong
torch body, a wrong weight copy and a changed structure."""

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.components.layers import Dense
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing import ComponentTest, assert_parity

SPACES = {"x": FloatBox((3,), add_batch_rank=True)}


class Square(Component):
  def __init__(self, torch_offset=0.0, torch_as_dict=False):
    super().__init__(scope="square")
    self.torch_offset = torch_offset
    self.torch_as_dict = torch_as_dict

  @api
  def call(self, x):
    return self._graph_fn_sq(x)

  @graph_fn
  def _graph_fn_sq(self, x):
    return tf.square(x)

  @_graph_fn_sq.torch
  def _graph_fn_sq(self, x):
    out = x * x + self.torch_offset
    return {"out": out} if self.torch_as_dict else out


def test_equal_backends_pass_and_outputs_are_returned():
  tf_outs, torch_outs = assert_parity(Square(), SPACES, ["call", "call"])
  assert len(tf_outs) == 2
  np.testing.assert_allclose(tf_outs[0], torch_outs[0])


def test_wrong_torch_body_is_caught():
  with pytest.raises(
    AssertionError,
    match=r"TF vs torch differ in call 0 "
    r"\('call'\)",
  ):
    assert_parity(Square(torch_offset=1e-3), SPACES, ["call"], atol=1e-5)


def test_structure_change_is_caught():
  with pytest.raises(AssertionError, match="differ in call 0"):
    assert_parity(Square(torch_as_dict=True), SPACES, ["call"])


def test_weights_are_copied_unless_told_not_to():
  spaces = {"inputs": FloatBox((4,), add_batch_rank=True)}
  assert_parity(Dense(3), spaces, ["call"])
  # Different seeds per backend: without the copy the outputs differ.
  with pytest.raises(AssertionError):
    assert_parity(Dense(3), spaces, ["call"], copy_weights=False)


def test_component_test_compares_expected_values():
  t = ComponentTest(Square(), SPACES)
  x = np.array([[1, 2, 3]], np.float32)
  t.test("call", x, expected=np.array([[1, 4, 9]], np.float32))
  with pytest.raises(AssertionError):
    t.test("call", x, expected=np.array([[1, 4, 10]], np.float32))
