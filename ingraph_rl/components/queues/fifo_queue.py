"""A first-in first-out queue of nested records, shared between threads (and,
with a `shared_name`, between TF clients): the actor -> learner buffer of
IMPALA.

A `TrackableResource` around the raw `FIFOQueueV2` ops, so the queue is
part of SavedModels (plain `tf.queue.FIFOQueue` cannot be saved).

TF only: a queue has no number to compare, so the torch mirror has none
(the torch executor refuses it at build with a BuildError naming the
component).
"""

import numpy as np
import tensorflow as tf
import tree

from ingraph_rl.components.queues import _common
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.executors.checks import tf_check
from ingraph_rl.executors.tf_spaces import tf_dtype

# --- the TF resource ---------------------------------------------------------


class QueueResource(tf.saved_model.experimental.TrackableResource):
  """A TF FIFO queue: `FIFOQueueV2` made in `_create_resource`, so a
  SavedModel re-creates it (empty) when loaded. Make one from a space with
  `queue_resource`; its ops take `resource_handle`.

  dtypes, shapes: the TF dtype and the fixed shape of each component of a
    record, in order (what dequeue ops and `set_shape` need).
  destroy: destroy the queue when this Python object is garbage-collected
    (for a private, auto-named queue). A queue with a user-given
    shared_name is never destroyed here: other clients may still use it. A
    loaded SavedModel never destroys its queue.
  """

  def __init__(self, dtypes, shapes, capacity, shared_name, destroy):
    self._dtypes = list(dtypes)
    self._shapes = [tuple(s) for s in shapes]
    self._capacity = capacity
    self._shared_name = shared_name
    self._destroy = destroy
    super().__init__()

  @property
  def dtypes(self):
    """The components' TF dtypes (a new list)."""
    return list(self._dtypes)

  @property
  def shapes(self):
    """The components' shapes, tuples of ints (a new list)."""
    return list(self._shapes)

  def _create_resource(self):
    return tf.raw_ops.FIFOQueueV2(
      component_types=self._dtypes,
      shapes=[list(s) for s in self._shapes],
      capacity=self._capacity,
      container="",
      shared_name=self._shared_name,
    )

  def _destroy_resource(self):
    # Traced into the SavedModel's `_destroy_resource` function: a no-op
    # there (the loaded process owns no other copy to protect, but a loaded
    # model in the SAME process shares this queue by name).
    handle = self._resource_handle
    if not self._destroy or handle is None or tf.inside_function():
      return
    tf.raw_ops.DestroyResourceOp(resource=handle, ignore_lookup_error=True)


def queue_spec(space, batch_size=None):
  """(dtypes, shapes) of a queue whose records are values of `space`: per
  leaf, in `space.flatten()` order, its TF dtype and its shape. A leaf with
  a batch rank has a first dim of `batch_size` (a queue's shapes are fixed);
  a time rank, an unknown dim, or a batch rank without `batch_size` is a
  BuildError.

  >>> from ingraph_rl.spaces import FloatBox, IntBox, Tuple
  >>> queue_spec(Tuple(IntBox(), FloatBox((3,), add_batch_rank=True)), 4)
  ([tf.int32, tf.float32], [(), (4, 3)])
  """
  dtypes, shapes = [], []
  for path, leaf in space.flatten():
    shape = tuple(leaf.shape)
    if leaf.has_batch_rank:
      shape = (batch_size,) + shape
    if leaf.has_time_rank or any(d is None for d in shape):
      raise BuildError(
        f"queue_spec: leaf {list(path)} of {space!r} needs a fixed shape "
        f"(no time rank, no unknown dim; batch_size={batch_size!r} for a "
        f"batch rank)"
      )
    dtypes.append(tf_dtype(leaf))
    shapes.append(shape)
  return dtypes, shapes


