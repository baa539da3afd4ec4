"""Replay for stacked frames (Atari) that stores every frame once."""

import numpy as np
import tensorflow as tf
import tree

from ingraph_rl import spaces as sp
from ingraph_rl.components.memories.replay_memory import ReplayMemory
from ingraph_rl.core import api, graph_fn
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.executors.checks import (
  tf_check,
  tf_leading_sizes,
  torch_check,
)
from ingraph_rl.utils.lazy import torch

_KEYS = ("actions", "rewards", "states", "terminals")


class FrameStackReplay(ReplayMemory):
  """Replay memory for frame-stacked observations that keeps each frame ONCE.

  An agent with a frame stack of `stack` sees observations [*F, stack]
  (e.g. [84, 84, 4] uint8): consecutive observations share stack - 1 frames.
  Storing whole transitions keeps every frame 2 * stack times; this memory
  keeps it once, so 1e6 Atari transitions need about 1e6 * 84 * 84 bytes =
  7.06e9 bytes (6.6 GiB) of frames, plus a few bytes per step.

  Scheme:
    * `num_streams` rings (one per vector-env index) of
      C = capacity // num_streams steps each (the attribute `capacity` is C,
      `total_capacity` is C * num_streams). Every `insert` brings ONE step
      for EVERY stream, so all rings advance together and share the write
      index of `ReplayMemory` (its `index`, `size`, `_write` and
      `_torch_write` do the ring bookkeeping). The per-step buffers are
      therefore time-major: `buffer.frames` is [C, num_streams, *F] in the
      frames' dtype (uint8 stays uint8), the ring of stream s is
      `frames[:, s]`.
    * Per step and stream the memory stores the NEWEST frame
      `states[..., -1]`, the action, reward and terminal, and two int32s:
      the step's age in its episode (capped at stack - 1) and the number of
      its episode's start.
    * Episode starts: the first insert into a fresh memory and every insert
      after a terminal (per stream) starts an episode. Its observation holds
      stack - 1 older frames that no step of this episode stores (the
      agent's preprocessing repeats or zeros them, or they are real frames
      from before the memory existed). They go to a separate per-stream ring
      `start_frames` [num_streams, episode_starts, stack - 1, *F] that keeps
      the prefixes of the last `episode_starts` episode starts per stream
      (default capacity // num_streams // 256, about 1.2% of the frame
      memory at stack 4; 0 disables it).

  n-step transitions (`n_step` = n, `discount` = g): the window of step t
  of stream s is its steps t..t+n-1, cut after the first terminal one: it
  spans m = (the first k with terminals[t+k-1]) steps, else m = n. What
  `sample` returns for that transition (t counts the stream's inserts):
    states: the observation inserted at step t, i.e. frames t-stack+1..t of
      stream s, where a frame from before t's episode start is the frame of
      the episode's start prefix at that position. If that prefix is no
      longer in `start_frames` (more than `episode_starts` newer episode
      starts of the stream, or `episode_starts=0`), those positions are ZERO
      (Dopamine's rule). So `states` equals the stacked observation the
      agent inserted whenever its frames are in memory; the memory assumes
      the agent's stacks are consistent (within an episode the stack of
      step t is the stack of step t-1 shifted by one frame).
    next_states: likewise the observation inserted at step t + m. For a
      terminal transition this is the FIRST observation of the next episode
      (the final observation of an episode is never inserted): mask it with
      `terminals`, as every TD target does.
    rewards: the return r_t + g r_{t+1} + ... + g^(m-1) r_{t+m-1}, summed
      newest first as `NStepAccumulator` does (the same float32 numbers);
      with n = 1 the stored reward (any numeric nest) itself.
    terminals: whether the window ended at a terminal step.
    discounts: float32 g^m, the bootstrap discount (`DQNLoss`'s
      `discounts`; g with n = 1).
    actions: the one inserted at step t.
    indices: int32 flat indices s * C + (t mod C).
  The transitions are those an `NStepAccumulator` makes from the same
  steps, except at episode ends that are not terminations: the memory has
  no final observation to bootstrap from, so insert a truncation (time
  limit) as a terminal -- an episode end without bootstrap, as Dopamine
  does -- and call `end_episodes()` where the agent cuts episodes short
  (resets the envs). The accumulator instead bootstraps from `final_obs`.
  Valid (sampleable) steps t of each stream: step t + n must be stored (no
  partial windows at the head, even where a terminal would end the window
  earlier: validity stays arithmetic on the ring size), so the newest n
  steps are never sampled; and no frame of its stacks may be overwritten:
  once a stream's ring is full its stack - 1 oldest steps are not sampled
  either (the window's rewards, terminals and next stack are newer). With
  `size` steps stored per stream, that leaves size - n while size < C, and
  C - stack - n + 1 once full. `sample(batch_size)` draws uniformly from the
  valid (stream, step) pairs, vectorized (one random draw per batch
  element, no loop).

  Frames are gathered with int64 indices (GatherNd refuses int32 ones into
  more than 2^31 elements; 1e6 84x84 frames are 7e9). `insert` writes the
  episode-start prefixes of a data-dependent number of streams (tf.where),
  so do not `jit_compile` it.

  APIs:
    insert(records): records = {"states": [num_streams, *F, stack],
      "actions": nest, "rewards": nest, "terminals": bool [num_streams]}
      (terminals: the transition ended the episode); returns the number of
      stored steps (all streams). A leading dim other than num_streams is a
      SpaceError and changes nothing.
    sample(batch_size) -> {"states", "actions", "rewards", "next_states",
      "terminals", "discounts", "indices"}; a SpaceError while no step can
      be sampled.
    get_transitions(indices): the same dict for given flat indices (each
      must be a valid step, else a SpaceError). Deterministic, e.g. to
      compare the backends.
    get_size(): stored steps of all streams (num_streams * per-stream size).
    end_episodes(): ends every stream's episode at its newest stored step,
      as a terminal (no window reaches past it, nothing bootstraps from the
      next insert, which starts an episode); returns the number of streams
      whose episode was cut (int32). For envs reset mid-episode.

  Record spaces (checked at build, SpaceError otherwise): a Dict with
  exactly the keys actions, rewards, states, terminals and a batch rank (the
  streams); states a numeric box of per-item shape [*F, stack]; terminals
  BoolBox(); actions and rewards numeric (rewards a scalar float box when
  n_step > 1).

      >>> from ingraph_rl.executors.tensorflow import TFExecutor
      >>> from ingraph_rl.spaces import BoolBox, Dict, FloatBox, IntBox
      >>> records = Dict(states=IntBox(256, (84, 84, 4), dtype=np.uint8),
      ...                actions=IntBox(6), rewards=FloatBox(),
      ...                terminals=BoolBox(), add_batch_rank=True)
      >>> ex = TFExecutor(FrameStackReplay(1000, num_streams=2), {
      ...     "records": records, "batch_size": IntBox(),
      ...     "indices": IntBox(1000, add_batch_rank=True)})
      >>> int(ex.execute("insert", records.sample(2)))
      2
  """

  # The ring helper `get_records(indices)` of ReplayMemory makes no sense
  # for time-major step records: not an API here.
  get_records = None

  def __init__(
    self,
    capacity,
    num_streams,
    stack=4,
    seed=0,
    episode_starts=None,
    n_step=1,
    discount=0.99,
    scope="frame_stack_replay",
  ):
    num_streams, stack, n_step = int(num_streams), int(stack), int(n_step)
    if num_streams < 1 or stack < 1 or n_step < 1:
      raise BuildError(
        f"'{scope}': num_streams, stack and n_step must be >= 1, got "
        f"{num_streams}, {stack} and {n_step}"
      )
    if not 0.0 <= discount <= 1.0:
      raise BuildError(f"'{scope}': discount must lie in [0, 1]")
    per_stream = int(capacity) // num_streams
    if per_stream < stack + n_step:
      raise BuildError(
        f"'{scope}': capacity {capacity} gives {per_stream} steps per "
        f"stream for {num_streams} streams; need >= stack + n_step = "
        f"{stack + n_step}"
      )
    # ReplayMemory's ring length (`self.capacity`) is the steps per stream.
    super().__init__(per_stream, seed=seed, scope=scope)
    self.total_capacity = per_stream * num_streams
    self.num_streams = num_streams
    self.stack = stack
    self.n_step = n_step
    self.discount = float(discount)
    # discount^m for windows of m = 0..n steps (float64, then float32: the
    # numbers of NStepAccumulator's slot discounts).
    self.discount_powers = np.array(
      [self.discount**m for m in range(n_step + 1)], np.float32
    )
    if episode_starts is None:
      episode_starts = max(1, per_stream // 256)
    if int(episode_starts) < 0:
      raise BuildError(f"'{scope}': episode_starts must be >= 0")
    # Nothing to keep when the stack has no older frames.
    self.episode_starts = int(episode_starts) if stack > 1 else 0
    self._streams_reason = (
      f"records must hold one step for each of the {num_streams} streams "
      f"(leading dim {num_streams})"
    )

  # --- variables -------------------------------------------------------------

  def create_variables(self, input_spaces):
    space = input_spaces.get("records")
    self._check_record_space(space)
    states = space["states"]
    self.frame_shape = states.shape[:-1]
    self.other_keys = ("actions", "rewards", "terminals")
    # One time-major step record per insert: every leaf gets a stream dim.
    step = {
      k: _with_streams(space[k], self.num_streams) for k in self.other_keys
    }
    step["frames"] = (
      sp.IntBox(
        shape=(self.num_streams,) + self.frame_shape, dtype=states.dtype
      )
      if states.dtype.kind in "iu"
      else sp.FloatBox(
        (self.num_streams,) + self.frame_shape, dtype=states.dtype
      )
    )
    step["age"] = sp.IntBox(shape=(self.num_streams,))
    step["start_id"] = sp.IntBox(shape=(self.num_streams,))
    self.step_space = sp.Dict(step, add_batch_rank=True)
    per_item = space.strip_ranks()
    rewards = per_item["rewards"]
    if self.n_step > 1:  # Sums: the reward bounds do not hold.
      rewards = sp.FloatBox(dtype=rewards.dtype)
    # Declared: a literal batch size makes the batch dim static, and
    # inference would then miss the batch rank.
    self.transition_space = sp.Dict(
      states=per_item["states"],
      actions=per_item["actions"],
      rewards=rewards,
      next_states=per_item["states"],
      terminals=sp.BoolBox(),
      discounts=sp.FloatBox(),
      indices=sp.IntBox(self.total_capacity),
      add_batch_rank=True,
    )
    super().create_variables({"records": self.step_space})
    self.buffer_of = {
      path: buf
      for (path, _), buf in zip(self.step_space.flatten(), self.buffers)
    }
    s = self.num_streams
    self.last_terminal = self.add_variable(
      "last_terminal", (s,), np.bool_, "ones", trainable=False
    )
    self.episode_age = self.add_variable(
      "episode_age", (s,), np.int32, trainable=False
    )
    self.num_starts = self.add_variable(
      "num_starts", (s,), np.int32, trainable=False
    )
    if self.episode_starts:
      self.start_frames = self.add_variable(
        "start_frames",
        (s, self.episode_starts, self.stack - 1) + self.frame_shape,
        states.dtype,
        "zeros",
        trainable=False,
      )

  def _check_record_space(self, space):
    problems = []
    if not isinstance(space, sp.Dict) or tuple(sorted(space.keys())) != _KEYS:
      problems.append(f"a Dict with exactly the keys {list(_KEYS)}")
    else:
      leaves = space.flatten()
      if any(
        not leaf.has_batch_rank or leaf.has_time_rank for _, leaf in leaves
      ):
        problems.append("a batch rank (the streams) and no time rank")
      if any(isinstance(leaf, sp.TextBox) for _, leaf in leaves):
        problems.append("numeric leaves")
      states = space["states"]
      if (
        not isinstance(states, sp.BoxSpace)
        or states.rank < 1
        or states.shape[-1] != self.stack
        or states.dtype.kind not in "iuf"
      ):
        problems.append(
          f"'states' a numeric box of per-item shape "
          f"[..., {self.stack}] (the frame stack last)"
        )
      terminals = space["terminals"]
      if not isinstance(terminals, sp.BoolBox) or terminals.shape != ():
        problems.append("'terminals' a BoolBox() per stream")
      rewards = space["rewards"]
      if self.n_step > 1 and (
        not isinstance(rewards, sp.FloatBox) or rewards.shape != ()
      ):
        problems.append(
          f"'rewards' a FloatBox() per stream (n_step={self.n_step} sums them)"
        )
    if problems:
      raise SpaceError(
        "unsupported record space",
        component=self.path,
        api="insert",
        argument="records",
        expected="; ".join(problems),
        received=repr(space),
      )

  # --- APIs ------------------------------------------------------------------

  @api
  def get_transitions(self, indices):
    return self._graph_fn_get_transitions(indices)

  @api
  def end_episodes(self):
    return self._graph_fn_end_episodes()

  # --- shared arithmetic (both backends) -------------------------------------

  def _frames_to_stack_perm(self, rank):
    """[B, k, *F] -> [B, *F, k]."""
    return [0] + list(range(2, rank)) + [1]

  def _stack_to_frames_perm(self, rank):
    """[B, *F, k] -> [B, k, *F]."""
    return [0, rank - 1] + list(range(1, rank - 1))

  def _num_valid(self, size):
    """Sampleable steps per stream, as arithmetic on the ring size (a
    Python int or a tensor)."""
    full = self.capacity - self.stack - self.n_step + 1
    if isinstance(size, int):
      return size - self.n_step if size < self.capacity else full
    return tf.where(size < self.capacity, size - self.n_step, full)

  def _unsampleable_reason(self):
    return (
      f"no transition can be sampled yet (each stream needs "
      f"{self.n_step + 1} stored steps)"
    )

  def _bad_indices_reason(self):
    return (
      f"indices must be sampleable steps (stream * capacity_per_stream + "
      f"slot, not among a stream's newest {self.n_step}, stacks not "
      f"overwritten)"
    )

  # --- TF bodies -----------------------------------------------------------

  @graph_fn
  def _graph_fn_insert(self, records):
    states = records["states"]
    ok = tf.equal(tf_leading_sizes([states])[0], self.num_streams)
    with tf.control_dependencies(
      [tf_check(ok, self, "insert", "records", self._streams_reason)]
    ):
      starts = tf.identity(self.last_terminal)
      age = tf.where(
        starts, 0, tf.minimum(self.episode_age + 1, self.stack - 1)
      )
      start_id = self.num_starts + tf.cast(starts, tf.int32) - 1
      if self.episode_starts:
        rows = tf.cast(tf.where(starts)[:, 0], tf.int32)
        slots = tf.gather(self.num_starts, rows) % self.episode_starts
        prefix = tf.transpose(
          tf.gather(states, rows)[..., :-1],
          self._stack_to_frames_perm(states.shape.rank),
        )
        self.start_frames.scatter_nd_update(tf.stack([rows, slots], 1), prefix)
      self.num_starts.assign(start_id + 1)
      step = {k: records[k] for k in self.other_keys}
      step.update(frames=states[..., -1], age=age, start_id=start_id)
      self._write(tree.map_structure(lambda x: x[None], step))
      self.episode_age.assign(age)
      self.last_terminal.assign(records["terminals"])
    return self.num_streams * tf.identity(self.size)

  def _stack(self, streams, slots):
    """Observations [B, *F, k] of the steps at (stream, ring slot)."""
    k, c = self.stack, self.capacity
    j = tf.range(k)
    tau = (slots[:, None] - (k - 1) + j[None]) % c
    s_b = tf.broadcast_to(streams[:, None], tf.shape(tau))
    # int64 indices: GatherNd refuses int32 ones into more than 2^31
    # elements, and 1e6 84x84 frames are 7e9.
    frames = tf.gather_nd(
      self.buffer_of[("frames",)], tf.cast(tf.stack([tau, s_b], -1), tf.int64)
    )
    at = tf.stack([slots, streams], 1)
    age = tf.gather_nd(self.buffer_of[("age",)], at)
    before_start = j[None] < (k - 1 - age)[:, None]
    extra = tf.ones([len(self.frame_shape)], tf.int32)

    def mask(m):  # [B, k] -> [B, k, 1, ...] to select whole frames.
      return tf.reshape(m, tf.concat([tf.shape(m), extra], 0))

    if self.episode_starts:
      sid = tf.gather_nd(self.buffer_of[("start_id",)], at)
      alive = sid >= tf.gather(self.num_starts, streams) - self.episode_starts
      which = tf.broadcast_to(
        (sid % self.episode_starts)[:, None], tf.shape(tau)
      )
      pos = tf.minimum(j[None] + age[:, None], k - 2)
      prefix = tf.gather_nd(
        self.start_frames, tf.cast(tf.stack([s_b, which, pos], -1), tf.int64)
      )
      use = before_start & alive[:, None]
      frames = tf.where(mask(use), prefix, frames)
      before_start = before_start & ~use
    frames = tf.where(mask(before_start), tf.zeros_like(frames), frames)
    return tf.transpose(
      frames, self._frames_to_stack_perm(len(self.frame_shape) + 2)
    )

  def _n_step(self, streams, slots):
    """(return, terminal, m) of the windows starting at (stream, slot)."""
    n, c = self.n_step, self.capacity
    tau = (slots[:, None] + tf.range(n)[None]) % c  # [B, n]
    at = tf.stack([tau, tf.broadcast_to(streams[:, None], tf.shape(tau))], -1)
    rewards = tf.gather_nd(self.buffer_of[("rewards",)], at)
    terminals = tf.gather_nd(self.buffer_of[("terminals",)], at)
    # Newest first, as NStepAccumulator sums (same rounding); a terminal
    # step ends the window, so nothing after it is added.
    ret = rewards[:, n - 1]
    for k in range(n - 2, -1, -1):
      ret = rewards[:, k] + self.discount * tf.where(
        terminals[:, k], tf.zeros_like(ret), ret
      )
    # Steps before the first terminal one, + 1 for it (n if none).
    before = tf.reduce_sum(
      tf.cast(tf.cumsum(tf.cast(terminals, tf.int32), 1) == 0, tf.int32), 1
    )
    return ret, tf.reduce_any(terminals, 1), tf.minimum(before + 1, n)

  def _transitions(self, indices):
    c = self.capacity
    streams, slots = indices // c, indices % c
    at = tf.stack([slots, streams], 1)
    out = {
      k: tree.unflatten_as(
        self.step_space[k].structure(),
        [
          tf.gather_nd(self.buffer_of[p], at)
          for p, _ in self.step_space.flatten()
          if p[0] == k
        ],
      )
      for k in self.other_keys
    }
    m = tf.ones_like(slots)
    if self.n_step > 1:
      out["rewards"], out["terminals"], m = self._n_step(streams, slots)
    out["states"] = self._stack(streams, slots)
    out["next_states"] = self._stack(streams, (slots + m) % c)
    out["discounts"] = tf.gather(self.discount_powers, m)
    out["indices"] = indices
    return out

  @graph_fn(output_space=lambda self: self.transition_space)
  def _graph_fn_sample(self, batch_size):
    per_stream = tf.maximum(self._num_valid(tf.identity(self.size)), 0)
    total = self.num_streams * per_stream
    with tf.control_dependencies(
      self._check_batch_size(batch_size, nonempty=False)
      + [
        tf_check(
          total > 0,
          self,
          "sample",
          "batch_size",
          self._unsampleable_reason(),
        )
      ]
    ):
      u = self._tf_uniform_ints(
        tf.cast(batch_size, tf.int32), tf.maximum(total, 1)
      )
    n = tf.maximum(per_stream, 1)
    back = self.n_step + u % n  # Steps back from the newest.
    slots = (self.index - 1 - back) % self.capacity
    return self._transitions(u // n * self.capacity + slots)

  @graph_fn(output_space=lambda self: self.transition_space)
  def _graph_fn_get_transitions(self, indices):
    indices = tf.cast(indices, tf.int32)
    per_stream = self._num_valid(tf.identity(self.size))
    back = (self.index - 1 - indices % self.capacity) % self.capacity
    ok = tf.reduce_all(
      (indices >= 0)
      & (indices < self.num_streams * self.capacity)
      & (back >= self.n_step)
      & (back < self.n_step + per_stream)
    )
    with tf.control_dependencies(
      [
        tf_check(
          ok,
          self,
          "get_transitions",
          "indices",
          self._bad_indices_reason(),
        )
      ]
    ):
      indices = tf.identity(indices)
    return self._transitions(indices)

  @graph_fn
  def _graph_fn_end_episodes(self):
    size = tf.identity(self.size)
    cut = tf.logical_not(self.last_terminal) & (size > 0)
    newest = (self.index - 1) % self.capacity
    terminals = self.buffer_of[("terminals",)]
    # The newest step becomes terminal (a no-op where the memory is empty:
    # `cut` is all False then).
    terminals.scatter_nd_update(
      tf.reshape(newest, [1, 1]), (tf.gather(terminals, newest) | cut)[None]
    )
    with tf.control_dependencies([cut]):
      self.last_terminal.assign(tf.ones_like(self.last_terminal))
    return tf.reduce_sum(tf.cast(cut, tf.int32))

  @graph_fn
  def _graph_fn_get_size(self):
    return self.num_streams * tf.identity(self.size)

  # --- torch bodies ----------------------------------------------------------

  @_graph_fn_insert.torch
  def _graph_fn_insert(self, records):
    states = records["states"]
    n = states.shape[0]
    torch_check(
      n == self.num_streams, self, "insert", "records", self._streams_reason
    )
    if n != self.num_streams:
      # Only in the torch executor's build passes (batch sizes 2 and 5,
      # value checks suspended): make rows that fit the streams.
      rows = torch.arange(self.num_streams) % max(n, 1)
      records = tree.map_structure(lambda x: x[rows], records)
      states = records["states"]
    starts = self.last_terminal.detach().clone()
    age = torch.where(
      starts,
      torch.zeros_like(self.episode_age),
      torch.clamp(self.episode_age + 1, max=self.stack - 1),
    )
    start_id = self.num_starts + starts.to(torch.int32) - 1
    with torch.no_grad():
      if self.episode_starts:
        rows = torch.nonzero(starts)[:, 0]
        slots = self.num_starts[rows].long() % self.episode_starts
        self.start_frames[rows, slots] = (
          states[rows][..., :-1]
          .permute(*self._stack_to_frames_perm(states.dim()))
          .to(self.start_frames.dtype)
        )
      self.num_starts.copy_(start_id + 1)
      step = {k: records[k] for k in self.other_keys}
      step.update(frames=states[..., -1], age=age, start_id=start_id)
      self._torch_write(tree.map_structure(lambda x: x[None], step))
      self.episode_age.copy_(age)
      self.last_terminal.copy_(records["terminals"])
    return (self.num_streams * self.size).clone()

  def _torch_stack(self, streams, slots):
    k, c = self.stack, self.capacity
    j = torch.arange(k)
    tau = (slots[:, None] - (k - 1) + j[None]) % c
    s_b = streams[:, None].expand_as(tau)
    frames = self.buffer_of[("frames",)][tau, s_b]
    age = self.buffer_of[("age",)][slots, streams].long()
    before_start = j[None] < (k - 1 - age)[:, None]
    extra = (1,) * len(self.frame_shape)

    def mask(m):
      return m.reshape(m.shape + extra)

    if self.episode_starts:
      sid = self.buffer_of[("start_id",)][slots, streams].long()
      alive = sid >= self.num_starts[streams].long() - self.episode_starts
      which = (sid % self.episode_starts)[:, None].expand_as(tau)
      pos = torch.clamp(j[None] + age[:, None], max=k - 2)
      prefix = self.start_frames[s_b, which, pos]
      use = before_start & alive[:, None]
      frames = torch.where(mask(use), prefix, frames)
      before_start = before_start & ~use
    frames = torch.where(mask(before_start), torch.zeros_like(frames), frames)
    return (
      frames.permute(*self._frames_to_stack_perm(len(self.frame_shape) + 2))
      .detach()
      .clone()
    )

  def _torch_n_step(self, streams, slots):
    n, c = self.n_step, self.capacity
    tau = (slots[:, None] + torch.arange(n)[None]) % c
    s_b = streams[:, None].expand_as(tau)
    rewards = self.buffer_of[("rewards",)][tau, s_b].detach()
    terminals = self.buffer_of[("terminals",)][tau, s_b]
    ret = rewards[:, n - 1]
    for k in range(n - 2, -1, -1):
      ret = rewards[:, k] + self.discount * torch.where(
        terminals[:, k], torch.zeros_like(ret), ret
      )
    before = (torch.cumsum(terminals.long(), 1) == 0).long().sum(1)
    return ret, terminals.any(1), torch.clamp(before + 1, max=n)

  def _torch_transitions(self, indices):
    c = self.capacity
    idx = indices.long()
    streams, slots = idx // c, idx % c
    out = {
      k: tree.unflatten_as(
        self.step_space[k].structure(),
        [
          self.buffer_of[p][slots, streams].detach().clone()
          for p, _ in self.step_space.flatten()
          if p[0] == k
        ],
      )
      for k in self.other_keys
    }
    m = torch.ones_like(slots)
    if self.n_step > 1:
      out["rewards"], out["terminals"], m = self._torch_n_step(streams, slots)
    out["states"] = self._torch_stack(streams, slots)
    out["next_states"] = self._torch_stack(streams, (slots + m) % c)
    out["discounts"] = torch.from_numpy(self.discount_powers)[m]
    out["indices"] = indices.to(torch.int32)
    return out

  @_graph_fn_sample.torch
  def _graph_fn_sample(self, batch_size):
    per_stream = max(self._num_valid(int(self.size)), 0)
    total = self.num_streams * per_stream
    torch_check(
      int(batch_size) >= 0,
      self,
      "sample",
      "batch_size",
      "batch_size must be >= 0",
    )
    torch_check(
      total > 0, self, "sample", "batch_size", self._unsampleable_reason()
    )
    u = self._torch_uniform_ints(
      max(int(batch_size), 0), max(total, 1), torch.int64
    )
    n = max(per_stream, 1)
    back = self.n_step + u % n
    slots = (int(self.index) - 1 - back) % self.capacity
    return self._torch_transitions(u // n * self.capacity + slots)

  @_graph_fn_get_transitions.torch
  def _graph_fn_get_transitions(self, indices):
    idx = indices.long()
    back = (int(self.index) - 1 - idx % self.capacity) % self.capacity
    ok = bool(
      torch.all(
        (idx >= 0)
        & (idx < self.num_streams * self.capacity)
        & (back >= self.n_step)
        & (back < self.n_step + self._num_valid(int(self.size)))
      )
    )
    torch_check(
      ok, self, "get_transitions", "indices", self._bad_indices_reason()
    )
    # Build passes (checks suspended) may feed any index: keep it in range.
    idx = torch.clamp(idx, 0, self.num_streams * self.capacity - 1)
    return self._torch_transitions(idx)

  @_graph_fn_get_size.torch
  def _graph_fn_get_size(self):
    return (self.num_streams * self.size).clone()

  @_graph_fn_end_episodes.torch
  def _graph_fn_end_episodes(self):
    cut = ~self.last_terminal
    if int(self.size) == 0:
      cut = torch.zeros_like(cut)
    newest = (int(self.index) - 1) % self.capacity
    with torch.no_grad():
      self.buffer_of[("terminals",)][newest] |= cut
      self.last_terminal.fill_(True)
    return cut.sum().to(torch.int32)


def _with_streams(space, num_streams):
  """`space` per stream -> the same space with a leading stream dim (no
  ranks; bounds dropped, the buffers need shapes and dtypes only)."""
  if isinstance(space, sp.Dict):
    return sp.Dict({k: _with_streams(v, num_streams) for k, v in space.items()})
  if isinstance(space, sp.Tuple):
    return sp.Tuple(*[_with_streams(v, num_streams) for v in space])
  shape = (num_streams,) + space.shape
  if isinstance(space, sp.BoolBox):
    return sp.BoolBox(shape)
  if isinstance(space, sp.IntBox):
    return sp.IntBox(shape=shape, dtype=space.dtype)
  return sp.FloatBox(shape, dtype=space.dtype)
