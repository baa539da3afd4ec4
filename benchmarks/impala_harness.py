"""IMPALA's single-process throughput harness (flag-free, so several
benchmarks can import it): one `ActorLearnerDriver` of N actor threads and
its raw envs, whose phases (raw stepping, actors only, end to end) a
benchmark interleaves, and a learner fed synthetic rollouts.
"""

import dataclasses
import gc
import os
import threading
import time
import uuid

import numpy as np
import tensorflow as tf

from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig
from ingraph_rl.runners.driver import (
  ActorLearnerDriver,
  EpisodeTotals,
)
from ingraph_rl.runners.environments import env_kind, make_actor_env
from ingraph_rl.testing.queues import queue_feeder

SEED = 0
ACT_CALLS = 100  # Policy forwards timed for the profile.


def make_config(num_actions, obs_space, args):
  # IMPALA's small conv torso for frames; the default MLP for vectors.
  torso = "small" if len(obs_space.shape) == 3 else IMPALAConfig.torso
  return IMPALAConfig(
    num_actions=num_actions,
    torso=torso,
    unroll_length=args["T"],
    batch_size=args["B"],
    queue_capacity=args["queue_capacity"],
    reward_clipping="abs_one",
    scale_observations=None,
    seed=SEED,
  )


class StepTimer:
  """Wraps `env.step` (which the actor's numpy_function looks up at call
  time) to add up the seconds spent inside it. With env groups (a
  `GroupedVectorEnv`, stepped group by group) each group's `step` is
  wrapped, and `calls` counts whole vector steps (a group's call adds its
  share of the envs)."""

  def __init__(self, env, env_groups=1):
    self.seconds = 0.0
    self.calls = 0.0
    groups = getattr(env, "groups", ()) if env_groups > 1 else ()
    for part in groups or (env,):
      self._wrap(part, part.num_envs / env.num_envs)

  def _wrap(self, env, share):
    step = env.step

    def timed(actions):
      start = time.perf_counter()
      try:
        return step(actions)
      finally:
        self.seconds += time.perf_counter() - start
        self.calls += share

    env.step = timed


class TimedTotals(EpisodeTotals):
  """The driver's episode totals, plus (time, env steps) per unroll."""

  def __init__(self):
    super().__init__()
    self.events = []

  def add(self, stats, **kwargs):
    super().add(stats, **kwargs)
    self.events.append((time.perf_counter(), int(stats["env_steps"])))


def window_rate(events, t0, t1):
  """Units/s of the events (time, count) in [t0, t1] and how many there
  were: the counts after the first event over the time from the first to
  the last (whole unrolls only); with fewer than 3 events, all their counts
  over t1 - t0."""
  inside = [e for e in events if t0 <= e[0] <= t1]
  if len(inside) < 3:
    return sum(n for _, n in inside) / (t1 - t0), len(inside)
  count = sum(n for _, n in inside[1:])
  return count / (inside[-1][0] - inside[0][0]), len(inside)


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def workers_cpu_s(envs):
  """CPU seconds (user + system) the env worker processes of `envs` have
  used so far (envs without workers: 0), from /proc/<pid>/stat. With the
  parent's, the CPU a step costs: what the phases' rates are on a 2-core
  machine that nothing else uses."""
  total = 0
  for env in envs:
    for pid in getattr(env, "pids", None) or []:
      try:
        with open(f"/proc/{pid}/stat") as f:
          fields = f.read().rsplit(")", 1)[1].split()
      except OSError:
        continue
      total += int(fields[11]) + int(fields[12])  # utime, stime.
  return total / _CLOCK_TICKS


