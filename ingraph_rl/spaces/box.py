"""Box spaces: a single tensor of fixed dtype and per-item shape."""

import typing
from math import inf

import numpy as np
import numpy.typing as npt

from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces.space import Path, Seed, Size, Space, Value

# A per-item shape; None for a dim known only at run time.
Shape = tuple[int | None, ...]
# Bounds as given: a number, an array broadcastable to the shape, or None.
Bound = npt.ArrayLike | None


def dtype_kind(dtype: npt.DTypeLike) -> str:
  """A numpy dtype's kind, with bfloat16 (ml_dtypes' numpy type, which
  numpy sees as kind 'V') a float ('f'): weights stored in it have float
  spaces."""
  dtype = np.dtype(dtype)
  return "f" if dtype.name == "bfloat16" else dtype.kind


def describe_value(value: Value) -> str:
  """Short description of a value for error messages: type, shape, dtype."""
  shape, dtype = value_shape_and_dtype(value)
  kind = type(value).__name__
  if shape is None:
    return f"{kind} {value!r}"[:200]
  return f"{kind} with shape {tuple(shape)} and dtype {dtype}"


def value_shape_and_dtype(
  value: Value,
) -> tuple[tuple[int | None, ...] | None, np.dtype | None]:
  """(shape tuple, numpy dtype) of an array-like, or (None, None) for
  something that is not array-like (a dict, a string, None, ...)."""
  if isinstance(value, np.ndarray) or isinstance(value, np.generic):
    return value.shape, value.dtype
  shape = getattr(value, "shape", None)
  dtype = getattr(value, "dtype", None)
  if shape is not None and dtype is not None:
    # tf.Tensor / tf.Variable / torch.Tensor, by duck typing (spaces import
    # no backend).
    if hasattr(dtype, "as_numpy_dtype"):
      dtype = np.dtype(dtype.as_numpy_dtype)
      shape = tuple(shape.as_list()) if shape.rank is not None else None
      return shape, dtype
    if type(dtype).__module__ == "torch":
      return tuple(shape), _torch_to_numpy_dtype(dtype)
    return tuple(shape), np.dtype(dtype)
  if isinstance(value, (bool, int, float, str, bytes, list, tuple)):
    try:
      arr = np.asarray(value)
    except ValueError:
      return None, None
    if arr.dtype == object:
      return None, None
    return arr.shape, arr.dtype
  return None, None


def _torch_to_numpy_dtype(dtype: typing.Any) -> np.dtype:
  """The NumPy dtype of a torch dtype, by its name ("torch.float32" ->
  float32); object for one NumPy lacks (bfloat16)."""
  name = str(dtype).rpartition(".")[2]
  try:
    return np.dtype(name)
  except TypeError:
    return np.dtype(object)


def as_numpy(value: Value) -> np.ndarray:
  """A NumPy view (or copy) of an array-like: NumPy, Python, or a backend
  tensor (TF eager, torch) by duck typing (spaces import no backend)."""
  if isinstance(value, np.ndarray):
    return value
  if hasattr(value, "detach") and hasattr(value, "cpu"):  # torch.Tensor
    return typing.cast(np.ndarray, value.detach().cpu().numpy())
  if hasattr(value, "numpy") and not isinstance(value, np.generic):
    return np.asarray(value.numpy())  # tf.Tensor (eager)
  return np.asarray(value)


def _python_numbers(value: Value) -> list[typing.Any] | None:
  """The numbers of a (nested) Python list / tuple / number, or None if it
  holds anything else (bools count as non-numbers)."""
  out: list[typing.Any] = []
  stack = [value]
  while stack:
    x = stack.pop()
    if isinstance(x, (list, tuple)):
      stack.extend(x)
    elif isinstance(x, (int, float)) and not isinstance(x, (bool, np.generic)):
      out.append(x)
    else:
      return None
  return out


