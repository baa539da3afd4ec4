"""A ring of steps for on-policy batches: recent steps, recent episodes."""

import numpy as np
import tensorflow as tf

from ingraph_rl import spaces as sp
from ingraph_rl.components.memories.replay_memory import ReplayMemory
from ingraph_rl.core import api, graph_fn
from ingraph_rl.errors import SpaceError
from ingraph_rl.executors.checks import tf_check, torch_check
from ingraph_rl.utils.lazy import torch


class EpisodeBuffer(ReplayMemory):
  """Steps of ONE environment stream in insertion order, for on-policy
  rollouts (fixed length) and whole episodes (variable length).

  Records: a Dict of any nested spaces with a batch rank (the steps, in
  time order) and a top-level "terminals" leaf, `BoolBox()`: True when the
  step ended its episode. The storage is ReplayMemory's ring (one variable
  of shape [capacity, *leaf.shape] per leaf, in the leaf's dtype; the oldest
  steps are overwritten) plus one bool per slot: whether the step started
  an episode (the step before it, inserted earlier, was terminal; the very
  first step inserted into a fresh buffer counts as a start).

  APIs (outputs are record nests with a leading step dim, in insertion
  order, oldest first; the TF bodies gather over index ranges computed in
  the graph):
    insert(records): appends the steps; returns the number stored.
    get_records(num_records): the most recent min(num_records, size) steps
      (so a fixed-length rollout when that many are stored; fewer, down to
      none, when not). num_records < 0 is a SpaceError.
    get_episodes(num_episodes): the most recent min(num_episodes, E)
      complete episodes, concatenated in order; E counts the stored complete
      episodes. An episode is complete when its terminal step AND its first
      step are stored: a trailing episode without terminal yet, and an
      episode whose first steps were overwritten by the ring (or that began
      before a `clear`), are never returned. Asking for more episodes than
      stored returns the E there are (no steps when E = 0). Episode lengths
      follow from the "terminals" leaf of the result (each episode ends with
      the only True of its steps). num_episodes < 0 is a SpaceError.
    get_size(): stored steps (int32).
    clear(): empties the buffer; returns the size (0). Episode bookkeeping
      goes on: the next step inserted starts an episode exactly when the
      last step inserted before the clear was terminal (so a rollout that
      continues an episode across an update is not mistaken for a complete
      one).

  The variable-length outputs have dynamic shapes: do not `jit_compile` the
  API functions that return them.

      >>> from ingraph_rl.executors.tensorflow import TFExecutor
      >>> from ingraph_rl.spaces import BoolBox, Dict, FloatBox, IntBox
      >>> records = Dict(obs=FloatBox((4,)), terminals=BoolBox(),
      ...                add_batch_rank=True)
      >>> ex = TFExecutor(EpisodeBuffer(100), {"records": records,
      ...     "num_records": IntBox(), "num_episodes": IntBox()})
  """

  # Uniform sampling is for off-policy replay: not an API here.
  sample = None

  def __init__(self, capacity, seed=0, scope="episode_buffer"):
    super().__init__(capacity, seed=seed, scope=scope)

  def create_variables(self, input_spaces):
    space = input_spaces.get("records")
    if (
      not isinstance(space, sp.Dict)
      or "terminals" not in space.keys()
      or not isinstance(space["terminals"], sp.BoolBox)
      or space["terminals"].shape != ()
    ):
      raise SpaceError(
        "unsupported record space",
        component=self.path,
        api="insert",
        argument="records",
        expected="a Dict with a top-level 'terminals' BoolBox() leaf and a "
        "batch rank",
        received=repr(space),
      )
    super().create_variables(input_spaces)
    self.terminal_buffer = dict(
      zip([path for path, _ in space.flatten()], self.buffers)
    )[("terminals",)]
    self.starts = self.add_variable(
      "episode_starts", (self.capacity,), np.bool_, "zeros", trainable=False
    )
    self.last_terminal = self.add_variable(
      "last_terminal", (), np.bool_, "ones", trainable=False
    )

  # --- APIs ------------------------------------------------------------------

  @api
  def get_records(self, num_records):
    return self._graph_fn_get_recent(num_records)

  @api
  def get_episodes(self, num_episodes):
    return self._graph_fn_get_episodes(num_episodes)

  @api
  def clear(self):
    return self._graph_fn_clear()

  # --- TF bodies -----------------------------------------------------------

  @graph_fn
  def _graph_fn_insert(self, records):
    flags = tf.concat([self.last_terminal[None], records["terminals"]], 0)
    positions = self._write(records)
    keep = tf.shape(positions)[0]
    self.starts.scatter_nd_update(positions[:, None], flags[-1 - keep : -1])
    self.last_terminal.assign(flags[-1])
    return tf.identity(self.size)

  def _order(self):
    """Ring positions of the stored steps, oldest first."""
    size = tf.identity(self.size)
    return (self.index - size + tf.range(size)) % self.capacity

  def _check_count(self, n, api_name, argument):
    n = tf.cast(n, tf.int32)
    with tf.control_dependencies(
      [tf_check(n >= 0, self, api_name, argument, f"{argument} must be >= 0")]
    ):
      return tf.identity(n)

  @graph_fn
  def _graph_fn_get_recent(self, num_records):
    n = self._check_count(num_records, "get_records", "num_records")
    order = self._order()
    return self._gather(order[tf.size(order) - tf.minimum(n, tf.size(order)) :])

  @graph_fn
  def _graph_fn_get_episodes(self, num_episodes):
    n = self._check_count(num_episodes, "get_episodes", "num_episodes")
    order = self._order()
    ends = tf.cast(
      tf.where(tf.gather(self.terminal_buffer, order))[:, 0], tf.int32
    )
    num_ends = tf.size(ends)
    # The oldest stored episode counts only if its first step is stored.
    head = tf.cast(tf.reduce_any(tf.gather(self.starts, order[:1])), tf.int32)
    n = tf.minimum(n, tf.maximum(num_ends - 1 + head, 0))
    # Episode i (0-based among the ends) spans (ends[i-1], ends[i]].
    bounds = tf.concat([[-1], ends], 0)
    first, last = bounds[num_ends - n] + 1, bounds[num_ends] + 1
    return self._gather(order[first:last])

  @graph_fn
  def _graph_fn_clear(self):
    self.size.assign(0)
    self.index.assign(0)
    return tf.identity(self.size)

  # --- torch bodies ----------------------------------------------------------

  @_graph_fn_insert.torch
  def _graph_fn_insert(self, records):
    flags = torch.cat([self.last_terminal[None], records["terminals"]], 0)
    positions = self._torch_write(records)
    keep = positions.shape[0]
    with torch.no_grad():
      self.starts[positions] = flags[flags.shape[0] - 1 - keep : -1]
      self.last_terminal.copy_(flags[-1])
    return self.size.clone()

  def _torch_order(self):
    size = int(self.size)
    return (int(self.index) - size + torch.arange(size)) % self.capacity

  def _torch_count(self, n, api_name, argument):
    n = int(n)
    torch_check(n >= 0, self, api_name, argument, f"{argument} must be >= 0")
    return max(n, 0)

  @_graph_fn_get_recent.torch
  def _graph_fn_get_recent(self, num_records):
    n = self._torch_count(num_records, "get_records", "num_records")
    order = self._torch_order()
    return self._torch_gather(order[len(order) - min(n, len(order)) :])

  @_graph_fn_get_episodes.torch
  def _graph_fn_get_episodes(self, num_episodes):
    n = self._torch_count(num_episodes, "get_episodes", "num_episodes")
    order = self._torch_order()
    ends = torch.nonzero(self.terminal_buffer[order])[:, 0]
    head = int(len(order) > 0 and bool(self.starts[order[0]]))
    n = min(n, max(len(ends) - 1 + head, 0))
    bounds = [-1] + ends.tolist()
    first, last = bounds[len(ends) - n] + 1, bounds[len(ends)] + 1
    return self._torch_gather(order[first:last])

  @_graph_fn_clear.torch
  def _graph_fn_clear(self):
    with torch.no_grad():
      self.size.fill_(0)
      self.index.fill_(0)
    return self.size.clone()
