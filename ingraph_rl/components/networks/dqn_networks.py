"""The Nature-DQN torso (Mnih et al. 2015)."""

from ingraph_rl.components.networks.neural_network import NeuralNetwork

NATURE_DQN_SPEC = (
  {
    "type": "conv2d",
    "filters": 32,
    "kernel_size": 8,
    "strides": 4,
    "activation": "relu",
  },
  {
    "type": "conv2d",
    "filters": 64,
    "kernel_size": 4,
    "strides": 2,
    "activation": "relu",
  },
  {
    "type": "conv2d",
    "filters": 64,
    "kernel_size": 3,
    "strides": 1,
    "activation": "relu",
  },
  {"type": "flatten"},
  {"type": "dense", "units": 512, "activation": "relu"},
)


def nature_dqn_network(compute_dtype=None, scope="nature_dqn"):
  """conv 32x8x8/4 -> conv 64x4x4/2 -> conv 64x3x3/1 (relu, 'valid') ->
  flatten -> fc 512 relu, as a `NeuralNetwork` (layer scopes `conv2d_0`,
  `conv2d_1`, `conv2d_2`, `flatten_3`, `dense_4`).

  It takes float images [..., H, W, C]; casting uint8 frames (and scaling
  by 1/255) is the caller's preprocessing. On 84x84x4 the flattened
  features are 7*7*64 = 3136 and the output is 512.
  """
  return NeuralNetwork([dict(spec) for spec in NATURE_DQN_SPEC], scope=scope)
