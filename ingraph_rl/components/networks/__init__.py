"""Networks: stacks of layers."""

from ingraph_rl.components.networks.neural_network import (NeuralNetwork,
                                                           layer_from_spec)

__all__ = ["NeuralNetwork", "layer_from_spec"]
