"""DQN experiment: `python -m experiments.dqn --flagfile=experiments/flagfiles/dqn_cartpole.cfg`.

Trains with the in-graph loop (one graph call runs `--steps_per_call`
vector steps: act, env step, observe, update, sync) or, for comparison, a
Python-driven loop (`--loop=python`). Logs TensorBoard scalars with CleanRL's
names under `--logdir` (default `runs/{env}__dqn__{seed}__{time}`), keeps
checkpoints there (a rerun with the same `--logdir` resumes), and ends with a
greedy evaluation. Training stops at --total_env_steps or, after the train
call that passes it, --max_train_seconds.

`charts/episodic_return` is the mean return of the episodes that ended in
one train call, `charts/episodes` how many they were, and
`charts/episodic_return_last100` the mean of the last 100: the in-graph
loop reports only per-call totals, so a call's k episodes count k times at
their mean (exact once a call's episodes are all in the window or all
out). The last line printed states that mean and the run's wall time.
"""

import os
import time

from absl import app
from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

from ingraph_rl.agents.dqn import DQNAgent, DQNConfig
from ingraph_rl.components.networks import NATURE_DQN_SPEC
from ingraph_rl.components.preprocessing import Cast, Divide, PreprocessorStack
from ingraph_rl.environments import is_atari_id, make_vector_env
from ingraph_rl.utils.checkpoints import CheckpointSaver
from ingraph_rl.utils.episode_stats import RecentEpisodes

ENV = flags.DEFINE_string("env", "CartPole-v1", "gymnasium id, ALE/... or atari:<game>.")
NUM_ENVS = flags.DEFINE_integer("num_envs", 4, "Environments stepped together.")
TOTAL_ENV_STEPS = flags.DEFINE_integer("total_env_steps", 60_000, "Training budget in env steps.")
MAX_TRAIN_SECONDS = flags.DEFINE_float("max_train_seconds", None, "Also stop training after this much wall time from its start (checked after each train call; then checkpoint and evaluate as usual); default: no limit.")
STEPS_PER_CALL = flags.DEFINE_integer("steps_per_call", 250, "Vector steps per in-graph train call.")
LOOP = flags.DEFINE_enum("loop", "in_graph", ["in_graph", "python"], "Training loop.")
LEARNING_RATE = flags.DEFINE_float("learning_rate", 2.5e-4, "Adam learning rate.")
REPLAY_SIZE = flags.DEFINE_integer("replay_size", 50_000, "Replay capacity.")
BATCH_SIZE = flags.DEFINE_integer("batch_size", 64, "Update batch size.")
LEARNING_STARTS = flags.DEFINE_integer("learning_starts", 1_000, "Env steps before updates.")
UPDATE_EVERY = flags.DEFINE_integer("update_every", 1, "Vector steps between updates.")
TARGET_SYNC_EVERY = flags.DEFINE_integer("target_sync_every", 500, "Vector steps between target syncs.")
EPSILON_STEPS = flags.DEFINE_integer("epsilon_steps", 10_000, "Env steps of epsilon decay.")
EPSILON_FINAL = flags.DEFINE_float("epsilon_final", 0.05, "Final exploration rate.")
DISCOUNT = flags.DEFINE_float("discount", 0.99, "Discount.")
N_STEP = flags.DEFINE_integer("n_step", 1, "Steps of the bootstrapped return (n-step DQN).")
DUELING = flags.DEFINE_bool("dueling", True, "Dueling head.")
DOUBLE_Q = flags.DEFINE_bool("double_q", True, "Double-Q targets.")
PRIORITIZED = flags.DEFINE_bool("prioritized", False, "Prioritized replay.")
SEED = flags.DEFINE_integer("seed", 0, "Seed.")
LOGDIR = flags.DEFINE_string("logdir", None, "Run directory (resumes if it has checkpoints).")
CHECKPOINT_MINUTES = flags.DEFINE_float("checkpoint_every_minutes", 5.0, "Checkpoint period.")
EVAL_EPISODES = flags.DEFINE_integer("eval_episodes", 20, "Greedy evaluation episodes at the end.")


