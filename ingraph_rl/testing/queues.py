"""Feeding a learner's queue by hand: a queue executor with the learner's
`shared_name` (what it enqueues, the learner dequeues), unique queue names,
and random IMPALA-layout rollouts."""

import uuid

import numpy as np


def unique_queue_name(prefix="test"):
  """A queue name of its own: a shared queue lives as long as the process,
  closed or not, so every learner under test gets a fresh one."""
  return f"{prefix}_{uuid.uuid4().hex}"


def queue_feeder(
  record_space,
  capacity,
  queue_name,
  api_names=("enqueue_many",),
  check_values=True,
):
  """A TFExecutor of a FIFOQueue of `record_space` named `queue_name`:
  `execute("enqueue_many", batch)` fills the learner's queue of that name
  (`dequeue_many` drains it)."""
  from ingraph_rl.components.queues import FIFOQueue

  return queue_executor(
    FIFOQueue(record_space, capacity, shared_name=queue_name),
    api_names,
    check_values,
  )


def queue_executor(queue, api_names=("enqueue_many",), check_values=True):
  """A TFExecutor of the FIFOQueue `queue` (as an agent's code makes it,
  e.g. `apex.queues.sample_queue(...)`) with the APIs `api_names`.
  `check_values=False` enqueues what it is given (NaN, out-of-range
  ints): a faulty peer, for the receiving end's checks."""
  from ingraph_rl.executors.tensorflow import TFExecutor
  from ingraph_rl.spaces import IntBox

  spaces = {"batch": queue.record_space.with_batch_rank()}
  if "dequeue_many" in api_names:
    spaces["num_records"] = IntBox()
  return TFExecutor(
    queue, spaces, api_names=list(api_names), check_values=check_values
  )


def random_rollouts(config, seed, observation_size=4):
  """`config.batch_size` random rollouts of `config.unroll_length + 1`
  steps (an IMPALA config's record layout, vector observations of
  `observation_size`): off-policy behaviour logits (so importance weights
  clip at places), rewards beyond [-1, 1] (so clipping matters), episode
  ends (some of them truncations, with bootstrap values), random LSTM
  initial states (with `config.lstm_units`)."""
  rng = np.random.default_rng(seed)
  b, steps, a = config.batch_size, config.unroll_length + 1, config.num_actions
  dones = rng.uniform(size=(b, steps)) < 0.25
  truncated = dones & (rng.uniform(size=(b, steps)) < 0.5)
  batch = dict(
    observations=rng.normal(size=(b, steps, observation_size)).astype(
      np.float32
    ),
    rewards=rng.normal(0, 2, (b, steps)).astype(np.float32),
    dones=dones,
    actions=rng.integers(0, a, (b, steps)).astype(np.int64),
    logits=rng.normal(0, 1.5, (b, steps, a)).astype(np.float32),
    truncated=truncated,
    bootstrap_value=np.where(
      truncated, rng.normal(2, 1, (b, steps)), 0.0
    ).astype(np.float32),
  )
  if config.lstm_units:
    u = config.lstm_units
    batch["initial_state"] = {
      "c": rng.normal(size=(b, u)).astype(np.float32),
      "h": rng.uniform(-0.8, 0.8, (b, u)).astype(np.float32),
    }
  return batch
