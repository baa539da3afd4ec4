"""TRPO's builder: PPO's spaces and weights, the `TRPOAgent` root.

    >>> from ingraph_rl.environments import make_vector_env
    >>> env = make_vector_env("CartPole-v1", num_envs=4)
    >>> builder = TRPOBuilder(TRPOConfig(num_actions=2, num_steps=16))
    >>> agent = builder.make_agent(env=env).build()
    >>> _ = agent.execute("reset_env", 0)
    >>> stats = agent.execute("update", agent.execute("rollout")["batch"])
    >>> int(stats["train_step"]), int(stats["frames"])
    (1, 64)

TRAIN_APIS are PPO's but `minibatch_step`; LOOP_APIS are PPO's.
"""

from typing import Optional, Tuple, cast

from ingraph_rl.agents.ppo.builder import LOOP_APIS, PPOBuilder
from ingraph_rl.agents.ppo.builder import TRAIN_APIS as PPO_TRAIN_APIS
from ingraph_rl.agents.ppo.trpo import TRPOAgent
from ingraph_rl.agents.ppo.trpo_config import TRPOConfig
from ingraph_rl.environments import VectorEnv
from ingraph_rl.runners.builder import Root
from ingraph_rl.spaces import Space

TRAIN_APIS = tuple(a for a in PPO_TRAIN_APIS if a != "minibatch_step")


class TRPOBuilder(PPOBuilder):
  """The roots and spaces of a `TRPOConfig` (PPO's spaces: the same
  policy, value function and rollout)."""

  name = "trpo"

  def __init__(self, config: TRPOConfig) -> None:
    if not isinstance(config, TRPOConfig):
      raise TypeError(
        f"TRPOBuilder needs a TRPOConfig, got {type(config).__name__}"
      )
    super().__init__(config)

  def make_agent(
    self,
    observation_space: Optional[Space] = None,
    env: Optional[VectorEnv] = None,
    api_names: Optional[Tuple[str, ...]] = None,
  ) -> Root:
    """The `TRPOAgent` root: TRAIN_APIS, and with `env` also LOOP_APIS
    (or `api_names`); `observation_space` defaults to the env's."""
    if observation_space is None:
      if env is None:
        raise ValueError("make_agent needs an observation space or an env")
      observation_space = cast(Space, env.observation_space)
    agent = TRPOAgent(self.config, env, observation_space)
    apis = api_names or TRAIN_APIS + (LOOP_APIS if env is not None else ())
    spaces = self.input_spaces(observation_space, weights="set_weights" in apis)
    return Root(agent, spaces, apis, seed=self.config.seed)
