r"""Environment throughput of DQN's in-graph training loop against the
Python-driven loop and raw environment stepping.

Per environment (CartPole-v1 and Pong, 8 environments each), seven variants
(nine for Pong) are interleaved within every repetition, each running the
same number of vector steps:

1. in_graph (updates off / on): `executor.execute("train", k)` calls of the
   `DQNAgent` built with the env (act, env step, observe, update, sync in a
   tf.while_loop; one graph call per `k` vector steps).
2. in_graph_groups2 (updates off / on): the same loop with
   `DQNConfig.env_groups=2`, its env built by `make_actor_env(...,
   env_groups=2)` (as experiments/dqn.py's `make_env`): two groups of 4
   envs, double-buffered (one group's env step runs while the Q-network
   acts on the other's observations). Rows `<env>/updates_<s>/
   in_graph_groups2`; ratios `<env>_in_graph_groups2_over_raw_updates_<s>`
   and `<env>_in_graph_groups2_over_in_graph_updates_<s>` (against the
   one-group loop).
3. python (updates off / on): `python_loop_steps` (here: the baseline,
   the Python-driven loop experiments no longer have), one executor call
   per act / observe / update (its own agent and env).
4. raw: `env.step(random actions)` in a Python loop, no agent (the ceiling;
   ale-py's threads pinned, `common.raw_env_kwargs`).
5. acting_sync / acting_async4 (Pong, updates off): `Acting`, the in-graph
   agent's `get_actions` and ale-py's vector env driven from Python, no
   observe. Sync acts on all 8 envs, then steps them; async uses ale-py's
   async mode (`batch_size=4`): act on the first 4 envs to finish while the
   other 4 step. Ratios `pong_acting_async4_over_acting_sync` (what that
   overlap gives a serial loop) and `pong_acting_*_over_raw`.

TF's intra-op threads are a one-process experiment's (one;
`--intra_op_threads` to change). Before 2026-11-27 this benchmark ran TF's
default (one per core): Pong's in-graph loop then ran 2,788 against 3,064
env steps/s with updates off and 360 against 344 with them on.

"Updates off" sets `learning_starts` beyond the run (the loop still acts,
observes into the replay memory and syncs the target); "updates on" sets it
small (1,000 CartPole, 2,000 Pong env steps) and fills that much untimed
before the first repetition, so every timed step does one update.

Throughput is env steps/s (one env step = one environment advancing one
agent step); for Pong, frames/s = 4 x env steps/s (frameskip 4) is reported
beside it. For Pong with updates off, the in-graph time per vector step is
split into env stepping (the raw variant's time for the same steps), the
act-only cost (`executor.function("get_actions")` on a batch of 8 frames)
and the rest (observe, loop and numpy_function overhead).

    python -m benchmarks.dqn_loop            # the measurement
    python -m benchmarks.dqn_loop --quick    # smoke run, CartPole only, < 60 s

Writes benchmarks/results/dqn_loop.json (and dqn_loop.png without --quick).
"""

import gc
import time

import numpy as np
import tensorflow as tf
from absl import app, flags

from benchmarks import common  # Sets OMP_WAIT_POLICY before TF loads.
from ingraph_rl.agents.dqn import DQNBuilder, DQNConfig
from ingraph_rl.components.networks import NATURE_DQN_SPEC
from ingraph_rl.components.preprocessing import (
  Cast,
  Divide,
  PreprocessorStack,
)
from ingraph_rl.environments import make_vector_env
from ingraph_rl.environments.atari import channels_last, game_name
from ingraph_rl.runners.environments import make_actor_env

NAME = "dqn_loop"

_QUICK = flags.DEFINE_bool(
  "quick", False, "Smoke run (< 60 s): CartPole only, 2 short reps."
)
_REPS = flags.DEFINE_integer(
  "reps", None, "Timed repetitions (default 5; 2 with --quick)."
)
_ENVS = flags.DEFINE_list(
  "envs",
  None,
  "Environments to run (default cartpole,pong; cartpole with --quick).",
)
_STEPS_SCALE = flags.DEFINE_float(
  "steps_scale", 1.0, "Multiplies the vector steps per repetition."
)
_THREADS = common.define_intra_op_threads_flag()

