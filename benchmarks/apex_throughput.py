r"""Ape-X throughput, in three parts (`--parts`, all by default).

learner: the LEARNER side: prioritized sample + update + priority
write-back at batch 512 from a replay of capacity 1e6 (CartPole-sized
n-step transitions), ours against the classic Python-side design of the
same algorithm.

  ours     a `ReplayShard` (PrioritizedReplay on the custom-op segment
           trees, filled to capacity) and an `ApexLearner` in this process,
           one shard `serve` (apply the last priorities, sample a batch onto
           the learner's queue) and one learner `update` (dequeue, double-Q
           n-step loss, Adam, queue the new priorities) per step: the
           learner never touches a Python buffer. Serve and update run
           one after the other in one thread.
  ours_pipelined
           the same shard and learner as the system runs them: the shard
           serves in its own thread (a replay task in a cluster,
           `ReplayDriver`'s shard thread in one process) and keeps the
           learner's prefetch queue full; the learner thread only updates.
           Timed per learner update.
  python   the baseline: the classic proportional PER in the learner
           process (benchmarks/python_replay.py's `PythonPER`: records in NumPy
           arrays, sum and min trees in Python lists, one Python descent per
           sampled record and one walk per updated index), whose batch is fed
           to a learner graph of the same network, loss and optimizer
           (one graph call: loss, Adam, new priorities), and whose priorities
           are written back in Python.

Both run `calls` steps per repetition, interleaved (`common.interleave`),
on the same network (the CartPole MLP, 64x64, dueling) and settings. The
ratio is python time / ours time per step (higher: ours faster):
`learner_sample_update_over_python_b512_1e6` against ours_pipelined (the
design), `learner_sequential_over_python_b512_1e6` against ours. The
classic baseline samples, trains and writes back in the learner's one
Python thread: its PER work holds the GIL, which a prefetch thread would
share with it.

frames: env steps/s on Pong and CartPole with 1, 2 and 4 actors (2
shards) and 2 actors with 1 shard, each actor with its preset's envs
(`apex_frames.preset_envs`: apex_pong.cfg's, apex_cartpole.cfg's), Pong
also 2 actors with the other of 8 and 32 envs (keys ..._envs_<n>): raw
stepping (the ceiling), actors only and end to end,
interleaved per setup (`benchmarks/apex_frames.py`); with 2 actors and 2
shards also actors only with `--actor_weights_dtype=bfloat16`
(`<env>_actor_bfloat16_over_float32_actors_only_actors_2`).
Ratios `<env>_actors_only_over_raw_actors_<n>` (2 shards) and
`<env>_end_to_end_over_raw_actors_<n>`. With 2 actors and 2 shards the
same rounds also time the least an actor does per env step, each part
alone (`apex_frames.cpu_parts`: env stepping, and a Q-network pass per
frame at the acting batch and at the rollout's target batch): `limit` =
cores / their sum in env steps/s, so `<env>_limit_over_raw_actors_2` is
the most `<env>_actors_only_over_raw_actors_2` could reach on these cores,
and `<env>_actors_only_over_limit_actors_2` how close the actors come.

cluster: experiments/apex.py's CartPole preset as a loopback cluster (2
shards, 2 actors: 5 processes; with a ps task, 6) against one process
(threads), on the same 2 cores, interleaved: `cluster_over_single_shards_2`
(`cluster_with_ps_over_single_shards_2`). The same for apex_pong.cfg
(20k-transition shards, no ps run): `pong_cluster_over_single_shards_2`.
`--cluster_presets` picks them.

    python -m benchmarks.apex_throughput            # the measurement
    python -m benchmarks.apex_throughput --quick    # smoke: small, short
"""

import dataclasses
import os
import threading
import time
import types

import numpy as np
from absl import app, flags

from benchmarks import (
  apex_frames,
  common,  # Sets OMP_WAIT_POLICY before TF loads.
)
from benchmarks.python_replay import PythonPER
from experiments import configs
from ingraph_rl.runners.replay_driver import LOCAL_IDLE_WAIT_S

NAME = "apex_throughput"

