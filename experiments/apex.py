"""Ape-X experiment (distributed prioritized replay, in graph):

    python -m experiments.apex                  # embedded CartPole preset
    python -m experiments.apex --flagfile=experiments/flagfiles/apex_pong.cfg

Runs the actors, the replay shards and the learner as threads of one
process (`runners.replay_driver.ReplayDriver`), connected by the agent's
shared-name queues as the processes of a cluster would be. With no flags
it runs the embedded CartPole preset (experiments/configs.py,
APEX_CARTPOLE).

Logs TensorBoard scalars with CleanRL's names under `--logdir` (default
`runs/{env}__apex__{seed}__{time}`), plus `replay/shard_{i}/size`,
`replay/shard_{i}/mean_priority` and `replay/shard_{i}/rejected_rows` per
shard; keeps checkpoints there (the
learner's in `checkpoints/learner`, each shard's contents in
`checkpoints/shard_{i}`: a rerun with the same `--logdir` resumes with
the shards' data); ends with a greedy evaluation and the export of the
complete agent (act, observe, update) to `saved_agent/`. Training stops at
--total_env_steps or --max_train_seconds.

In a cluster (`--job_name=ps|learner|replay|actor`, `--task`, `--cluster`
or TF_CONFIG, a shared `--logdir`; experiments/launch_local.py starts one
on loopback) each role is a process (`distributed.replay_roles`): the
learner trains, checkpoints and evaluates; replay task i keeps shard i
(saved to `checkpoints/shard_{i}` when it stops, restored when it starts)
and logs its `replay/shard_{i}/*` scalars; actors roll out.

    python experiments/launch_local.py --agent=apex --num_replay_shards=2 \
        --num_actors=2 --logdir=runs/apex_cluster

Flags are generated from `ApexSettings` (experiments/configs.py) and
`ApexConfig` (each field's default and help); only the flags passed
override the preset.
"""

import os
import sys
import time

import tensorflow as tf

from experiments import config_flags, configs
from experiments.progress import print_progress
from ingraph_rl.agents.apex import ApexBuilder
from ingraph_rl.distributed import replay_roles, roles
from ingraph_rl.distributed.cluster import ClusterError, in_cluster
from ingraph_rl.environments import (
  is_atari_id,
  is_dmlab_id,
  make_vector_env,
)
from ingraph_rl.environments.observation_key import SelectedObservation
from ingraph_rl.errors import SpaceError
from ingraph_rl.export import export_agent
from ingraph_rl.runners.driver import ActorFailedError
from ingraph_rl.runners.environments import make_actor_env
from ingraph_rl.runners.evaluation import mean_greedy_return
from ingraph_rl.runners.replay_driver import ReplayDriver
from ingraph_rl.utils.checkpoints import CheckpointSaver
from ingraph_rl.utils.episode_stats import RecentEpisodes

# One flag per field of ApexSettings and ApexConfig.
FLAG_HOLDERS = config_flags.define_flags(*configs.APEX_CLASSES)


class Checkpoints:
  """The learner's checkpoint and one per shard, each saved between two
  of its graph calls (under the driver's locks, one at a time)."""

  def __init__(self, driver, run_dir):
    root = os.path.join(run_dir, "checkpoints")
    self.driver = driver
    # The actors' env steps so far: the budget counts across resumes.
    self.env_steps = tf.Variable(0, dtype=tf.int64)
    self.learner = CheckpointSaver(
      tf.train.Checkpoint(
        learner=driver.learner_executor.module, env_steps=self.env_steps
      ),
      os.path.join(root, "learner"),
    )
    self.shards = [
      CheckpointSaver(
        tf.train.Checkpoint(shard=executor.module),
        os.path.join(root, f"shard_{i}"),
      )
      for i, executor in enumerate(driver.shard_executors)
    ]

  def restore(self):
    """The learner's restored checkpoint path, or None."""
    for saver in self.shards:
      saver.restore()
    path = self.learner.restore()
    self.driver.totals.env_steps = int(self.env_steps.numpy())
    return path

  def save(self, number):
    self.env_steps.assign(self.driver.totals.env_steps)
    with self.driver.learner_lock:
      self.learner.save(checkpoint_number=number)
    for lock, saver in zip(self.driver.shard_locks, self.shards):
      with lock:
        saver.save(checkpoint_number=number)


