"""Gaussians parameterized by mean and log standard deviation."""

import numpy as np  # noqa: F401 (docstring examples)
import tensorflow as tf
import tensorflow_probability as tfp

from ingraph_rl.components.distributions.distribution import Distribution
from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import FloatBox, Tuple
from ingraph_rl.utils.lazy import torch


class _Gaussian(Distribution):
  """Parameters are either a `Tuple(mean, log_std)` of equal FloatBoxes or
  one FloatBox of per-item shape (..., 2 d) split in half along the last
  axis: `[mean, log_std]`. The standard deviation is `exp(log_std)`."""

  def _check_spaces(self, input_spaces):
    # `parameters` goes to every API: the builder names one.
    event = self._event_space(input_spaces, "parameters", None)
    self.mean_space = event
    if "other_parameters" in input_spaces:
      other = self._event_space(input_spaces, "other_parameters", "kl")
      if other.shape != event.shape:
        raise SpaceError(
          "the mean's shape differs from that of 'parameters'",
          api="kl",
          argument="other_parameters",
          expected=f"per-item mean shape {event.shape}",
          received=f"per-item mean shape {other.shape}",
        )
    if "values" in input_spaces:
      values = self.expect_space(input_spaces, "values", FloatBox)
      if values.shape != event.shape:
        raise SpaceError(
          "values need the shape of the mean",
          api="log_prob",
          argument="values",
          expected=f"per-item shape {event.shape}",
          received=repr(values),
        )

  def _event_space(self, input_spaces, arg, api_name):
    """The space of the mean (checking the parameter space)."""
    space = self.expect_space(input_spaces, arg, (FloatBox, Tuple))
    if isinstance(space, Tuple):
      parts = [s for _, s in space.flatten()]
      if (
        len(space) != 2
        or len(parts) != 2
        or not all(isinstance(s, FloatBox) for s in parts)
        or parts[0].shape != parts[1].shape
      ):
        raise SpaceError(
          "a (mean, log_std) Tuple needs two FloatBoxes of one shape",
          api=api_name,
          argument=arg,
          received=repr(space),
        )
      mean = parts[0]
    else:
      if space.rank < 1 or space.shape[-1] is None or space.shape[-1] % 2:
        raise SpaceError(
          "a single parameter tensor needs an even last dim "
          "(mean and log_std halves)",
          api=api_name,
          argument=arg,
          received=repr(space),
        )
      mean = FloatBox(
        space.shape[:-1] + (space.shape[-1] // 2,), dtype=space.dtype
      )
    if self.min_event_rank and mean.rank < self.min_event_rank:
      raise SpaceError(
        f"the mean needs per-item rank >= {self.min_event_rank}",
        api=api_name,
        argument=arg,
        received=repr(space),
      )
    return mean

  min_event_rank = 0

  def _sample_space(self):
    return FloatBox(
      self.mean_space.shape, dtype=self.mean_space.dtype, **self._ranks()
    )

  @staticmethod
  def _tf_split(parameters):
    if isinstance(parameters, (tuple, list)):
      return parameters[0], parameters[1]
    mean, log_std = tf.split(parameters, 2, axis=-1)
    return mean, log_std

  @staticmethod
  def _torch_split(parameters):
    if isinstance(parameters, (tuple, list)):
      return parameters[0], parameters[1]
    mean, log_std = parameters.chunk(2, dim=-1)
    return mean, log_std

  def _tf_deterministic(self, d):
    return d.mean()

  def _torch_deterministic(self, d):
    return d.mean

  def _tf_sample(self, d, seed):
    # mean + std * noise, as the torch mirror draws: TFP's
    # MultivariateNormalDiag.sample divides by the batch size and fails on
    # an empty batch.
    mean = d.mean()
    noise = tf.random.stateless_normal(tf.shape(mean), seed, dtype=mean.dtype)
    return mean + d.stddev() * noise

  def _torch_sample(self, d, generator):
    mean, std = self._torch_loc_scale(d)
    noise = torch.randn(mean.shape, generator=generator, dtype=mean.dtype)
    return mean + std * noise


class Normal(_Gaussian):
  """Independent univariate normals, elementwise: `log_prob`, `entropy`
  and `kl` have the mean's shape (nothing is summed).

      >>> from ingraph_rl.executors.tensorflow import TFExecutor
      >>> ex = TFExecutor(Normal(), {"parameters": FloatBox((4,))},
      ...                 api_names=["deterministic", "entropy"])
      >>> ex.execute("deterministic", np.array([0.5, -1., 0., 0.], np.float32))
      <tf.Tensor: shape=(2,), dtype=float32, numpy=array([ 0.5, -1. ], ...)>
  """

  def __init__(self, seed=0, scope="normal"):
    super().__init__(seed=seed, scope=scope)

  def _tf_distribution(self, parameters):
    mean, log_std = self._tf_split(parameters)
    return tfp.distributions.Normal(mean, tf.exp(log_std))

  def _torch_distribution(self, parameters):
    mean, log_std = self._torch_split(parameters)
    return torch.distributions.Normal(
      mean, torch.exp(log_std), validate_args=False
    )

  def _torch_loc_scale(self, d):
    return d.loc, d.scale


class DiagGaussian(_Gaussian):
  """A multivariate normal with diagonal covariance over the last axis of
  the mean (`tfp.distributions.MultivariateNormalDiag`, torch
  `Independent(Normal, 1)`): `log_prob`, `entropy` and `kl` sum over it.
  """

  min_event_rank = 1

  def __init__(self, seed=0, scope="diag_gaussian"):
    super().__init__(seed=seed, scope=scope)

  def _tf_distribution(self, parameters):
    mean, log_std = self._tf_split(parameters)
    return tfp.distributions.MultivariateNormalDiag(
      loc=mean, scale_diag=tf.exp(log_std)
    )

  def _torch_distribution(self, parameters):
    mean, log_std = self._torch_split(parameters)
    return _independent()(
      torch.distributions.Normal(mean, torch.exp(log_std), validate_args=False),
      1,
      validate_args=False,
    )

  def _torch_loc_scale(self, d):
    return d.base_dist.loc, d.base_dist.scale


_INDEPENDENT = []


def _independent():
  """torch's `Independent` whose log_prob and entropy also take an empty
  batch (torch's reshape to [0, -1] fails there); made once, on first use
  (torch is imported lazily)."""
  if not _INDEPENDENT:

    class Independent(torch.distributions.Independent):
      def log_prob(self, value):
        return self.base_dist.log_prob(value).sum(-1)

      def entropy(self):
        return self.base_dist.entropy().sum(-1)

    _INDEPENDENT.append(Independent)
  return _INDEPENDENT[0]
