"""Batched inference across actors (SEED RL's central inference, in one
process): actors step their envs, and every policy call of theirs goes to
ONE inference server, which runs the policy once per step on all actors'
observations together.

Actor side, `RemotePolicy`: the `EnvironmentStepper`'s policy. Its `act`
(and `values`) enqueues a request (the actor's slot, its observations,
recurrent state, resets, last rewards and actions) on the shared request
queue and dequeues the answer from the actor's own reply queue, all inside
the stepper's unroll graph. The state travels with the request, so the
server keeps no per-actor state and the stepper carries it as it does for
a local policy.

Server side, `InferenceServer`: `serve()` dequeues one request per actor
(`dequeue_many(num_actors)`), runs the policy once on their rows, and
enqueues each actor's rows on that actor's reply queue, `steps_per_call`
times per graph call. A `values` request is served as an `act` one (the
network's values come with its logits).

Matching replies to requests: an actor's calls enqueue their requests and
dequeue their replies in program order (TF's automatic control
dependencies order the ops on one queue), the server answers in queue
order, so the k-th reply an actor dequeues answers its k-th request. When
all actors wait on the server, each has a request queued, so a batch is
always there: no deadlock. `close()` closes every queue (cancelling
pending enqueues): blocked actors and server calls then fail with
Cancelled/OutOfRange, as on the rollout queue.

Requests hold `channel.rows` rows; a smaller call (a smaller env group) is
padded with zeros and its rows taken back from the reply.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from ingraph_rl.components.queues import queue_resource
from ingraph_rl.core import Component, api, graph_fn, inline
from ingraph_rl.executors import gradients
from ingraph_rl.executors.tf_spaces import tf_dtype
from ingraph_rl.spaces import BoolBox, FloatBox, IntBox, Space, Tuple


@dataclasses.dataclass(frozen=True)
class InferenceChannel:
  """The queues between `num_actors` actors and one inference server.

  name: the prefix of the queues' shared names (unique per driver: a
    closed queue outlives its driver in the process).
  rows: the rows (envs) of one request, the largest policy call's.
  """

  name: str
  num_actors: int
  rows: int

  def __post_init__(self):
    if self.num_actors < 1 or self.rows < 1:
      raise ValueError("InferenceChannel: num_actors and rows must be >= 1")

  @property
  def request_name(self):
    return f"{self.name}_requests"

  def reply_name(self, actor):
    return f"{self.name}_replies_{actor}"


def _leaves(space):
  return [leaf for _, leaf in space.flatten()]


def _stateful(state_space):
  # TF's queues crash on zero-sized components: a feed-forward policy's
  # (size 0) state does not travel.
  return all(0 not in leaf.shape for leaf in _leaves(state_space))


class _Records:
  """The spaces of a request and of a reply: one queue record each, its
  rows (`channel.rows`) on a batch rank. The queues hold their leaves in
  `flatten()` order."""

  def __init__(self, channel, observation_space, state_space, num_actions):
    self.channel = channel
    self.obs_space: Space = observation_space
    self.state_space: Space = state_space
    self.num_actions = int(num_actions)
    self.stateful = _stateful(state_space)
    state = [state_space] if self.stateful else []
    # slot; per row: resets, last rewards, last actions, observations,
    # state (a batch rank on the per-item spaces).
    self.request = Tuple(
      IntBox(dtype=np.int32),
      Tuple(
        BoolBox(),
        FloatBox(),
        IntBox(dtype=np.int64),
        observation_space,
        *state,
        add_batch_rank=True,
      ),
    )
    # Per row: action, logits, values, state.
    self.reply = Tuple(
      IntBox(dtype=np.int64),
      FloatBox((self.num_actions,)),
      FloatBox(),
      *state,
      add_batch_rank=True,
    )

  def _queue(self, space, name, capacity):
    """A queue of `space` records shared by `name` (never destroyed here:
    the other side may still use it), made now."""
    return queue_resource(
      space, capacity, name, destroy=False, batch_size=self.channel.rows
    )

  def request_queue(self):
    """The one request queue: room for two requests per actor."""
    c = self.channel
    return self._queue(self.request, c.request_name, 2 * c.num_actors)

  def reply_queue(self, actor):
    """Actor `actor`'s reply queue."""
    return self._queue(self.reply, self.channel.reply_name(actor), 2)

  def state_leaves(self, state):
    return self.state_space.flatten_value(state) if self.stateful else []


def _set_shapes(tensors, queue, batch=()):
  for t, shape in zip(tensors, queue.shapes):
    t.set_shape(tuple(batch) + shape)
  return tensors


