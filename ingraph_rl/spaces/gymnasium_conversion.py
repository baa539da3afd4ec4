"""Conversion from gymnasium spaces."""

import typing

import numpy as np

from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces.box import BoolBox, FloatBox, IntBox, TextBox
from ingraph_rl.spaces.containers import Dict, Tuple
from ingraph_rl.spaces.space import Space


def from_gymnasium(
  space: typing.Any,
  add_batch_rank: bool = False,
  add_time_rank: bool = False,
  time_major: bool = False,
) -> Space:
  """Converts a gymnasium space. Integer `Box` bounds become IntBox bounds
  with an exclusive `high` (gymnasium's is inclusive).

  >>> import gymnasium as gym
  >>> from_gymnasium(gym.spaces.Discrete(3))
  IntBox(shape=(), dtype=int64, low=0, high=3)
  """
  import gymnasium.spaces as gs

  ranks: dict[str, typing.Any] = dict(
    add_batch_rank=add_batch_rank,
    add_time_rank=add_time_rank,
    time_major=time_major,
  )
  if isinstance(space, gs.Box):
    dtype = np.dtype(space.dtype)
    if dtype.kind == "f":
      return FloatBox(
        space.shape,
        _bound_or_none(space.low),
        _bound_or_none(space.high),
        dtype,
        **ranks,
      )
    if dtype.kind in "iu":
      # high + 1 must not wrap around: int64 max stays (excluding one value).
      top = np.iinfo(np.int64).max
      high = np.asarray(space.high)
      high = np.where(high >= top, np.int64(top - 1), high.astype(np.int64)) + 1
      return IntBox(high, space.shape, space.low, dtype, **ranks)
    if dtype.kind == "b":
      return BoolBox(space.shape, **ranks)
  elif isinstance(space, gs.Discrete):
    start = int(space.start)
    return IntBox(
      start + int(space.n), (), start, np.dtype(space.dtype), **ranks
    )
  elif isinstance(space, gs.MultiDiscrete):
    return IntBox(
      np.asarray(space.start) + space.nvec,
      space.shape,
      space.start,
      np.dtype(space.dtype),
      **ranks,
    )
  elif isinstance(space, gs.MultiBinary):
    return IntBox(2, space.shape, 0, np.dtype(space.dtype), **ranks)
  elif isinstance(space, gs.Text):
    return TextBox((), **ranks)
  elif isinstance(space, gs.Dict):
    return Dict(
      {k: from_gymnasium(s) for k, s in space.spaces.items()}, **ranks
    )
  elif isinstance(space, gs.Tuple):
    return Tuple(*[from_gymnasium(s) for s in space.spaces], **ranks)
  raise SpaceError(
    f"cannot convert gymnasium space {space!r}",
    expected="Box, Discrete, MultiDiscrete, MultiBinary, Text, Dict or Tuple",
  )


def _bound_or_none(bound: np.ndarray) -> np.ndarray | None:
  """None for an all-infinite bound; otherwise the bound (infinite elements
  stay infinite and mean unbounded there)."""
  return None if np.all(np.isinf(bound)) else bound
