"""IMPALA experiment (the main job): `python -m experiments.impala`.

With no flags it trains CartPole-v1 on this machine (2 actors x 8 envs,
a few minutes on 2 cores); flagfiles hold the other setups:

    python -m experiments.impala --flagfile=experiments/flagfiles/impala_pong.cfg
    python -m experiments.impala --flagfile=experiments/flagfiles/impala_dmlab.cfg

Actors are threads in this process, each stepping its own vector env (in
env worker processes with --env_processes; DM Lab always) in one graph
call per unroll and enqueueing rollouts; the learner trains on batches of
them (V-trace, RMSProp) and publishes its weights, which actors load
before each unroll.

Under --logdir (default runs/{env}__impala__{seed}__{time}): TensorBoard
scalars with CleanRL's names, checkpoints every --checkpoint_every_minutes
(a rerun with the same --logdir resumes from the latest), and at the end the
policy as a SavedModel (`saved_policy/`, signatures action,
get_initial_state, get_train_step), which is then loaded and played in a
fresh process that does not import ingraph_rl (experiments/play_policy.py).
Training stops at --total_environment_frames or after --max_train_seconds.

`charts/episodic_return` is the mean return of the episodes that ended
since the previous learner update, `charts/episodes` how many they were,
and `charts/episodic_return_last100` the mean of the last 100 (an env's k
episodes of one unroll count k times at their mean). The last line printed
states that mean and the run's wall time.

DMLab-30 (`--env=dmlab:dmlab30`): actors' envs get disjoint level offsets,
so actors x envs >= 30 covers every level. Each level's returns are logged
as `charts/episodic_return/<level>`, and every --log_every_seconds its
human-normalized score (`dmlab30/hns/<level>`) and, once every level has
episodes, the mean capped score (`dmlab30/mean_capped_hns`), each level
scored on the mean of its last LEVEL_WINDOW (10) episodes: recent enough
to follow training, enough episodes to smooth a level's noise. The run
ends by printing that per-level table, writing it to
`dmlab30_scores.json`, and evaluating the exported policy on the 30 test
levels in a fresh process (experiments/evaluate_dmlab.py; its JSON goes to
`dmlab30_test_scores.json`).
"""

import json
import os
import subprocess
import sys
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from ingraph_rl.agents.impala import IMPALAConfig
from ingraph_rl.agents.impala.driver import IMPALADriver
from ingraph_rl.agents.impala.environments import (env_kind, make_actor_env,
                                                   num_action_repeats_for)
from ingraph_rl.distributed import roles
from ingraph_rl.environments import dmlab30, dmlab_set_name
from ingraph_rl.export import export_impala_policy
from ingraph_rl.utils.checkpoints import CheckpointSaver
from ingraph_rl.utils.episode_stats import RecentEpisodes

# scalable_agent's flag names where it has them.
NUM_ACTORS = flags.DEFINE_integer("num_actors", 2, "Actor threads.")
BATCH_SIZE = flags.DEFINE_integer("batch_size", 8, "Rollouts per learner batch.")
UNROLL_LENGTH = flags.DEFINE_integer("unroll_length", 20, "Steps per rollout.")
NUM_ACTION_REPEATS = flags.DEFINE_integer(
    "num_action_repeats", None, "Frames per agent step (ALE frame skip, DM Lab repeats); default 4 there, 1 for gymnasium.")
ENTROPY_COST = flags.DEFINE_float("entropy_cost", 0.01, "Entropy cost.")
BASELINE_COST = flags.DEFINE_float("baseline_cost", 0.5, "Baseline cost.")
DISCOUNTING = flags.DEFINE_float("discounting", 0.99, "Discount factor.")
REWARD_CLIPPING = flags.DEFINE_enum(
    "reward_clipping", "none", ["abs_one", "soft_asymmetric", "none"], "Reward clipping.")
LEARNING_RATE = flags.DEFINE_float("learning_rate", 0.001, "RMSProp learning rate.")
TOTAL_FRAMES = flags.DEFINE_integer(
    "total_environment_frames", 800_000, "Frames (env steps x action repeats) to train on.")
MAX_TRAIN_SECONDS = flags.DEFINE_float(
    "max_train_seconds", None, "Also stop training after this much wall time from its start (then checkpoint, export and evaluate as usual); default: no limit.")
