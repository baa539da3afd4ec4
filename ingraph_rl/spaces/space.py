"""The abstract `Space`: a type for (possibly nested) tensors with optional
batch and time ranks. Concrete spaces live in `box.py` and `containers.py`."""

import abc
import typing

import numpy as np
import tree

from ingraph_rl.errors import SpaceError

if typing.TYPE_CHECKING:
  from ingraph_rl.spaces.box import BoxSpace


def describe_value(value: typing.Any) -> str:
  """`box.describe_value` (imported late: box imports this module)."""
  from ingraph_rl.spaces.box import describe_value as describe

  return describe(value)


# A value of a space: an array-like, or dicts / tuples of them.
Value = typing.Any
# Leading dims of a sampled value: None (1 each), an int, or one per rank.
Size = int | typing.Sequence[int] | None
# A seed or a generator for sampling.
Seed = int | np.random.Generator | None
# Where a leaf sits in a nest: its keys and indices from the top.
Path = tuple[typing.Any, ...]


class Space(abc.ABC):
  """Base of all spaces. Spaces are immutable values: the rank helpers return
  new spaces, and equal spaces compare and hash equal.

  Leading ranks: a space with a batch rank describes values of shape
  `[B, *shape]`; with a time rank too, `[B, T, *shape]`, or `[T, B, *shape]`
  when `time_major=True`.
  """

  def __init__(
    self,
    add_batch_rank: bool = False,
    add_time_rank: bool = False,
    time_major: bool = False,
  ) -> None:
    self._has_batch_rank = bool(add_batch_rank)
    self._has_time_rank = bool(add_time_rank)
    self._time_major = bool(time_major) and self._has_time_rank

  # --- leading ranks -------------------------------------------------------

  @property
  def has_batch_rank(self) -> bool:
    return self._has_batch_rank

  @property
  def has_time_rank(self) -> bool:
    return self._has_time_rank

  @property
  def time_major(self) -> bool:
    return self._time_major

  @property
  def num_leading_ranks(self) -> int:
    return int(self._has_batch_rank) + int(self._has_time_rank)

  def leading_rank_names(self) -> tuple[str, ...]:
    """Names of the leading dims in order, e.g. ('time', 'batch')."""
    if self._has_batch_rank and self._has_time_rank:
      return ("time", "batch") if self._time_major else ("batch", "time")
    if self._has_batch_rank:
      return ("batch",)
    if self._has_time_rank:
      return ("time",)
    return ()

  def with_ranks(
    self,
    batch: bool | None = None,
    time: bool | None = None,
    time_major: bool | None = None,
  ) -> typing.Self:
    """A copy with the given leading-rank flags (None keeps the current)."""
    return self._with_ranks(
      self._has_batch_rank if batch is None else batch,
      self._has_time_rank if time is None else time,
      self._time_major if time_major is None else time_major,
    )

  def with_batch_rank(self, add: bool = True) -> typing.Self:
    return self.with_ranks(batch=add)

  def with_time_rank(
    self, add: bool = True, time_major: bool | None = None
  ) -> typing.Self:
    return self.with_ranks(time=add, time_major=time_major)

  def strip_ranks(self) -> typing.Self:
    """The per-item space: no batch rank, no time rank."""
    return self.with_ranks(batch=False, time=False, time_major=False)

  @abc.abstractmethod
  def _with_ranks(
    self, batch: bool, time: bool, time_major: bool
  ) -> typing.Self:
    """Returns a copy with exactly these rank flags."""

  def _leading_shape(self, size: Size) -> tuple[int, ...]:
    """Turns `size` (None, int, or tuple in leading-dim order) into a tuple."""
    n = self.num_leading_ranks
    if size is None:
      return (1,) * n
    if np.isscalar(size):
      size = (typing.cast(int, size),)
    size = tuple(typing.cast(typing.Iterable[int], size))
    if len(size) != n:
      raise SpaceError(
        f"size {size} does not match the leading ranks "
        f"{self.leading_rank_names() or '(none)'} of {self!r}"
      )
    return tuple(int(s) for s in size)

  def _rank_suffix(self) -> str:
    names = self.leading_rank_names()
    return (", " + "+".join(names)) if names else ""

  # --- values ----------------------------------------------------------------

  @abc.abstractmethod
  def sample(self, size: Size = None, seed: Seed = None) -> Value:
    """A random value in this space. `size` gives the leading dims."""

  @abc.abstractmethod
  def zeros(self, size: Size = None) -> Value:
    """An all-zero (empty-string, False) value of this space."""

  @abc.abstractmethod
  def check(self, value: Value) -> None:
    """Raises `SpaceError` unless `value` has this space's structure, dtype,
    rank and shape. Does not look at bounds: cheap enough for every call."""

  def contains(self, value: Value) -> bool:
    """True if `value` passes `check` and lies within the bounds."""
    try:
      self.check(value)
    except SpaceError:
      return False
    return self._within_bounds(value)

  @abc.abstractmethod
  def _within_bounds(self, value: Value) -> bool:
    """Bounds test of a value that already passed `check`."""

  @property
  def has_value_checks(self) -> bool:
    """Whether `check_values` looks at any leaf's values."""
    return any(leaf.has_value_checks for _, leaf in self.flatten())

  def check_values(self, value: Value) -> None:
    """Raises `SpaceError` if a leaf's VALUES break its space: an IntBox
    leaf outside its bounds, a FloatBox leaf with NaN or inf (see
    `BoxSpace.value_problem`). `value` must have passed `check`."""
    for (path, leaf), v in zip(self.flatten(), self.flatten_value(value)):
      if not leaf.has_value_checks:
        continue
      problem = leaf.value_problem(v)
      if problem is not None:
        where = "".join(f"[{p!r}]" for p in path)
        raise SpaceError(
          f"at {where}: {problem}" if where else problem,
          expected=repr(leaf),
          received=describe_value(v),
        )

  # --- structure -------------------------------------------------------------

  @abc.abstractmethod
  def flatten(self) -> list[tuple[Path, "BoxSpace"]]:
    """List of `(path, box_space)` in the canonical (dm-tree) leaf order."""

  def flatten_value(self, value: Value) -> list[Value]:
    """The leaves of `value` in the order of `flatten()`."""
    # Only down to the boxes: a leaf may be a (nested) python list.
    return tree.flatten_up_to(self.structure(), value, check_types=False)

  def unflatten_value(self, leaves: typing.Iterable[Value]) -> Value:
    """Inverse of `flatten_value`."""
    return tree.unflatten_as(self.structure(), list(leaves))

  @abc.abstractmethod
  def structure(self) -> typing.Any:
    """The nest of box spaces (a Box is its own structure)."""

  def __ne__(self, other: object) -> bool:
    return not self == other
