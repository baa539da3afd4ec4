"""IMPALA: config, network and policy, actor and learner components, and
the builder that declares its roots and spaces once (runners build IMPALA
through `IMPALABuilder`)."""

from ingraph_rl.agents.impala.actor import IMPALAActor
from ingraph_rl.agents.impala.builder import DEFAULT_QUEUE_NAME, IMPALABuilder
from ingraph_rl.agents.impala.config import IMPALAConfig
from ingraph_rl.agents.impala.learner import IMPALALearner
from ingraph_rl.agents.impala.networks import (
  IMPALANetwork,
  IMPALAPolicy,
  make_network,
)

__all__ = [
  "DEFAULT_QUEUE_NAME",
  "IMPALAActor",
  "IMPALABuilder",
  "IMPALAConfig",
  "IMPALALearner",
  "IMPALANetwork",
  "IMPALAPolicy",
  "make_network",
]
