"""A distributed-replay agent (Ape-X; any builder with actors, replay
shards and a learner) in one process: actor threads, shard threads and a
learner thread, connected only by the agent's shared-name queues, exactly
as the processes of a cluster are.

Why threads: every actor rollout, shard round and learner update is ONE
graph call, and TF releases the GIL while a graph runs, so the threads
overlap on the cores.

    driver = ReplayDriver(ApexBuilder(config), env_factory, num_actors=2,
                          num_shards=2)
    driver.run(total_env_steps=100_000)
    driver.stop()

The builder provides `queue_names(prefix, num_shards)`, `make_learner(obs
space, names)`, `make_actor(env, names, index, num_actors)`,
`make_shard(obs space, names, index, generation)` and `config`
(`actor_weight_sync_steps`, `publish_every`).

Actors feed the shards round-robin (actor i starts at shard i mod
shards); an actor loads the newest published weights once it has taken
`actor_weight_sync_steps` env steps since its last load. With
`training_intensity` (samples trained per env step), actors wait while
their env steps exceed `learning_starts` per shard plus the samples
trained / intensity, and the learner waits while its samples trained run
more than `LEARNER_LEAD_BATCHES` batches past intensity x the env steps
after that warmup: the replay ratio holds whichever side is faster.
Shutdown
(`stop()`, Ctrl-C, the budget) first lets the actors finish their
rollouts while the shards still take their inserts, then lets the shards
finish their round, and only then closes every queue, cancelling any
enqueue still pending, so each blocked thread gets Cancelled/OutOfRange
and exits. (An op cancelled by a close inside a graph call logs a TF
warning; in the usual shutdown no thread is left in one.)
"""

import random
import threading
import time
import uuid

import tensorflow as tf

from ingraph_rl.components.queues.row_checks import RejectionLog
from ingraph_rl.runners.driver import (
  DRAIN_S,
  ActorFailedError,
  EpisodeTotals,
  join_all,
  join_and_close,
  run_learner,
)

_CLOSED = (tf.errors.CancelledError, tf.errors.OutOfRangeError)
# A shard thread with nothing to do backs off from LOCAL_IDLE_WAIT_S to
# LOCAL_IDLE_WAIT_MAX_S before its next round, and an actor held by
# `training_intensity` sleeps until the learner should have trained what
# it waits for (within LOCAL_THROTTLE_WAIT_S), as the cluster roles do.
# Each idle round is a serve graph call (~0.35 ms of CPU on Pong); fewer
# of them cut idle CPU, though no measured rate rose (benchmarks/README,
# apex_throughput, 2026-11-27). (Shards and actors in their own processes
# poll over gRPC and wait longer: `distributed.replay_roles.IDLE_WAIT_S`.)
LOCAL_IDLE_WAIT_S = 0.002
LOCAL_IDLE_WAIT_MAX_S = 0.02
LOCAL_THROTTLE_WAIT_S = (0.002, 0.05)


def shard_order(num_shards, start=0):
  """Round-robin shard indices from `start`: an endless iterator."""
  i = start % num_shards
  while True:
    yield i
    i = (i + 1) % num_shards


def may_step(config, num_shards, env_steps, samples_trained):
  """Whether actors may take more env steps under `training_intensity`
  (samples trained per env step; None: always): while the env steps are
  within `learning_starts` per shard plus samples trained / intensity."""
  if config.training_intensity is None:
    return True
  return _steps_ahead(config, num_shards, env_steps, samples_trained) <= 0


def _steps_ahead(config, num_shards, env_steps, samples_trained):
  """Env steps taken past what `training_intensity` allows so far."""
  warmup = config.learning_starts * num_shards
  return env_steps - (warmup + samples_trained / config.training_intensity)


# Batches the learner may train past what `training_intensity` allows for
# the actors' env steps so far: slack for the actors' rollouts, which add
# their env steps a whole rollout at a time.
LEARNER_LEAD_BATCHES = 16


