"""`Distribution`: the shared APIs of parameterized distributions.

A distribution component holds no variables: every API takes the
distribution's parameters as a tensor (nest) and builds a
tensorflow-probability distribution in the TF body and its
`torch.distributions` mirror in the torch body.

APIs (fixed return structures, one tensor each):
  sample(parameters): a random draw per item (seeded by the component's own
    generator: reproducible per backend, not across backends).
  deterministic(parameters): the mode (argmax for Categorical, the mean for
    Gaussians).
  log_prob(parameters, values), entropy(parameters),
  kl(parameters, other_parameters): KL(p || q) with p from `parameters` and
    q from `other_parameters`.
"""

import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.utils.lazy import torch


class Distribution(Component):
  """Base class. Subclasses implement:

  _check_spaces(input_spaces): SpaceErrors for unusable spaces.
  _tf_distribution(parameters) / _torch_distribution(parameters).
  _tf_deterministic(d) / _torch_deterministic(d).
  _torch_sample(d, generator): torch.distributions' `sample` takes no
    generator, so the torch mirror draws with the component's own.
  _sample_space(): output space of `sample` / `deterministic` (declared,
    so that it carries the category bound).
  """

  variable_args = ("parameters",)

  def __init__(self, seed=0, scope=None):
    super().__init__(scope=scope)
    self.seed = seed

  def create_variables(self, input_spaces):
    self._check_spaces(input_spaces)
    self.rng = self.add_resource(
      "rng",
      tf=lambda: tf.random.Generator.from_seed(self.seed),
      torch=lambda: torch.Generator().manual_seed(self.seed),
    )

  def _check_spaces(self, input_spaces):
    raise NotImplementedError

  # --- APIs ------------------------------------------------------------------

  @api
  def sample(self, parameters):
    return self._graph_fn_sample(parameters)

  @api
  def deterministic(self, parameters):
    return self._graph_fn_deterministic(parameters)

  @api
  def log_prob(self, parameters, values):
    return self._graph_fn_log_prob(parameters, values)

  @api
  def entropy(self, parameters):
    return self._graph_fn_entropy(parameters)

  @api
  def kl(self, parameters, other_parameters):
    return self._graph_fn_kl(parameters, other_parameters)

  # --- TF bodies -------------------------------------------------------------

  def _sample_space(self):
    raise NotImplementedError

  def _ranks(self):
    """Leading-rank settings of the parameters (of their first leaf)."""
    leaf = self.input_spaces["parameters"].flatten()[0][1]
    return dict(
      add_batch_rank=leaf.has_batch_rank,
      add_time_rank=leaf.has_time_rank,
      time_major=leaf.time_major,
    )

  @graph_fn(output_space=lambda c: c._sample_space())
  def _graph_fn_sample(self, parameters):
    # tfp takes a stateless seed: draw a fresh one from the generator.
    seed = self.rng.uniform_full_int([2], dtype=tf.int32)
    return self._tf_sample(self._tf_distribution(parameters), seed)

  def _tf_sample(self, d, seed):
    """A draw of `d` with the stateless `seed`."""
    return d.sample(seed=seed)

  @graph_fn(output_space=lambda c: c._sample_space())
  def _graph_fn_deterministic(self, parameters):
    return self._tf_deterministic(self._tf_distribution(parameters))

  @graph_fn
  def _graph_fn_log_prob(self, parameters, values):
    d = self._tf_distribution(parameters)
    return d.log_prob(tf.cast(values, d.dtype))

  @graph_fn
  def _graph_fn_entropy(self, parameters):
    return self._tf_distribution(parameters).entropy()

  @graph_fn
  def _graph_fn_kl(self, parameters, other_parameters):
    return self._tf_distribution(parameters).kl_divergence(
      self._tf_distribution(other_parameters)
    )

  # --- torch bodies ----------------------------------------------------------

  @_graph_fn_sample.torch
  def _graph_fn_sample(self, parameters):
    return self._torch_sample(self._torch_distribution(parameters), self.rng)

  @_graph_fn_deterministic.torch
  def _graph_fn_deterministic(self, parameters):
    return self._torch_deterministic(self._torch_distribution(parameters))

  @_graph_fn_log_prob.torch
  def _graph_fn_log_prob(self, parameters, values):
    return self._torch_distribution(parameters).log_prob(
      self._torch_values(values)
    )

  @_graph_fn_entropy.torch
  def _graph_fn_entropy(self, parameters):
    return self._torch_distribution(parameters).entropy()

  @_graph_fn_kl.torch
  def _graph_fn_kl(self, parameters, other_parameters):
    return torch.distributions.kl_divergence(
      self._torch_distribution(parameters),
      self._torch_distribution(other_parameters),
    )

  def _torch_values(self, values):
    return values
