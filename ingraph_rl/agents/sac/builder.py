"""SAC's builder: the agent root, its API lists and input spaces, declared
once.

    >>> from ingraph_rl.environments import make_vector_env
    >>> env = make_vector_env("Pendulum-v1", num_envs=1)
    >>> config = SACConfig.for_env(env, learning_starts=256, batch_size=64)
    >>> executor = SACBuilder(config).make_agent(env=env).build()
    >>> _ = executor.execute("reset_env", 0)
    >>> stats = executor.execute("train", 300)   # 300 env steps, 1 call
    >>> int(stats["env_steps"]), int(stats["updates"])
    (300, 44)

The root (`runners.builder.Root`) is ONE `SACAgent` that acts and learns:
  TRAIN_APIS  get_actions, observe, update_critic, update_actor,
              [update_alpha with autotune], sync_targets, copy_targets,
              update, get_weights, get_train_step (the agent without an env:
              fed from outside, an exported agent);
  LOOP_APIS   reset_env, train: the in-graph training loop, with an env.
"""

from typing import Dict as TypingDict
from typing import Optional, cast

import numpy as np

from ingraph_rl.agents.sac.agent import SACAgent
from ingraph_rl.agents.sac.config import SACConfig
from ingraph_rl.environments import VectorEnv
from ingraph_rl.errors import BuildError
from ingraph_rl.runners.builder import Root
from ingraph_rl.spaces import BoolBox, BoxSpace, FloatBox, IntBox, Space

TRAIN_APIS = (
  "get_actions",
  "observe",
  "update_critic",
  "update_actor",
  "update_alpha",
  "sync_targets",
  "copy_targets",
  "update",
  "get_weights",
  "get_train_step",
)
LOOP_APIS = ("reset_env", "train")


class SACBuilder:
  """The roots and spaces of a `SACConfig`."""

  name = "sac"

  def __init__(self, config: SACConfig) -> None:
    if not isinstance(config, SACConfig):
      raise TypeError(
        f"SACBuilder needs a SACConfig, got {type(config).__name__}"
      )
    self.config = config

  def api_names(self, with_env: bool) -> tuple:
    """The root APIs built: no `update_alpha` without autotune."""
    apis = TRAIN_APIS + (LOOP_APIS if with_env else ())
    if not self.config.autotune:
      apis = tuple(a for a in apis if a != "update_alpha")
    return apis

  def input_spaces(self, observation_space: Space) -> TypingDict[str, Space]:
    """The spaces of the root APIs' arguments, by name (observations as
    float32)."""
    if not isinstance(observation_space, BoxSpace) or (
      observation_space.rank != 1
    ):
      raise BuildError(
        f"SACBuilder: needs a flat box of observations (a vector per env), "
        f"got {observation_space!r}"
      )
    states = FloatBox(observation_space.shape, add_batch_rank=True)
    c = self.config
    return {
      "states": states,
      "next_states": states,
      "actions": FloatBox(
        (c.action_dim,),
        low=np.asarray(c.action_low, np.float32),
        high=np.asarray(c.action_high, np.float32),
        add_batch_rank=True,
      ),
      "rewards": FloatBox(add_batch_rank=True),
      "terminals": BoolBox(add_batch_rank=True),
      "explore": BoolBox(),
      "num_steps": IntBox(1001, low=1),  # Up to 1000 vector steps a call.
      "seed": IntBox(1 << 30),
    }

  def make_agent(
    self,
    observation_space: Optional[Space] = None,
    env: Optional[VectorEnv] = None,
  ) -> Root:
    """The `SACAgent` root: TRAIN_APIS, and with `env` (a `VectorEnv`
    whose action space is the config's box) also LOOP_APIS;
    `observation_space` defaults to the env's."""
    if observation_space is None:
      if env is None:
        raise ValueError("make_agent needs an observation space or an env")
      observation_space = cast(Space, env.observation_space)
    if env is not None:
      check_action_space(self.config, env.action_space)
    agent = SACAgent(self.config, env)
    return Root(
      agent,
      self.input_spaces(observation_space),
      self.api_names(env is not None),
      seed=self.config.seed,
    )


def check_action_space(config: SACConfig, space: object) -> None:
  """The env's actions must be the config's box."""
  shape = (config.action_dim,)
  ok = (
    isinstance(space, FloatBox)
    and space.shape == (config.action_dim,)
    and np.allclose(np.broadcast_to(space.low, shape), config.action_low)
    and np.allclose(np.broadcast_to(space.high, shape), config.action_high)
  )
  if not ok:
    raise BuildError(
      f"SACBuilder: the env's action space {space!r} is not the config's "
      f"box low={config.action_low} high={config.action_high}"
    )
