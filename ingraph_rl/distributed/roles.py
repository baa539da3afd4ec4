"""The three cluster roles of an actor-learner agent (IMPALA; any
`ActorLearnerBuilder`), one process each (TF2 multi-client eager over raw
resource ops with shared names; DESIGN.md section 6). Nothing here knows
an agent: the builder makes the learner and actor roots.

  ps:      serves variables (a `tf.distribute.Server`) until the
           learner's run has ended: once the learner was reachable, its
           address refusing connections for `linger_s` (a restarted
           learner is back well within it) ends the ps too, so no ps
           outlives the run it served (without a launcher, e.g. a
           Kubernetes TFJob).
  learner: connects to the ps tasks, builds the learner with its variables
           sharded over them (on itself without ps tasks) and the rollout
           queue on itself (`RemoteLearner`); the caller restores its
           checkpoint; `RemoteLearner.train` (the cluster's training loop)
           trains and publishes its weights after every update.
  actor:   connects to the learner only (a sparse spec, so actors can join,
           die and rejoin without anyone waiting), and loops ONE fused graph
           call: read the published weights on the learner, load them, run
           the env stepper, enqueue the rollouts into the learner's queue,
           and add the unroll's episodes (count, return and length sums) to
           a counter on the learner, which its progress reads
           (`RemoteLearner.take_episodes`): the cluster's returns, as a
           one-process run reports them.

Failure handling: an actor whose learner goes away gets `UnavailableError`
(or `CancelledError` when the learner closes the queue at the end) and
exits with a message and exit code `EXIT_LEARNER_GONE`; the local launcher
restarts it, and it reconnects. A learner that loses a ps task exits with
`EXIT_PS_GONE`; restarted, it restores from its latest checkpoint. An actor
whose env worker died or stopped answering (`--env_step_timeout_s`) says
so and exits with `EXIT_ENV_FAILED`; restarted, it makes fresh envs.
"""

import os
import signal
import socket
import time

import numpy as np
import tensorflow as tf

from ingraph_rl.components.queues.row_checks import RejectionLog
from ingraph_rl.distributed.cluster import ClusterError, Task, task_from_flags
from ingraph_rl.distributed.placement import PSExecutor
from ingraph_rl.distributed.weights import (
  PublishedWeights,
  shared_variable,
  weight_specs,
)

EXIT_LEARNER_GONE = 3
EXIT_PS_GONE = 4
EXIT_ENV_FAILED = 5
QUEUE_NAME = "ingraph_rl/rollouts"
EPISODE_STATS = ("episodes", "return_sum", "length_sum")


class EpisodeCounters:
  """The actors' finished episodes: [episodes, return sum, length sum] in
  ONE float64 variable on the learner (counts exact below 2**53), so an
  actor's add and the learner's read are one op each: a read never sees
  half of an add (three scalars did: a window's return without its
  length).

    counters = EpisodeCounters(task.learner_device)
    counters.assign_zeros()             # the learner, before any add
    counters.add(stats)                 # an actor, in its graph call
    counters.read()                     # [3] totals
  """

  NAME = "ingraph_rl/episodes"

  def __init__(self, device):
    self.device = device
    self.read = tf.function(self._read, input_signature=[])
    self.assign_zeros = tf.function(self._assign_zeros, input_signature=[])

  def _handle(self):
    return shared_variable(self.NAME, [len(EPISODE_STATS)], tf.float64)

  def _read(self):
    with tf.device(self.device):
      return tf.raw_ops.ReadVariableOp(
        resource=self._handle(), dtype=tf.float64
      )

  def _assign_zeros(self):
    with tf.device(self.device):
      tf.raw_ops.AssignVariableOp(
        resource=self._handle(),
        value=tf.zeros([len(EPISODE_STATS)], tf.float64),
      )

  def add(self, stats):
    """Adds an unroll's {"episodes", "return_sum", "length_sum"} (inside
    a tf.function)."""
    value = tf.stack([tf.cast(stats[k], tf.float64) for k in EPISODE_STATS])
    with tf.device(self.device):
      tf.raw_ops.AssignAddVariableOp(resource=self._handle(), value=value)


UNREACHABLE = (
  tf.errors.UnavailableError,
  tf.errors.AbortedError,
  tf.errors.CancelledError,
  tf.errors.InternalError,
  tf.errors.UnknownError,
  tf.errors.FailedPreconditionError,
  tf.errors.NotFoundError,
)


def log(task, message):
  print(f"[{task.job}:{task.index}] {message}", flush=True)


def sigterm_as_interrupt():
  """SIGTERM (the launcher's stop for actors and shards; Kubernetes' for
  every pod) raises KeyboardInterrupt, so the task stops as on Ctrl-C: a
  learner checkpoints, a shard saves its contents."""
  signal.signal(signal.SIGTERM, signal.default_int_handler)


