"""The IMPALA learner: dequeue a batch of rollouts, V-trace loss, RMSProp
step, in ONE graph call; the next batch is prefetched into a staging area
while the current one trains.

The rollouts come from the actors' processes and are checked row by row in
the graph (`RowChecks`: actions in range, finite floats) before the update
uses them. A bad rollout is DROPPED, alone: the update trains on the
batch's good rollouts and reports the bad ones ("rejected_rows",
"rejected_causes": a mask, bit i for `rejection_causes[i]`); a batch with no
good rollout is refused (SpaceError) with nothing written, as is a
non-finite loss or gradient (the optimizer's check).
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.components.explorations import PolynomialDecay
from ingraph_rl.components.losses import IMPALALoss
from ingraph_rl.components.optimizers import RMSProp
from ingraph_rl.components.preprocessing import RewardClipping
from ingraph_rl.components.queues import FIFOQueue, StagingArea
from ingraph_rl.components.queues.row_checks import RowChecks, keep_rows
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.executors.checks import tf_check
from ingraph_rl.spaces import BoolBox, Dict, FloatBox, IntBox


class IMPALALearner(Component):
  """APIs (fixed dict results):
    prime(): stages the first batch (with `use_staging`; call once before
      the first `update`). Returns the staged count.
    update() -> {"loss", "pg_loss", "baseline_loss", "entropy_loss",
      "mean_vs", "mean_pg_advantage", "mean_entropy", "mean_rho",
      "grad_norm", "train_step", "frames", "rejected_rows",
      "rejected_causes"}: takes `batch_size` rollouts
      (from the staging area, restaging the next ones from the queue; or
      straight from the queue), runs the network over the T + 1 steps from
      each rollout's initial state, and applies one RMSProp step to the
      V-trace loss. "frames" is the number of env steps trained on (B * T);
      "rejected_rows" the rollouts dropped as bad (module docstring).
    update_from_batch(rollouts) -> the same as `update`, on a given batch
      of rollouts (`IMPALABuilder.record_space(...).with_batch_rank()`)
      instead of one from the queue: for a learner fed from outside (an
      exported agent).
      Built with `IMPALABuilder.make_learner(..., update_from_batch=True)`.
    get_weights() -> the network's variables by path (for actors).
    get_train_step() -> int64 number of updates so far.
    queue_size() -> int32.
    drop_queued() -> int32: takes every rollout now queued, unused, and
      returns their number (shutdown: actors blocked on a full queue
      finish their enqueue instead of having it cancelled). Only while
      no `update` runs: it would race it for the rows.
    close_queue(): closes the queue and cancels pending enqueues, so
      blocked actors raise `tf.errors.CancelledError` and a blocked
      `update` raises `tf.errors.OutOfRangeError`: the shutdown path.

  Layout: rollouts are [B, T + 1, ...] (IMPALA's: see EnvironmentStepper).
  The network sees at step t observation t, done t (resets), reward t and
  action t (the last reward and action), as the actor did; its outputs
  at step t pair with the action, behaviour logits, reward and done at
  t + 1; the value at T bootstraps. With `bootstrap_on_truncation`, a
  step t + 1 that truncated its episode adds discounting * (its recorded
  bootstrap value, V(final observation)) to the clipped reward.

  Built through `IMPALABuilder.make_learner` (agents/impala/builder.py),
  which declares its API list, the record space and the network's inputs.
  """

  def __init__(
    self,
    config,
    network,
    record_space,
    network_inputs_space,
    queue_name,
    scope="learner",
  ):
    """network: an `IMPALANetwork`; record_space: one queued rollout
    (`IMPALABuilder.record_space`); network_inputs_space: a Dict of the
    network's batch-major observations, resets, last_rewards and
    last_actions; queue_name: the actors' queue."""
    super().__init__(scope=scope)
    c = self.config = config
    self.network = network
    self.record_space = record_space
    self.network_inputs_space = network_inputs_space
    self.queue = FIFOQueue(
      self.record_space, c.queue_capacity, shared_name=queue_name
    )
    self.row_checks = RowChecks(self.record_space)
    self.rejection_causes = self.row_checks.causes
    self.staging = (
      StagingArea(self.record_space.with_batch_rank())
      if c.use_staging
      else None
    )
    self.reward_clipping = (
      None if c.reward_clipping == "none" else RewardClipping(c.reward_clipping)
    )
    self.loss = IMPALALoss(c.discounting, c.baseline_cost, c.entropy_cost)
    learning_rate = (
      c.learning_rate
      if c.lr_decay_steps is None
      else PolynomialDecay(c.learning_rate, 0.0, c.lr_decay_steps, 1.0)
    )
    self.optimizer = RMSProp(
      learning_rate,
      decay=c.decay,
      momentum=c.momentum,
      epsilon=c.epsilon,
      clip_global_norm=c.clip_grad_norm,
    )

  # --- APIs ---------------------------------------------------------------

  @api
  def prime(self):
    return self.staging.put(self.queue.dequeue_many(self.config.batch_size))

  @api
  def update(self):
    c = self.config
    if self.staging is not None:
      batch = self.staging.get()
      self.staging.put(self.queue.dequeue_many(c.batch_size))
    else:
      batch = self.queue.dequeue_many(c.batch_size)
    checked = self._graph_fn_check_rows(batch)
    return self._graph_fn_with_rejections(
      self._update(checked["rows"]), checked
    )

  @api
  def update_from_batch(self, rollouts):
    return self._update(rollouts)

  def _update(self, batch):
    """The loss and optimizer step on `batch` (what both updates share)."""
    state = (
      batch["initial_state"]
      if self.config.lstm_units
      else self._graph_fn_empty_state(batch)
    )
    inputs = self._graph_fn_network_inputs(batch)
    out = self.network.unroll(
      inputs["observations"],
      state,
      inputs["resets"],
      inputs["last_rewards"],
      inputs["last_actions"],
    )
    tm = self._graph_fn_time_major(batch, out)
    rewards = (
      tm["rewards"]
      if self.reward_clipping is None
      else self.reward_clipping.call(tm["rewards"])
    )
    truncation_values = (
      tm["truncation_values"] if self.config.bootstrap_on_truncation else None
    )
    losses = self.loss.loss(
      tm["target_logits"],
      tm["behaviour_logits"],
      tm["actions"],
      rewards,
      tm["dones"],
      tm["values"],
      tm["bootstrap_value"],
      truncation_values,
    )
    stats = self.optimizer.step(losses["loss"], self.network.variables())
    return self._graph_fn_results(
      losses, stats["grad_norm"], self.get_train_step(), tm["rewards"]
    )

  @api
  def get_weights(self):
    return self.network.variables()

  @api
  def get_train_step(self):
    return self.optimizer.get_iterations()

  @api
  def queue_size(self):
    return self.queue.size()

  @api
  def drop_queued(self):
    return self._graph_fn_num_rows(self.queue.dequeue_many(self.queue.size()))

  @api
  def close_queue(self):
    return self.queue.close(cancel_pending_enqueues=True)

  # --- graph functions ----------------------------------------------------

  @graph_fn
  def _graph_fn_check_rows(self, batch):
    ok, causes = self.row_checks.tf_check(batch)
    some = tf_check(
      tf.reduce_any(ok),
      self,
      "update",
      "rollouts",
      "every rollout of the dequeued batch breaks the record space "
      f"(rules: {'; '.join(self.rejection_causes)}); nothing was trained "
      "or written",
    )
    with tf.control_dependencies([some]):
      return {
        "rows": keep_rows(batch, ok),
        "rejected_rows": tf.reduce_sum(tf.cast(~ok, tf.int32)),
        "rejected_causes": tf.identity(causes),
      }

  @graph_fn
  def _graph_fn_with_rejections(self, results, checked):
    out = dict(results)
    out["rejected_rows"] = checked["rejected_rows"]
    out["rejected_causes"] = checked["rejected_causes"]
    return out

  @graph_fn
  def _graph_fn_num_rows(self, batch):
    return tf.shape(tf.nest.flatten(batch)[0])[0]

  @graph_fn(output_space=lambda self: self.network_inputs_space)
  def _graph_fn_network_inputs(self, batch):
    # What the actor's policy saw at each step (see EnvironmentStepper).
    return {
      "observations": tf.nest.map_structure(tf.identity, batch["observations"]),
      "resets": tf.identity(batch["dones"]),
      "last_rewards": tf.identity(batch["rewards"]),
      "last_actions": tf.identity(batch["actions"]),
    }

  @graph_fn(output_space=lambda self: self.network.state_space())
  def _graph_fn_empty_state(self, batch):
    empty = tf.zeros([tf.shape(batch["rewards"])[0], 0])
    return {"c": empty, "h": empty}

  def _time_major_space(self):
    def tm(space):
      return space.with_ranks(batch=True, time=True, time_major=True)

    a = self.config.num_actions
    return Dict(
      target_logits=tm(FloatBox((a,))),
      behaviour_logits=tm(FloatBox((a,))),
      actions=tm(IntBox(a, dtype=np.int64)),
      rewards=tm(FloatBox()),
      dones=tm(BoolBox()),
      values=tm(FloatBox()),
      bootstrap_value=FloatBox(add_batch_rank=True),
      truncation_values=tm(FloatBox()),
    )

  @graph_fn(output_space=lambda self: self._time_major_space())
  def _graph_fn_time_major(self, batch, out):
    def tm(x):
      return tf.transpose(x, [1, 0] + list(range(2, x.shape.rank)))

    return {
      "target_logits": tm(out["logits"])[:-1],
      "behaviour_logits": tm(batch["logits"])[1:],
      "actions": tm(batch["actions"])[1:],
      "rewards": tm(batch["rewards"])[1:],
      "dones": tm(batch["dones"])[1:],
      "values": tm(out["values"])[:-1],
      "bootstrap_value": out["values"][:, -1],
      # V(final observation) where step t + 1 truncated its episode.
      "truncation_values": tf.where(
        tm(batch["truncated"])[1:], tm(batch["bootstrap_value"])[1:], 0.0
      ),
    }

  @graph_fn
  def _graph_fn_results(self, losses, grad_norm, train_step, rewards):
    out = {k: tf.stop_gradient(v) for k, v in losses.items()}
    out["grad_norm"] = grad_norm
    out["train_step"] = train_step
    out["frames"] = tf.cast(tf.size(rewards), tf.int64)
    return out
