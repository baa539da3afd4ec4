"""IMPALA experiment (the main job): `python -m experiments.impala`.

With no flags it trains CartPole-v1 on this machine (2 actors x 32 envs,
a few minutes on 2 cores): the embedded preset (experiments/configs.py,
IMPALA_CARTPOLE); flagfiles hold the other setups:

    python -m experiments.impala \
        --flagfile=experiments/flagfiles/impala_pong.cfg
    python -m experiments.impala \
        --flagfile=experiments/flagfiles/impala_dmlab.cfg

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

Flags are generated from `IMPALASettings` (experiments/configs.py) and
`IMPALAConfig` (each field's default and help); only the flags passed (on
the command line or in a flagfile) override the preset. The training loops
are the runners': `ActorLearnerDriver.run` in one process,
`distributed.roles.RemoteLearner.train` in a cluster's learner task.
"""

import json
import os
import subprocess
import sys
import time

import numpy as np
import tensorflow as tf

from experiments import config_flags, configs, dmlab_settings
from experiments.impala_envs import (
  dmlab_env_kwargs,
  dmlab_preflight,
  env_factory,
  make_actor_envs,
)
from experiments.progress import progress_line
from ingraph_rl.agents.impala import IMPALABuilder
from ingraph_rl.distributed import roles
from ingraph_rl.distributed.cluster import in_cluster
from ingraph_rl.environments import dmlab30, dmlab_set_name
from ingraph_rl.export import export_policy
from ingraph_rl.runners.driver import ActorFailedError, ActorLearnerDriver
from ingraph_rl.runners.environments import (
  env_kind,
  make_actor_env,
  num_action_repeats_for,
)
from ingraph_rl.utils.checkpoints import CheckpointSaver
from ingraph_rl.utils.episode_stats import RecentEpisodes

# One flag per field of IMPALASettings and IMPALAConfig.
FLAG_HOLDERS = config_flags.define_flags(*configs.IMPALA_CLASSES)
# DM Lab: --dataset_path (scalable_agent's) and --skip_levels_without_dataset.
DMLAB_FLAGS = config_flags.define_flags(dmlab_settings.DMLabSettings)

# Training episodes behind each rolling mean: all levels together, and
# per DMLab-30 level (see the module docstring).
LAST_EPISODES = 100
LEVEL_WINDOW = 10