_QUICK = flags.DEFINE_bool("quick", False, "Smoke run: capacity 1e4.")
_REPS = flags.DEFINE_integer("reps", None, "Repetitions (5; 2 with --quick).")
_CAPACITY = flags.DEFINE_integer("capacity", None, "Replay capacity (1e6).")
_BATCH = flags.DEFINE_integer("batch", 512, "Learner batch size.")
_CALLS = flags.DEFINE_integer(
  "calls", None, "Steps per repetition (50; 5 with --quick)."
)
_PARTS = flags.DEFINE_list(
  "parts", ["learner", "frames", "cluster"], "Parts to measure."
)
_ENVS = flags.DEFINE_list(
  "envs", ["atari:pong", "CartPole-v1"], "Envs of the frames part."
)
_SECONDS = flags.DEFINE_float(
  "seconds", None, "Frames window per measurement (8 s; 3 with --quick)."
)
_CLUSTER_SECONDS = flags.DEFINE_float(
  "cluster_seconds",
  None,
  "Training per cluster run (CartPole 60 s, Pong 120 s; 20 and 40 with "
  "--quick).",
)
_CLUSTER_PRESETS = flags.DEFINE_list(
  "cluster_presets",
  ["cartpole", "pong"],
  "experiments/apex.py presets of the cluster part: cartpole, pong.",
)
_THREADS = common.define_intra_op_threads_flag()


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
  from ingraph_rl.testing.queues import queue_executor, unique_queue_name

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
  feeder = queue_executor(
    queues.insert_queue(builder.record_space(obs), config, names, 0, "inserts")
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


def learner_part(quick, reps):
  """(rows, ratios, config) of the learner side."""
  capacity = _CAPACITY.value or (10_000 if quick else 1_000_000)
  batch = _BATCH.value
  calls = _CALLS.value or (5 if quick else 50)
  shard, learner, fed, per = build(capacity, batch)

  def ours():
    for _ in range(calls):
      shard.execute("serve")
      learner.execute("update")

  def ours_pipelined():
    # As the system runs: the shard serves in its own thread (a replay
    # task, or ReplayDriver's shard thread, with its idle wait), the
    # learner only dequeues; the prefetch queue decouples them.
    stop = threading.Event()

    def serve():
      while not stop.is_set():
        out = shard.execute("serve")
        if not (int(out["updated"]) or int(out["sampled"])):
          time.sleep(LOCAL_IDLE_WAIT_S)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
      for _ in range(calls):
        learner.execute("update")["loss"].numpy()
    finally:
      stop.set()
      thread.join()

  def python():
    for _ in range(calls):
      records, indices, weights = per.sample(batch)
      priorities = fed.execute("update", records, weights).numpy()
      per.update(indices, priorities)

  # The shard serves one batch ahead (its prefetch): prime it.
  shard.execute("serve")
  runs = common.interleave(
    {"ours": ours, "ours_pipelined": ours_pipelined, "python": python},
    reps=reps,
  )
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
    for name in ("ours", "ours_pipelined", "python")
  ] + [
    common.Row(
      f"learner/b{batch}/{label}/{name}",
      "samples_per_s",
      "samples/s",
      common.Stat.of(batch / t for t in per_step[name]),
    )
    for name in ("ours", "ours_pipelined", "python")
  ]
  ratios = {
    # The system as it runs (shard in its own thread).
    f"learner_sample_update_over_python_b{batch}_{label}": common.paired_ratio(
      per_step["python"], per_step["ours_pipelined"]
    ),
    # Shard and learner one after the other in one thread.
    f"learner_sequential_over_python_b{batch}_{label}": common.paired_ratio(
      per_step["python"], per_step["ours"]
    ),
  }
  config = {
    "capacity": capacity,
    "batch": batch,
    "calls_per_rep": calls,
    "network": "CartPole MLP 64x64, dueling, double-Q, 3-step",
    "ours": "ReplayShard.serve + ApexLearner.update, one thread, shard local",
    "ours_pipelined": (
      "the learner thread's ApexLearner.update while the shard serves in "
      "its own thread (as ReplayDriver and replay tasks run it); the "
      "headline ratio"
    ),
    "python": "benchmarks.python_replay.PythonPER + a fed learner graph",
  }
  return rows, ratios, config


# Actors with bfloat16 copies of the weights (--actor_weights_dtype=
# bfloat16), in the same rounds as their float32 setup (2 actors, 2 shards).
BF16 = "actor_bfloat16"


