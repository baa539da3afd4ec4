"""The actors' environments of experiments/impala.py, without its flags
(importable in any process, e.g. a test beside other experiments): a DM
Lab run's pre-flight checks and worker options, and the actor envs built
at once."""

import threading

from absl import app

from experiments import dmlab_settings
from ingraph_rl.environments import dmlab30, dmlab_level_name, dmlab_set_name
from ingraph_rl.environments.load_progress import LoadProgress
from ingraph_rl.runners.environments import (
  check_dmlab_trainable,
  env_kind,
  make_actor_env,
)


def dmlab_env_kwargs(settings, dmlab, log_dir=None, log_name=None, **options):
  """make_actor_env kwargs of a DM Lab run: the Lab config (datasetPath),
  the levels left out (--skip_levels_without_dataset), and where the env
  workers log (`log_dir`/`log_name`; `options`: more WorkerVectorEnv
  options, e.g. load_progress)."""
  if env_kind(settings.env) != "dmlab" or dmlab is None:
    return {}
  kwargs = {}
  config = dmlab_settings.lab_config(dmlab)
  if config:
    kwargs["config"] = config
  if dmlab_set_name(settings.env) and dmlab.skip_levels_without_dataset:
    if not dmlab.dataset_path:
      kwargs["skip_levels"] = list(dmlab30.DATASET_LEVELS)
  options = dict(options)
  if log_dir is not None:
    options.update(log_dir=log_dir, log_name=log_name)
  if options:
    kwargs["worker_options"] = options
  return kwargs


def dmlab_preflight(settings, dmlab):
  """Usage errors of a DM Lab run, before any env starts: training on a
  hold-out level (DM Lab's reason), and levels that need --dataset_path
  without it (which levels, the dataset, where to get it)."""
  if env_kind(settings.env) != "dmlab":
    return
  try:
    check_dmlab_trainable(settings.env)
    set_name = dmlab_set_name(settings.env)
    levels = (
      dmlab30.TRAIN_LEVELS if set_name else [dmlab_level_name(settings.env)]
    )
    if set_name:
      dmlab_settings.plan_levels(levels, dmlab)
    else:
      dmlab30.check_dataset(levels, dmlab.dataset_path, skip_flag=None)
  except ValueError as e:
    raise app.UsageError(f"--env={settings.env}: {e}") from None


def make_actor_envs(factory, num_actors, num_envs):
  """[factory(i) for each actor], built at once (DM Lab workers load their
  levels in parallel) with one progress line; closes what was built if
  one fails."""
  progress = LoadProgress(num_actors * num_envs)
  envs, errors = [None] * num_actors, []

  def build(i):
    try:
      envs[i] = factory(i, load_progress=progress)
    except BaseException as e:
      errors.append(e)

  threads = [
    threading.Thread(target=build, args=(i,)) for i in range(num_actors)
  ]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  if errors:
    for env in envs:
      if env is not None:
        env.close()
    raise errors[0]
  progress.finish()
  return envs


def env_factory(settings, env_groups=1, dmlab=None, log_dir=None):
  """`factory(i)`: actor i's vector env (seed + 1000 i; `env_groups`
  groups of it, `IMPALAConfig.env_groups`). On a DM Lab level set
  ("dmlab:dmlab30"), actor i's envs continue the level cycle after actor
  i - 1's, so the actors together run every level. `dmlab` (a DM Lab
  run's DMLabSettings) and `log_dir` (the env workers' logs): see
  `dmlab_env_kwargs`."""

  def factory(i, **options):
    kwargs = (
      {"level_offset": i * settings.num_envs_per_actor}
      if dmlab_set_name(settings.env)
      else {}
    )
    kwargs.update(
      dmlab_env_kwargs(settings, dmlab, log_dir, f"actor{i}_worker", **options)
    )
    return make_actor_env(
      settings.env,
      settings.num_envs_per_actor,
      settings.seed + 1000 * i,
      settings.num_action_repeats,
      settings.env_processes,
      env_groups=env_groups,
      step_timeout_s=settings.env_step_timeout_s,
      **kwargs,
    )

  return factory
