"""Prioritized experience replay (Schaul et al., 2016) on segment trees."""

import numpy as np
import tensorflow as tf
import tree

from ingraph_rl.components.memories import segment_tree
from ingraph_rl.components.memories.replay_memory import ReplayMemory
from ingraph_rl.core import api, graph_fn
from ingraph_rl.executors.checks import (
  tf_check,
  tf_draw,
  tf_leading_sizes,
  torch_check,
  torch_draw,
)
from ingraph_rl.spaces import Dict, FloatBox
from ingraph_rl.utils.lazy import torch


class PrioritizedReplay(ReplayMemory):
  """Proportional prioritized replay.

  A record with priority p_i is sampled with probability
  P(i) = p_i^alpha / sum_k p_k^alpha. The sum tree gives that sample for a
  whole batch in one vectorized descent of log2(capacity) steps; the min
  tree gives the largest importance weight. New records get the largest
  priority seen so far (1.0 at first).

  APIs (besides `insert`, `get_records`, `get_size` of ReplayMemory):
    sample(batch_size, beta=None) -> {"records", "indices", "weights"}:
      stratified: the total mass is cut into `batch_size` equal segments and
      one mass is drawn uniformly in each. weights = (N * P(i))^-beta /
      max_j (N * P(j))^-beta, N = size; `beta` may be fed per call to anneal
      it (None uses the constructor's).
    update_priorities(indices, priorities): new priorities (> 0, finite) for
      records at ring positions `indices`. When a batch holds the same index
      several times, its LAST occurrence wins. Bad priorities raise a
      SpaceError and change nothing.
    insert_with_priorities(records, priorities): `insert` with each
      record's own initial priority (e.g. an Ape-X actor's |TD|), instead
      of the largest seen; they raise the running maximum. Priorities must
      be finite and > 0, one per record, else a SpaceError and nothing is
      written. Returns the size after.
  """

  def __init__(
    self, capacity, alpha=0.6, beta=0.4, seed=0, scope="prioritized_replay"
  ):
    super().__init__(capacity, seed=seed, scope=scope)
    self.alpha = float(alpha)
    self.beta = float(beta)
    self.num_leaves = segment_tree.num_leaves_pow2(self.capacity)

  def create_variables(self, input_spaces):
    super().create_variables(input_spaces)
    self.sum_tree = self.add_variable(
      "sum_tree",
      (segment_tree.tree_size(self.capacity),),
      np.float32,
      segment_tree.initial_tree(self.capacity, "sum"),
      trainable=False,
    )
    self.min_tree = self.add_variable(
      "min_tree",
      (segment_tree.tree_size(self.capacity),),
      np.float32,
      segment_tree.initial_tree(self.capacity, "min"),
      trainable=False,
    )
    self.max_priority = self.add_variable(
      "max_priority", (), np.float32, 1.0, trainable=False
    )

  @api
  def sample(self, batch_size, beta=None):
    return self._graph_fn_sample(batch_size, beta)

  @api
  def update_priorities(self, indices, priorities):
    return self._graph_fn_update_priorities(indices, priorities)

  @api
  def insert_with_priorities(self, records, priorities):
    return self._graph_fn_insert_with_priorities(records, priorities)

  # --- TF bodies -----------------------------------------------------------

  @graph_fn
  def _graph_fn_insert(self, records):
    positions = self._write(records)
    p = tf.fill(tf.shape(positions), self.max_priority**self.alpha)
    segment_tree.update(self.sum_tree, positions, p, "sum")
    segment_tree.update(self.min_tree, positions, p, "min")
    return tf.identity(self.size)

  def _tf_priority_checks(self, api_name, rows, priorities, rows_of):
    sizes = tf_leading_sizes([rows, priorities])
    ok_n = tf.equal(sizes[0], sizes[1])
    ok_p = tf.reduce_all(tf.math.is_finite(priorities) & (priorities > 0))
    return [
      tf_check(
        ok_n,
        self,
        api_name,
        "priorities",
        f"{rows_of} and priorities differ in length",
      ),
      tf_check(
        ok_p,
        self,
        api_name,
        "priorities",
        "priorities must be finite and > 0",
      ),
    ]

  @graph_fn
  def _graph_fn_insert_with_priorities(self, records, priorities):
    priorities = tf.cast(priorities, tf.float32)
    leaves = tree.flatten(records)
    checks = self._tf_priority_checks(
      "insert_with_priorities", leaves[0], priorities, "records"
    )
    if len(leaves) > 1:
      checks.append(
        self._check_rows_agree(leaves, "insert_with_priorities", "records")
      )
    with tf.control_dependencies(checks):
      n = tf.shape(leaves[0])[0]
      positions = self._write_checked(leaves)
      # A batch over capacity keeps its last rows (as `_write` does).
      p = priorities[n - tf.shape(positions)[0] :] ** self.alpha
      segment_tree.update(self.sum_tree, positions, p, "sum")
      segment_tree.update(self.min_tree, positions, p, "min")
      self.max_priority.assign(
        tf.maximum(self.max_priority, tf.reduce_max(priorities))
      )
    return tf.identity(self.size)

  def _sample_space(self):
    space = super()._sample_space()
    return Dict(**dict(space.items()), weights=FloatBox(add_batch_rank=True))

  @graph_fn(output_space=lambda self: self._sample_space())
  def _graph_fn_sample(self, batch_size, beta):
    beta = self.beta if beta is None else beta
    with tf.control_dependencies(self._check_batch_size(batch_size)):
      batch_size = tf.cast(batch_size, tf.int32)
      total = segment_tree.total(self.sum_tree)
    segment = total / tf.cast(tf.maximum(batch_size, 1), tf.float32)
    draws = tf_draw(
      self.rng, lambda seed: tf.random.stateless_uniform([batch_size], seed)
    )
    masses = (tf.cast(tf.range(batch_size), tf.float32) + draws) * segment
    # Float rounding can carry a mass past the last stored record.
    indices = tf.minimum(
      segment_tree.find_prefixsum_idx(self.sum_tree, masses), self.size - 1
    )
    size = tf.cast(self.size, tf.float32)
    probs = tf.gather(self.sum_tree, indices + self.num_leaves) / total
    min_prob = segment_tree.min_value(self.min_tree) / total
    weights = (probs * size) ** -beta / (min_prob * size) ** -beta
    return {
      "records": self._gather(indices),
      "indices": indices,
      "weights": weights,
    }

  @graph_fn
  def _graph_fn_update_priorities(self, indices, priorities):
    indices = tf.cast(indices, tf.int32)
    priorities = tf.cast(priorities, tf.float32)
    ok_i = tf.reduce_all((indices >= 0) & (indices < self.size))
    checks = self._tf_priority_checks(
      "update_priorities", indices, priorities, "indices"
    ) + [
      tf_check(
        ok_i,
        self,
        "update_priorities",
        "indices",
        "indices must lie in [0, size)",
      ),
    ]
    # Every write (both trees, the running maximum) waits for all checks.
    with tf.control_dependencies(checks):
      p = priorities**self.alpha
      segment_tree.update(self.sum_tree, indices, p, "sum")
      segment_tree.update(self.min_tree, indices, p, "min")
      self.max_priority.assign(
        tf.maximum(self.max_priority, tf.reduce_max(priorities))
      )
    return tf.identity(self.max_priority)

  # --- torch bodies ----------------------------------------------------------

  @_graph_fn_insert.torch
  def _graph_fn_insert(self, records):
    positions = self._torch_write(records)
    p = torch.full(positions.shape, float(self.max_priority) ** self.alpha)
    with torch.no_grad():
      segment_tree.torch_update(self.sum_tree, positions, p, "sum")
      segment_tree.torch_update(self.min_tree, positions, p, "min")
    return self.size.clone()

  @_graph_fn_sample.torch
  def _graph_fn_sample(self, batch_size, beta):
    beta = self.beta if beta is None else float(beta)
    self._torch_check_batch_size(batch_size)
    batch_size = max(int(batch_size), 0)
    total = self.sum_tree[1]
    draws = torch_draw(self.rng, lambda g: torch.rand(batch_size, generator=g))
    masses = (torch.arange(batch_size, dtype=torch.float32) + draws) * (
      total / max(batch_size, 1)
    )
    indices = torch.clamp(
      segment_tree.torch_find_prefixsum_idx(self.sum_tree, masses),
      max=max(int(self.size) - 1, 0),
    ).to(torch.int32)
    size = float(self.size)
    probs = self.sum_tree[indices.long() + self.num_leaves] / total
    min_prob = self.min_tree[1] / total
    weights = (probs * size) ** -beta / (min_prob * size) ** -beta
    return {
      "records": self._torch_gather(indices),
      "indices": indices,
      "weights": weights.detach().clone(),
    }

  @_graph_fn_insert_with_priorities.torch
  def _graph_fn_insert_with_priorities(self, records, priorities):
    priorities = priorities.to(torch.float32)
    n = tree.flatten(records)[0].shape[0]
    torch_check(
      n == priorities.shape[0],
      self,
      "insert_with_priorities",
      "priorities",
      "records and priorities differ in length",
    )
    torch_check(
      bool(torch.all(torch.isfinite(priorities) & (priorities > 0))),
      self,
      "insert_with_priorities",
      "priorities",
      "priorities must be finite and > 0",
    )
    positions = self._torch_write(records)
    p = priorities[n - positions.shape[0] :] ** self.alpha
    with torch.no_grad():
      segment_tree.torch_update(self.sum_tree, positions, p, "sum")
      segment_tree.torch_update(self.min_tree, positions, p, "min")
      if priorities.numel():
        self.max_priority.fill_(
          max(float(self.max_priority), float(priorities.max()))
        )
    return self.size.clone()

  @_graph_fn_update_priorities.torch
  def _graph_fn_update_priorities(self, indices, priorities):
    priorities = priorities.to(torch.float32)
    torch_check(
      indices.shape[0] == priorities.shape[0],
      self,
      "update_priorities",
      "priorities",
      "indices and priorities differ in length",
    )
    torch_check(
      bool(torch.all(torch.isfinite(priorities) & (priorities > 0))),
      self,
      "update_priorities",
      "priorities",
      "priorities must be finite and > 0",
    )
    torch_check(
      bool(torch.all((indices >= 0) & (indices < self.size))),
      self,
      "update_priorities",
      "indices",
      "indices must lie in [0, size)",
    )
    p = priorities**self.alpha
    with torch.no_grad():
      segment_tree.torch_update(self.sum_tree, indices, p, "sum")
      segment_tree.torch_update(self.min_tree, indices, p, "min")
      if priorities.numel():
        self.max_priority.fill_(
          max(float(self.max_priority), float(priorities.max()))
        )
    return self.max_priority.detach().clone()
