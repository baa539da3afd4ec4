"""IMPALA's instruction encoder for DM Lab language levels (scalable_agent's
`Agent._instruction`): words -> hash buckets -> embedding -> LSTM, and the
LSTM output at each instruction's last word.

Tokenizing runs in the graph on `tf.string` and is TF-only (torch has no
strings); `encode` on token ids has a torch mirror, so the numbers are
checked TF-vs-torch from the token ids on.
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.components.layers import LSTM, Embedding
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.spaces import Dict, FloatBox, IntBox, TextBox
from ingraph_rl.utils.lazy import torch

NUM_HASH_BUCKETS = 1000
EMBEDDING_SIZE = 20
LSTM_UNITS = 64


class InstructionTokenizer(Component):
  """`call(instructions)`: str [N] -> {"tokens": int64 [N, L] (batch and
  time ranks: a word per step), "lengths": int32 [N]}.

  Words are split on whitespace and hashed into `num_buckets` buckets
  (`tf.strings.to_hash_bucket_fast`: a collision now and then, no
  vocabulary to ship). Rows are padded with 0 to the longest instruction,
  and to L >= 1, so an all-empty batch still has one step; an empty
  instruction has length 0.
  """

  def __init__(self, num_buckets=NUM_HASH_BUCKETS, scope="tokenizer"):
    super().__init__(scope=scope)
    self.num_buckets = int(num_buckets)

  def create_variables(self, input_spaces):
    self.expect_space(input_spaces, "instructions", TextBox, rank=0)

  @api
  def call(self, instructions):
    return self._graph_fn_tokenize(instructions)

  def _output_space(self):
    return Dict(
      tokens=IntBox(
        self.num_buckets,
        dtype=np.int64,
        add_batch_rank=True,
        add_time_rank=True,
      ),
      lengths=IntBox(None, dtype=np.int32, add_batch_rank=True),
    )

  @graph_fn(output_space=lambda self: self._output_space())
  def _graph_fn_tokenize(self, instructions):
    words = tf.strings.split(instructions)
    lengths = tf.cast(words.row_lengths(), tf.int32)
    buckets = tf.strings.to_hash_bucket_fast(words, self.num_buckets)
    tokens = buckets.to_tensor(default_value=0)
    # At least one step: the LSTM then always has an output to pick.
    pad = tf.cast(tf.equal(tf.shape(tokens)[1], 0), tf.int32)
    tokens = tf.pad(tokens, [[0, 0], [0, pad]])
    return {"tokens": tokens, "lengths": lengths}


class InstructionEncoder(Component):
  """Instructions -> [N, lstm_units] features.

  APIs:
    call(instructions str [N]) -> float32 [N, lstm_units] (TF only: it
      tokenizes).
    encode(tokens int64 [N, L], lengths int32 [N]) -> [N, lstm_units]: the
      embedding (`embedding_size`) of every token, an LSTM over the L
      tokens from a zero state, and its output at token `lengths - 1`
      (zeros for an empty instruction, as scalable_agent's dynamic_rnn
      gives). Padding after the last token cannot change that output.
  """

  def __init__(
    self,
    num_buckets=NUM_HASH_BUCKETS,
    embedding_size=EMBEDDING_SIZE,
    lstm_units=LSTM_UNITS,
    scope="instruction_encoder",
  ):
    super().__init__(scope=scope)
    self.lstm_units = int(lstm_units)
    self.tokenizer = InstructionTokenizer(num_buckets, scope="tokenizer")
    self.embedding = Embedding(num_buckets, embedding_size, scope="embedding")
    self.lstm = LSTM(lstm_units, scope="lstm")

  @api
  def call(self, instructions):
    tokens = self.tokenizer.call(instructions)
    return self.encode(tokens["tokens"], tokens["lengths"])

  @api
  def encode(self, tokens, lengths):
    out = self.lstm.call(
      self.embedding.call(tokens), self._graph_fn_zero_state(tokens)
    )
    return self._graph_fn_last(out["outputs"], lengths)

  def _state_space(self):
    box = FloatBox((self.lstm_units,), add_batch_rank=True)
    return Dict(c=box, h=box)

  @graph_fn(output_space=lambda self: self._state_space())
  def _graph_fn_zero_state(self, tokens):
    zeros = tf.zeros([tf.shape(tokens)[0], self.lstm_units])
    return {"c": zeros, "h": tf.identity(zeros)}

  @_graph_fn_zero_state.torch
  def _graph_fn_zero_state(self, tokens):
    zeros = torch.zeros((tokens.shape[0], self.lstm_units))
    return {"c": zeros, "h": zeros.clone()}

  @graph_fn(
    output_space=lambda self: FloatBox((self.lstm_units,), add_batch_rank=True)
  )
  def _graph_fn_last(self, outputs, lengths):
    # Clipped to the padded length too (the torch build feeds random ones).
    index = tf.clip_by_value(lengths - 1, 0, tf.shape(outputs)[1] - 1)
    last = tf.gather(outputs, index, batch_dims=1)
    return tf.where((lengths > 0)[:, None], last, tf.zeros_like(last))

  @_graph_fn_last.torch
  def _graph_fn_last(self, outputs, lengths):
    lengths = lengths.long()
    rows = torch.arange(outputs.shape[0])
    last = outputs[rows, torch.clamp(lengths - 1, 0, outputs.shape[1] - 1)]
    return torch.where((lengths > 0)[:, None], last, torch.zeros_like(last))
