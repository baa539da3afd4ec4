"""Networks: stacks of layers, and the standard Atari networks."""

from ingraph_rl.components.networks.dqn_networks import (
  NATURE_DQN_SPEC,
  nature_dqn_network,
)
from ingraph_rl.components.networks.dueling_head import DuelingHead
from ingraph_rl.components.networks.impala_networks import (
  IMPALA_STAGES,
  ImpalaDeepTorso,
  ImpalaLargeNetwork,
  ImpalaSmallNetwork,
)
from ingraph_rl.components.networks.instruction_encoder import (
  InstructionEncoder,
  InstructionTokenizer,
)
from ingraph_rl.components.networks.neural_network import (
  NeuralNetwork,
  layer_from_spec,
)

__all__ = [
  "DuelingHead",
  "IMPALA_STAGES",
  "ImpalaDeepTorso",
  "ImpalaLargeNetwork",
  "ImpalaSmallNetwork",
  "InstructionEncoder",
  "InstructionTokenizer",
  "NATURE_DQN_SPEC",
  "NeuralNetwork",
  "layer_from_spec",
  "nature_dqn_network",
]
