"""A non-finite loss or gradient is refused before the optimizer writes:
the variables, the slots and the step count stay as they were, in both
backends; the error names the optimizer's `step`."""

import numpy as np
import pytest

from ingraph_rl.components.optimizers import Adam, GradientDescent, RMSProp
from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing import ComponentTest

from .test_optimizers import Linear

OPTIMIZERS = {
  "gd": lambda: GradientDescent(0.1),
  "adam": lambda: Adam(0.01),
  "rmsprop": lambda: RMSProp(0.01, decay=0.9, momentum=0.9),
}
# loss = sum(w * c), w = 1: an overflowing loss with finite gradients c,
# and a NaN in both.
FAULTS = {
  "overflow": np.array([3e38, 3e38], np.float32),
  "nan": np.array([np.nan, 1.0], np.float32),
}


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_non_finite_step_writes_nothing(name, fault, backend):
  t = ComponentTest(
    Linear(OPTIMIZERS[name](), FAULTS[fault]),
    {"dummy": FloatBox((1,))},
    backend,
  )
  before = t.get_weights()
  with pytest.raises(SpaceError, match="not finite") as error:
    t.test("update", np.zeros(1, np.float32))
  assert error.value.api == "step"
  after = t.get_weights()
  for key in before:
    np.testing.assert_array_equal(after[key], before[key], err_msg=key)
  assert any(k.endswith("iterations") for k in before)