def may_train(config, num_shards, env_steps, samples_trained):
  """Whether the learner may train another batch under
  `training_intensity` (None: always): while its samples trained stay
  below intensity x (env steps past `learning_starts` per shard) plus
  `LEARNER_LEAD_BATCHES` batches. The other side of `may_step`: together
  they hold the replay ratio at the intensity (RLlib's meaning of the
  flag) whichever side is faster, so a learner faster than its actors
  leaves them the cores instead of replaying each transition more often.

  >>> from types import SimpleNamespace
  >>> c = SimpleNamespace(training_intensity=4, learning_starts=100,
  ...                     train_batch_size=8)
  >>> # 50 env steps past the warmup allow 200 samples, plus 16 x 8.
  >>> may_train(c, 1, 150, 327), may_train(c, 1, 150, 328)
  (True, False)
  """
  if config.training_intensity is None:
    return True
  ahead = -config.training_intensity * _steps_ahead(
    config, num_shards, env_steps, samples_trained
  )
  return ahead < LEARNER_LEAD_BATCHES * config.train_batch_size


def wait_to_train(
  config, num_shards, samples_trained, env_steps, stopped, wait_s, known=None
):
  """Blocks while `may_train` is false, looking at `env_steps()` (the
  actors' env steps now) every `wait_s`, until `stopped()`. `known`: env
  steps read before (looked at first, so a learner within the intensity
  reads nothing). Returns the env steps last looked at."""
  steps = env_steps() if known is None else known
  while not may_train(config, num_shards, steps, samples_trained):
    if stopped():
      break
    time.sleep(wait_s)
    steps = env_steps()
  return steps


def throttle_wait_s(
  config, num_shards, env_steps, samples_trained, samples_per_s, least_s, most_s
):
  """How long a throttled actor sleeps before it looks again: until the
  learner, training `samples_per_s` (None: not known yet), has trained
  the samples that `may_step` waits for, within [least_s, most_s]. In a
  cluster each look is a cross-process graph call, so actors that poll
  take the cores from the learner they wait for.

  >>> from types import SimpleNamespace
  >>> c = SimpleNamespace(training_intensity=4, learning_starts=100)
  >>> throttle_wait_s(c, 1, 300, 400, 1000.0, 0.01, 1.0)  # 400 to go
  0.4
  """
  if config.training_intensity is None or not samples_per_s:
    return least_s
  needed = config.training_intensity * _steps_ahead(
    config, num_shards, env_steps, samples_trained
  )
  return min(max(needed / samples_per_s, least_s), most_s)


class IdleBackoff:
  """A poll loop's waits: `first_s` after a round with work, doubling
  with each idle round in a row up to `most_s`.

  >>> b = IdleBackoff(0.01, 0.04)
  >>> [b.next_wait(busy) for busy in (False, False, False, False, True)]
  [0.01, 0.02, 0.04, 0.04, 0.0]
  """

  def __init__(self, first_s, most_s):
    self.first_s, self.most_s = first_s, most_s
    self._next = first_s

  def next_wait(self, busy):
    """The wait after a round (0 after one with work)."""
    if busy:
      self._next = self.first_s
      return 0.0
    wait, self._next = self._next, min(2 * self._next, self.most_s)
    return wait


class RateMeter:
  """A counter's rate per second from its readings (None until two).

  >>> m = RateMeter()
  >>> m.observe(100, now=1.0), m.observe(300, now=2.0)
  (None, 200.0)
  """

  def __init__(self):
    self._last = None
    self.rate = None

  def observe(self, count, now=None):
    now = time.monotonic() if now is None else now
    if self._last is not None and now > self._last[1]:
      delta = count - self._last[0]
      if delta > 0:
        self.rate = delta / (now - self._last[1])
    if self._last is None or count != self._last[0]:
      self._last = (count, now)
    return self.rate


class ActorThrottle:
  """An actor's hold under `training_intensity`, shared by the threads
  here and the cluster's actor processes: `wait_s` is 0 while the actor
  may step (`may_step`), else how long it sleeps before it looks again
  (`throttle_wait_s`, at the learner's pace measured over its looks).

  >>> from types import SimpleNamespace
  >>> c = SimpleNamespace(training_intensity=4, learning_starts=100)
  >>> throttle = ActorThrottle(c, 1, (0.01, 1.0))
  >>> throttle.wait_s(100, 0), throttle.wait_s(300, 400)  # pace unknown
  (0.0, 0.01)
  """

  def __init__(self, config, num_shards, wait_range_s):
    self.config, self.num_shards = config, num_shards
    self.least_s, self.most_s = wait_range_s
    self._learner_pace = RateMeter()

  def wait_s(self, env_steps, samples_trained, now=None):
    """0 if the actor may step, else the seconds to sleep first."""
    if may_step(self.config, self.num_shards, env_steps, samples_trained):
      return 0.0
    return throttle_wait_s(
      self.config,
      self.num_shards,
      env_steps,
      samples_trained,
      self._learner_pace.observe(samples_trained, now),
      self.least_s,
      self.most_s,
    )


