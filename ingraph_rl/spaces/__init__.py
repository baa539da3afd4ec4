"""Spaces: types of the values that flow through components.

>>> from ingraph_rl.spaces import FloatBox, IntBox, Dict
>>> s = Dict(obs=FloatBox(shape=(4,)), action=IntBox(2), add_batch_rank=True)
>>> s.contains(s.sample(size=8))
True
"""

from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces.box import (
  BoolBox,
  BoxSpace,
  FloatBox,
  IntBox,
  TextBox,
  describe_value,
  dtype_kind,
)
from ingraph_rl.spaces.containers import ContainerSpace, Dict, Tuple
from ingraph_rl.spaces.gymnasium_conversion import from_gymnasium
from ingraph_rl.spaces.space import Space

__all__ = [
  "Space",
  "BoxSpace",
  "FloatBox",
  "IntBox",
  "BoolBox",
  "TextBox",
  "ContainerSpace",
  "Dict",
  "Tuple",
  "from_gymnasium",
  "SpaceError",
  "describe_value",
  "dtype_kind",
]