def frames_part(quick, reps):
  """(rows, ratios, config) of env steps/s: raw, actors only, end to end."""
  seconds = _SECONDS.value or (3.0 if quick else 8.0)
  warmup = 2.0 if quick else 3.0
  frames = 400 if quick else 1600
  rows, ratios = [], {}
  cores = os.cpu_count()
  for setup in apex_frames.frame_setups(_ENVS.value, quick):
    fns = {
      "raw": lambda s=setup: {
        "env_steps_per_s": apex_frames.raw_rate(s, seconds, warmup)
      },
      "end_to_end": lambda s=setup: apex_frames.end_to_end_rate(
        apex_frames.make_driver(s), seconds, warmup
      ),
    }
    # Actor variants: "" (the setup's float32 weights) and, with 2 actors
    # and 2 shards, BF16; each with its parts (`apex_frames.cpu_parts`).
    variants = {"": setup}
    with_parts = setup.num_actors == 2 and setup.num_shards == 2
    if with_parts:
      variants[f"/{BF16}"] = dataclasses.replace(
        setup, actor_weights_dtype="bfloat16"
      )
    for label, s in variants.items():
      fns[f"actors_only{label}"] = lambda s=s: apex_frames.actors_only_rate(
        apex_frames.make_driver(s), seconds, warmup
      )
      if with_parts:
        fns[f"parts{label}"] = lambda s=s: apex_frames.cpu_parts(s, frames)
    runs = common.interleave(fns, reps=reps, warmup=0)
    rate = {
      k: common.column(v, "env_steps_per_s")
      for k, v in runs.items()
      if not k.startswith("parts")
    }
    for label in variants:
      parts = runs.get(f"parts{label}")
      if parts is None:
        continue
      names = [k for k in parts[0] if k not in ("wall_s", "cpu_s")]
      for part in names:
        rows.append(
          common.Row(
            f"{setup.name}/part{label}/{part}",
            "cpu",
            "us/env step",
            common.Stat.of(common.column(parts, part)),
          )
        )
      # What the actors could do if they did nothing but their parts.
      rate[f"limit{label}"] = [
        cores / (sum(p[k] for k in names) * 1e-6) for p in parts
      ]
    for name, values in rate.items():
      rows.append(
        common.Row(
          f"{setup.name}/{name}",
          "env_steps_per_s",
          "steps/s",
          common.Stat.of(values),
        )
      )
    rows.append(
      common.Row(
        f"{setup.name}/end_to_end",
        "updates_per_s",
        "updates/s",
        common.Stat.of(common.column(runs["end_to_end"], "updates_per_s")),
      )
    )
    env = setup.env.replace("atari:", "").replace("-v1", "").lower()
    key = (
      f"actors_{setup.num_actors}"
      + ("" if setup.num_shards == 2 else f"_shards_{setup.num_shards}")
      + setup.envs_suffix("_envs_")
    )
    for name in ("actors_only", "end_to_end"):
      ratios[f"{env}_{name}_over_raw_{key}"] = common.paired_ratio(
        rate[name], rate["raw"]
      )
    for label in variants:
      tag = label.replace("/", "_")
      if f"limit{label}" in rate:
        ratios[f"{env}_limit_over_raw_{key}{tag}"] = common.paired_ratio(
          rate[f"limit{label}"], rate["raw"]
        )
        ratios[f"{env}_actors_only_over_limit_{key}{tag}"] = (
          common.paired_ratio(
            rate[f"actors_only{label}"], rate[f"limit{label}"]
          )
        )
      if label:
        ratios[f"{env}_actors_only_over_raw_{key}{tag}"] = common.paired_ratio(
          rate[f"actors_only{label}"], rate["raw"]
        )
        ratios[f"{env}{tag}_over_float32_actors_only_{key}"] = (
          common.paired_ratio(rate[f"actors_only{label}"], rate["actors_only"])
        )
  config = {
    "frames_window_s": seconds,
    "frames_warmup_s": warmup,
    "frames_setups": [
      s.name for s in apex_frames.frame_setups(_ENVS.value, quick)
    ],
    "frames_envs_per_actor": (
      "each env's preset (apex_pong.cfg, apex_cartpole.cfg): "
      + ", ".join(
        f"{env} {apex_frames.preset_envs(env)}" for env in _ENVS.value
      )
      + "; Pong also 2 actors x the other of "
      + f"{apex_frames.OTHER_PONG_ENVS} (keys ..._envs_<n>)"
    ),
    "frames_actor_bfloat16": (
      f"2 actors, 2 shards: actors only and parts also with "
      f"--actor_weights_dtype=bfloat16 in the same rounds (keys ..._{BF16}, "
      f"rows .../actors_only/{BF16}, .../part/{BF16}/...)"
    ),
    "frames_settings": (
      "flagfiles/apex_pong.cfg's network and batch (shards of 5k), the "
      "CartPole preset; no training_intensity throttle"
    ),
    "frames_parts": (
      "2 actors, 2 shards: CPU us per env step of env stepping (random "
      "actions, one thread) and per frame of a Q-network pass at the "
      "acting batch (envs per actor) and at the target batch (envs x "
      "rollout_fragment_length); limit = cores / their sum"
    ),
  }
  return rows, ratios, config


