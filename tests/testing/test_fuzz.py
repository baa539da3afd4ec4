"""The fuzz engine's bad values: every leaf kind it expects to be refused
is refused by the space it was derived from, for shapes that include
zero-sized dims (the long campaign once crashed on a rank mutation of an
[B, 0] LSTM state with no LSTM)."""

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest

from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import FloatBox, IntBox
from ingraph_rl.testing.fuzz import REJECT, bad_leaf, leaf_kinds, sample

BOXES = [
  FloatBox((0,), add_batch_rank=True),
  FloatBox((2, 0), add_batch_rank=True),
  FloatBox((3,), add_batch_rank=True),
  FloatBox(add_batch_rank=True, add_time_rank=True),
  IntBox(5, add_batch_rank=True),
  IntBox(4, shape=(2,), dtype=np.int64, add_batch_rank=True),
]


@pytest.mark.parametrize("box", BOXES, ids=repr)
@hypothesis.settings(max_examples=40, deadline=None, derandomize=True)
@hypothesis.given(data=st.data())
def test_rejected_leaf_values_are_refused_by_their_space(box, data):
  batch = data.draw(st.integers(0, 3))
  value = sample(box, np.random.default_rng(0), batch=batch, time=2)
  box.check(value)  # The good value is good.
  kind = data.draw(st.sampled_from(leaf_kinds(box)))
  new, expect = bad_leaf(data.draw, kind, box, value)
  if expect != REJECT or kind == "python_overflow":
    return  # Overflowing Python ints are refused before conversion.
  with pytest.raises(SpaceError):
    refuse(box, new)


def refuse(box, value):
  """What the executor checks of one leaf: structure, dtype and shape,
  then values (ranges, finiteness)."""
  box.check(value)
  box.check_values(value)


@pytest.mark.parametrize("shape", [(3, 0), (3, 2, 0), (0, 0)])
def test_a_rank_mutation_of_a_zero_sized_last_dim_drops_one_rank(shape):
  box = FloatBox(shape[1:], add_batch_rank=True)
  value = np.zeros(shape, np.float32)
  ranks = set()
  for choice in (True, False):
    new, expect = bad_leaf(lambda _s, c=choice: c, "rank", box, value)
    assert expect == REJECT and new.dtype == value.dtype
    ranks.add(new.ndim)
    with pytest.raises(SpaceError):
      box.check(new)
  assert ranks == {len(shape) - 1, len(shape) + 1}
