"""The abstract `Space`: a type for (possibly nested) tensors with optional
batch and time ranks. Concrete spaces live in `box.py` and `containers.py`."""

import abc

import numpy as np
import tree

from ingraph_rl.errors import SpaceError


class Space(abc.ABC):
  """Base of all spaces. Spaces are immutable values: the rank helpers return
  new spaces, and equal spaces compare and hash equal.

  Leading ranks: a space with a batch rank describes values of shape
  `[B, *shape]`; with a time rank too, `[B, T, *shape]`, or `[T, B, *shape]`
  when `time_major=True`.
  """

  def __init__(
    self, add_batch_rank=False, add_time_rank=False, time_major=False
  ):
    self._has_batch_rank = bool(add_batch_rank)
    self._has_time_rank = bool(add_time_rank)
    self._time_major = bool(time_major) and self._has_time_rank

  # --- leading ranks -------------------------------------------------------

  @property
  def has_batch_rank(self):
    return self._has_batch_rank

  @property
  def has_time_rank(self):
    return self._has_time_rank

  @property
  def time_major(self):
    return self._time_major

  @property
  def num_leading_ranks(self):
    return int(self._has_batch_rank) + int(self._has_time_rank)

  def leading_rank_names(self):
    """Names of the leading dims in order, e.g. ('time', 'batch')."""
    if self._has_batch_rank and self._has_time_rank:
      return ("time", "batch") if self._time_major else ("batch", "time")
    if self._has_batch_rank:
      return ("batch",)
    if self._has_time_rank:
      return ("time",)
    return ()

  def with_ranks(self, batch=None, time=None, time_major=None):
    """A copy with the given leading-rank flags (None keeps the current)."""
    return self._with_ranks(
      self._has_batch_rank if batch is None else batch,
      self._has_time_rank if time is None else time,
      self._time_major if time_major is None else time_major,
    )

  def with_batch_rank(self, add=True):
    return self.with_ranks(batch=add)

  def with_time_rank(self, add=True, time_major=None):
    return self.with_ranks(time=add, time_major=time_major)

  def strip_ranks(self):
    """The per-item space: no batch rank, no time rank."""
    return self.with_ranks(batch=False, time=False, time_major=False)

  @abc.abstractmethod
  def _with_ranks(self, batch, time, time_major):
    """Returns a copy with exactly these rank flags."""

  def _leading_shape(self, size):
    """Turns `size` (None, int, or tuple in leading-dim order) into a tuple."""
    n = self.num_leading_ranks
    if size is None:
      return (1,) * n
    size = (size,) if np.isscalar(size) else tuple(size)
    if len(size) != n:
      raise SpaceError(
        f"size {size} does not match the leading ranks "
        f"{self.leading_rank_names() or '(none)'} of {self!r}"
      )
    return tuple(int(s) for s in size)

  def _rank_suffix(self):
    names = self.leading_rank_names()
    return (", " + "+".join(names)) if names else ""

  # --- values ----------------------------------------------------------------

  @abc.abstractmethod
  def sample(self, size=None, seed=None):
    """A random value in this space. `size` gives the leading dims."""

  @abc.abstractmethod
  def zeros(self, size=None):
    """An all-zero (empty-string, False) value of this space."""

  @abc.abstractmethod
  def check(self, value):
    """Raises `SpaceError` unless `value` has this space's structure, dtype,
    rank and shape. Does not look at bounds: cheap enough for every call."""

  def contains(self, value):
    """True if `value` passes `check` and lies within the bounds."""
    try:
      self.check(value)
    except SpaceError:
      return False
    return self._within_bounds(value)

  @abc.abstractmethod
  def _within_bounds(self, value):
    """Bounds test of a value that already passed `check`."""

  # --- structure -------------------------------------------------------------

  @abc.abstractmethod
  def flatten(self):
    """List of `(path, box_space)` in the canonical (dm-tree) leaf order."""

  def flatten_value(self, value):
    """The leaves of `value` in the order of `flatten()`."""
    # Only down to the boxes: a leaf may be a (nested) python list.
    return tree.flatten_up_to(self.structure(), value, check_types=False)

  def unflatten_value(self, leaves):
    """Inverse of `flatten_value`."""
    return tree.unflatten_as(self.structure(), list(leaves))

  @abc.abstractmethod
  def structure(self):
    """The nest of box spaces (a Box is its own structure)."""

  def __ne__(self, other):
    return not self == other
