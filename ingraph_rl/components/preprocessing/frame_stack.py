"""Stateful frame stacking with per-environment resets."""

import numpy as np
import tensorflow as tf

from ingraph_rl import spaces as sp
from ingraph_rl.components.preprocessing._common import check_inputs
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.executors.checks import (
  tf_check,
  tf_leading_sizes,
  torch_check,
)
from ingraph_rl.utils.lazy import torch


def _output_space(component):
  kind = sp.FloatBox if component.dtype.kind == "f" else sp.IntBox
  kwargs = dict(
    shape=component.frame_shape + (component.num_frames,),
    dtype=component.dtype,
    add_batch_rank=True,
  )
  return kind(**kwargs)


class FrameStack(Component):
  """The last `num_frames` frames of each of `num_envs` environments.

  State: a variable `stack` [num_envs, H, W, num_frames] in the frames'
  dtype (uint8 stays uint8), oldest frame first, newest last.

  API `call(inputs, resets)`:
    inputs: the newest frame of every environment, [num_envs, H, W] or
      [num_envs, H, W, 1].
    resets: bool [num_envs]; True where the frame starts an episode. That
      environment's stack is then filled with the new frame, as gymnasium
      1.x's `FrameStackObservation` does with its default
      padding_type="reset" (its reset observation is repeated). Elsewhere
      the stack shifts by one and the frame is appended.
    Returns the new stacks [num_envs, H, W, num_frames].

  The stack starts as zeros: pass resets=True for every environment's
  first frame (a frame without reset before is stacked after zeros,
  gymnasium's padding_type="zero").

  A leading dim other than num_envs is a SpaceError (an in-graph check).
  """

  def __init__(self, num_frames=4, num_envs=1, scope="frame_stack"):
    super().__init__(scope=scope)
    self.num_frames, self.num_envs = int(num_frames), int(num_envs)
    if self.num_frames < 1 or self.num_envs < 1:
      raise BuildError(
        f"'{scope}': num_frames and num_envs must be >= 1, "
        f"got {num_frames} and {num_envs}"
      )

  def create_variables(self, input_spaces):
    space = check_inputs(
      self, input_spaces, kinds="fiu", ranks=(2, 3), time_rank=False
    )
    if space.rank == 3 and space.shape[-1] != 1:
      raise SpaceError(
        "frames must be [H, W] or [H, W, 1]",
        component=self.path,
        api="call",
        argument="inputs",
        received=repr(space),
      )
    resets = input_spaces.get("resets")
    if not (
      isinstance(resets, sp.BoolBox)
      and resets.has_batch_rank
      and not resets.has_time_rank
      and resets.rank == 0
    ):
      raise SpaceError(
        "resets must be a bool per environment",
        component=self.path,
        api="call",
        argument="resets",
        expected="BoolBox(shape=(), batch)",
        received=repr(resets),
      )
    self.frame_shape = tuple(space.shape[:2])
    self.has_channel = space.rank == 3
    self.dtype = np.dtype(space.dtype)
    self.stack = self.add_variable(
      "stack",
      (self.num_envs,) + self.frame_shape + (self.num_frames,),
      self.dtype,
      "zeros",
      trainable=False,
    )

  @api
  def call(self, inputs, resets):
    return self._graph_fn_call(inputs, resets)

  @graph_fn(output_space=_output_space)
  def _graph_fn_call(self, inputs, resets):
    frames = inputs[..., 0] if self.has_channel else inputs
    ok = tf.reduce_all(
      tf.equal(tf_leading_sizes([frames, resets]), self.num_envs)
    )
    with tf.control_dependencies(
      [
        tf_check(
          ok,
          self,
          "call",
          "inputs",
          f"inputs and resets need a leading dim of num_envs={self.num_envs}",
        )
      ]
    ):
      frames = tf.identity(frames)
    new = frames[..., None]
    shifted = tf.concat([self.stack[..., 1:], new], axis=-1)
    filled = tf.tile(new, [1, 1, 1, self.num_frames])
    stack = tf.where(resets[:, None, None, None], filled, shifted)
    self.stack.assign(stack)
    return tf.identity(stack)

  @_graph_fn_call.torch
  def _graph_fn_call(self, inputs, resets):
    frames = inputs[..., 0] if self.has_channel else inputs
    n = frames.shape[0]
    ok = n == self.num_envs and resets.shape[0] == self.num_envs
    torch_check(
      ok,
      self,
      "call",
      "inputs",
      f"inputs and resets need a leading dim of num_envs={self.num_envs}",
    )
    new = frames[..., None]
    filled = new.expand(-1, -1, -1, self.num_frames)
    if not ok:
      # Only in the torch executor's build passes (batch sizes 2 and 5):
      # the output's shape, without touching the state.
      return filled.clone()
    shifted = torch.cat([self.stack[..., 1:], new], dim=-1)
    stack = torch.where(resets[:, None, None, None], filled, shifted)
    with torch.no_grad():
      self.stack.copy_(stack)
    return stack.clone()