class Progress:
  """The learner's `on_update`: CleanRL scalars and a log line every
  `log_every_seconds`, checkpoints every `checkpoint_every_minutes`.

  take_episodes() -> (episodes, return sum, length sum) since the last
  call; shard_stats() -> [{"size", "mean_priority"}] (those the learner
  sees; in a cluster the shards log their own); save(number) checkpoints.
  """

  def __init__(self, settings, writer, take_episodes, shard_stats, save):
    self.settings, self.writer = settings, writer
    self.take_episodes, self.shard_stats, self.save = (
      take_episodes,
      shard_stats,
      save,
    )
    self.recent = RecentEpisodes(100)
    self.start = self.last_log = self.last_save = time.time()
    self.logged_steps = None

  def __call__(self, out, env_steps):
    now = time.time()
    if self.logged_steps is None:
      self.logged_steps = env_steps
    if now - self.last_log < self.settings.log_every_seconds:
      return
    episodes, return_sum, length_sum = self.take_episodes()
    self.recent.add(return_sum, episodes)
    sps = (env_steps - self.logged_steps) / (now - self.last_log)
    self.last_log, self.logged_steps = now, env_steps
    shards = self.shard_stats()
    with self.writer.as_default(step=env_steps):
      if episodes:
        tf.summary.scalar("charts/episodic_return", return_sum / episodes)
        tf.summary.scalar("charts/episodic_length", length_sum / episodes)
        tf.summary.scalar("charts/episodes", episodes)
        tf.summary.scalar("charts/episodic_return_last100", self.recent.mean)
      tf.summary.scalar("charts/SPS", sps)
      tf.summary.scalar("charts/train_step", int(out["train_step"]))
      tf.summary.scalar("losses/td_loss", float(out["loss"]))
      tf.summary.scalar("losses/q_values", float(out["mean_q"]))
      for i, stats in enumerate(shards):
        write_shard_stats(i, stats)
    print_progress(
      "apex",
      [
        ("env steps", f"{env_steps:>9d}"),
        ("SPS", f"{sps:7.0f}"),
        ("updates", f"{int(out['train_step']):6d}"),
        ("loss", f"{float(out['loss']):.4f}"),
        ("last100", f"{self.recent.mean:7.1f}"),
        ("shards", [int(s["size"]) for s in shards]),
      ],
      self.start,
    )
    if now - self.last_save > 60 * self.settings.checkpoint_every_minutes:
      # Numbered by the learner's update count (it only grows).
      self.save(int(out["train_step"]))
      self.last_save = time.time()


def write_shard_stats(index, stats):
  tf.summary.scalar(f"replay/shard_{index}/size", int(stats["size"]))
  tf.summary.scalar(
    f"replay/shard_{index}/mean_priority", float(stats["mean_priority"])
  )
  # Received rows the shard dropped as bad (see agents/apex/shard.py).
  tf.summary.scalar(
    f"replay/shard_{index}/rejected_rows", int(stats.get("rejected_rows", 0))
  )


def env_maker(settings):
  """`make(num_envs, seed)`: the run's vector env. DM Lab steps in env
  worker processes (it crashes next to TensorFlow); `--observation_key`
  picks one leaf of Dict observations."""

  def make(num_envs, seed):
    if is_dmlab_id(settings.env):
      env = make_actor_env(
        settings.env,
        num_envs,
        seed,
        step_timeout_s=settings.env_step_timeout_s,
      )
    else:
      env = make_vector_env(settings.env, num_envs, seed)
    if settings.observation_key is None:
      return env
    try:
      return SelectedObservation(env, settings.observation_key)
    except SpaceError:
      env.close()
      raise

  return make


def make_builder(settings, values):
  """(builder, env factory, observation space) of the run's settings."""
  make = env_maker(settings)

  def make_env(i):
    return make(settings.num_envs_per_actor, settings.seed + 1000 * i)

  with config_flags.usage_of("env", settings.env):
    probe = make(1, settings.seed)
  num_actions = probe.action_space.num_categories
  obs_space = probe.observation_space
  probe.close()
  frames = is_atari_id(settings.env) or configs.is_frames(obs_space)
  config = configs.apex_config(values, num_actions, frames)
  builder = ApexBuilder(
    config, preprocessor=configs.scaled_frames if frames else None
  )
  return builder, make_env, obs_space


