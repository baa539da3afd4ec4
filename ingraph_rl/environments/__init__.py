"""Vector environments behind one interface, and in-graph stepping.

>>> from ingraph_rl.environments import make_vector_env, tf_step
>>> env = make_vector_env("CartPole-v1", num_envs=4, seed=0)
>>> env.reset().shape
(4, 4)
>>> env.close()
"""

from ingraph_rl.environments.atari import AtariVectorEnv, game_name
from ingraph_rl.environments.dmlab import (DMLabVectorEnv, dmlab_level_name,
                                           is_dmlab_id)
from ingraph_rl.environments.gymnasium_env import GymnasiumVectorEnv
from ingraph_rl.environments.in_graph import (step_dtypes, step_shapes,
                                              tf_reset, tf_step,
                                              torch_reset, torch_step)
from ingraph_rl.environments.vector_env import StepResult, VectorEnv


def is_atari_id(env_id):
  """True for "atari:<rom>" and gymnasium's "ALE/<Game>-v5" ids."""
  return env_id.startswith("atari:") or env_id.startswith("ALE/")


def make_vector_env(env_id, num_envs, seed=0, **kwargs):
  """A `VectorEnv` for `env_id`.

  "atari:pong" -> `AtariVectorEnv("pong", ...)` with its defaults (no sticky
  actions). "ALE/Pong-v5" -> `AtariVectorEnv("pong", ...)` with v5's sticky
  actions (`repeat_action_probability=0.25`) unless given in kwargs; note
  ale-py's vector env always preprocesses (84x84 gray, stack 4, skip 4).
  "dmlab:<level>" (e.g. "dmlab:seekavoid_arena_01",
  "dmlab:contributed/dmlab30/rooms_watermaze") -> `DMLabVectorEnv(level,
  ...)`; it needs `deepmind_lab` (else `EnvironmentNotAvailableError`).
  Anything else -> `GymnasiumVectorEnv(env_id, ...)`. `kwargs` go to the
  chosen class.
  """
  if is_dmlab_id(env_id):
    return DMLabVectorEnv(dmlab_level_name(env_id), num_envs, seed=seed,
                          **kwargs)
  if is_atari_id(env_id):
    if env_id.startswith("ALE/") and env_id.endswith("-v5"):
      kwargs.setdefault("repeat_action_probability", 0.25)
    return AtariVectorEnv(game_name(env_id), num_envs, seed=seed, **kwargs)
  return GymnasiumVectorEnv(env_id, num_envs, seed=seed, **kwargs)


__all__ = ["VectorEnv", "StepResult", "GymnasiumVectorEnv", "AtariVectorEnv",
           "DMLabVectorEnv", "make_vector_env", "is_atari_id", "is_dmlab_id",
           "game_name", "dmlab_level_name", "tf_step",
           "tf_reset", "torch_step", "torch_reset", "step_shapes",
           "step_dtypes"]
