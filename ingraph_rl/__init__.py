"""ingraph_rl: reinforcement learning where every part runs in the graph."""

__version__ = "0.1.0"