def greedy_return(builder, obs_space, weights, settings):
  """The mean greedy return of `eval_episodes` episodes (nan for none)."""
  if not settings.eval_episodes:
    return float("nan")
  policy = builder.make_policy(obs_space).build()
  policy.execute("set_weights", weights)
  return mean_greedy_return(
    lambda obs: policy.execute("get_actions", obs, False)["actions"].numpy(),
    settings.env,
    settings.eval_episodes,
    settings.seed + 10_000,
    make_env=env_maker(settings),
  )


def export_complete_agent(builder, obs_space, weights, settings, run_dir):
  """The complete agent (`ApexBuilder.make_agent`: act, observe, update)
  with the learner's weights, as a SavedModel in `<run_dir>/saved_agent`
  (its replay starts empty and its optimizer fresh: the shards' contents
  and the learner's Adam state are in the checkpoints). Returns the
  path."""
  agent = builder.make_agent(obs_space, settings.num_envs_per_actor).build()
  agent.execute("set_weights", weights)
  path = os.path.join(run_dir, "saved_agent")
  export_agent(agent, path)
  return path


def report(settings, writer, learner, env_steps, train_s, recent, wall_start):
  """Greedy evaluation of the learner's weights, its scalar, the complete
  agent's export, the last lines."""
  builder, obs_space, executor, run_dir = learner
  train_step = int(executor.execute("get_train_step"))
  weights = executor.execute("get_weights")
  eval_return = greedy_return(builder, obs_space, weights, settings)
  saved = export_complete_agent(builder, obs_space, weights, settings, run_dir)
  with writer.as_default(step=env_steps):
    tf.summary.scalar("eval/episodic_return", eval_return)
  writer.flush()
  print(
    f"apex: {env_steps} env steps, {train_step} updates at "
    f"{env_steps / max(train_s, 1e-9):.0f} SPS; greedy eval return "
    f"{eval_return:.1f} over {settings.eval_episodes} episodes\n"
    f"logs and checkpoints: {run_dir}\n"
    f"apex: exported the complete agent (act, observe, update) to {saved}\n"
    f"apex: last-100 training return {recent.mean:.2f}; wall time "
    f"{time.time() - wall_start:.1f} s (training {train_s:.1f} s)",
    flush=True,
  )


def hyperparameters(run_dir, values):
  writer = tf.summary.create_file_writer(run_dir)
  with writer.as_default():
    tf.summary.text("hyperparameters", config_flags.table(values), 0)
  return writer


def main(argv):
  del argv
  wall_start = time.time()
  values = configs.apex_values()
  config_flags.check_flags(
    configs.APEX_CLASSES,
    values,
    configs=[lambda: configs.apex_config(values, 2, False)],
  )
  settings = configs.apex_settings(values)
  if in_cluster(settings.job_name):
    return cluster_main(settings, values, wall_start)
  configs.configure_tensorflow(settings)
  run_dir = configs.run_directory(settings, "apex")
  builder, make_env, obs_space = make_builder(settings, values)
  config = builder.config
  driver = ReplayDriver(
    builder,
    make_env,
    settings.num_actors,
    settings.num_replay_shards,
    seed=settings.seed,
  )
  checkpoints = Checkpoints(driver, run_dir)
  resumed = checkpoints.restore()
  train_step = int(driver.learner_executor.execute("get_train_step"))
  # The throttle compares env steps with samples trained over the run.
  driver.samples_trained = train_step * config.train_batch_size
  if resumed:
    print(
      f"apex: resumed from {resumed} at update {train_step}, env step "
      f"{driver.totals.env_steps}",
      flush=True,
    )
    driver.publish_weights()
  writer = hyperparameters(run_dir, values)
  progress = Progress(
    settings,
    writer,
    driver.totals.take,
    lambda: driver.shard_stats,
    checkpoints.save,
  )
  start = time.time()
  try:
    env_steps = driver.run(
      settings.total_env_steps,
      on_update=progress,
      max_seconds=settings.max_train_seconds,
    )
  except ActorFailedError as e:
    # E.g. an env worker died or stopped answering (--env_step_timeout_s):
    # the driver stopped and closed its envs; keep what was learned.
    checkpoints.save(int(driver.learner_executor.execute("get_train_step")))
    print(
      f"[apex] stopped: {e}\n[apex] saved "
      f"{checkpoints.learner.latest_checkpoint} and the shards': a rerun "
      "with the same --logdir resumes",
      flush=True,
    )
    return 1
  train_s = time.time() - start
  checkpoints.save(int(driver.learner_executor.execute("get_train_step")))
  report(
    settings,
    writer,
    (builder, obs_space, driver.learner_executor, run_dir),
    env_steps,
    train_s,
    progress.recent,
    wall_start,
  )