NUM_ENVS = 8
STEPS_PER_CALL = 250  # Vector steps per in-graph train call (as
# experiments/dqn.py's default).
NEVER = 10**9  # learning_starts for "updates off".
SEED = 0
ACT_CALLS = 200  # get_actions calls per rep for the Pong split.
ENV_GROUPS = 2  # The grouped in-graph variant's env groups.
GROUPED = f"in_graph_groups{ENV_GROUPS}"
ASYNC_BATCH = 4  # Envs per ale-py async recv in the acting-only pair.
ASYNC = f"acting_async{ASYNC_BATCH}"
ACTING = {"acting_sync": 0, ASYNC: ASYNC_BATCH}
IN_GRAPH = ("in_graph", GROUPED)  # The in-graph loop variants.

ENVS = {
  "cartpole": {
    "id": "CartPole-v1",
    "atari": False,
    "learning_starts": 1000,
    "replay_capacity": 50_000,
    # Vector steps per rep: (updates off, updates on).
    "steps": (2000, 1000),
    "quick_steps": (300, 200),
  },
  "pong": {
    "id": "atari:pong",
    "atari": True,
    "learning_starts": 2000,
    "replay_capacity": 10_000,
    "steps": (400, 150),
    "quick_steps": (50, 20),
    "frameskip": 4,
  },
}
SETTINGS = ("off", "on")
TARGETS = {
  "pong_in_graph_over_raw_updates_off": 0.5,
  "cartpole_in_graph_over_python_updates_on": 1.5,
}


def make_config(spec, num_actions, setting, env_groups=1):
  return DQNConfig(
    num_actions=num_actions,
    network=tuple(NATURE_DQN_SPEC) if spec["atari"] else DQNConfig.network,
    replay_capacity=spec["replay_capacity"],
    learning_starts=NEVER if setting == "off" else spec["learning_starts"],
    env_groups=env_groups,
    seed=SEED,
  )


def make_builder(spec, num_actions, setting, env_groups=1):
  preprocessor = (
    (lambda: PreprocessorStack(Cast("float32"), Divide(255.0)))
    if spec["atari"]
    else None
  )
  return DQNBuilder(
    make_config(spec, num_actions, setting, env_groups), preprocessor
  )


def python_loop_steps(executor, env, obs, num_steps, config, counter):
  """The Python-driven loop (the baseline): one executor call per act /
  observe / update / sync, the bookkeeping of the agent's in-graph
  `train`. Returns (totals as `train`'s, the next observations)."""
  totals = dict(
    episodes=0, return_sum=0.0, length_sum=0, loss_sum=0.0, updates=0
  )
  for _ in range(num_steps):
    actions = executor.execute("get_actions", obs, True)["actions"].numpy()
    step = env.step(actions)
    v = counter["vector_steps"] + 1
    # As `train`: the update before this step's transitions go in.
    if (
      v * env.num_envs >= config.learning_starts
      and v % config.update_every == 0
    ):
      totals["loss_sum"] += float(executor.execute("update")["loss"])
      totals["updates"] += 1
    # n-step observe also takes `truncated`: episode ends cut n-step sums.
    extra = (step.truncated,) if config.n_step > 1 else ()
    executor.execute(
      "observe",
      obs,
      actions,
      step.rewards,
      step.final_obs,
      step.terminated,
      *extra,
    )
    obs = step.obs
    counter["vector_steps"] = v
    if v % config.target_sync_every == 0:
      executor.execute("sync_target")
    done = step.terminated | step.truncated
    totals["episodes"] += int(done.sum())
    totals["return_sum"] += float(step.episode_returns.sum())
    totals["length_sum"] += int(step.episode_lengths.sum())
  totals["env_steps"] = counter["vector_steps"] * env.num_envs
  return totals, obs


