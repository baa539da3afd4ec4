r"""Ape-X throughput. This first part measures the LEARNER side: prioritized
sample + update + priority write-back at batch 512 from a replay of
capacity 1e6 (CartPole-sized n-step transitions), ours against the classic
Python-side design of the same algorithm.

  ours     a `ReplayShard` (PrioritizedReplay on the custom-op segment
           trees, filled to capacity) and an `ApexLearner` in this process,
           one shard `serve` (apply the last priorities, sample a batch onto
           the learner's queue) and one learner `update` (dequeue, double-Q
           n-step loss, Adam, queue the new priorities) per step: the
           learner never touches a Python buffer.
  python   the baseline: the classic proportional PER in the learner
           process (benchmarks/python_replay.py's `PythonPER`: records in NumPy
           arrays, sum and min trees in Python lists, one Python descent per
           sampled record and one walk per updated index), whose batch is fed
           to a learner graph of the same network, loss and optimizer
           (one graph call: loss, Adam, new priorities), and whose priorities
           are written back in Python.

Both run `calls` steps per repetition, interleaved (`common.interleave`),
on the same network (the CartPole MLP, 64x64, dueling) and settings. The
ratio is python time / ours time per step (higher: ours faster).

Not measured yet (issue 14): env frames/s of actors only and end to end
against raw stepping (Pong, CartPole; 1/2/4 actors, 1/2 shards) and the
loopback-cluster figures; their ratio keys are absent.

    python -m benchmarks.apex_throughput            # the measurement
    python -m benchmarks.apex_throughput --quick    # smoke, capacity 1e4
"""

import types

import numpy as np
from absl import app, flags

from benchmarks import common  # Sets OMP_WAIT_POLICY before TF loads.
from benchmarks.python_replay import PythonPER

NAME = "apex_throughput"

_QUICK = flags.DEFINE_bool("quick", False, "Smoke run: capacity 1e4.")
_REPS = flags.DEFINE_integer("reps", None, "Repetitions (5; 2 with --quick).")
_CAPACITY = flags.DEFINE_integer("capacity", None, "Replay capacity (1e6).")
_BATCH = flags.DEFINE_integer("batch", 512, "Learner batch size.")
_CALLS = flags.DEFINE_integer(
  "calls", None, "Steps per repetition (20; 5 with --quick)."
)


def apex_records(n, rng):
  """n random CartPole-sized n-step transitions (the shards' records)."""
  states = rng.standard_normal((n, 4)).astype(np.float32)
  return {
    "states": states,
    "actions": rng.integers(0, 2, n).astype(np.int64),
    "rewards": rng.standard_normal(n).astype(np.float32),
    "next_states": states + 0.1,
    "terminals": rng.random(n) < 0.01,
    "discounts": np.full(n, 0.99**3, np.float32),
  }