# Cluster presets: (experiments/apex.py flags, seconds per run, quick
# seconds, with a ps run too). CartPole's steps are cheap, so its ratio
# shows the per-step cost of the cluster's gRPC queue operations; Pong's
# are dominated by the Q-network, as in real runs.
CLUSTER_PRESETS = {
  "cartpole": ((), 60.0, 20.0, True),
  "pong": (apex_frames.PONG_CLUSTER_ARGS, 120.0, 40.0, False),
}


def cluster_part(quick, reps):
  """Each preset (`--cluster_presets`) as loopback clusters with 2 shards
  (CartPole also with a ps task) against one process."""
  rows, ratios, described = [], {}, {}
  for preset in _CLUSTER_PRESETS.value:
    if preset not in CLUSTER_PRESETS:
      raise app.UsageError(
        f"--cluster_presets: unknown {preset!r}; {list(CLUSTER_PRESETS)}"
      )
    args, full_s, quick_s, with_ps = CLUSTER_PRESETS[preset]
    seconds = _CLUSTER_SECONDS.value or (quick_s if quick else full_s)

    def rate_of(cluster, num_ps=0, args=args, seconds=seconds):
      return lambda: apex_frames.experiment_rate(
        cluster, seconds, num_ps=num_ps, args=args
      )

    fns = {"cluster": rate_of(True), "single_process": rate_of(False)}
    if with_ps:
      fns["cluster_with_ps"] = rate_of(True, num_ps=1)
    runs = common.interleave(fns, reps=reps, warmup=0)
    rate = {k: common.column(v, "env_steps_per_s") for k, v in runs.items()}
    # Samples trained per env step: training_intensity should hold it in
    # every mode, so the modes' env steps/s compare at one replay ratio.
    batch = configs.flagfile_values(
      configs.APEX_CLASSES,
      configs.APEX_CARTPOLE,
      "apex_cartpole.cfg",
      args,
    )["train_batch_size"]
    replay = {
      k: [r["updates_per_s"] * batch / r["env_steps_per_s"] for r in v]
      for k, v in runs.items()
    }
    for name in fns:
      rows += [
        common.Row(
          f"{preset}_preset/{name}/shards_2",
          "env_steps_per_s",
          "steps/s",
          common.Stat.of(rate[name]),
        ),
        common.Row(
          f"{preset}_preset/{name}/shards_2",
          "samples_per_env_step",
          "samples/step",
          common.Stat.of(replay[name]),
        ),
      ]
    # CartPole's keys carry no prefix (the key names).
    prefix = "" if preset == "cartpole" else f"{preset}_"
    for name in fns:
      if name != "single_process":
        ratios[f"{prefix}{name}_over_single_shards_2"] = common.paired_ratio(
          rate[name], rate["single_process"]
        )
    described[preset] = {"flags": list(args), "seconds": seconds}
  config = {
    "cluster_presets": described,
    "cluster": (
      "experiments/apex.py (CartPole preset: training_intensity 8; Pong: "
      "apex_pong.cfg with 20k-transition shards, training_intensity 4): "
      "launch_local learner + 2 replay + 2 actors (cluster_with_ps: + 1 "
      "ps holding the variables) vs one process with the same threads"
    ),
  }
  return rows, ratios, config


PARTS = {
  "learner": learner_part,
  "frames": frames_part,
  "cluster": cluster_part,
}


def main(argv):
  del argv
  quick = _QUICK.value
  reps = _REPS.value or (2 if quick else 5)
  threads = common.experiment_threads(_THREADS.value)
  rows, ratios = [], {}
  config = {"reps": reps, "threads": threads, "rounds": {}}
  for part in _PARTS.value:
    if part not in PARTS:
      raise app.UsageError(f"--parts: unknown part {part!r}; {list(PARTS)}")
    # Frames and clusters take minutes per round: at most 2 rounds.
    rounds = reps if part == "learner" else min(reps, 2)
    config["rounds"][part] = rounds
    r, q, c = PARTS[part](quick, rounds)
    rows, ratios = rows + r, dict(ratios, **q)
    config.update(c)
  path = common.write_results(NAME, quick, config, rows, ratios)
  common.print_table(
    NAME,
    rows,
    ratios,
    summary="learner: python / ours per step; frames: over raw stepping; "
    "cluster: over one process",
    quick=quick,
    path=path,
  )


if __name__ == "__main__":
  app.run(main)
