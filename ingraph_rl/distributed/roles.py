"""The three IMPALA cluster roles, one process each (TF2 multi-client eager
over raw resource ops with shared names; DESIGN.md section 6).

  ps:      serves variables (`tf.distribute.Server.join`).
  learner: connects to the ps tasks, builds the learner with its variables
           sharded over them (on itself without ps tasks) and the rollout
           queue on itself, restores the latest checkpoint, trains, and
           publishes its weights after every update.
  actor:   connects to the learner only (a sparse spec, so actors can join,
           die and rejoin without anyone waiting), and loops ONE fused graph
           call: read the published weights on the learner, load them, run
           the env stepper, enqueue the rollouts into the learner's queue.

Failure handling: an actor whose learner goes away gets `UnavailableError`
(or `CancelledError` when the learner closes the queue at the end) and
exits with a message and exit code `EXIT_LEARNER_GONE`; the local launcher
restarts it, and it reconnects. A learner that loses a ps task exits with
`EXIT_PS_GONE`; restarted, it restores from its latest checkpoint.
"""

import time

import tensorflow as tf

from ingraph_rl.agents.impala.actor import IMPALAActor
from ingraph_rl.agents.impala.driver import actor_config
from ingraph_rl.agents.impala.learner import IMPALALearner
from ingraph_rl.agents.impala.networks import (make_network,
                                               policy_input_spaces)
from ingraph_rl.distributed.cluster import Task, task_from_flags
from ingraph_rl.distributed.placement import PSExecutor
from ingraph_rl.distributed.weights import PublishedWeights
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.spaces import Dict, FloatBox

EXIT_LEARNER_GONE = 3
EXIT_PS_GONE = 4
QUEUE_NAME = "ingraph_rl/impala_rollouts"

_UNREACHABLE = (tf.errors.UnavailableError, tf.errors.AbortedError,
                tf.errors.CancelledError, tf.errors.InternalError,
                tf.errors.UnknownError, tf.errors.FailedPreconditionError,
                tf.errors.NotFoundError)


def log(task, message):
  print(f"[{task.job}:{task.index}] {message}", flush=True)


def connect(task, timeout_s=60.0):
  """Starts this task's server and connects its eager context."""
  deadline = time.monotonic() + timeout_s
  while True:
    try:
      tf.config.experimental_connect_to_cluster(
          task.tf_cluster_spec(), job_name=task.job, task_index=task.index)
      return
    except (tf.errors.UnavailableError, tf.errors.UnknownError,
            tf.errors.InternalError) as e:
      if time.monotonic() > deadline:
        raise RuntimeError(f"cannot connect to the cluster: {e}") from None
      time.sleep(1.0)


def run_ps(task):
  """Serves until killed."""
  server = tf.distribute.Server(
      tf.train.ClusterSpec({"ps": task.cluster["ps"],
                            "learner": task.cluster["learner"]}),
      job_name="ps", task_index=task.index, start=True)
  log(task, f"serving at {task.address}")
  server.join()


def build_learner(task, config, observation_space):
  """(learner, executor, published weights) with variables on the ps."""
  learner = IMPALALearner(config, observation_space, QUEUE_NAME)
  with tf.device(task.learner_device):
    executor = PSExecutor(learner, {}, api_names=learner_apis(learner),
                          seed=config.seed, ps_devices=task.ps_devices(),
                          device_map={learner.queue.path:
                                      task.learner_device})
    published = PublishedWeights.like(executor.execute("get_weights"),
                                      task.learner_device)
  return learner, executor, published


def learner_apis(learner):
  return ["update", "get_weights", "get_train_step", "queue_size",
          "close_queue"] + (["prime"] if learner.staging else [])


class RemoteActor:
  """An actor process's executor and its fused `step()`: read the learner's
  published weights, load them, unroll, enqueue — one graph call."""

  def __init__(self, task, config, env, weights_specs):
    self.task = task
    actor = IMPALAActor(actor_config(config, task.index), env, QUEUE_NAME)
    self.published = PublishedWeights(weights_specs, task.learner_device)
    weights_space = Dict({p: FloatBox(tuple(s), dtype=d.as_numpy_dtype)
                          for p, (s, d) in self.published.specs.items()})
    self.executor = TFExecutor(
        actor, actor.root_input_spaces(weights_space),
        api_names=["act", "reset_env", "unroll", "set_weights"],
        seed=actor_config(config, task.index).seed,
        device_map={actor.queue.path: task.learner_device})
    set_weights = self.executor.function("set_weights")
    unroll = self.executor.function("unroll")
    read = self.published.read

    @tf.function
    def step():
      got = read()
      with tf.control_dependencies(tf.nest.flatten(
          set_weights(got["weights"]))):
        stats = unroll()
      return dict(stats, weights_version=got["version"])

    self.step = step


def network_weight_specs(config, observation_space):
  """{path: (shape, dtype)} of the learner's `get_weights()`, from a local
  copy of the network (actors know them without asking the learner)."""
  network = make_network(config, observation_space)
  spaces = policy_input_spaces(config, observation_space, network)
  spaces["initial_state"] = spaces.pop("state")
  executor = TFExecutor(network, spaces, api_names=["unroll", "variables"])
  return {p: (tuple(v.shape), v.dtype)
          for p, v in executor.execute("variables").items()}


def run_actor(task, config, env, weights_specs, seed, max_unrolls=None,
              startup_wait_s=120.0):
  """Unrolls until the learner goes away; returns the exit code."""
  connect(task)
  actor = RemoteActor(task, config, env, weights_specs)
  actor.executor.execute("reset_env", seed)
  log(task, "connected; unrolling")
  unrolls, episodes, returns = 0, 0, 0.0
  wait_until = time.monotonic() + startup_wait_s
  try:
    while max_unrolls is None or unrolls < max_unrolls:
      try:
        stats = actor.step()
      except _UNREACHABLE:
        # Before the first unroll the learner may still be starting (or
        # not have published weights yet): wait for it a while.
        if unrolls or time.monotonic() > wait_until:
          raise
        time.sleep(0.5)
        continue
      unrolls += 1
      episodes += int(stats["episodes"])
      returns += float(stats["return_sum"])
      if unrolls % 50 == 0:
        log(task, f"unrolls {unrolls}  weights v{int(stats['weights_version'])}"
                  f"  mean return {returns / max(episodes, 1):.1f}")
        episodes, returns = 0, 0.0
  except _UNREACHABLE as e:
    log(task, f"the learner is gone ({type(e).__name__}); exiting so the "
              f"launcher can restart this actor")
    return EXIT_LEARNER_GONE
  finally:
    env.close()
  return 0


def exit_code_for_learner_error(error):
  """The learner's exit code for an error in training."""
  if isinstance(error, _UNREACHABLE):
    return EXIT_PS_GONE
  raise error


__all__ = ["Task", "task_from_flags", "network_weight_specs", "run_ps", "run_actor", "build_learner", "connect", "log",
           "EXIT_LEARNER_GONE", "EXIT_PS_GONE", "QUEUE_NAME"]
