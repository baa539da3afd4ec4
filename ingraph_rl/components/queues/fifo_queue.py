"""A first-in first-out queue of nested records, shared between threads (and,
with a `shared_name`, between TF clients): the actor -> learner buffer of
IMPALA.

TF: a `TrackableResource` around the raw `FIFOQueueV2` ops, so the queue is
part of SavedModels (plain `tf.queue.FIFOQueue` cannot be saved). torch: a
Python mirror with the same blocking semantics (`PythonFIFOQueue`).
"""

import collections
import threading
import weakref

import numpy as np
import tensorflow as tf
import tree

from ingraph_rl.components.queues import _common
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError, IngraphError, SpaceError
from ingraph_rl.executors.checks import tf_check
from ingraph_rl.executors.tf_spaces import tf_dtype
from ingraph_rl.utils.lazy import torch

# --- errors of the torch mirror ----------------------------------------------


class QueueClosedError(IngraphError):
  """The queue is closed (torch mirror). The TF queue raises TF's own
  errors instead: `tf.errors.OutOfRangeError` and `tf.errors.CancelledError`.
  """


class QueueOutOfRangeError(QueueClosedError):
  """A dequeue found the queue closed with fewer records than requested;
  the TF queue raises `tf.errors.OutOfRangeError` here."""


class QueueCancelledError(QueueClosedError):
  """An enqueue (or a `close`) on a closed queue, or a pending one that
  `close(cancel_pending_enqueues=True)` cancelled; the TF queue raises
  `tf.errors.CancelledError` here."""


# --- the TF resource ---------------------------------------------------------