class RemotePolicy(Component):
  """A policy whose calls the `InferenceServer` of `channel` answers, as
  actor `actor` (its slot and reply queue). Arguments and results as
  `IMPALAPolicy`'s `act` and `values` for T = 1 (the stepper's calls).

  APIs: act, values, set_weights (a no-op: the server holds the weights).
  """

  variable_args = ()

  def __init__(
    self,
    channel,
    actor,
    observation_space,
    state_space,
    num_actions,
    scope="policy",
  ):
    super().__init__(scope=scope)
    if not 0 <= actor < channel.num_actors:
      raise ValueError(f"actor {actor} is not in [0, {channel.num_actors})")
    self.channel = channel
    self.actor = int(actor)
    self.records = _Records(
      channel, observation_space, state_space, num_actions
    )

  def create_variables(self, input_spaces):
    r = self.records
    self.requests = self.add_resource("requests", tf=r.request_queue)
    self.replies = self.add_resource(
      "replies", tf=lambda: r.reply_queue(self.actor)
    )

  @api
  def act(self, observations, state, resets, last_rewards, last_actions):
    return self._graph_fn_act(
      observations, state, resets, last_rewards, last_actions
    )

  @api
  def values(self, observations, state, resets, last_rewards, last_actions):
    return self._graph_fn_values(
      observations, state, resets, last_rewards, last_actions
    )

  @api
  def set_weights(self, weights):
    return self._graph_fn_set_weights(weights)

  def _ask(self, observations, state, resets, last_rewards, last_actions):
    """One round trip: {"action", "logits", "values", "state"} of the
    call's rows ([B, ...], no time rank)."""
    r = self.records
    if resets.shape[1] not in (None, 1):
      raise ValueError(f"'{self.path}': calls are of one step (T = 1)")
    size = resets.shape[0]  # None: a root `act` call (B <= rows).
    if size is None:
      size = tf.shape(resets)[0]
    elif size > self.channel.rows:
      raise ValueError(
        f"'{self.path}': a call of {size} rows does not fit requests of "
        f"{self.channel.rows}"
      )
    pad = self.channel.rows - size

    def rows(x):  # [B, ...] -> [rows, ...], zeros (or b"") below.
      if isinstance(pad, int) and not pad:
        return x
      return tf.concat([x, tf.repeat(tf.zeros_like(x[:1]), pad, 0)], 0)

    def step(x):  # [B, 1, ...] -> [B, ...].
      return x[:, 0]

    request = [
      tf.constant(self.actor, tf.int32),
      rows(tf.cast(step(resets), tf.bool)),
      rows(tf.cast(step(last_rewards), tf.float32)),
      rows(tf.cast(step(last_actions), tf.int64)),
    ]
    request += [rows(step(x)) for x in r.obs_space.flatten_value(observations)]
    request += [rows(x) for x in r.state_leaves(state)]
    sent = tf.raw_ops.QueueEnqueueV2(
      handle=self.requests.resource_handle, components=request, timeout_ms=-1
    )
    with tf.control_dependencies([sent]):
      reply = tf.raw_ops.QueueDequeueV2(
        handle=self.replies.resource_handle,
        component_types=self.replies.dtypes,
        timeout_ms=-1,
      )
    reply = [x[:size] for x in _set_shapes(reply, self.replies)]
    new_state = (
      r.state_space.unflatten_value(reply[3:])
      if r.stateful
      else tf.nest.map_structure(tf.identity, state)
    )
    return {
      "action": reply[0],
      "logits": reply[1],
      "values": reply[2],
      "state": new_state,
    }

  @graph_fn
  def _graph_fn_act(
    self, observations, state, resets, last_rewards, last_actions
  ):
    out = self._ask(observations, state, resets, last_rewards, last_actions)
    logits = out["logits"][:, None]
    return {
      "action": out["action"][:, None],
      "greedy_action": tf.argmax(logits, -1, output_type=tf.int64),
      "logits": logits,
      "values": out["values"][:, None],
      "state": out["state"],
    }

  @graph_fn
  def _graph_fn_values(
    self, observations, state, resets, last_rewards, last_actions
  ):
    out = self._ask(observations, state, resets, last_rewards, last_actions)
    return out["values"][:, None]

  @graph_fn
  def _graph_fn_set_weights(self, weights):
    del weights  # The server's policy has them.
    return tf.constant(0, tf.int32)


