"""Uniform ring replay memory for records of any nested space."""

import numpy as np
import tensorflow as tf
import tree

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.executors.checks import (
  tf_check,
  tf_draw,
  tf_leading_sizes,
  torch_check,
  torch_draw,
)
from ingraph_rl.spaces import Dict, IntBox
from ingraph_rl.utils.lazy import torch


class ReplayMemory(Component):
  """A ring buffer: one variable per leaf of the record space, of shape
  [capacity, *leaf.shape] in the leaf's own dtype (uint8 frames stay uint8).

  APIs (fixed return structures):
    insert(records): a batch (leading batch dim) of records; when the ring is
      full the oldest are overwritten. Returns the size after the insert.
    sample(batch_size): uniform over the stored records ->
      {"records": nest, "indices": int32 [batch_size]}.
    get_records(indices): the records at ring positions `indices`.
    get_size(): number of stored records (int32 scalar).

  A batch larger than the capacity keeps its last `capacity` records.

      >>> from ingraph_rl.executors.tensorflow import TFExecutor
      >>> from ingraph_rl.spaces import Dict, FloatBox, IntBox
      >>> records = Dict(obs=FloatBox((4,)), action=IntBox(2),
      ...                add_batch_rank=True)
      >>> ex = TFExecutor(ReplayMemory(100), {"records": records,
      ...     "batch_size": IntBox(), "indices": IntBox(add_batch_rank=True)})
      >>> int(ex.execute("insert", records.sample(8)))
      8
  """

  variable_args = ("records",)

  def __init__(self, capacity, seed=0, scope="replay_memory"):
    super().__init__(scope=scope)
    if int(capacity) < 1:
      raise BuildError(f"'{scope}': capacity must be >= 1, got {capacity}")
    self.capacity = int(capacity)
    self.seed = seed

  def create_variables(self, input_spaces):
    space = self.expect_space(input_spaces, "records")
    leaves = space.flatten()
    if any(not leaf.has_batch_rank or leaf.has_time_rank for _, leaf in leaves):
      raise SpaceError(
        "records need a batch rank (and no time rank)",
        component=self.path,
        api="insert",
        argument="records",
        received=repr(space),
      )
    self.record_space = space.strip_ranks()
    self.buffers = [
      self.add_variable(
        "buffer." + ".".join(str(p) for p in path) if path else "buffer",
        (self.capacity,) + leaf.shape,
        leaf.dtype,
        "zeros",
        trainable=False,
      )
      for path, leaf in leaves
    ]
    self.index = self.add_variable("index", (), np.int32, trainable=False)
    self.size = self.add_variable("size", (), np.int32, trainable=False)
    self.rng = self.add_resource(
      "rng",
      tf=lambda: tf.random.Generator.from_seed(self.seed),
      torch=lambda: torch.Generator().manual_seed(self.seed),
    )

  # --- APIs ------------------------------------------------------------------

  @api
  def insert(self, records):
    return self._graph_fn_insert(records)

  @api
  def sample(self, batch_size):
    return self._graph_fn_sample(batch_size)

  @api
  def get_records(self, indices):
    return self._graph_fn_get_records(indices)

  @api
  def get_size(self):
    return self._graph_fn_get_size()

  # --- TF bodies -----------------------------------------------------------

  def _ring_positions(self, n):
    """Positions for the last min(n, capacity) of n new records, and how
    many leading records are dropped."""
    keep = tf.minimum(n, self.capacity)
    start = self.index + (n - keep)
    return (start + tf.range(keep)) % self.capacity, n - keep

  def _check_rows_agree(self, leaves, api_name="insert", argument="records"):
    """An assert that every leaf has the same number of rows (the root
    executor checks its own arguments; this guards a memory fed inside a
    graph)."""
    sizes = tf_leading_sizes(leaves)
    ok = tf.reduce_all(tf.equal(sizes, sizes[0]))
    return tf_check(
      ok,
      self,
      api_name,
      argument,
      "the leaves of the records disagree on the number of rows",
    )

  def _write(self, records):
    """Writes a batch into the ring (after checking that its leaves agree
    on the number of rows: nothing is written otherwise); returns the ring
    positions written."""
    leaves = tree.flatten(records)
    deps = [self._check_rows_agree(leaves)] if len(leaves) > 1 else []
    with tf.control_dependencies(deps):
      return self._write_checked(leaves)

  def _write_checked(self, leaves):
    n = tf.shape(leaves[0])[0]
    positions, dropped = self._ring_positions(n)
    for buf, leaf in zip(self.buffers, leaves):
      # ScatterUpdate copies each row with one memmove on CPU; ScatterNd
      # copied uint8 frames element by element (8x slower for Pong rows).
      buf.scatter_update(tf.IndexedSlices(leaf[dropped:], positions))
    self.index.assign((self.index + n) % self.capacity)
    self.size.assign(tf.minimum(self.size + n, self.capacity))
    return positions

  @graph_fn
  def _graph_fn_insert(self, records):
    self._write(records)
    return tf.identity(self.size)

  def _gather(self, indices):
    return tree.unflatten_as(
      self.record_space.structure(),
      [tf.gather(buf, indices) for buf in self.buffers],
    )

  def _check_nonempty(self, api_name, argument):
    return tf_check(
      self.size > 0, self, api_name, argument, "the memory is empty"
    )

  def _sample_space(self):
    """Declared: a literal batch size would make the batch dim static, and
    inference would then miss the batch rank."""
    return Dict(
      records=self.record_space.with_batch_rank(),
      indices=IntBox(self.capacity, add_batch_rank=True),
    )

  def _check_batch_size(self, batch_size, nonempty=True):
    """Asserts for `sample(batch_size)`: batch_size >= 0 and, where
    `nonempty`, a non-empty memory (an empty batch may be drawn from
    anything); the draw depends on them, so a refused call leaves the RNG
    alone."""
    batch_size = tf.cast(batch_size, tf.int32)
    checks = [
      tf_check(
        batch_size >= 0,
        self,
        "sample",
        "batch_size",
        "batch_size must be >= 0",
      )
    ]
    if nonempty:
      checks.append(self._check_nonempty("sample", "batch_size"))
    return checks

  @graph_fn(output_space=lambda self: self._sample_space())
  def _graph_fn_sample(self, batch_size):
    with tf.control_dependencies(self._check_batch_size(batch_size)):
      indices = self._tf_uniform_ints(tf.cast(batch_size, tf.int32), self.size)
    return {"records": self._gather(indices), "indices": indices}

  def _tf_uniform_ints(self, n, maxval, dtype=tf.int32):
    """n ints uniform in [0, maxval) from the memory's RNG, which advances
    only if the whole call succeeds (`checks.tf_draw`)."""
    return tf_draw(
      self.rng,
      lambda seed: tf.random.stateless_uniform(
        [n], seed, minval=0, maxval=tf.cast(maxval, dtype), dtype=dtype
      ),
    )

  @graph_fn(output_space=lambda self: self.record_space.with_batch_rank())
  def _graph_fn_get_records(self, indices):
    indices = tf.cast(indices, tf.int32)
    ok = tf.reduce_all((indices >= 0) & (indices < self.size))
    with tf.control_dependencies(
      [
        tf_check(
          ok, self, "get_records", "indices", "indices must lie in [0, size)"
        )
      ]
    ):
      return self._gather(indices)

  @graph_fn
  def _graph_fn_get_size(self):
    return tf.identity(self.size)

  # --- torch bodies ----------------------------------------------------------

  def _torch_write(self, records):
    leaves = tree.flatten(records)
    n = leaves[0].shape[0]
    torch_check(
      all(x.shape[0] == n for x in leaves),
      self,
      "insert",
      "records",
      "the leaves of the records disagree on the number of rows",
    )
    keep = min(n, self.capacity)
    start = int(self.index) + n - keep
    positions = (start + torch.arange(keep)) % self.capacity
    with torch.no_grad():
      for buf, leaf in zip(self.buffers, leaves):
        buf[positions] = leaf[n - keep :].to(buf.dtype)
      self.index.fill_((int(self.index) + n) % self.capacity)
      self.size.fill_(min(int(self.size) + n, self.capacity))
    return positions

  @_graph_fn_insert.torch
  def _graph_fn_insert(self, records):
    self._torch_write(records)
    return self.size.clone()

  def _torch_gather(self, indices):
    idx = indices.long()
    return tree.unflatten_as(
      self.record_space.structure(),
      [buf[idx].detach().clone() for buf in self.buffers],
    )

  def _torch_check_batch_size(self, batch_size):
    torch_check(
      int(batch_size) >= 0,
      self,
      "sample",
      "batch_size",
      "batch_size must be >= 0",
    )
    torch_check(
      int(self.size) > 0, self, "sample", "batch_size", "the memory is empty"
    )

  @_graph_fn_sample.torch
  def _graph_fn_sample(self, batch_size):
    self._torch_check_batch_size(batch_size)
    indices = self._torch_uniform_ints(
      max(int(batch_size), 0), max(int(self.size), 1), torch.int32
    )
    return {"records": self._torch_gather(indices), "indices": indices}

  def _torch_uniform_ints(self, n, maxval, dtype):
    return torch_draw(
      self.rng,
      lambda g: torch.randint(0, maxval, (n,), generator=g, dtype=dtype),
    )

  @_graph_fn_get_records.torch
  def _graph_fn_get_records(self, indices):
    torch_check(
      bool(torch.all((indices >= 0) & (indices < self.size))),
      self,
      "get_records",
      "indices",
      "indices must lie in [0, size)",
    )
    return self._torch_gather(indices)

  @_graph_fn_get_size.torch
  def _graph_fn_get_size(self):
    return self.size.clone()
