"""Value checks inside graph functions that surface as `SpaceError`s.

Space checks at the API boundary look at structure, dtype and shape. Some
rules are about values (priorities must be finite and positive); those are
checked inside the graph, before any state changes, with `tf_check` (and
`torch_check` in the torch body). The executor turns a failed check into a
`SpaceError` naming the component, the API method and the argument, never a
raw TF trace:

    @graph_fn
    def _graph_fn_update(self, priorities):
      ok = tf.reduce_all(priorities > 0)
      with tf.control_dependencies([tf_check(ok, self, "update", "priorities",
                                             "priorities must be > 0")]):
        ...  # state changes

This module imports no backend at import time: the torch executor uses it
(`suspended`), and `tf_check` imports TensorFlow only when a TF body calls
it, where TensorFlow is loaded already.
"""

import contextlib
import re
import threading
import typing

from ingraph_rl.errors import SpaceError

_MARKER = "[ingraph_rl check]"
_PATTERN = re.compile(
  r"\[ingraph_rl check\] component `(.*?)`, API method `(.*?)`, "
  r"argument `(.*?)`: (.*?) \[end\]",
  re.DOTALL,
)


def check_message(
  component: typing.Any, api: str, argument: str, reason: str
) -> str:
  """The text a failed in-graph check carries: readable as it is (e.g. in
  the error a loaded SavedModel's signature raises), and read back into a
  SpaceError by `space_error_from`. `component`: a component or its
  path."""
  path = getattr(component, "path", component)
  return (
    f"{_MARKER} component `{path}`, API method `{api}`, argument "
    f"`{argument}`: {reason} [end]"
  )


def tf_check(
  condition: typing.Any,
  component: typing.Any,
  api: str,
  argument: str,
  reason: str,
) -> typing.Any:
  """An assert op: when `condition` is False, the executor raises a
  SpaceError with this context. Use it in `tf.control_dependencies`."""
  import tensorflow as tf  # Only TF bodies call this (see module doc).

  op = tf.debugging.Assert(
    condition, [check_message(component, api, argument, reason)]
  )
  tx = current_transaction()
  if tx is not None:
    tx.checks.append(op)
  return op


# --- deferred writes ---------------------------------------------------------


class Transaction:
  """What one replay of an API's graph functions made: its checks, and the
  writes deferred to its end (`defer`), which run only after every check
  of the call passed. The executors open one per root API call (and per
  inlined API replay, e.g. each iteration of an in-graph loop)."""

  def __init__(self) -> None:
    self.checks: list[typing.Any] = []
    self.deferred: list[typing.Callable[[], typing.Any]] = []


_TX = threading.local()


@contextlib.contextmanager
def transaction() -> typing.Iterator[Transaction]:
  """Opens a transaction (see `Transaction`); the caller runs its deferred
  writes (`Transaction.deferred`) once the replay is complete."""
  stack = getattr(_TX, "stack", None)
  if stack is None:
    stack = _TX.stack = []
  tx = Transaction()
  stack.append(tx)
  try:
    yield tx
  finally:
    stack.pop()


def current_transaction() -> Transaction | None:
  stack = getattr(_TX, "stack", None)
  return stack[-1] if stack else None


def defer(write: typing.Callable[[], typing.Any]) -> None:
  """Runs `write` (a state change that nothing in the call reads, e.g. an
  RNG's advance) at the end of the running API call, after (in TF:
  depending on) every check of the call; at once outside one."""
  tx = current_transaction()
  if tx is None:
    write()
  else:
    tx.deferred.append(write)


def tf_transaction(body: typing.Callable[[], typing.Any]) -> typing.Any:
  """Traces `body()` (one replay of recorded graph functions) as one
  transaction: its deferred writes (e.g. RNG advances) wait for every
  check it made in this graph (a check inside a cond or loop body guards
  that body's op). Every replay opens its own, so an update inlined in a
  loop advances its RNG once per iteration."""
  import tensorflow as tf  # Only TF bodies call this (see module doc).

  with transaction() as tx:
    out = body()
  if tx.deferred:
    graph = tf.compat.v1.get_default_graph()
    with tf.control_dependencies([c for c in tx.checks if c.graph is graph]):
      for write in tx.deferred:
        write()
  return out


