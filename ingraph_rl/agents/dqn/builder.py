"""DQN's builder: the agent root, its API lists, input spaces, record
space and weights space, declared once.

    >>> from ingraph_rl.environments import make_vector_env
    >>> env = make_vector_env("CartPole-v1", num_envs=4)
    >>> builder = DQNBuilder(DQNConfig(num_actions=2))
    >>> executor = builder.make_agent(env=env).build()
    >>> _ = executor.execute("reset_env", 0)
    >>> stats = executor.execute("train", 200)   # 200 vector steps, 1 call
    >>> int(stats["env_steps"])
    800

The root (`runners.builder.Root`) is ONE `DQNAgent` that acts and learns:
  TRAIN_APIS  get_actions, observe, update, sync_target, get_weights,
              get_train_step (the agent without an env: fed from outside,
              an exported agent);
  LOOP_APIS   reset_env, train: the in-graph training loop, with an env.
Spaces:
  input_spaces   the root APIs' arguments (states, actions, rewards,
                 next_states, terminals, [truncated with n-step or
                 frame_stack_replay], explore, num_steps, seed).
  record_space   one transition as the replay memory stores or (with
                 frame_stack_replay) samples it ("discounts" with n-step
                 returns or frame_stack_replay).
  weights_space  `get_weights()`: the online Q-network's variables by path.
"""

from typing import Any, Callable, List, Optional, Tuple, cast
from typing import Dict as TypingDict

import numpy as np

from ingraph_rl.agents.dqn.agent import DQNAgent
from ingraph_rl.agents.dqn.config import DQNConfig
from ingraph_rl.agents.dqn.networks import QNetwork
from ingraph_rl.core import Component, api
from ingraph_rl.environments import VectorEnv
from ingraph_rl.runners.builder import Root, weights_space_of
from ingraph_rl.spaces import BoolBox, Dict, FloatBox, IntBox, Space

TRAIN_APIS = (
  "get_actions",
  "observe",
  "update",
  "sync_target",
  "get_weights",
  "get_train_step",
)
LOOP_APIS = ("reset_env", "train")


class _OnlineNetwork(Component):
  """The agent's preprocessing and online Q-network alone, with the
  agent's paths (for the weights space, without a replay memory)."""

  def __init__(self, config: DQNConfig, preprocessor: Optional[Any]) -> None:
    super().__init__(scope="dqn")
    self.preprocessor = preprocessor
    self.online = QNetwork.from_config(config, "online")

  @api
  def call(self, states: Any) -> Any:
    if self.preprocessor is not None:
      states = self.preprocessor.call(states)
    return self.online.call(states)

  @api
  def get_weights(self) -> Any:
    return self.online.variables()


class DQNBuilder:
  """The roots and spaces of a `DQNConfig`.

  preprocessor: makes the agent's observation preprocessor (a new
    component per root, e.g. `lambda: PreprocessorStack(Cast("float32"),
    Divide(255.0))` for Atari frames), or None.
  """

  name = "dqn"

  def __init__(
    self,
    config: DQNConfig,
    preprocessor: Optional[Callable[[], Component]] = None,
  ) -> None:
    if not isinstance(config, DQNConfig):
      raise TypeError(
        f"DQNBuilder needs a DQNConfig, got {type(config).__name__}"
      )
    self.config = config
    self.preprocessor = preprocessor
    self._weights_spaces: List[Tuple[Space, Dict]] = []

  def _preprocessor(self) -> Optional[Component]:
    return None if self.preprocessor is None else self.preprocessor()

  # --- spaces ---------------------------------------------------------------

  def input_spaces(self, observation_space: Space) -> TypingDict[str, Space]:
    """The spaces of the root APIs' arguments, by name."""
    states = observation_space.with_batch_rank()
    spaces = {
      "states": states,
      "next_states": states,
      "actions": IntBox(
        self.config.num_actions, dtype=np.int64, add_batch_rank=True
      ),
      "rewards": FloatBox(add_batch_rank=True),
      "terminals": BoolBox(add_batch_rank=True),
      "explore": BoolBox(),
      "num_steps": IntBox(1000, low=1),
      "seed": IntBox(1 << 30),
    }
    if self.config.n_step > 1 or self.config.frame_stack_replay:
      # Only n-step and frame-stack replay need to know where episodes
      # were cut short.
      spaces["truncated"] = BoolBox(add_batch_rank=True)
    return spaces

  def record_space(self, observation_space: Space) -> Dict:
    """One transition as the replay memory stores it, or with
    frame_stack_replay samples it (n-step: the n-step return in "rewards";
    the bootstrap discount in "discounts")."""
    fields: TypingDict[str, Space] = dict(
      states=observation_space,
      actions=IntBox(self.config.num_actions, dtype=np.int64),
      rewards=FloatBox(),
      next_states=observation_space,
      terminals=BoolBox(),
    )
    if self.config.n_step > 1 or self.config.frame_stack_replay:
      fields["discounts"] = FloatBox()
    return Dict(fields)

  def weights_space(self, observation_space: Space) -> Dict:
    """The space of `get_weights()` (the online network's variables by
    path), from a build of the preprocessing and online network alone
    (cached per observation space)."""
    for space, weights in self._weights_spaces:
      if space == observation_space:
        return weights
    from ingraph_rl.executors.tensorflow import TFExecutor

    executor = TFExecutor(
      _OnlineNetwork(self.config, self._preprocessor()),
      {"states": observation_space.with_batch_rank()},
      api_names=["call", "get_weights"],
      seed=self.config.seed,
    )
    weights = weights_space_of(executor.execute("get_weights"))
    self._weights_spaces.append((observation_space, weights))
    return weights

  # --- roots ----------------------------------------------------------------

  def make_agent(
    self,
    observation_space: Optional[Space] = None,
    env: Optional[VectorEnv] = None,
    optimizer: Optional[Component] = None,
  ) -> Root:
    """The `DQNAgent` root: TRAIN_APIS, and with `env` (any `VectorEnv`;
    with `env_groups` > 1 a `GroupedVectorEnv` of that many groups) also
    LOOP_APIS; `observation_space` defaults to the env's. `optimizer`: an
    optimizer of the callable form in place of Adam (see `DQNAgent`)."""
    if observation_space is None:
      if env is None:
        raise ValueError("make_agent needs an observation space or an env")
      observation_space = cast(Space, env.observation_space)
    agent = DQNAgent(
      self.config,
      env,
      preprocessor=self._preprocessor(),
      observation_space=observation_space,
      optimizer=optimizer,
    )
    apis = TRAIN_APIS + (LOOP_APIS if env is not None else ())
    return Root(
      agent, self.input_spaces(observation_space), apis, seed=self.config.seed
    )
