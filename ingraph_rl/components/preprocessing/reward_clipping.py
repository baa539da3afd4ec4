"""Reward clipping as in IMPALA (deepmind/scalable_agent, experiment.py)."""

import tensorflow as tf

from ingraph_rl.components.preprocessing._common import check_inputs
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError
from ingraph_rl.utils.lazy import torch

MODES = ("abs_one", "soft_asymmetric")


class RewardClipping(Component):
  """mode "abs_one": clip to [-1, 1].
  mode "soft_asymmetric": squeezed = tanh(r / 5), then
  `where(r < 0, .3 * squeezed, squeezed) * 5.` (scalable_agent's
  definition: negative rewards get less weight, |result| < 5).
  Floating rewards, dtype kept; any batch/time ranks."""

  def __init__(self, mode="abs_one", scope="reward_clipping"):
    super().__init__(scope=scope)
    if mode not in MODES:
      raise BuildError(f"'{scope}': mode must be one of {MODES}, got {mode!r}")
    self.mode = mode

  def create_variables(self, input_spaces):
    check_inputs(self, input_spaces, kinds="f")

  @api
  def call(self, inputs):
    return self._graph_fn_call(inputs)

  @graph_fn
  def _graph_fn_call(self, inputs):
    if self.mode == "abs_one":
      return tf.clip_by_value(inputs, -1.0, 1.0)
    squeezed = tf.tanh(inputs / 5.0)
    return tf.where(inputs < 0, 0.3 * squeezed, squeezed) * 5.0

  @_graph_fn_call.torch
  def _graph_fn_call(self, inputs):
    if self.mode == "abs_one":
      return torch.clamp(inputs, -1.0, 1.0)
    squeezed = torch.tanh(inputs / 5.0)
    return torch.where(inputs < 0, 0.3 * squeezed, squeezed) * 5.0