def connect(task, timeout_s=60.0):
  """Starts this task's server and connects its eager context."""
  deadline = time.monotonic() + timeout_s
  while True:
    try:
      tf.config.experimental_connect_to_cluster(
        task.tf_cluster_spec(), job_name=task.job, task_index=task.index
      )
      return
    except (
      tf.errors.UnavailableError,
      tf.errors.UnknownError,
      tf.errors.InternalError,
    ) as e:
      if time.monotonic() > deadline:
        raise RuntimeError(f"cannot connect to the cluster: {e}") from None
      time.sleep(1.0)


# How long a ps waits for a learner that went away to come back.
PS_LINGER_S = 60.0
PS_POLL_S = 1.0


def accepts_connections(address, timeout_s=1.0):
  """True when something listens at "host:port"."""
  host, port = address.rsplit(":", 1)
  try:
    with socket.create_connection((host, int(port)), timeout=timeout_s):
      return True
  except OSError:
    return False


def run_ps(task, linger_s=PS_LINGER_S):
  """Serves until the learner's run has ended (the learner, once seen,
  gone for `linger_s`) or killed; returns 0."""
  server = tf.distribute.Server(
    tf.train.ClusterSpec(
      {"ps": task.cluster["ps"], "learner": task.cluster["learner"]}
    ),
    job_name="ps",
    task_index=task.index,
    start=True,
  )
  log(task, f"serving at {task.address}")
  learner = task.cluster["learner"][0]
  seen, gone_since = False, None
  while True:
    if accepts_connections(learner):
      seen, gone_since = True, None
    elif seen:
      gone_since = gone_since or time.monotonic()
      if time.monotonic() - gone_since >= linger_s:
        log(
          task,
          f"the learner ({learner}) has been gone {linger_s:g} s: its "
          f"run ended; {server.target} stops serving",
        )
        return 0
    time.sleep(PS_POLL_S)


def build_on_learner(task, root):
  """A learner root's executor in a cluster: its variables on the ps tasks
  (sharded by size; on the learner without ps tasks), its computation and
  learner-resident components (queues) on the learner."""
  with tf.device(task.learner_device):
    return root.build(
      PSExecutor,
      ps_devices=task.ps_devices(),
      device_map={path: task.learner_device for path in root.learner_resident},
    )


def learner_placement(task, executor):
  """The devices holding a `build_on_learner` executor's variables."""
  return sorted(set(executor.placement.values())) or [task.learner_device]


class RemoteLearner:
  """The learner task's executor (variables on the ps tasks, sharded by
  size; the queue and computation on the learner) and the weights it
  publishes for the actors.

    learner = RemoteLearner(task, builder, observation_space)
    ... restore a checkpoint of learner.executor.module ...
    learner.publish()
    steps, interrupted = learner.train(total_steps, on_update)
  """

  def __init__(self, task, builder, observation_space):
    self.task = task
    root = builder.make_learner(observation_space, QUEUE_NAME)
    self.learner = root.component
    specs = weight_specs(builder.weights_space(observation_space))
    self.executor = build_on_learner(task, root)
    with tf.device(task.learner_device):
      self.published = PublishedWeights(specs, task.learner_device)
    # Before the first publish: no actor unrolls (and adds) before it.
    self.episodes = EpisodeCounters(task.learner_device)
    self.episodes.assign_zeros()
    self._taken = np.zeros(len(EPISODE_STATS))

  def take_episodes(self):
    """(episodes, return sum, length sum, []) the actors finished since
    the last call (the runners' `EpisodeTotals.take_episodes`, without
    per-env groups)."""
    now = self.episodes.read().numpy()
    (episodes, returns, lengths), self._taken = now - self._taken, now
    return int(episodes), float(returns), int(lengths), []

  @property
  def placement(self):
    return learner_placement(self.task, self.executor)

  def publish(self):
    """Makes the learner's current weights the actors' next ones."""
    self.published.publish(self.executor.execute("get_weights"))

  def train(self, total_steps, on_update=None, max_seconds=None):
    """The cluster's training loop: updates (each publishing the new
    weights) until `total_steps` env steps were trained on, `max_seconds`
    passed (checked before each update) or Ctrl-C; then closes the queue,
    so actors see CancelledError and exit. `on_update(result_dict_of_numpy,
    steps)` runs after every update. Returns (steps, interrupted).

    Losing a ps task (or the queue) exits the process with `EXIT_PS_GONE`:
    the remote context is unusable, and a restart resumes from the latest
    checkpoint."""
    executor, steps, interrupted = self.executor, 0, False
    rejections = RejectionLog.of("learner", executor)
    deadline = None if max_seconds is None else time.time() + max_seconds
    try:
      if "prime" in executor.apis:
        executor.execute("prime")
      while steps < total_steps and (
        deadline is None or time.time() < deadline
      ):
        out = executor.execute("update")
        rejections.add_result(out)
        self.publish()
        steps += int(out["frames"])
        if on_update is not None:
          on_update({k: v.numpy() for k, v in out.items()}, steps)
    except KeyboardInterrupt:
      interrupted = True
    except Exception as e:
      code = exit_code_for_learner_error(e)
      log(
        self.task,
        f"lost a ps task or the queue ({type(e).__name__}: "
        f"{str(e).splitlines()[0][:200]}); exiting with code "
        f"{code}: restart to resume from the latest checkpoint",
      )
      os._exit(code)  # The remote context is unusable.
    try:
      executor.execute("close_queue")  # Actors see CancelledError, exit.
    except tf.errors.CancelledError:
      pass
    return steps, interrupted