class BoxSpace(Space):
  """A tensor with per-item `shape`, `dtype` and optional bounds.

  Use the subclasses `FloatBox`, `IntBox`, `BoolBox`, `TextBox`.
  """

  # Which numpy dtype kinds a subclass accepts ('f' float, 'i'/'u' int ...).
  _kinds: tuple[str, ...] = ()

  def __init__(
    self,
    shape: int | typing.Iterable[int | None] = (),
    dtype: npt.DTypeLike = None,
    low: Bound = None,
    high: Bound = None,
    add_batch_rank: bool = False,
    add_time_rank: bool = False,
    time_major: bool = False,
  ) -> None:
    super().__init__(add_batch_rank, add_time_rank, time_major)
    if np.isscalar(shape):
      shape = (typing.cast(int, shape),)
    # None marks a dim only known at run time (e.g. an inferred output).
    self._shape: Shape = tuple(
      None if d is None else int(d)
      for d in typing.cast(typing.Iterable[int | None], shape)
    )
    if any(d is not None and d < 0 for d in self._shape):
      raise SpaceError(f"negative dimension in shape {self._shape}")
    self._dtype = np.dtype(dtype)
    if dtype_kind(self._dtype) not in self._kinds:
      raise SpaceError(
        f"{type(self).__name__} cannot have dtype {self._dtype}",
        expected=f"a dtype of kind {self._kinds}",
      )
    self._low = self._bound(low)
    self._high = self._bound(high)
    if (
      self._low is not None
      and self._high is not None
      and np.any(self._empty_range(self._low, self._high))
    ):
      raise SpaceError(
        f"{type(self).__name__}: empty range, low "
        f"{_short(self._low)} vs high {_short(self._high)}"
      )

  @staticmethod
  def _empty_range(low: typing.Any, high: typing.Any) -> typing.Any:
    return low > high  # Inclusive bounds (IntBox overrides: exclusive).

  def _bound(self, b: Bound) -> typing.Any:
    if b is None:
      return None
    arr = np.asarray(b)
    if arr.ndim and np.all(arr == arr.flat[0]):
      arr = arr.flat[0]  # Keep uniform bounds as scalars: short repr, cheap.
    if np.ndim(arr):
      arr = np.broadcast_to(arr, typing.cast(tuple[int, ...], self._shape))
      arr = arr.copy()
      arr.setflags(write=False)
    return arr

  @property
  def shape(self) -> Shape:
    """The per-item shape (without batch or time dims)."""
    return self._shape

  @property
  def rank(self) -> int:
    return len(self._shape)

  @property
  def dtype(self) -> np.dtype:
    """The numpy dtype."""
    return self._dtype

  @property
  def low(self) -> typing.Any:
    return self._low

  @property
  def high(self) -> typing.Any:
    return self._high

  def full_shape(self, size: Size = None) -> Shape:
    """Concrete shape with leading dims from `size`; None for unknown."""
    lead: Shape = (
      (None,) * self.num_leading_ranks
      if size is None
      else self._leading_shape(size)
    )
    return lead + self._shape

  def _kwargs(self) -> dict[str, typing.Any]:
    return dict(
      shape=self._shape, dtype=self._dtype, low=self._low, high=self._high
    )

  def _with_ranks(
    self, batch: bool, time: bool, time_major: bool
  ) -> typing.Self:
    return type(self)(
      **self._kwargs(),
      add_batch_rank=batch,
      add_time_rank=time,
      time_major=time_major,
    )

  def structure(self) -> typing.Self:
    return self

  def flatten(self) -> list[tuple[Path, "BoxSpace"]]:
    return [((), self)]

  def flatten_value(self, value: Value) -> list[Value]:
    return [value]

  def unflatten_value(self, leaves: typing.Iterable[Value]) -> Value:
    leaves = list(leaves)
    if len(leaves) != 1:
      raise SpaceError(f"expected 1 leaf for {self!r}, got {len(leaves)}")
    return leaves[0]

  def _sample_shape(self, size: Size) -> tuple[int, ...]:
    """Full shape of a sampled value: `size` gives the leading dims (for a
    space without leading ranks, it adds free leading dims)."""
    lead: tuple[int, ...]
    if self.num_leading_ranks:
      lead = self._leading_shape(size)
    elif size is None:
      lead = ()
    elif np.isscalar(size):
      lead = (int(typing.cast(int, size)),)
    else:
      lead = tuple(typing.cast(typing.Iterable[int], size))
    if None in self._shape:
      raise SpaceError(f"cannot make a value of {self!r}: a dim is unknown")
    return lead + typing.cast(tuple[int, ...], self._shape)

  def zeros(self, size: Size = None) -> np.ndarray:
    return np.zeros(self._sample_shape(size), dtype=self._dtype)

  # --- checks ------------------------------------------------------------

  def _accepts_python(self, arr: np.ndarray) -> bool:
    return dtype_kind(arr.dtype) in self._kinds

  def check(self, value: Value) -> None:
    shape: tuple[int | None, ...] | None
    dtype: np.dtype | None
    if type(value) is np.ndarray and self._dtype_matches(value.dtype):
      # Hot path (executor input checks): no allocation unless it fails.
      shape, dtype = value.shape, value.dtype
      want = self.full_shape()
      if len(shape) == len(want) and all(
        e is None or g == e for g, e in zip(shape, want)
      ):
        return
    else:
      shape, dtype = value_shape_and_dtype(value)
    self._check_slow(value, shape, dtype)

  def _check_slow(
    self,
    value: Value,
    shape: tuple[int | None, ...] | None,
    dtype: np.dtype | None,
  ) -> None:
    expected = repr(self)
    # np.float64 and np.str_ subclass float and str, but are numpy values:
    # they must match the dtype exactly.
    is_python = isinstance(
      value, (bool, int, float, str, bytes, list, tuple)
    ) and not isinstance(value, np.generic)
    if shape is None:
      numbers = _python_numbers(value) if is_python else None
      if numbers and self._dtype.kind in "iuf":
        # Ints beyond int64/uint64 make NumPy object arrays.
        self._check_python_range(value, numbers)
      raise SpaceError(
        "not an array-like value",
        expected=expected,
        received=describe_value(value),
      )
    if is_python and self._dtype.kind in "iu":
      # Python ints beyond int64 make NumPy pick float64 or uint64: say
      # what is wrong before the dtype check does.
      numbers = _python_numbers(value)
      if numbers and all(isinstance(x, int) for x in numbers):
        self._check_python_range(value, numbers)
    ok_dtype = (
      self._accepts_python(np.asarray(value))
      if is_python
      else self._dtype_matches(dtype)
    )
    if not ok_dtype:
      raise SpaceError(
        f"dtype mismatch: expected {self._dtype}, got {dtype}",
        expected=expected,
        received=describe_value(value),
      )
    if is_python and self._dtype.kind in "iuf":
      # Checked before anything converts (and wraps or overflows) them.
      numbers = _python_numbers(value)
      if numbers:
        self._check_python_range(value, numbers)
    want = self.full_shape()
    if len(shape) != len(want):
      names = list(self.leading_rank_names()) + list(self._shape)
      raise SpaceError(
        f"rank mismatch: expected rank {len(want)} "
        f"[{', '.join(str(n) for n in names)}], got rank {len(shape)}",
        expected=expected,
        received=describe_value(value),
      )
    for i, (got, exp) in enumerate(zip(shape, want)):
      if exp is not None and got is not None and got != exp:
        raise SpaceError(
          f"shape mismatch at dim {i}: expected {exp}, got {got}",
          expected=expected,
          received=describe_value(value),
        )

  def _check_python_range(
    self, value: Value, numbers: list[typing.Any]
  ) -> None:
    """Raises unless every Python number fits this space's dtype (ints
    within its integer range, floats within its finite range)."""
    lo: int | float
    hi: int | float
    if self._dtype.kind in "iu":
      info = np.iinfo(self._dtype)
      lo, hi = int(info.min), int(info.max)
    else:
      # Python floats and ints compare exactly (no overflow); inf and NaN
      # are left to the value checks.
      hi = float(np.finfo(typing.cast(typing.Any, self._dtype)).max)
      lo = -hi
    bad = [x for x in numbers if not lo <= x <= hi and x == x and abs(x) != inf]
    if bad:
      raise SpaceError(
        f"Python number {_clip_repr(bad[0])} is out of the {self._dtype} "
        f"range [{lo}, {hi}]",
        expected=repr(self),
        received=describe_value(value)
        if len(repr(value)) <= 200
        else f"{type(value).__name__} of Python numbers",
      )

  def _dtype_matches(self, dtype: npt.DTypeLike) -> bool:
    return bool(dtype == self._dtype)

  def _within_bounds(self, value: Value) -> bool:
    if self._low is None and self._high is None:
      return True
    arr = np.asarray(value)
    if self._low is not None and np.any(arr < self._low):
      return False
    if self._high is not None and np.any(arr > self._high):
      return False
    return True

  # --- value checks --------------------------------------------------------

  @property
  def has_value_checks(self) -> bool:
    """Whether `check_values` looks at values (a FloatBox: finiteness; an
    IntBox: bounds narrower than its dtype's range)."""
    return False

  def value_problem(self, value: Value) -> str | None:
    """What is wrong with the VALUES of `value` (which passed `check`), or
    None: an IntBox's bounds, a FloatBox's finiteness. Bounds of a FloatBox
    are not checked (observations may leave the bounds gymnasium
    declares)."""
    return None

  def check_values(self, value: Value) -> None:
    """Raises `SpaceError` if `value_problem` finds a problem."""
    if not self.has_value_checks:
      return
    problem = self.value_problem(value)
    if problem is not None:
      raise SpaceError(
        problem, expected=repr(self), received=describe_value(value)
      )

  # --- value semantics -----------------------------------------------------

  def _key(self) -> tuple[typing.Any, ...]:
    def b(x: typing.Any) -> typing.Any:
      return None if x is None else (np.shape(x), np.asarray(x).tobytes())

    return (
      type(self),
      self._shape,
      self._dtype.str,
      b(self._low),
      b(self._high),
      self._has_batch_rank,
      self._has_time_rank,
      self._time_major,
    )

  def __eq__(self, other: object) -> bool:
    return isinstance(other, BoxSpace) and self._key() == other._key()

  def __hash__(self) -> int:
    return hash(self._key())

  def __repr__(self) -> str:
    parts = [f"shape={self._shape}", f"dtype={self._dtype}"]
    if self._low is not None:
      parts.append(f"low={_short(self._low)}")
    if self._high is not None:
      parts.append(f"high={_short(self._high)}")
    return f"{type(self).__name__}({', '.join(parts)}{self._rank_suffix()})"


