r"""Learner updates/s with synchronous towers (`MultiTowerStrategy`) on 1 and
2 devices, against the same learner without towers (the default strategy),
interleaved in one run.

ON A CPU-ONLY MACHINE THIS MEASURES THE OVERHEAD OF TOWERS, NOT A SPEED-UP:
the towers run on logical CPU devices (`configure_logical_cpus(2)`) that
share the same cores and thread pools. What it shows is the cost of the
machinery (splitting the batch, one graph per tower, combining gradients,
merging outputs, cross-device copies) at equal total batch. With GPUs the
same code puts each tower on its own GPU (`local_tower_devices`).

Cases (CartPole shapes: 4 floats per observation, 2 actions):
  impala_b8:  `IMPALALearner.update` from the queue (no staging), MLP 64-64,
              unroll 20, batch 8 (experiments/flagfiles/impala_cartpole.cfg),
              V-trace loss summed over time and batch: loss_reduction="sum".
  impala_b32: the same with batch 32.
  dqn_b64:    `DQNAgent.update` (dueling double-Q MLP 64-64, Adam, uniform
              replay of 2,000 random transitions), batch 64,
              loss_reduction="mean".
  dqn_b256:   the same with batch 256.
Variants per case: default (no towers), towers_1, towers_2 (batch / 2 per
tower). Each repetition times `updates` update calls per variant, rotating
which variant goes first; IMPALA rollouts are enqueued before each timed
loop, untimed. Before timing, every variant's first update is checked to
give the default's loss (same seeds, same data).

    python -m benchmarks.towers            # the measurement
    python -m benchmarks.towers --quick    # smoke run, < 60 s

Writes benchmarks/results/towers.json (and towers.png without --quick).
`measure_tower_updates(num_towers, case)` is importable (e.g. by a
cluster-scaling benchmark); logical CPUs must be configured before TF
starts (`strategies.configure_logical_cpus`).
"""

import statistics
import time
import uuid

import numpy as np
from absl import app, flags

from benchmarks import common  # Sets OMP_WAIT_POLICY before TF loads.
from ingraph_rl.agents.dqn import DQNBuilder, DQNConfig
from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig
from ingraph_rl.executors import strategies
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing.queues import queue_feeder

NAME = "towers"

_QUICK = flags.DEFINE_bool(
  "quick", False, "Smoke run (< 60 s): impala_b8 and dqn_b64, 2 reps."
)
_REPS = flags.DEFINE_integer(
  "reps", None, "Timed repetitions (default 9; 2 with --quick)."
)
_UPDATES = flags.DEFINE_integer(
  "updates",
  None,
  "Update calls per repetition and variant (default 200; 10 with --quick).",
)
_CASES = flags.DEFINE_list("cases", None, "Cases to run (default: all).")

OBS = FloatBox((4,))
NUM_ACTIONS = 2
SEED = 0
CASES = {
  "impala_b8": {"agent": "impala", "batch_size": 8, "unroll_length": 20},
  "impala_b32": {"agent": "impala", "batch_size": 32, "unroll_length": 20},
  "dqn_b64": {"agent": "dqn", "batch_size": 64},
  "dqn_b256": {"agent": "dqn", "batch_size": 256},
}
QUICK_CASES = ("impala_b8", "dqn_b64")
VARIANTS = {"default": None, "towers_1": 1, "towers_2": 2}
DQN_TRANSITIONS = 2000


def tower_strategy(agent, num_towers):
  """The MultiTowerStrategy of `agent` ("impala" or "dqn") on the first
  `num_towers` local devices (GPUs, else logical CPUs); None: no towers."""
  if num_towers is None:
    return None
  devices = strategies.local_tower_devices(num_towers)
  if agent == "impala":
    # V-trace's loss sums over time and batch; its "mean_*" stats average.
    return strategies.MultiTowerStrategy(
      devices,
      split_at="learner/fifo_queue",
      loss_reduction="sum",
      output_reductions={"mean_*": "mean"},
    )
  return strategies.MultiTowerStrategy(devices, split_at="dqn/memory")


