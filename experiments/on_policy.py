"""The loop that experiments/ppo.py and experiments/trpo.py share: build
the agent on a vector env, alternate `rollout` and `update` graph calls,
log CleanRL's scalars, checkpoint and resume, export the complete agent
and evaluate it deterministically in a fresh process.

Defines no flags: each experiment defines its own (from its config
classes) and passes an `Experiment` saying what differs.
"""

import dataclasses
import os
import subprocess
import sys
import time
from typing import Callable, Tuple

import tensorflow as tf
from absl import logging

from experiments import config_flags, configs
from experiments.progress import print_progress
from ingraph_rl.export import export_agent
from ingraph_rl.runners.environments import make_actor_env
from ingraph_rl.utils.checkpoints import CheckpointSaver
from ingraph_rl.utils.episode_stats import RecentEpisodes


@dataclasses.dataclass(frozen=True)
class Experiment:
  name: str  # "ppo": the run directory's, the output's and the scope's.
  classes: tuple  # (settings class, config class): the flags' source.
  values: Callable[[], dict]  # The run's values (preset + flags).
  config: Callable  # (values, action_space) -> the agent's config.
  builder: Callable  # config -> the agent's builder.
  losses: Tuple[str, ...]  # `update` outputs logged as losses/<name>.
  progress: Tuple[Tuple[str, str, str], ...]  # (label, update key, format)
  # `update` outputs logged as charts/<name>.
  charts: Tuple[str, ...] = ()


def play_in_fresh_process(env_id, saved_agent, episodes, seed):
  """Mean deterministic return of the exported agent, played by
  experiments/play_agent.py in a python that cannot import ingraph_rl."""
  script = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "play_agent.py"
  )
  env = dict(os.environ)
  env.pop("PYTHONPATH", None)
  out = subprocess.run(
    [
      sys.executable,
      "-I",
      script,
      f"--saved_model={saved_agent}",
      f"--env={env_id}",
      f"--episodes={episodes}",
      f"--seed={seed}",
    ],
    env=env,
    capture_output=True,
    text=True,
    timeout=1800,
    check=True,
    cwd="/",
  )
  return float(out.stdout.strip().splitlines()[-1].split()[-1])


def write_summaries(spec, writer, env_steps, rollout, update, sps, recent):
  with writer.as_default(step=env_steps):
    if rollout["episodes"]:
      episodes = rollout["episodes"]
      tf.summary.scalar(
        "charts/episodic_return", rollout["return_sum"] / episodes
      )
      tf.summary.scalar(
        "charts/episodic_length", rollout["length_sum"] / episodes
      )
      tf.summary.scalar("charts/episodic_return_last100", recent.mean)
    tf.summary.scalar("charts/SPS", sps)
    for name in spec.charts:
      tf.summary.scalar(f"charts/{name}", update[name])
    for name in spec.losses:
      tf.summary.scalar(f"losses/{name}", update[name])


def main(spec):
  name = spec.name
  wall_start = time.time()
  values = spec.values()
  discrete = type("Discrete", (), {"num_categories": 2})()
  config_flags.check_flags(
    spec.classes,
    values,
    configs=[lambda: spec.config(values, discrete)],
  )
  settings = configs.ppo_settings(values)
  configs.configure_tensorflow(settings)
  run_dir = configs.run_directory(settings, name)
  with config_flags.usage_of("env", settings.env):
    env = make_actor_env(settings.env, settings.num_envs, settings.seed)
  builder = spec.builder(spec.config(values, env.action_space))
  executor = builder.make_agent(env=env).build()
  logging.info(
    "built in %.2f s:\n%s", executor.stats.total_s, executor.describe()
  )

  # The module tracks every variable and RNG of the agent: weights,
  # optimizer slots, observation and return statistics, counters.
  manager = CheckpointSaver(
    tf.train.Checkpoint(agent=executor.module),
    os.path.join(run_dir, "checkpoints"),
  )
  resumed = manager.restore()
  counter = executor.variables()[f"{name}/env_steps"]
  if resumed:
    print(
      f"{name}: resumed from {resumed} at env step {int(counter)}", flush=True
    )
  writer = tf.summary.create_file_writer(run_dir)
  with writer.as_default():
    tf.summary.text("hyperparameters", config_flags.table(values), 0)

  executor.execute("reset_env", settings.seed)
  env_steps = start_steps = int(counter)
  last_save = last_log = start = time.time()
  recent = RecentEpisodes(100)
  while env_steps < settings.total_timesteps and (
    settings.max_train_seconds is None
    or time.time() - start < settings.max_train_seconds
  ):
    t0 = time.time()
    out = executor.execute("rollout")
    update = {
      k: v.numpy() for k, v in executor.execute("update", out["batch"]).items()
    }
    rollout = {k: v.numpy() for k, v in out["stats"].items()}
    sps = (int(rollout["env_steps"]) - env_steps) / max(time.time() - t0, 1e-9)
    env_steps = int(rollout["env_steps"])
    recent.add(rollout["return_sum"], rollout["episodes"])
    write_summaries(spec, writer, env_steps, rollout, update, sps, recent)
    if time.time() - last_log > settings.log_every_seconds:
      last_log = time.time()
      print_progress(
        name,
        [
          ("env steps", env_steps),
          ("SPS", f"{sps:.0f}"),
          ("last100", f"{recent.mean:.1f}"),
          *((label, format(update[k], f)) for label, k, f in spec.progress),
        ],
        start,
      )
    if time.time() - last_save > 60 * settings.checkpoint_every_minutes:
      manager.save(checkpoint_number=env_steps)
      last_save = time.time()
  train_s = time.time() - start
  manager.save(checkpoint_number=env_steps)
  writer.flush()
  env.close()
  saved_agent = os.path.join(run_dir, "saved_agent")
  result = export_agent(executor, saved_agent)
  print(
    f"{name}: exported {sorted(result.exported)} to {saved_agent} "
    f"(not exported: {sorted(result.skipped)})",
    flush=True,
  )
  lines = [
    f"{name}: {env_steps} env steps at "
    f"{(env_steps - start_steps) / max(train_s, 1e-9):.0f} SPS",
    f"logs and checkpoints: {run_dir}",
  ]
  if settings.eval_episodes:
    mean = play_in_fresh_process(
      settings.env, saved_agent, settings.eval_episodes, settings.seed + 10_000
    )
    with writer.as_default(step=env_steps):
      tf.summary.scalar("eval/episodic_return", mean)
    writer.flush()
    lines.append(
      f"{name}: deterministic return of the exported agent in a fresh "
      f"process: {mean:.1f} over {settings.eval_episodes} episodes"
    )
  lines.append(
    f"{name}: last-100 training return {recent.mean:.2f} ({recent.count} of "
    f"{recent.total_episodes} episodes); wall time "
    f"{time.time() - wall_start:.1f} s (training {train_s:.1f} s)"
  )
  print("\n".join(lines), flush=True)
