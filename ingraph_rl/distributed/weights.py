"""Weights the learner publishes for actors in other processes.

TF2 eager `tf.Variable`s replace their `shared_name` with a unique id, so
another client cannot find them; raw `VarHandleOp`s with a `shared_name`,
made inside a `tf.function` on the learner's device, are found by name from
every client (DESIGN.md section 6). The learner assigns its weights to them
after updates; an actor reads them, on the learner's device, inside its
fused unroll function.
"""

import tensorflow as tf


def shared_variable(name, shape, dtype):
  """A handle to the raw resource variable `name` (every client that names
  it gets the same variable on the current device)."""
  return tf.raw_ops.VarHandleOp(
    dtype=dtype, shape=shape, container="", shared_name=name
  )


def weight_specs(weights_space):
  """{path: (shape, dtype)} of a weights space (a Dict of boxes, or of
  Dicts of boxes: nested keys join with "/"): what `PublishedWeights`
  holds."""
  return {
    "/".join(path): (tuple(s.shape), tf.as_dtype(s.dtype))
    for path, s in weights_space.flatten()
  }


def flat_weights(weights_space, weights):
  """`weights` (nested like `weights_space`) keyed as `weight_specs`."""
  out = {}
  for path, _ in weights_space.flatten():
    value = weights
    for key in path:
      value = value[key]
    out["/".join(path)] = value
  return out


def nested_weights(weights_space, flat):
  """The inverse of `flat_weights`."""
  out = {}
  for path, _ in weights_space.flatten():
    node = out
    for key in path[:-1]:
      node = node.setdefault(key, {})
    node[path[-1]] = flat["/".join(path)]
  return out


class SharedCounters:
  """Named scalar totals on one device that several clients add to
  (actors: env steps, episodes) and one reads and sets (the learner).

    counters = SharedCounters({"env_steps": tf.int64}, device)
    counters.assign({"env_steps": 0})   # the learner, at its start
    counters.add({"env_steps": 400})    # an actor -> the new totals
  """

  def __init__(self, dtypes, device, prefix="ingraph_rl/counters"):
    self.dtypes = {k: tf.as_dtype(d) for k, d in sorted(dtypes.items())}
    self.device = device
    self.prefix = prefix
    self.read = tf.function(self._read, input_signature=[])
    self._add_fn = tf.function(self._add)
    self._assign_fn = tf.function(self._assign)

  def _tensors(self, values):
    # Python numbers would retrace the function for every new value.
    return {k: tf.cast(v, self.dtypes[k]) for k, v in values.items()}

  def add(self, values):
    """Adds {name: value} (a subset); fails (NotFound or
    FailedPrecondition) before the first `assign`. Returns every total
    after the add. Callable inside a tf.function."""
    return self._add_fn(self._tensors(values))

  def assign(self, values):
    """Sets {name: value} (a subset). Returns every total."""
    return self._assign_fn(self._tensors(values))

  def _handle(self, name):
    return shared_variable(f"{self.prefix}/{name}", [], self.dtypes[name])

  def _read(self):
    with tf.device(self.device):
      return {
        k: tf.raw_ops.ReadVariableOp(resource=self._handle(k), dtype=d)
        for k, d in self.dtypes.items()
      }

  def _add(self, values):
    with tf.device(self.device):
      ops = [
        tf.raw_ops.AssignAddVariableOp(
          resource=self._handle(k), value=tf.cast(v, self.dtypes[k])
        )
        for k, v in values.items()
      ]
      with tf.control_dependencies(ops):
        return self._read()

  def _assign(self, values):
    with tf.device(self.device):
      ops = [
        tf.raw_ops.AssignVariableOp(
          resource=self._handle(k), value=tf.cast(v, self.dtypes[k])
        )
        for k, v in values.items()
      ]
      with tf.control_dependencies(ops):
        return self._read()


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
    # The version alone: a synchronous actor polls it between fragments.
    self.read_version = tf.function(self._read_version, input_signature=[])

  @classmethod
  def like(cls, weights, device, **kwargs):
    """From a {path: tensor} dict (e.g. a learner's `get_weights()`)."""
    return cls(
      {p: (v.shape, v.dtype) for p, v in weights.items()}, device, **kwargs
    )

  def _handle(self, name, shape, dtype):
    return shared_variable(f"{self.prefix}/{name}", shape, dtype)

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

  def _read_version(self):
    """The int64 version (FailedPrecondition before the first publish)."""
    with tf.device(self.device):
      return tf.raw_ops.ReadVariableOp(
        resource=self._version_handle(), dtype=tf.int64
      )

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
