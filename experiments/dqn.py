"""DQN experiment:

    python -m experiments.dqn --flagfile=experiments/flagfiles/dqn_cartpole.cfg

Trains with the agent's in-graph loop (its `train` API: one graph call
runs `--steps_per_call` vector steps: act, env step, observe, update,
sync; the Python-driven loop it replaces is benchmarks/dqn_loop.py's
baseline; --env_groups=2 double-buffers two groups of the envs, see
DQNAgent). With no flags it runs the embedded CartPole preset
(experiments/configs.py, DQN_CARTPOLE). Logs TensorBoard scalars with CleanRL's
names under `--logdir` (default `runs/{env}__dqn__{seed}__{time}`), keeps
checkpoints there (a rerun with the same `--logdir` resumes), and ends with a
greedy evaluation. Training stops at --total_env_steps or, after the train
call that passes it, --max_train_seconds. An env worker (DM Lab's) that
dies or stops answering (--env_step_timeout_s) stops the run: checkpoint,
one `[dqn] stopped: WorkerDiedError: ...` line, exit 1.

`charts/episodic_return` is the mean return of the episodes that ended in
one train call, `charts/episodes` how many they were, and
`charts/episodic_return_last100` the mean of the last 100: the in-graph
loop reports only per-call totals, so a call's k episodes count k times at
their mean (exact once a call's episodes are all in the window or all
out). The last line printed states that mean and the run's wall time.

Flags are generated from `DQNSettings` (experiments/configs.py) and
`DQNConfig` (each field's default and help); only the flags passed (on the
command line or in a flagfile) override the preset.
"""

import os
import time

import tensorflow as tf

from experiments import config_flags, configs
from experiments.progress import print_progress
from ingraph_rl.agents.dqn import DQNBuilder
from ingraph_rl.distributed.roles import env_failure
from ingraph_rl.environments import is_atari_id
from ingraph_rl.runners.environments import make_actor_env
from ingraph_rl.runners.evaluation import mean_greedy_return
from ingraph_rl.utils.checkpoints import CheckpointSaver
from ingraph_rl.utils.episode_stats import RecentEpisodes

# One flag per field of DQNSettings and DQNConfig.
FLAG_HOLDERS = config_flags.define_flags(*configs.DQN_CLASSES)


def make_env(env_id, num_envs, seed, env_groups=1, step_timeout_s=None):
  """The training env, env i seeded `seed + i`; with `env_groups` > 1 the
  same envs as a GroupedVectorEnv, which the agent's loop double-buffers
  (`DQNConfig.env_groups`). `step_timeout_s`: env workers'."""
  return make_actor_env(
    env_id,
    num_envs,
    seed,
    env_groups=env_groups,
    step_timeout_s=step_timeout_s,
  )


def evaluate(executor, env_id, episodes, seed):
  """Mean greedy return over `episodes` episodes, side by side (nan for
  none)."""
  if not episodes:
    return float("nan")
  return mean_greedy_return(
    lambda obs: executor.execute("get_actions", obs, False)["actions"].numpy(),
    env_id,
    episodes,
    seed + 10_000,
  )


def stop_on_env_failure(failure, manager, vector_steps, env):
  """An env worker died or stopped answering (--env_step_timeout_s) in a
  train call: saves what was learned, says which worker, closes the envs;
  the exit code (1)."""
  manager.save(checkpoint_number=int(vector_steps) * env.num_envs)
  env.close()
  print(
    f"[dqn] stopped: {failure}\n[dqn] saved {manager.latest_checkpoint}: "
    "a rerun with the same --logdir resumes",
    flush=True,
  )
  return 1


