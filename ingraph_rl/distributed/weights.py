"""Weights the learner publishes for actors in other processes.

TF2 eager `tf.Variable`s replace their `shared_name` with a unique id, so
another client cannot find them; raw `VarHandleOp`s with a `shared_name`,
made inside a `tf.function` on the learner's device, are found by name from
every client (DESIGN.md section 6). The learner assigns its weights to them
after updates; an actor reads them, on the learner's device, inside its
fused unroll function.
"""

import tensorflow as tf


class PublishedWeights:
  """`publish(weights)` (learner) and `read()` (actor) of {path: tensor}
  with fixed shapes and dtypes, plus a version counter."""

  def __init__(self, specs, device, prefix="ingraph_rl/published"):
    """specs: {path: (shape, tf dtype)}; device: where the values live."""
    self.specs = {
      p: (tuple(s), tf.as_dtype(d)) for p, (s, d) in sorted(specs.items())
    }
    self.device = device
    self.prefix = prefix
    signature = [{p: tf.TensorSpec(s, d) for p, (s, d) in self.specs.items()}]
    self.publish = tf.function(self._publish, input_signature=signature)
    self.read = tf.function(self._read, input_signature=[])

  @classmethod
  def like(cls, weights, device, **kwargs):
    """From a {path: tensor} dict (e.g. a learner's `get_weights()`)."""
    return cls(
      {p: (v.shape, v.dtype) for p, v in weights.items()}, device, **kwargs
    )

  def _handle(self, name, shape, dtype):
    return tf.raw_ops.VarHandleOp(
      dtype=dtype,
      shape=shape,
      container="",
      shared_name=f"{self.prefix}/{name}",
    )

  def _version_handle(self):
    return self._handle("__version__", [], tf.int64)

  def _publish(self, weights):
    with tf.device(self.device):
      ops = [
        tf.raw_ops.AssignVariableOp(
          resource=self._handle(p, s, d), value=weights[p]
        )
        for p, (s, d) in self.specs.items()
      ]
      version = self._version_handle()
      with tf.control_dependencies(ops):
        initialized = tf.raw_ops.VarIsInitializedOp(resource=version)
        current = tf.cond(
          initialized,
          lambda: tf.raw_ops.ReadVariableOp(resource=version, dtype=tf.int64),
          lambda: tf.constant(0, tf.int64),
        )
        new = current + 1
        assign = tf.raw_ops.AssignVariableOp(resource=version, value=new)
      with tf.control_dependencies([assign]):
        return tf.identity(new)

  def _read(self):
    """{"weights": {path: tensor}, "version": int64}; fails with
    FailedPrecondition (uninitialized) before the first publish."""
    with tf.device(self.device):
      weights = {
        p: tf.raw_ops.ReadVariableOp(resource=self._handle(p, s, d), dtype=d)
        for p, (s, d) in self.specs.items()
      }
      version = tf.raw_ops.ReadVariableOp(
        resource=self._version_handle(), dtype=tf.int64
      )
    return {"weights": weights, "version": version}
