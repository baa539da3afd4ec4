"""Helpers shared by the queue components: record-space checks, unique
resource names, and the torch build-pass stand-ins.

The torch executor infers output spaces by running every torch body twice
on random samples while it builds (see `executors/torch.py`). A queue body
must not touch its queue then: an enqueue would leave sample records behind,
a dequeue on the empty queue would block the build forever, and `close`
would close it. During those passes the bodies return zeros of the right
space instead (`build_pass_zeros`), with batch/time sizes that differ between
the two passes so that leading dims are inferred as batch/time ranks.
"""

import itertools
import threading
import uuid

import numpy as np
import tree

from ingraph_rl.errors import SpaceError
from ingraph_rl.executors import checks
from ingraph_rl.spaces import Space, TextBox

# The (batch, time) sizes of the two torch build passes (any two pairs that
# differ in both entries would do).
_PASS_SIZES = ((2, 3), (5, 7))

_counter = itertools.count()
_counter_lock = threading.Lock()


def in_torch_build_pass():
  """True while the torch executor runs bodies on sample inputs to infer
  output spaces."""
  return checks.in_build_pass()


def unique_shared_name(path):
  """A resource name unique to this process and call, readable in errors:
  '<path with / as .>_<n>_<random hex>'."""
  with _counter_lock:
    n = next(_counter)
  return f"{path.replace('/', '.')}_{n}_{uuid.uuid4().hex[:12]}"


def validate_record_space(space, scope, per_item):
  """Checks the `record_space` constructor argument.

  per_item: the space must have no batch/time rank (FIFOQueue records).
  Every leaf needs a fully known per-item shape.
  """

  def fail(reason, received):
    raise SpaceError(
      reason,
      component=scope,
      argument="record_space",
      expected="a Space (Box, or Dict/Tuple of boxes) with "
      "fully known shapes" + (" and no batch/time rank" if per_item else ""),
      received=received,
    )

  if not isinstance(space, Space):
    fail("record_space is not a Space", repr(space))
  leaves = space.flatten()
  if not leaves:
    fail("record_space has no leaves", repr(space))
  for path, leaf in leaves:
    where = f"leaf {list(path)}" if path else "record_space"
    if per_item and leaf.num_leading_ranks:
      fail(
        f"{where} has a {'/'.join(leaf.leading_rank_names())} rank; give "
        f"the space of ONE record (enqueue_many/dequeue_many add the "
        f"batch rank)",
        repr(space),
      )
    if any(d is None for d in leaf.shape):
      fail(f"{where} has an unknown dim in shape {leaf.shape}", repr(space))
  return space


def check_value(component, space, value, api, argument):
  """`space.check(value)` on backend tensors (symbolic TF tensors at trace
  time, torch tensors in the build pass); a SpaceError names the component
  path, the API method and the argument."""
  try:
    space.check(value)
  except SpaceError as e:
    raise e.with_context(
      component=component.path, api=api, argument=argument
    ) from None


def leading_size(space, flip):
  """The leading-dim sizes of `space` (a box) for build pass `flip`."""
  batch, time = _PASS_SIZES[int(flip)]
  if space.has_batch_rank and space.has_time_rank:
    return (time, batch) if space.time_major else (batch, time)
  if space.has_batch_rank:
    return batch
  if space.has_time_rank:
    return time
  return None


def build_pass_zeros(space, flip):
  """Zeros of `space` with the leading sizes of build pass `flip`."""
  return torch_zeros(space, lambda leaf: leading_size(leaf, flip))


def torch_zeros(space, size_of):
  """Zeros of `space` as torch tensors (TextBox leaves stay NumPy);
  `size_of(leaf_space)` gives each leaf's leading sizes."""
  import torch

  def leaf(s):
    value = s.zeros(size_of(s))
    return value if isinstance(s, TextBox) else torch.from_numpy(value)

  return tree.map_structure(leaf, space.structure())


def copy_leaf(x):
  """A private copy of one torch (or NumPy) leaf: the torch executor hands
  bodies tensors that share memory with the caller's NumPy arrays."""
  if hasattr(x, "clone"):
    return x.clone()
  return np.array(x, copy=True)


def stack_leaves(*xs):
  import torch

  if hasattr(xs[0], "clone"):
    return torch.stack(xs)
  return np.stack(xs)