def _clip_repr(x: typing.Any) -> str:
  text = repr(x)
  return text if len(text) <= 24 else f"{text[:12]}...({len(text)} digits)"


def _short(x: typing.Any) -> str:
  return repr(x.item()) if np.ndim(x) == 0 else f"array{np.shape(x)}"


def _inward(bound: typing.Any, dtype: np.dtype, up: bool) -> np.ndarray:
  """`bound` in `dtype`, rounded towards the inside of the box (up for a
  lower bound) where the dtype cannot hold it exactly."""
  bound = np.asarray(bound, np.float64)
  out = np.asarray(bound, dtype)
  off = (out < bound) if up else (out > bound)
  return np.where(
    off, np.nextafter(out, np.asarray(np.inf if up else -np.inf, dtype)), out
  ).astype(dtype)


def _rng(seed: Seed) -> np.random.Generator:
  return (
    seed
    if isinstance(seed, np.random.Generator)
    else np.random.default_rng(seed)
  )


class FloatBox(BoxSpace):
  """Floating-point tensor. Bounds are inclusive; None means unbounded.

  >>> FloatBox(shape=(4,), add_batch_rank=True).zeros(2).shape
  (2, 4)
  """

  _kinds = ("f",)

  def __init__(
    self,
    shape: int | typing.Iterable[int | None] = (),
    low: Bound = None,
    high: Bound = None,
    dtype: npt.DTypeLike = np.float32,
    add_batch_rank: bool = False,
    add_time_rank: bool = False,
    time_major: bool = False,
  ) -> None:
    super().__init__(
      shape, dtype, low, high, add_batch_rank, add_time_rank, time_major
    )

  def _accepts_python(self, arr: np.ndarray) -> bool:
    return arr.dtype.kind in "fiu"

  @property
  def has_value_checks(self) -> bool:
    return True

  def value_problem(self, value: Value) -> str | None:
    arr = as_numpy(value)
    if dtype_kind(arr.dtype) != "f" or arr.size == 0:
      return None
    finite = np.isfinite(arr)
    if finite.all():
      return None
    bad = arr[~finite]
    kinds = sorted({"NaN" if np.isnan(x) else "inf" for x in bad[:100]})
    return (
      f"non-finite values: {bad.size} of {arr.size} are "
      f"{' or '.join(kinds)}; float inputs must be finite"
    )

  def sample(self, size: Size = None, seed: Seed = None) -> np.ndarray:
    rng = _rng(seed)
    shape = self._sample_shape(size)
    # Elementwise: uniform where both bounds are finite, an exponential tail
    # off a single finite bound, a standard normal where unbounded.
    lo = np.float64(-np.inf) if self._low is None else self._low
    hi = np.float64(np.inf) if self._high is None else self._high
    lo, hi = np.broadcast_to(lo, shape), np.broadcast_to(hi, shape)
    fin_lo, fin_hi = np.isfinite(lo), np.isfinite(hi)
    u = rng.uniform(size=shape)
    e = rng.exponential(size=shape)
    n = rng.standard_normal(size=shape)
    with np.errstate(invalid="ignore", over="ignore"):
      x = np.where(
        fin_lo & fin_hi,
        lo + u * (hi - lo),
        np.where(fin_lo, lo + e, np.where(fin_hi, hi - e, n)),
      )
      # Rounding to the dtype must not cross a bound that the dtype cannot
      # represent exactly (0.1 as float32): clip to the innermost values.
      return np.asarray(
        np.clip(
          np.asarray(x, dtype=self._dtype),
          _inward(lo, self._dtype, up=True),
          _inward(hi, self._dtype, up=False),
        )
      )