DECAY = flags.DEFINE_float("decay", 0.99, "RMSProp decay.")
MOMENTUM = flags.DEFINE_float("momentum", 0.0, "RMSProp momentum.")
EPSILON = flags.DEFINE_float("epsilon", 0.01, "RMSProp epsilon.")
# Ours.
ENV = flags.DEFINE_string("env", "CartPole-v1", "gymnasium id, ALE/<Game>-v5, atari:<game> or dmlab:<level>.")
NUM_ENVS = flags.DEFINE_integer("num_envs_per_actor", 8, "Envs each actor steps together.")
ENV_PROCESSES = flags.DEFINE_bool("env_processes", False, "Step envs in env worker processes (shared memory; gymnasium: one per env, Atari: one per actor). DM Lab always steps in workers, one per env.")
TORSO = flags.DEFINE_enum("torso", "mlp", ["mlp", "small", "large"], "Network torso.")
LSTM_UNITS = flags.DEFINE_integer("lstm_units", 0, "LSTM size (0: feed-forward).")
FEED_REWARD_ACTION = flags.DEFINE_bool("feed_reward_action", True, "Feed the clipped last reward and one-hot last action to the core (scalable_agent).")
BOOTSTRAP_ON_TRUNCATION = flags.DEFINE_bool("bootstrap_on_truncation", True, "Bootstrap returns from V(final observation) where a time limit truncates an episode.")
CLIP_GRAD_NORM = flags.DEFINE_float("clip_grad_norm", 40.0, "Global-norm clip (0: off).")
LR_DECAY = flags.DEFINE_bool("lr_decay", True, "Decay the learning rate linearly to 0 over the budget.")
QUEUE_CAPACITY = flags.DEFINE_integer("queue_capacity", 32, "Rollouts the queue holds.")
SEED = flags.DEFINE_integer("seed", 0, "Seed.")
LOGDIR = flags.DEFINE_string("logdir", None, "Run directory (resumes if it has checkpoints).")
CHECKPOINT_MINUTES = flags.DEFINE_float("checkpoint_every_minutes", 5.0, "Checkpoint period.")
LOG_EVERY_S = flags.DEFINE_float("log_every_seconds", 5.0, "Progress line period.")
# Cluster roles (see ingraph_rl/distributed and experiments/launch_local.py).
JOB_NAME = flags.DEFINE_enum("job_name", None, ["ps", "learner", "actor"], "Cluster role (none: everything in this process).")
TASK = flags.DEFINE_integer("task", 0, "Task index within --job_name.")
CLUSTER = flags.DEFINE_string("cluster", None, 'Cluster spec: JSON {"ps": [...], "learner": [...], "actor": [...]} or "ps=h:p;learner=h:p;actor=h:p,h:p"; default: TF_CONFIG.')
ALLOW_REMOTE = flags.DEFINE_bool("allow_remote_hosts", False, "Allow non-loopback cluster addresses (TF gRPC has no authentication: trusted networks only).")
EVAL_EPISODES = flags.DEFINE_integer(
    "eval_episodes", 20, "Greedy episodes the exported policy plays in a fresh process (0: none).")

_ALL_FLAGS = [NUM_ACTORS, BATCH_SIZE, UNROLL_LENGTH, NUM_ACTION_REPEATS,
              ENTROPY_COST, BASELINE_COST, DISCOUNTING, REWARD_CLIPPING,
              LEARNING_RATE, TOTAL_FRAMES, DECAY, MOMENTUM, EPSILON, ENV,
              NUM_ENVS, ENV_PROCESSES, TORSO, LSTM_UNITS, FEED_REWARD_ACTION,
              BOOTSTRAP_ON_TRUNCATION, CLIP_GRAD_NORM, LR_DECAY,
              QUEUE_CAPACITY, SEED, MAX_TRAIN_SECONDS]

# Training episodes behind each rolling mean: all levels together, and
# per DMLab-30 level (see the module docstring).
LAST_EPISODES = 100
LEVEL_WINDOW = 10


