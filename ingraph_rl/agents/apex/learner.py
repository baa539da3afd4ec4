"""The Ape-X learner: ONE graph call per update takes the next prefetched
prioritized batch from the sample queue, computes the double-Q n-step loss
with importance weights, queues the batch's new priorities back to the
shard it came from, steps the optimizer and syncs the target network every
`target_update_period` updates. It never holds a replay buffer.

The sampled rows come from other processes and are checked row by row in
the graph before anything is written (`RowChecks`): records within the
record space, importance weights finite and >= 0, the shard index in range
and the same on every row. Bad rows are DROPPED, alone: the update trains
on the good rows of the batch and reports the bad ones ("rejected_rows",
"rejected_causes": a mask, bit i for `rejection_causes[i]`); a batch with no
good row is refused (SpaceError) with nothing written. Nothing is written
either (weights, optimizer slots and step, priorities) when the TD errors,
the loss or the gradients are not finite.
"""

import tensorflow as tf

from ingraph_rl.agents.apex import queues
from ingraph_rl.components.optimizers import Adam
from ingraph_rl.components.queues.row_checks import RowChecks, keep_rows
from ingraph_rl.core import Component, api, graph_fn, inline
from ingraph_rl.executors.checks import tf_check, torch_check


def make_optimizer(config):
  return Adam(
    config.learning_rate,
    epsilon=config.adam_epsilon,
    clip_global_norm=config.clip_grad_norm,
  )


class PrioritizedUpdate:
  """The update the learner and the complete agent share, for a Component
  with `config`, `q` (a `QLearning`) and `optimizer`: `_update_on(records,
  weights, write_back)` computes the double-Q TD of a prioritized batch,
  checks that it is finite, steps the optimizer (which checks the loss and
  the gradients before it writes), then has `write_back(priorities)` store
  the new priorities (the caller's memory or queue) and syncs the target
  every `target_update_period` updates. A non-finite update raises a
  SpaceError and writes nothing. Returns {"loss", "mean_q", "grad_norm",
  "train_step"}."""

  def _update_on(self, records, importance_weights, write_back):
    out = self.q.td(records, importance_weights)
    loss = self._graph_fn_finite_td(out["loss"], out["priorities"])
    stats = self.optimizer.step(loss, self.q.online.variables())
    # The priorities go out only once the step's checks passed.
    written = write_back(self._graph_fn_after(out["priorities"], stats))
    step = self._graph_fn_sync_due(
      self._graph_fn_after(stats["grad_norm"], written),
      inline(self.q.sync_target),
    )
    return {
      "loss": out["loss"],
      "mean_q": out["mean_q"],
      "grad_norm": stats["grad_norm"],
      "train_step": step,
    }

  _TD_REASON = "the batch's TD errors are not finite (diverged)"

  @graph_fn
  def _graph_fn_finite_td(self, loss, priorities):
    ok = tf_check(
      tf.reduce_all(tf.math.is_finite(priorities)),
      self,
      "update",
      "priorities",
      self._TD_REASON,
    )
    with tf.control_dependencies([ok]):
      return tf.identity(loss)

  @_graph_fn_finite_td.torch
  def _graph_fn_finite_td(self, loss, priorities):
    torch_check(
      bool(priorities.isfinite().all()),
      self,
      "update",
      "priorities",
      self._TD_REASON,
    )
    return loss

  @graph_fn
  def _graph_fn_after(self, value, done):
    with tf.control_dependencies(tf.nest.flatten(done)):
      return tf.identity(value)

  @_graph_fn_after.torch
  def _graph_fn_after(self, value, done):
    return value  # Eager: `done` ran already.

  @graph_fn(needs_subtree=True)
  def _graph_fn_sync_due(self, after, sync):
    # The step count read after `after` (the optimizer step).
    with tf.control_dependencies([after]):
      step = self.optimizer.iterations.read_value()
    due = tf.equal(step % self.config.target_update_period, 0)
    synced = tf.cond(due, sync, lambda: tf.constant(False))
    with tf.control_dependencies([synced]):
      return tf.identity(step)

  @_graph_fn_sync_due.torch
  def _graph_fn_sync_due(self, after, sync):
    step = self.optimizer.iterations.clone()
    if int(step) % self.config.target_update_period == 0:
      sync()
    return step


