r"""PPO end to end against a CleanRL-style PyTorch PPO, and one-call
updates against Python-driven ones.

Cases (each interleaved within every repetition, rotating which goes first):

1. pong: 8 envs, CleanRL's `ppo_atari` settings (128 steps, 4 epochs x 4
   minibatches of 256, Nature CNN, lr 2.5e-4 annealed, clip 0.1, ent 0.01).
   Ours: the PPO agent (`flagfiles/ppo_pong.cfg`'s settings) with its
   in-graph rollout (one graph call per rollout) and one-call update, on
   ale-py's C++ vector env. The peer: `benchmarks.cleanrl_style_ppo`
   (gymnasium `PongNoFrameskip-v4` with CleanRL's Python wrappers in a
   `SyncVectorEnv`, a Python loop, one optimizer step per minibatch).
   Metric: env frames/s (4 x env steps/s; frameskip 4) over whole
   iterations (rollout + update). Each side's CPU is split into update,
   act and env (see `config.cpu_shares`).
2. halfcheetah: HalfCheetah-v5, 1 env, CleanRL's `ppo_continuous_action`
   settings (2048 steps, 10 epochs x 32 minibatches of 64, 64x64 tanh
   MLPs, state-independent log std, observation and reward normalization).
   Metric: env steps/s over whole iterations.
3. update: the update alone on a fixed batch from a real rollout, as ONE
   graph call (`update`: epochs x minibatches in a graph loop) against the
   same update driven from Python, one `tf.function` call per minibatch
   (the shuffle in NumPy, as CleanRL does). HalfCheetah (10 x 32 of 64) is
   the target; Pong (4 x 4 of 256) is recorded beside it.

    python -m benchmarks.ppo_throughput            # every case, one process
    python -m benchmarks.ppo_throughput --quick    # smoke run, < 60 s

TF's intra-op threads and oneDNN kernels are fixed per process; to run
each case with its preset's (ppo_pong.cfg: --onednn
--intra_op_threads=0), as the committed JSON was:

    TF_ENABLE_ONEDNN_OPTS=1 python -m benchmarks.ppo_throughput \
        --cases=pong,update --intra_op_threads=0
    python -m benchmarks.ppo_throughput --cases=halfcheetah,update,trpo \
        --merge

Writes benchmarks/results/ppo_throughput.json (and ppo_throughput.png
without --quick).
"""

import os
import time

import numpy as np
from absl import app, flags

from benchmarks import common  # Sets OMP_WAIT_POLICY before TF loads.
from benchmarks.numpy_gae import numpy_gae

NAME = "ppo_throughput"
CASES = ("pong", "halfcheetah", "update", "trpo")

_QUICK = flags.DEFINE_bool(
  "quick", False, "Smoke run (< 60 s): HalfCheetah and its update only."
)
_REPS = flags.DEFINE_integer(
  "reps", None, "Timed repetitions (default 5; 1 with --quick)."
)
_CASES = flags.DEFINE_list(
  "cases", None, f"Cases to run (default {','.join(CASES)})."
)
_TORCH_THREADS = flags.DEFINE_integer(
  "torch_threads",
  None,
  "The peer's torch threads (default: torch's own default, one per core, "
  "as a CleanRL user runs it).",
)
_THREADS = common.define_intra_op_threads_flag()
_MERGE = flags.DEFINE_bool(
  "merge",
  False,
  "Keep the stored results of the cases not run now (TF's threads and "
  "oneDNN are process-wide: the Pong preset's run with "
  "TF_ENABLE_ONEDNN_OPTS=1 --intra_op_threads=0, the rest with the "
  "defaults).",
)

SEED = 1
TARGETS = {
  "pong_env_frames_per_s_over_cleanrl_style_torch": 1.5,
  "halfcheetah_steps_per_s_over_cleanrl_style_torch": 2.0,
  "update_one_call_over_python_minibatch_loop": 1.5,
  "trpo_update_one_call_over_python_cg_loop": 2.0,
}
PARTS = ("update", "act", "env")
FRAMESKIP = 4  # Pong: env frames per env step (both sides).

# The runs (ours and the peer share them): CleanRL's settings.
PONG = dict(
  env="pong",
  peer_args="ATARI",
  iterations=2,  # Per rep: 2 x 8 x 128 = 2,048 env steps.
)
HALFCHEETAH = dict(env="halfcheetah", peer_args="CONTINUOUS", iterations=1)


