"""A tanh-squashed diagonal Gaussian over a box of actions (SAC's policy
distribution), with the log-prob correction of the squashing."""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from ingraph_rl.components.distributions.gaussian import DiagGaussian
from ingraph_rl.core import api, graph_fn
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.executors.checks import tf_draw, torch_draw
from ingraph_rl.spaces import FloatBox
from ingraph_rl.utils.lazy import torch


class SquashedGaussian(DiagGaussian):
  """`y = tanh(u) * scale + shift`, `u ~ N(mean, exp(log_std))` diagonal
  over the last axis; `scale = (high - low) / 2`, `shift = (high + low) /
  2` map tanh's (-1, 1) onto the action box. Parameters as `DiagGaussian`'s
  (a `Tuple(mean, log_std)` or one FloatBox `[mean, log_std]` halves).

      log p(y) = log N(u; mean, std) - sum log(scale * (1 - tanh(u)^2))

  with `log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))`, stable for
  large |u| (TFP's `Tanh` bijector and torch's `TanhTransform` agree).

  APIs: `sample`, `deterministic` (`tanh(mean) * scale + shift`),
  `log_prob(parameters, values)` (values inside the open box; its inverse
  is atanh), and
    sample_with_log_prob(parameters) -> {"actions", "log_prob"}: one
      reparameterized draw (gradients reach the parameters) and its log
      prob from the pre-squash value, never through atanh; the generator
      advances only if the calling API succeeds (`checks.tf_draw`);
    squash(parameters, noise) -> {"actions", "log_prob"}: the same for a
      given standard-normal `noise` (deterministic; for tests).
  No `entropy` and `kl`: the squashed Gaussian has no closed form.
  """

  entropy = None  # No closed form: not APIs of this distribution.
  kl = None

  def __init__(self, low=-1.0, high=1.0, seed=0, scope="squashed_gaussian"):
    super().__init__(seed=seed, scope=scope)
    low = np.asarray(low, np.float32)
    high = np.asarray(high, np.float32)
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))) or not (
      np.all(high > low)
    ):
      raise BuildError(
        f"'{scope}': a squashed Gaussian needs a finite box with high > "
        f"low, got low={low.tolist()} high={high.tolist()}"
      )
    self.scale = (high - low) / 2.0
    self.shift = (high + low) / 2.0

  def _check_spaces(self, input_spaces):
    super()._check_spaces(input_spaces)
    dim = self.mean_space.shape[-1]
    if self.scale.size not in (1, dim):
      raise SpaceError(
        "the action box's bounds do not fit the mean's last axis",
        component=self.path,
        argument="parameters",
        expected=f"{self.scale.size} action dims",
        received=f"mean of per-item shape {self.mean_space.shape}",
      )
    # One bound per dim: torch's AffineTransform sums log|scale| over the
    # scale's own shape.
    self.scale = np.broadcast_to(self.scale, (dim,)).copy()
    self.shift = np.broadcast_to(self.shift, (dim,)).copy()
    if "noise" in input_spaces:
      noise = self.expect_space(input_spaces, "noise", FloatBox)
      if noise.shape != self.mean_space.shape:
        raise SpaceError(
          "noise needs the shape of the mean",
          component=self.path,
          api="squash",
          argument="noise",
          expected=f"per-item shape {self.mean_space.shape}",
          received=repr(noise),
        )

  # --- APIs ------------------------------------------------------------------

  @api
  def sample_with_log_prob(self, parameters):
    return self._graph_fn_sample_with_log_prob(parameters)

  @api
  def squash(self, parameters, noise):
    return self._graph_fn_squash(parameters, noise)

  # --- TF --------------------------------------------------------------------

  def _tf_bijector(self):
    b = tfp.bijectors
    return b.Chain([b.Shift(self.shift), b.Scale(self.scale), b.Tanh()])

  def _tf_distribution(self, parameters):
    return tfp.distributions.TransformedDistribution(
      super()._tf_distribution(parameters), self._tf_bijector()
    )

  def _tf_sample(self, d, seed):
    # The base's draw (mean + std * noise, as the torch mirror's), squashed.
    base = d.distribution
    mean = base.mean()
    noise = tf.random.stateless_normal(tf.shape(mean), seed, dtype=mean.dtype)
    return self._tf_bijector().forward(mean + base.stddev() * noise)

  def _tf_deterministic(self, d):
    return self._tf_bijector().forward(d.distribution.mean())

  def _tf_squash(self, parameters, noise):
    mean, log_std = self._tf_split(parameters)
    u = mean + tf.exp(log_std) * noise
    base = DiagGaussian._tf_distribution(self, parameters)
    bijector = self._tf_bijector()
    return {
      "actions": bijector.forward(u),
      "log_prob": base.log_prob(u)
      - bijector.forward_log_det_jacobian(u, event_ndims=1),
    }

  @graph_fn
  def _graph_fn_sample_with_log_prob(self, parameters):
    mean, _ = self._tf_split(parameters)
    # The generator advances only if the whole call succeeds.
    noise = tf_draw(
      self.rng,
      lambda seed: tf.random.stateless_normal(
        tf.shape(mean), seed, dtype=mean.dtype
      ),
    )
    return self._tf_squash(parameters, noise)

  @graph_fn
  def _graph_fn_squash(self, parameters, noise):
    return self._tf_squash(parameters, noise)

  # --- torch -----------------------------------------------------------------

  def _torch_transforms(self, like):
    t = torch.distributions.transforms
    scale = torch.as_tensor(self.scale, dtype=like.dtype)
    shift = torch.as_tensor(self.shift, dtype=like.dtype)
    return [t.TanhTransform(), t.AffineTransform(shift, scale, event_dim=1)]

  def _torch_distribution(self, parameters):
    base = super()._torch_distribution(parameters)
    return torch.distributions.TransformedDistribution(
      base, self._torch_transforms(base.mean), validate_args=False
    )

  def _torch_deterministic(self, d):
    y = d.base_dist.mean
    for transform in d.transforms:
      y = transform(y)
    return y

  def _torch_sample(self, d, generator):
    base = d.base_dist.base_dist
    noise = torch.randn(
      base.loc.shape, generator=generator, dtype=base.loc.dtype
    )
    return self._torch_squash_base(d.base_dist, noise)["actions"]

  def _torch_squash_base(self, base, noise):
    tanh, affine = self._torch_transforms(base.mean)
    u = base.mean + base.stddev * noise
    squashed = tanh(u)
    log_det = tanh.log_abs_det_jacobian(u, squashed).sum(-1)
    actions = affine(squashed)
    log_det = log_det + affine.log_abs_det_jacobian(squashed, actions)
    return {"actions": actions, "log_prob": base.log_prob(u) - log_det}

  def _torch_squash(self, parameters, noise):
    return self._torch_squash_base(
      DiagGaussian._torch_distribution(self, parameters), noise
    )

  @_graph_fn_sample_with_log_prob.torch
  def _graph_fn_sample_with_log_prob(self, parameters):
    mean, _ = self._torch_split(parameters)
    noise = torch_draw(
      self.rng, lambda g: torch.randn(mean.shape, generator=g, dtype=mean.dtype)
    )
    return self._torch_squash(parameters, noise)

  @_graph_fn_squash.torch
  def _graph_fn_squash(self, parameters, noise):
    return self._torch_squash(parameters, noise)