def tf_draw(
  generator: typing.Any, draw: typing.Callable[..., typing.Any]
) -> typing.Any:
  """Random numbers from a `tf.random.Generator` that advance it only if
  the whole call succeeds: `draw(seed)` makes them with
  `tf.random.stateless_*(..., seed=seed)` from a seed read off the
  generator's state; the generator's advance is deferred (`defer`). So a
  check that fails later in the call (e.g. on priorities computed from the
  sampled records) leaves the RNG state as it was."""
  import tensorflow as tf  # Only TF bodies call this (see module doc).

  state = generator.state.read_value()
  out = draw(tf.stack([state[0], state[-1]]))
  defer(lambda: generator.skip(1))
  return out


def torch_draw(
  generator: typing.Any, draw: typing.Callable[..., typing.Any]
) -> typing.Any:
  """The torch mirror of `tf_draw`: `draw(g)` draws from a copy `g` of the
  `torch.Generator`, whose state the generator takes at the end of a
  successful call."""
  import torch

  copy = torch.Generator()
  copy.set_state(generator.get_state())
  out = draw(copy)
  defer(lambda: generator.set_state(copy.get_state()))
  return out


def tf_check_all(
  conditions: typing.Sequence[tuple[typing.Any, str]],
) -> typing.Any:
  """ONE assert op for several (condition, `check_message`) pairs: when any
  condition is False it fails with the message of the first false one."""
  import tensorflow as tf  # Only TF bodies call this (see module doc).

  if len(conditions) == 1:
    ((condition, message),) = conditions
    return tf.debugging.Assert(condition, [message])
  oks = tf.stack([tf.reshape(c, []) for c, _ in conditions])
  messages = tf.constant([m for _, m in conditions])
  first_false = tf.argmin(tf.cast(oks, tf.int32))
  return tf.debugging.Assert(
    tf.reduce_all(oks), [tf.gather(messages, first_false)]
  )


_OPAQUE_SIZES: typing.Any = None


def tf_leading_sizes(tensors: typing.Sequence[typing.Any]) -> typing.Any:
  """int32 [len(tensors)]: the leading dim of each tensor, in ONE call of
  a function grappler never inlines. Use it for the sizes a check
  compares: grappler's shape inference assumes the graph is valid, so it
  may fold a size to what a LATER op implies (e.g. an assignment to a [3]
  variable), and with it the check that guards that op. One call for all
  the sizes: a call costs ~20 us of executor overhead, and in-graph loops
  check every step."""
  import tensorflow as tf  # Only TF bodies call this (see module doc).

  global _OPAQUE_SIZES
  if _OPAQUE_SIZES is None:
    _OPAQUE_SIZES = tf.function(
      lambda *ts: tf.stack([tf.shape(t)[0] for t in ts]),
      autograph=False,
      experimental_attributes={"_noinline": True},
    )
  return _OPAQUE_SIZES(*tensors)


_SUSPENDED = threading.local()


@contextlib.contextmanager
def suspended() -> typing.Iterator[None]:
  """No `torch_check` fires inside: the torch executor's build passes run
  bodies on random samples, which need not obey value rules."""
  before = getattr(_SUSPENDED, "on", False)
  _SUSPENDED.on = True
  try:
    yield
  finally:
    _SUSPENDED.on = before


def in_build_pass() -> bool:
  """True while the torch executor's build passes run bodies on samples
  (a body with effects outside variables, e.g. a queue, skips them)."""
  return bool(getattr(_SUSPENDED, "on", False))


def torch_check(
  condition: typing.Any,
  component: typing.Any,
  api: str,
  argument: str,
  reason: str,
) -> None:
  """The torch mirror of `tf_check`: raises at once (a torch bool tensor
  or a Python bool)."""
  if getattr(_SUSPENDED, "on", False):
    return
  if not bool(condition):
    raise SpaceError(
      reason,
      component=getattr(component, "path", component),
      api=api,
      argument=argument,
    )


def space_error_from(exception: BaseException) -> SpaceError | None:
  """The SpaceError a failed `tf_check` stands for, or None."""
  match = _PATTERN.search(str(exception))
  if match is None:
    return None
  component, api, argument, reason = (
    # TF's error messages escape quotes and backslashes.
    g.replace("\\'", "'").replace('\\"', '"').replace("\\\\", "\\")
    for g in match.groups()
  )
  return SpaceError(reason, component=component, api=api, argument=argument)
