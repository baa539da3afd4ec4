"""Tests of `InstructionTokenizer` and `InstructionEncoder`
(ingraph_rl/components/networks/instruction_encoder.py): in-graph
tokenizing (whitespace split, hash buckets, lengths, padding), a NumPy
reference of the encoding, TF vs torch from token ids (torch has no
strings), and padding that cannot change the result."""

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.components.networks import (
  InstructionEncoder,
  InstructionTokenizer,
)
from ingraph_rl.spaces import IntBox, TextBox
from ingraph_rl.testing import ComponentTest

TEXT = {"instructions": TextBox(add_batch_rank=True)}
TOKENS = {
  "tokens": IntBox(50, dtype=np.int64, add_batch_rank=True, add_time_rank=True),
  "lengths": IntBox(8, dtype=np.int32, add_batch_rank=True),
}


def hashes(words, buckets):
  return tf.strings.to_hash_bucket_fast(words, buckets).numpy().tolist()


def test_tokenizer_splits_hashes_and_pads():
  test = ComponentTest(InstructionTokenizer(num_buckets=50), TEXT)
  out = test.test(
    "call", np.array(["go to  the red ball", "", "  pick\tup ", "go"], object)
  )
  np.testing.assert_array_equal(out["lengths"], [5, 0, 2, 1])
  assert out["tokens"].shape == (4, 5) and out["tokens"].dtype == np.int64
  assert out["tokens"][0].tolist() == hashes(
    ["go", "to", "the", "red", "ball"], 50
  )
  assert out["tokens"][2].tolist() == hashes(["pick", "up"], 50) + [0] * 3
  assert out["tokens"][1].tolist() == [0] * 5
  assert out["tokens"][3, 0] == out["tokens"][0, 0]  # "go" twice.
  # No words anywhere: still one (padding) step for the LSTM.
  empty = test.test("call", np.array(["", " "], object))
  assert empty["tokens"].shape == (2, 1)
  np.testing.assert_array_equal(empty["lengths"], [0, 0])


def sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def np_encode(tokens, lengths, w):
  """Embedding rows -> LSTM (i, f, g, o) from zeros -> output at the last
  word; zeros for length 0."""
  kernel, bias = (
    w["instruction_encoder/lstm/kernel"],
    w["instruction_encoder/lstm/bias"],
  )
  units = bias.shape[0] // 4
  out = np.zeros((len(tokens), units))
  for b, (row, n) in enumerate(zip(tokens, lengths)):
    c = h = np.zeros(units)
    for i in row[:n]:
      x = w["instruction_encoder/embedding/embeddings"][i]
      gi, gf, gg, go = np.split(np.concatenate([x, h]) @ kernel + bias, 4)
      c = sigmoid(gf) * c + sigmoid(gi) * np.tanh(gg)
      h = sigmoid(go) * np.tanh(c)
    out[b] = h
  return out


def encoder():
  return InstructionEncoder(num_buckets=50, embedding_size=5, lstm_units=6)


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_encode_matches_numpy(backend):
  test = ComponentTest(encoder(), TOKENS, backend, api_names=["encode"])
  w = test.get_weights()
  assert w["instruction_encoder/embedding/embeddings"].shape == (50, 5)
  assert w["instruction_encoder/lstm/kernel"].shape == (5 + 6, 24)
  tokens = np.array([[3, 4, 5, 9], [1, 0, 0, 0], [7, 8, 0, 0]], np.int64)
  lengths = np.array([4, 0, 2], np.int32)
  out = test.test(
    "encode",
    tokens,
    lengths,
    expected=np_encode(tokens, lengths, w),
    rtol=1e-5,
    atol=1e-6,
  )
  assert out.shape == (3, 6) and np.abs(out[0]).max() > 1e-2
  # Padding after the last word changes nothing.
  padded = np.concatenate([tokens, np.full((3, 3), 11, np.int64)], 1)
  test.test("encode", padded, lengths, expected=out, rtol=1e-6, atol=1e-7)


def test_parity_from_token_ids():
  tf_test = ComponentTest(encoder(), TOKENS, "tf", api_names=["encode"])
  torch_test = ComponentTest(
    encoder(), TOKENS, "torch", seed=1, api_names=["encode"]
  )
  torch_test.set_weights(tf_test.get_weights())
  rng = np.random.default_rng(0)
  tokens = rng.integers(0, 50, (5, 7)).astype(np.int64)
  lengths = np.array([7, 0, 3, 1, 6], np.int32)
  np.testing.assert_allclose(
    torch_test.test("encode", tokens, lengths),
    tf_test.test("encode", tokens, lengths),
    rtol=1e-5,
    atol=1e-6,
  )


def test_call_tokenizes_then_encodes():
  test = ComponentTest(encoder(), dict(TEXT, **TOKENS))
  text = np.array(["pick up the key", "", "go"], object)
  tok = test.executor.execute("call", text)
  ids = [hashes(s.split(), 50) for s in text]
  tokens = np.array([i + [0] * (4 - len(i)) for i in ids], np.int64)
  lengths = np.array([len(i) for i in ids], np.int32)
  np.testing.assert_allclose(
    tok.numpy(),
    np_encode(tokens, lengths, test.get_weights()),
    rtol=1e-5,
    atol=1e-6,
  )
  np.testing.assert_array_equal(tok.numpy()[1], 0.0)