class _TFQueueResource(tf.saved_model.experimental.TrackableResource):
  """The TF queue: `FIFOQueueV2` made in `_create_resource`, so a SavedModel
  re-creates it (empty) when loaded.

  destroy: destroy the queue when this Python object is garbage-collected
  (for a private, auto-named queue). A queue with a user-given shared_name
  is never destroyed here: other clients may still use it. A loaded
  SavedModel never destroys its queue.
  """

  def __init__(self, dtypes, shapes, capacity, shared_name, destroy):
    self._dtypes = list(dtypes)
    self._shapes = [list(s) for s in shapes]
    self._capacity = capacity
    self._shared_name = shared_name
    self._destroy = destroy
    super().__init__()

  def _create_resource(self):
    return tf.raw_ops.FIFOQueueV2(
      component_types=self._dtypes,
      shapes=self._shapes,
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


# --- the torch mirror -------------------------------------------------------


class _Attempt:
  """One pending enqueue, close or dequeue of the torch mirror."""

  __slots__ = ("kind", "records", "placed", "n", "got", "done", "error")

  def __init__(self, kind, records=(), n=0):
    self.kind = kind  # "enqueue", "close" or "dequeue".
    self.records = records  # To enqueue.
    self.placed = 0
    self.n = n  # To dequeue.
    self.got = []
    self.done = False
    self.error = None

  def finish(self, error=None):
    self.done = True
    self.error = error


_SHARED_MIRRORS = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()


class PythonFIFOQueue:
  """The torch executor's queue: TF's `FIFOQueue` semantics in Python.

  As in TF, every enqueue, close and dequeue is an attempt, served first
  come, first served on its side, and every change of state serves all
  attempts that can make progress (under one lock), whichever thread made
  the change:
  - An `enqueue_many` places its records one by one as room appears; a
    `dequeue_many(n)` takes records as they arrive (so `size()` no longer
    counts them) and keeps later dequeues waiting until it has all n.
  - `close()` is served after the enqueues pending before it; closing a
    closed queue raises `QueueCancelledError`.
    `close(cancel_pending_enqueues=True)` closes at once and makes pending
    enqueues (and closes) raise `QueueCancelledError`; records they had
    placed stay.
  - Once closed, enqueues raise `QueueCancelledError`; a dequeue succeeds
    while enough records remain, else it puts back what it had taken (in
    front) and raises `QueueOutOfRangeError`.
  - Waits are unbounded, as in TF: only a `close` ends a blocked dequeue.
  """

  def __init__(self, capacity, name="fifo_queue", signature=None):
    self.capacity = int(capacity)
    self.name = name
    self.signature = signature  # What a shared queue must match.
    self._items = collections.deque()
    self._cond = threading.Condition()
    self._closed = False
    self._enqueues = collections.deque()  # Enqueue and close attempts.
    self._dequeues = collections.deque()

  @classmethod
  def shared(cls, shared_name, capacity, signature):
    """The process-wide queue named `shared_name` (made if new), like TF's
    resource manager; capacity and signature must match."""
    with _SHARED_LOCK:
      q = _SHARED_MIRRORS.get(shared_name)
      if q is None:
        q = cls(capacity, shared_name, signature)
        _SHARED_MIRRORS[shared_name] = q
      elif (q.capacity, q.signature) != (int(capacity), signature):
        raise BuildError(
          f"shared queue '{shared_name}' exists with capacity {q.capacity} "
          f"and records {q.signature}; requested capacity {capacity} and "
          f"records {signature}"
        )
      return q

  @property
  def closed(self):
    return self._closed

  def size(self):
    with self._cond:
      return len(self._items)

  # --- attempts --------------------------------------------------------

  def _serve_enqueues(self):
    progress = False
    while self._enqueues:
      a = self._enqueues[0]
      if a.kind == "close":
        if self._closed:
          a.finish(
            QueueCancelledError(f"queue '{self.name}' is already closed")
          )
        else:
          self._closed = True
          a.finish()
      elif self._closed:
        a.finish(QueueCancelledError(f"queue '{self.name}' is closed"))
      else:
        while a.placed < len(a.records) and len(self._items) < self.capacity:
          self._items.append(a.records[a.placed])
          a.placed += 1
          progress = True
        if a.placed < len(a.records):
          break
        a.finish()
      self._enqueues.popleft()
      progress = True
    return progress

  def _serve_dequeues(self):
    progress = False
    while self._dequeues:
      a = self._dequeues[0]
      if self._closed and len(self._items) < a.n - len(a.got):
        self._items.extendleft(reversed(a.got))
        a.got = []
        a.finish(
          QueueOutOfRangeError(
            f"queue '{self.name}' is closed and has insufficient elements "
            f"(requested {a.n}, current size {len(self._items)})"
          )
        )
      else:
        while len(a.got) < a.n and self._items:
          a.got.append(self._items.popleft())
          progress = True
        if len(a.got) < a.n:
          break
        a.finish()
      self._dequeues.popleft()
      progress = True
    return progress

  def _flush(self):
    """Serves attempts until none can progress (lock held)."""
    while self._serve_enqueues() | self._serve_dequeues():
      pass
    self._cond.notify_all()

  def _submit(self, attempt, line):
    """Adds `attempt` to `line`, waits until it is served; raises its
    error."""
    with self._cond:
      line.append(attempt)
      self._flush()
      try:
        while not attempt.done:
          self._cond.wait()
      finally:
        if not attempt.done:  # Interrupted while waiting: withdraw.
          line.remove(attempt)
          self._items.extendleft(reversed(attempt.got))
          self._flush()
      if attempt.error is not None:
        raise attempt.error
      return len(self._items)

  # --- operations -------------------------------------------------------

  def enqueue_many(self, records):
    """Appends `records` (a list) in order; returns the size after."""
    return self._submit(_Attempt("enqueue", list(records)), self._enqueues)

  def enqueue(self, record):
    return self.enqueue_many([record])

  def dequeue_many(self, n):
    """Removes and returns the first `n` records (a list)."""
    attempt = _Attempt("dequeue", n=int(n))
    self._submit(attempt, self._dequeues)
    return attempt.got

  def dequeue(self):
    return self.dequeue_many(1)[0]

  def close(self, cancel_pending_enqueues=False):
    """Closes the queue; returns the size after."""
    if not cancel_pending_enqueues:
      return self._submit(_Attempt("close"), self._enqueues)
    with self._cond:
      self._closed = True
      while self._enqueues:
        self._enqueues.popleft().finish(
          QueueCancelledError(
            f"pending operation on queue '{self.name}' was cancelled by "
            f"close(cancel_pending_enqueues=True)"
          )
        )
      self._flush()
      return len(self._items)


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
      process (a model loaded next to the live queue shares it). The torch
      mirror shares queues of equal `shared_name` within the process.

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
  TF's error is passed through) or `QueueOutOfRangeError` (torch executor;
  both torch errors subclass `QueueClosedError`). An enqueue after close
  raises `tf.errors.CancelledError` / `QueueCancelledError`. Values that do
  not match the spaces raise `ingraph_rl.errors.SpaceError` (at `execute`
  for root inputs, at build for values from a parent), and nothing is
  enqueued. The queue ops do not compile with XLA (`jit_compile`).

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
    self, record_space, capacity, shared_name=None, scope="fifo_queue"
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
    if shared_name is not None and (
      not isinstance(shared_name, str) or not shared_name
    ):
      raise BuildError(
        f"'{scope}': shared_name must be a non-empty str or "
        f"None, got {shared_name!r}"
      )
    self.shared_name = shared_name
    leaves = [s for _, s in self.record_space.flatten()]
    self._shapes = [tuple(s.shape) for s in leaves]
    self._np_dtypes = [s.dtype for s in leaves]
    self._build_flip = False
    self.queue = None

  def create_variables(self, input_spaces):
    name = self.shared_name or _common.unique_shared_name(self.path)
    self.resource_name = name

    def make_tf():
      res = _TFQueueResource(
        [tf_dtype(s) for s in self._leaves()],
        self._shapes,
        self.capacity,
        name,
        destroy=self.shared_name is None,
      )
      try:
        _ = res.resource_handle  # Makes the queue now, to fail here.
      except tf.errors.InvalidArgumentError as e:
        raise BuildError(
          f"'{self.path}': cannot make queue '{name}': {e.message}"
        ) from None
      return res

    def make_torch():
      signature = tuple(zip((d.str for d in self._np_dtypes), self._shapes))
      if self.shared_name is None:
        return PythonFIFOQueue(self.capacity, name, signature)
      return PythonFIFOQueue.shared(name, self.capacity, signature)

    self.queue = self.add_resource("queue", tf=make_tf, torch=make_torch)

  def _leaves(self):
    return [s for _, s in self.record_space.flatten()]

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
    return tf.raw_ops.QueueSizeV2(handle=self.queue.resource_handle)

  @graph_fn
  def _graph_fn_enqueue(self, records):
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
    op = tf.raw_ops.QueueEnqueueManyV2(
      handle=self.queue.resource_handle,
      components=tree.flatten(batch),
      timeout_ms=-1,
    )
    with tf.control_dependencies([op]):
      return self._tf_size()

  @graph_fn(output_space=lambda self: self.record_space)
  def _graph_fn_dequeue(self):
    leaves = tf.raw_ops.QueueDequeueV2(
      handle=self.queue.resource_handle,
      component_types=[tf_dtype(s) for s in self._leaves()],
      timeout_ms=-1,
    )
    for t, shape in zip(leaves, self._shapes):
      t.set_shape(shape)
    return self.record_space.unflatten_value(leaves)

  @graph_fn(output_space=lambda self: self.batch_space)
  def _graph_fn_dequeue_many(self, num_records):
    if isinstance(num_records, (int, np.integer)):
      if num_records < 0:
        raise _bad_count(self, num_records)
      n = tf.constant(int(num_records), tf.int32)
      deps = []
    else:
      n = tf.cast(num_records, tf.int32)
      deps = [
        tf_check(
          n >= 0,
          self,
          "dequeue_many",
          "num_records",
          _count_reason(self),
        )
      ]
    with tf.control_dependencies(deps):
      leaves = tf.raw_ops.QueueDequeueManyV2(
        handle=self.queue.resource_handle,
        n=n,
        component_types=[tf_dtype(s) for s in self._leaves()],
        timeout_ms=-1,
      )
    for t, shape in zip(leaves, self._shapes):
      # A batch rank, also for a Python int (the op leaves the dim unknown).
      t.set_shape((None,) + shape)
    return self.record_space.unflatten_value(leaves)

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

  # --- torch bodies -----------------------------------------------------

  def _flip(self):
    self._build_flip = not self._build_flip
    return self._build_flip

  @staticmethod
  def _int32(n):
    return torch.tensor(n, dtype=torch.int32)

  @_graph_fn_enqueue.torch
  def _graph_fn_enqueue(self, records):
    if _common.in_torch_build_pass():
      _common.check_value(
        self, self.record_space, records, "enqueue", "records"
      )
      return self._int32(0)
    return self._int32(
      self.queue.enqueue(tree.map_structure(_common.copy_leaf, records))
    )

  @_graph_fn_enqueue_many.torch
  def _graph_fn_enqueue_many(self, batch):
    if _common.in_torch_build_pass():
      _common.check_value(
        self, self.batch_space, batch, "enqueue_many", "batch"
      )
      return self._int32(0)
    leaves = tree.flatten(batch)
    n = len(leaves[0])
    records = [
      self.record_space.unflatten_value(
        [_common.copy_leaf(x[i]) for x in leaves]
      )
      for i in range(n)
    ]
    return self._int32(self.queue.enqueue_many(records))

  @_graph_fn_dequeue.torch
  def _graph_fn_dequeue(self):
    if _common.in_torch_build_pass():
      return _common.build_pass_zeros(self.record_space, False)
    return self.queue.dequeue()

  @_graph_fn_dequeue_many.torch
  def _graph_fn_dequeue_many(self, num_records):
    if _common.in_torch_build_pass():
      return _common.build_pass_zeros(self.batch_space, self._flip())
    n = int(num_records)
    if n < 0:
      raise _bad_count(self, n)
    records = self.queue.dequeue_many(n)
    if not records:
      return _common.torch_zeros(self.batch_space, lambda _: 0)
    return tree.map_structure(_common.stack_leaves, *records)

  @_graph_fn_size.torch
  def _graph_fn_size(self):
    if _common.in_torch_build_pass():
      return self._int32(0)
    return self._int32(self.queue.size())

  @_graph_fn_close.torch
  def _graph_fn_close(self, cancel_pending_enqueues):
    if _common.in_torch_build_pass():
      return self._int32(0)
    return self._int32(self.queue.close(bool(cancel_pending_enqueues)))


def _count_reason(component):
  return "num_records must be >= 0"


def _bad_count(component, n):
  return SpaceError(
    _count_reason(component),
    component=component.path,
    api="dequeue_many",
    argument="num_records",
    expected="an int >= 0",
    received=repr(n),
  )