class InGraph:
  """The in-graph loop: `train(k)` graph calls. With `env_groups` > 1 the
  env is `make_actor_env(..., env_groups)`'s `GroupedVectorEnv` (env i
  still seeded SEED + i) and the loop double-buffers its groups."""

  def __init__(self, spec, setting, env_groups=1):
    if env_groups > 1:
      self.env = make_actor_env(
        spec["id"], NUM_ENVS, SEED, env_groups=env_groups
      )
    else:
      self.env = make_vector_env(spec["id"], NUM_ENVS, SEED)
    builder = make_builder(
      spec, self.env.action_space.num_categories, setting, env_groups
    )
    self.config = builder.config
    self.executor = builder.make_agent(env=self.env).build()
    self.executor.execute("reset_env", SEED)

  def run(self, vector_steps):
    updates = []
    left = vector_steps
    while left > 0:
      k = min(left, STEPS_PER_CALL)
      updates.append(self.executor.execute("train", k)["updates"])
      left -= k
    return {
      "env_steps": vector_steps * NUM_ENVS,
      "updates": int(sum(int(u.numpy()) for u in updates)),
    }


class Python:
  """The Python-driven loop, `python_loop_steps` (agent without an env)."""

  def __init__(self, spec, setting):
    self.env = make_vector_env(spec["id"], NUM_ENVS, SEED)
    builder = make_builder(spec, self.env.action_space.num_categories, setting)
    self.config = builder.config
    self.executor = builder.make_agent(self.env.observation_space).build()
    self.obs = self.env.reset(SEED)
    self.counter = {"vector_steps": 0}

  def run(self, vector_steps):
    totals, self.obs = python_loop_steps(
      self.executor, self.env, self.obs, vector_steps, self.config, self.counter
    )
    return {"env_steps": vector_steps * NUM_ENVS, "updates": totals["updates"]}


