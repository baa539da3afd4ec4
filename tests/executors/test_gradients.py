"""Gradient tapes in the TF executor: only APIs that differentiate record,
at build and at execution, and `tf_no_recording` nests."""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.eager import record
from tensorflow.python.ops import gradients_util

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError
from ingraph_rl.executors import gradients
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.spaces import FloatBox


class TapeProbe(Component):
  """`double(x)`: a while loop, no gradients. `grad(x)`: d sum(w * x^2) /
  dw = sum(x^2), from the tape. Each graph function notes whether a tape
  could record it, per trace."""

  def __init__(self, scope="probe"):
    super().__init__(scope=scope)
    self.taped = {"double": [], "grad": []}

  def create_variables(self, input_spaces):
    self.w = self.add_variable("w", (), initializer="ones")

  @api
  def double(self, x):
    return self._graph_fn_double(x)

  @api
  def grad(self, x):
    return self._graph_fn_grad(x)

  @graph_fn
  def _graph_fn_double(self, x):
    self.taped["double"].append(record.could_possibly_record())
    _, y = tf.while_loop(
      lambda i, y: i < 1,
      lambda i, y: (i + 1, tf.cond(i < 1, lambda: 2 * y, lambda: y)),
      (0, x),
    )
    return y

  @graph_fn(needs_gradients=True)
  def _graph_fn_grad(self, x):
    self.taped["grad"].append(record.could_possibly_record())
    loss = tf.reduce_sum(self.w * x * x)
    return gradients.tf_gradients(loss, self.w)


def test_only_apis_that_differentiate_record_on_a_tape():
  """Build (the scratch pass) and trace: `double` is never taped (so its
  loop builds no gradient functions), `grad` always is, and its gradient
  is the hand-computed sum(x^2)."""
  probe = TapeProbe()
  ex = TFExecutor(probe, {"x": FloatBox(shape=(3,), add_batch_rank=True)})
  assert probe.taped == {"double": [False, False], "grad": [True, True]}
  x = np.array([[1.0, 2.0, 3.0]], np.float32)
  np.testing.assert_allclose(ex.execute("double", x), 2 * x)
  assert float(ex.execute("grad", x)) == pytest.approx(14.0)


def test_no_recording_nests_and_a_new_tape_records_inside_it():
  x = tf.constant(3.0)
  with gradients.tf_recording(persistent=True) as outer:
    outer.watch(x)
    with gradients.tf_no_recording():
      with gradients.tf_no_recording():  # A tape stops once: no error.
        hidden = x * x
      with gradients.tf_recording() as inner:  # e.g. an inline update.
        inner.watch(x)
        seen = x * x
        assert float(gradients.tf_gradients(seen, x)) == 6.0
      still_hidden = x * x
    shown = x * x
  assert outer.gradient(hidden, x) is None
  assert outer.gradient(still_hidden, x) is None
  assert float(outer.gradient(shown, x)) == 6.0


def test_the_recording_tape_allows_first_order_gradients_only():
  """Not persistent by default: TF then makes each while loop recorded on
  it as a plain op, where a persistent tape (higher-order gradients
  possible) makes it build the loop's forward and backward functions."""
  x = tf.constant(3.0)
  for persistent, types in (
    (False, gradients_util.POSSIBLE_GRADIENT_TYPES_FIRST_ORDER),
    (True, gradients_util.POSSIBLE_GRADIENT_TYPES_HIGHER_ORDER),
  ):
    with gradients.tf_recording(persistent=persistent) as tape:
      tape.watch(x)
      assert gradients_util.PossibleTapeGradientTypes([x]) == types


def test_a_second_gradient_on_one_recording_is_a_clear_error():
  x = tf.constant(3.0)
  with gradients.tf_recording() as tape:
    tape.watch(x)
    y = x * x
    assert float(gradients.tf_gradients(y, x)) == 6.0
    with pytest.raises(BuildError, match="tf_gradients\\(\\) twice"):
      gradients.tf_gradients(y, x)
  with gradients.tf_recording(persistent=True) as tape:
    tape.watch(x)
    y = x * x
    assert float(gradients.tf_gradients(y, x)) == 6.0
    assert float(gradients.tf_gradients(2 * y, x)) == 12.0
  # A recording nested in a spent one starts fresh, and the outer one
  # stays spent after it.
  with gradients.tf_recording() as outer:
    outer.watch(x)
    gradients.tf_gradients(x * x, x)
    with gradients.tf_recording() as inner:
      inner.watch(x)
      assert float(gradients.tf_gradients(x * x, x)) == 6.0
    with pytest.raises(BuildError, match="twice"):
      gradients.tf_gradients(x * x, x)


def test_recordings_take_turns_one_plain_tape_each():
  """The build pass's tapes: each key's graph functions record on its own
  plain tape, across turns, and nothing of another key's turn goes on it."""
  va, vb = tf.Variable(3.0), tf.Variable(5.0)
  first = gradients_util.POSSIBLE_GRADIENT_TYPES_FIRST_ORDER
  with gradients.tf_recordings(["a", "b"]) as turn:
    with turn("a"):
      loss_a = va * va
      # One tape records here: no while loop builds its gradients.
      assert gradients_util.PossibleTapeGradientTypes([va.value()]) == first
    with turn("b"):
      loss_b = 4.0 * vb
      on_b_only = 7.0 * va
    with turn("a"):
      loss_a += 2.0 * va
      grads = gradients.tf_gradients([loss_a, on_b_only], [va, vb])
      assert [float(g) for g in grads if g is not None] == [8.0]
      assert grads[1] is None
      with pytest.raises(BuildError, match="twice"):
        gradients.tf_gradients(loss_a, va)
    with turn("b"):
      assert float(gradients.tf_gradients(loss_b, vb)) == 4.0
    with turn(None), pytest.raises(BuildError, match="outside a recorded"):
      gradients.tf_gradients(loss_a, va)