class ImpalaUpdates:
  """An IMPALA learner fed from its own queue with fixed random rollouts."""

  def __init__(self, num_towers, batch_size, unroll_length, max_updates):
    self.config = IMPALAConfig(
      num_actions=NUM_ACTIONS,
      unroll_length=unroll_length,
      batch_size=batch_size,
      use_staging=False,
      queue_capacity=batch_size * max_updates,
      seed=SEED,
    )
    name = f"bench_towers_{uuid.uuid4().hex}"
    builder = IMPALABuilder(self.config)
    self.learner = builder.make_learner(OBS, name).build(
      **_strategy_kwargs("impala", num_towers)
    )
    self.feed = queue_feeder(
      builder.record_space(OBS), self.config.queue_capacity, name
    )
    rng = np.random.default_rng(SEED)
    b, steps = batch_size, unroll_length + 1
    self.batch = dict(  # One update's rollouts, enqueued again each time.
      observations=rng.normal(size=(b, steps, 4)).astype(np.float32),
      rewards=rng.normal(size=(b, steps)).astype(np.float32),
      dones=rng.uniform(size=(b, steps)) < 0.05,
      actions=rng.integers(0, NUM_ACTIONS, (b, steps)).astype(np.int64),
      logits=rng.normal(size=(b, steps, NUM_ACTIONS)).astype(np.float32),
      truncated=np.zeros((b, steps), bool),
      bootstrap_value=np.zeros((b, steps), np.float32),
    )

  def run(self, updates):
    for _ in range(updates):
      self.feed.execute("enqueue_many", self.batch)
    start = time.perf_counter()
    for _ in range(updates):
      out = self.learner.execute("update")
    loss = float(out["loss"])
    return {"update_s": time.perf_counter() - start, "loss": loss}

  def function(self):
    return self.learner.function("update")

  def close(self):
    self.learner.execute("close_queue")


class DQNUpdates:
  """A DQN agent with a replay memory of random transitions."""

  def __init__(self, num_towers, batch_size):
    self.config = DQNConfig(
      num_actions=NUM_ACTIONS,
      batch_size=batch_size,
      learning_starts=batch_size,
      replay_capacity=DQN_TRANSITIONS,
      seed=SEED,
    )
    self.executor = (
      DQNBuilder(self.config)
      .make_agent(OBS)
      .build(**_strategy_kwargs("dqn", num_towers))
    )
    rng = np.random.default_rng(SEED)
    n = DQN_TRANSITIONS
    self.executor.execute(
      "observe",
      rng.normal(size=(n, 4)).astype(np.float32),
      rng.integers(0, NUM_ACTIONS, n).astype(np.int64),
      rng.normal(size=n).astype(np.float32),
      rng.normal(size=(n, 4)).astype(np.float32),
      rng.uniform(size=n) < 0.05,
    )

  def run(self, updates):
    start = time.perf_counter()
    for _ in range(updates):
      out = self.executor.execute("update")
    loss = float(out["loss"])
    return {"update_s": time.perf_counter() - start, "loss": loss}

  def function(self):
    return self.executor.function("update")

  def close(self):
    pass


def _strategy_kwargs(agent, num_towers):
  strategy = tower_strategy(agent, num_towers)
  return {} if strategy is None else {"strategy": strategy}


def make_updater(case, num_towers, max_updates):
  """A built learner of `case` (a CASES key or spec dict) with `run(n)` ->
  {"update_s", "loss"} and `close()`."""
  spec = CASES[case] if isinstance(case, str) else case
  if spec["agent"] == "impala":
    return ImpalaUpdates(
      num_towers, spec["batch_size"], spec["unroll_length"], max_updates
    )
  return DQNUpdates(num_towers, spec["batch_size"])


