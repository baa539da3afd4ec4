"""Gradients inside graph functions, for both backends.

A graph function that differentiates declares it: `@graph_fn(
needs_gradients=True)`. The TF executor then records the whole root API
under one persistent `tf.GradientTape`, so a loss computed by earlier graph
functions (other components) can be differentiated; `tf_gradients` reads
that tape. The torch mirror uses autograd directly.
"""

import contextlib
import threading

import tensorflow as tf

from ingraph_rl.errors import BuildError

_STATE = threading.local()


@contextlib.contextmanager
def tf_recording():
  """Records everything inside on a persistent tape for `tf_gradients`."""
  with tf.GradientTape(persistent=True) as tape:
    previous = getattr(_STATE, "tape", None)
    _STATE.tape = tape
    try:
      yield tape
    finally:
      _STATE.tape = previous


def tf_gradients(loss, variables):
  """d loss / d variables (None for a variable the loss does not use)."""
  tape = getattr(_STATE, "tape", None)
  if tape is None:
    raise BuildError(
        "tf_gradients() outside a recorded API: declare the graph function "
        "with @graph_fn(needs_gradients=True)")
  with tape.stop_recording():
    return tape.gradient(loss, variables)


def torch_gradients(loss, variables):
  """The torch mirror of `tf_gradients` (None for unused variables)."""
  import torch
  return torch.autograd.grad(loss, variables, allow_unused=True)
