"""The Ape-X learner: ONE graph call per update takes the next prefetched
prioritized batch from the sample queue, computes the double-Q n-step loss
with importance weights, queues the batch's new priorities back to the
shard it came from, steps the optimizer and syncs the target network every
`target_update_period` updates. It never holds a replay buffer.
"""

import tensorflow as tf

from ingraph_rl.agents.apex import queues
from ingraph_rl.components.optimizers import Adam
from ingraph_rl.core import Component, api, graph_fn, inline
from ingraph_rl.executors.checks import tf_check


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
  has `write_back(priorities)` store its new priorities (the caller's
  memory or queue), then, after that, steps the optimizer and syncs the
  target every `target_update_period` updates. Returns {"loss", "mean_q",
  "grad_norm", "train_step"}."""

  def _update_on(self, records, importance_weights, write_back):
    out = self.q.td(records, importance_weights)
    written = write_back(out["priorities"])
    loss = self._graph_fn_after(out["loss"], written)
    stats = self.optimizer.step(loss, self.q.online.variables())
    step = self._graph_fn_sync_due(
      stats["grad_norm"], inline(self.q.sync_target)
    )
    return {
      "loss": out["loss"],
      "mean_q": out["mean_q"],
      "grad_norm": stats["grad_norm"],
      "train_step": step,
    }

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

  @api
  def update(self):
    rows = self.samples.dequeue_many(self.config.train_batch_size)
    enqueues = [inline(q.enqueue_many) for q in self.update_queues]
    out = self._update_on(
      rows["records"],
      rows["weight"],
      lambda priorities: self._graph_fn_write_back(rows, priorities, enqueues),
    )
    return dict(
      out,
      shard=self._graph_fn_first(rows["shard"]),
      frames=self._graph_fn_batch_size(rows["weight"]),
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
  def _graph_fn_write_back(self, rows, priorities, enqueues):
    # Refuse to send non-finite priorities: they would break the shard.
    ok = tf_check(
      tf.reduce_all(tf.math.is_finite(priorities)),
      self,
      "update",
      "priorities",
      "the batch's TD errors are not finite (diverged)",
    )
    with tf.control_dependencies([ok]):
      row = {
        "index": rows["index"],
        "priority": priorities,
        "generation": rows["generation"],
      }
    return tf.switch_case(
      rows["shard"][0], [lambda e=e: e(row) for e in enqueues]
    )

  @graph_fn
  def _graph_fn_first(self, x):
    return x[0]

  @graph_fn
  def _graph_fn_batch_size(self, x):
    return tf.shape(x, out_type=tf.int64)[0]
