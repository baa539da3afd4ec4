"""Ape-X experiment (distributed prioritized replay, in graph):

    python -m experiments.apex                  # embedded CartPole preset
    python -m experiments.apex --flagfile=experiments/flagfiles/apex_pong.cfg

Runs the actors, the replay shards and the learner as threads of one
process (`runners.replay_driver.ReplayDriver`), connected by the agent's
shared-name queues as the processes of a cluster would be. With no flags
it runs the embedded CartPole preset (experiments/configs.py,
APEX_CARTPOLE).

Logs TensorBoard scalars with CleanRL's names under `--logdir` (default
`runs/{env}__apex__{seed}__{time}`), plus `replay/shard_{i}/size` and
`replay/shard_{i}/mean_priority` per shard; keeps checkpoints there (the
learner's in `checkpoints/learner`, each shard's contents in
`checkpoints/shard_{i}`: a rerun with the same `--logdir` resumes with
the shards' data); ends with a greedy evaluation. Training stops at
--total_env_steps or --max_train_seconds.

Flags are generated from `ApexSettings` (experiments/configs.py) and
`ApexConfig` (each field's default and help); only the flags passed
override the preset.
"""

import os
import time

import tensorflow as tf
from absl import app, logging

from experiments import config_flags, configs
from ingraph_rl.agents.apex import ApexBuilder
from ingraph_rl.environments import is_atari_id, make_vector_env
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


def main(argv):
  del argv
  wall_start = time.time()
  values = configs.apex_values()
  settings = configs.apex_settings(values)
  atari = is_atari_id(settings.env)
  run_dir = configs.run_directory(settings, "apex")

  def make_env(i):
    return make_vector_env(
      settings.env, settings.num_envs_per_actor, settings.seed + 1000 * i
    )

  probe = make_env(0)
  num_actions = probe.action_space.num_categories
  probe.close()
  config = configs.apex_config(values, num_actions, atari)
  builder = ApexBuilder(
    config, preprocessor=configs.scaled_frames if atari else None
  )
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
  writer = tf.summary.create_file_writer(run_dir)
  with writer.as_default():
    tf.summary.text("hyperparameters", config_flags.table(values), 0)

  recent = RecentEpisodes(100)
  state = {
    "last_log": time.time(),
    "last_save": time.time(),
    "logged_steps": driver.totals.env_steps,
  }

  def on_update(out, env_steps):
    now = time.time()
    if now - state["last_log"] < settings.log_every_seconds:
      return
    episodes, return_sum, length_sum = driver.totals.take()
    recent.add(return_sum, episodes)
    sps = (env_steps - state["logged_steps"]) / (now - state["last_log"])
    state["last_log"], state["logged_steps"] = now, env_steps
    with writer.as_default(step=env_steps):
      if episodes:
        tf.summary.scalar("charts/episodic_return", return_sum / episodes)
        tf.summary.scalar("charts/episodic_length", length_sum / episodes)
        tf.summary.scalar("charts/episodes", episodes)
        tf.summary.scalar("charts/episodic_return_last100", recent.mean)
      tf.summary.scalar("charts/SPS", sps)
      tf.summary.scalar("charts/train_step", int(out["train_step"]))
      tf.summary.scalar("losses/td_loss", float(out["loss"]))
      tf.summary.scalar("losses/q_values", float(out["mean_q"]))
      for i, stats in enumerate(driver.shard_stats):
        tf.summary.scalar(f"replay/shard_{i}/size", int(stats["size"]))
        tf.summary.scalar(
          f"replay/shard_{i}/mean_priority", float(stats["mean_priority"])
        )
    logging.info(
      "env steps %d  SPS %.0f  updates %d  loss %.4f  last100 %.1f  shards %s",
      env_steps,
      sps,
      int(out["train_step"]),
      float(out["loss"]),
      recent.mean,
      [int(s["size"]) for s in driver.shard_stats],
    )
    if now - state["last_save"] > 60 * settings.checkpoint_every_minutes:
      # Numbered by the learner's update count (it only grows).
      checkpoints.save(int(out["train_step"]))
      state["last_save"] = time.time()

  start = time.time()
  env_steps = driver.run(
    settings.total_env_steps,
    on_update=on_update,
    max_seconds=settings.max_train_seconds,
  )
  train_s = time.time() - start
  train_step = int(driver.learner_executor.execute("get_train_step"))
  checkpoints.save(train_step)
  policy = builder.make_policy(driver.envs[0].observation_space).build()
  policy.execute("set_weights", driver.learner_executor.execute("get_weights"))
  eval_return = (
    mean_greedy_return(
      lambda obs: policy.execute("get_actions", obs, False)["actions"].numpy(),
      settings.env,
      settings.eval_episodes,
      settings.seed + 10_000,
    )
    if settings.eval_episodes
    else float("nan")
  )
  with writer.as_default(step=env_steps):
    tf.summary.scalar("eval/episodic_return", eval_return)
  writer.flush()
  print(
    f"apex: {env_steps} env steps, {train_step} updates at "
    f"{env_steps / max(train_s, 1e-9):.0f} SPS; greedy eval return "
    f"{eval_return:.1f} over {settings.eval_episodes} episodes\n"
    f"logs and checkpoints: {run_dir}\n"
    f"apex: last-100 training return {recent.mean:.2f}; wall time "
    f"{time.time() - wall_start:.1f} s (training {train_s:.1f} s)",
    flush=True,
  )


if __name__ == "__main__":
  app.run(main)
