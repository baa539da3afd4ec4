"""Vector environments behind one interface.

>>> from ingraph_rl.environments import make_vector_env
>>> env = make_vector_env("CartPole-v1", num_envs=4, seed=0)
>>> env.reset().shape
(4, 4)
>>> env.close()

This package imports neither tensorflow nor torch (env worker processes
import it, and DeepMind Lab crashes next to tensorflow). Stepping from TF
graphs or torch lives in `ingraph_rl.environments.in_graph`:

    from ingraph_rl.environments.in_graph import tf_reset, tf_step
"""

from ingraph_rl.environments import dmlab30
from ingraph_rl.environments.atari import AtariVectorEnv, game_name
from ingraph_rl.environments.dmlab import (
  DMLabVectorEnv,
  dmlab_level_name,
  is_dmlab_id,
)
from ingraph_rl.environments.gymnasium_env import GymnasiumVectorEnv
from ingraph_rl.environments.vector_env import StepResult, VectorEnv
from ingraph_rl.environments.workers import (
  WorkerDiedError,
  WorkerSpec,
  WorkerVectorEnv,
  split_specs,
)

# How long DM Lab workers may take to load their levels: maze levels
# compile their map at load (20-120 s each on 2 cores, longer when 30 load
# at once).
DMLAB_LOAD_TIMEOUT_S = 3600.0


def is_atari_id(env_id):
  """True for "atari:<rom>" and gymnasium's "ALE/<Game>-v5" ids."""
  return env_id.startswith("atari:") or env_id.startswith("ALE/")


def dmlab_set_name(env_id):
  """ "dmlab30" / "dmlab30_test" for the DMLab-30 set ids ("dmlab:dmlab30",
  "dmlab:dmlab30_test"), else None."""
  if not is_dmlab_id(env_id):
    return None
  name = dmlab_level_name(env_id)
  return name if name in dmlab30.SET_NAMES else None


def make_vector_env(
  env_id,
  num_envs,
  seed=0,
  *,
  processes=None,
  envs_per_worker=None,
  worker_options=None,
  **kwargs,
):
  """A `VectorEnv` of `num_envs` envs of `env_id`, env i seeded with
  `seed + i`.

  "atari:pong" -> `AtariVectorEnv("pong", ...)` with its defaults (no sticky
  actions). "ALE/Pong-v5" -> `AtariVectorEnv("pong", ...)` with v5's sticky
  actions (`repeat_action_probability=0.25`) unless given in kwargs; note
  ale-py's vector env always preprocesses (84x84 gray, stack 4, skip 4).
  "dmlab:<level>" (e.g. "dmlab:seekavoid_arena_01",
  "dmlab:contributed/dmlab30/rooms_watermaze") -> `DMLabVectorEnv(level,
  ...)`; it needs `deepmind_lab` (else `EnvironmentNotAvailableError`).
  "dmlab:dmlab30" -> DMLab-30: env i runs `dmlab30.TRAIN_LEVELS[i % 30]`
  ("dmlab:dmlab30_test" or `test=True`: the test variants), every env
  observing `Dict(RGB_INTERLEAVED=..., INSTR=TextBox())`; the env's
  `levels` names each env's level. Asked for a hold-out level
  (`dmlab30.HOLD_OUT_LEVELS`, e.g. "dmlab:dmlab30_test"), the `Lab`
  config gets `allowHoldOutLevels="true"` (DM Lab refuses them otherwise;
  training on them is refused by `runners.environments.make_actor_env`).
  `skip_levels=[...]` leaves levels out of a set's cycle (e.g.
  `dmlab30.DATASET_LEVELS` without a `datasetPath`). In worker processes
  DM Lab envs load their levels (first reset included) as the workers
  start (`DMLabVectorEnv(preload=True)`). Anything else ->
  `GymnasiumVectorEnv(env_id, ...)`. `kwargs` go to the chosen class.

  processes: True steps the envs in worker processes (`WorkerVectorEnv`,
    `envs_per_worker` envs each, default 1; kwargs must be JSON-able),
    False in this process. The default (None) is True for DM Lab, which
    must never run in a process that imported tensorflow, False otherwise.
  worker_options: more `WorkerVectorEnv` arguments (`text_bytes`,
    `start_timeout_s`).
  """
  dmlab = is_dmlab_id(env_id)
  if processes is None:
    processes = dmlab
  if processes:
    if dmlab:
      kwargs.setdefault("preload", True)  # Workers load levels in parallel.
    k = 1 if envs_per_worker is None else int(envs_per_worker)
    specs = split_specs(env_id, num_envs, seed, k, **kwargs)
    if dmlab_set_name(env_id):
      # Each worker's envs continue the level cycle where the last stopped.
      offset = int(kwargs.get("level_offset", 0))
      first = 0
      for i, spec in enumerate(specs):
        specs[i] = spec._replace(
          kwargs=dict(spec.kwargs, level_offset=offset + first)
        )
        first += spec.num_envs
    options = dict(worker_options or {})
    if dmlab:
      options.setdefault("start_timeout_s", DMLAB_LOAD_TIMEOUT_S)
    return WorkerVectorEnv.from_specs(specs, **options)
  if envs_per_worker is not None or worker_options is not None:
    raise ValueError("envs_per_worker and worker_options need processes=True")
  if dmlab:
    return _make_dmlab(env_id, num_envs, seed, **kwargs)
  if is_atari_id(env_id):
    if env_id.startswith("ALE/") and env_id.endswith("-v5"):
      kwargs.setdefault("repeat_action_probability", 0.25)
    return AtariVectorEnv(game_name(env_id), num_envs, seed=seed, **kwargs)
  return GymnasiumVectorEnv(env_id, num_envs, seed=seed, **kwargs)


