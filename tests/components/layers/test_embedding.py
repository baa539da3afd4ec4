"""Tests of `Embedding` (ingraph_rl/components/layers/embedding.py)."""

import numpy as np
import pytest

from ingraph_rl.components.layers import Embedding
from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import FloatBox, IntBox
from ingraph_rl.testing import ComponentTest, assert_parity

IDS = IntBox(7, dtype=np.int64, add_batch_rank=True, add_time_rank=True)


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_rows_of_the_table(backend):
  test = ComponentTest(Embedding(7, 3), {"ids": IDS}, backend)
  table = test.get_weights()["embedding/embeddings"]
  assert table.shape == (7, 3) and table.std() > 0.5  # N(0, 1).
  ids = np.array([[0, 6, 6], [3, 1, 0]], np.int64)
  test.test("call", ids, expected=table[ids])


def test_parity():
  tf_out, _ = assert_parity(
    Embedding(7, 4), {"ids": IDS}, ["call"], size=(3, 5)
  )
  assert tf_out[0].shape == (3, 5, 4)


def test_ids_must_be_integers():
  with pytest.raises(SpaceError, match="argument 'ids'"):
    ComponentTest(Embedding(7, 3), {"ids": FloatBox(add_batch_rank=True)})
