"""The opaque size helper of executors/checks.py: the sizes a check
compares stay run-time values, so the check (not a later op's error)
rejects a bad batch."""

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.executors.checks import tf_leading_sizes


def test_leading_sizes_of_several_tensors_in_one_call():
  @tf.function(
    input_signature=[
      tf.TensorSpec([None, 3]),
      tf.TensorSpec([None], tf.int32),
      tf.TensorSpec([None, 2, 2], tf.bool),
    ]
  )
  def sizes(a, b, c):
    return tf_leading_sizes([a, b, c])

  got = sizes(
    np.zeros((5, 3)), np.zeros(7, np.int32), np.zeros((1, 2, 2), bool)
  )
  np.testing.assert_array_equal(got.numpy(), [5, 7, 1])
  graph = sizes.get_concrete_function().graph.as_graph_def()
  calls = [
    n
    for n in graph.node
    if n.op in ("PartitionedCall", "StatefulPartitionedCall")
  ]
  assert len(calls) == 1  # One call for the three sizes.


def test_the_check_wins_over_a_later_op_that_implies_the_size():
  v = tf.Variable(tf.zeros([3]))

  @tf.function(input_signature=[tf.TensorSpec([None])])
  def write(x):
    ok = tf.equal(tf_leading_sizes([x])[0], 3)
    with tf.control_dependencies(
      [tf.debugging.Assert(ok, ["rows: expected 3"])]
    ):
      v.assign(x)
    return tf.identity(v)

  np.testing.assert_array_equal(write(np.ones(3, np.float32)).numpy(), 1.0)
  with pytest.raises(tf.errors.InvalidArgumentError, match="rows: expected 3"):
    write(np.ones(4, np.float32))
  np.testing.assert_array_equal(v.numpy(), 1.0)  # Nothing written.