_ALL_FLAGS = [ENV, NUM_ENVS, TOTAL_ENV_STEPS, STEPS_PER_CALL, LOOP,
              LEARNING_RATE, REPLAY_SIZE, BATCH_SIZE, LEARNING_STARTS,
              UPDATE_EVERY, TARGET_SYNC_EVERY, EPSILON_STEPS, EPSILON_FINAL,
              DISCOUNT, N_STEP, DUELING, DOUBLE_Q, PRIORITIZED, SEED,
              MAX_TRAIN_SECONDS]


def make_config(num_actions, atari):
  return DQNConfig(
      num_actions=num_actions,
      network=tuple(NATURE_DQN_SPEC) if atari else DQNConfig.network,
      dueling=DUELING.value, double_q=DOUBLE_Q.value,
      discount=DISCOUNT.value, n_step=N_STEP.value,
      learning_rate=LEARNING_RATE.value,
      replay_capacity=REPLAY_SIZE.value, prioritized=PRIORITIZED.value,
      batch_size=BATCH_SIZE.value, epsilon_to=EPSILON_FINAL.value,
      epsilon_steps=EPSILON_STEPS.value,
      learning_starts=LEARNING_STARTS.value,
      update_every=UPDATE_EVERY.value,
      target_sync_every=TARGET_SYNC_EVERY.value, seed=SEED.value)


def python_loop_steps(executor, env, obs, num_steps, config, counter):
  """The Python-driven loop: one executor call per act/observe/update."""
  totals = dict(episodes=0, return_sum=0.0, length_sum=0, loss_sum=0.0,
                updates=0)
  for _ in range(num_steps):
    actions = executor.execute("get_actions", obs, True)["actions"].numpy()
    step = env.step(actions)
    # n-step observe also takes `truncated`: episode ends cut n-step sums.
    extra = (step.truncated,) if config.n_step > 1 else ()
    executor.execute("observe", obs, actions, step.rewards, step.final_obs,
                     step.terminated, *extra)
    obs = step.obs
    counter["vector_steps"] += 1
    v = counter["vector_steps"]
    if v * env.num_envs >= config.learning_starts and \
        v % config.update_every == 0:
      totals["loss_sum"] += float(executor.execute("update")["loss"])
      totals["updates"] += 1
    if v % config.target_sync_every == 0:
      executor.execute("sync_target")
    done = step.terminated | step.truncated
    totals["episodes"] += int(done.sum())
    totals["return_sum"] += float(step.episode_returns.sum())
    totals["length_sum"] += int(step.episode_lengths.sum())
  totals["env_steps"] = counter["vector_steps"] * env.num_envs
  return totals, obs


def evaluate(executor, env_id, episodes, seed):
  """Mean greedy return over `episodes` episodes of one env."""
  env = make_vector_env(env_id, 1, seed + 10_000)
  obs, returns = env.reset(), []
  while len(returns) < episodes:
    actions = executor.execute("get_actions", obs, False)["actions"].numpy()
    step = env.step(actions)
    obs = step.obs
    if step.terminated[0] or step.truncated[0]:
      returns.append(float(step.episode_returns[0]))
  env.close()
  return float(np.mean(returns))


