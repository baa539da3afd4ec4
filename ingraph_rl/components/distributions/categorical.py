"""Categorical distribution over the last axis of a logits tensor."""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from ingraph_rl.components.distributions.distribution import Distribution
from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import FloatBox, IntBox
from ingraph_rl.utils.lazy import torch


class Categorical(Distribution):
  """`parameters`: logits, FloatBox of per-item shape (..., K) (any leading
  ranks); `values`: IntBox of the logits' shape without K. Samples and the
  argmax are int64 in [0, K).

      >>> from ingraph_rl.executors.tensorflow import TFExecutor
      >>> ex = TFExecutor(Categorical(), {
      ...     "parameters": FloatBox((3,), add_batch_rank=True),
      ...     "values": IntBox(3, add_batch_rank=True),
      ...     "other_parameters": FloatBox((3,), add_batch_rank=True)})
      >>> ex.execute("deterministic", np.array([[0., 2., 1.]], np.float32))
      <tf.Tensor: shape=(1,), dtype=int64, numpy=array([1])>
  """

  def __init__(self, seed=0, scope="categorical"):
    super().__init__(seed=seed, scope=scope)

  def _check_spaces(self, input_spaces):
    logits = self.expect_space(input_spaces, "parameters", FloatBox, min_rank=1)
    self.num_categories = logits.shape[-1]
    if "other_parameters" in input_spaces:
      other = self.expect_space(
        input_spaces, "other_parameters", FloatBox, min_rank=1
      )
      if other.shape != logits.shape:
        raise SpaceError(
          "shape differs from 'parameters'",
          api="kl",
          argument="other_parameters",
          expected=repr(logits),
          received=repr(other),
        )
    if "values" in input_spaces:
      values = self.expect_space(input_spaces, "values", IntBox)
      if values.shape != logits.shape[:-1]:
        raise SpaceError(
          "values need the logits' shape without the last axis",
          api="log_prob",
          argument="values",
          expected=f"per-item shape {logits.shape[:-1]}",
          received=repr(values),
        )

  def _sample_space(self):
    shape = self.input_spaces["parameters"].shape[:-1]
    return IntBox(
      self.num_categories, shape=shape, dtype=np.int64, **self._ranks()
    )

  def _tf_distribution(self, parameters):
    return tfp.distributions.Categorical(logits=parameters, dtype=tf.int64)

  def _tf_deterministic(self, d):
    return tf.argmax(d.logits, axis=-1, output_type=tf.int64)

  def _torch_distribution(self, parameters):
    return torch.distributions.Categorical(
      logits=parameters, validate_args=False
    )

  def _torch_deterministic(self, d):
    return d.logits.argmax(-1)

  def _torch_sample(self, d, generator):
    probs = d.probs
    flat = probs.reshape(-1, probs.shape[-1])
    draws = torch.multinomial(flat, 1, generator=generator)
    return draws.reshape(probs.shape[:-1])

  def _torch_values(self, values):
    return values.long()
