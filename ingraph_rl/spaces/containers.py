"""Container spaces: `Dict` and `Tuple` of other spaces.

Rank flags given to a container apply to every leaf, so a batched Dict is a
dict of batched boxes. Keys of a `Dict` are kept sorted, which is the leaf
order of dm-tree and `tf.nest`.
"""

import collections.abc
import typing

import numpy as np
import tree

from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces.box import (
  BoxSpace,
  describe_value,
  value_shape_and_dtype,
)
from ingraph_rl.spaces.space import Path, Seed, Size, Space, Value


class ContainerSpace(Space):
  """Shared logic of `Dict` and `Tuple`."""

  def _items(self) -> list[tuple[typing.Any, Space]]:
    raise NotImplementedError

  def _rebuild(
    self, children: list[tuple[typing.Any, Space]]
  ) -> "ContainerSpace":
    raise NotImplementedError

  def __getitem__(self, key: typing.Any) -> Space:
    raise NotImplementedError

  def _check_keys(
    self, value: Value, path: str
  ) -> list[tuple[typing.Any, Space]]:
    """The children to check `value` against; raises unless `value` has
    this container's keys (or length)."""
    raise NotImplementedError

  def _with_ranks(
    self, batch: bool, time: bool, time_major: bool
  ) -> typing.Self:
    children = [
      (k, s.with_ranks(batch, time, time_major)) for k, s in self._items()
    ]
    out = typing.cast(typing.Self, self._rebuild(children))
    out._has_batch_rank = bool(batch)
    out._has_time_rank = bool(time)
    out._time_major = bool(time_major) and bool(time)
    return out

  def flatten(self) -> list[tuple[Path, BoxSpace]]:
    out: list[tuple[Path, BoxSpace]] = []
    for key, child in self._items():
      out.extend(((key,) + path, leaf) for path, leaf in child.flatten())
    return out

  def sample(self, size: Size = None, seed: Seed = None) -> Value:
    rng = (
      seed
      if isinstance(seed, np.random.Generator)
      else np.random.default_rng(seed)
    )
    return tree.map_structure(lambda s: s.sample(size, rng), self.structure())

  def zeros(self, size: Size = None) -> Value:
    return tree.map_structure(lambda s: s.zeros(size), self.structure())

  def _within_bounds(self, value: Value) -> bool:
    return all(child._within_bounds(value[k]) for k, child in self._items())

  def check(self, value: Value) -> None:
    self._check_structure(value, path="")
    self._check_leading_dims_agree(value)

  def _check_structure(self, value: Value, path: str) -> None:
    for key, child in self._check_keys(value, path):
      sub = f"{path}[{key!r}]"
      if isinstance(child, ContainerSpace):
        child._check_structure(value[key], sub)
        if child.leading_rank_names() != self.leading_rank_names():
          # Not covered by this container's own check of the leading dims.
          try:
            child._check_leading_dims_agree(value[key])
          except SpaceError as e:
            raise SpaceError(
              f"at {sub}: {e.reason}", expected=e.expected, received=e.received
            ) from None
      else:
        try:
          child.check(value[key])
        except SpaceError as e:
          raise SpaceError(
            f"at {sub}: {e.reason}", expected=e.expected, received=e.received
          ) from None

  def _check_leading_dims_agree(self, value: Value) -> None:
    n = self.num_leading_ranks
    if not n:
      return
    seen: dict[tuple[int | None, ...], Path] = {}
    # Only down to the boxes: a leaf may be a (nested) python list.
    leaves = tree.flatten_up_to(self.structure(), value, check_types=False)
    for (path, _), leaf in zip(self.flatten(), leaves):
      shape, _ = value_shape_and_dtype(leaf)
      lead = tuple(shape[:n]) if shape is not None else (None,)
      if None in lead:
        continue
      seen.setdefault(lead, path)
      if len(seen) > 1:
        items = ", ".join(f"{list(p)}: {s}" for s, p in seen.items())
        raise SpaceError(
          f"leaves disagree on the leading "
          f"{'/'.join(self.leading_rank_names())} dims ({items})",
          expected=repr(self),
          received=f"leading dims {items}",
        )

  def __ne__(self, other: object) -> bool:
    return not self == other