def queue_resource(
  space, capacity, shared_name, *, destroy=False, batch_size=None
):
  """A `QueueResource` of `capacity` records of `space` (components as
  `queue_spec(space, batch_size)`), made now: a queue of that
  `shared_name` on the device that does not match raises
  `tf.errors.InvalidArgumentError` here. Make it where TF makes resources:
  in a component's `add_resource(..., tf=...)` factory.

  destroy: see `QueueResource`; False (the default) for a queue shared by
    name with other components or clients.
  """
  dtypes, shapes = queue_spec(space, batch_size)
  res = QueueResource(dtypes, shapes, capacity, shared_name, destroy)
  _ = res.resource_handle  # Makes the queue now, to fail here.
  return res


# --- the component ----------------------------------------------------------


class FIFOQueue(Component):
  """A blocking FIFO queue of records of `record_space`.

  Args:
    record_space: the space of ONE record (no batch rank): a box, or a
      Dict/Tuple nest of boxes with fully known shapes. Dtypes are kept
      (uint8 frames stay uint8).
    capacity: the most records the queue holds; enqueues block when full.
    shared_name: TF resource name. Queues with the same name on one TF
      device are one queue (records and capacity must match, else a
      BuildError); DESIGN.md section 6 shares such a queue across TF
      clients (not covered by this module's tests). Default: a unique name
      per build, so every built queue is private (and destroyed with its
      executor). After build, `resource_name` holds the name. A SavedModel
      re-creates the queue under the same name, empty: load it in a fresh
      process (a model loaded next to the live queue shares it).
    block_rows: records travel in blocks of this many (1: one by one). TF
      queues split a batch into its records on enqueue and stack them
      again on dequeue, ~0.2 us per record and leaf; a queue of blocks
      moves a whole block at that cost. Then enqueue_many and
      dequeue_many take multiples of `block_rows` records (else a
      SpaceError), `capacity` must be one, and enqueue/dequeue of a single
      record are a BuildError. Ape-X's learner batches use it.

  API methods (fixed return structures; argument names are those of the
  input spaces to give the executor):
    enqueue(records): one record (`record_space`); returns the queue size
      right after it was added (int32 scalar).
    enqueue_many(batch): records stacked on a leading batch dim
      (`record_space.with_batch_rank()`), added in order; returns the size
      after (int32). With more records than room, it adds them as room
      appears.
    dequeue(): the oldest record (`record_space` nest).
    dequeue_many(num_records): the oldest `num_records` records, stacked
      (always `record_space` with a batch rank, also for a Python int);
      `num_records` is an `IntBox()` input (or a Python int from a parent
      API); it may exceed the capacity. A negative one is a SpaceError.
    size(): the number of records in the queue (int32 scalar).
    close(cancel_pending_enqueues=False): no more enqueues. Without cancel,
      it waits for the enqueues pending before it, and closing a closed
      queue raises; with cancel it closes at once and pending enqueues fail.
      Returns the size after (int32). To choose at run time, give
      `cancel_pending_enqueues` a `BoolBox()` input space.

  Blocking and errors: dequeue/dequeue_many wait (without a time limit)
  until enough records arrive. After `close`, the remaining records can be
  dequeued; then a dequeue raises `tf.errors.OutOfRangeError` (TF executor,
  TF's error is passed through). An enqueue after close raises
  `tf.errors.CancelledError`. Values that do not match the spaces raise
  `ingraph_rl.errors.SpaceError` (at `execute` for root inputs, at build
  for values from a parent), and nothing is enqueued. The queue ops do
  not compile with XLA (`jit_compile`).

  Example (build only the APIs you give spaces for with `api_names=`):

  >>> import numpy as np
  >>> from ingraph_rl.components.queues import FIFOQueue
  >>> from ingraph_rl.executors.tensorflow import TFExecutor
  >>> from ingraph_rl.spaces import Dict, FloatBox, IntBox
  >>> record = Dict(frame=IntBox(256, shape=(2, 2), dtype=np.uint8),
  ...               reward=FloatBox())
  >>> ex = TFExecutor(FIFOQueue(record, capacity=8),
  ...                 {"records": record, "batch": record.with_batch_rank(),
  ...                  "num_records": IntBox()})
  >>> int(ex.execute("enqueue", {"frame": np.ones((2, 2), np.uint8),
  ...                            "reward": np.float32(0.5)}))
  1
  >>> int(ex.execute("enqueue_many", record.with_batch_rank().zeros(2)))
  3
  >>> out = ex.execute("dequeue")
  >>> out["frame"].dtype.name, float(out["reward"])
  ('uint8', 0.5)
  >>> ex.execute("dequeue_many", np.int32(2))["frame"].shape
  TensorShape([2, 2, 2])
  >>> int(ex.execute("close")), int(ex.execute("size"))
  (0, 0)
  """

  # The queue depends on `record_space` only: it is made at once.
  variable_args = ()

  def __init__(
    self,
    record_space,
    capacity,
    shared_name=None,
    scope="fifo_queue",
    block_rows=1,
  ):
    super().__init__(scope=scope)
    self.record_space = _common.validate_record_space(
      record_space, scope, per_item=True
    )
    self.batch_space = record_space.with_batch_rank()
    if (
      isinstance(capacity, bool)
      or not isinstance(capacity, int)
      or capacity < 1
    ):
      raise BuildError(
        f"'{scope}': capacity must be an int >= 1, got {capacity!r}"
      )
    self.capacity = capacity
    if (
      isinstance(block_rows, bool)
      or not isinstance(block_rows, int)
      or block_rows < 1
      or capacity % block_rows
    ):
      raise BuildError(
        f"'{scope}': block_rows must be an int >= 1 that divides the "
        f"capacity ({capacity}), got {block_rows!r}"
      )
    self.block_rows = block_rows
    if shared_name is not None and (
      not isinstance(shared_name, str) or not shared_name
    ):
      raise BuildError(
        f"'{scope}': shared_name must be a non-empty str or "
        f"None, got {shared_name!r}"
      )
    self.shared_name = shared_name
    self.queue = None

  def create_variables(self, input_spaces):
    name = self.shared_name or _common.unique_shared_name(self.path)
    self.resource_name = name

    def make_tf():
      try:
        blocks = self.block_rows > 1
        return queue_resource(
          self.record_space.with_batch_rank(blocks),
          self.capacity // self.block_rows,
          name,
          destroy=self.shared_name is None,
          batch_size=self.block_rows if blocks else None,
        )
      except tf.errors.InvalidArgumentError as e:
        raise BuildError(
          f"'{self.path}': cannot make queue '{name}': {e.message}"
        ) from None

    self.queue = self.add_resource("queue", tf=make_tf)

  # --- API --------------------------------------------------------------

  @api
  def enqueue(self, records):
    return self._graph_fn_enqueue(records)

  @api
  def enqueue_many(self, batch):
    return self._graph_fn_enqueue_many(batch)

  @api
  def dequeue(self):
    return self._graph_fn_dequeue()

  @api
  def dequeue_many(self, num_records):
    return self._graph_fn_dequeue_many(num_records)

  @api
  def size(self):
    return self._graph_fn_size()

  @api
  def close(self, cancel_pending_enqueues=False):
    return self._graph_fn_close(cancel_pending_enqueues)

  # --- TF bodies --------------------------------------------------------

  def _tf_size(self):
    size = tf.raw_ops.QueueSizeV2(handle=self.queue.resource_handle)
    return size * self.block_rows if self.block_rows > 1 else size

  def _refuse_single(self, api_name):
    if self.block_rows > 1:
      raise BuildError(
        f"'{self.path}': {api_name} moves one record, but this queue moves "
        f"blocks of {self.block_rows} (block_rows); use "
        f"{api_name}_many with a multiple of {self.block_rows} records"
      )

  def _record_shapes(self):
    return [leaf.shape for _, leaf in self.record_space.flatten()]

  def _multiple_check(self, n, api_name, argument):
    """An assert that n (records) is a multiple of block_rows."""
    return tf_check(
      tf.equal(n % self.block_rows, 0),
      self,
      api_name,
      argument,
      f"the number of records must be a multiple of block_rows "
      f"({self.block_rows})",
    )

  @graph_fn
  def _graph_fn_enqueue(self, records):
    self._refuse_single("enqueue")
    _common.check_value(self, self.record_space, records, "enqueue", "records")
    op = tf.raw_ops.QueueEnqueueV2(
      handle=self.queue.resource_handle,
      components=tree.flatten(records),
      timeout_ms=-1,
    )
    with tf.control_dependencies([op]):
      return self._tf_size()

  @graph_fn
  def _graph_fn_enqueue_many(self, batch):
    _common.check_value(self, self.batch_space, batch, "enqueue_many", "batch")
    leaves = tree.flatten(batch)
    if self.block_rows > 1:
      n = tf.shape(leaves[0])[0]
      with tf.control_dependencies(
        [self._multiple_check(n, "enqueue_many", "batch")]
      ):
        leaves = [
          tf.reshape(x, (-1, self.block_rows) + shape)
          for x, shape in zip(leaves, self._record_shapes())
        ]
    op = tf.raw_ops.QueueEnqueueManyV2(
      handle=self.queue.resource_handle,
      components=leaves,
      timeout_ms=-1,
    )
    with tf.control_dependencies([op]):
      return self._tf_size()

  @graph_fn(output_space=lambda self: self.record_space)
  def _graph_fn_dequeue(self):
    self._refuse_single("dequeue")
    leaves = tf.raw_ops.QueueDequeueV2(
      handle=self.queue.resource_handle,
      component_types=self.queue.dtypes,
      timeout_ms=-1,
    )
    for t, shape in zip(leaves, self.queue.shapes):
      t.set_shape(shape)
    return self.record_space.unflatten_value(leaves)

  @graph_fn(output_space=lambda self: self.batch_space)
  def _graph_fn_dequeue_many(self, num_records):
    block = self.block_rows
    if isinstance(num_records, (int, np.integer)):
      if num_records < 0 or num_records % block:
        raise _bad_count(self, num_records)
      n = tf.constant(int(num_records), tf.int32)
      deps = []
    else:
      n = tf.cast(num_records, tf.int32)
      ok = n >= 0 if block == 1 else (n >= 0) & tf.equal(n % block, 0)
      deps = [
        tf_check(ok, self, "dequeue_many", "num_records", _count_reason(self))
      ]
    with tf.control_dependencies(deps):
      leaves = tf.raw_ops.QueueDequeueManyV2(
        handle=self.queue.resource_handle,
        n=n // block if block > 1 else n,
        component_types=self.queue.dtypes,
        timeout_ms=-1,
      )
    out = []
    for t, shape in zip(leaves, self._record_shapes()):
      if block > 1:
        t = tf.reshape(t, (-1,) + shape)
      # A batch rank, also for a Python int (the op leaves the dim unknown).
      t.set_shape((None,) + shape)
      out.append(t)
    return self.record_space.unflatten_value(out)

  @graph_fn
  def _graph_fn_size(self):
    return self._tf_size()

  @graph_fn
  def _graph_fn_close(self, cancel_pending_enqueues):
    handle = self.queue.resource_handle

    def close(cancel):
      op = tf.raw_ops.QueueCloseV2(
        handle=handle, cancel_pending_enqueues=cancel
      )
      with tf.control_dependencies([op]):
        return self._tf_size()

    if isinstance(cancel_pending_enqueues, bool):
      return close(cancel_pending_enqueues)
    return tf.cond(
      tf.cast(cancel_pending_enqueues, tf.bool),
      lambda: close(True),
      lambda: close(False),
    )


def _count_reason(component):
  if component.block_rows > 1:
    return (
      f"num_records must be >= 0 and a multiple of block_rows "
      f"({component.block_rows})"
    )
  return "num_records must be >= 0"


def _bad_count(component, n):
  return SpaceError(
    _count_reason(component),
    component=component.path,
    api="dequeue_many",
    argument="num_records",
    expected=_count_reason(component).replace("num_records must be", "an int"),
    received=repr(n),
  )
