"""An actor-learner agent (IMPALA; any `ActorLearnerBuilder`) on one
machine: actor threads and a learner thread in one process.

Why threads: every actor unroll and every learner update is ONE graph call,
and TF releases the GIL while a graph runs, so N actor threads and the
learner overlap on the cores; Python env code (which needs the GIL) can go
to env subprocesses (`GymnasiumVectorEnv(asynchronous=True)`), and ale-py's
vector env steps in C++ threads. `benchmarks/impala_throughput.py` measures
the result against raw env stepping.

Shutdown: `stop()` (also on Ctrl-C, or when the frame budget is reached)
closes the queue with `cancel_pending_enqueues`, so an actor blocked on a
full queue gets `CancelledError` and a learner blocked on an empty one gets
`OutOfRangeError`; every thread then exits, and the envs are closed.

Batched inference (`batched_inference`, SEED RL's scheme): the actors'
policy calls go to ONE inference thread, which acts for all actors at
once each env step (`components/env_stepping/batched_inference.py`); it
takes the published weights between its `serve` calls. `stop()` also
closes its queues, and an actor or server that fails closes them too, so
that no thread is left waiting for a batch that cannot fill.
"""

import collections
import re
import threading
import time
import uuid

import numpy as np
import tensorflow as tf

from ingraph_rl.components.queues.row_checks import RejectionLog

_CLOSED = (tf.errors.CancelledError, tf.errors.OutOfRangeError)


class ActorFailedError(RuntimeError):
  """An actor (or the inference server, or a replay shard: `role`)
  failed, e.g. its env worker died or stopped answering; the driver
  stopped, its envs closed. The message is the failure's first line
  (`__cause__`: the error itself)."""

  def __init__(self, who, error, role="actor"):
    super().__init__(f"{role} {who} failed: {_first_line(error)}")
    self.who = who


def _first_line(error):
  """ "Type: message" of an error; for a TF error raised by Python code in
  a graph (`tf.numpy_function`), the Python exception's line."""
  message = getattr(error, "message", None) or str(error)
  lines = [line.strip() for line in message.splitlines() if line.strip()]
  raised = [
    line for line in lines if re.match(r"^[\w.]*(Error|Exception): ", line)
  ]
  if raised:  # "ingraph_rl.environments.workers.WorkerDiedError: ..."
    name, rest = raised[-1].split(": ", 1)
    return f"{name.rsplit('.', 1)[-1]}: {rest}"
  return f"{type(error).__name__}: {lines[0] if lines else repr(error)}"


def _raise_actor_error(errors):
  if errors:
    who, error = errors[0]
    raise ActorFailedError(who, error) from error


# The stepper's per-env unroll stats ([num_envs] each).
PER_ENV_STATS = ("episodes_per_env", "return_sum_per_env", "length_sum_per_env")


def run_learner(name, step, keep_going, stop, poll_s=0.25, watch=None):
  """Calls `step()` (one learner update) in a learner thread while
  `keep_going()`; this (main) thread waits in `poll_s` slices, so it stays
  responsive to Ctrl-C, until the thread ends or `watch()` (if given) is
  false; then `stop()` (which closes the queues, so a blocked update ends
  with Cancelled/OutOfRange). Re-raises the learner thread's error."""
  errors = []

  def learn():
    try:
      while keep_going():
        step()
    except _CLOSED:
      pass  # The queues closed: shutting down.
    except Exception as e:
      errors.append(e)

  thread = threading.Thread(target=learn, name=f"{name}-learner", daemon=True)
  thread.start()
  try:
    while thread.is_alive() and (watch is None or watch()):
      thread.join(poll_s)
  finally:
    stop()
    thread.join(10.0)
  if errors:
    raise errors[0]


# At shutdown, how long actors may take to finish their unrolls (or
# rollouts) before the queues close under them.
DRAIN_S = 5.0