class Acting:
  """Acting and stepping only, from Python (no observe, no update): the
  in-graph agent's `get_actions` tf.function and ale-py's vector env,
  used directly (channels-last frames as `AtariVectorEnv` gives them).

  `batch=0` is synchronous: act on all 8, `env.step` all 8. With `batch`
  = 4, ale-py's async mode (its `batch_size`): `recv` the first 4 envs to
  finish, act on them and `send` their actions while the other 4 still
  step. The pair measures what overlapping env groups through ale-py's
  own queue could give over a serial loop, before any observe."""

  def __init__(self, in_graph, game, batch):
    import gymnasium as gym
    from ale_py.vector_env import AtariVectorEnv

    self.act = in_graph.executor.function("get_actions")
    self.explore = tf.constant(True)
    self.batch = batch
    self.env = AtariVectorEnv(
      game,
      NUM_ENVS,
      batch_size=batch,
      autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    self.steps_per_env = np.zeros(NUM_ENVS, np.int64)
    obs, _ = self.env.reset(seed=SEED)
    if batch:
      self.env.send(self._actions(obs))
    else:
      self.obs = obs

  def _actions(self, obs):
    frames = tf.constant(channels_last(obs))
    return self.act(frames, self.explore)["actions"].numpy()

  def run(self, vector_steps):
    if self.batch:
      for _ in range(vector_steps * NUM_ENVS // self.batch):
        obs, *_, info = self.env.recv()
        self.env.send(self._actions(obs))
        np.add.at(self.steps_per_env, info["env_id"], 1)
    else:
      for _ in range(vector_steps):
        self.obs = self.env.step(self._actions(self.obs))[0]
      self.steps_per_env += vector_steps
    return {"env_steps": vector_steps * NUM_ENVS, "updates": 0}


class Raw:
  """env.step with uniformly random actions in a Python loop, no agent."""

  def __init__(self, spec):
    kwargs = common.raw_env_kwargs(spec["id"])
    self.env = make_vector_env(spec["id"], NUM_ENVS, SEED, **kwargs)
    self.env.reset(SEED)
    self.num_actions = self.env.action_space.num_categories
    self.rng = np.random.default_rng(SEED)

  def run(self, vector_steps):
    for _ in range(vector_steps):
      actions = self.rng.integers(0, self.num_actions, NUM_ENVS, dtype=np.int64)
      self.env.step(actions)
    return {"env_steps": vector_steps * NUM_ENVS, "updates": 0}


@tf.function(autograph=False)
def _noop(states, explore):
  return {"actions": tf.identity(explore)}


def act_only_seconds(in_graph, calls):
  """Seconds per call of the raw get_actions tf.function on 8 frames, and
  of a no-op tf.function with the same arguments (the Python call floor,
  which the in-graph loop does not pay per step)."""
  fn = in_graph.executor.function("get_actions")
  obs = tf.constant(in_graph.env.reset(SEED + 1))
  explore = tf.constant(True)
  out = {}
  for key, f in (("act_s", fn), ("floor_s", _noop)):
    f(obs, explore)["actions"].numpy()
    start = time.perf_counter()
    for _ in range(calls):
      res = f(obs, explore)
    res["actions"].numpy()
    out[key] = (time.perf_counter() - start) / calls
  return out


def bench_env(name, spec, reps, quick, scale):
  """Builds the variants of one env, fills, interleaves; returns records."""
  steps = spec["quick_steps"] if quick else spec["steps"]
  steps = {s: max(1, int(round(n * scale))) for s, n in zip(SETTINGS, steps)}
  t0 = time.perf_counter()
  variants = {"raw": Raw(spec)}
  for s in SETTINGS:
    variants[f"in_graph_{s}"] = InGraph(spec, s)
    variants[f"{GROUPED}_{s}"] = InGraph(spec, s, ENV_GROUPS)
    variants[f"python_{s}"] = Python(spec, s)
  if spec["atari"]:
    for key, batch in ACTING.items():
      variants[key] = Acting(
        variants["in_graph_off"], game_name(spec["id"]), batch
      )
  build_s = time.perf_counter() - t0
  # Fill past learning_starts (untimed), so every timed step of "on" updates.
  fill = -(-spec["learning_starts"] // NUM_ENVS)
  t0 = time.perf_counter()
  for s in SETTINGS:
    for v in (*IN_GRAPH, "python"):
      variants[f"{v}_{s}"].run(fill)
  fill_s = time.perf_counter() - t0

  split = name == "pong" or quick

  def runner(key):
    setting = key.rsplit("_", 1)[-1]
    n = steps["off"] if key in ("raw", *ACTING) else steps[setting]
    return lambda: variants[key].run(n)

  fns = {k: runner(k) for k in variants}
  # Raw stepping also runs for the "on" step count, so ratios pair it.
  if steps["on"] != steps["off"]:
    fns["raw_on"] = lambda: variants["raw"].run(steps["on"])
  if split:
    fns["act_only"] = lambda: act_only_seconds(
      variants["in_graph_off"], ACT_CALLS
    )
  records = common.interleave(fns, reps=reps, warmup=1)
  for key in ("in_graph_on", f"{GROUPED}_on", "python_on"):
    for r in records[key]:
      r["updates_per_vector_step"] = r["updates"] / steps["on"]
  # ale-py's queue need not be fair: how often each env came back.
  fairness = (
    variants[ASYNC].steps_per_env.tolist() if ASYNC in variants else None
  )
  for v in variants.values():
    v.env.close()
  variants.clear()  # Frees the agents (their replays) before the next env.
  gc.collect()
  return (
    records,
    steps,
    {
      "build_s": round(build_s, 2),
      "fill_s": round(fill_s, 2),
      "fill_vector_steps": fill,
      "async_steps_per_env": fairness,
    },
  )


def sps(records):
  return [r["env_steps"] / r["wall_s"] for r in records]


def main(argv):
  del argv
  quick = _QUICK.value
  reps = _REPS.value or (2 if quick else 5)
  envs = _ENVS.value or (["cartpole"] if quick else ["cartpole", "pong"])
  threads = common.experiment_threads(_THREADS.value)
  rows, ratios, env_config = [], {}, {}
  for name in envs:
    spec = ENVS[name]
    records, steps, info = bench_env(
      name, spec, reps, quick, _STEPS_SCALE.value
    )
    frames = spec.get("frameskip")
    raw_key = {"off": "raw", "on": "raw_on" if "raw_on" in records else "raw"}
    raw_stat = common.Stat.of(sps(records["raw"]))
    rows.append(
      common.Row(f"{name}/raw", "throughput", "env steps/s", raw_stat)
    )
    if frames:
      rows.append(
        common.Row(
          f"{name}/raw", "throughput", "frames/s", raw_stat.scaled(frames)
        )
      )
    for s in SETTINGS:
      for variant in (*IN_GRAPH, "python"):
        stat = common.Stat.of(sps(records[f"{variant}_{s}"]))
        rows.append(
          common.Row(
            f"{name}/updates_{s}/{variant}", "throughput", "env steps/s", stat
          )
        )
        if frames:
          rows.append(
            common.Row(
              f"{name}/updates_{s}/{variant}",
              "throughput",
              "frames/s",
              stat.scaled(frames),
            )
          )
      ig, py = sps(records[f"in_graph_{s}"]), sps(records[f"python_{s}"])
      raw = sps(records[raw_key[s]])
      ratios[f"{name}_in_graph_over_python_updates_{s}"] = common.paired_ratio(
        ig, py
      )
      ratios[f"{name}_in_graph_over_raw_updates_{s}"] = common.paired_ratio(
        ig, raw
      )
      ratios[f"{name}_python_over_raw_updates_{s}"] = common.paired_ratio(
        py, raw
      )
      grouped = sps(records[f"{GROUPED}_{s}"])
      ratios[f"{name}_{GROUPED}_over_raw_updates_{s}"] = common.paired_ratio(
        grouped, raw
      )
      ratios[f"{name}_{GROUPED}_over_in_graph_updates_{s}"] = (
        common.paired_ratio(grouped, ig)
      )
    if ACTING.keys() <= records.keys():
      raw = sps(records["raw"])
      for key in ACTING:
        stat = common.Stat.of(sps(records[key]))
        rows.append(
          common.Row(
            f"{name}/updates_off/{key}", "throughput", "env steps/s", stat
          )
        )
        ratios[f"{name}_{key}_over_raw"] = common.paired_ratio(
          sps(records[key]), raw
        )
      sync, overlapped = (sps(records[k]) for k in ACTING)
      ratios[f"{name}_{ASYNC}_over_acting_sync"] = common.paired_ratio(
        overlapped, sync
      )
    on_updates = {
      v: common.column(records[f"{v}_on"], "updates_per_vector_step")
      for v in (*IN_GRAPH, "python")
    }
    env_config[name] = {
      "env": spec["id"],
      "num_envs": NUM_ENVS,
      "vector_steps_per_rep": {
        "updates_off": steps["off"],
        "updates_on": steps["on"],
      },
      "env_steps_per_rep": {
        "updates_off": steps["off"] * NUM_ENVS,
        "updates_on": steps["on"] * NUM_ENVS,
      },
      "network": "NATURE_DQN_SPEC, preprocessor PreprocessorStack("
      "Cast('float32'), Divide(255.0)) (as experiments/dqn.py)"
      if spec["atari"]
      else "DQNConfig default MLP (64, 64)",
      "replay_capacity": spec["replay_capacity"],
      "learning_starts": {
        "updates_off": NEVER,
        "updates_on": spec["learning_starts"],
      },
      "untimed_fill_vector_steps_before_reps": info["fill_vector_steps"],
      "updates_per_vector_step_on (checked)": {
        v: sorted(set(u)) for v, u in on_updates.items()
      },
      "updates_in_timed_off_reps (checked)": sum(
        r["updates"] for v in (*IN_GRAPH, "python") for r in records[f"{v}_off"]
      ),
      "build_s (all variants)": info["build_s"],
      "fill_s (all variants)": info["fill_s"],
    }
    if frames:
      env_config[name]["frames_per_env_step"] = frames
    if info["async_steps_per_env"] is not None:
      env_config[name][f"{ASYNC} env steps per env (whole run)"] = info[
        "async_steps_per_env"
      ]
    if "act_only" in records:
      split_rows, split_cfg = split_of(records, steps["off"])
      rows += [
        common.Row(f"{name}/updates_off/split", metric, "ms/vector step", stat)
        for metric, stat in split_rows
      ]
      env_config[name]["split_updates_off (in-graph, medians over reps)"] = (
        split_cfg
      )

  config = {
    "reps": reps,
    "warmup_reps": 1,
    "num_envs": NUM_ENVS,
    "steps_per_train_call": STEPS_PER_CALL,
    "envs": env_config,
    "metric": "env steps/s = vector steps x num_envs / wall time; Pong "
    "frames/s = 4 x env steps/s (ale-py frameskip 4)",
    "variants": {
      "in_graph": "DQNBuilder(config).make_agent(env=env).build(); "
      "executor.execute('train', k) with k <= 250, looped "
      "to the rep's steps",
      GROUPED: f"as in_graph with DQNConfig(env_groups={ENV_GROUPS}) and "
      f"make_actor_env(env, {NUM_ENVS}, seed, env_groups={ENV_GROUPS}) "
      f"(a GroupedVectorEnv of {ENV_GROUPS} groups, double-buffered by "
      f"the loop)",
      "python": "benchmarks.dqn_loop.python_loop_steps (execute "
      "get_actions "
      "/ observe / update / sync_target per vector step), own "
      "agent (no env) and env",
      "raw": "env.step(uniform random int64 actions) in a Python loop, "
      "own env, no agent; run for both setting's step counts "
      "(raw_on) so ratios pair within a round",
      "acting_sync, " + ASYNC: "Pong only, benchmarks.dqn_loop.Acting: "
      "the in_graph off agent's get_actions tf.function and "
      "ale_py.vector_env.AtariVectorEnv used directly, no observe or "
      f"update; sync: act on {NUM_ENVS}, env.step; async: batch_size="
      f"{ASYNC_BATCH}, recv the first {ASYNC_BATCH} envs done, act, send "
      "(the rest step meanwhile)",
      "act_only (split)": f"executor.function('get_actions') of the "
      f"in-graph off agent on a constant batch of "
      f"{NUM_ENVS} frames, explore=True, "
      f"{ACT_CALLS} calls per rep",
    },
    "agent": "DQNConfig defaults (dueling, double-Q, batch 64, Adam, "
    "update_every 1, target_sync_every 500, epsilon decay "
    "10,000 steps) except network, replay_capacity, "
    "learning_starts",
    "interleaving": "all variants of one env alternate within each rep, "
    "rotating which goes first; gc.collect() before each",
    "ratios": "median over reps of per-rep paired ratios of env steps/s",
    "threads": threads,
    "targets (reported, not asserted)": {
      k: f">= {v:g}" for k, v in TARGETS.items()
    },
  }
  path = common.write_results(NAME, quick, config, rows, ratios)
  if not quick:
    png = plot(rows, envs)
    print(f"wrote {png}")

  parts = []
  for key, target in TARGETS.items():
    if key in ratios:
      ok = "met" if ratios[key] >= target else "MISSED"
      parts.append(f"{key} {ratios[key]:.2f} (target >= {target:g} {ok})")
  for key in (
    "cartpole_in_graph_over_python_updates_off",
    "pong_in_graph_over_python_updates_on",
    *(
      f"{e}_{GROUPED}_over_in_graph_updates_{s}" for e in envs for s in SETTINGS
    ),
    *(f"{e}_{k}_over_raw" for e in envs for k in ACTING),
    *(f"{e}_{ASYNC}_over_acting_sync" for e in envs),
  ):
    if key in ratios:
      parts.append(f"{key} {ratios[key]:.2f}")
  summary = f"{NAME}{' [quick]' if quick else ''}: " + "; ".join(parts)
  common.print_table(NAME, rows, ratios, summary, quick=quick, path=path)


def split_of(records, vector_steps):
  """Per vector step (ms): in-graph total, env stepping (raw, same steps),
  act-only, and the rest. Medians of per-rep figures."""
  ig = [r["wall_s"] / vector_steps * 1e3 for r in records["in_graph_off"]]
  env = [r["wall_s"] / vector_steps * 1e3 for r in records["raw"]]
  call = [r["act_s"] * 1e3 for r in records["act_only"]]
  floor = [r["floor_s"] * 1e3 for r in records["act_only"]]
  act = [max(a - b, 0.0) for a, b in zip(call, floor)]
  rest = [a - b - c for a, b, c in zip(ig, env, act)]
  rows = [
    ("in_graph total", common.Stat.of(ig)),
    ("env stepping (raw)", common.Stat.of(env)),
    ("act only (get_actions call)", common.Stat.of(call)),
    ("tf.function call floor (no-op)", common.Stat.of(floor)),
    ("act compute (call - floor)", common.Stat.of(act)),
    ("rest (observe, loop, numpy_function)", common.Stat.of(rest)),
  ]
  med = {m: s.median for m, s in rows}
  total = med["in_graph total"]
  cfg = {
    "ms_per_vector_step": {m: round(v, 4) for m, v in med.items()},
    "share_of_in_graph": {
      m: round(v / total, 4) for m, v in med.items() if m != "in_graph total"
    },
    "how": "env stepping = raw variant's wall time for the same vector "
    "steps in the same rep (its own env, random actions); act "
    "only = one call of the get_actions tf.function from Python; "
    "the floor = one call of a no-op tf.function with the same "
    "arguments (Python dispatch, paid per call from Python but "
    "not per step inside the in-graph loop); act compute = act "
    "only - floor; rest = total - env stepping - act compute "
    "(observe, the while_loop, numpy_function round trip; can be "
    "< 0 within noise)",
  }
  return rows, cfg


def plot(rows, envs):
  """Bars of env steps/s (median, min-max whiskers) per variant, grouped by
  env and update setting; log scale."""
  plt = common.pyplot()
  stats = {r.case: r.stat for r in rows if r.unit == "env steps/s"}
  groups = [(e, s) for e in envs for s in SETTINGS]
  variants = (
    ("in_graph", "in-graph train()", "#4C72B0"),
    (GROUPED, f"in-graph train(), env_groups={ENV_GROUPS}", "#55A868"),
    ("python", "Python loop", "#DD8452"),
    ("raw", "raw env.step (ceiling)", "#8C8C8C"),
  )
  fig, ax = plt.subplots(figsize=(10, 4.5))
  width = 0.2
  for j, (v, label, color) in enumerate(variants):
    xs, meds, lo, hi = [], [], [], []
    for i, (e, s) in enumerate(groups):
      st = stats[f"{e}/raw"] if v == "raw" else stats[f"{e}/updates_{s}/{v}"]
      xs.append(i + (j - 1.5) * width)
      meds.append(st.median)
      lo.append(st.median - st.min)
      hi.append(st.max - st.median)
    ax.bar(xs, meds, width, color=color, label=label, yerr=[lo, hi], capsize=3)
    for x, m in zip(xs, meds):
      ax.text(
        x,
        m * 1.08,
        f"{m:,.0f}",
        ha="center",
        va="bottom",
        fontsize=7,
        rotation=90,
      )
  ax.set_yscale("log")
  ax.set_xticks(range(len(groups)), [f"{e}\nupdates {s}" for e, s in groups])
  ax.set_ylabel("env steps/s (median, min-max)")
  ax.set_title(
    f"DQN loop throughput, {NUM_ENVS} envs (Pong: x4 for frames/s)", fontsize=10
  )
  ax.margins(y=0.25)
  ax.legend(fontsize=8, loc="upper right")
  return common.save_plot(fig, NAME)


if __name__ == "__main__":
  app.run(main)
