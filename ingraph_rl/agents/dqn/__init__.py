"""DQN: config, Q-networks, the agent with an in-graph training loop, and
the builder that declares its root and spaces once."""

from ingraph_rl.agents.dqn.agent import DQNAgent
from ingraph_rl.agents.dqn.builder import DQNBuilder
from ingraph_rl.agents.dqn.config import DQNConfig
from ingraph_rl.agents.dqn.networks import QNetwork, TargetQNetwork

__all__ = ["DQNAgent", "DQNBuilder", "DQNConfig", "QNetwork", "TargetQNetwork"]