def make_config(num_actions, frames_per_update):
  torso = {"mlp": IMPALAConfig.torso, "small": "small",
           "large": "large"}[TORSO.value]
  return IMPALAConfig(
      num_actions=num_actions, torso=torso,
      lstm_units=LSTM_UNITS.value or None,
      feed_reward_action=FEED_REWARD_ACTION.value,
      bootstrap_on_truncation=BOOTSTRAP_ON_TRUNCATION.value,
      unroll_length=UNROLL_LENGTH.value, batch_size=BATCH_SIZE.value,
      discounting=DISCOUNTING.value, baseline_cost=BASELINE_COST.value,
      entropy_cost=ENTROPY_COST.value, reward_clipping=REWARD_CLIPPING.value,
      learning_rate=LEARNING_RATE.value, decay=DECAY.value,
      momentum=MOMENTUM.value, epsilon=EPSILON.value,
      clip_grad_norm=CLIP_GRAD_NORM.value or None,
      lr_decay_steps=max(1, TOTAL_FRAMES.value // frames_per_update)
      if LR_DECAY.value else None,
      queue_capacity=QUEUE_CAPACITY.value, seed=SEED.value)


class Progress:
  """TensorBoard scalars, the progress line and periodic checkpoints, run
  after every learner update (in the learner thread).

  `levels`: for DM Lab level sets, each actor's env levels ([actor][env]
  -> level path); their episodes are also tracked per level."""

  def __init__(self, totals, writer, manager, frames_var, repeats, start,
               levels=None):
    self.totals, self.writer, self.manager = totals, writer, manager
    self.frames_var, self.repeats = frames_var, repeats
    self.start_frames = start
    self.t0 = self.t_log = self.t_save = time.time()
    self.frames_log = start
    self.last_return = float("nan")
    self.recent = RecentEpisodes(LAST_EPISODES)
    self.levels = levels
    self.by_level = None if levels is None else {
        dmlab30.short_name(level): RecentEpisodes(LEVEL_WINDOW)
        for env_levels in levels for level in env_levels}

  def __call__(self, out, frames_this_run):
    frames = self.start_frames + frames_this_run * self.repeats
    self.frames_var.assign(frames)
    episodes, return_sum, length_sum, groups = \
        self.totals.take_episodes() if self.totals else (0, 0.0, 0, [])
    for _, _, k, group_return, _ in groups:
      self.recent.add(group_return, k)
    # Unrolls without per-env stats (none here) count as one group.
    self.recent.add(return_sum - sum(g[3] for g in groups),
                    episodes - sum(g[2] for g in groups))
    now = time.time()
    with self.writer.as_default(step=frames):
      if episodes:
        self.last_return = return_sum / episodes
        tf.summary.scalar("charts/episodic_return", self.last_return)
        tf.summary.scalar("charts/episodic_length", length_sum / episodes)
        tf.summary.scalar("charts/episodes", episodes)
        tf.summary.scalar("charts/episodic_return_last100", self.recent.mean)
      if self.levels is not None:
        self._log_level_returns(groups)
      tf.summary.scalar("losses/total_loss", out["loss"])
      tf.summary.scalar("losses/policy_loss", out["pg_loss"])
      tf.summary.scalar("losses/value_loss", out["baseline_loss"])
      tf.summary.scalar("losses/entropy", out["mean_entropy"])
      tf.summary.scalar("charts/mean_rho", out["mean_rho"])
      tf.summary.scalar("charts/grad_norm", out["grad_norm"])
    if now - self.t_log >= LOG_EVERY_S.value:
      fps = (frames - self.frames_log) / (now - self.t_log)
      line = (f"[impala] frames {frames:>9d}  fps {fps:7.0f}  "
              f"updates {int(out['train_step']):6d}  "
              f"return {self.last_return:7.1f}  "
              f"last100 {self.recent.mean:7.1f}  "
              f"loss {float(out['loss']):9.2f}")
      with self.writer.as_default(step=frames):
        tf.summary.scalar("charts/SPS", fps)
        if self.levels is not None:
          report = self.level_report()
          for name, row in report["levels"].items():
            if row["human_normalized_score"] is not None:
              tf.summary.scalar(f"dmlab30/hns/{name}",
                                row["human_normalized_score"])
          if report["complete"]:
            tf.summary.scalar("dmlab30/mean_capped_hns",
                              report["mean_capped_hns"])
          mean = report["mean_capped_hns"]
          line += (f"  capped hns {float('nan') if mean is None else mean:6.1f}"
                   f" ({report['num_levels']}/{len(dmlab30.TEST_LEVELS)} "
                   f"levels)")
      print(line, flush=True)
      self.t_log, self.frames_log = now, frames
    if now - self.t_save >= 60 * CHECKPOINT_MINUTES.value:
      self.manager.save(checkpoint_number=frames)
      self.t_save = now
    return frames

  def _log_level_returns(self, groups):
    """Each level's mean return over this update's episodes."""
    sums = {}
    for actor, env, k, group_return, _ in groups:
      name = dmlab30.short_name(self.levels[actor][env])
      self.by_level[name].add(group_return, k)
      total = sums.setdefault(name, [0, 0.0])
      total[0] += k
      total[1] += group_return
    for name, (k, group_return) in sums.items():
      tf.summary.scalar(f"charts/episodic_return/{name}", group_return / k)

  def level_report(self):
    """`dmlab30.score_report` of each level's last LEVEL_WINDOW episodes
    ("episodes": how many; "total_episodes": all this run)."""
    return dmlab30.score_report({
        name: {"mean_return": None if not recent.count else recent.mean,
               "episodes": recent.count,
               "total_episodes": recent.total_episodes}
        for name, recent in self.by_level.items()})


def play_in_fresh_process(saved_policy, episodes):
  """Mean greedy return of the SavedModel, played by
  experiments/play_policy.py in a subprocess that cannot import ingraph_rl
  (for DM Lab: only its TF-free env layer, for the env workers)."""
  script = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "play_policy.py")
  env = dict(os.environ)
  if env_kind(ENV.value) != "dmlab":
    env.pop("PYTHONPATH", None)
  # Else the player (isolated by -I) steps DM Lab in env workers, which
  # find deepmind_lab where this process's workers did.
  out = subprocess.run(
      [sys.executable, "-I", script, f"--saved_model={saved_policy}",
       f"--env={ENV.value}", f"--episodes={episodes}",
       f"--seed={SEED.value + 10_000}"],
      env=env, capture_output=True, text=True, timeout=600, check=True,
      cwd="/")
  return float(out.stdout.strip().splitlines()[-1].split()[-1])