def peer_args(name, quick):
  """The peer's CleanRL arguments (`--quick`: shorter HalfCheetah
  rollouts, a smoke run)."""
  import dataclasses

  from benchmarks import cleanrl_style_ppo

  args = getattr(cleanrl_style_ppo, name)
  if quick and name == "CONTINUOUS":
    args = dataclasses.replace(args, num_steps=256, num_minibatches=4)
  return args


def our_config(args, env):
  """Our `PPOConfig` with the peer's CleanRL arguments."""
  from ingraph_rl.agents.ppo import PPOConfig

  atari = "NoFrameskip" in args.env_id
  space = env.action_space
  return PPOConfig(
    num_actions=space.num_categories if atari else None,
    action_dim=None if atari else int(np.prod(space.shape)),
    torso="nature" if atari else "mlp",
    shared_torso=atari,
    num_steps=args.num_steps,
    learning_rate=args.learning_rate,
    anneal_lr=args.anneal_lr,
    num_updates=args.num_iterations,
    gamma=args.gamma,
    gae_lambda=args.gae_lambda,
    num_minibatches=args.num_minibatches,
    update_epochs=args.update_epochs,
    norm_adv=args.norm_adv,
    clip_coef=args.clip_coef,
    clip_vloss=args.clip_vloss,
    ent_coef=args.ent_coef,
    vf_coef=args.vf_coef,
    max_grad_norm=args.max_grad_norm,
    target_kl=args.target_kl,
    normalize_observations=not atari,
    normalize_rewards=not atari,
    seed=SEED,
  )


def our_env(args, raw=False):
  """Our env for the peer's: ale-py's C++ vector env with CleanRL's Atari
  semantics (no-op reset, frameskip 4 with max-pool, episodic life, FIRE
  reset, clipped rewards, 84x84 gray, stack 4), or the gymnasium env.
  `raw`: the lone env stepped for the CPU split (ale-py's threads pinned,
  as every raw ceiling here)."""
  from ingraph_rl.environments import make_vector_env

  if "NoFrameskip" in args.env_id:
    kwargs = common.raw_env_kwargs("atari:pong") if raw else {}
    return make_vector_env(
      "atari:pong",
      args.num_envs,
      SEED,
      episodic_life=True,
      reward_clipping=True,
      **kwargs,
    )
  return make_vector_env(args.env_id, args.num_envs, SEED)


class Ours:
  """The PPO agent: `rollout` (one graph call: num_steps acts and env
  steps in a tf.while_loop) and `update` (one graph call: GAE, then
  epochs x minibatches) per iteration."""

  def __init__(self, args):
    from ingraph_rl.agents.ppo import PPOBuilder

    self.args = args
    self.env = our_env(args)
    self.config = our_config(args, self.env)
    start = time.perf_counter()
    self.executor = PPOBuilder(self.config).make_agent(env=self.env).build()
    self.build_s = time.perf_counter() - start
    self.executor.execute("reset_env", SEED)
    self.batch = None

  def run(self, iterations):
    cpu = dict.fromkeys(("rollout", "update"), 0.0)
    for _ in range(iterations):
      c0 = time.process_time()
      out = self.executor.execute("rollout")
      out["stats"]["env_steps"].numpy()
      c1 = time.process_time()
      stats = self.executor.execute("update", out["batch"])
      stats["policy_loss"].numpy()
      cpu["rollout"] += c1 - c0
      cpu["update"] += time.process_time() - c1
      self.batch = out["batch"]
    return {
      "env_steps": iterations * self.args.batch_size,
      "cpu_rollout_s": cpu["rollout"],
      "cpu_update_s": cpu["update"],
    }


class Peer:
  """`benchmarks.cleanrl_style_ppo.PPO`, whole iterations."""

  def __init__(self, args):
    from benchmarks import cleanrl_style_ppo

    self.args = args
    self.ppo = cleanrl_style_ppo.PPO(args, seed=SEED)

  def run(self, iterations):
    cpu = dict.fromkeys(PARTS, 0.0)
    for _ in range(iterations):
      parts = self.ppo.iteration()["cpu"]
      for k in PARTS:
        cpu[k] += parts[k]
    out = {"env_steps": iterations * self.args.batch_size}
    out.update({f"cpu_{k}_s": v for k, v in cpu.items()})
    return out


