"""Activation functions by name, with their TF and torch versions."""

import tensorflow as tf

from ingraph_rl.errors import BuildError
from ingraph_rl.utils.lazy import F, torch

_ACTIVATIONS = {
  None: (lambda x: x, lambda x: x),
  "linear": (lambda x: x, lambda x: x),
  "relu": (tf.nn.relu, lambda x: F.relu(x)),
  "tanh": (tf.tanh, lambda x: torch.tanh(x)),
  "sigmoid": (tf.sigmoid, lambda x: torch.sigmoid(x)),
  "elu": (tf.nn.elu, lambda x: F.elu(x)),
  "softplus": (tf.nn.softplus, lambda x: F.softplus(x)),
}


def check_activation(name, component):
  if name not in _ACTIVATIONS:
    raise BuildError(
      f"'{component}': unknown activation {name!r}; known: "
      f"{sorted(k for k in _ACTIVATIONS if k)}"
    )
  return name


def tf_activation(name):
  return _ACTIVATIONS[name][0]


def torch_activation(name):
  return _ACTIVATIONS[name][1]