def evaluate_levels_in_fresh_process(saved_policy, episodes, output):
  """experiments/evaluate_dmlab.py's report of the SavedModel on the 30
  DMLab-30 test levels (`episodes` each, greedy), played in a subprocess
  (which writes it to `output`; its env workers find deepmind_lab where
  this process's did)."""
  script = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "evaluate_dmlab.py")
  repeats = num_action_repeats_for(ENV.value, NUM_ACTION_REPEATS.value)
  out = subprocess.run(
      [sys.executable, "-I", script, f"--saved_model={saved_policy}",
       "--levels=dmlab30", f"--episodes={episodes}",
       f"--seed={SEED.value + 10_000}", f"--num_action_repeats={repeats}",
       f"--output={output}"],
      capture_output=True, text=True, cwd="/", timeout=4 * 3600)
  if out.returncode:
    raise RuntimeError(f"evaluate_dmlab.py failed ({out.returncode}):\n"
                       f"{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
  with open(output) as f:
    return json.load(f)


def run_dir_path():
  return os.path.abspath(LOGDIR.value or os.path.join(
      "runs", f"{ENV.value.replace('/', '_').replace(':', '_')}__impala__"
      f"{SEED.value}__{int(time.time())}"))


def env_factory(i):
  """Actor i's vector env (seed + 1000 i). On a DM Lab level set
  ("dmlab:dmlab30"), actor i's envs continue the level cycle after actor
  i - 1's, so the actors together run every level."""
  kwargs = {"level_offset": i * NUM_ENVS.value} \
      if dmlab_set_name(ENV.value) else {}
  return make_actor_env(ENV.value, NUM_ENVS.value, SEED.value + 1000 * i,
                        NUM_ACTION_REPEATS.value, ENV_PROCESSES.value,
                        **kwargs)


def probe_env():
  """(config, observation space) from one throwaway env."""
  probe = make_actor_env(ENV.value, 1, SEED.value, NUM_ACTION_REPEATS.value)
  num_actions = probe.action_space.num_categories
  obs_space = probe.observation_space
  probe.close()
  repeats = num_action_repeats_for(ENV.value, NUM_ACTION_REPEATS.value)
  return make_config(num_actions, BATCH_SIZE.value * UNROLL_LENGTH.value *
                     repeats), obs_space


class Run:
  """A run directory's TensorBoard writer and checkpoints of a learner
  executor (weights, optimizer slots, update count) and the frame count."""

  def __init__(self, run_dir, learner_executor):
    self.dir = run_dir
    self.frames = tf.Variable(0, dtype=tf.int64, trainable=False)
    self.checkpoint = tf.train.Checkpoint(learner=learner_executor.module,
                                          frames=self.frames)
    # Saves survive kill -9; see ingraph_rl/utils/checkpoints.py.
    self.manager = CheckpointSaver(self.checkpoint,
                                   os.path.join(run_dir, "checkpoints"))
    self.writer = tf.summary.create_file_writer(run_dir)
    with self.writer.as_default():
      table = "\n".join(f"|{f.name}|{f.value}|" for f in _ALL_FLAGS)
      tf.summary.text("hyperparameters", "|param|value|\n|-|-|\n" + table,
                      0)

  def restore(self):
    """Restores the latest checkpoint, if any; returns its path."""
    latest = self.manager.latest_checkpoint
    if latest:
      self.checkpoint.restore(latest).assert_existing_objects_matched()
      print(f"[impala] resumed from {latest} at frame "
            f"{int(self.frames.numpy())}", flush=True)
    return latest

  def finish(self, config, obs_space, learner_executor, start, train_s,
             progress, evaluate, wall_start):
    """Final checkpoint, SavedModel export, the DMLab-30 training table,
    evaluation in a fresh process and the closing lines (the last one:
    the last-100 training return and the run's wall time)."""
    frames = int(self.frames.numpy())
    self.manager.save(checkpoint_number=frames)
    train_step = int(learner_executor.execute("get_train_step"))
    saved_policy = os.path.join(self.dir, "saved_policy")
    export_impala_policy(config, obs_space,
                         learner_executor.execute("get_weights"),
                         saved_policy, train_step=train_step)
    summary = (f"[impala] {frames} frames "
               f"({(frames - start) / max(train_s, 1e-9):.0f} fps), "
               f"{train_step} updates; last training return "
               f"{progress.last_return:.1f}")
    if progress.levels is not None:
      report = dict(progress.level_report(), window=LEVEL_WINDOW,
                    frames=frames, env=ENV.value)
      path = os.path.join(self.dir, "dmlab30_scores.json")
      with open(path, "w") as f:
        json.dump(report, f, indent=1)
      summary += (f"\n[impala] DMLab-30 training returns (each level's "
                  f"last {LEVEL_WINDOW} episodes; {path}):\n"
                  + dmlab30.format_report(report))
    if EVAL_EPISODES.value and evaluate:
      summary += self.evaluate(saved_policy, frames)
    self.writer.flush()
    recent = progress.recent
    print(summary + f"\n[impala] logs (TensorBoard): {self.dir}\n"
          f"[impala] checkpoint: {self.manager.latest_checkpoint}\n"
          f"[impala] SavedModel: {saved_policy}\n"
          f"[impala] last-100 training return {recent.mean:.2f} "
          f"({recent.count} of {recent.total_episodes} episodes); wall "
          f"time {time.time() - wall_start:.1f} s (training {train_s:.1f} "
          f"s)", flush=True)

  def evaluate(self, saved_policy, frames):
    """Plays the exported policy in a fresh process; returns the lines
    to print. On a DMLab-30 set: each of the 30 test levels."""
    episodes = EVAL_EPISODES.value
    if not dmlab_set_name(ENV.value):
      mean = play_in_fresh_process(saved_policy, episodes)
      with self.writer.as_default(step=frames):
        tf.summary.scalar("eval/episodic_return", mean)
      return (f"\n[impala] greedy return of the exported policy in a "
              f"fresh process: {mean:.1f} over {episodes} episodes")
    path = os.path.join(self.dir, "dmlab30_test_scores.json")
    report = evaluate_levels_in_fresh_process(saved_policy, episodes, path)
    levels = report["levels"].values()
    mean = float(np.mean([row["mean_return"] for row in levels]))
    with self.writer.as_default(step=frames):
      tf.summary.scalar("eval/episodic_return", mean)
      tf.summary.scalar("eval/dmlab30/mean_capped_hns",
                        report["mean_capped_hns"])
    return (f"\n[impala] greedy return of the exported policy in a fresh "
            f"process: {mean:.1f} over {episodes * len(levels)} episodes "
            f"(the mean of {len(levels)} test levels' means)\n"
            f"[impala] DMLab-30 test levels, greedy, {episodes} episode(s) "
            f"per level ({path}):\n" + dmlab30.format_report(report))


def main(argv):
  del argv
  wall_start = time.time()
  if JOB_NAME.value:
    return cluster_main(wall_start)
  run_dir = run_dir_path()
  repeats = num_action_repeats_for(ENV.value, NUM_ACTION_REPEATS.value)
  config, obs_space = probe_env()
  driver = IMPALADriver(config, env_factory, NUM_ACTORS.value,
                        seed=SEED.value)
  print(f"[impala] {ENV.value}: {NUM_ACTORS.value} actors x "
        f"{NUM_ENVS.value} envs, built in "
        f"{driver.learner_executor.stats.total_s:.1f} s; logdir {run_dir}",
        flush=True)
  run = Run(run_dir, driver.learner_executor)
  if run.restore():
    driver.publish_weights()
  start = int(run.frames.numpy())
  levels = [env.levels for env in driver.envs] \
      if dmlab_set_name(ENV.value) else None
  progress = Progress(driver.totals, run.writer, run.manager, run.frames,
                      repeats, start, levels)
  remaining = max(0, TOTAL_FRAMES.value - start)
  interrupted = False
  t0 = time.time()
  try:
    # The learner counts env steps; the budget is in frames.
    driver.run(-(-remaining // repeats), progress,
               max_seconds=MAX_TRAIN_SECONDS.value)
  except KeyboardInterrupt:
    interrupted = True
    print("[impala] interrupted: saving a checkpoint", flush=True)
  run.finish(config, obs_space, driver.learner_executor, start,
             time.time() - t0, progress, not interrupted, wall_start)


# --- cluster roles -----------------------------------------------------------


def cluster_main(wall_start):
  """--job_name=ps|learner|actor: one task of a distributed-TF cluster."""
  task = roles.task_from_flags(JOB_NAME.value, TASK.value, CLUSTER.value)
  task.check_addresses(ALLOW_REMOTE.value)
  if task.job == "ps":
    roles.run_ps(task)
    return 0
  config, obs_space = probe_env()
  if task.job == "actor":
    env = env_factory(task.index)
    specs = roles.network_weight_specs(config, obs_space)
    sys.exit(roles.run_actor(task, config, env, specs,
                             seed=SEED.value + 1000 * task.index))
  return learner_main(task, config, obs_space, wall_start)


def learner_main(task, config, obs_space, wall_start):
  roles.connect(task)
  repeats = num_action_repeats_for(ENV.value, NUM_ACTION_REPEATS.value)
  learner, executor, published = roles.build_learner(task, config, obs_space)
  run = Run(run_dir_path(), executor)
  run.restore()
  published.publish(executor.execute("get_weights"))
  roles.log(task, f"variables on {sorted(set(executor.placement.values())) or [task.learner_device]}; "
                  f"queue on {task.learner_device}; logdir {run.dir}")
  start = int(run.frames.numpy())
  progress = Progress(None, run.writer, run.manager, run.frames, repeats,
                      start)
  t0, steps, interrupted = time.time(), 0, False
  deadline = None if MAX_TRAIN_SECONDS.value is None else \
      t0 + MAX_TRAIN_SECONDS.value
  try:
    if learner.staging is not None:
      executor.execute("prime")
    while start + steps * repeats < TOTAL_FRAMES.value and (
        deadline is None or time.time() < deadline):
      out = executor.execute("update")
      published.publish(executor.execute("get_weights"))
      steps += int(out["frames"])
      progress({k: v.numpy() for k, v in out.items()}, steps)
  except KeyboardInterrupt:
    interrupted = True
  except Exception as e:               # pylint: disable=broad-except
    code = roles.exit_code_for_learner_error(e)
    roles.log(task, f"lost a ps task or the queue ({type(e).__name__}: "
                    f"{str(e).splitlines()[0][:200]}); exiting with code "
                    f"{code}: restart to resume from the latest checkpoint")
    os._exit(code)                     # The remote context is unusable.
  try:
    executor.execute("close_queue")    # Actors see CancelledError and exit.
  except tf.errors.CancelledError:
    pass
  run.finish(config, obs_space, executor, start, time.time() - t0,
             progress, not interrupted, wall_start)
  return 0


if __name__ == "__main__":
  app.run(main)