class RawEnv:
  """Our env stepped alone with uniformly random actions: the env's CPU
  share inside our rollout."""

  def __init__(self, args):
    self.args = args
    self.env = our_env(args, raw=True)
    self.env.reset(SEED)
    self.rng = np.random.default_rng(SEED)
    space = self.env.action_space
    self.n = getattr(space, "num_categories", None)
    self.shape = (self.env.num_envs,) + tuple(getattr(space, "shape", ()))

  def run(self, iterations):
    n = self.env.num_envs
    for _ in range(iterations * self.args.num_steps):
      if self.n is not None:
        actions = self.rng.integers(0, self.n, n, dtype=np.int64)
      else:
        actions = self.rng.uniform(-1, 1, self.shape).astype(np.float32)
      self.env.step(actions)
    return {"env_steps": iterations * self.args.batch_size}


# --- the update alone ------------------------------------------------------


class PythonMinibatchLoop:
  """The same update driven from Python: GAE in NumPy, then for each epoch
  a NumPy shuffle and one call of the agent's `minibatch_step` tf.function
  per minibatch (what TensorForce's "before" and CleanRL's loop do)."""

  def __init__(self, ours):
    self.config = ours.config
    self.step = ours.executor.function("minibatch_step")
    self.rng = np.random.default_rng(SEED)

  def run(self, batch):
    c = self.config
    adv, ret = numpy_gae(
      batch["rewards"],
      batch["values"],
      batch["dones"],
      batch["bootstrap_value"],
      c.gamma,
      c.gae_lambda,
    )
    fields = [
      batch["observations"],
      batch["actions"],
      batch["log_probs"],
      batch["values"],
      adv,
      ret,
    ]
    flat = [x.reshape((-1,) + x.shape[2:]) for x in fields]
    size = flat[0].shape[0]
    mb = size // c.num_minibatches
    for _ in range(c.update_epochs):
      perm = self.rng.permutation(size)
      for m in range(c.num_minibatches):
        idx = perm[m * mb : (m + 1) * mb]
        out = self.step(*[x[idx] for x in flat])
    out["policy_loss"].numpy()
    return {"minibatch_steps": c.update_epochs * c.num_minibatches}


def update_pair(ours, reps):
  """(one call, Python loop) records on the same fixed batch (the last
  rollout's), interleaved."""
  batch_tf = ours.batch
  batch_np = {k: v.numpy() for k, v in batch_tf.items()}
  loop = PythonMinibatchLoop(ours)
  c = ours.config

  def one_call():
    ours.executor.execute("update", batch_tf)["policy_loss"].numpy()
    return {"minibatch_steps": c.update_epochs * c.num_minibatches}

  return common.interleave(
    {"one_call": one_call, "python_minibatch_loop": lambda: loop.run(batch_np)},
    reps,
  )


# --- the run -----------------------------------------------------------------

SIDES = ("ours", "cleanrl_style_torch")


def run_case(spec, quick, reps):
  """Interleaved reps of ours, the peer and our env alone; returns (ours,
  records, build seconds)."""
  args = peer_args(spec["peer_args"], quick)
  ours, peer, raw = Ours(args), Peer(args), RawEnv(args)
  iterations = 1 if quick else spec["iterations"]
  records = common.interleave(
    {
      "ours": lambda: ours.run(iterations),
      "cleanrl_style_torch": lambda: peer.run(iterations),
      "raw_env": lambda: raw.run(iterations),
    },
    reps,
  )
  peer.ppo.close()
  raw.env.close()
  return ours, records, iterations


def cpu_parts(records):
  """Per side, per rep: CPU seconds per env step of update, act and env.
  Ours: update = the update call; env = our env stepped alone for the same
  steps in the same rep (raw_env); act = the rollout call minus that
  (the policy, the in-graph normalization and the loop)."""
  out = {side: {k: [] for k in PARTS} for side in SIDES}
  for o, p, r in zip(
    records["ours"], records["cleanrl_style_torch"], records["raw_env"]
  ):
    steps = o["env_steps"]
    env = r["cpu_s"]
    parts = {
      "update": o["cpu_update_s"],
      "act": max(o["cpu_rollout_s"] - env, 0.0),
      "env": env,
    }
    for k in PARTS:
      out["ours"][k].append(parts[k] / steps)
      out["cleanrl_style_torch"][k].append(p[f"cpu_{k}_s"] / steps)
  return out


