"""PPO experiment (CleanRL's ppo.py / ppo_atari.py / ppo_continuous_action.py
semantics, flags of CleanRL's names):

    python -m experiments.ppo                       # CartPole-v1 (embedded)
    python -m experiments.ppo --flagfile=experiments/flagfiles/ppo_pong.cfg
    python -m experiments.ppo \
        --flagfile=experiments/flagfiles/ppo_halfcheetah.cfg

Each iteration is TWO graph calls: `rollout` (num_envs x num_steps env
steps in a tf.while_loop, with in-graph observation normalization and
reward scaling where the preset asks) and `update` (GAE, then
update_epochs x num_minibatches Adam steps, target_kl early stop, all in
one call). Logs TensorBoard scalars with CleanRL's names under `--logdir`
(default `runs/{env}__ppo__{seed}__{time}`): charts/episodic_return,
charts/episodic_length, charts/SPS, charts/learning_rate,
losses/{policy_loss, value_loss, entropy, approx_kl, clipfrac,
explained_variance}, and charts/episodic_return_last100 (the mean of the
last 100 episodes, as the other experiments). Keeps checkpoints there (a
rerun with the same `--logdir` resumes), exports the complete agent as a
SavedModel (`saved_agent`: action, update, minibatch_step, get/set_weights,
get_train_step; not the env-stepping rollout) and ends with a
deterministic evaluation of the EXPORTED agent in a fresh process
(experiments/play_agent.py). Training stops at --total_timesteps or,
after the iteration that passes it, --max_train_seconds.

Flags are generated from `PPOSettings` (experiments/configs.py) and
`PPOConfig`; only the flags passed override the preset.
"""

import os
import subprocess
import sys
import time

import tensorflow as tf
from absl import logging

from experiments import config_flags, configs
from experiments.progress import print_progress
from ingraph_rl.agents.ppo import PPOBuilder
from ingraph_rl.export import export_agent
from ingraph_rl.runners.environments import make_actor_env
from ingraph_rl.utils.checkpoints import CheckpointSaver
from ingraph_rl.utils.episode_stats import RecentEpisodes

# One flag per field of PPOSettings and PPOConfig.
FLAG_HOLDERS = config_flags.define_flags(*configs.PPO_CLASSES)

LOSSES = (
  "policy_loss",
  "value_loss",
  "entropy",
  "approx_kl",
  "clipfrac",
  "explained_variance",
)


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


def write_summaries(writer, env_steps, rollout, update, sps, recent):
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
    tf.summary.scalar("charts/learning_rate", update["learning_rate"])
    for name in LOSSES:
      tf.summary.scalar(f"losses/{name}", update[name])


def main(argv):
  del argv
  wall_start = time.time()
  values = configs.ppo_values()
  discrete = type("Discrete", (), {"num_categories": 2})()
  config_flags.check_flags(
    configs.PPO_CLASSES,
    values,
    configs=[lambda: configs.ppo_config(values, discrete)],
  )
  settings = configs.ppo_settings(values)
  configs.set_intra_op_threads(settings.intra_op_threads)
  run_dir = configs.run_directory(settings, "ppo")
  with config_flags.usage_of("env", settings.env):
    env = make_actor_env(settings.env, settings.num_envs, settings.seed)
  config = configs.ppo_config(values, env.action_space)
  builder = PPOBuilder(config)
  executor = builder.make_agent(env=env).build()
  logging.info(
    "built in %.2f s:\n%s", executor.stats.total_s, executor.describe()
  )

  # The module tracks every variable and RNG of the agent: weights, Adam
  # slots, observation and return statistics, the annealing step, counters.
  manager = CheckpointSaver(
    tf.train.Checkpoint(agent=executor.module),
    os.path.join(run_dir, "checkpoints"),
  )
  resumed = manager.restore()
  counter = executor.variables()["ppo/env_steps"]
  if resumed:
    print(f"ppo: resumed from {resumed} at env step {int(counter)}", flush=True)
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
    write_summaries(writer, env_steps, rollout, update, sps, recent)
    if time.time() - last_log > settings.log_every_seconds:
      last_log = time.time()
      print_progress(
        "ppo",
        [
          ("env steps", env_steps),
          ("SPS", f"{sps:.0f}"),
          ("last100", f"{recent.mean:.1f}"),
          ("policy_loss", f"{update['policy_loss']:.4f}"),
          ("value_loss", f"{update['value_loss']:.4f}"),
          ("approx_kl", f"{update['approx_kl']:.5f}"),
          ("clipfrac", f"{update['clipfrac']:.3f}"),
          ("epochs", int(update["epochs"])),
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
    f"ppo: exported {sorted(result.exported)} to {saved_agent} "
    f"(not exported: {sorted(result.skipped)})",
    flush=True,
  )
  lines = [
    f"ppo: {env_steps} env steps at "
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
      f"ppo: deterministic return of the exported agent in a fresh "
      f"process: {mean:.1f} over {settings.eval_episodes} episodes"
    )
  lines.append(
    f"ppo: last-100 training return {recent.mean:.2f} ({recent.count} of "
    f"{recent.total_episodes} episodes); wall time "
    f"{time.time() - wall_start:.1f} s (training {train_s:.1f} s)"
  )
  print("\n".join(lines), flush=True)


if __name__ == "__main__":
  config_flags.run(main)
