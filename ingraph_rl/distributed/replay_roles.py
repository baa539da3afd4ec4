"""The cluster roles of a distributed-replay agent (Ape-X; any builder
with actors, replay shards and a learner, as `runners.replay_driver`
takes), one process each. Nothing here knows an agent.

  ps:      serves variables (`roles.run_ps`).
  learner: builds the learner with its variables on the ps tasks and the
           sample and priority-update queues on itself; trains (within
           `training_intensity` of the actors' env steps); publishes
           its weights (online and target) and the samples trained.
  replay:  shard i: its memory and insert queue on itself; every `serve`
           call applies the learner's priority updates, inserts the
           actors' transitions and samples a batch onto the learner's
           queue. Connects to the learner only.
  actor:   connects to the learner and the replay tasks; each rollout is
           ONE graph call that steps its envs, computes the initial
           priorities and enqueues on the next shard (round-robin), and
           adds its env steps and episodes to the learner's counters.

The builder's shard component also has `stored()` (its transitions, read
eagerly). Shared names connect the tasks (`builder.queue_names(
QUEUE_PREFIX, shards)`, `PublishedWeights`, `SharedCounters`), as they
connect the threads of the single-process driver.

Faults: an actor or shard whose learner goes away (or, for an actor, one
of its shards) exits with `roles.EXIT_LEARNER_GONE`; the launcher restarts
it and it reconnects. A shard saves its contents in `checkpoint_dir` when
it stops in an orderly way (its learner gone, SIGTERM, Ctrl-C) and
restores them when it starts, under a NEW generation, so priority updates
meant for its old rows are dropped; after `kill -9` it starts from its
last orderly save (empty if none). The learner resumes from its own
checkpoint; the shards keep their contents across its restarts.
"""

import os
import threading
import time

import tensorflow as tf

from ingraph_rl.components.queues.row_checks import RejectionLog
from ingraph_rl.distributed.roles import (
  EXIT_LEARNER_GONE,
  UNREACHABLE,
  ActorProgress,
  build_on_learner,
  connect,
  exit_code_for_learner_error,
  learner_placement,
  log,
  sigterm_as_interrupt,
)
from ingraph_rl.distributed.weights import (
  PublishedWeights,
  SharedCounters,
  flat_weights,
  nested_weights,
  weight_specs,
)
from ingraph_rl.runners.driver import run_learner
from ingraph_rl.runners.replay_driver import (
  ActorThrottle,
  IdleBackoff,
  new_generation,
  shard_order,
  wait_to_train,
)
from ingraph_rl.utils.checkpoints import CheckpointSaver

QUEUE_PREFIX = "ingraph_rl/replay"
# Totals the actors add to and the learner reads (and sets at its start).
COUNTERS = {
  "env_steps": tf.int64,
  "episodes": tf.int64,
  "return_sum": tf.float64,
  "length_sum": tf.int64,
  "samples_trained": tf.int64,
}
EPISODE_STATS = ("env_steps", "episodes", "return_sum", "length_sum")
# Idle shards and throttled actors poll the learner over gRPC, each look a
# cross-process graph call of a few ms of CPU: an idle shard backs off from
# IDLE_WAIT_S to IDLE_WAIT_MAX_S, a throttled actor sleeps until the
# learner should have trained what it waits for (within THROTTLE_WAIT_S),
# so they leave the cores to the learner.
IDLE_WAIT_S = 0.01
IDLE_WAIT_MAX_S = 0.08
THROTTLE_WAIT_S = (0.005, 0.5)
# A learner ahead of `training_intensity` looks at the actors' env steps
# (a read on its own task) this often.
LEARNER_WAIT_S = 0.005


def queue_names(builder, task):
  return builder.queue_names(QUEUE_PREFIX, task.num_replay_shards)


def learner_counters(task):
  return SharedCounters(COUNTERS, task.learner_device)