def new_generation():
  """A fresh shard generation in [1, 2^62)."""
  return random.SystemRandom().randrange(1, 1 << 62)


class ReplayDriver:
  """Builds and runs one learner, `num_shards` replay shards and
  `num_actors` actors of `builder` (see the module docstring)."""

  def __init__(
    self, builder, env_factory, num_actors, num_shards, seed=0, prefix=None
  ):
    if num_actors < 1 or num_shards < 1:
      raise ValueError("need num_actors >= 1 and num_shards >= 1")
    self.builder = builder
    self.config = builder.config
    # Private queue names: a closed queue outlives its driver in a process.
    self.names = builder.queue_names(
      prefix or f"{builder.name}_{uuid.uuid4().hex}", num_shards
    )
    self.envs = [env_factory(i) for i in range(num_actors)]
    obs_space = self.envs[0].observation_space
    self.learner_executor = builder.make_learner(obs_space, self.names).build()
    self.learner_rejections = RejectionLog.of("learner", self.learner_executor)
    self.shard_executors = [
      builder.make_shard(obs_space, self.names, i, new_generation()).build()
      for i in range(num_shards)
    ]
    self.actor_executors = []
    for i, env in enumerate(self.envs):
      executor = builder.make_actor(env, self.names, i, num_actors).build()
      executor.execute("reset_env", seed + 1000 * i)
      self.actor_executors.append(executor)
    self.totals = EpisodeTotals()
    self.samples_trained = 0
    # Held around each update / serve call: a checkpoint taken under a
    # lock sees that part between calls. Take them one at a time (the
    # learner's, then each shard's), never together: a shard can wait on
    # the learner's queue.
    self.learner_lock = threading.Lock()
    self.shard_locks = [threading.Lock() for _ in range(num_shards)]
    self.shard_stats = [dict(size=0, mean_priority=0.0)] * num_shards
    self.inserted = [0] * num_shards
    self._weights = (0, None)
    self._stop = threading.Event()
    # Set after the actors stopped: the shards take their last inserts.
    self._shards_stop = threading.Event()
    self._threads = []
    self._actor_threads = []
    self._shard_threads = []
    self.errors = []
    self.publish_weights()

  # --- weights ------------------------------------------------------------

  def publish_weights(self):
    version = self._weights[0] + 1
    self._weights = (version, self.learner_executor.execute("get_weights"))

  # --- thread bodies --------------------------------------------------------

  def _guard(self, role, index, body):
    try:
      body()
    except _CLOSED:
      pass  # A queue closed: shutting down.
    except Exception as e:
      self.errors.append((role, index, e))
      self._stop.set()
      self._shards_stop.set()

  def _actor_loop(self, index, executor):
    sync_steps = self.config.actor_weight_sync_steps
    loaded, since_load = 0, sync_steps
    shards = shard_order(self.names.num_shards, index)
    throttle = ActorThrottle(
      self.config, self.names.num_shards, LOCAL_THROTTLE_WAIT_S
    )
    while not self._stop.is_set():
      wait = throttle.wait_s(self.totals.env_steps, self.samples_trained)
      if wait:
        time.sleep(wait)
        continue
      version, weights = self._weights
      if version != loaded and since_load >= sync_steps:
        executor.execute("set_weights", weights)
        loaded, since_load = version, 0
      stats = executor.execute("rollout", next(shards))
      since_load += int(stats["env_steps"])
      self.totals.add(stats, actor=index)

  def _shard_loop(self, index, executor, stats_every_s=2.0):
    next_stats = 0.0
    backoff = IdleBackoff(LOCAL_IDLE_WAIT_S, LOCAL_IDLE_WAIT_MAX_S)
    rejections = RejectionLog.of(f"replay shard {index}", executor)
    while True:
      # After the stop, rounds go on until one inserts nothing: they take
      # the stopped actors' last rows.
      stopping = self._shards_stop.is_set()
      with self.shard_locks[index]:
        out = executor.execute("serve")
      self.inserted[index] += int(out["inserted"])
      rejections.add(out["rejected_rows"], out["rejected_causes"])
      if stopping and not int(out["inserted"]):
        return
      if time.monotonic() >= next_stats:
        stats = executor.execute("stats")
        self.shard_stats[index] = {k: v.numpy() for k, v in stats.items()}
        self.shard_stats[index]["rejected_rows"] = rejections.total
        next_stats = time.monotonic() + stats_every_s
      busy = int(out["inserted"]) or int(out["updated"]) or int(out["sampled"])
      wait = backoff.next_wait(busy)
      if wait:
        time.sleep(wait)

  def _spawn(self, role, index, target, *args):
    """A daemon thread `{agent}-{role}-{index}` running `target(*args)`."""
    t = threading.Thread(
      target=self._guard,
      args=(role, index, lambda: target(*args)),
      name=f"{self.builder.name}-{role.replace(' ', '-')}-{index}",
      daemon=True,
    )
    t.start()
    self._threads.append(t)
    return t

  # --- running ------------------------------------------------------------

  def start(self):
    """Starts the shard and actor threads."""
    for i, executor in enumerate(self.shard_executors):
      self._shard_threads.append(
        self._spawn("replay shard", i, self._shard_loop, i, executor)
      )
    for i, executor in enumerate(self.actor_executors):
      self._actor_threads.append(
        self._spawn("actor", i, self._actor_loop, i, executor)
      )

  def update(self):
    """One learner update (blocks until the actors' env steps allow it,
    `may_train`, and a batch is sampled); publishes the weights every
    `publish_every` updates."""
    wait_to_train(
      self.config,
      self.names.num_shards,
      self.samples_trained,
      lambda: self.totals.env_steps,
      self._stop.is_set,
      LOCAL_IDLE_WAIT_S,
    )
    with self.learner_lock:
      out = self.learner_executor.execute("update")
    self.learner_rejections.add_result(out)
    self.samples_trained += int(out["frames"])
    if int(out["train_step"]) % self.config.publish_every == 0:
      self.publish_weights()
    self._raise_thread_error()
    return out

  def request_stop(self):
    """Makes `run` stop after the current update (e.g. from `on_update`,
    once a target is reached)."""
    self._stop.set()

  def run(self, total_env_steps, on_update=None, max_seconds=None, poll_s=0.25):
    """Trains until the actors took `total_env_steps` env steps, or
    `max_seconds` passed, or `stop()` / Ctrl-C. `on_update(result of
    numpy, env steps)` runs after every update in the learner thread.
    Returns the env steps taken."""
    deadline = None if max_seconds is None else time.monotonic() + max_seconds

    def keep_going():
      return not (
        self._stop.is_set()
        or self.totals.env_steps >= total_env_steps
        or (deadline is not None and time.monotonic() >= deadline)
      )

    def step():
      out = {k: v.numpy() for k, v in self.update().items()}
      if on_update is not None:
        on_update(out, self.totals.env_steps)

    if not self._threads:
      self.start()
    # The learner blocks until shards serve: the budget is watched here too.
    run_learner(
      self.builder.name, step, keep_going, self.stop, poll_s, keep_going
    )
    self._raise_thread_error()
    return self.totals.env_steps

  def _raise_thread_error(self):
    """The first failed thread's error as an ActorFailedError naming the
    actor or shard and the failure's line (e.g. the WorkerDiedError of
    an env worker that died or stopped answering)."""
    if self.errors:
      role, index, error = self.errors[0]
      raise ActorFailedError(index, error, role) from error

  def stop(self, timeout_s=10.0):
    """Drains the actors, then the shards (`DRAIN_S` each), closes every
    queue, joins the threads and closes the envs. Returns the names of
    threads still alive after `timeout_s` (none expected)."""
    self._stop.set()
    join_all(self._actor_threads, DRAIN_S)
    self._shards_stop.set()
    join_all(self._shard_threads, DRAIN_S)
    for executor in [self.learner_executor] + self.shard_executors:
      try:
        executor.execute("close_queue")
      except tf.errors.CancelledError:
        pass  # Already closed.
    return join_and_close(
      self._threads, self.envs, self.builder.name, timeout_s
    )
