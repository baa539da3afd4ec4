"""Mixed precision of the layers that multiply
(ingraph_rl/components/layers/precision.py): `compute_dtype="bfloat16"`
against a hand-computed rounding case and a NumPy reference on
bfloat16-rounded operands, TF vs torch, float32 in and out, and the
`NeuralNetwork` default."""

import numpy as np
import pytest

from ingraph_rl.components.layers import Conv2D, Dense, ResidualBlock
from ingraph_rl.components.networks import (
  ImpalaDeepTorso,
  ImpalaSmallNetwork,
  NeuralNetwork,
)
from ingraph_rl.errors import BuildError
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing import ComponentTest, assert_parity
from ingraph_rl.testing.references import np_bfloat16, numpy_conv2d

BATCH = dict(add_batch_rank=True)
BF16 = "bfloat16"


def test_np_bfloat16_reference_itself():
  # bfloat16 keeps 7 fraction bits: 1 + 2^-7 stays, 1 + 2^-8 is a tie
  # (to even: 1), 1 + 3 * 2^-8 a tie up to 1 + 2^-6.
  x = np.array([1 + 2**-7, 1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-9)], np.float32)
  np.testing.assert_array_equal(
    np_bfloat16(x), [1 + 2**-7, 1.0, 1 + 2**-6, -1.0]
  )


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_hand_computed_rounding(backend):
  # 1 + 2^-9 times a kernel of 1: float32 keeps the 2^-9, bfloat16 rounds
  # the input to 1. The output is float32 either way.
  x = np.full((2, 1), 1 + 2**-9, np.float32)
  outs = {}
  for dtype in (None, BF16):
    test = ComponentTest(
      Dense(1, use_bias=False, compute_dtype=dtype),
      {"inputs": FloatBox((1,), **BATCH)},
      backend,
    )
    test.set_weights({"dense/kernel": np.ones((1, 1), np.float32)})
    outs[dtype] = test.test("call", x)
    assert outs[dtype].dtype == np.float32
  np.testing.assert_array_equal(outs[None], x)
  np.testing.assert_array_equal(outs[BF16], np.ones_like(x))


