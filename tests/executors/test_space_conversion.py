"""Spaces as backend objects (`executors/tf_spaces.py`,
`executors/torch_spaces.py`); the hypothesis tests of `tensor_spec` are
in tests/spaces."""

import doctest

import numpy as np
import pytest
import tensorflow as tf
import torch

from ingraph_rl.executors import tf_spaces, torch_spaces
from ingraph_rl.spaces import BoolBox, Dict, FloatBox, IntBox, TextBox, Tuple


@pytest.mark.parametrize("module", [tf_spaces, torch_spaces])
def test_docstring_examples(module):
  failures, tried = doctest.testmod(module)
  assert tried > 0 and failures == 0


def test_container_tensor_spec_is_a_nest_of_leaf_specs():
  space = Dict(
    a=FloatBox((2,)),
    b=Tuple(IntBox(3), TextBox()),
    add_batch_rank=True,
  )
  assert tf_spaces.tensor_spec(space) == {
    "a": tf.TensorSpec([None, 2], tf.float32),
    "b": (tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.string)),
  }


@pytest.mark.parametrize(
  "space, dtype",
  [
    (FloatBox(dtype=np.float16), torch.float16),
    (IntBox(3, dtype=np.int64), torch.int64),
    (BoolBox(), torch.bool),
  ],
)
def test_torch_dtypes_round_trip(space, dtype):
  assert torch_spaces.torch_dtype(space) == dtype
  assert torch_spaces.torch_dtype(space.dtype) == dtype
  assert torch_spaces.numpy_dtype(dtype) == space.dtype