class IntBox(BoxSpace):
  """Integer tensor with bounds `low <= x < high` (high is EXCLUSIVE, so
  `IntBox(4)` holds the four actions 0..3).

  >>> IntBox(4).num_categories
  4
  """

  _kinds = ("i", "u")

  def __init__(
    self,
    high: Bound = None,
    shape: int | typing.Iterable[int | None] = (),
    low: Bound = None,
    dtype: npt.DTypeLike = np.int32,
    add_batch_rank: bool = False,
    add_time_rank: bool = False,
    time_major: bool = False,
  ) -> None:
    if high is not None and low is None:
      low = 0
    super().__init__(
      shape, dtype, low, high, add_batch_rank, add_time_rank, time_major
    )

  def _bound(self, b: Bound) -> typing.Any:
    if b is None:
      return None
    try:
      arr = np.asarray(b)
      with np.errstate(invalid="ignore"):  # inf, NaN: caught below.
        ints = arr.astype(np.int64) if arr.dtype.kind in "biuf" else None
    except (OverflowError, ValueError, TypeError):
      ints = None
    # inf, NaN, 2.5, 2**70 or a string: no integer bound (NumPy would
    # raise OverflowError, or round 2.5 down).
    if ints is None or not np.array_equal(ints, arr):
      raise SpaceError(
        f"IntBox bounds must be integers within int64, got {_clip_repr(b)}",
        expected="an int or an array of ints (high is exclusive)",
        received=_clip_repr(b),
      )
    return super()._bound(ints)

  def _kwargs(self) -> dict[str, typing.Any]:
    return dict(
      high=self._high, shape=self._shape, low=self._low, dtype=self._dtype
    )

  @staticmethod
  def _empty_range(low: typing.Any, high: typing.Any) -> typing.Any:
    return low >= high  # `high` is exclusive.

  @property
  def num_categories(self) -> int | None:
    """high - low for uniform scalar bounds, else None."""
    if (
      self._low is None
      or self._high is None
      or np.ndim(self._high)
      or np.ndim(self._low)
    ):
      return None
    return int(self._high) - int(self._low)

  def _within_bounds(self, value: Value) -> bool:
    arr = np.asarray(value)
    if self._low is not None and np.any(arr < self._low):
      return False
    if self._high is not None and np.any(arr >= self._high):
      return False
    return True

  @property
  def has_value_checks(self) -> bool:
    info = np.iinfo(self._dtype)
    return bool(self._low is not None and np.any(self._low > info.min)) or bool(
      self._high is not None and np.any(self._high <= info.max)
    )

  def value_problem(self, value: Value) -> str | None:
    arr = as_numpy(value)
    if arr.size == 0 or arr.dtype.kind not in "iu":
      return None
    low_bad = self._low is not None and bool(np.any(arr < self._low))
    high_bad = self._high is not None and bool(np.any(arr >= self._high))
    if not (low_bad or high_bad):
      return None
    lo = "-inf" if self._low is None else _short(self._low)
    hi = "inf" if self._high is None else _short(self._high)
    return (
      f"values out of range: expected integers in [{lo}, {hi}), got "
      f"values in [{arr.min()}, {arr.max()}]"
    )

  def sample(self, size: Size = None, seed: Seed = None) -> np.ndarray:
    rng = _rng(seed)
    shape = self._sample_shape(size)
    info = np.iinfo(self._dtype)
    lo = max(-100, info.min) if self._low is None else self._low
    # Without a high bound: up to 100, or just above a low bound beyond that.
    hi = (
      np.maximum(lo, min(99, info.max - 1)) + 1
      if self._high is None
      else self._high
    )
    return rng.integers(lo, hi, size=shape).astype(self._dtype)