def main(argv):
  del argv
  wall_start = time.time()
  values = configs.dqn_values()
  config_flags.check_flags(
    configs.DQN_CLASSES,
    values,
    configs=[lambda: configs.dqn_config(values, 2, False)],
  )
  settings = configs.dqn_settings(values)
  configs.configure_tensorflow(settings)
  atari = is_atari_id(settings.env)
  run_dir = configs.run_directory(settings, "dqn")
  with config_flags.usage_of("env", settings.env):
    env = make_env(
      settings.env,
      settings.num_envs,
      settings.seed,
      values["env_groups"],
      settings.env_step_timeout_s,
    )
  # Atari's frames or DM Lab's: the Nature DQN torso on scaled frames.
  frames = atari or configs.is_frames(env.observation_space)
  config = configs.dqn_config(values, env.action_space.num_categories, frames)
  builder = DQNBuilder(
    config, preprocessor=configs.scaled_frames if frames else None
  )
  executor = builder.make_agent(env=env).build()
  print(
    f"[dqn] built in {executor.stats.total_s:.2f} s:\n{executor.describe()}",
    flush=True,
  )

  # The module tracks every variable and RNG of the agent: weights, Adam
  # slots, replay and priorities, epsilon step, step counter (see README).
  manager = CheckpointSaver(
    tf.train.Checkpoint(agent=executor.module),
    os.path.join(run_dir, "checkpoints"),
  )
  resumed = manager.restore()
  # The step counter lives in the graph.
  vector_steps = executor.variables()["dqn/vector_steps"]
  if resumed:
    print(
      f"dqn: resumed from {resumed} at env step "
      f"{int(vector_steps) * env.num_envs}",
      flush=True,
    )
  writer = tf.summary.create_file_writer(run_dir)
  with writer.as_default():
    tf.summary.text("hyperparameters", config_flags.table(values), 0)

  executor.execute("reset_env", settings.seed)
  env_steps = int(vector_steps) * env.num_envs
  last_save, start, start_steps = time.time(), time.time(), env_steps
  recent = RecentEpisodes(100)
  while env_steps < settings.total_env_steps and (
    settings.max_train_seconds is None
    or time.time() - start < settings.max_train_seconds
  ):
    t0 = time.time()
    try:
      stats = {
        k: v.numpy()
        for k, v in executor.execute("train", settings.steps_per_call).items()
      }
    except tf.errors.OpError as e:
      failure = env_failure(e)
      if failure is None:
        raise
      return stop_on_env_failure(failure, manager, vector_steps, env)
    done_steps = int(stats["env_steps"]) - env_steps
    env_steps = int(stats["env_steps"])
    sps = done_steps / max(time.time() - t0, 1e-9)
    recent.add(stats["return_sum"], stats["episodes"])
    with writer.as_default(step=env_steps):
      if stats["episodes"]:
        tf.summary.scalar(
          "charts/episodic_return", stats["return_sum"] / stats["episodes"]
        )
        tf.summary.scalar(
          "charts/episodic_length", stats["length_sum"] / stats["episodes"]
        )
        tf.summary.scalar("charts/episodes", stats["episodes"])
        tf.summary.scalar("charts/episodic_return_last100", recent.mean)
      if stats["updates"]:
        tf.summary.scalar(
          "losses/td_loss", stats["loss_sum"] / stats["updates"]
        )
      tf.summary.scalar("charts/SPS", sps)
    mean_return = stats["return_sum"] / max(stats["episodes"], 1)
    print_progress(
      "dqn",
      [
        ("env steps", f"{env_steps:>9d}"),
        ("SPS", f"{sps:7.0f}"),
        ("episodes", f"{int(stats['episodes']):4d}"),
        ("return", f"{mean_return:7.1f}"),
        ("last100", f"{recent.mean:7.1f}"),
      ],
      start,
    )
    if time.time() - last_save > 60 * settings.checkpoint_every_minutes:
      manager.save(checkpoint_number=env_steps)
      last_save = time.time()
  train_s = time.time() - start
  manager.save(checkpoint_number=env_steps)
  total_sps = (env_steps - start_steps) / max(train_s, 1e-9)
  eval_return = evaluate(
    executor, settings.env, settings.eval_episodes, settings.seed
  )
  with writer.as_default(step=env_steps):
    tf.summary.scalar("eval/episodic_return", eval_return)
  writer.flush()
  env.close()
  print(
    f"dqn: {env_steps} env steps at {total_sps:.0f} SPS; greedy eval "
    f"return {eval_return:.1f} over {settings.eval_episodes} episodes\n"
    f"logs and checkpoints: {run_dir}\n"
    f"dqn: last-100 training return {recent.mean:.2f} ({recent.count} "
    f"of {recent.total_episodes} episodes); wall time "
    f"{time.time() - wall_start:.1f} s (training {train_s:.1f} s)",
    flush=True,
  )


if __name__ == "__main__":
  config_flags.run(main)