class Harness:
  """One driver (N actors), its drain executor and the raw envs of one
  configuration; runs the phases."""

  def __init__(
    self, env_id, num_actors, processes, args, config_fn=make_config
  ):
    """`config_fn(num_actions, obs_space, args)`: the IMPALAConfig."""
    self.env_id, self.num_actors, self.args = env_id, num_actors, args
    self.processes = processes
    self.E = args["E"]
    kwargs = dict(
      num_action_repeats=args["repeats"][env_id], processes=processes
    )
    if env_kind(env_id) == "atari" and args["ale_num_threads"]:
      kwargs["num_threads"] = args["ale_num_threads"]
    self.timers = []

    def factory(i):  # Called by the driver, after the config exists.
      env = make_actor_env(
        env_id,
        self.E,
        seed=SEED + 1000 * i,
        env_groups=self.config.env_groups,
        **kwargs,
      )
      self.timers.append(StepTimer(env, self.config.env_groups))
      return env

    t = time.perf_counter()
    probe = make_actor_env(env_id, self.E, seed=SEED, **kwargs)
    self.config = config_fn(
      probe.action_space.num_categories, probe.observation_space, args
    )
    self.obs_space = probe.observation_space
    # The raw variant's envs: the same constructor call as the actors'.
    self.raw_envs = [probe] + [
      make_actor_env(env_id, self.E, seed=SEED + 1000 * i, **kwargs)
      for i in range(1, num_actors)
    ]
    for i, env in enumerate(self.raw_envs):
      env.reset(SEED + 1000 * i)
    self.num_actions = self.config.num_actions
    builder = IMPALABuilder(self.config)
    self.driver = ActorLearnerDriver(builder, factory, num_actors, seed=SEED)
    self.driver.totals = TimedTotals()
    self.drain = queue_feeder(
      builder.record_space(self.obs_space),
      self.config.queue_capacity,
      self.driver.queue_name,
      api_names=["dequeue_many"],
    )
    self.build_s = time.perf_counter() - t
    self.updates = []  # (time, frames) per update.
    self.drained = 0
    self.settle_s = 0.3
    self.driver.start()
    # First calls run TF's graph optimizations (~0.5 s for the update):
    # pay them here, untimed.
    self.driver.update()
    self.drain.execute("dequeue_many", self.config.batch_size)
    self.quiesce()

  # --- phases -------------------------------------------------------------

  def quiesce(self, timeout_s=60.0):
    """Waits until the queue is full (every actor then blocks on its
    enqueue), plus about one unroll for those still stepping."""
    deadline = time.monotonic() + timeout_s
    cap = self.config.queue_capacity
    ex = self.driver.learner_executor
    while int(ex.execute("queue_size")) < cap:
      if time.monotonic() > deadline:
        raise RuntimeError(f"queue did not fill in {timeout_s} s")
      if self.driver.actor_errors:
        raise RuntimeError(f"actor failed: {self.driver.actor_errors[0]}")
      time.sleep(0.02)
    time.sleep(self.settle_s)

  def _window(self):
    time.sleep(self.args["warmup_s"])
    t0, cpu0 = time.perf_counter(), time.process_time()
    workers0 = workers_cpu_s(self.driver.envs)
    step0 = [(tm.seconds, tm.calls) for tm in self.timers]
    time.sleep(self.args["duration"])
    t1 = time.perf_counter()
    # This process's CPU seconds in the window (all threads), and its env
    # workers' (DM Lab's: the env's own CPU).
    self.window_cpu_s = time.process_time() - cpu0
    self.window_workers_cpu_s = workers_cpu_s(self.driver.envs) - workers0
    step1 = [(tm.seconds, tm.calls) for tm in self.timers]
    env_s = sum(b[0] - a[0] for a, b in zip(step0, step1))
    calls = sum(b[1] - a[1] for a, b in zip(step0, step1))
    return t0, t1, env_s, calls

  def _consumer(self, body):
    """Runs `body()` in a thread until the returned event is set."""
    stop = threading.Event()
    errors = []

    def loop():
      try:
        while not stop.is_set():
          body()
      except (tf.errors.CancelledError, tf.errors.OutOfRangeError):
        pass
      except Exception as e:
        errors.append(e)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return stop, thread, errors

  def _actor_rate(self, t0, t1):
    sps, unrolls = window_rate(self.driver.totals.events, t0, t1)
    if unrolls < 1:
      raise RuntimeError(
        f"{self.env_id}: no unroll finished in a "
        f"{t1 - t0:.1f} s window; raise --duration"
      )
    # Time per actor unroll, so quiesce waits for a stepping actor.
    self.settle_s = min(
      5.0,
      max(
        0.3, 1.5 * self.num_actors * self.E * self.config.unroll_length / sps
      ),
    )
    return sps, unrolls

  def actors_only(self):
    B = self.config.batch_size

    def drain():
      self.drain.execute("dequeue_many", B)
      self.drained += B

    stop, thread, errors = self._consumer(drain)
    t0, t1, env_s, calls = self._window()
    stop.set()
    thread.join()
    if errors:
      raise errors[0]
    sps, unrolls = self._actor_rate(t0, t1)
    self.quiesce()
    return {
      "env_steps_per_s": sps,
      "unrolls": unrolls,
      "env_step_s": env_s,
      "env_step_calls": calls,
      "window_s": t1 - t0,
      "cpu_s_per_env_step": (self.window_cpu_s + self.window_workers_cpu_s)
      / (sps * (t1 - t0)),
    }

  def end_to_end(self):
    def learn():
      out = self.driver.update()
      self.updates.append((time.perf_counter(), int(out["frames"].numpy())))

    stop, thread, errors = self._consumer(learn)
    t0, t1, env_s, calls = self._window()
    stop.set()
    thread.join()
    if errors:
      raise errors[0]
    sps, unrolls = self._actor_rate(t0, t1)
    trained, updates = window_rate(self.updates, t0, t1)
    self.quiesce()
    return {
      "env_steps_per_s": sps,
      "unrolls": unrolls,
      "trained_env_steps_per_s": trained,
      "updates": updates,
      "env_step_s": env_s,
      "env_step_calls": calls,
      "window_s": t1 - t0,
    }

  def raw(self, serial=False):
    """N threads each stepping one raw env, or (`serial`) one thread
    stepping the N envs in turn (no GIL hand-offs between threads)."""
    counts = [0] * self.num_actors
    stop = threading.Event()

    def loop(envs):
      rng = np.random.default_rng(envs[0])
      while not stop.is_set():
        for i in envs:
          self.raw_envs[i].step(
            rng.integers(0, self.num_actions, self.E, dtype=np.int64)
          )
          counts[i] += self.E

    groups = (
      [list(range(self.num_actors))]
      if serial
      else [[i] for i in range(self.num_actors)]
    )
    threads = [
      threading.Thread(target=loop, args=(g,), daemon=True) for g in groups
    ]
    for t in threads:
      t.start()
    time.sleep(self.args["warmup_s"])
    c0, t0, cpu0 = sum(counts), time.perf_counter(), time.process_time()
    workers0 = workers_cpu_s(self.raw_envs)
    time.sleep(self.args["duration"])
    c1, t1 = sum(counts), time.perf_counter()
    self.window_cpu_s = time.process_time() - cpu0
    workers_s = workers_cpu_s(self.raw_envs) - workers0
    stop.set()
    for t in threads:
      t.join()
    return {
      "env_steps_per_s": (c1 - c0) / (t1 - t0),
      "window_s": t1 - t0,
      "cpu_s_per_env_step": (self.window_cpu_s + workers_s) / max(c1 - c0, 1),
    }

  def act_only_seconds(self, calls=ACT_CALLS):
    """Seconds per policy forward (actor 0's `act` tf.function, or the
    inference server's with batched inference) on a batch of
    `envs_per_actor` observations, with the actors blocked (idle)."""
    fn, args = self.act_inputs()
    fn(*args)["action"].numpy()
    start = time.perf_counter()
    for _ in range(calls):
      out = fn(*args)
    out["action"].numpy()
    return (time.perf_counter() - start) / calls

  def act_inputs(self):
    """(actor 0's `act` tf.function, arguments for `envs_per_actor`
    observations). With batched inference, the inference server's `act`
    (the same policy; an actor's `act` would wait for a batch of requests
    from every actor)."""
    ex = self.driver.inference_executor
    if ex is None:
      ex = self.driver.actor_executors[0]
    fn = ex.function("act")

    def zeros(spec):  # Batch dim E, time dim 1.
      return tf.zeros(
        [
          self.E if i == 0 else 1 if d is None else d
          for i, d in enumerate(spec.shape)
        ],
        spec.dtype,
      )

    # Observations, then zeros for the rest (state, resets, ...).
    args = [
      tf.nest.map_structure(
        tf.constant, self.obs_space.sample(size=(self.E, 1), seed=SEED)
      )
    ] + [tf.nest.map_structure(zeros, spec) for spec in fn.input_signature[1:]]
    return fn, args

  def close(self):
    alive = self.driver.stop()
    for env in self.raw_envs:
      env.close()
    return alive


