"""The vector envs of actors (IMPALA's, any actor-learner agent's), from
`--env` ids.

    gymnasium ids ("CartPole-v1"): `GymnasiumVectorEnv`;
    Atari ("ALE/Pong-v5", "atari:pong"): ale-py's C++ vector env (its own
      threads), `num_action_repeats` is its frame skip;
    DM Lab ("dmlab:<level>", "dmlab:dmlab30"): `DMLabVectorEnv`s, always in
      worker processes (one per env; DM Lab crashes in a process that
      imported tensorflow), `num_action_repeats` frames per agent step.

With `processes=True` the envs step outside this process, so Python env
code does not hold the GIL the actor and learner threads need: in env
worker processes (`WorkerVectorEnv`: shared-memory arrays, a tiny control
message per step), one per env for gymnasium and DM Lab envs, one per
actor for Atari (ale-py already steps its envs in C++ threads).

With `env_groups=2` an actor's envs come in two groups (a
`GroupedVectorEnv`), which the IMPALA actor's stepper double-buffers
(`IMPALAConfig.env_groups`).
"""

from ingraph_rl.environments import (
  dmlab30,
  dmlab_level_name,
  dmlab_set_name,
  is_atari_id,
  is_dmlab_id,
  make_vector_env,
)
from ingraph_rl.environments.env_groups import make_groups


def check_dmlab_trainable(env_id, test=False):
  """ValueError (with DM Lab's reason) for a hold-out level or set: actors
  train on their envs, and `make_vector_env` allows hold-out levels for
  evaluation."""
  set_name = dmlab_set_name(env_id)
  if set_name is not None:
    if test or set_name.endswith("_test"):
      dmlab30.check_trainable(dmlab30.HOLD_OUT_LEVELS)
    return
  dmlab30.check_trainable([dmlab_level_name(env_id)])


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
    raise ValueError(
      f"num_action_repeats={num_action_repeats} is only "
      f"supported for ALE/ and dmlab: envs, not {env_id!r}"
    )
  if num_action_repeats < 1:
    raise ValueError("num_action_repeats must be >= 1")
  return int(num_action_repeats)


def make_actor_env(
  env_id,
  num_envs,
  seed=0,
  num_action_repeats=None,
  processes=False,
  env_groups=1,
  step_timeout_s=None,
  **kwargs,
):
  """A `VectorEnv` of `num_envs` copies of `env_id` for one actor (env i
  seeded with `seed + i`). DM Lab always steps in worker processes;
  `step_timeout_s` (None: the default) is how long a step may wait for a
  worker (`WorkerVectorEnv.step_timeout_s`).

  env_groups > 1: a `GroupedVectorEnv` of that many VectorEnvs (sizes
  from `group_sizes`; Atari in processes: one worker per group), env i
  still seeded `seed + i` and, on a DM Lab level set, running the level
  it would run in one env.
  """
  if env_groups > 1:

    def make_group(first, size):
      group_kwargs = dict(kwargs)
      options = group_kwargs.get("worker_options") or {}
      if options.get("log_name"):  # One log file per group's worker.
        group_kwargs["worker_options"] = dict(
          options, log_name=f"{options['log_name']}_group{first}_"
        )
      if dmlab_set_name(env_id):
        group_kwargs["level_offset"] = kwargs.get("level_offset", 0) + first
      return make_actor_env(
        env_id,
        size,
        seed + first,
        num_action_repeats,
        processes,
        step_timeout_s=step_timeout_s,
        **group_kwargs,
      )

    return make_groups(make_group, num_envs, env_groups)
  kind = env_kind(env_id)
  repeats = num_action_repeats_for(env_id, num_action_repeats)
  if kind == "dmlab":
    check_dmlab_trainable(env_id, kwargs.get("test", False))
  if kind == "atari":
    kwargs.setdefault("frameskip", repeats)
  elif kind == "dmlab":
    kwargs.setdefault("num_action_repeats", repeats)
    processes = True
  if processes:
    kwargs.setdefault("envs_per_worker", num_envs if kind == "atari" else 1)
    env = make_vector_env(env_id, num_envs, seed=seed, processes=True, **kwargs)
    if step_timeout_s is not None:
      env.step_timeout_s = step_timeout_s
    return env
  return make_vector_env(env_id, num_envs, seed=seed, processes=False, **kwargs)