def throughput_rows(name, records, frameskip):
  rows, ratios = [], {}
  sps = {
    v: [r["env_steps"] / r["wall_s"] for r in records[v]]
    for v in (*SIDES, "raw_env")
  }
  for v, values in sps.items():
    stat = common.Stat.of(values)
    rows.append(common.Row(f"{name}/{v}", "throughput", "env steps/s", stat))
    if frameskip > 1:
      rows.append(
        common.Row(
          f"{name}/{v}", "throughput", "env frames/s", stat.scaled(frameskip)
        )
      )
  unit = "env_frames_per_s" if frameskip > 1 else "steps_per_s"
  ratios[f"{name}_{unit}_over_cleanrl_style_torch"] = common.paired_ratio(
    sps["ours"], sps["cleanrl_style_torch"]
  )
  cpu = {v: [r["cpu_s"] / r["env_steps"] for r in records[v]] for v in SIDES}
  ratios[f"{name}_cpu_per_env_step_cleanrl_style_torch_over_ours"] = (
    common.paired_ratio(cpu["cleanrl_style_torch"], cpu["ours"])
  )
  parts = cpu_parts(records)
  shares = {}
  for side in SIDES:
    for k in PARTS:
      stat = common.Stat.of(parts[side][k]).scaled(1e3)
      rows.append(
        common.Row(f"{name}/{side}/cpu_{k}", "cpu", "ms/env step", stat)
      )
    med = {k: common.Stat.of(parts[side][k]).median for k in PARTS}
    total = sum(med.values())
    shares[side] = {k: round(med[k] / total, 3) for k in PARTS}
  return rows, ratios, shares


def update_rows(name, records):
  wall = {v: common.column(records[v], "wall_s") for v in records}
  rows = [
    common.Row(
      f"update/{name}/{v}", "update", "ms", common.Stat.of(w).scaled(1e3)
    )
    for v, w in wall.items()
  ]
  key = "update_one_call_over_python_minibatch_loop"
  if name != "halfcheetah":
    key = f"{name}_{key}"
  return rows, {
    key: common.paired_ratio(wall["python_minibatch_loop"], wall["one_call"])
  }


def trpo_case(reps):
  """TRPO's update on Hopper-v5 (1 env x 2048 steps, CleanRL's continuous
  settings for the shared fields; TRPOConfig's defaults: max_kl 0.01, 10
  CG iterations, damping 0.1, 10 line-search halvings, value 5 epochs x
  32 minibatches) as one graph call, against `PythonLoopTRPO` on the same
  batch. Returns (rows, ratios, config)."""
  from benchmarks.trpo_python_loop import PythonLoopTRPO
  from ingraph_rl.agents.ppo.trpo_builder import TRPOBuilder
  from ingraph_rl.agents.ppo.trpo_config import TRPOConfig
  from ingraph_rl.environments import make_vector_env

  env = make_vector_env("Hopper-v5", 1, SEED)
  config = TRPOConfig(
    action_dim=int(np.prod(env.action_space.shape)),
    num_steps=2048,
    num_minibatches=32,
    normalize_observations=True,
    normalize_rewards=True,
    seed=SEED,
  )
  executor = TRPOBuilder(config).make_agent(env=env).build()
  executor.execute("reset_env", SEED)
  batch = executor.execute("rollout")["batch"]
  batch_np = {k: v.numpy() for k, v in batch.items()}
  loop = PythonLoopTRPO(config, env.observation_space, seed=SEED)
  calls = []

  def one_call():
    executor.execute("update", batch)["policy_loss"].numpy()

  def python_loop():
    calls.append(loop.update(batch_np)["graph_calls"])

  records = common.interleave(
    {"one_call": one_call, "python_cg_loop": python_loop}, reps
  )
  env.close()
  wall = {v: common.column(r, "wall_s") for v, r in records.items()}
  rows = [
    common.Row(
      f"trpo/hopper/{v}", "update", "ms", common.Stat.of(w).scaled(1e3)
    )
    for v, w in wall.items()
  ]
  ratios = {
    "trpo_update_one_call_over_python_cg_loop": common.paired_ratio(
      wall["python_cg_loop"], wall["one_call"]
    )
  }
  config_out = {
    "env": "Hopper-v5, 1 env x 2048 steps (one rollout's batch, fixed)",
    "trpo": f"max_kl {config.max_kl}, {config.cg_iterations} CG iterations, "
    f"damping {config.cg_damping}, {config.line_search_steps} halvings at "
    f"accept ratio {config.accept_ratio}; value {config.value_epochs} "
    f"epochs x {config.num_minibatches} minibatches (Adam)",
    "python_cg_loop graph calls per update (seen)": sorted(set(calls)),
  }
  return rows, ratios, config_out