# --- cluster roles -----------------------------------------------------------


def cluster_main(settings, values, wall_start):
  """--job_name=ps|learner|replay|actor: one task of a cluster."""
  task = roles.task_from_flags(
    settings.job_name,
    settings.task,
    settings.cluster,
    num_replay_shards=settings.num_replay_shards,
  )
  task.check_addresses(settings.allow_remote_hosts)
  configs.configure_tensorflow(settings, role=task.job)
  if task.job == "ps":
    return roles.run_ps(task, settings.ps_linger_s)
  if not settings.logdir:
    raise ClusterError(
      "a cluster's tasks need one shared --logdir (checkpoints, logs)"
    )
  if task.num_replay_shards < 1:
    raise ClusterError("Ape-X's cluster needs replay tasks")
  builder, make_env, obs_space = make_builder(settings, values)
  checkpoints = os.path.join(settings.logdir, "checkpoints")
  if task.job == "actor":
    sys.exit(
      replay_roles.run_replay_actor(
        task,
        builder,
        make_env(task.index),
        seed=settings.seed + 1000 * task.index,
      )
    )
  if task.job == "replay":
    writers = []

    def on_stats(stats, env_steps):
      if not writers:  # Made after connecting: it lives on this task.
        writers.append(tf.summary.create_file_writer(settings.logdir))
      writer = writers[0]
      with writer.as_default(step=env_steps):
        write_shard_stats(task.index, stats)
      writer.flush()

    sys.exit(
      replay_roles.run_replay_shard(
        task,
        builder,
        obs_space,
        os.path.join(checkpoints, f"shard_{task.index}"),
        on_stats=on_stats,
      )
    )
  return learner_main(settings, values, task, builder, obs_space, wall_start)


def learner_main(settings, values, task, builder, obs_space, wall_start):
  roles.sigterm_as_interrupt()  # Kubernetes stops pods with SIGTERM.
  roles.connect(task)
  learner = replay_roles.RemoteReplayLearner(task, builder, obs_space)
  env_steps = tf.Variable(0, dtype=tf.int64)
  saver = CheckpointSaver(
    tf.train.Checkpoint(learner=learner.executor.module, env_steps=env_steps),
    os.path.join(settings.logdir, "checkpoints", "learner"),
  )
  resumed = saver.restore()
  learner.start(int(env_steps.numpy()))
  train_step = int(learner.executor.execute("get_train_step"))
  if resumed:
    roles.log(
      task,
      f"resumed from {resumed} at update {train_step}, env step "
      f"{int(env_steps.numpy())}",
    )
  roles.log(
    task,
    f"variables on {learner.placement}; queues on {task.learner_device}; "
    f"{task.num_replay_shards} replay shards; logdir {settings.logdir}",
  )

  def save(number):
    env_steps.assign(learner.env_steps())
    saver.save(number)

  writer = hyperparameters(settings.logdir, values)
  progress = Progress(settings, writer, learner.take_episodes, list, save)
  start = time.time()
  steps, _ = learner.train(
    settings.total_env_steps, progress, settings.max_train_seconds
  )
  train_s = time.time() - start
  save(int(learner.executor.execute("get_train_step")))
  report(
    settings,
    writer,
    (builder, obs_space, learner.executor, settings.logdir),
    steps,
    train_s,
    progress.recent,
    wall_start,
  )
  return 0


if __name__ == "__main__":
  config_flags.run(main)