class RemoteReplayLearner:
  """The learner task's executor, its published weights and the shared
  counters.

    learner = RemoteReplayLearner(task, builder, observation_space)
    ... restore a checkpoint of learner.executor.module ...
    learner.start(env_steps_so_far)
    env_steps, interrupted = learner.train(total_env_steps, on_update)
  """

  def __init__(self, task, builder, observation_space):
    if not task.num_replay_shards:
      raise ValueError("a replay learner needs replay tasks in the cluster")
    self.task = task
    self.config = builder.config
    root = builder.make_learner(observation_space, queue_names(builder, task))
    self.weights_space = builder.weights_space(observation_space)
    self.executor = build_on_learner(task, root)
    self.published = PublishedWeights(
      weight_specs(self.weights_space), task.learner_device
    )
    self.counters = learner_counters(task)
    self.update = self._fused_update()
    self._last_episodes = [0.0] * (len(EPISODE_STATS) - 1)

  def _fused_update(self):
    """ONE graph call: the update, then the samples trained into the
    counters and, every `publish_every` updates, the new weights
    published (automatic control dependencies order them after the
    update)."""
    c, space = self.config, self.weights_space
    update = self.executor.function("update")
    get_weights = self.executor.function("get_weights")
    counters, published = self.counters, self.published

    @tf.function
    def fused():
      out = update()
      step = tf.cast(out["train_step"], tf.int64)
      counters.assign({"samples_trained": step * c.train_batch_size})
      tf.cond(
        step % c.publish_every == 0,
        lambda: published.publish(flat_weights(space, get_weights())),
        lambda: tf.constant(0, tf.int64),
      )
      return out

    return fused

  @property
  def placement(self):
    return learner_placement(self.task, self.executor)

  def samples_trained(self):
    step = int(self.executor.execute("get_train_step"))
    return step * self.config.train_batch_size

  def start(self, env_steps):
    """Sets the counters (the env steps so far, e.g. from a checkpoint)
    and publishes the weights: actors wait for both."""
    self.counters.assign(
      dict(
        {k: 0 for k in COUNTERS},
        env_steps=env_steps,
        samples_trained=self.samples_trained(),
      )
    )
    self.publish()

  def publish(self):
    self.published.publish(
      flat_weights(self.weights_space, self.executor.execute("get_weights"))
    )

  def env_steps(self):
    return int(self.counters.read()["env_steps"])

  def take_episodes(self):
    """(episodes, return sum, length sum) the actors added since the last
    call."""
    totals = self.counters.read()
    now = [float(totals[k]) for k in EPISODE_STATS[1:]]
    last, self._last_episodes = self._last_episodes, now
    episodes, returns, lengths = (a - b for a, b in zip(now, last))
    return int(episodes), returns, int(lengths)

  def train(self, total_env_steps, on_update=None, max_seconds=None):
    """Updates until the actors' env steps reach `total_env_steps`,
    `max_seconds` passed or Ctrl-C; then closes the learner's queues (the
    shards see Cancelled and stop). `on_update(result of numpy, env
    steps)` runs after every update. Returns (env steps, interrupted).

    Losing a ps task exits the process with `roles.EXIT_PS_GONE` (a
    restart resumes from the latest checkpoint)."""
    executor, config = self.executor, self.config
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    state = {"env_steps": self.env_steps(), "trained": self.samples_trained()}
    stopping = threading.Event()

    def keep_going():
      return state["env_steps"] < total_env_steps and (
        deadline is None or time.monotonic() < deadline
      )

    def watch():
      state["env_steps"] = self.env_steps()
      return keep_going()

    def step():
      state["env_steps"] = wait_to_train(
        config,
        self.task.num_replay_shards,
        state["trained"],
        self.env_steps,
        stopping.is_set,
        LEARNER_WAIT_S,
        known=state["env_steps"],
      )
      out = {k: v.numpy() for k, v in self.update().items()}
      state["trained"] = int(out["train_step"]) * config.train_batch_size
      if on_update is not None:
        on_update(out, state["env_steps"])

    def stop():
      stopping.set()
      try:
        executor.execute("close_queue")
      except tf.errors.CancelledError:
        pass

    interrupted = False
    try:
      run_learner("learner", step, keep_going, stop, 0.25, watch)
    except KeyboardInterrupt:
      interrupted = True
    except Exception as e:
      code = exit_code_for_learner_error(e)
      log(
        self.task,
        f"lost a ps task ({type(e).__name__}: "
        f"{str(e).splitlines()[0][:200]}); exiting with code {code}: "
        f"restart to resume from the latest checkpoint",
      )
      os._exit(code)  # The remote context is unusable.
    return self.env_steps(), interrupted