def measure_tower_updates(num_towers, case="impala_b32", updates=40, reps=5):
  """Updates/s of `case`'s learner with `num_towers` towers (None: the
  default strategy): {"median", "min", "max", "reps"} over `reps` timed
  loops of `updates` calls, after one untimed loop. Needs that many local
  devices (logical CPUs: `strategies.configure_logical_cpus` first)."""
  updater = make_updater(case, num_towers, updates)
  try:
    updater.run(updates)
    rates = [updates / updater.run(updates)["update_s"] for _ in range(reps)]
  finally:
    updater.close()
  return {
    "median": statistics.median(rates),
    "min": min(rates),
    "max": max(rates),
    "reps": reps,
  }


def bench_case(case, reps, updates):
  """Builds the three variants, checks their first update agrees, then
  interleaves timed loops. Returns ({variant: records}, info)."""
  t0 = time.perf_counter()
  updaters = {v: make_updater(case, n, updates) for v, n in VARIANTS.items()}
  build_s = time.perf_counter() - t0
  ops = {
    v: graph_ops(u.function().get_concrete_function().graph)
    for v, u in updaters.items()
  }
  try:
    first = {v: u.run(1)["loss"] for v, u in updaters.items()}
    for v, loss in first.items():
      if not np.isclose(loss, first["default"], rtol=1e-4, atol=1e-6):
        raise AssertionError(
          f"{case}: {v}'s first loss {loss} differs from "
          f"the default's {first['default']}"
        )
    records = common.interleave(
      {v: (lambda u=u: u.run(updates)) for v, u in updaters.items()},
      reps=reps,
      warmup=1,
    )
  finally:
    for u in updaters.values():
      u.close()
  return records, {
    "build_s (3 variants)": round(build_s, 2),
    "graph_ops (update function, nested functions too)": ops,
    "first_update_loss (checked equal)": {
      v: round(x, 6) for v, x in first.items()
    },
  }


def graph_ops(graph):
  """Ops in `graph` and the functions it calls (while-loop bodies...)."""
  n = len(graph.get_operations())
  for fn in graph._functions.values():
    if hasattr(fn, "graph"):
      n += graph_ops(fn.graph)
  return n


def rates(records, updates):
  return [updates / r["update_s"] for r in records]