class RemoteActor:
  """An actor process's executor and its fused `step()`: read the learner's
  published weights, load them, unroll, enqueue — one graph call."""

  def __init__(self, task, builder, env):
    self.task = task
    root = builder.make_actor(env, QUEUE_NAME, index=task.index)
    self.published = PublishedWeights(
      weight_specs(root.input_spaces["weights"]), task.learner_device
    )
    self.executor = root.build(
      device_map={path: task.learner_device for path in root.learner_resident}
    )
    set_weights = self.executor.function("set_weights")
    unroll = self.executor.function("unroll")
    read = self.published.read
    episodes = EpisodeCounters(task.learner_device)

    @tf.function
    def step():
      got = read()
      with tf.control_dependencies(
        tf.nest.flatten(set_weights(got["weights"]))
      ):
        stats = unroll()
      episodes.add(stats)
      return dict(stats, weights_version=got["version"])

    self.step = step


class ActorProgress:
  """An actor task's progress line every `every` calls: how many, the
  weights version, and the mean return of the episodes since the last
  line."""

  def __init__(self, task, noun, every):
    self.task, self.noun, self.every = task, noun, every
    self.calls, self.episodes, self.returns = 0, 0, 0.0

  def add(self, stats, version):
    self.calls += 1
    self.episodes += int(stats["episodes"])
    self.returns += float(stats["return_sum"])
    if self.calls % self.every == 0:
      mean = self.returns / max(self.episodes, 1)
      log(
        self.task,
        f"{self.noun} {self.calls}  weights v{version}  mean return {mean:.1f}",
      )
      self.episodes, self.returns = 0, 0.0


def run_actor(task, builder, env, seed, max_unrolls=None, startup_wait_s=120.0):
  """Actor `task.index` of `builder`, stepping `env` (reset with `seed`):
  unrolls until the learner goes away; returns the exit code."""
  connect(task)
  actor = RemoteActor(task, builder, env)
  actor.executor.execute("reset_env", seed)
  log(task, "connected; unrolling")
  progress = ActorProgress(task, "unrolls", 50)
  wait_until = time.monotonic() + startup_wait_s
  try:
    while max_unrolls is None or progress.calls < max_unrolls:
      try:
        stats = actor.step()
      except UNREACHABLE as e:
        # Before the first unroll the learner may still be starting (or
        # not have published weights yet): wait for it a while.
        if progress.calls or time.monotonic() > wait_until or env_failure(e):
          raise
        time.sleep(0.5)
        continue
      progress.add(stats, int(stats["weights_version"]))
  except UNREACHABLE as e:
    failure = env_failure(e)
    if failure:
      log(task, f"{failure}; exiting so the launcher can restart this actor")
      return EXIT_ENV_FAILED
    log(
      task,
      f"the learner is gone ({type(e).__name__}); exiting so the "
      f"launcher can restart this actor",
    )
    return EXIT_LEARNER_GONE
  finally:
    env.close()
  return 0


def env_failure(error):
  """The line of a `WorkerDiedError` (an env worker died or stopped
  answering) that a TF error carries from the actor's env step, or None
  (then it is the learner or the network)."""
  message = getattr(error, "message", None) or str(error)
  for line in reversed(message.splitlines()):
    if "WorkerDiedError: " in line:
      return "WorkerDiedError: " + line.split("WorkerDiedError: ", 1)[1]
  return None


def exit_code_for_learner_error(error):
  """The learner's exit code for an error in training."""
  if isinstance(error, UNREACHABLE):
    return EXIT_PS_GONE
  raise error


__all__ = [
  "build_on_learner",
  "learner_placement",
  "ActorProgress",
  "ClusterError",
  "EXIT_LEARNER_GONE",
  "EXIT_PS_GONE",
  "QUEUE_NAME",
  "RemoteActor",
  "RemoteLearner",
  "Task",
  "connect",
  "sigterm_as_interrupt",
  "log",
  "run_actor",
  "run_ps",
  "task_from_flags",
  "weight_specs",
]
