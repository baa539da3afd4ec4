"""Value checks inside graph functions that surface as `SpaceError`s.

Space checks at the API boundary look at structure, dtype and shape. Some
rules are about values (priorities must be finite and positive); those are
checked inside the graph, before any state changes, with `tf_check`. The
executor turns a failed check into a `SpaceError` naming the component, the
API method and the argument, never a raw TF trace:

    @graph_fn
    def _graph_fn_update(self, priorities):
      ok = tf.reduce_all(priorities > 0)
      with tf.control_dependencies([tf_check(ok, self, "update", "priorities",
                                             "priorities must be > 0")]):
        ...  # state changes
"""

import contextlib
import re
import threading

import tensorflow as tf

from ingraph_rl.errors import SpaceError

_MARKER = "ingraph_rl-check"
_PATTERN = re.compile(
    _MARKER + r"\|component=(.*?)\|api=(.*?)\|argument=(.*?)\|reason=(.*?)\|end")


def tf_check(condition, component, api, argument, reason):
  """An assert op: when `condition` is False, the executor raises a
  SpaceError with this context. Use it in `tf.control_dependencies`."""
  path = getattr(component, "path", component)
  msg = (f"{_MARKER}|component={path}|api={api}|argument={argument}|"
         f"reason={reason}|end")
  return tf.debugging.Assert(condition, [msg])


_SUSPENDED = threading.local()


@contextlib.contextmanager
def suspended():
  """No `torch_check` fires inside: the torch executor's build passes run
  bodies on random samples, which need not obey value rules."""
  before = getattr(_SUSPENDED, "on", False)
  _SUSPENDED.on = True
  try:
    yield
  finally:
    _SUSPENDED.on = before


def in_build_pass():
  """True while the torch executor's build passes run bodies on samples
  (a body with effects outside variables, e.g. a queue, skips them)."""
  return getattr(_SUSPENDED, "on", False)


def torch_check(condition, component, api, argument, reason):
  """The torch mirror of `tf_check`: raises at once."""
  if getattr(_SUSPENDED, "on", False):
    return
  if not bool(condition):
    raise SpaceError(reason, component=getattr(component, "path", component),
                     api=api, argument=argument)


def space_error_from(exception):
  """The SpaceError a failed `tf_check` stands for, or None."""
  match = _PATTERN.search(str(exception))
  if match is None:
    return None
  component, api, argument, reason = match.groups()
  return SpaceError(reason, component=component, api=api, argument=argument)
