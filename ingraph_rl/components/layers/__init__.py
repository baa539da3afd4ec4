"""Layers: one tensor in, one tensor out, with TF and torch bodies."""

from ingraph_rl.components.layers.conv2d import Conv2D
from ingraph_rl.components.layers.dense import Dense
from ingraph_rl.components.layers.flatten import Flatten

# Names usable in a NeuralNetwork list spec: {"type": "dense", ...}.
LAYER_TYPES = {"dense": Dense, "conv2d": Conv2D, "flatten": Flatten}

__all__ = ["Conv2D", "Dense", "Flatten", "LAYER_TYPES"]
