"""What env workers and their parent share: spaces as JSON, and the
shared-memory layout's observation writers and readers."""

import numpy as np
import pytest

from ingraph_rl.environments.worker_protocol import (
  Layout,
  space_from_json,
  space_to_json,
)
from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import BoolBox, Dict, FloatBox, IntBox, TextBox, Tuple


def test_spaces_travel_as_data():
  spaces = [
    IntBox(9),
    IntBox(256, (72, 96, 3), dtype=np.uint8),
    FloatBox(
      (4,), low=[-1.0, -2.0, -3.0, -np.inf], high=[1.0, 2.0, 3.0, np.inf]
    ),
    FloatBox((2, 3), dtype=np.float64),
    BoolBox((5,)),
    TextBox(),
    Dict(
      RGB_INTERLEAVED=IntBox(256, (3, 4, 3), dtype=np.uint8),
      INSTR=TextBox(),
      nested=Dict(x=FloatBox()),
    ),
  ]
  for space in spaces:
    assert space_from_json(space_to_json(space)) == space
  with pytest.raises(SpaceError, match="box spaces and Dicts"):
    space_to_json(Tuple(IntBox(2), IntBox(3)))


def test_layout_round_trips_dict_observations_and_final_rows():
  """Observations written into a segment's views read back unchanged
  (text as str), and a row mask writes only those rows of "final"."""
  space = Dict(frame=IntBox(256, (2, 3), dtype=np.uint8), text=TextBox())
  layout = Layout(2, space, IntBox(4), text_bytes=16)
  views = layout.views(bytearray(layout.size))
  obs = {
    "frame": np.arange(12, dtype=np.uint8).reshape(2, 2, 3),
    "text": np.array(["go left", "ünï"], object),
  }
  layout.write_obs(views, "obs", obs)
  np.testing.assert_array_equal(views[("obs", "frame")], obs["frame"])
  [text_leaf] = [leaf for leaf in layout.leaves if leaf.is_text]
  assert layout.read_text(views, "obs", text_leaf).tolist() == [
    "go left",
    "ünï",
  ]
  rows = np.array([False, True])
  layout.write_obs(views, "final", obs, rows=rows)
  np.testing.assert_array_equal(views[("final", "frame")][0], 0)
  np.testing.assert_array_equal(views[("final", "frame")][1], obs["frame"][1])
  assert layout.read_text(views, "final", text_leaf, rows).tolist() == [
    None,
    "ünï",
  ]
  with pytest.raises(ValueError, match="longer than its 16-byte"):
    layout.write_obs(views, "obs", dict(obs, text=np.array(["x" * 17, ""])))
