"""Embedding lookup: integer ids -> rows of a [vocab, size] table."""

import numpy as np
import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.spaces import IntBox
from ingraph_rl.utils.lazy import F


def _normal(shape, dtype, rng):
  # torch.nn.Embedding's default: N(0, 1).
  return rng.standard_normal(shape).astype(dtype)


class Embedding(Component):
  """`call(ids)` -> `embeddings[ids]`: ids of any shape and leading ranks
  (int, 0 <= id < vocab_size), a trailing axis of `embedding_size` added.

  One variable, `embeddings` [vocab_size, embedding_size], the same layout
  in TF and torch.
  """

  variable_args = ("ids",)

  def __init__(
    self, vocab_size, embedding_size, initializer=_normal, scope="embedding"
  ):
    super().__init__(scope=scope)
    self.vocab_size = int(vocab_size)
    self.embedding_size = int(embedding_size)
    self.initializer = initializer

  def create_variables(self, input_spaces):
    self.expect_space(input_spaces, "ids", IntBox)
    self.embeddings = self.add_variable(
      "embeddings",
      (self.vocab_size, self.embedding_size),
      np.float32,
      self.initializer,
    )

  @api
  def call(self, ids):
    return self._graph_fn_call(ids)

  @graph_fn
  def _graph_fn_call(self, ids):
    return tf.gather(self.embeddings, ids)

  @_graph_fn_call.torch
  def _graph_fn_call(self, ids):
    return F.embedding(ids.long(), self.embeddings)