def join_all(threads, timeout_s):
  """Joins `threads`, all within `timeout_s`; returns the names of those
  still alive."""
  deadline = time.monotonic() + timeout_s
  for t in threads:
    t.join(max(0.0, deadline - time.monotonic()))
  return [t.name for t in threads if t.is_alive()]


def join_and_close(threads, envs, name, timeout_s):
  """Joins `threads` (all within `timeout_s`), then closes `envs` (a dead
  env must not keep the others open). Returns the names of the threads
  still alive."""
  alive = join_all(threads, timeout_s)
  for env in envs:
    try:
      env.close()
    except Exception as e:
      print(f"[{name}] closing an env failed: {e!r}", flush=True)
  return alive


class EpisodeTotals:
  """Thread-safe running totals of the actors' finished episodes, overall
  and per env: `take_per_env()` attributes them to (actor, env index),
  e.g. to report per-level returns when actors' envs play different
  levels; `take_episodes()` also lists them per (unroll, env)."""

  def __init__(self, max_groups=100_000):
    self._lock = threading.Lock()
    self.episodes = 0
    self.return_sum = 0.0
    self.length_sum = 0
    self.env_steps = 0
    self.unrolls = 0
    self._per_env = {}
    # Bounded: groups nobody takes (the newest are kept).
    self._groups = collections.deque(maxlen=max_groups)

  def add(self, stats, actor=0):
    """Adds an actor unroll's stats (the actor's `unroll` output)."""
    per_env = [
      np.asarray(stats[k], np.float64) for k in PER_ENV_STATS if k in stats
    ]
    with self._lock:
      self.episodes += int(stats["episodes"])
      self.return_sum += float(stats["return_sum"])
      self.length_sum += int(stats["length_sum"])
      self.env_steps += int(stats["env_steps"])
      self.unrolls += 1
      if len(per_env) == len(PER_ENV_STATS):
        old = self._per_env.get(actor)
        self._per_env[actor] = (
          per_env if old is None else [a + b for a, b in zip(old, per_env)]
        )
        episodes, returns, lengths = per_env
        for env in np.flatnonzero(episodes):
          self._groups.append(
            (
              actor,
              int(env),
              int(episodes[env]),
              float(returns[env]),
              int(lengths[env]),
            )
          )

  def take(self):
    """(episodes, return_sum, length_sum) since the last take."""
    with self._lock:
      out = (self.episodes, self.return_sum, self.length_sum)
      self.episodes, self.return_sum, self.length_sum = 0, 0.0, 0
      return out

  def take_episodes(self):
    """What `take()` returns and the episodes' groups, taken together:
    (episodes, return_sum, length_sum, groups), groups being [(actor, env
    index, episodes, return_sum, length_sum)], one per env that finished
    episodes in an unroll, in the order the unrolls came (groups are kept
    only for unrolls with per-env stats)."""
    with self._lock:
      out = (
        self.episodes,
        self.return_sum,
        self.length_sum,
        list(self._groups),
      )
      self.episodes, self.return_sum, self.length_sum = 0, 0.0, 0
      self._groups.clear()
      return out

  def take_per_env(self):
    """{actor index: {"episodes", "return_sum", "length_sum"}: float64
    arrays [num_envs] by env index} since the last `take_per_env`."""
    with self._lock:
      out = {
        actor: dict(zip(("episodes", "return_sum", "length_sum"), sums))
        for actor, sums in self._per_env.items()
      }
      self._per_env = {}
      return out