def main(argv):
  del argv
  import torch

  quick = _QUICK.value
  reps = _REPS.value or (1 if quick else 5)
  cases = _CASES.value or (["halfcheetah", "update"] if quick else list(CASES))
  unknown = sorted(set(cases) - set(CASES))
  if unknown:
    raise app.UsageError(f"--cases: unknown {unknown}; known: {CASES}")
  threads = common.experiment_threads(_THREADS.value)
  if _TORCH_THREADS.value:
    torch.set_num_threads(_TORCH_THREADS.value)
  threads = dict(threads, torch_threads=torch.get_num_threads())

  rows, ratios, config_cases = [], {}, {}
  agents = {}
  load_start = os.getloadavg()
  specs = {"pong": PONG, "halfcheetah": HALFCHEETAH}
  envs = [c for c in ("halfcheetah", "pong") if c in cases]
  if quick and "update" in cases and not envs:
    envs = ["halfcheetah"]
  for name in envs:
    spec = specs[name]
    if name not in cases:  # Only its agent, for the update case.
      args = peer_args(spec["peer_args"], quick)
      agents[name] = Ours(args)
      agents[name].run(1)
      continue
    ours, records, iterations = run_case(spec, quick, reps)
    agents[name] = ours
    frameskip = FRAMESKIP if name == "pong" else 1
    r, q, shares = throughput_rows(name, records, frameskip)
    rows += r
    ratios.update(q)
    config_cases[name] = {
      "env": {
        "ours": "make_vector_env('atari:pong', 8, episodic_life=True, "
        "reward_clipping=True): ale-py's C++ vector env (no-op reset 30, "
        "frameskip 4 max-pooled, episodic life, FIRE reset, clipped "
        "rewards, 84x84 gray, stack 4)"
        if name == "pong"
        else f"make_vector_env('{ours.args.env_id}', 1) (gymnasium); "
        "observation and reward normalization in the agent's graph",
        "cleanrl_style_torch": "gym.vector.SyncVectorEnv of gym.make("
        f"'{ours.args.env_id}') with CleanRL's wrappers",
      },
      "cleanrl_args": {
        k: getattr(ours.args, k)
        for k in (
          "num_envs",
          "num_steps",
          "update_epochs",
          "num_minibatches",
          "learning_rate",
          "clip_coef",
          "ent_coef",
        )
      },
      "env_steps_per_rep": iterations * ours.args.batch_size,
      "iterations_per_rep": iterations,
      "our_build_s": round(ours.build_s, 2),
      "cpu_shares (medians of per-rep CPU per env step)": shares,
      "threads": threads,
    }
  if "update" in cases:
    for name in envs:
      records = update_pair(agents[name], max(reps, 3) if not quick else 1)
      r, q = update_rows(name, records)
      rows += r
      ratios.update(q)
      c = agents[name].config
      config_cases[f"update/{name}"] = {
        "batch": f"{agents[name].args.batch_size} samples from one rollout",
        "epochs x minibatches": f"{c.update_epochs} x {c.num_minibatches} "
        f"of {c.minibatch_size(agents[name].env.num_envs)}",
        "threads": threads,
      }

  if "trpo" in cases:
    r, q, cfg = trpo_case(1 if quick else max(reps, 3))
    rows += r
    ratios.update(q)
    config_cases["trpo/hopper"] = dict(cfg, threads=threads)
  if _MERGE.value and not quick:
    rows, ratios, config_cases = common.merge_stored(
      NAME, rows, ratios, config_cases
    )

  config = {
    "reps": reps,
    "warmup_reps": 1,
    "seed": SEED,
    "cases": config_cases,
    "variants": {
      "ours": "PPOBuilder(PPOConfig(<CleanRL's settings>)).make_agent("
      "env=env).build(); per iteration execute('rollout') then "
      "execute('update', batch): two graph calls",
      "cleanrl_style_torch": "benchmarks/cleanrl_style_ppo.py: CleanRL's "
      "ppo_atari.py / ppo_continuous_action.py step for step (Python "
      "loop, one Adam step per minibatch)",
      "raw_env": "our env alone, uniformly random actions, the same env "
      "steps (the env's CPU share on our side)",
      "update one_call": "execute('update', batch) on a fixed batch",
      "update python_minibatch_loop": "the same update from Python: GAE in "
      "NumPy, NumPy shuffles, one call of the agent's minibatch_step "
      "tf.function per minibatch",
      "trpo one_call": "TRPOBuilder(...).make_agent(env=env): "
      "execute('update', batch) on a fixed batch",
      "trpo python_cg_loop": "benchmarks/trpo_python_loop.PythonLoopTRPO: "
      "GAE in NumPy, the gradient, each CG Fisher-vector product, each "
      "line-search trial and each value minibatch one graph call, the "
      "vector algebra in NumPy",
    },
    "cpu_split": "CPU = process time (all threads) per env step. Peer: "
    "timed around its act (policy forward and storage), env (envs.step "
    "and conversions) and update (GAE and the epochs). Ours: update = "
    "the update call; env = raw_env's CPU for the same steps in the same "
    "rep; act = rollout call - env (policy, in-graph normalization, the "
    "loop, the numpy_function round trips)",
    "interleaving": "the variants of a case alternate within each rep, "
    "rotating which goes first; gc.collect() before each",
    "ratios": "median over reps of per-rep paired ratios",
    "threads": "per case (config.cases.*.threads): TF's intra-op "
    "threads and oneDNN are process-wide, so a case run with other "
    "settings comes from its own invocation (--merge)",
    "machine_load": {
      "note": "wall ratios pair within a rep; the CPU ratios are less "
      "sensitive to other load on the cores",
      "loadavg_1_5_15_min_at_start": [round(x, 2) for x in load_start],
      "loadavg_1_5_15_min_at_end": [round(x, 2) for x in os.getloadavg()],
    },
    "targets (reported, not asserted)": {
      k: f">= {v:g}" for k, v in TARGETS.items()
    },
  }
  path = common.write_results(NAME, quick, config, rows, ratios)
  if not quick:
    print(f"wrote {plot(rows, ratios)}")
  parts = []
  for key, target in TARGETS.items():
    if key in ratios:
      ok = "met" if ratios[key] >= target else "MISSED"
      parts.append(f"{key} {ratios[key]:.2f} (target >= {target:g} {ok})")
  summary = f"{NAME}{' [quick]' if quick else ''}: " + "; ".join(parts)
  common.print_table(NAME, rows, ratios, summary, quick=quick, path=path)


