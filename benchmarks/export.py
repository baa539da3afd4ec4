r"""Complete-agent SavedModels: export time, size against the variables they
hold, load time in a fresh process, and the loaded `action` signature's
throughput against the in-process executor (issue 7).

Agents (Pong-shaped: uint8 observations [84, 84, 4], 6 actions):

- dqn: `DQNAgent` with the Nature-DQN torso + dueling head, Cast/Divide(255)
  preprocessing and a uniform replay of `--dqn_replay` transitions (default
  100,000: states and next states, 2 x 2.8 GB of uint8), exported with
  `export_agent` (action, observe, update, sync_target, get_weights,
  get_train_step).
- impala: `IMPALABuilder`'s actor + learner (update_from_batch=True) with the
  Pong flagfile's network (small conv torso, LSTM 256, unroll 20, batch 32,
  16 envs per actor), exported with `export_actor_learner`. The actor gets a
  shape-only env (never stepped: env stepping is not exported).

Figures per agent:

- export_s: `export_agent` / `export_actor_learner` wall time (tracing the
  signature functions and writing the SavedModel), `--export_reps` times
  into a fresh directory.
- size: bytes of the SavedModel directory against the bytes of every
  variable it holds (the executors' `tf.Module.variables`: weights,
  optimizer slots, replay, RNG states). Target: size <= 1.1 x variables.
- load: `tf.saved_model.load` in a fresh `python -I` process that cannot
  import ingraph_rl (`--load_reps` processes): the load, the first
  `action` call, and the process's peak RSS.
- action throughput at batch 1 and 32, interleaved in one process
  (`common.interleave`, rotating order, gc before each call):
  `executor` = `executor.execute(api, ...)` (input checks on),
  `raw_function` = the executor's tf.function, `loaded` =
  `tf.saved_model.load(path).signatures["action"](**inputs)`. Every
  variant gets the same NumPy inputs and returns the actions as NumPy.
  DQN: `get_actions(states, explore)`, greedy and exploring; IMPALA: the
  actor's `act` on [B, 1] (one step, LSTM state in and out) against the
  loaded one-step `action(observation, first, state_c, state_h)`.
  Target: loaded >= 0.9 x the executor's states/s.

    python -m benchmarks.export            # the measurement (~8 min; ~12 GB
                                           #   of RAM, ~6 GB of disk)
    python -m benchmarks.export --quick    # smoke run, < 60 s (replay 1000)

Writes benchmarks/results/export.json (and export.png without --quick).
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf
from absl import app, flags

from benchmarks import common  # Sets OMP_WAIT_POLICY before TF loads.
from ingraph_rl.agents.dqn import DQNBuilder, DQNConfig
from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig
from ingraph_rl.components.networks import NATURE_DQN_SPEC
from ingraph_rl.components.preprocessing import (
  Cast,
  Divide,
  PreprocessorStack,
)
from ingraph_rl.environments.vector_env import VectorEnv
from ingraph_rl.export import (
  export_actor_learner,
  export_agent,
)
from ingraph_rl.spaces import IntBox

NAME = "export"

_QUICK = flags.DEFINE_bool(
  "quick", False, "Smoke run (< 60 s): replay 1000, few reps."
)
_REPS = flags.DEFINE_integer(
  "reps", None, "Timed throughput repetitions (default 15; 2 with --quick)."
)
_REP_SECONDS = flags.DEFINE_float(
  "rep_seconds",
  None,
  "Target wall time of one throughput repetition of "
  "one variant (default 0.25; 0.05 with --quick).",
)
_EXPORT_REPS = flags.DEFINE_integer(
  "export_reps", None, "Exports per agent (default 3; 1 with --quick)."
)
_LOAD_REPS = flags.DEFINE_integer(
  "load_reps",
  None,
  "Fresh-process loads per agent (default 3; 1 with --quick).",
)
_DQN_REPLAY = flags.DEFINE_integer(
  "dqn_replay", None, "DQN replay capacity (default 100000; 1000 with --quick)."
)
_AGENTS = flags.DEFINE_list("agents", ["dqn", "impala"], "Agents to run.")

NUM_ACTIONS = 6
OBS_SHAPE = (84, 84, 4)
BATCH_SIZES = (1, 32)
SEED = 0
TARGETS = {"throughput": 0.9, "size": 1.1}
VARIANTS = ("executor", "raw_function", "loaded")
LABELS = {
  "executor": "in-process executor (execute)",
  "raw_function": "in-process executor (raw tf.function)",
  "loaded": "loaded SavedModel signature",
}

_now = time.perf_counter

# The fresh process: plain TF, ingraph_rl blocked; loads, calls `action`
# once with zeros of batch 1, reports JSON.
LOAD_CHILD = r"""
import sys
sys.modules["ingraph_rl"] = None
import json, time
t0 = time.perf_counter()
import numpy as np
import tensorflow as tf
t1 = time.perf_counter()
agent = tf.saved_model.load(sys.argv[1])
t2 = time.perf_counter()
sig = agent.signatures["action"]
inputs = {}
for name, spec in sig.structured_input_signature[1].items():
  shape = [1 if d is None else d for d in spec.shape.as_list()]
  inputs[name] = tf.zeros(shape, spec.dtype)
