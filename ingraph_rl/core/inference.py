"""Output spaces from the values graph functions return.

The builder (and the executors, which know their backends' values) turn the
dtype and shape of a traced value into a space, and nests of values into
Dict / Tuple spaces.
"""

import typing

import numpy as np

from ingraph_rl import spaces as sp
from ingraph_rl.errors import BuildError

# What `infer_leaf_space` knows of an input with leading ranks: its rank
# flags (as `add_batch_rank=...` keywords) and its leading dims.
InputLead = tuple[dict[str, bool], tuple[int | None, ...]]


def infer_leaf_space(
  dtype: np.dtype,
  shape: typing.Sequence[int | None],
  in_spaces: typing.Sequence[sp.Space | None],
  in_leads: typing.Iterable[InputLead] = (),
) -> sp.BoxSpace:
  """Space of one output tensor from its numpy dtype and shape (None for
  dims unknown at build time). Leading unknown dims become the batch rank,
  and the time rank as well when an input had one (keeping its major-ness).
  Static leading dims count as ranks when they equal the leading dims of an
  input that has ranks (`in_leads`: [(ranks, leading shape)], e.g. a batch
  of a fixed size sampled from a memory). Shapes alone cannot tell a
  [batch, time] value from [batch, feature]: graph functions that change
  ranks (time folding) declare their output spaces instead.
  """
  matches = [
    (ranks, lead)
    for ranks, lead in in_leads
    if None not in lead and tuple(shape[: len(lead)]) == lead
  ]
  if matches and (not shape or shape[0] is not None):
    ranks, lead = max(matches, key=lambda m: len(m[1]))
    return _box(dtype, shape[len(lead) :], ranks)
  leaves = [
    s for space in in_spaces if space is not None for _, s in space.flatten()
  ]
  time_leaf = next((s for s in leaves if s.has_time_rank), None)
  any_batch = any(s.has_batch_rank for s in leaves)
  n_unknown = 0
  for d in shape:
    if d is not None:
      break
    n_unknown += 1
  if n_unknown >= 2 and time_leaf is not None and any_batch:
    ranks = dict(
      add_batch_rank=True, add_time_rank=True, time_major=time_leaf.time_major
    )
    rest = shape[2:]
  elif n_unknown >= 1 and time_leaf is not None and not any_batch:
    ranks = dict(add_time_rank=True)  # Inputs have a time rank only.
    rest = shape[1:]
  elif n_unknown >= 1:
    ranks = dict(add_batch_rank=True)
    rest = shape[1:]
  else:
    ranks = {}
    rest = shape
  return _box(dtype, rest, ranks)


def _box(
  dtype: np.dtype,
  rest: typing.Sequence[int | None],
  ranks: dict[str, typing.Any],
) -> sp.BoxSpace:
  kind = sp.dtype_kind(dtype)
  if kind == "f":
    return sp.FloatBox(rest, dtype=dtype, **ranks)
  if kind in "iu":
    return sp.IntBox(None, rest, dtype=dtype, **ranks)
  if kind == "b":
    return sp.BoolBox(rest, **ranks)
  if kind in "OSU":
    return sp.TextBox(rest, **ranks)
  raise BuildError(f"cannot make a space for dtype {dtype}")


def nest_to_space(
  nest: typing.Any, leaf_fn: typing.Callable[[typing.Any], sp.Space]
) -> typing.Any:
  """Dict/Tuple space of a nested value, `leaf_fn(leaf)` for the leaves
  (None for None)."""
  if nest is None:
    return None
  if isinstance(nest, dict):
    return sp.Dict({k: nest_to_space(v, leaf_fn) for k, v in nest.items()})
  if isinstance(nest, (list, tuple)):
    return sp.Tuple(*[nest_to_space(v, leaf_fn) for v in nest])
  return leaf_fn(nest)