def build(capacity, batch, seed=0):
  """Our shard (filled to capacity) and learner, and the baseline's PER
  (filled alike) and fed learner graph."""
  from ingraph_rl.agents.apex import ApexBuilder, ApexConfig, QLearning, queues
  from ingraph_rl.components.optimizers import Adam
  from ingraph_rl.core import Component, api
  from ingraph_rl.spaces import FloatBox
  from ingraph_rl.testing.queues import queue_feeder, unique_queue_name

  config = ApexConfig(
    num_actions=2,
    buffer_size=capacity,
    train_batch_size=batch,
    learning_starts=batch,
    max_inserts_per_serve=65536,
    insert_queue_capacity=65536,
    seed=seed,
  )
  builder = ApexBuilder(config)
  obs = FloatBox((4,))
  names = builder.queue_names(unique_queue_name("apex_bench"), 1)
  shard = builder.make_shard(obs, names, 0, 1).build()
  learner = builder.make_learner(obs, names).build()
  feeder = queue_feeder(
    queues.insert_row_space(builder.record_space(obs)),
    config.insert_queue_capacity,
    names.inserts(0),
  )
  rng = np.random.default_rng(seed)
  chunk = 65536
  for start in range(0, capacity, chunk):
    n = min(chunk, capacity - start)
    feeder.execute(
      "enqueue_many",
      {
        "records": apex_records(n, rng),
        "priority": rng.uniform(0.1, 2.0, n).astype(np.float32),
      },
    )
    shard.execute("serve")
  assert int(shard.execute("stats")["size"]) == capacity

  class FedLearner(Component):
    """The baseline's learner graph: the batch comes in as an argument."""

    def __init__(self):
      super().__init__(scope="learner")
      self.q = QLearning(config)
      self.optimizer = Adam(
        config.learning_rate,
        epsilon=config.adam_epsilon,
        clip_global_norm=config.clip_grad_norm,
      )

    @api
    def update(self, records, importance_weights):
      out = self.q.td(records, importance_weights)
      self.optimizer.step(out["loss"], self.q.online.variables())
      return out["priorities"]

  from ingraph_rl.executors.tensorflow import TFExecutor

  fed = TFExecutor(
    FedLearner(),
    {
      "records": builder.record_space(obs).with_batch_rank(),
      "importance_weights": FloatBox(add_batch_rank=True),
    },
    seed=seed,
  )
  per = PythonPER(
    capacity,
    types.SimpleNamespace(obs_shape=(4,), obs_dtype=np.float32),
    alpha=config.prioritized_replay_alpha,
    beta=config.prioritized_replay_beta,
    seed=seed,
  )
  per.store = {
    k: np.zeros((capacity,) + v.shape[1:], v.dtype)
    for k, v in apex_records(1, rng).items()
  }
  per.fill(apex_records(min(capacity, chunk), rng))
  return shard, learner, fed, per


def main(argv):
  del argv
  quick = _QUICK.value
  capacity = _CAPACITY.value or (10_000 if quick else 1_000_000)
  batch = _BATCH.value
  reps = _REPS.value or (2 if quick else 5)
  calls = _CALLS.value or (5 if quick else 20)
  threads = common.configure_threads()
  shard, learner, fed, per = build(capacity, batch)

  def ours():
    for _ in range(calls):
      shard.execute("serve")
      learner.execute("update")

  def python():
    for _ in range(calls):
      records, indices, weights = per.sample(batch)
      priorities = fed.execute("update", records, weights).numpy()
      per.update(indices, priorities)

  # The shard serves one batch ahead (its prefetch): prime it.
  shard.execute("serve")
  runs = common.interleave({"ours": ours, "python": python}, reps=reps)
  label = f"1e{round(np.log10(capacity))}"
  per_step = {
    name: [r["wall_s"] / calls for r in records]
    for name, records in runs.items()
  }
  rows = [
    common.Row(
      f"learner/b{batch}/{label}/{name}",
      "sample_update_writeback",
      "ms/step",
      common.Stat.of(per_step[name]).scaled(1e3),
    )
    for name in ("ours", "python")
  ] + [
    common.Row(
      f"learner/b{batch}/{label}/{name}",
      "samples_per_s",
      "samples/s",
      common.Stat.of(batch / t for t in per_step[name]),
    )
    for name in ("ours", "python")
  ]
  ratios = {
    f"learner_sample_update_over_python_b{batch}_{label}": common.paired_ratio(
      per_step["python"], per_step["ours"]
    )
  }
  config = {
    "capacity": capacity,
    "batch": batch,
    "calls_per_rep": calls,
    "reps": reps,
    "threads": threads,
    "network": "CartPole MLP 64x64, dueling, double-Q, 3-step",
    "ours": "ReplayShard.serve + ApexLearner.update, one thread, shard local",
    "python": "benchmarks.python_replay.PythonPER + a fed learner graph",
    "not_measured": (
      "actors-only and end-to-end env frames/s, loopback cluster: issue 14"
    ),
  }
  path = common.write_results(NAME, quick, config, rows, ratios)
  common.print_table(
    NAME,
    rows,
    ratios,
    summary=f"learner sample+update+write-back, batch {batch}, capacity "
    f"{label}: python / ours per step",
    quick=quick,
    path=path,
  )


if __name__ == "__main__":
  app.run(main)