class Dict(ContainerSpace):
  """Mapping from string keys to spaces.

  >>> Dict(a=FloatBox(), b=IntBox(3), add_batch_rank=True).zeros(2)['b']
  array([0, 0], dtype=int32)
  """

  def __init__(
    self,
    spaces: typing.Mapping[str, Space] | None = None,
    add_batch_rank: bool = False,
    add_time_rank: bool = False,
    time_major: bool = False,
    **kwargs: Space,
  ) -> None:
    super().__init__(add_batch_rank, add_time_rank, time_major)
    spaces = dict(spaces or {}, **kwargs)
    for k, s in spaces.items():
      if not isinstance(k, str):
        raise SpaceError(f"Dict keys must be strings, got {k!r}")
      if not isinstance(s, Space):
        raise SpaceError(f"Dict entry {k!r} is not a Space: {s!r}")
    self._spaces = {
      k: spaces[k].with_ranks(
        self._has_batch_rank, self._has_time_rank, self._time_major
      )
      if (add_batch_rank or add_time_rank)
      else spaces[k]
      for k in sorted(spaces)
    }

  def __getitem__(self, key: str) -> Space:
    return self._spaces[key]

  def keys(self) -> typing.KeysView[str]:
    return self._spaces.keys()

  def items(self) -> typing.ItemsView[str, Space]:
    return self._spaces.items()

  def __len__(self) -> int:
    return len(self._spaces)

  def __iter__(self) -> typing.Iterator[str]:
    return iter(self._spaces)

  def _items(self) -> list[tuple[typing.Any, Space]]:
    return list(self._spaces.items())

  def _rebuild(self, children: list[tuple[typing.Any, Space]]) -> "Dict":
    return Dict(dict(children))

  def structure(self) -> dict[str, typing.Any]:
    return {k: s.structure() for k, s in self._spaces.items()}

  def _check_keys(
    self, value: Value, path: str
  ) -> list[tuple[typing.Any, Space]]:
    if not isinstance(value, collections.abc.Mapping):
      raise SpaceError(
        f"structure mismatch at {path or 'top level'}: expected a dict with "
        f"keys {list(self._spaces)}",
        expected=repr(self),
        received=describe_value(value),
      )
    missing = [k for k in self._spaces if k not in value]
    extra = [k for k in value if k not in self._spaces]
    if missing or extra:
      raise SpaceError(
        f"structure mismatch at {path or 'top level'}: missing keys "
        f"{missing}, unexpected keys {extra}",
        expected=repr(self),
        received=f"dict with keys {sorted(value, key=str)}",
      )
    return self._items()

  def __eq__(self, other: object) -> bool:
    return isinstance(other, Dict) and self._key() == other._key()

  def _key(self) -> tuple[typing.Any, ...]:
    return (
      tuple(self._spaces.items()),
      self._has_batch_rank,
      self._has_time_rank,
      self._time_major,
    )

  def __hash__(self) -> int:
    return hash(self._key())

  def __repr__(self) -> str:
    inner = ", ".join(f"{k}={s!r}" for k, s in self._spaces.items())
    return f"Dict({inner})"


class Tuple(ContainerSpace):
  """Fixed-length sequence of spaces."""

  def __init__(
    self,
    *spaces: Space | typing.Sequence[Space],
    add_batch_rank: bool = False,
    add_time_rank: bool = False,
    time_major: bool = False,
  ) -> None:
    super().__init__(add_batch_rank, add_time_rank, time_major)
    if len(spaces) == 1 and isinstance(spaces[0], (list, tuple)):
      spaces = tuple(spaces[0])
    for i, s in enumerate(spaces):
      if not isinstance(s, Space):
        raise SpaceError(f"Tuple entry {i} is not a Space: {s!r}")
    checked = typing.cast(tuple[Space, ...], spaces)
    self._spaces: tuple[Space, ...] = tuple(
      s.with_ranks(self._has_batch_rank, self._has_time_rank, self._time_major)
      if (add_batch_rank or add_time_rank)
      else s
      for s in checked
    )

  def __getitem__(self, i: int) -> Space:
    return self._spaces[i]

  def __len__(self) -> int:
    return len(self._spaces)

  def __iter__(self) -> typing.Iterator[Space]:
    return iter(self._spaces)

  def _items(self) -> list[tuple[typing.Any, Space]]:
    return list(enumerate(self._spaces))

  def _rebuild(self, children: list[tuple[typing.Any, Space]]) -> "Tuple":
    return Tuple(*[s for _, s in children])

  def structure(self) -> tuple[typing.Any, ...]:
    return tuple(s.structure() for s in self._spaces)

  def _check_keys(
    self, value: Value, path: str
  ) -> list[tuple[typing.Any, Space]]:
    if not isinstance(value, (tuple, list)) or len(value) != len(self):
      raise SpaceError(
        f"structure mismatch at {path or 'top level'}: expected a tuple of "
        f"{len(self)} items",
        expected=repr(self),
        received=describe_value(value)
        if not isinstance(value, (tuple, list))
        else f"{type(value).__name__} of {len(value)} items",
      )
    return self._items()

  def __eq__(self, other: object) -> bool:
    return isinstance(other, Tuple) and self._key() == other._key()

  def _key(self) -> tuple[typing.Any, ...]:
    return (
      self._spaces,
      self._has_batch_rank,
      self._has_time_rank,
      self._time_major,
    )

  def __hash__(self) -> int:
    return hash(self._key())

  def __repr__(self) -> str:
    return f"Tuple({', '.join(repr(s) for s in self._spaces)})"
