"""SAC experiment:

    python -m experiments.sac                      # Pendulum-v1, ~1 min
    python -m experiments.sac \
      --flagfile=experiments/flagfiles/sac_halfcheetah.cfg

Trains with the agent's in-graph loop (its `train` API: one graph call
runs `--steps_per_call` env steps: act, env step, store, and one whole SAC
update per step: critic, delayed actor and temperature, target move). With
no flags it runs the embedded Pendulum preset (experiments/configs.py,
SAC_PENDULUM). Flags are generated from `SACSettings` and `SACConfig`
(CleanRL's `sac_continuous_action.py` names: --buffer_size, --gamma,
--tau, --batch_size, --learning_starts, --policy_lr, --q_lr,
--policy_frequency, --target_network_frequency, --alpha, --autotune).

Logs TensorBoard scalars with CleanRL's names under `--logdir` (default
`runs/{env}__sac__{seed}__{time}`): losses/qf1_values, losses/qf_loss,
losses/actor_loss, losses/alpha, losses/alpha_loss (means over a train
call's updates; the actor's over its own steps), charts/episodic_return
(the mean of the episodes that ended in a call; charts/episodic_return_
last100 that of the last 100), charts/SPS. Checkpoints
there hold the whole agent, replay memory included; a rerun with the same
`--logdir` resumes. At the end the complete agent is exported as one
SavedModel (`saved_agent`) and its deterministic policy (`explore=False`)
is played in a fresh process that does not import ingraph_rl
(experiments/play_agent.py). The last line states that return.
"""

import os
import subprocess
import sys
import time

import tensorflow as tf
from absl import logging

from experiments import config_flags, configs
from ingraph_rl.agents.sac import SACBuilder
from ingraph_rl.environments import make_vector_env
from ingraph_rl.export import export_agent
from ingraph_rl.spaces import FloatBox
from ingraph_rl.utils.checkpoints import CheckpointSaver
from ingraph_rl.utils.episode_stats import RecentEpisodes

# One flag per field of SACSettings and SACConfig.
FLAG_HOLDERS = config_flags.define_flags(*configs.SAC_CLASSES)

PLAYER = os.path.join(
  os.path.dirname(os.path.abspath(__file__)), "play_agent.py"
)


def evaluate_in_fresh_process(saved_agent, env_id, episodes, seed):
  """Mean return of the exported agent's deterministic policy, played by
  experiments/play_agent.py in a new python (`-I`: no ingraph_rl)."""
  out = subprocess.run(
    [
      sys.executable,
      "-I",
      PLAYER,
      f"--saved_model={saved_agent}",
      f"--env={env_id}",
      f"--episodes={episodes}",
      f"--seed={seed}",
    ],
    capture_output=True,
    text=True,
    env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
  )
  if out.returncode != 0:
    raise RuntimeError(
      f"play_agent.py failed ({out.returncode}):\n{out.stderr[-3000:]}"
    )
  last = out.stdout.strip().splitlines()[-1]
  return float(last.split()[-1])


def write_scalars(writer, stats, env_steps, sps, recent):
  with writer.as_default(step=env_steps):
    if stats["episodes"]:
      tf.summary.scalar(
        "charts/episodic_return", stats["return_sum"] / stats["episodes"]
      )
      tf.summary.scalar("charts/episodic_return_last100", recent.mean)
      tf.summary.scalar(
        "charts/episodic_length", stats["length_sum"] / stats["episodes"]
      )
    if stats["updates"]:
      n = stats["updates"]
      tf.summary.scalar("losses/qf_loss", stats["qf_loss_sum"] / n)
      tf.summary.scalar("losses/qf1_values", stats["qf1_values_sum"] / n)
      tf.summary.scalar("losses/alpha", stats["alpha"])
    if stats["actor_updates"]:
      # Each actor update of `update` averages policy_frequency steps.
      n = stats["actor_updates"]
      tf.summary.scalar("losses/actor_loss", stats["actor_loss_sum"] / n)
      tf.summary.scalar("losses/alpha_loss", stats["alpha_loss_sum"] / n)
    tf.summary.scalar("charts/SPS", sps)


