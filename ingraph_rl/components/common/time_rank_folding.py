"""Fold the time rank into the batch rank and back, e.g. to run a
feed-forward network over a whole [B, T, ...] rollout at once."""

import tensorflow as tf
import tree

from ingraph_rl.core import Component, api, graph_fn


class TimeRankFolder(Component):
  """`fold(inputs)`: [B, T, ...] (or [T, B, ...]) -> [B*T, ...].
  `unfold(inputs, like)`: [B*T, ...] -> the leading [B, T] (or [T, B]) of
  `like`. Both work on nests; the order of the two leading dims is kept, so
  unfold(fold(x), x) == x.
  """

  def __init__(self, scope="time_rank_folder"):
    super().__init__(scope=scope)

  @api
  def fold(self, inputs):
    return self._graph_fn_fold(inputs)

  @api(own_leading_dims=("inputs",))  # [B * T] next to like's [B, T].
  def unfold(self, inputs, like):
    return self._graph_fn_unfold(inputs, like)

  @graph_fn(output_space=lambda self, spaces: _folded(spaces[0]))
  def _graph_fn_fold(self, inputs):
    return tree.map_structure(
      lambda x: tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], 0)), inputs
    )

  @_graph_fn_fold.torch
  def _graph_fn_fold(self, inputs):
    return tree.map_structure(
      lambda x: x.reshape((-1,) + tuple(x.shape[2:])), inputs
    )

  @graph_fn(output_space=lambda self, spaces: _unfolded(*spaces))
  def _graph_fn_unfold(self, inputs, like):
    lead = tf.shape(tree.flatten(like)[0])[:2]
    return tree.map_structure(
      lambda x: tf.reshape(x, tf.concat([lead, tf.shape(x)[1:]], 0)), inputs
    )

  @_graph_fn_unfold.torch
  def _graph_fn_unfold(self, inputs, like):
    lead = tuple(tree.flatten(like)[0].shape[:2])
    return tree.map_structure(
      lambda x: x.reshape(lead + tuple(x.shape[1:])), inputs
    )


# Declared spaces: from shapes alone a folded [B * T, F] value cannot be
# told from a [batch, time] one when F == T.


def _folded(space):
  """[B, T, ...] -> [B * T, ...]: a batch rank only."""
  if space is None:
    return None
  return space.with_ranks(batch=True, time=False, time_major=False)


def _unfolded(space, like):
  """[B * T, ...] -> the ranks of `like`'s (first) leaf."""
  if space is None or like is None:
    return None
  leaf = like.flatten()[0][1]
  return space.with_ranks(
    batch=leaf.has_batch_rank,
    time=leaf.has_time_rank,
    time_major=leaf.time_major,
  )