def main(argv):
  del argv
  quick = _QUICK.value
  devices = strategies.configure_logical_cpus(2) if not _has_gpus(2) else None
  reps = _REPS.value or (2 if quick else 9)
  updates = _UPDATES.value or (10 if quick else 200)
  cases = _CASES.value or list(QUICK_CASES if quick else CASES)
  threads = common.configure_threads()
  rows, ratios, case_config = [], {}, {}
  for case in cases:
    records, info = bench_case(case, reps, updates)
    per_s = {v: rates(records[v], updates) for v in VARIANTS}
    for v in VARIANTS:
      rows.append(
        common.Row(
          f"{case}/{v}", "throughput", "updates/s", common.Stat.of(per_s[v])
        )
      )
      rows.append(
        common.Row(
          f"{case}/{v}",
          "update time",
          "ms",
          common.Stat.of([1e3 / x for x in per_s[v]]),
        )
      )
    for v in ("towers_1", "towers_2"):
      ratios[f"{case}_{v}_over_default"] = common.paired_ratio(
        per_s[v], per_s["default"]
      )
    ratios[f"{case}_towers_2_over_towers_1"] = common.paired_ratio(
      per_s["towers_2"], per_s["towers_1"]
    )
    spec = CASES[case]
    case_config[case] = dict(spec, **info)
    if spec["agent"] == "impala":
      case_config[case]["frames_per_update"] = (
        spec["batch_size"] * spec["unroll_length"]
      )
  tower_devices = devices or strategies.local_tower_devices(2)
  config = {
    "reps": reps,
    "warmup_reps": 1,
    "updates_per_rep": updates,
    "cases": case_config,
    "tower_devices": tower_devices,
    "devices_are": (
      "logical CPU devices sharing the machine's cores: "
      "the figures show the OVERHEAD of towers, not a "
      "speed-up"
    )
    if devices
    else "GPUs",
    "variants": {
      "default": "no towers (DefaultStrategy), whole batch",
      "towers_1": "MultiTowerStrategy on 1 device (the machinery, no split)",
      "towers_2": "MultiTowerStrategy on 2 devices, batch / 2 each",
    },
    "strategies": {
      "impala": "split_at='learner/fifo_queue', loss_reduction='sum', "
      "output_reductions={'mean_*': 'mean'}",
      "dqn": "split_at='dqn/memory', loss_reduction='mean'",
    },
    "timing": "per rep and variant: `updates` execute('update') calls "
    "(IMPALA: the rollouts enqueued first, untimed); variants "
    "interleaved, rotating which goes first, gc.collect() "
    "before each",
    "ratios": "median over reps of per-rep paired ratios of updates/s",
    "threads": threads,
  }
  path = common.write_results(NAME, quick, config, rows, ratios)
  if not quick:
    print(f"wrote {plot(rows, ratios, cases, bool(devices))}")
  parts = [
    f"{c} 2 towers / none {ratios[f'{c}_towers_2_over_default']:.2f}"
    for c in cases
  ]
  what = " (logical CPUs: overhead, not speed-up)" if devices else ""
  summary = f"{NAME}{' [quick]' if quick else ''}{what}: " + "; ".join(parts)
  common.print_table(NAME, rows, ratios, summary, quick=quick, path=path)


def _has_gpus(num):
  import tensorflow as tf  # Listing physical devices starts nothing.

  return len(tf.config.list_physical_devices("GPU")) >= num


def plot(rows, ratios, cases, logical_cpus):
  """Bars of updates/s (median, min-max whiskers) per case and variant,
  each variant's paired ratio to the default over its bar."""
  plt = common.pyplot()
  stats = {r.case: r.stat for r in rows if r.unit == "updates/s"}
  colors = {"default": "#8C8C8C", "towers_1": "#DD8452", "towers_2": "#4C72B0"}
  labels = {
    "default": "no towers",
    "towers_1": "1 tower",
    "towers_2": "2 towers (batch / 2 each)",
  }
  fig, ax = plt.subplots(figsize=(9, 4.5))
  width = 0.26
  for j, v in enumerate(VARIANTS):
    xs = [i + (j - 1) * width for i in range(len(cases))]
    meds = [stats[f"{c}/{v}"].median for c in cases]
    err = [
      [m - stats[f"{c}/{v}"].min for m, c in zip(meds, cases)],
      [stats[f"{c}/{v}"].max - m for m, c in zip(meds, cases)],
    ]
    ax.bar(
      xs, meds, width, color=colors[v], label=labels[v], yerr=err, capsize=3
    )
    for x, m, c in zip(xs, meds, cases):
      text = (
        f"{m:,.0f}"
        if v == "default"
        else f"{m:,.0f}\n(x{ratios[f'{c}_{v}_over_default']:.2f})"
      )
      top = stats[f"{c}/{v}"].max  # Above the whisker.
      ax.text(x, top * 1.04, text, ha="center", va="bottom", fontsize=7)
  ax.set_xticks(range(len(cases)), cases)
  ax.set_ylabel("learner updates/s (median, min-max)")
  ax.set_yscale("log")
  ax.margins(y=0.3)
  where = (
    "2 logical CPU devices on the same cores: overhead, not speed-up"
    if logical_cpus
    else "GPUs"
  )
  ax.set_title(
    f"Synchronous towers vs none, same total batch ({where})", fontsize=10
  )
  ax.legend(fontsize=8, loc="upper right")
  return common.save_plot(fig, NAME)


if __name__ == "__main__":
  app.run(main)