def run_replay_shard(
  task,
  builder,
  observation_space,
  checkpoint_dir,
  on_stats=None,
  stats_every_s=10.0,
  startup_wait_s=120.0,
):
  """Replay shard `task.index`: serves until its learner goes away (then
  saves its contents and returns `EXIT_LEARNER_GONE`) or SIGTERM / Ctrl-C
  (saves, returns 0). `on_stats(stats of numpy, the actors' env steps)`
  runs every `stats_every_s`."""
  sigterm_as_interrupt()
  connect(task)
  generation = new_generation()
  counters = learner_counters(task)
  root = builder.make_shard(
    observation_space, queue_names(builder, task), task.index, generation
  )
  executor = root.build(
    device_map={path: task.learner_device for path in root.learner_resident}
  )
  saver = CheckpointSaver(
    tf.train.Checkpoint(shard=executor.module), checkpoint_dir
  )
  restored = saver.restore()
  log(
    task,
    f"serving; generation {generation}; "
    + (
      f"restored {root.component.stored()} transitions from {restored}"
      if restored
      else "empty"
    ),
  )
  served, next_stats = 0, 0.0
  rejections = RejectionLog(
    f"replay shard {task.index}", root.component.rejection_causes
  )
  backoff = IdleBackoff(IDLE_WAIT_S, IDLE_WAIT_MAX_S)
  wait_until = time.monotonic() + startup_wait_s
  code = 0
  try:
    while True:
      try:
        out = executor.execute("serve")
      except UNREACHABLE:
        if served or time.monotonic() > wait_until:
          raise
        time.sleep(0.5)  # The learner is still starting.
        continue
      served += 1
      rejections.add(out["rejected_rows"], out["rejected_causes"])
      if time.monotonic() >= next_stats:
        stats = {k: v.numpy() for k, v in executor.execute("stats").items()}
        stats["rejected_rows"] = rejections.total
        log(
          task,
          f"size {int(stats['size'])}  mean priority "
          f"{float(stats['mean_priority']):.4f}  rounds {served}",
        )
        if on_stats is not None:
          try:
            env_steps = int(counters.read()["env_steps"])
          except (tf.errors.NotFoundError, tf.errors.FailedPreconditionError):
            env_steps = None  # The learner has not started yet.
          if env_steps is not None:
            on_stats(stats, env_steps)
        next_stats = time.monotonic() + stats_every_s
      # Applying priority updates is no reason to look again soon: they
      # come with every update and wait in their queue at no cost.
      time.sleep(
        backoff.next_wait(bool(int(out["inserted"]) or int(out["sampled"])))
      )
  except UNREACHABLE as e:
    log(
      task,
      f"the learner is gone ({type(e).__name__}); saving the contents and "
      f"exiting so the launcher can restart this shard",
    )
    code = EXIT_LEARNER_GONE
  except KeyboardInterrupt:
    log(task, "stopping: saving the contents")
  path = save_local(saver)
  log(task, f"saved {root.component.stored()} transitions to {path}")
  return code


def save_local(saver):
  """Saves a checkpoint of this task's own variables, also after the
  learner went away: TF writes the files and the state (the write
  callbacks) and THEN syncs every executor of the eager context, remote
  ones included, which fails once a remote task is gone. The checkpoint is
  complete by then, so such an error is ignored when the state names it.
  """
  number = saver.next_number()
  try:
    return saver.save(number)
  except UNREACHABLE:
    path = saver.latest_checkpoint
    if path is None or not path.endswith(f"ckpt-{number}"):
      raise
    return path


