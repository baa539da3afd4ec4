"""Distributions: tensorflow-probability in TF, torch.distributions in the
torch mirror, behind one set of APIs (sample, deterministic, log_prob,
entropy, kl; the tanh-squashed Gaussian of SAC has no entropy or kl)."""

from ingraph_rl.components.distributions.categorical import Categorical
from ingraph_rl.components.distributions.distribution import Distribution
from ingraph_rl.components.distributions.gaussian import DiagGaussian, Normal
from ingraph_rl.components.distributions.squashed_gaussian import (
  SquashedGaussian,
)

__all__ = [
  "Categorical",
  "DiagGaussian",
  "Distribution",
  "Normal",
  "SquashedGaussian",
]
