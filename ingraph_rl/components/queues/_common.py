"""Helpers shared by the queue components: record-space checks and
unique resource names."""

import itertools
import threading
import uuid

from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import Space

_counter = itertools.count()
_counter_lock = threading.Lock()


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
  """`space.check(value)` on symbolic TF tensors at trace time; a
  SpaceError names the component path, the API method and the argument."""
  try:
    space.check(value)
  except SpaceError as e:
    raise e.with_context(
      component=component.path, api=api, argument=argument
    ) from None
