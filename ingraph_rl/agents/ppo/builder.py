"""PPO's builder: the agent root, its API lists, input spaces, record
space and weights space, declared once.

    >>> from ingraph_rl.environments import make_vector_env
    >>> env = make_vector_env("CartPole-v1", num_envs=4)
    >>> builder = PPOBuilder(PPOConfig(num_actions=2, num_steps=16))
    >>> agent = builder.make_agent(env=env).build()
    >>> _ = agent.execute("reset_env", 0)
    >>> out = agent.execute("rollout")            # 16 vector steps, 1 call
    >>> stats = agent.execute("update", out["batch"])  # 4 epochs x 4, 1 call
    >>> int(stats["train_step"]), int(out["stats"]["env_steps"])
    (16, 64)

The root (`runners.builder.Root`) is ONE `PPOAgent`:
  TRAIN_APIS  get_actions, minibatch_step, update, get_weights,
              set_weights, get_train_step (no env: a learner fed
              batches from outside, an exported agent);
  LOOP_APIS   reset_env, rollout: the in-graph rollout, with an env.
Spaces:
  input_spaces   the root APIs' arguments: observations [B, ...] (raw),
                 explore, seed, batch (`record_space` with a batch rank),
                 mb_* (one minibatch's fields, [M, ...]), weights
                 (`weights_space`).
  record_space   one env's rollout: observations [T, ...] (float32 when
                 the agent normalizes them), actions [T] int64 or [T, d],
                 log_probs, values, rewards [T], dones [T] bool,
                 bootstrap_value [].
  weights_space  `get_weights()`: the actor-critic's variables and the
                 observation statistics, by path (`PPOModel`).
"""

from typing import Dict as TypingDict
from typing import List, Optional, Tuple, cast

import numpy as np

from ingraph_rl.agents.ppo.agent import PPOAgent, stored_observation_space
from ingraph_rl.agents.ppo.config import PPOConfig
from ingraph_rl.environments import VectorEnv
from ingraph_rl.runners.builder import Root, weights_space_of
from ingraph_rl.spaces import BoolBox, BoxSpace, Dict, FloatBox, IntBox, Space

TRAIN_APIS = (
  "get_actions",
  "minibatch_step",
  "update",
  "get_weights",
  "set_weights",
  "get_train_step",
)
LOOP_APIS = ("reset_env", "rollout")


def _with_shape(space: Space, shape: Tuple[int, ...]) -> BoxSpace:
  """A box leaf of `space`'s kind and dtype with this `shape`."""
  box = cast(BoxSpace, space)
  return type(box)(shape=shape, dtype=box.dtype)


def _step_space(space: Space) -> BoxSpace:
  """A [T, ...] record leaf's space of one step."""
  return _with_shape(
    space, tuple(int(d or 0) for d in cast(BoxSpace, space).shape[1:])
  )


class PPOBuilder:
  """The roots and spaces of a `PPOConfig` (see the module docstring)."""

  name = "ppo"

  def __init__(self, config: PPOConfig) -> None:
    if not isinstance(config, PPOConfig):
      raise TypeError(
        f"PPOBuilder needs a PPOConfig, got {type(config).__name__}"
      )
    self.config = config
    self._weights_spaces: List[Tuple[Space, Dict]] = []

  # --- spaces ---------------------------------------------------------------

  def action_space(self, steps: Optional[int] = None) -> Space:
    """One action (with `steps`: [steps] of them)."""
    c = self.config
    lead = () if steps is None else (steps,)
    if c.continuous:
      return FloatBox(lead + (c.action_dim,))
    return IntBox(c.num_actions, shape=lead, dtype=np.int64)

  def record_space(self, observation_space: Space) -> Dict:
    """One env's rollout of `num_steps` steps (see the module docstring)."""
    T = self.config.num_steps
    obs = stored_observation_space(observation_space, self.config)
    return Dict(
      observations=_with_shape(obs, (T,) + tuple(obs.shape)),
      actions=self.action_space(T),
      log_probs=FloatBox((T,)),
      values=FloatBox((T,)),
      rewards=FloatBox((T,)),
      dones=BoolBox((T,)),
      bootstrap_value=FloatBox(),
    )

  def input_spaces(
    self, observation_space: Space, weights: bool = True
  ) -> TypingDict[str, Space]:
    spaces: TypingDict[str, Space] = {
      "observations": observation_space.with_batch_rank(),
      "explore": BoolBox(),
      "seed": IntBox(1 << 30, low=-1),
      "batch": self.record_space(observation_space).with_batch_rank(),
    }
    record = self.record_space(observation_space)
    for name in ("observations", "log_probs", "values"):
      spaces[f"mb_{name}"] = _step_space(record[name]).with_batch_rank()
    spaces["mb_actions"] = self.action_space().with_batch_rank()
    spaces["mb_advantages"] = FloatBox(add_batch_rank=True)
    spaces["mb_returns"] = FloatBox(add_batch_rank=True)
    if weights:
      spaces["weights"] = self.weights_space(observation_space)
    return spaces

  def weights_space(self, observation_space: Space) -> Dict:
    """The space of `get_weights()`, from a build of the agent without an
    env (cached per observation space)."""
    for space, weights in self._weights_spaces:
      if space == observation_space:
        return weights
    from ingraph_rl.executors.tensorflow import TFExecutor

    executor = TFExecutor(
      PPOAgent(self.config, observation_space=observation_space),
      self.input_spaces(observation_space, weights=False),
      api_names=["get_actions", "get_weights"],
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
    api_names: Optional[Tuple[str, ...]] = None,
  ) -> Root:
    """The `PPOAgent` root: TRAIN_APIS, and with `env` also LOOP_APIS (or
    `api_names`); `observation_space` defaults to the env's."""
    if observation_space is None:
      if env is None:
        raise ValueError("make_agent needs an observation space or an env")
      observation_space = cast(Space, env.observation_space)
    agent = PPOAgent(self.config, env, observation_space)
    apis = api_names or TRAIN_APIS + (LOOP_APIS if env is not None else ())
    spaces = self.input_spaces(observation_space, weights="set_weights" in apis)
    return Root(agent, spaces, apis, seed=self.config.seed)