def main(argv):
  del argv
  wall_start = time.time()
  atari = is_atari_id(ENV.value)
  run_dir = LOGDIR.value or os.path.join(
      "runs", f"{ENV.value.replace('/', '_')}__dqn__{SEED.value}__"
      f"{int(time.time())}")
  env = make_vector_env(ENV.value, NUM_ENVS.value, SEED.value)
  config = make_config(env.action_space.num_categories, atari)
  preprocessor = PreprocessorStack(Cast("float32"), Divide(255.0)) \
      if atari else None
  agent = DQNAgent(config, env, preprocessor=preprocessor)
  executor = agent.build()
  logging.info("built in %.2f s:\n%s", executor.stats.total_s,
               executor.describe())

  # The module tracks every variable and RNG of the agent: weights, Adam
  # slots, replay and priorities, epsilon step, step counter (see README).
  manager = CheckpointSaver(tf.train.Checkpoint(agent=executor.module),
                            os.path.join(run_dir, "checkpoints"))
  resumed = manager.restore()
  # The step counter lives in the graph (the Python loop copies it back).
  vector_steps = executor.variables()["dqn/vector_steps"]
  if resumed:
    print(f"dqn: resumed from {resumed} at env step "
          f"{int(vector_steps) * env.num_envs}", flush=True)
  writer = tf.summary.create_file_writer(run_dir)
  with writer.as_default():
    table = "\n".join(f"|{h.name}|{h.value}|" for h in _ALL_FLAGS)
    tf.summary.text("hyperparameters", "|param|value|\n|-|-|\n" + table, 0)

  obs = executor.execute("reset_env", SEED.value).numpy()
  counter = {"vector_steps": int(vector_steps)}
  env_steps = counter["vector_steps"] * env.num_envs
  last_save, start, start_steps = time.time(), time.time(), env_steps
  recent = RecentEpisodes(100)
  while env_steps < TOTAL_ENV_STEPS.value and (
      MAX_TRAIN_SECONDS.value is None or
      time.time() - start < MAX_TRAIN_SECONDS.value):
    t0 = time.time()
    if LOOP.value == "in_graph":
      stats = {k: v.numpy() for k, v in
               executor.execute("train", STEPS_PER_CALL.value).items()}
    else:
      stats, obs = python_loop_steps(executor, env, obs,
                                     STEPS_PER_CALL.value, config, counter)
    done_steps = int(stats["env_steps"]) - env_steps
    env_steps = int(stats["env_steps"])
    sps = done_steps / max(time.time() - t0, 1e-9)
    recent.add(stats["return_sum"], stats["episodes"])
    with writer.as_default(step=env_steps):
      if stats["episodes"]:
        tf.summary.scalar("charts/episodic_return",
                          stats["return_sum"] / stats["episodes"])
        tf.summary.scalar("charts/episodic_length",
                          stats["length_sum"] / stats["episodes"])
        tf.summary.scalar("charts/episodes", stats["episodes"])
        tf.summary.scalar("charts/episodic_return_last100", recent.mean)
      if stats["updates"]:
        tf.summary.scalar("losses/td_loss",
                          stats["loss_sum"] / stats["updates"])
      tf.summary.scalar("charts/SPS", sps)
    mean_return = stats["return_sum"] / max(stats["episodes"], 1)
    logging.info("env steps %d  SPS %.0f  episodes %d  mean return %.1f  "
                 "last100 %.1f", env_steps, sps, stats["episodes"],
                 mean_return, recent.mean)
    if time.time() - last_save > 60 * CHECKPOINT_MINUTES.value:
      vector_steps.assign(env_steps // env.num_envs)
      manager.save(checkpoint_number=env_steps)
      last_save = time.time()
  train_s = time.time() - start
  vector_steps.assign(env_steps // env.num_envs)
  manager.save(checkpoint_number=env_steps)
  total_sps = (env_steps - start_steps) / max(train_s, 1e-9)
  eval_return = evaluate(executor, ENV.value, EVAL_EPISODES.value, SEED.value)
  with writer.as_default(step=env_steps):
    tf.summary.scalar("eval/episodic_return", eval_return)
  writer.flush()
  env.close()
  print(f"dqn: {env_steps} env steps at {total_sps:.0f} SPS; greedy eval "
        f"return {eval_return:.1f} over {EVAL_EPISODES.value} episodes\n"
        f"logs and checkpoints: {run_dir}\n"
        f"dqn: last-100 training return {recent.mean:.2f} ({recent.count} "
        f"of {recent.total_episodes} episodes); wall time "
        f"{time.time() - wall_start:.1f} s (training {train_s:.1f} s)",
        flush=True)


if __name__ == "__main__":
  app.run(main)
