"""The envs of IMPALA actors, from `--env` ids.

    gymnasium ids ("CartPole-v1"): `GymnasiumVectorEnv`;
    Atari ("ALE/Pong-v5", "atari:pong"): ale-py's C++ vector env (its own
      threads), `num_action_repeats` is its frame skip;
    DM Lab ("dmlab:<level>"): `DMLabVectorEnv`, `num_action_repeats` frames
      per agent step.

With `processes=True` the envs step outside this process, so Python env
code does not hold the GIL the actor and learner threads need: gymnasium
envs each in their own subprocess (gymnasium's AsyncVectorEnv), any other
vector env as a whole in one subprocess (`ProcessVectorEnv`).
"""

import functools

from ingraph_rl.environments import (is_atari_id, is_dmlab_id,
                                     make_vector_env)
from ingraph_rl.environments.process_env import ProcessVectorEnv

# Frame skip / action repeats when the flag is left at its default.
DEFAULT_REPEATS = {"atari": 4, "dmlab": 4, "gymnasium": 1}


def env_kind(env_id):
  if is_dmlab_id(env_id):
    return "dmlab"
  return "atari" if is_atari_id(env_id) else "gymnasium"


def num_action_repeats_for(env_id, num_action_repeats=None):
  """The action repeats `env_id` uses (None: its default)."""
  kind = env_kind(env_id)
  if num_action_repeats is None:
    return DEFAULT_REPEATS[kind]
  if kind == "gymnasium" and num_action_repeats != 1:
    raise ValueError(f"num_action_repeats={num_action_repeats} is only "
                     f"supported for ALE/ and dmlab: envs, not {env_id!r}")
  if num_action_repeats < 1:
    raise ValueError("num_action_repeats must be >= 1")
  return int(num_action_repeats)


def make_actor_env(env_id, num_envs, seed=0, num_action_repeats=None,
                   processes=False, **kwargs):
  """A `VectorEnv` of `num_envs` copies of `env_id` for one actor."""
  kind = env_kind(env_id)
  repeats = num_action_repeats_for(env_id, num_action_repeats)
  if kind == "atari":
    kwargs.setdefault("frameskip", repeats)
  elif kind == "dmlab":
    kwargs.setdefault("num_action_repeats", repeats)
  elif processes:
    kwargs.setdefault("asynchronous", True)
    processes = False
  if processes:
    return ProcessVectorEnv(functools.partial(
        make_vector_env, env_id, num_envs, seed=seed, **kwargs))
  return make_vector_env(env_id, num_envs, seed=seed, **kwargs)