class Progress:
  """TensorBoard scalars, the progress line and periodic checkpoints, run
  after every learner update (in the learner thread).

  `levels`: for DM Lab level sets, each actor's env levels ([actor][env]
  -> level path); their episodes are also tracked per level."""

  def __init__(
    self,
    settings,
    totals,
    writer,
    manager,
    frames_var,
    repeats,
    start,
    levels=None,
  ):
    self.settings = settings
    self.totals, self.writer, self.manager = totals, writer, manager
    self.frames_var, self.repeats = frames_var, repeats
    self.start_frames = start
    self.t0 = self.t_log = self.t_save = time.time()
    self.frames_log = start
    self.t_summary = float("-inf")
    # Since the last summary write: the last update's results and frames,
    # and episodes, return sum and length sum (per level: episodes and
    # return sum).
    self.out, self.out_frames = None, start
    self.pending = [0, 0.0, 0]
    self.pending_levels = {}
    self.last_return = float("nan")
    self.recent = RecentEpisodes(LAST_EPISODES)
    self.levels = levels
    self.by_level = (
      None
      if levels is None
      else {
        dmlab30.short_name(level): RecentEpisodes(LEVEL_WINDOW)
        for env_levels in levels
        for level in env_levels
      }
    )

  def __call__(self, out, frames_this_run):
    frames = self.start_frames + frames_this_run * self.repeats
    self.frames_var.assign(frames)
    episodes, return_sum, length_sum, groups = (
      self.totals.take_episodes() if self.totals else (0, 0.0, 0, [])
    )
    for _, _, k, group_return, _ in groups:
      self.recent.add(group_return, k)
    # Unrolls without per-env stats (none here) count as one group.
    self.recent.add(
      return_sum - sum(g[3] for g in groups),
      episodes - sum(g[2] for g in groups),
    )
    if episodes:
      self.last_return = return_sum / episodes
    for i, value in enumerate((episodes, return_sum, length_sum)):
      self.pending[i] += value
    if self.levels is not None:
      self._count_level_returns(groups)
    self.out, self.out_frames = out, frames
    now = time.time()
    if now - self.t_summary >= self.settings.summary_every_seconds:
      self.write_summaries()
      self.t_summary = now
    if now - self.t_log >= self.settings.log_every_seconds:
      fps = (frames - self.frames_log) / (now - self.t_log)
      fields = [
        ("frames", f"{frames:>9d}"),
        ("fps", f"{fps:7.0f}"),
        ("updates", f"{int(out['train_step']):6d}"),
        ("return", f"{self.last_return:7.1f}"),
        ("last100", f"{self.recent.mean:7.1f}"),
        ("loss", f"{float(out['loss']):9.2f}"),
      ]
      with self.writer.as_default(step=frames):
        tf.summary.scalar("charts/SPS", fps)
        if self.levels is not None:
          report = self.level_report()
          for name, row in report["levels"].items():
            if row["human_normalized_score"] is not None:
              tf.summary.scalar(
                f"dmlab30/hns/{name}", row["human_normalized_score"]
              )
          if report["complete"]:
            tf.summary.scalar(
              "dmlab30/mean_capped_hns", report["mean_capped_hns"]
            )
          mean = report["mean_capped_hns"]
          fields.append(
            (
              "capped hns",
              f"{float('nan') if mean is None else mean:6.1f} "
              f"({report['num_levels']}/{len(dmlab30.TEST_LEVELS)} levels)",
            )
          )
      print(progress_line("impala", fields, self.t0), flush=True)
      self.t_log, self.frames_log = now, frames
    if now - self.t_save >= 60 * self.settings.checkpoint_every_minutes:
      self.manager.save(checkpoint_number=frames)
      self.t_save = now
    return frames

  def write_summaries(self):
    """Writes what came since the last write, at the last update's
    frames: the episodes' mean return and length (and each level's mean
    return), and the last update's losses. A no-op when no update came."""
    if self.out is None:
      return
    out, (episodes, return_sum, length_sum) = self.out, self.pending
    with self.writer.as_default(step=self.out_frames):
      if episodes:
        tf.summary.scalar("charts/episodic_return", return_sum / episodes)
        tf.summary.scalar("charts/episodic_length", length_sum / episodes)
        tf.summary.scalar("charts/episodes", episodes)
        tf.summary.scalar("charts/episodic_return_last100", self.recent.mean)
      for name, (k, group_return) in self.pending_levels.items():
        tf.summary.scalar(f"charts/episodic_return/{name}", group_return / k)
      tf.summary.scalar("losses/total_loss", out["loss"])
      tf.summary.scalar("losses/policy_loss", out["pg_loss"])
      tf.summary.scalar("losses/value_loss", out["baseline_loss"])
      tf.summary.scalar("losses/entropy", out["mean_entropy"])
      tf.summary.scalar("charts/mean_rho", out["mean_rho"])
      tf.summary.scalar("charts/grad_norm", out["grad_norm"])
    self.out, self.pending, self.pending_levels = None, [0, 0.0, 0], {}

  def _count_level_returns(self, groups):
    """Adds this update's episodes to each level's window and to its sums
    since the last write."""
    for actor, env, k, group_return, _ in groups:
      name = dmlab30.short_name(self.levels[actor][env])
      self.by_level[name].add(group_return, k)
      total = self.pending_levels.setdefault(name, [0, 0.0])
      total[0] += k
      total[1] += group_return

  def level_report(self):
    """`dmlab30.score_report` of each level's last LEVEL_WINDOW episodes
    ("episodes": how many; "total_episodes": all this run)."""
    return dmlab30.score_report(
      {
        name: {
          "mean_return": None if not recent.count else recent.mean,
          "episodes": recent.count,
          "total_episodes": recent.total_episodes,
        }
        for name, recent in self.by_level.items()
      }
    )