class InferenceServer(Component):
  """Serves the `RemotePolicy` calls of `channel.num_actors` actors with
  `policy` (an `IMPALAPolicy`; its `act` runs once per batch of one
  request per actor).

  Variables: the policy's, and "batches" (int64), the batches served.

  APIs:
    act(observations, state, resets, last_rewards, last_actions): the
      policy's (a root API builds its variables).
    serve() -> int32: serves `steps_per_call` batches; returns the rows
      served (num_actors * rows per batch, padding included).
    set_weights(weights): the policy's.
    close() -> int32 0: closes the request and reply queues, cancelling
      pending enqueues (the shutdown path); may be called again.
  """

  variable_args = ()

  def __init__(
    self,
    policy,
    channel,
    observation_space,
    state_space,
    num_actions,
    steps_per_call=1,
    scope="inference_server",
  ):
    super().__init__(scope=scope)
    if steps_per_call < 1:
      raise ValueError("steps_per_call must be >= 1")
    self.policy = policy
    self.channel = channel
    self.steps_per_call = int(steps_per_call)
    self.records = _Records(
      channel, observation_space, state_space, num_actions
    )

  def create_variables(self, input_spaces):
    r = self.records
    self.batches = self.add_variable(
      "batches", (), np.int64, "zeros", trainable=False
    )
    self.requests = self.add_resource("requests", tf=r.request_queue)
    self.replies = [
      self.add_resource(f"replies_{a}", tf=lambda a=a: r.reply_queue(a))
      for a in range(self.channel.num_actors)
    ]

  @api
  def act(self, observations, state, resets, last_rewards, last_actions):
    return self.policy.act(
      observations, state, resets, last_rewards, last_actions
    )

  @api
  def serve(self):
    return self._graph_fn_serve(inline(self.act))

  @api
  def set_weights(self, weights):
    return self.policy.set_weights(weights)

  @api
  def close(self):
    return self._graph_fn_close()

  def _serve_one(self, act):
    r, n, rows = self.records, self.channel.num_actors, self.channel.rows
    request = tf.raw_ops.QueueDequeueManyV2(
      handle=self.requests.resource_handle,
      n=n,
      component_types=self.requests.dtypes,
      timeout_ms=-1,
    )
    request = _set_shapes(request, self.requests, (n,))
    slot = request[0]

    def merge(x):  # [n, rows, ...] -> [n * rows, ...].
      return tf.reshape(x, [n * rows] + x.shape[2:].as_list())

    def split(x):  # [n * rows, ...] -> [n, rows, ...].
      return tf.reshape(x, [n, rows] + x.shape[1:].as_list())

    resets, rewards, actions = (merge(x)[:, None] for x in request[1:4])
    num_obs = len(_leaves(r.obs_space))
    obs = r.obs_space.unflatten_value(
      [merge(x)[:, None] for x in request[4 : 4 + num_obs]]
    )
    if r.stateful:
      state = r.state_space.unflatten_value(
        [merge(x) for x in request[4 + num_obs :]]
      )
    else:
      state = tf.nest.map_structure(
        lambda s: tf.zeros([n * rows] + list(s.shape), tf_dtype(s)),
        r.state_space.unflatten_value(_leaves(r.state_space)),
      )
    out = act(obs, state, resets, rewards, actions)
    reply = [out["action"][:, 0], out["logits"][:, 0], out["values"][:, 0]]
    reply += r.state_leaves(out["state"])
    reply = [split(x) for x in reply]
    sent = []
    for a, queue in enumerate(self.replies):
      # Normally one row per actor; in request order where more.
      mine = tf.reshape(tf.where(tf.equal(slot, a)), [-1])
      sent.append(
        tf.raw_ops.QueueEnqueueManyV2(
          handle=queue.resource_handle,
          components=[tf.gather(x, mine) for x in reply],
          timeout_ms=-1,
        )
      )
    with tf.control_dependencies(sent):
      return self.batches.assign_add(1)

  @graph_fn
  def _graph_fn_serve(self, act):
    served = self.channel.num_actors * self.channel.rows

    def body(i):
      with tf.control_dependencies([self._serve_one(act)]):
        return (i + 1,)

    if self.steps_per_call == 1:
      with tf.control_dependencies([self._serve_one(act)]):
        return tf.constant(served, tf.int32)
    with gradients.tf_no_recording():  # No gradient goes through it.
      (steps,) = tf.while_loop(
        lambda i: i < self.steps_per_call,
        body,
        (tf.constant(0),),
        parallel_iterations=1,
      )
    return steps * served

  @graph_fn
  def _graph_fn_close(self):
    ops = [
      tf.raw_ops.QueueCloseV2(
        handle=q.resource_handle, cancel_pending_enqueues=True
      )
      for q in [self.requests] + list(self.replies)
    ]
    with tf.control_dependencies(ops):
      return tf.constant(0, tf.int32)