def _make_dmlab(
  env_id, num_envs, seed, test=False, level_offset=0, skip_levels=(), **kwargs
):
  """`DMLabVectorEnv` in this process, for one level or a level set."""
  set_name = dmlab_set_name(env_id)
  if set_name is None:
    if test or level_offset or skip_levels:
      raise ValueError(
        f"test, level_offset and skip_levels are options of the level "
        f"sets {dmlab30.SET_NAMES}, not of {env_id!r}"
      )
    level = dmlab_level_name(env_id)
    return DMLabVectorEnv(
      level, num_envs, seed=seed, **_hold_out_config([level], kwargs)
    )
  if kwargs.pop("instructions", True) is not True:
    raise ValueError(
      f"{env_id!r} always observes INSTR (instructions=True):"
      " every env of a level set has the same observations"
    )
  levels = dmlab30.env_levels(
    num_envs,
    test=test or set_name.endswith("_test"),
    offset=level_offset,
    skip=skip_levels,
  )
  return DMLabVectorEnv(
    levels,
    num_envs,
    seed=seed,
    instructions=True,
    **_hold_out_config(levels, kwargs),
  )


def _hold_out_config(levels, kwargs):
  """kwargs whose `config` allows hold-out levels when `levels` has one
  (asked for by name: evaluation)."""
  if not any(dmlab30.is_hold_out(level) for level in levels):
    return kwargs
  config = dict(kwargs.get("config") or {})
  config.setdefault("allowHoldOutLevels", True)
  return dict(kwargs, config=config)


__all__ = [
  "DMLAB_LOAD_TIMEOUT_S",
  "VectorEnv",
  "StepResult",
  "GymnasiumVectorEnv",
  "AtariVectorEnv",
  "DMLabVectorEnv",
  "WorkerVectorEnv",
  "WorkerSpec",
  "WorkerDiedError",
  "make_vector_env",
  "split_specs",
  "is_atari_id",
  "is_dmlab_id",
  "dmlab_set_name",
  "game_name",
  "dmlab_level_name",
  "dmlab30",
]