class ActorLearnerDriver:
  """Builds one learner and `num_actors` actors of `builder` (an
  `ActorLearnerBuilder`, e.g. `IMPALABuilder(config)`) sharing a private
  queue, and runs them: the one single-process training loop of such
  agents (`run`).

    driver = ActorLearnerDriver(builder, lambda i: make_vector_env(...), 2)
    driver.start()                       # actor threads
    while ...: out = driver.update()     # learner steps (or run())
    driver.stop()

  `env_factory(actor_index)` makes each actor's VectorEnv; actor i resets
  with seed `seed + 1000 * i` and samples with the builder's actor i seed.
  The learner's `update` publishes its weights (as tensors); an actor loads
  the newest before each unroll.

  `batched_inference` (None: the builder config's `batched_inference`, if
  it has one): the actors' policy calls go to one inference executor
  (`inference_executor`, the builder's `make_inference_server`), served
  by an inference thread, which loads the newest weights before each of
  its `serve` calls.
  """

  def __init__(
    self,
    builder,
    env_factory,
    num_actors,
    seed=0,
    queue_name=None,
    batched_inference=None,
  ):
    if num_actors < 1:
      raise ValueError("num_actors must be >= 1")
    self.builder = builder
    if batched_inference is None:
      config = getattr(builder, "config", None)
      batched_inference = getattr(config, "batched_inference", False)
    self.batched_inference = bool(batched_inference)
    # A private queue: a closed queue outlives its driver in this process.
    self.queue_name = (
      queue_name or f"{builder.name}_rollouts_{uuid.uuid4().hex}"
    )
    self.envs = [env_factory(i) for i in range(num_actors)]
    obs_space = self.envs[0].observation_space
    root = builder.make_learner(obs_space, self.queue_name)
    self.learner = root.component
    self.learner_executor = root.build()
    self.learner_rejections = RejectionLog.of("learner", self.learner_executor)
    self.inference_executor = None
    actor_kwargs = {}
    if self.batched_inference:
      channel = builder.inference_channel(
        self.envs, f"{builder.name}_inference_{uuid.uuid4().hex}"
      )
      server = builder.make_inference_server(obs_space, channel)
      self.inference_executor = server.build()
      actor_kwargs = dict(inference=channel)
    self.actor_executors = []
    for i, env in enumerate(self.envs):
      executor = builder.make_actor(
        env, self.queue_name, index=i, **actor_kwargs
      ).build()
      executor.execute("reset_env", seed + 1000 * i)
      self.actor_executors.append(executor)
    self.totals = EpisodeTotals()
    self._weights = (0, None)
    self._stop = threading.Event()
    self._threads = []
    self._actor_threads = []
    # Held around the learner's queue reads: `update` and, at shutdown,
    # `drop_queued` must not race for the queue's rows.
    self._queue_lock = threading.Lock()
    self._primed = "prime" not in self.learner_executor.apis
    self.actor_errors = []
    self.publish_weights()

  # --- weights ------------------------------------------------------------

  def publish_weights(self):
    """Makes the learner's current weights the actors' next ones."""
    version = self._weights[0] + 1
    self._weights = (version, self.learner_executor.execute("get_weights"))

  def _actor_loop(self, index, executor):
    # With batched inference the server loads the weights, not actors.
    loaded = 0 if self.inference_executor is None else None
    try:
      while not self._stop.is_set():
        version, weights = self._weights
        if loaded is not None and version != loaded:
          executor.execute("set_weights", weights)
          loaded = version
        self.totals.add(executor.execute("unroll"), actor=index)
    except _CLOSED:
      pass  # The queue closed: shutting down.
    except Exception as e:
      self._failed(index, e)

  def _inference_loop(self):
    executor, loaded = self.inference_executor, 0
    try:
      # Serves on after a stop while actors finish their unrolls.
      while not self._stop.is_set() or any(
        t.is_alive() for t in self._actor_threads
      ):
        version, weights = self._weights
        if version != loaded:
          executor.execute("set_weights", weights)
          loaded = version
        executor.execute("serve")
    except _CLOSED:
      pass  # The queues closed: shutting down.
    except Exception as e:
      self._failed("inference", e)

  def _failed(self, who, error):
    self.actor_errors.append((who, error))
    self._stop.set()
    if self.inference_executor is not None:
      # The others would wait for this one's requests (or replies), and
      # the learner for their rollouts, forever.
      self._close_queues()

  def _close_queues(self):
    try:
      self.learner_executor.execute("close_queue")
    except tf.errors.CancelledError:
      pass  # Already closed.
    if self.inference_executor is not None:
      self.inference_executor.execute("close")

  # --- running ------------------------------------------------------------

  def start(self):
    """Starts the actor threads, and the inference thread with batched
    inference (daemons, so a crash cannot hang exit)."""
    for i, executor in enumerate(self.actor_executors):
      self._actor_threads.append(
        self._start_thread(f"actor-{i}", self._actor_loop, i, executor)
      )
    if self.inference_executor is not None:
      self._start_thread("inference", self._inference_loop)

  def _start_thread(self, name, target, *args):
    t = threading.Thread(
      target=target, args=args, name=f"{self.builder.name}-{name}", daemon=True
    )
    t.start()
    self._threads.append(t)
    return t

  def update(self):
    """One learner update (blocks until a batch is queued); publishes the
    new weights. Returns the learner's result dict (tensors)."""
    with self._queue_lock:
      if not self._primed:
        self.learner_executor.execute("prime")
        self._primed = True
      out = self.learner_executor.execute("update")
    self.learner_rejections.add_result(out)
    self.publish_weights()
    _raise_actor_error(self.actor_errors)
    return out

  def run(self, total_frames, on_update=None, poll_s=0.25, max_seconds=None):
    """Trains until the learner consumed `total_frames` env frames, or
    until `max_seconds` passed since this call (checked before each
    update), or `stop()` / Ctrl-C. The learner runs in its own thread,
    so this (main) thread stays responsive to KeyboardInterrupt.

    `on_update(result_dict_of_numpy, frames)` runs after every update, in
    the learner thread. Returns the frames trained on.
    """
    state = {"frames": 0}
    deadline = None if max_seconds is None else time.monotonic() + max_seconds

    def keep_going():
      return (
        not self._stop.is_set()
        and state["frames"] < total_frames
        and (deadline is None or time.monotonic() < deadline)
      )

    def step():
      out = {k: v.numpy() for k, v in self.update().items()}
      state["frames"] += int(out["frames"])
      if on_update is not None:
        on_update(out, state["frames"])

    if not self._threads:
      self.start()
    # A failed actor sets _stop: the learner may be blocked on rollouts
    # that will not come, so stop (closing the queue) instead of waiting.
    run_learner(
      self.builder.name,
      step,
      keep_going,
      self.stop,
      poll_s,
      watch=lambda: not self._stop.is_set(),
    )
    # Where it closed the queues under the learner.
    _raise_actor_error(self.actor_errors)
    return state["frames"]

  def stop(self, timeout_s=10.0):
    """Lets the actors finish their unrolls (`drain_actors`), closes the
    queue, joins every thread and closes the envs. Returns the names of
    threads still alive after `timeout_s` (none expected)."""
    self._stop.set()
    self.drain_actors()
    self._close_queues()
    return join_and_close(
      self._threads, self.envs, self.builder.name, timeout_s
    )

  def drain_actors(self, timeout_s=DRAIN_S, poll_s=0.01):
    """Once `_stop` is set: drops what the actors queue (the learner's
    `drop_queued`, when it has it and no update runs) until they have
    finished their unrolls and exited, or `timeout_s` passed. Closing the
    queue under an actor blocked on it instead cancels its enqueue inside
    its graph call, which TF logs as a warning."""
    if "drop_queued" not in self.learner_executor.apis:
      return
    deadline = time.monotonic() + timeout_s
    while any(t.is_alive() for t in self._actor_threads):
      if time.monotonic() >= deadline:
        return
      if self._queue_lock.acquire(timeout=poll_s):
        try:
          self.learner_executor.execute("drop_queued")
        except _CLOSED:
          return  # Closed already (a failed actor's shutdown).
        finally:
          self._queue_lock.release()
      time.sleep(poll_s)