def main(argv):
  del argv
  wall_start = time.time()
  values = configs.sac_values()
  box = type("Box", (), {"action_space": FloatBox((1,), -1.0, 1.0)})()
  config_flags.check_flags(
    configs.SAC_CLASSES,
    values,
    configs=[lambda: configs.sac_config(values, box)],
  )
  settings = configs.sac_settings(values)
  configs.configure_tensorflow(settings)
  run_dir = configs.run_directory(settings, "sac")
  with config_flags.usage_of("env", settings.env):
    env = make_vector_env(settings.env, settings.num_envs, settings.seed)
  config = configs.sac_config(values, env)
  executor = SACBuilder(config).make_agent(env=env).build()
  logging.info(
    "built in %.2f s:\n%s", executor.stats.total_s, executor.describe()
  )
  # The module tracks every variable and RNG of the agent: weights, Adam
  # slots, the replay memory, the temperature, step counters.
  manager = CheckpointSaver(
    tf.train.Checkpoint(agent=executor.module),
    os.path.join(run_dir, "checkpoints"),
  )
  resumed = manager.restore()
  steps_var = executor.variables()["sac/env_steps"]
  if resumed:
    print(
      f"sac: resumed from {resumed} at env step {int(steps_var)}", flush=True
    )
  writer = tf.summary.create_file_writer(run_dir)
  with writer.as_default():
    tf.summary.text("hyperparameters", config_flags.table(values), 0)

  executor.execute("reset_env", settings.seed)
  env_steps = int(steps_var)
  last_save, start, start_steps = time.time(), time.time(), env_steps
  recent = RecentEpisodes(100)
  while env_steps < settings.total_timesteps and (
    settings.max_train_seconds is None
    or time.time() - start < settings.max_train_seconds
  ):
    t0 = time.time()
    left = -(-(settings.total_timesteps - env_steps) // env.num_envs)
    calls = min(settings.steps_per_call, left)
    stats = {k: v.numpy() for k, v in executor.execute("train", calls).items()}
    done = int(stats["env_steps"]) - env_steps
    env_steps = int(stats["env_steps"])
    sps = done / max(time.time() - t0, 1e-9)
    recent.add(stats["return_sum"], stats["episodes"])
    write_scalars(writer, stats, env_steps, sps, recent)
    logging.info(
      "env steps %d  SPS %.0f  episodes %d  last100 return %.1f  alpha %.3f",
      env_steps,
      sps,
      stats["episodes"],
      recent.mean,
      stats["alpha"],
    )
    if time.time() - last_save > 60 * settings.checkpoint_every_minutes:
      manager.save(checkpoint_number=env_steps)
      last_save = time.time()
  train_s = time.time() - start
  manager.save(checkpoint_number=env_steps)
  total_sps = (env_steps - start_steps) / max(train_s, 1e-9)
  saved_agent = os.path.join(run_dir, "saved_agent")
  export_agent(executor, saved_agent)
  env.close()
  summary = (
    f"sac: {env_steps} env steps at {total_sps:.0f} SPS; logs, checkpoints "
    f"and the exported agent: {run_dir}\n"
  )
  if settings.eval_episodes:
    eval_return = evaluate_in_fresh_process(
      saved_agent, settings.env, settings.eval_episodes, settings.seed + 10_000
    )
    with writer.as_default(step=env_steps):
      tf.summary.scalar("eval/episodic_return", eval_return)
    summary += (
      f"sac: deterministic return of the exported policy in a fresh "
      f"process {eval_return:.1f} over {settings.eval_episodes} episodes; "
    )
  writer.flush()
  print(
    summary + f"last-100 training return {recent.mean:.1f}; wall time "
    f"{time.time() - wall_start:.1f} s (training {train_s:.1f} s)",
    flush=True,
  )


if __name__ == "__main__":
  config_flags.run(main)