class BoolBox(BoxSpace):
  """Boolean tensor."""

  _kinds = ("b",)

  def __init__(
    self,
    shape: int | typing.Iterable[int | None] = (),
    add_batch_rank: bool = False,
    add_time_rank: bool = False,
    time_major: bool = False,
    dtype: npt.DTypeLike = np.bool_,
    low: Bound = None,
    high: Bound = None,
  ) -> None:
    del low, high  # Booleans have no bounds; accepted for `_with_ranks`.
    super().__init__(
      shape, dtype, None, None, add_batch_rank, add_time_rank, time_major
    )

  def sample(self, size: Size = None, seed: Seed = None) -> np.ndarray:
    return (
      _rng(seed).integers(0, 2, size=self._sample_shape(size)).astype(np.bool_)
    )


class TextBox(BoxSpace):
  """String tensor (`tf.string`). Values are numpy object arrays of str.
  There is no torch dtype for strings: torch bodies never see TextBox
  values."""

  _kinds = ("O", "U", "S")

  def __init__(
    self,
    shape: int | typing.Iterable[int | None] = (),
    add_batch_rank: bool = False,
    add_time_rank: bool = False,
    time_major: bool = False,
    dtype: npt.DTypeLike = object,
    low: Bound = None,
    high: Bound = None,
  ) -> None:
    del low, high, dtype
    super().__init__(
      shape, object, None, None, add_batch_rank, add_time_rank, time_major
    )

  def _dtype_matches(self, dtype: npt.DTypeLike) -> bool:
    return np.dtype(dtype).kind in self._kinds

  def _accepts_python(self, arr: np.ndarray) -> bool:
    return arr.dtype.kind in "US"

  def zeros(self, size: Size = None) -> np.ndarray:
    out = np.empty(self._sample_shape(size), dtype=object)
    out.fill("")
    return out

  def sample(self, size: Size = None, seed: Seed = None) -> np.ndarray:
    rng = _rng(seed)
    shape = self._sample_shape(size)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    out = np.empty(shape, dtype=object)
    for idx in np.ndindex(*shape):
      out[idx] = "".join(rng.choice(letters, size=rng.integers(1, 8)))
    return out
