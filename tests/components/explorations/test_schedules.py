"""Schedules against hand-computed values, clamped before the start and
after the end, on both executors, and their bad settings."""

import numpy as np
import pytest

from ingraph_rl.components.explorations import (
  Constant,
  ExponentialDecay,
  LinearDecay,
  PolynomialDecay,
)
from ingraph_rl.errors import BuildError
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.executors.torch import TorchExecutor
from ingraph_rl.spaces import IntBox
from ingraph_rl.testing import assert_parity
from ingraph_rl.testing.component_test import to_numpy

EXECUTORS = [TFExecutor, TorchExecutor]
SPACES = {"step": IntBox(dtype=np.int64, add_batch_rank=True)}

# (schedule, steps, values computed by hand).
CASES = {
  "constant": (lambda: Constant(0.3), [-4, 0, 7, 10**9], [0.3, 0.3, 0.3, 0.3]),
  # 1.0 until step 10, then -0.009 per step, 0.1 from step 110 on.
  "linear": (
    lambda: LinearDecay(1.0, 0.1, steps=100, begin=10),
    [-5, 0, 10, 35, 60, 109, 110, 500],
    [1.0, 1.0, 1.0, 0.775, 0.55, 0.109, 0.1, 0.1],
  ),
  "linear_up": (
    lambda: LinearDecay(0.0, 2.0, steps=4),
    [0, 1, 3, 4, 9],
    [0.0, 0.5, 1.5, 2.0, 2.0],
  ),
  # Halves the distance to 0.1 every 10 steps.
  "exponential": (
    lambda: ExponentialDecay(1.0, 0.1, half_life_steps=10),
    [-5, 0, 5, 10, 20, 30, 1000],
    [1.0, 1.0, 0.1 + 0.9 / np.sqrt(2), 0.55, 0.325, 0.2125, 0.1],
  ),
  # 1 - (step / 10)^... : (1 - step/10)^2 from 1 to 0.
  "polynomial": (
    lambda: PolynomialDecay(1.0, 0.0, steps=10, power=2),
    [-3, 0, 2, 5, 9, 10, 11, 100],
    [1.0, 1.0, 0.64, 0.25, 0.01, 0.0, 0.0, 0.0],
  ),
  "polynomial_sqrt": (
    lambda: PolynomialDecay(0.5, 0.1, steps=4, power=0.5),
    [0, 3, 4, 8],
    [0.5, 0.1 + 0.4 * 0.5, 0.1, 0.1],
  ),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("executor", EXECUTORS)
def test_values_match_hand_computed(executor, case):
  make, steps, expected = CASES[case]
  ex = executor(make(), SPACES)
  got = to_numpy(ex.execute("value", np.array(steps, np.int64)))
  assert got.dtype == np.float32
  np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_scalar_step(executor):
  ex = executor(
    LinearDecay(1.0, 0.0, steps=8), {"step": IntBox(dtype=np.int64)}
  )
  out = to_numpy(ex.execute("value", np.int64(2)))
  assert out.shape == () and float(out) == pytest.approx(0.75)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_vector_constant_gives_one_value_per_row(executor):
  """Constant((a, b, c)) at steps of shape (2,) is [[a, b, c]] * 2, and at a
  scalar step [a, b, c]."""
  rates = (0.4, 0.05, 0.0007)
  ex = executor(Constant(rates), SPACES)
  got = to_numpy(ex.execute("value", np.array([0, 10**9], np.int64)))
  assert got.shape == (2, 3) and got.dtype == np.float32
  np.testing.assert_allclose(got, [rates, rates], rtol=1e-6)
  ex = executor(Constant(rates), {"step": IntBox(dtype=np.int64)})
  np.testing.assert_allclose(
    to_numpy(ex.execute("value", np.int64(5))), rates, rtol=1e-6
  )
  with pytest.raises(BuildError, match="needs >= 1 number"):
    Constant(())


@pytest.mark.parametrize("case", sorted(CASES))
def test_parity(case):
  make, steps, _ = CASES[case]
  assert_parity(
    make(),
    SPACES,
    [
      ("value", [np.array(steps, np.int64)]),
      ("value", [np.arange(-3, 200, dtype=np.int64)]),
    ],
    rtol=1e-6,
    atol=1e-7,
  )


@pytest.mark.parametrize(
  "make",
  [
    lambda: LinearDecay(1.0, 0.1, steps=0),
    lambda: ExponentialDecay(1.0, 0.1, half_life_steps=0),
    lambda: PolynomialDecay(1.0, 0.1, steps=-1, power=1),
    lambda: PolynomialDecay(1.0, 0.1, steps=10, power=0),
  ],
)
def test_bad_settings(make):
  with pytest.raises(BuildError, match="must be > 0"):
    make()