out = sig(**inputs)
[v.numpy() for v in out.values()]
t3 = time.perf_counter()
# VmHWM, not ru_maxrss: the latter keeps the forking parent's peak.
with open("/proc/self/status") as f:
  hwm_kb = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
print(json.dumps({"import_tf_s": t1 - t0, "load_s": t2 - t1,
                  "first_action_s": t3 - t2, "peak_rss_mb": hwm_kb / 1024}))
"""


class ShapeOnlyEnv(VectorEnv):
  """The spaces of `num_envs` Pong envs; never stepped (the export leaves
  env stepping out, so the actor only needs the spaces)."""

  def __init__(self, num_envs):
    self.num_envs = num_envs
    self.observation_space = IntBox(256, OBS_SHAPE, dtype=np.uint8)
    self.action_space = IntBox(NUM_ACTIONS, dtype=np.int64)

  def reset(self, seed=None):
    raise RuntimeError("ShapeOnlyEnv is never stepped")

  def step(self, actions):
    raise RuntimeError("ShapeOnlyEnv is never stepped")

  def close(self):
    pass


# --- agents -------------------------------------------------------------------


def dqn_config(replay):
  return DQNConfig(
    num_actions=NUM_ACTIONS,
    network=tuple(NATURE_DQN_SPEC),
    dueling=True,
    replay_capacity=replay,
    batch_size=32,
    learning_starts=max(32, min(replay, 20_000)),
    seed=SEED,
  )


def build_dqn(replay):
  builder = DQNBuilder(
    dqn_config(replay),
    preprocessor=lambda: PreprocessorStack(Cast("float32"), Divide(255.0)),
  )
  ex = builder.make_agent(IntBox(256, OBS_SHAPE, dtype=np.uint8)).build()
  return {
    "executors": [ex],
    "export": lambda p: export_agent(ex, p),
    "calls": dqn_calls(ex),
  }


def impala_config():
  # experiments/flagfiles/impala_pong.cfg's network and batch.
  return IMPALAConfig(
    num_actions=NUM_ACTIONS,
    torso="small",
    lstm_units=256,
    unroll_length=20,
    batch_size=32,
    queue_capacity=64,
    seed=SEED,
  )


def build_impala():
  config = impala_config()
  env = ShapeOnlyEnv(16)
  builder = IMPALABuilder(config)
  lex = builder.make_learner(
    env.observation_space, "bench_export", update_from_batch=True
  ).build()
  aex = builder.make_actor(env, "bench_export").build()
  aex.execute("set_weights", lex.execute("get_weights"))
  return {
    "executors": [aex, lex],
    "export": lambda p: export_actor_learner(aex, lex, p, name=builder.name),
    "calls": impala_calls(aex, config.lstm_units),
  }


def dqn_calls(ex):
  """variant -> fn(inputs) -> actions (NumPy); inputs: make_inputs()."""
  raw = ex.function("get_actions")

  def make_inputs(batch, explore, rng):
    return {
      "states": rng.integers(0, 256, (batch,) + OBS_SHAPE, dtype=np.uint8),
      "explore": np.bool_(explore),
    }

  return {
    "make_inputs": make_inputs,
    "executor": lambda x: ex.execute("get_actions", x["states"], x["explore"])[
      "actions"
    ].numpy(),
    "raw_function": lambda x: raw(x["states"], x["explore"])["actions"].numpy(),
    "loaded": lambda sig, x: sig(states=x["states"], explore=x["explore"])[
      "actions"
    ].numpy(),
  }


def impala_calls(aex, state_size):
  raw = aex.function("act")

  def make_inputs(batch, explore, rng):
    del explore  # The IMPALA policy always samples.
    obs = rng.integers(0, 256, (batch,) + OBS_SHAPE, dtype=np.uint8)
    state = rng.normal(size=(batch, state_size)).astype(np.float32)
    reward = rng.normal(size=batch).astype(np.float32)
    action = rng.integers(0, NUM_ACTIONS, batch).astype(np.int64)
    return {
      "observation": obs,
      "first": np.zeros(batch, bool),
      "prev_reward": reward,
      "prev_action": action,
      "state_c": state,
      "state_h": state.copy(),
      # The executor's act takes [B, T=1] and a state dict.
      "obs_bt": obs[:, None],
      "first_bt": np.zeros((batch, 1), bool),
      "last_bt": (reward[:, None], action[:, None]),
      "state": {"c": state, "h": state.copy()},
    }

  return {
    "make_inputs": make_inputs,
    "executor": lambda x: aex.execute(
      "act", x["obs_bt"], x["state"], x["first_bt"], *x["last_bt"]
    )["action"].numpy()[:, 0],
    "raw_function": lambda x: raw(
      x["obs_bt"], x["state"], x["first_bt"], *x["last_bt"]
    )["action"].numpy()[:, 0],
    "loaded": lambda sig, x: sig(
      observation=x["observation"],
      first=x["first"],
      prev_reward=x["prev_reward"],
      prev_action=x["prev_action"],
      state_c=x["state_c"],
      state_h=x["state_h"],
    )["action"].numpy(),
  }


# --- measuring ----------------------------------------------------------------


def dir_bytes(path):
  """{"total", "variables", "graph", "assets"} bytes of a SavedModel."""
  out = {"total": 0, "variables": 0, "graph": 0, "assets": 0}
  for root, _, files in os.walk(path):
    for f in files:
      size = os.path.getsize(os.path.join(root, f))
      out["total"] += size
      part = pathlib.Path(root).relative_to(path).parts
      if part and part[0] == "variables":
        out["variables"] += size
      elif part and part[0] == "assets":
        out["assets"] += size
      elif f.endswith(".pb"):
        out["graph"] += size
  return out


def variable_bytes(executors):
  """Bytes of every variable the executors' modules track (what the
  SavedModel saves), without reading them."""
  seen, total = set(), 0
  for ex in executors:
    for v in ex.module.variables:
      if id(v) not in seen:
        seen.add(id(v))
        total += int(np.prod(v.shape.as_list())) * v.dtype.size
  return total


def fresh_load(path):
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  res = subprocess.run(
    [sys.executable, "-I", "-c", LOAD_CHILD, path],
    cwd="/",
    env=env,
    capture_output=True,
    text=True,
    timeout=900,
  )
  if res.returncode != 0:
    raise RuntimeError(f"fresh-process load failed:\n{res.stderr[-3000:]}")
  return json.loads(res.stdout.strip().splitlines()[-1])


def check_same_actions(calls, loaded_sig, rng, exact):
  """Greedy DQN actions equal between executor and loaded model (IMPALA
  samples: the same shape and range is checked)."""
  x = calls["make_inputs"](16, False, rng)
  ours = calls["executor"](x)
  theirs = calls["loaded"](loaded_sig, x)
  if (
    ours.shape != theirs.shape
    or theirs.min() < 0
    or theirs.max() >= NUM_ACTIONS
  ):
    raise AssertionError(f"loaded actions {theirs} vs executor {ours}")
  if exact and not np.array_equal(ours, theirs):
    raise AssertionError(
      f"greedy actions differ: loaded {theirs}, executor {ours}"
    )


def measure_agent(name, build, tmp, o):
  """All figures of one agent: rows, ratios, config notes, plot data."""
  rows, ratios, notes = [], {}, {}
  t0 = _now()
  agent = build()
  notes["build_s"] = round(_now() - t0, 2)
  var_bytes = variable_bytes(agent["executors"])

  export_times, path = [], None
  for i in range(o["export_reps"]):
    if path is not None:
      shutil.rmtree(path, ignore_errors=True)
    path = os.path.join(tmp, f"{name}_{i}")
    start = _now()
    result = agent["export"](path)
    export_times.append(_now() - start)
  sizes = dir_bytes(path)
  notes["exported"] = result.exported
  notes["skipped"] = sorted(result.skipped)
  notes["bytes"] = dict(sizes, variables_in_memory=var_bytes)
  rows.append(
    common.Row(
      f"{name}/export", "export time", "s", common.Stat.of(export_times)
    )
  )
  size_ratio = sizes["total"] / var_bytes
  rows.append(
    common.Row(
      f"{name}/size",
      "SavedModel size",
      "MB",
      common.Stat.of([sizes["total"] / 1e6]),
    )
  )
  rows.append(
    common.Row(
      f"{name}/size",
      "sum of variables",
      "MB",
      common.Stat.of([var_bytes / 1e6]),
    )
  )
  ratios[f"{name}_savedmodel_over_variables"] = size_ratio

  loads = [fresh_load(path) for _ in range(o["load_reps"])]
  for key, unit, metric in (
    ("load_s", "s", "fresh-process load"),
    ("first_action_s", "s", "first action call"),
    ("import_tf_s", "s", "import tensorflow"),
    ("peak_rss_mb", "MB", "peak RSS of the loader"),
  ):
    rows.append(
      common.Row(
        f"{name}/fresh_process",
        metric,
        unit,
        common.Stat.of(common.column(loads, key)),
      )
    )

  start = _now()
  loaded = tf.saved_model.load(path)
  notes["in_process_load_s"] = round(_now() - start, 2)
  sig = loaded.signatures["action"]
  calls = agent["calls"]
  rng = np.random.default_rng(SEED)
  check_same_actions(calls, sig, rng, exact=name == "dqn")
  fns = {
    "executor": calls["executor"],
    "raw_function": calls["raw_function"],
    "loaded": lambda x: calls["loaded"](sig, x),
  }
  modes = (False, True) if name == "dqn" else (None,)
  rates, per_call, spread = {}, {}, {}
  for batch in BATCH_SIZES:
    for explore in modes:
      mode = {False: "greedy", True: "explore", None: "sample"}[explore]
      x = calls["make_inputs"](batch, explore, rng)
      # Calls per rep so that one executor rep takes about rep_seconds.
      fns["executor"](x)
      start = _now()
      fns["executor"](x)
      n = max(2, int(o["rep_seconds"] / max(_now() - start, 1e-6)))
      per_call[f"b{batch}_{mode}"] = n

      def runner(fn, x=x, n=n):
        def run():
          for _ in range(n):
            fn(x)

        return run

      records = common.interleave(
        {v: runner(fns[v]) for v in VARIANTS}, reps=o["reps"]
      )
      us = {
        v: [1e6 * t / n for t in common.column(records[v], "wall_s")]
        for v in VARIANTS
      }
      for v in VARIANTS:
        case = f"{name}/b{batch}/{mode}/{v}"
        rows.append(
          common.Row(case, "time per call", "us", common.Stat.of(us[v]))
        )
        stat = common.Stat.of(batch * 1e6 / u for u in us[v])
        rows.append(common.Row(case, "throughput", "states/s", stat))
        rates[(batch, mode, v)] = stat.median
      # Throughput ratio = inverse time ratio, paired per rep.
      sfx = f"{name}_b{batch}" + (
        "" if mode in ("greedy", "sample") else "_explore"
      )
      for base in ("executor", "raw_function"):
        ratios[f"loaded_over_{base}_throughput_{sfx}"] = common.paired_ratio(
          us[base], us["loaded"]
        )
        per_rep = [b / x for b, x in zip(us[base], us["loaded"])]
        spread[(batch, mode, base)] = (
          ratios[f"loaded_over_{base}_throughput_{sfx}"],
          min(per_rep),
          max(per_rep),
        )
  notes["calls_per_rep"] = per_call
  shutil.rmtree(path, ignore_errors=True)
  plot_data = {
    "rates": rates,
    "spread": spread,
    "bytes": sizes,
    "var_bytes": var_bytes,
    "modes": modes,
  }
  return rows, ratios, notes, plot_data


# --- main -------------------------------------------------------------------


def main(argv):
  del argv
  quick = _QUICK.value
  o = {
    "reps": _REPS.value or (2 if quick else 15),
    "rep_seconds": _REP_SECONDS.value or (0.05 if quick else 0.25),
    "export_reps": _EXPORT_REPS.value or (1 if quick else 3),
    "load_reps": _LOAD_REPS.value or (1 if quick else 3),
    "dqn_replay": _DQN_REPLAY.value or (1000 if quick else 100_000),
  }
  threads = common.configure_threads()
  builders = {"dqn": lambda: build_dqn(o["dqn_replay"]), "impala": build_impala}
  rows, ratios, notes, plots = [], {}, {}, {}
  tmp = tempfile.mkdtemp(prefix="bench_export_")
  try:
    for name in _AGENTS.value:
      r, q, n, p = measure_agent(name, builders[name], tmp, o)
      rows += r
      ratios.update(q)
      notes[name] = n
      plots[name] = p
  finally:
    shutil.rmtree(tmp, ignore_errors=True)

  targets, verdicts = {}, []
  for name in _AGENTS.value:
    size = ratios[f"{name}_savedmodel_over_variables"]
    met = size <= TARGETS["size"]
    targets[f"{name}_size"] = {
      "target": f"SavedModel <= {TARGETS['size']:g} x variables",
      "value": round(size, 4),
      "met": met,
    }
    verdicts.append(
      f"{name} size {size:.3f}x vars ({'met' if met else 'MISSED'})"
    )
    for key, value in ratios.items():
      if key.startswith("loaded_over_executor_throughput_" + name):
        met = value >= TARGETS["throughput"]
        targets[key] = {
          "target": f"loaded action >= {TARGETS['throughput']:g} x executor",
          "value": round(value, 4),
          "met": met,
        }
    worst = min(
      v["value"]
      for k, v in targets.items()
      if k.startswith("loaded_over_executor_throughput_" + name)
    )
    met = worst >= TARGETS["throughput"]
    verdicts.append(
      f"{name} loaded action worst {worst:.2f}x executor "
      f"({'met' if met else 'MISSED'})"
    )

  config_doc = {
    **o,
    "batch_sizes": list(BATCH_SIZES),
    "warmup_reps": 1,
    "threads": threads,
    "thread_note": "TF intra/inter-op pools at TF's defaults; "
    "OMP_WAIT_POLICY=PASSIVE; no torch",
    "agents": {
      "dqn": f"DQNAgent({dqn_config(o['dqn_replay'])}, preprocessor="
      f"PreprocessorStack(Cast('float32'), Divide(255.0)))"
      f".build(IntBox(256, (84, 84, 4), uint8)); export_agent",
      "impala": f"IMPALABuilder(config).make_actor(16-env shape-only "
      f"Pong env) + make_learner(update_from_batch=True), "
      f"config={impala_config()}; export_actor_learner",
    },
    "variants": LABELS,
    "interleaving": "per (agent, batch, mode) the three variants "
    "alternate within each rep, rotating which goes "
    "first; gc.collect() before each; calls per rep "
    "calibrated so an executor rep takes rep_seconds",
    "ratios": "loaded_over_*_throughput: median over reps of per-rep "
    "paired ratios (baseline us per call / loaded us per "
    "call), > 1 means the loaded signature is faster; "
    "*_savedmodel_over_variables: bytes on disk / bytes of "
    "the tracked variables",
    "fresh_process": "python -I from /, no PYTHONPATH, "
    "sys.modules['ingraph_rl'] = None; times measured "
    "inside the child",
    "per_agent": notes,
    "targets": targets,
  }
  path = common.write_results(NAME, quick, config_doc, rows, ratios)
  if not quick:
    print(f"wrote {plot(plots)}")
  summary = f"{NAME}{' [quick]' if quick else ''}: " + "; ".join(verdicts)
  common.print_table(NAME, rows, ratios, summary, quick=quick, path=path)


def plot(plots):
  """Left: loaded `action` throughput over the in-process executor's per
  case (median of paired per-rep ratios, whiskers min..max). Right:
  SavedModel bytes (variables files, graph, assets) over the variables'
  bytes."""
  plt = common.pyplot()
  fig, (ax, bx) = plt.subplots(
    1, 2, figsize=(11, 4.5), gridspec_kw={"width_ratios": [2.2, 1]}
  )
  colors = {"executor": "#4C72B0", "raw_function": "#64B5CD"}
  groups = []
  for name, p in plots.items():
    for batch in BATCH_SIZES:
      for mode in p["modes"]:
        mode = {False: "greedy", True: "explore", None: "sample"}[mode]
        groups.append((name, batch, mode, p))
  width = 0.36
  for i, base in enumerate(("executor", "raw_function")):
    xs = [g + (i - 0.5) * width for g in range(len(groups))]
    med, lo, hi = zip(*[p["spread"][(b, m, base)] for _, b, m, p in groups])
    ax.bar(xs, med, width, color=colors[base], label=f"loaded / {LABELS[base]}")
    ax.errorbar(
      xs,
      med,
      yerr=[
        [m - low for m, low in zip(med, lo)],
        [h - m for m, h in zip(med, hi)],
      ],
      fmt="none",
      ecolor="k",
      elinewidth=0.8,
      capsize=2,
    )
  for g, (_, b, m, p) in enumerate(groups):
    ax.text(
      g,
      0.03,
      f"{p['rates'][(b, m, 'loaded')]:,.0f}\nstates/s",
      ha="center",
      va="bottom",
      fontsize=7,
      color="white",
    )
  ax.axhline(1.0, color="k", lw=0.8)
  ax.axhline(
    TARGETS["throughput"],
    color="r",
    ls="--",
    lw=0.8,
    label=f"target {TARGETS['throughput']:g}x",
  )
  ax.set_xticks(
    range(len(groups)), [f"{n}\nb{b} {m}" for n, b, m, _ in groups], fontsize=8
  )
  ax.set_ylabel("throughput ratio (loaded / in-process)")
  ax.set_title(
    "action: loaded SavedModel signature vs in-process executor", fontsize=10
  )
  ax.legend(fontsize=8, loc="upper left")
  ax.grid(True, axis="y", alpha=0.3)
  names = list(plots)
  for j, name in enumerate(names):
    b = plots[name]["bytes"]
    var = plots[name]["var_bytes"]
    bottom = 0.0
    for part, color in (
      ("variables", "#55A868"),
      ("graph", "#8172B2"),
      ("assets", "#CCB974"),
    ):
      share = b[part] / var
      bx.bar(
        j,
        share,
        0.5,
        bottom=bottom,
        color=color,
        label=part if j == 0 else None,
      )
      bottom += share
    bx.text(
      j,
      0.5,
      f"{bottom:.3f}x\n{b['total'] / 1e6:,.1f} MB",
      ha="center",
      va="center",
      fontsize=8,
      color="white",
    )
  bx.axhline(
    TARGETS["size"],
    color="r",
    ls="--",
    lw=0.8,
    label=f"target {TARGETS['size']:g}x",
  )
  bx.set_xticks(range(len(names)), names)
  bx.set_ylim(0, max(1.3, bx.get_ylim()[1]))
  bx.set_ylabel("SavedModel bytes / variable bytes")
  bx.set_title("size on disk", fontsize=10)
  bx.legend(fontsize=8, loc="lower right")
  return common.save_plot(fig, NAME)


if __name__ == "__main__":
  app.run(main)
