"""Layers: one tensor in, one tensor out, with TF and torch bodies (the LSTM
also takes and returns its state)."""

from ingraph_rl.components.layers.conv2d import Conv2D
from ingraph_rl.components.layers.dense import Dense
from ingraph_rl.components.layers.embedding import Embedding
from ingraph_rl.components.layers.flatten import Flatten
from ingraph_rl.components.layers.lstm import LSTM
from ingraph_rl.components.layers.max_pool import MaxPool2D
from ingraph_rl.components.layers.residual_block import ResidualBlock

# Names usable in a NeuralNetwork list spec: {"type": "dense", ...}. The LSTM
# is not one: its API takes a state as well.
LAYER_TYPES = {
  "dense": Dense,
  "conv2d": Conv2D,
  "flatten": Flatten,
  "max_pool2d": MaxPool2D,
  "residual_block": ResidualBlock,
}

__all__ = [
  "Conv2D",
  "Dense",
  "Embedding",
  "Flatten",
  "LSTM",
  "MaxPool2D",
  "ResidualBlock",
  "LAYER_TYPES",
]