class ApexLearner(PrioritizedUpdate, Component):
  """APIs (fixed dict results):
  update() -> {"loss", "mean_q", "grad_norm", "shard", "frames",
    "train_step"}: "frames" is the batch size (samples trained on),
    "shard" the shard the batch came from. Blocks until a batch is
    queued; after `close_queue` it raises OutOfRangeError.
  get_weights() -> {"online", "target"} variables by path.
  get_train_step() -> int64 updates so far.
  queue_size() -> rows waiting on the sample queue.
  close_queue() -> closes the sample and priority queues, cancelling
    pending enqueues (the shutdown path).
  """

  def __init__(self, config, q, record_space, names, scope="learner"):
    super().__init__(scope=scope)
    c = config
    self.config = config
    self.q = q
    self.optimizer = make_optimizer(c)
    self.samples = queues.sample_queue(record_space, c, names)
    self.update_queues = [
      queues.update_queue(c, names, i, scope=f"shard_{i}_updates")
      for i in range(names.num_shards)
    ]
    self.row_checks = RowChecks(
      queues.sample_row_space(record_space, names.num_shards),
      [
        (
          "importance weight < 0",
          lambda r: tf.math.is_nan(r["weight"]) | (r["weight"] >= 0),
        ),
        (
          "shard differs from the batch's first row's",
          lambda r: tf.equal(r["shard"], r["shard"][0]),
        ),
      ],
    )
    self.rejection_causes = self.row_checks.causes

  @api
  def update(self):
    received = self.samples.dequeue_many(self.config.train_batch_size)
    checked = self._graph_fn_check_rows(received)
    rows = checked["rows"]
    enqueues = [inline(q.enqueue_many) for q in self.update_queues]
    out = self._update_on(
      rows["records"],
      rows["weight"],
      lambda priorities: self._graph_fn_write_back(
        received, checked["ok"], priorities, enqueues
      ),
    )
    return dict(
      out,
      shard=self._graph_fn_first(rows["shard"]),
      frames=self._graph_fn_batch_size(rows["weight"]),
      rejected_rows=checked["rejected_rows"],
      rejected_causes=checked["rejected_causes"],
    )

  @api
  def get_weights(self):
    return self.q.get_weights()

  @api
  def get_train_step(self):
    return self.optimizer.get_iterations()

  @api
  def queue_size(self):
    return self.samples.size()

  @api
  def close_queue(self):
    sizes = [self.samples.close(True)]
    sizes += [q.close(True) for q in self.update_queues]
    return sizes[0]

  @graph_fn
  def _graph_fn_check_rows(self, rows):
    ok, causes = self.row_checks.tf_check(rows)
    some = tf_check(
      tf.reduce_any(ok),
      self,
      "update",
      "samples",
      "every row of the dequeued batch breaks the sample row space "
      f"(rules: {'; '.join(self.rejection_causes)}); nothing was trained "
      "or written",
    )
    with tf.control_dependencies([some]):
      return {
        "rows": keep_rows(rows, ok),
        "ok": tf.identity(ok),
        "rejected_rows": tf.reduce_sum(tf.cast(~ok, tf.int32)),
        "rejected_causes": tf.identity(causes),
      }

  @graph_fn
  def _graph_fn_write_back(self, rows, ok, priorities, enqueues):
    # The queue moves whole batches: a rejected row goes back with
    # generation 0, which no shard has, so the shard drops it.
    n = tf.shape(ok)[0]
    row = {
      "index": tf.where(ok, rows["index"], 0),
      "priority": tf.tensor_scatter_nd_update(
        tf.ones([n]), tf.where(ok), priorities
      ),
      "generation": tf.where(ok, rows["generation"], tf.constant(0, tf.int64)),
    }
    # Row 0's shard is every good row's, in range (checked): no
    # fall-through to the last branch.
    return tf.switch_case(
      rows["shard"][0], [lambda e=e: e(row) for e in enqueues]
    )

  @graph_fn
  def _graph_fn_first(self, x):
    return x[0]

  @graph_fn
  def _graph_fn_batch_size(self, x):
    return tf.shape(x, out_type=tf.int64)[0]
