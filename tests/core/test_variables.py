"""Initial values: named uniform initializers and their scaled variant;
the TF <-> torch layout of variables."""

import math

import numpy as np
import pytest

from ingraph_rl.core.variables import (
  Scaled,
  VariableSpec,
  initial_value,
  to_tf_layout,
  to_torch_layout,
)
from ingraph_rl.errors import BuildError


def spec(shape, initializer):
  return VariableSpec("net/kernel", shape, np.float32, initializer, True)


@pytest.mark.parametrize(
  "name,limit",
  [
    ("glorot_uniform", math.sqrt(6.0 / (256 + 6))),
    ("he_uniform", math.sqrt(6.0 / 256)),
  ],
)
def test_uniform_limits_and_scaling(name, limit):
  full = initial_value(spec((256, 6), name), np.random.default_rng(0))
  small = initial_value(
    spec((256, 6), Scaled(name, 0.01)), np.random.default_rng(0)
  )
  # The bound is the formula's (hand-computed), and draws fill it.
  assert np.abs(full).max() <= limit
  assert np.abs(full).max() > 0.95 * limit
  # The same draws, scaled: Scaled(name, s) == s * name.
  np.testing.assert_allclose(small, 0.01 * full, rtol=1e-6)


def test_conv_fans_use_the_receptive_field():
  # 8x8 kernel, 4 -> 16 channels: fan_in 256, as for a 256-input dense.
  value = initial_value(
    spec((8, 8, 4, 16), "he_uniform"), np.random.default_rng(1)
  )
  assert np.abs(value).max() <= math.sqrt(6.0 / 256)


def test_unknown_names_are_refused():
  with pytest.raises(BuildError, match="unknown initializer 'orthogonal'"):
    initial_value(spec((2, 2), "orthogonal"), np.random.default_rng(0))
  with pytest.raises(BuildError, match="Scaled: unknown initializer"):
    Scaled("orthogonal", 0.1)


def test_torch_layout_of_a_conv_kernel_and_back():
  # TF [h, w, in, out] -> torch [out, in, h, w], element by element.
  kernel = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
  perm = (3, 2, 0, 1)
  torch_kernel = to_torch_layout(kernel, perm)
  assert torch_kernel.shape == (5, 4, 2, 3)
  for h, w, i, o in np.ndindex(kernel.shape):
    assert torch_kernel[o, i, h, w] == kernel[h, w, i, o]
  np.testing.assert_array_equal(to_tf_layout(torch_kernel, perm), kernel)
  assert to_torch_layout(kernel, None) is kernel
  assert to_tf_layout(kernel, None) is kernel


def test_torch_layout_of_torch_tensors_is_a_view():
  import torch

  kernel = torch.arange(6.0).reshape(2, 3)  # TF dense [in, out].
  view = to_torch_layout(kernel, (1, 0))
  assert tuple(view.shape) == (3, 2)
  view[2, 1] = -1.0  # Writes through: optimizer slots rely on it.
  assert kernel[1, 2] == -1.0
  np.testing.assert_array_equal(
    to_tf_layout(view, (1, 0)).numpy(), kernel.numpy()
  )
