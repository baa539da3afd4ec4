"""A staging area: a small buffer on the compute device, so the copy of the
next batch to the device overlaps with the compute on the current one (the
learner side of IMPALA).

TF: the raw `Stage` / `Unstage` / `StageSize` ops on a buffer named by a
`shared_name` unique to each built component; they work inside the
executor's `tf.function`s.

TF only: staging has no number to compare, so the torch mirror has none
(the torch executor refuses it at build with a BuildError naming the
component).
"""

import tensorflow as tf
import tree

from ingraph_rl.components.queues import _common
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError
from ingraph_rl.executors.tf_spaces import tensor_spec, tf_dtype


class _TFStagingBuffer:
  """What the TF ops need to find the buffer: TF makes the buffer itself,
  in the resource manager of the device the ops run on, when first used."""

  def __init__(self, dtypes, capacity, shared_name):
    self.dtypes = list(dtypes)
    self.capacity = capacity
    self.shared_name = shared_name

  def attrs(self):
    return dict(
      capacity=self.capacity,
      memory_limit=0,
      container="",
      shared_name=self.shared_name,
    )

  def __repr__(self):
    return f"_TFStagingBuffer({self.shared_name!r})"


class StagingArea(Component):
  """Stages values of `record_space` for the next step.

  Args:
    record_space: the space of one staged value, with the batch/time ranks
      it has (e.g. `IMPALABuilder.record_space(obs).with_batch_rank()` for a
      dequeued batch);
      per-item shapes must be fully known. Dtypes are kept.
    capacity: how many values may be staged; `put` blocks while it is full
      (0: unbounded).

  API methods:
    put(records): stages a value; returns the number staged right after
      (int32 scalar).
    get(): removes and returns the oldest staged value (`record_space`
      nest); blocks while none is staged.
    size(): the number of staged values (int32 scalar).

  Usage pattern (IMPALA's learner): place the component on the GPU with the
  executor's `device_map`, stage batch 0 once, then in ONE step API call
  `get()` (batch k, already on the device) BEFORE `put(next_batch)` (batch
  k+1). Stateful ops run in call order inside the API's `tf.function`, so
  with capacity 1 the put never waits; the copy of batch k+1 runs while
  batch k is used, for one step of policy lag.
  Calling `put` before `get` on a full area blocks forever.

      class Learner(Component):
        def __init__(self, record_space):
          super().__init__(scope="learner")
          self.queue = FIFOQueue(record_space, capacity=64)
          self.stage = StagingArea(record_space.with_batch_rank())

        @api
        def prime(self, num_records):          # once: stage batch 0
          return self.stage.put(self.queue.dequeue_many(num_records))

        @api
        def step(self, num_records):
          batch = self.stage.get()             # batch k
          self.stage.put(self.queue.dequeue_many(num_records))  # batch k+1
          return self.loss.compute(batch)      # ... train on batch k

  Every build gets its own buffer name, so two staging areas (or two
  executors of copies of one component) never share values. Nothing is
  saved in checkpoints; a SavedModel signature that stages uses the same
  buffer name in the loading process. TF keeps the buffer (with up to
  `capacity` values) until the process ends.

  >>> import numpy as np
  >>> from ingraph_rl.components.queues import StagingArea
  >>> from ingraph_rl.executors.tensorflow import TFExecutor
  >>> from ingraph_rl.spaces import FloatBox
  >>> space = FloatBox(shape=(3,), add_batch_rank=True)
  >>> ex = TFExecutor(StagingArea(space), {"records": space})
  >>> int(ex.execute("put", np.ones((2, 3), np.float32)))
  1
  >>> ex.execute("get").numpy().tolist(), int(ex.execute("size"))
  ([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], 0)
  """

  # The buffer depends on `record_space` only: it is made at once.
  variable_args = ()

  def __init__(self, record_space, capacity=1, scope="staging_area"):
    super().__init__(scope=scope)
    self.record_space = _common.validate_record_space(
      record_space, scope, per_item=False
    )
    if (
      isinstance(capacity, bool)
      or not isinstance(capacity, int)
      or capacity < 0
    ):
      raise BuildError(
        f"'{scope}': capacity must be an int >= 0 (0: "
        f"unbounded), got {capacity!r}"
      )
    self.capacity = capacity
    self._leaf_spaces = [s for _, s in self.record_space.flatten()]
    self.buffer = None

  def create_variables(self, input_spaces):
    # Made per build (not in __init__), so deep copies never share it.
    name = _common.unique_shared_name(self.path)
    self.resource_name = name
    self.buffer = self.add_resource(
      "buffer",
      tf=lambda: _TFStagingBuffer(
        [tf_dtype(s) for s in self._leaf_spaces], self.capacity, name
      ),
    )

  # --- API -------------------------------------------------------------

  @api
  def put(self, records):
    return self._graph_fn_put(records)

  @api
  def get(self):
    return self._graph_fn_get()

  @api
  def size(self):
    return self._graph_fn_size()

  # --- TF bodies -------------------------------------------------------

  def _tf_size(self):
    return tf.raw_ops.StageSize(
      dtypes=self.buffer.dtypes, **self.buffer.attrs()
    )

  @graph_fn
  def _graph_fn_put(self, records):
    _common.check_value(self, self.record_space, records, "put", "records")
    op = tf.raw_ops.Stage(values=tree.flatten(records), **self.buffer.attrs())
    with tf.control_dependencies([op]):
      return self._tf_size()

  @graph_fn(output_space=lambda self: self.record_space)
  def _graph_fn_get(self):
    leaves = tf.raw_ops.Unstage(
      dtypes=self.buffer.dtypes, **self.buffer.attrs()
    )
    for t, s in zip(leaves, self._leaf_spaces):
      t.set_shape(tensor_spec(s).shape)
    return self.record_space.unflatten_value(leaves)

  @graph_fn
  def _graph_fn_size(self):
    return self._tf_size()
