"""Ape-X (Horgan et al., 2018): distributed prioritized replay, in graph.

Actors (`ApexActor`) compute initial priorities where the data is, replay
shards (`ReplayShard`) sample and update priorities in their own graphs,
and the learner (`ApexLearner`) never touches a Python buffer. Build the
roots through `ApexBuilder`.
"""

from ingraph_rl.agents.apex.actor import ApexActor, ApexPolicy
from ingraph_rl.agents.apex.agent import ApexAgent
from ingraph_rl.agents.apex.builder import ApexBuilder
from ingraph_rl.agents.apex.config import ApexConfig
from ingraph_rl.agents.apex.learner import ApexLearner
from ingraph_rl.agents.apex.q_learning import QLearning
from ingraph_rl.agents.apex.queues import ReplayQueues
from ingraph_rl.agents.apex.shard import ReplayShard

__all__ = [
  "ApexActor",
  "ApexAgent",
  "ApexPolicy",
  "ApexBuilder",
  "ApexConfig",
  "ApexLearner",
  "QLearning",
  "ReplayQueues",
  "ReplayShard",
]
