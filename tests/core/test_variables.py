"""Initial values: named uniform initializers and their scaled variant."""

import math

import numpy as np
import pytest

from ingraph_rl.core.variables import Scaled, VariableSpec, initial_value
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