class RemoteReplayActor:
  """An actor process's executor and its ONE graph call per rollout,
  `step(shard, sync)`: with `sync`, first read the published weights on
  the learner and load them; then one rollout enqueued on `shard`, its
  episode stats added to the learner's counters. -> the rollout's stats
  plus "totals" and "version" (of the weights loaded; -1 without `sync`).
  """

  def __init__(self, task, builder, env):
    self.task = task
    root = builder.make_actor(
      env,
      queue_names(builder, task),
      task.index,
      len(task.cluster["actor"]),
    )
    weights_space = root.input_spaces["weights"]
    published = PublishedWeights(
      weight_specs(weights_space), task.learner_device
    )
    self.counters = learner_counters(task)
    self.executor = root.build(
      device_map={
        path: task.device(job, index)
        for path, (job, index) in root.task_resident.items()
      }
    )
    set_weights = self.executor.function("set_weights")
    rollout = self.executor.function("rollout")
    add = self.counters.add

    def load():
      got = published.read()
      loaded = set_weights(nested_weights(weights_space, got["weights"]))
      with tf.control_dependencies(tf.nest.flatten(loaded)):
        return tf.identity(got["version"])

    @tf.function(
      input_signature=[tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.bool)]
    )
    def step(shard, sync):
      version = tf.cond(sync, load, lambda: tf.constant(-1, tf.int64))
      with tf.control_dependencies([version]):
        stats = rollout(shard)
      totals = add({k: stats[k] for k in EPISODE_STATS})
      return dict(stats, totals=totals, version=version)

    self.step = step


def run_replay_actor(
  task, builder, env, seed, max_rollouts=None, startup_wait_s=120.0
):
  """Actor `task.index`: rolls out until its learner or a shard goes away;
  returns the exit code. Loads the published weights every
  `actor_weight_sync_steps` env steps; with `training_intensity` waits
  while the actors' env steps run ahead of the samples trained."""
  sigterm_as_interrupt()
  connect(task)
  actor = RemoteReplayActor(task, builder, env)
  actor.executor.execute("reset_env", seed)
  config, shards = builder.config, task.num_replay_shards
  order = shard_order(shards, task.index)
  log(task, "connected; rolling out")
  progress = ActorProgress(task, "rollouts", 100)
  since_sync, version = config.actor_weight_sync_steps, 0
  totals = None
  throttle = ActorThrottle(config, shards, THROTTLE_WAIT_S)
  wait_until = time.monotonic() + startup_wait_s
  try:
    while max_rollouts is None or progress.calls < max_rollouts:
      try:
        wait = 0.0
        if totals is not None:
          wait = throttle.wait_s(
            int(totals["env_steps"]), int(totals["samples_trained"])
          )
        if wait:
          time.sleep(wait)
          totals = actor.counters.read()
          continue
        sync = since_sync >= config.actor_weight_sync_steps
        out = actor.step(tf.constant(next(order), tf.int32), tf.constant(sync))
      except UNREACHABLE:
        # Before the first rollout the learner may still be starting.
        if progress.calls or time.monotonic() > wait_until:
          raise
        time.sleep(0.5)
        continue
      totals = out["totals"]
      if sync:
        version, since_sync = int(out["version"]), 0
      since_sync += int(out["env_steps"])
      progress.add(out, version)
  except UNREACHABLE as e:
    log(
      task,
      f"the learner or a replay shard is gone ({type(e).__name__}); "
      f"exiting so the launcher can restart this actor",
    )
    return EXIT_LEARNER_GONE
  except KeyboardInterrupt:
    return 0
  finally:
    env.close()
  return 0


__all__ = [
  "COUNTERS",
  "QUEUE_PREFIX",
  "RemoteReplayActor",
  "RemoteReplayLearner",
  "run_replay_actor",
  "run_replay_shard",
]