class LearnerOnly:
  """A learner on its own queue, fed synthetic rollouts: `run()` queues
  `learner_updates` batches (untimed), then times that many updates."""

  def __init__(self, env_id, args, config_fn=make_config):
    probe = make_actor_env(
      env_id, 1, seed=SEED, num_action_repeats=args["repeats"][env_id]
    )
    obs_space = probe.observation_space
    num_actions = probe.action_space.num_categories
    probe.close()
    self.K, B = args["learner_updates"], args["B"]
    config = dataclasses.replace(
      config_fn(num_actions, obs_space, args), queue_capacity=(self.K + 1) * B
    )
    name = f"impala_bench_learner_{uuid.uuid4().hex}"
    t = time.perf_counter()
    builder = IMPALABuilder(config)
    self.executor = builder.make_learner(obs_space, name).build()
    space = builder.record_space(obs_space)
    self.feeder = queue_feeder(space, config.queue_capacity, name)
    self.build_s = time.perf_counter() - t
    self.queue_capacity = config.queue_capacity
    rng = np.random.default_rng(SEED)
    steps = config.unroll_length + 1
    batch = {
      "observations": obs_space.sample(size=(B, steps), seed=SEED),
      "rewards": rng.choice([-1.0, 0.0, 1.0], (B, steps)).astype(np.float32),
      "dones": rng.random((B, steps)) < 0.01,
      "actions": rng.integers(0, num_actions, (B, steps), np.int64),
      "logits": rng.normal(size=(B, steps, num_actions)).astype(np.float32),
    }
    if config.lstm_units:
      z = np.zeros((B, config.lstm_units), np.float32)
      batch["initial_state"] = {"c": z, "h": z}
    for key, leaf in space.items():  # Any other rollout field: zeros.
      if key not in batch:
        batch[key] = leaf.with_batch_rank().zeros(B)
    self.batch = tf.nest.map_structure(tf.constant, batch)
    self._fill(2)  # Prime (staging) + one untimed update.
    if "prime" in self.executor.apis:
      self.executor.execute("prime")
    self.executor.execute("update")["loss"].numpy()

  def _fill(self, n):
    for _ in range(n):
      self.feeder.execute("enqueue_many", self.batch)

  def run(self):
    self._fill(self.K)
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(self.K):
      out = self.executor.execute("update")
    frames = int(out["frames"].numpy()) * self.K
    wall = time.perf_counter() - start
    return {
      "env_steps_per_s": frames / wall,
      "update_ms": wall / self.K * 1e3,
      # This process's CPU (all threads) per env step trained.
      "cpu_s_per_env_step": (time.process_time() - cpu) / frames,
    }

  def close(self):
    self.executor.execute("close_queue")