def plot(rows, ratios):
  """Left: env steps/s of each side per case; right: CPU ms per env step,
  stacked update / act / env, per side and case."""
  plt = common.pyplot()
  stats = {(r.case, r.metric, r.unit): r.stat for r in rows}
  names = [
    n
    for n in ("pong", "halfcheetah")
    if (f"{n}/ours", "throughput", "env steps/s") in stats
  ]
  fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
  ax = axes[0]
  colors = {"ours": "#4C72B0", "cleanrl_style_torch": "#DD8452"}
  for j, side in enumerate(SIDES):
    xs = [i + (j - 0.5) * 0.35 for i in range(len(names))]
    st = [stats[(f"{n}/{side}", "throughput", "env steps/s")] for n in names]
    ax.bar(
      xs,
      [s.median for s in st],
      0.35,
      yerr=[[s.median - s.min for s in st], [s.max - s.median for s in st]],
      color=colors[side],
      label=side,
      capsize=3,
    )
  ax.set_xticks(range(len(names)), names)
  ax.set_ylabel("env steps/s (median, min-max)")
  ax.set_title("PPO end to end, CleanRL's settings", fontsize=10)
  ax.legend(fontsize=8)
  ax = axes[1]
  shades = {"update": 1.0, "act": 0.65, "env": 0.35}
  labels, x = [], 0
  for n in names:
    for side in SIDES:
      bottom = 0.0
      for k in PARTS:
        v = stats[(f"{n}/{side}/cpu_{k}", "cpu", "ms/env step")].median
        ax.bar(
          x,
          v,
          0.6,
          bottom=bottom,
          color=colors[side],
          alpha=shades[k],
          label=k if x == 0 else None,
          edgecolor="black",
          linewidth=0.4,
        )
        bottom += v
      labels.append(f"{n}\n{side}")
      x += 1
  ax.set_xticks(range(len(labels)), labels, fontsize=7)
  ax.set_ylabel("CPU ms per env step (update / act / env)")
  ax.set_title("Where the CPU goes", fontsize=10)
  ax.legend(fontsize=8)
  return common.save_plot(fig, NAME)


if __name__ == "__main__":
  app.run(main)
