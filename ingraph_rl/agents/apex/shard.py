"""An Ape-X replay shard: a `PrioritizedReplay` that only its own graph
writes. One `serve` call applies the learner's queued priority updates,
inserts the actors' queued transitions with their initial priorities, and,
once the shard holds `learning_starts` transitions and the learner's
sample queue has room for `serve_batches` batches, samples them onto it
(one stratified sample, each batch spanning all of the priority mass).

What arrives on the two queues comes from other processes and is checked
row by row in the graph before anything is written (`RowChecks`): records
within the record space (actions in range, finite floats), priorities
finite and > 0, update indices below the memory's size. A bad row is
DROPPED, alone: the good rows of the same dequeue are applied, the bad
ones are counted ("rejected_rows"; "rejected_causes": a mask, bit i for
`rejection_causes[i]`) and never written. So no received row
makes `serve` fail part-way: its priority updates and inserts both apply.
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.agents.apex import queues
from ingraph_rl.components.memories import PrioritizedReplay
from ingraph_rl.components.queues.row_checks import RowChecks, keep_rows
from ingraph_rl.core import Component, api, graph_fn, inline


def _positive_or_nan(rows):
  # NaN has its own rule. (Not `~(p <= 0)`: grappler rewrites that to
  # `p > 0`, false for NaN.)
  p = rows["priority"]
  return tf.math.is_nan(p) | (p > 0)


class ShardMemory(PrioritizedReplay):
  """A `PrioritizedReplay` of `record_space` records, known up front: the
  shard writes it only inside `serve`'s conditional branches, where the
  builder sees no API call to learn the records' space from."""

  variable_args = ()

  def __init__(self, record_space, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.record_space = record_space.with_batch_rank()

  def create_variables(self, input_spaces):
    super().create_variables(dict(input_spaces, records=self.record_space))


class ReplayShard(Component):
  """APIs (fixed dict results):
    serve() -> {"inserted", "updated", "dropped_updates", "sampled",
      "size", "rejected_rows", "rejected_causes"}: one round of work
      (see the module docstring); "sampled" is the number of rows put on
      the sample queue (0 or serve_batches batches);
      "dropped_updates" counts rows of another generation (sampled before
      this shard restarted) that were not applied; "rejected_rows" the
      received rows dropped as bad, "rejected_causes" int64 the rules they
      broke (bit i: rejection_causes[i]).
    stats() -> {"size", "mean_priority"}: the mean priority (not raised
      to alpha) of the stored transitions; O(capacity), call it rarely.
    get_generation() -> int64: this shard's generation.
    close_queue() -> closes the insert queue (see the method).

  generation: an int in [1, GENERATION_HIGH), new for every start of the
    shard (the caller draws it).
  """

  def __init__(self, config, record_space, names, index, generation):
    super().__init__(scope=f"shard_{index}")
    c = config
    if not 1 <= int(generation) < queues.GENERATION_HIGH:
      raise ValueError(f"generation must lie in [1, 2^62), got {generation}")
    self.config = config
    self.index = int(index)
    self.generation = int(generation)
    self.memory = ShardMemory(
      record_space,
      c.buffer_size,
      c.prioritized_replay_alpha,
      c.prioritized_replay_beta,
      seed=c.seed + 101 * index,
      scope="memory",
    )
    self.inserts = queues.insert_queue(
      record_space, c, names, index, scope="inserts"
    )
    self.updates = queues.update_queue(c, names, index, scope="updates")
    self.samples = queues.sample_queue(record_space, c, names)
    size = lambda: self.memory.size  # noqa: E731 - read in the graph.
    self.update_checks = RowChecks(
      queues.update_row_space(),
      [
        ("priority <= 0", _positive_or_nan),
        # Rows of another generation are dropped, not rejected.
        (
          "index beyond the stored transitions",
          lambda r: (
            (r["generation"] != self.generation) | (r["index"] < size())
          ),
        ),
      ],
      prefix="update",
    )
    self.insert_checks = RowChecks(
      queues.insert_row_space(record_space),
      [("priority <= 0", _positive_or_nan)],
      prefix="insert",
    )
    self.rejection_causes = (
      self.update_checks.causes + self.insert_checks.causes
    )

  def stored(self):
    """The number of stored transitions, read eagerly from the variable
    (no graph call: in a cluster, after the learner went away, a new graph
    call cannot even be registered)."""
    return int(self.memory.size.numpy())

  @api
  def serve(self):
    return self._graph_fn_serve(
      inline(self.updates.size),
      inline(self.updates.dequeue_many),
      inline(self.memory.update_priorities),
      inline(self.inserts.size),
      inline(self.inserts.dequeue_many),
      inline(self.memory.insert_with_priorities),
      inline(self.samples.size),
      inline(self.memory.sample),
      inline(self.samples.enqueue_many),
    )

  @api
  def stats(self):
    return self._graph_fn_stats()

  @api
  def get_generation(self):
    return self._graph_fn_generation()

  @api
  def close_queue(self):
    """Closes the insert queue, cancelling pending enqueues (shutdown:
    actors blocked on it get CancelledError)."""
    return self.inserts.close(True)

  @graph_fn(needs_subtree=True)
  def _graph_fn_serve(
    self,
    updates_size,
    dequeue_updates,
    update_priorities,
    inserts_size,
    dequeue_inserts,
    insert,
    samples_size,
    sample,
    enqueue,
  ):
    # Each part runs only when it has work: an idle round (the usual poll
    # of a shard whose learner is the bottleneck) is then a few size reads,
    # not the ~0.6 ms of CPU of every part run on zero rows (Pong).
    c = self.config
    zero = tf.constant(0)
    # Only this shard dequeues its updates and inserts: what their sizes
    # say is there.
    pending_updates = updates_size()

    no_causes = tf.constant(0, tf.int64)

    def apply_updates():
      ups = dequeue_updates(pending_updates)
      ok, causes = self.update_checks.tf_check(ups)
      mine = ok & tf.equal(ups["generation"], self.generation)
      done = update_priorities(
        tf.boolean_mask(ups["index"], mine),
        tf.boolean_mask(ups["priority"], mine),
      )
      with tf.control_dependencies(tf.nest.flatten(done)):
        return (
          tf.reduce_sum(tf.cast(mine, tf.int32)),
          tf.reduce_sum(tf.cast(ok & ~mine, tf.int32)),
          tf.reduce_sum(tf.cast(~ok, tf.int32)),
          tf.identity(causes),
        )

    updated, dropped, bad_updates, update_causes = tf.cond(
      pending_updates > 0,
      apply_updates,
      lambda: (zero, zero, zero, no_causes),
    )
    with tf.control_dependencies([updated]):
      pending = tf.minimum(inserts_size(), c.max_inserts_per_serve)

    def insert_rows():
      rows = dequeue_inserts(pending)
      ok, causes = self.insert_checks.tf_check(rows)
      good = keep_rows(rows, ok)
      count = tf.shape(good["priority"])[0]

      def write():
        done = insert(good["records"], good["priority"])
        with tf.control_dependencies(tf.nest.flatten(done)):
          return tf.identity(count)

      written = tf.cond(count > 0, write, lambda: zero)
      return written, tf.reduce_sum(tf.cast(~ok, tf.int32)), causes

    inserted, bad_inserts, insert_causes = tf.cond(
      pending > 0, insert_rows, lambda: (zero, zero, no_causes)
    )
    with tf.control_dependencies([inserted]):
      size = tf.identity(self.memory.size)
      room = c.prefetch_batches * c.train_batch_size - samples_size()
    rows = c.serve_batches * c.train_batch_size

    def put_batches():
      out = sample(rows)
      ones = tf.ones([rows], tf.int32)
      done = enqueue(
        tf.nest.map_structure(
          self._strided,
          {
            "records": out["records"],
            "index": out["indices"],
            "weight": out["weights"],
            "shard": ones * self.index,
            "generation": tf.cast(ones, tf.int64) * self.generation,
          },
        )
      )
      with tf.control_dependencies([done]):
        return tf.constant(rows)

    ready = (size >= c.learning_starts) & (room >= rows)
    sampled = tf.cond(ready, put_batches, lambda: zero)
    with tf.control_dependencies([sampled]):
      size = tf.identity(self.memory.size)
    return {
      "inserted": inserted,
      "updated": updated,
      "dropped_updates": dropped,
      "sampled": sampled,
      "size": size,
      "rejected_rows": bad_updates + bad_inserts,
      # The insert rules' bits follow the update rules'.
      "rejected_causes": tf.bitwise.bitwise_or(
        update_causes,
        insert_causes * (1 << len(self.update_checks.causes)),
      ),
    }

  def _strided(self, x):
    """Rows of one sample of k batches (k = serve_batches), ordered so that
    batch j holds strata j, j + k, j + 2k, ...: each batch spans the whole
    priority mass, as a sample of one batch does, not a k-th of it."""
    k, batch = self.config.serve_batches, self.config.train_batch_size
    if k == 1:
      return x
    order = np.arange(k * batch).reshape(batch, k).T.reshape(-1)
    return tf.gather(x, order)

  @graph_fn(needs_subtree=True)
  def _graph_fn_stats(self):
    m = self.memory
    size = tf.identity(m.size)
    leaves = m.sum_tree[m.num_leaves : m.num_leaves + m.capacity][:size]
    mean = tf.reduce_mean(leaves ** (1.0 / m.alpha))
    return {"size": size, "mean_priority": tf.where(size > 0, mean, 0.0)}

  @graph_fn
  def _graph_fn_generation(self):
    return tf.constant(self.generation, tf.int64)
