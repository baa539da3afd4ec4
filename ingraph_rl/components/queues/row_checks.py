"""Checks of the rows a component dequeues: what another process sent is
checked as a root API's argument is, row by row, in the graph, before
anything is written.

A queue's other end may be a buggy or corrupted peer (a different build, a
flipped bit), and a queue op checks only dtypes and shapes. `RowChecks`
tests every row of a dequeued batch against the queue's row space (IntBox
leaves within their bounds, FloatBox leaves finite: the same rules as
`executors.input_checks`) plus the receiver's own rules (priorities > 0, a
ring index below the memory's size), and says which rows break which rule
(`causes`, in order, as the bits of one int64). The receivers drop the
bad rows and count them; `RejectionLog` logs each cause the first time it
is seen.
"""

import typing

import numpy as np
import tensorflow as tf
import tree
from absl import logging

from ingraph_rl.spaces import FloatBox, IntBox, Space


def within_bounds(t, dtype, low, high):
  """Elementwise: `t` in [low, high) (an IntBox's bounds, scalars or
  per-element; a bound beyond the dtype's range is no test)."""
  info = np.iinfo(dtype)
  ok = tf.ones_like(t, tf.bool)
  if low is not None and np.any(low > info.min):
    lo = np.maximum(low, info.min).astype(dtype)
    ok &= t >= tf.constant(lo, t.dtype)
  if high is not None and np.any(high <= info.max):
    hi = np.minimum(np.asarray(high, np.int64) - 1, info.max).astype(dtype)
    ok &= t <= tf.constant(hi, t.dtype)
  return ok


def _per_row(ok):
  """[n, ...] bool -> [n]: whether the whole row holds."""
  return tf.reduce_all(tf.reshape(ok, [tf.shape(ok)[0], -1]), axis=1)


class RowChecks:
  """The per-row checks of rows of `row_space` (no batch rank: a queue's
  row), plus `extra`: (cause, fn(rows) -> [n] bool) rules of the
  receiver; `prefix` starts each cause (e.g. which queue). `causes`
  names every rule, in the order of `tf_check`'s mask bits."""

  def __init__(
    self,
    row_space: Space,
    extra: typing.Sequence[tuple[str, typing.Callable]] = (),
    prefix: str = "",
  ) -> None:
    self.leaves = []
    for path, leaf in row_space.flatten():
      where = "".join(f"[{p!r}]" for p in path) or "row"
      where = f"{prefix} {where}" if prefix else where
      if isinstance(leaf, IntBox) and leaf.has_value_checks:
        low = "-inf" if leaf.low is None else _text(leaf.low)
        high = "inf" if leaf.high is None else _text(leaf.high)
        cause = f"{where}: integers out of [{low}, {high})"
        self.leaves.append((path, leaf, cause))
      elif isinstance(leaf, FloatBox):
        self.leaves.append((path, leaf, f"{where}: NaN or inf"))
    self.extra = list(extra)
    self.causes = [c for _, _, c in self.leaves] + [
      f"{prefix}: {c}" if prefix else c for c, _ in self.extra
    ]
    if len(self.causes) > 62:
      raise ValueError(f"{len(self.causes)} rules do not fit an int64 mask")

  def tf_check(self, rows):
    """(ok [n] bool: the row breaks no rule, causes int64 []: bit i set
    where some row breaks rule i; a scalar, so results stay scalars)."""
    flat = dict(tree.flatten_with_path(rows))
    oks = []
    for path, leaf, _ in self.leaves:
      t = flat[tuple(path)]
      if isinstance(leaf, IntBox):
        oks.append(_per_row(within_bounds(t, leaf.dtype, leaf.low, leaf.high)))
      else:
        oks.append(_per_row(tf.math.is_finite(t)))
    oks += [tf.cast(fn(rows), tf.bool) for _, fn in self.extra]
    if not oks:
      n = tf.shape(tree.flatten(rows)[0])[0]
      return tf.ones([n], tf.bool), tf.constant(0, tf.int64)
    stacked = tf.stack(oks)  # [rules, n]
    broken = tf.cast(~tf.reduce_all(stacked, axis=1), tf.int64)
    bits = tf.constant([1 << i for i in range(len(oks))], tf.int64)
    return tf.reduce_all(stacked, axis=0), tf.reduce_sum(broken * bits)

  def causes_of(self, mask, offset=0):
    """The causes a `tf_check` mask names (bits from `offset`)."""
    mask = int(mask) >> offset
    return [c for i, c in enumerate(self.causes) if mask >> i & 1]


def keep_rows(rows, ok):
  """`rows` without the rows where `ok` is False (no copy when all
  hold)."""
  return tf.cond(
    tf.reduce_all(ok),
    lambda: tf.nest.map_structure(tf.identity, rows),
    lambda: tf.nest.map_structure(lambda x: tf.boolean_mask(x, ok), rows),
  )


def _text(bound):
  return str(bound.item()) if np.ndim(bound) == 0 else "per-element bounds"


class RejectionLog:
  """Logs each cause of rejected rows once (the first time a result
  counts it), and keeps the total. `who`: the receiver, for the log
  line."""

  def __init__(self, who: str, causes: typing.Sequence[str]) -> None:
    self.who = who
    self.causes = list(causes)
    self.seen: set[str] = set()
    self.total = 0

  def add(self, rows, mask) -> int:
    """One result's `rows` rejected and its cause `mask` (bit i: cause
    i); returns `rows` as an int."""
    rows = int(rows)
    self.total += rows
    mask = int(mask)
    for i, cause in enumerate(self.causes):
      if mask >> i & 1 and cause not in self.seen:
        self.seen.add(cause)
        logging.warning(
          "%s: dropped received rows: %s (a faulty sender? each cause is "
          "logged once; the rows are counted)",
          self.who,
          cause,
        )
    return rows

  @classmethod
  def of(cls, who, executor):
    """The log of a built receiver (its root has `rejection_causes`)."""
    return cls(who, getattr(executor.root, "rejection_causes", ()))

  def add_result(self, out) -> None:
    """Adds an API result that has "rejected_rows" and "rejected_causes"
    (others are ignored)."""
    if "rejected_rows" in out:
      self.add(out["rejected_rows"], out["rejected_causes"])
