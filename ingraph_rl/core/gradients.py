"""Gradients inside graph functions, for both backends.

A graph function that differentiates declares it: `@graph_fn(
needs_gradients=True)`. The TF executor then records the whole root API
under one persistent `tf.GradientTape`, so a loss computed by earlier graph
functions (other components) can be differentiated; `tf_gradients` reads
that tape. The torch mirror uses autograd directly.

Synchronous towers (`executors.strategies.MultiTowerStrategy`) run the loss
once per device on a slice of the batch and hand the optimizer the merge of
the tower losses (their mean or sum). Inside `tf_tower_losses`,
`tf_gradients` of such a merged loss differentiates each tower's loss on its
own device and combines the gradients the way the losses were combined (the
gradient of a mean of losses is the mean of their gradients), so an
optimizer applies one update without knowing about towers.
"""

import contextlib
import dataclasses
import threading
import typing

import tensorflow as tf
import tree

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


@contextlib.contextmanager
def tf_no_recording():
  """Inside, nothing goes on the `tf_recording` tape: for control flow no
  gradient flows through (while a tape records, TF builds the gradient
  functions of every while loop and cond as they are made, which for an
  env-stepping loop around a network costs seconds of build time)."""
  tape = getattr(_STATE, "tape", None)
  if tape is None:
    yield
    return
  with tape.stop_recording():
    yield


@dataclasses.dataclass(eq=False)
class TowerLoss:
  """A value merged from per-tower values: `merged` = combine(`losses`)."""
  merged: typing.Any
  losses: list             # One tensor per tower.
  devices: list            # The tower devices, in the same order.
  combine: str             # "mean", "sum" or "first".


@contextlib.contextmanager
def tf_tower_losses(registry):
  """Inside, `tf_gradients` of a tensor in `registry` (id(tensor) ->
  TowerLoss) differentiates the tower losses instead (see module doc)."""
  previous = getattr(_STATE, "towers", None)
  _STATE.towers = registry
  try:
    yield registry
  finally:
    _STATE.towers = previous


def tf_gradients(loss, variables):
  """d loss / d variables (None for a variable the loss does not use)."""
  tape = getattr(_STATE, "tape", None)
  if tape is None:
    raise BuildError(
        "tf_gradients() outside a recorded API: declare the graph function "
        "with @graph_fn(needs_gradients=True)")
  towers = getattr(_STATE, "towers", None) or {}
  entry = towers.get(id(loss))
  with tape.stop_recording():
    if entry is None or entry.merged is not loss:
      return tape.gradient(loss, variables)
    return _tower_gradients(tape, entry, variables)


def _tower_gradients(tape, entry, variables):
  """The gradients of `entry.merged` from those of the tower losses, each
  taken on its tower's device and combined on the variable's device."""
  if entry.combine not in ("mean", "sum"):
    raise BuildError(
        f"the loss handed to the optimizer merges its towers with "
        f"'{entry.combine}'; a loss must merge with 'mean' or 'sum' (see "
        f"MultiTowerStrategy's loss_reduction and output_reductions)")
  flat = tree.flatten(variables)
  per_tower = []
  for loss, device in zip(entry.losses, entry.devices):
    with tf.device(device):
      per_tower.append(tape.gradient(loss, flat))
  out = []
  for i, var in enumerate(flat):
    grads = [g[i] for g in per_tower if g[i] is not None]
    if not grads:
      out.append(None)
      continue
    with tf.device(getattr(var, "device", None) or None):
      total = tf.add_n([tf.convert_to_tensor(g) for g in grads])
      if entry.combine == "mean":
        total = total / tf.cast(len(entry.losses), total.dtype)
    out.append(total)
  return tree.unflatten_as(variables, out)


def torch_gradients(loss, variables):
  """The torch mirror of `tf_gradients` (None for unused variables)."""
  import torch
  return torch.autograd.grad(loss, variables, allow_unused=True)