def play_in_fresh_process(settings, saved_policy, episodes, dmlab=None):
  """Mean greedy return of the SavedModel, played by
  experiments/play_policy.py in a subprocess that cannot import ingraph_rl
  (for DM Lab: only its TF-free env layer, for the env workers)."""
  script = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "play_policy.py"
  )
  env = dict(os.environ)
  if env_kind(settings.env) != "dmlab":
    env.pop("PYTHONPATH", None)
  # Else the player (isolated by -I) steps DM Lab in env workers, which
  # find deepmind_lab where this process's workers did.
  out = subprocess.run(
    [
      sys.executable,
      "-I",
      script,
      f"--saved_model={saved_policy}",
      f"--env={settings.env}",
      f"--episodes={episodes}",
      f"--seed={settings.seed + 10_000}",
      *(
        [f"--dataset_path={dmlab_settings.lab_config(dmlab)['datasetPath']}"]
        if dmlab is not None and dmlab.dataset_path
        else []
      ),
    ],
    env=env,
    capture_output=True,
    text=True,
    timeout=600,
    check=True,
    cwd="/",
  )
  return float(out.stdout.strip().splitlines()[-1].split()[-1])


def evaluate_levels_in_fresh_process(
  settings, saved_policy, episodes, output, dmlab=None
):
  """experiments/evaluate_dmlab.py's report of the SavedModel on the 30
  DMLab-30 test levels (`episodes` each, greedy), played in a subprocess
  (which writes it to `output`; its env workers find deepmind_lab where
  this process's did, and log to env_workers/ beside it). A level that
  fails is a row of the report with its error (`dmlab`: the run's
  DMLabSettings, whose dataset flags it gets)."""
  dmlab = dmlab or dmlab_settings.DMLabSettings()
  dataset_args = [f"--dataset_path={dmlab.dataset_path}"] * bool(
    dmlab.dataset_path
  ) + ["--skip_levels_without_dataset"] * dmlab.skip_levels_without_dataset
  script = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "evaluate_dmlab.py"
  )
  repeats = num_action_repeats_for(settings.env, settings.num_action_repeats)
  out = subprocess.run(
    [
      sys.executable,
      "-I",
      script,
      f"--saved_model={saved_policy}",
      "--levels=dmlab30",
      f"--episodes={episodes}",
      f"--seed={settings.seed + 10_000}",
      f"--num_action_repeats={repeats}",
      f"--output={output}",
      f"--env_log_dir={os.path.join(os.path.dirname(output), 'env_workers')}",
      "--allow_incomplete",  # Failed levels are rows of the report.
      *dataset_args,
    ],
    capture_output=True,
    text=True,
    cwd="/",
    timeout=4 * 3600,
  )
  if out.returncode:
    raise RuntimeError(
      f"evaluate_dmlab.py failed ({out.returncode}):\n"
      f"{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    )
  with open(output) as f:
    return json.load(f)


def run_dir_path(settings):
  return os.path.abspath(configs.run_directory(settings, "impala"))


def probe_env(settings, values, env_kwargs=None):
  """(builder, observation space) from one throwaway env (what DM Lab
  says of `--env`'s level: a usage error); `env_kwargs`: more
  make_actor_env kwargs (`dmlab_env_kwargs`)."""
  with config_flags.usage_of("env", settings.env):
    probe = make_actor_env(
      settings.env,
      1,
      settings.seed,
      settings.num_action_repeats,
      **(env_kwargs or {}),
    )
  num_actions = probe.action_space.num_categories
  obs_space = probe.observation_space
  probe.close()
  repeats = num_action_repeats_for(settings.env, settings.num_action_repeats)
  config = configs.impala_config(
    values,
    num_actions,
    values["batch_size"] * values["unroll_length"] * repeats,
  )
  return IMPALABuilder(config), obs_space


class Run:
  """A run directory's TensorBoard writer and checkpoints of a learner
  executor (weights, optimizer slots, update count) and the frame count."""

  def __init__(self, settings, values, run_dir, learner_executor, dmlab=None):
    self.settings = settings
    self.dmlab = dmlab  # DMLabSettings of a DM Lab run (its evaluation).
    self.dir = run_dir
    self.frames = tf.Variable(0, dtype=tf.int64, trainable=False)
    self.checkpoint = tf.train.Checkpoint(
      learner=learner_executor.module, frames=self.frames
    )
    # Saves survive kill -9; see ingraph_rl/utils/checkpoints.py.
    self.manager = CheckpointSaver(
      self.checkpoint, os.path.join(run_dir, "checkpoints")
    )
    self.writer = tf.summary.create_file_writer(run_dir)
    with self.writer.as_default():
      tf.summary.text("hyperparameters", config_flags.table(values), 0)

  def restore(self):
    """Restores the newest checkpoint that reads, if any (see
    `CheckpointSaver.restore`); returns its path."""
    latest = self.manager.restore()
    if latest:
      print(
        f"[impala] resumed from {latest} at frame {int(self.frames.numpy())}",
        flush=True,
      )
    return latest

  def finish(
    self,
    builder,
    obs_space,
    learner_executor,
    start,
    train_s,
    progress,
    evaluate,
    wall_start,
  ):
    """Final checkpoint, SavedModel export, the DMLab-30 training table,
    evaluation in a fresh process and the closing lines (the last one:
    the last-100 training return and the run's wall time)."""
    progress.write_summaries()  # What came after the last periodic write.
    frames = int(self.frames.numpy())
    self.manager.save(checkpoint_number=frames)
    train_step = int(learner_executor.execute("get_train_step"))
    saved_policy = os.path.join(self.dir, "saved_policy")
    export_policy(
      builder,
      obs_space,
      learner_executor.execute("get_weights"),
      saved_policy,
      train_step=train_step,
    )
    summary = (
      f"[impala] {frames} frames "
      f"({(frames - start) / max(train_s, 1e-9):.0f} fps), "
      f"{train_step} updates; last training return "
      f"{progress.last_return:.1f}"
    )
    if progress.levels is not None:
      report = dict(
        progress.level_report(),
        window=LEVEL_WINDOW,
        frames=frames,
        env=self.settings.env,
      )
      path = os.path.join(self.dir, "dmlab30_scores.json")
      with open(path, "w") as f:
        json.dump(report, f, indent=1)
      summary += (
        f"\n[impala] DMLab-30 training returns (each level's "
        f"last {LEVEL_WINDOW} episodes; {path}):\n"
        + dmlab30.format_report(report)
      )
    if self.settings.eval_episodes and evaluate:
      summary += self.evaluate(saved_policy, frames)
    self.writer.flush()
    recent = progress.recent
    print(
      summary + f"\n[impala] logs (TensorBoard): {self.dir}\n"
      f"[impala] checkpoint: {self.manager.latest_checkpoint}\n"
      f"[impala] SavedModel: {saved_policy}\n"
      f"[impala] last-100 training return {recent.mean:.2f} "
      f"({recent.count} of {recent.total_episodes} episodes); wall "
      f"time {time.time() - wall_start:.1f} s (training {train_s:.1f} "
      f"s)",
      flush=True,
    )

  def evaluate(self, saved_policy, frames):
    """Plays the exported policy in a fresh process; returns the lines
    to print. On a DMLab-30 set: each of the 30 test levels."""
    episodes = self.settings.eval_episodes
    if not dmlab_set_name(self.settings.env):
      mean = play_in_fresh_process(
        self.settings, saved_policy, episodes, self.dmlab
      )
      with self.writer.as_default(step=frames):
        tf.summary.scalar("eval/episodic_return", mean)
      return (
        f"\n[impala] greedy return of the exported policy in a "
        f"fresh process: {mean:.1f} over {episodes} episodes"
      )
    path = os.path.join(self.dir, "dmlab30_test_scores.json")
    report = evaluate_levels_in_fresh_process(
      self.settings, saved_policy, episodes, path, self.dmlab
    )
    # Failed or skipped levels have no mean: rows with their error.
    levels = [
      row for row in report["levels"].values() if row["mean_return"] is not None
    ]
    mean = float(np.mean([row["mean_return"] for row in levels] or [np.nan]))
    with self.writer.as_default(step=frames):
      tf.summary.scalar("eval/episodic_return", mean)
      if report["mean_capped_hns"] is not None:
        tf.summary.scalar(
          "eval/dmlab30/mean_capped_hns", report["mean_capped_hns"]
        )
    bad = report.get("failed_levels", []) + report.get("skipped_levels", [])
    return (
      f"\n[impala] greedy return of the exported policy in a fresh "
      f"process: {mean:.1f} over {episodes * len(levels)} episodes "
      f"(the mean of {len(levels)} test levels' means)\n"
      f"[impala] DMLab-30 test levels, greedy, {episodes} episode(s) "
      f"per level ({path}):\n"
      + dmlab30.format_report(report)
      + (
        f"\n[impala] evaluation incomplete (complete: false): "
        f"{len(report['failed_levels'])} level(s) failed, "
        f"{len(report['skipped_levels'])} skipped: {bad}"
        if bad
        else ""
      )
    )


def check_flags(values):
  """Usage errors of the run's values, before anything is built
  (`config_flags.check_flags`): the config with a stand-in action count."""
  env, repeats = values["env"], values["num_action_repeats"]
  with config_flags.usage_of("num_action_repeats", repeats):
    repeats = num_action_repeats_for(env, repeats)
  config_flags.check_flags(
    configs.IMPALA_CLASSES,
    values,
    configs=[
      lambda: configs.impala_config(
        values, 2, values["batch_size"] * values["unroll_length"] * repeats
      )
    ],
  )


def main(argv):
  del argv
  wall_start = time.time()
  values = configs.impala_values()
  check_flags(values)
  settings = configs.impala_settings(values)
  dmlab = dmlab_settings.from_flags()
  dmlab_preflight(settings, dmlab)  # Before any env starts.
  if in_cluster(settings.job_name):
    return cluster_main(settings, values, wall_start, dmlab)
  configs.configure_tensorflow(settings)
  run_dir = run_dir_path(settings)
  log_dir = os.path.join(run_dir, "env_workers")
  repeats = num_action_repeats_for(settings.env, settings.num_action_repeats)
  builder, obs_space = probe_env(
    settings, values, dmlab_env_kwargs(settings, dmlab, log_dir, "probe_worker")
  )
  factory = env_factory(settings, builder.config.env_groups, dmlab, log_dir)
  if env_kind(settings.env) == "dmlab":
    # All actors' levels load at once (DM Lab compiles maze maps at load).
    envs = make_actor_envs(
      factory, settings.num_actors, settings.num_envs_per_actor
    )
    factory = envs.__getitem__
  driver = ActorLearnerDriver(
    builder,
    factory,
    settings.num_actors,
    seed=settings.seed,
  )
  print(
    f"[impala] {settings.env}: {settings.num_actors} actors x "
    f"{settings.num_envs_per_actor} envs"
    f"{' (batched inference)' if driver.batched_inference else ''}, built in "
    f"{driver.learner_executor.stats.total_s:.1f} s; logdir {run_dir}",
    flush=True,
  )
  run = Run(settings, values, run_dir, driver.learner_executor, dmlab)
  if run.restore():
    driver.publish_weights()
  start = int(run.frames.numpy())
  levels = (
    [env.levels for env in driver.envs]
    if dmlab_set_name(settings.env)
    else None
  )
  progress = Progress(
    settings,
    driver.totals,
    run.writer,
    run.manager,
    run.frames,
    repeats,
    start,
    levels,
  )
  remaining = max(0, settings.total_environment_frames - start)
  interrupted = False
  t0 = time.time()
  try:
    # The learner counts env steps; the budget is in frames.
    driver.run(
      -(-remaining // repeats), progress, max_seconds=settings.max_train_seconds
    )
  except KeyboardInterrupt:
    interrupted = True
    print("[impala] interrupted: saving a checkpoint", flush=True)
  except ActorFailedError as e:
    # E.g. an env worker died or stopped answering (--env_step_timeout_s):
    # the driver stopped and closed its envs; keep what was learned.
    run.manager.save(checkpoint_number=int(run.frames.numpy()))
    print(
      f"[impala] stopped: {e}\n[impala] saved "
      f"{run.manager.latest_checkpoint}: a rerun with the same --logdir "
      "resumes",
      flush=True,
    )
    return 1
  run.finish(
    builder,
    obs_space,
    driver.learner_executor,
    start,
    time.time() - t0,
    progress,
    not interrupted,
    wall_start,
  )


# --- cluster roles -----------------------------------------------------------


def cluster_main(settings, values, wall_start, dmlab=None):
  """--job_name=ps|learner|actor: one task of a distributed-TF cluster."""
  task = roles.task_from_flags(
    settings.job_name, settings.task, settings.cluster
  )
  task.check_addresses(settings.allow_remote_hosts)
  if task.job == "replay" or task.num_replay_shards:
    raise roles.ClusterError(
      "IMPALA has no replay tasks (they are Ape-X's: experiments/apex.py)"
    )
  if values["batched_inference"]:
    raise roles.ClusterError(
      "--batched_inference is for the single-process driver; a cluster's "
      "actors each run their own policy"
    )
  configs.configure_tensorflow(settings, role=task.job)
  if task.job == "ps":
    return roles.run_ps(task, settings.ps_linger_s)
  log_dir = os.path.join(run_dir_path(settings), "env_workers")
  builder, obs_space = probe_env(
    settings,
    values,
    dmlab_env_kwargs(settings, dmlab, log_dir, f"{task.job}{task.index}_probe"),
  )
  if task.job == "actor":
    env = env_factory(settings, builder.config.env_groups, dmlab, log_dir)(
      task.index
    )
    sys.exit(
      roles.run_actor(
        task, builder, env, seed=settings.seed + 1000 * task.index
      )
    )
  return learner_main(
    settings, values, task, builder, obs_space, wall_start, dmlab
  )


def learner_main(
  settings, values, task, builder, obs_space, wall_start, dmlab=None
):
  roles.sigterm_as_interrupt()  # Kubernetes stops pods with SIGTERM.
  roles.connect(task)
  repeats = num_action_repeats_for(settings.env, settings.num_action_repeats)
  learner = roles.RemoteLearner(task, builder, obs_space)
  run = Run(settings, values, run_dir_path(settings), learner.executor, dmlab)
  run.restore()
  learner.publish()
  roles.log(
    task,
    f"variables on {learner.placement}; "
    f"queue on {task.learner_device}; logdir {run.dir}",
  )
  start = int(run.frames.numpy())
  # The actors' episodes, from counters on this task.
  progress = Progress(
    settings, learner, run.writer, run.manager, run.frames, repeats, start
  )
  remaining = max(0, settings.total_environment_frames - start)
  t0 = time.time()
  _, interrupted = learner.train(
    -(-remaining // repeats), progress, max_seconds=settings.max_train_seconds
  )
  run.finish(
    builder,
    obs_space,
    learner.executor,
    start,
    time.time() - t0,
    progress,
    not interrupted,
    wall_start,
  )
  return 0


if __name__ == "__main__":
  config_flags.run(main)
