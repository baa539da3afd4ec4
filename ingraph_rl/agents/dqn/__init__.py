"""DQN: config, Q-networks, agent with an in-graph training loop."""

from ingraph_rl.agents.dqn.agent import DQNAgent
from ingraph_rl.agents.dqn.config import DQNConfig
from ingraph_rl.agents.dqn.networks import QNetwork, TargetQNetwork

__all__ = ["DQNAgent", "DQNConfig", "QNetwork", "TargetQNetwork"]