def _reference_inputs(test, shape, seed):
  rng = np.random.default_rng(seed)
  weights = {
    k: rng.normal(0, 0.5, v.shape).astype(np.float32)
    for k, v in test.get_weights().items()
  }
  test.set_weights(weights)
  x = rng.normal(size=shape).astype(np.float32)
  return x, weights


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize("arg", ["compute_dtype", "weights_dtype"])
def test_dense_numpy_reference(backend, arg):
  # weights_dtype stores the rounded operands; the products are the same.
  test = ComponentTest(
    Dense(6, activation="tanh", **{arg: BF16}),
    {"inputs": FloatBox((40,), **BATCH)},
    backend,
  )
  x, w = _reference_inputs(test, (5, 40), seed=1)
  rounded = {k: np_bfloat16(v).astype(np.float64) for k, v in w.items()}
  expected = np.tanh(
    np_bfloat16(x).astype(np.float64) @ rounded["dense/kernel"]
    + rounded["dense/bias"]
  )
  out = test.test("call", x)
  # The product and the sum round to bfloat16 once more (2^-9 relative).
  np.testing.assert_allclose(out, expected, rtol=2e-2, atol=2e-2)
  # Far closer to the rounded operands' result than float32's is.
  exact = np.tanh(x.astype(np.float64) @ w["dense/kernel"] + w["dense/bias"])
  assert np.abs(out - exact).max() > 1e-3


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_conv2d_numpy_reference(backend):
  test = ComponentTest(
    Conv2D(
      4, 3, strides=2, padding="same", activation="relu", compute_dtype=BF16
    ),
    {"inputs": FloatBox((7, 6, 3), **BATCH)},
    backend,
  )
  x, w = _reference_inputs(test, (2, 7, 6, 3), seed=2)
  linear = numpy_conv2d(
    np_bfloat16(x),
    np_bfloat16(w["conv2d/kernel"]),
    np_bfloat16(w["conv2d/bias"]),
    2,
    "same",
  )
  expected = np.maximum(linear, 0.0)
  out = test.test("call", x)
  assert out.dtype == np.float32
  np.testing.assert_allclose(out, expected, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize(
  "layer,space",
  [
    (lambda: Dense(5, activation="relu", compute_dtype=BF16), (16,)),
    (
      lambda: Conv2D(4, 3, strides=2, activation="relu", compute_dtype=BF16),
      (9, 8, 3),
    ),
    (lambda: ResidualBlock(3, compute_dtype=BF16), (6, 5, 3)),
    (lambda: ResidualBlock(3, weights_dtype=BF16), (6, 5, 3)),
    (lambda: Dense(5, activation="relu", weights_dtype=BF16), (16,)),
    (
      lambda: Conv2D(4, 3, strides=2, activation="relu", weights_dtype=BF16),
      (9, 8, 3),
    ),
  ],
  ids=[
    "dense",
    "conv2d",
    "residual_block",
    "residual_block_bf16_weights",
    "dense_bf16_weights",
    "conv2d_bf16_weights",
  ],
)
def test_parity(layer, space):
  # Both backends round the same operands; oneDNN's and torch's
  # accumulation orders differ, so only to bfloat16's precision.
  assert_parity(
    layer(),
    {"inputs": FloatBox(space, **BATCH)},
    ["call"],
    rtol=2e-2,
    atol=2e-2,
    size=3,
  )


@pytest.mark.parametrize("layer", [Dense, Conv2D])
@pytest.mark.parametrize("arg", ["compute_dtype", "weights_dtype"])
def test_bad_compute_dtype(layer, arg):
  args = (2,) if layer is Dense else (2, 3)
  with pytest.raises(BuildError, match=f"'my_layer': {arg} must be"):
    layer(*args, **{arg: "float16"}, scope="my_layer")


def test_weights_dtype_reaches_the_layers_that_store_weights():
  """A network's `weights_dtype` reaches its conv2d and dense layers,
  which then also compute in it; a spec's own compute_dtype wins."""
  net = NeuralNetwork(
    [
      {"type": "conv2d", "filters": 2, "kernel_size": 3},
      {"type": "flatten"},
      {"type": "dense", "units": 4, "compute_dtype": "float32"},
    ],
    weights_dtype=BF16,
  )
  conv, _, dense = net.layers
  assert conv.weights_dtype == conv.compute_dtype == BF16
  assert dense.weights_dtype == BF16 and dense.compute_dtype == "float32"


@pytest.mark.parametrize(
  "network, space",
  [
    (lambda: ImpalaSmallNetwork(weights_dtype=BF16), (36, 36, 2)),
    (
      lambda: ImpalaDeepTorso(((2, 1),), units=4, weights_dtype=BF16),
      (8, 8, 2),
    ),
  ],
  ids=["impala_small", "impala_deep"],
)
def test_impala_torsos_store_every_weight_in_weights_dtype(network, space):
  """IMPALA's torsos pass `weights_dtype` to every layer with weights
  (the residual blocks' convolutions too): no float32 variable is left
  to cast in every call."""
  test = ComponentTest(network(), {"inputs": FloatBox(space, **BATCH)})
  weights = test.executor.get_weights()
  assert weights and {v.dtype.name for v in weights.values()} == {BF16}
  assert test.test("call", np.ones((2,) + space, np.float32)).dtype == (
    np.float32
  )


def test_network_default_reaches_the_layers_that_multiply():
  own = Dense(2, compute_dtype="float32", scope="own")
  net = NeuralNetwork(
    [
      {"type": "conv2d", "filters": 2, "kernel_size": 3},
      {"type": "residual_block", "filters": 2},
      {"type": "flatten"},
      {"type": "dense", "units": 4, "compute_dtype": None},
      {"type": "dense", "units": 4},
      own,
    ],
    compute_dtype=BF16,
  )
  conv, block, flatten, dense_none, dense, kept = net.layers
  assert conv.compute_dtype == BF16
  assert block.conv_0.compute_dtype == block.conv_1.compute_dtype == BF16
  assert not hasattr(flatten, "compute_dtype")
  assert dense_none.compute_dtype is None  # Its spec says so.
  assert dense.compute_dtype == BF16
  assert kept is own and own.compute_dtype == "float32"
