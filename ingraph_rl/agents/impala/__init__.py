"""IMPALA: config, network and policy, actor, learner, and the one-machine
driver that runs actor threads against a learner."""

from ingraph_rl.agents.impala.actor import (DEFAULT_QUEUE_NAME, IMPALAActor,
                                            rollout_space)
from ingraph_rl.agents.impala.config import IMPALAConfig
from ingraph_rl.agents.impala.learner import IMPALALearner
from ingraph_rl.agents.impala.networks import (IMPALANetwork, IMPALAPolicy,
                                               make_network)

__all__ = ["DEFAULT_QUEUE_NAME", "IMPALAActor", "IMPALAConfig",
           "IMPALALearner", "IMPALANetwork", "IMPALAPolicy", "make_network",
           "rollout_space"]
