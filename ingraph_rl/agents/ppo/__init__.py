"""PPO (and A2C, a config choice): config, actor-critic networks, the agent
root with its in-graph rollout and one-call update, and its builder."""

from ingraph_rl.agents.ppo.agent import PPOAgent, PPOModel
from ingraph_rl.agents.ppo.builder import LOOP_APIS, TRAIN_APIS, PPOBuilder
from ingraph_rl.agents.ppo.config import PPOConfig
from ingraph_rl.agents.ppo.networks import (
  ActorCritic,
  Orthogonal,
  make_distribution,
)
from ingraph_rl.agents.ppo.normalization import RunningMeanStd

__all__ = [
  "ActorCritic",
  "LOOP_APIS",
  "Orthogonal",
  "PPOAgent",
  "PPOBuilder",
  "PPOConfig",
  "PPOModel",
  "RunningMeanStd",
  "TRAIN_APIS",
  "make_distribution",
]
