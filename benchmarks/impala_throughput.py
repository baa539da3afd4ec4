r"""Environment throughput of IMPALA on one machine (`ActorLearnerDriver`: actor
threads and a learner thread in one process) against raw environment
stepping.

Per environment, one driver is built for every configuration (mode, number
of actors N, variant), then the phases of ALL of them are interleaved
within every repetition (rotating which goes first), so configurations are
compared at the same times:

1. raw: the N actors' envs again (N more `make_actor_env` calls, the same
   as the actors': same class, envs per actor, action repeats, subprocesses
   or not) stepped with uniform random actions, no TF: by N threads
   (`raw_threads`) and, for N > 1 with gymnasium envs in this process
   (`--raw_serial`), also by one thread stepping them in turn
   (`raw_serial`: Python envs hold the GIL, and N threads convoy on it).
   The ceiling (`raw`) is the faster of the two in each repetition.
2. actors_only: the N actor threads run; a drain thread dequeues their
   rollouts (`dequeue_many(batch_size)` of a separate `FIFOQueue` executor
   with the driver's `queue_name` and the builder's record space), no
   learning.
3. end_to_end: the N actor threads run and a learner thread calls
   `driver.update()` (dequeue, V-trace, RMSProp, publish weights; actors
   load the newest weights before each unroll).

Between phases nothing consumes the queue, so it fills and the actors block
on their enqueue (the process then uses no CPU): the next phase starts from
idle cores. Each phase runs `--warmup_s`, then counts for `--duration`.
Actor throughput is the env steps of the unrolls that finished in the
window over the time from the first to the last of them (a window never
counts half an unroll); end_to_end_trained is what the learner consumed.

One more phase per environment is the learner alone: a learner on its own
queue is fed synthetic rollouts (untimed), then `--learner_updates` updates
are timed back to back (frames consumed/s).

Cheap wins: `--variants` (e.g. envs_per_actor=32, ale_num_threads=1,
unroll_length=50) run on the first environment with `--variant_actors`
(not with --quick unless `--variants` is given). Two of them are agent
features, every phase run as for the base config:

- env_groups=2 (`IMPALAConfig.env_groups`): each actor's envs are built
  as 2 groups (`make_actor_env(..., env_groups=2)`), which the actor
  double-buffers (one group's env step runs while the policy acts on the
  other's observations). The raw phase steps the same envs ungrouped.
- batched_inference=1 (`IMPALAConfig.batched_inference`): the driver's
  inference thread (started with the actors by `driver.start()`, alive in
  every phase) runs ONE policy call per env step for all actors. In
  actors_only it serves while the drain thread consumes; between phases
  it waits on the actors' requests (no CPU). The profile's act-only
  forward is then the inference server's `act` on `envs_per_actor`
  observations.

Their cases are `<env>/<mode>_groups2/actors_<N>/<phase>` and
`<env>/<mode>_batched1/actors_<N>/<phase>`, their ratios
`<env>_<mode>_groups2_actors_<N>_<phase>_over_raw` and the like, as for
every variant.

Units: one env step = one environment advancing one agent step; one frame
= one emulator / simulator frame, so frames = env steps x action repeats
(Pong: frameskip 4; DM Lab: 4 repeats; gymnasium: 1). Both are reported.

For gymnasium ids, every configuration runs with the envs in this process
(`processes=False`: gymnasium's SyncVectorEnv, stepped under the GIL) and
in subprocesses (`processes=True`: AsyncVectorEnv); `--processes` picks.

For the first environment and every atari one, the actors-only phase also
records where actor time goes: seconds inside `env.step` (the env's code
behind the in-graph `numpy_function`) against the rest (policy inference,
the while_loop, the enqueue, waiting for the GIL), and one policy forward on
`envs_per_actor` observations timed with every actor blocked.

    python -m benchmarks.impala_throughput            # the measurement
    python -m benchmarks.impala_throughput --quick    # smoke run, ~25 s
    python -m benchmarks.impala_throughput --quick \
      --variants=env_groups=2,batched_inference=1   # the variants, short
    python -m benchmarks.impala_throughput --env=dmlab:seekavoid_arena_01

DM Lab ids step in env worker processes (one per env, `WorkerVectorEnv`),
the raw phase too (the same N x envs_per_actor workers, stepped by N
threads with random actions). By default (`--dmlab_fake`) the workers run
the fake `deepmind_lab` (ingraph_rl.testing.fake_deepmind_lab, importable
as `deepmind_lab` through a shim on their PYTHONPATH), which spends 0.34
ms of CPU per 96x72 frame (~1.4 ms per agent step of 4 repeats),
calibrated to the real module's raw rate in this layout (issue 39). The
env workers, raw phase included, run with LP_NUM_THREADS=0 unless it is
set (`WorkerVectorEnv`: real DM Lab's llvmpipe rasterizes on the calling
thread). `ratios.dmlab_fake_actors_only_over_raw` is the best actors-only
rate over the best raw rate (target >= 0.7);
`dmlab_fake_actors_only_over_raw_actors_<N>_envs_<E>` the paired ratio of
N actors x E envs (the real module's, measured on this machine with
--nodmlab_fake at 2 x 2: 0.63, 0.62 with LP_NUM_THREADS=0), and
`dmlab_fake_cpu_actors_only_over_raw_actors_<N>_envs_<E>` the same from
the CPU a step costs (this process and its env workers, /proc): what a
2-core machine that nothing else uses would show, also when other work
shares this one (then the wall-clock ratio is not the machine's).

TF's intra-op threads are what experiments/impala.py takes in one process
(one: actor threads, env stepping and the learner already share the
cores; experiments/configs.py) unless `--intra_op_threads` says otherwise
(0: TF's default, one per core, as runs before 2026-11-29 had).

Writes benchmarks/results/impala_throughput.json (and .png without --quick).
"""

import dataclasses
import functools
import gc
import re
import tempfile
import time

import numpy as np
from absl import app, flags

from benchmarks import (
  common,  # Sets OMP_WAIT_POLICY before TF loads.
  impala_harness,
)
from benchmarks.impala_harness import (
  Harness,
  LearnerOnly,
)
from ingraph_rl.runners.environments import (
  env_kind,
  num_action_repeats_for,
)
from ingraph_rl.testing.deepmind_lab_shim import (
  use_fake_deepmind_lab,
)

NAME = "impala_throughput"

_QUICK = flags.DEFINE_bool(
  "quick", False, "Smoke run: CartPole only, 2 actors, short phases."
)
_ENV = flags.DEFINE_list(
  "env",
  None,
  "Env ids (make_actor_env: gymnasium ids, ALE/<Game>-v5, "
  "atari:<game>, dmlab:<level>). Default ALE/Pong-v5,CartPole-v1 "
  "(CartPole-v1 with --quick).",
)
_NUM_ACTORS = flags.DEFINE_list(
  "num_actors",
  None,
  "Numbers of actor threads (default 1,2,4; 2 with --quick).",
)
_ENVS_PER_ACTOR = flags.DEFINE_integer(
  "envs_per_actor", 8, "Envs each actor (and each raw thread) steps."
)
_UNROLL_LENGTH = flags.DEFINE_integer(
  "unroll_length", 20, "Env steps per rollout (T)."
)
_BATCH_SIZE = flags.DEFINE_integer(
  "batch_size", 8, "Rollouts per learner batch."
)
_QUEUE_CAPACITY = flags.DEFINE_integer(
  "queue_capacity", 64, "Rollouts the queue holds."
)
_NUM_ACTION_REPEATS = flags.DEFINE_integer(
  "num_action_repeats",
  None,
  "Frames per env step (default: the env's, 4 "
  "for atari and dmlab, 1 for gymnasium).",
)
_PROCESSES = flags.DEFINE_list(
  "processes",
  None,
  "For gymnasium ids: env modes to run, of 'false' "
  "(SyncVectorEnv in this process) and 'true' (AsyncVectorEnv "
  "subprocesses). Default false,true. Ignored for atari/dmlab ids.",
)
_ALE_NUM_THREADS = flags.DEFINE_integer(
  "ale_num_threads",
  0,
  "ale-py vector env `num_threads` per actor env "
  "(0: ale-py's default). Only for atari ids.",
)
_DURATION = flags.DEFINE_float(
  "duration", None, "Seconds counted per phase (default 2; 0.5 with --quick)."
)
_WARMUP_S = flags.DEFINE_float(
  "warmup_s",
  None,
  "Seconds each phase runs before counting (default 0.7; 0.3 with --quick).",
)
_REPS = flags.DEFINE_integer(
  "reps", None, "Repetitions (default 3; 1 with --quick)."
)
_LEARNER_UPDATES = flags.DEFINE_integer(
  "learner_updates",
  None,
  "Updates timed per learner-only repetition (default 8; 2 with --quick).",
)
_VARIANTS = flags.DEFINE_list(
  "variants",
  [
    "envs_per_actor=16",
    "envs_per_actor=32",
    "envs_per_actor=32+batch_size=32",
    "ale_num_threads=1",
    "unroll_length=50",
    "env_groups=2",
    "batched_inference=1",
  ],
  "Configs to try beside the base one, on the first env only (with "
  "--quick only if given): each 'flag=value' or several joined by '+', "
  "of envs_per_actor, unroll_length, batch_size, queue_capacity, "
  "ale_num_threads, env_groups, batched_inference (0 or 1) ('' for "
  "none).",
)
_VARIANT_ACTORS = flags.DEFINE_list(
  "variant_actors", ["2"], "Numbers of actors the variants run with."
)
_RAW_SERIAL = flags.DEFINE_enum(
  "raw_serial",
  "auto",
  ["auto", "always", "never"],
  "Also time one thread stepping the N raw envs in turn (for N > 1) and "
  "take the faster as the ceiling. auto: only for gymnasium envs in this "
  "process (Python stepping under the GIL, where N threads convoy); "
  "ale-py and subprocess envs step outside the GIL.",
)
_PROFILE = flags.DEFINE_bool(
  "profile", True, "Split actor time into env.step and the rest."
)
# As experiments/impala.py runs (one intra-op thread in a one-process run)
# unless given.
_THREADS = common.define_intra_op_threads_flag()
_DMLAB_FAKE = flags.DEFINE_bool(
  "dmlab_fake",
  True,
  "dmlab: ids step the fake deepmind_lab (~1.4 ms of "
  "CPU per 4-repeat step at 96x72), put on the env workers' PYTHONPATH "
  "under the real name; --nodmlab_fake uses an installed deepmind_lab.",
)

# Issue targets (reported, not asserted), for atari envs (Pong).
TARGETS = {"actors_only": 0.7, "end_to_end": 0.5}
TARGET_KINDS = ("atari",)
# DM Lab (the fake, in env workers): actors only against raw stepping.
DMLAB_TARGETS = {"actors_only": 0.7}
DMLAB_FAKE_NOTE = (
  "the FAKE deepmind_lab (ingraph_rl.testing.fake_deepmind_lab via a "
  "deepmind_lab.py shim on the env workers' PYTHONPATH), not DeepMind "
  "Lab: 0.34 ms of CPU per rendered 96x72 frame (calibrated to the real "
  "module's raw frames/s at 2 actors x 2 envs with LP_NUM_THREADS=0, "
  "issue 39), ~1.4 ms per 4-repeat step; one env worker process per env "
  "(WorkerVectorEnv, LP_NUM_THREADS=0 unless set), for the raw phase as "
  "for the actors"
)


def slug(env_id):
  """'atari:pong' -> 'atari_pong', 'CartPole-v1' -> 'cartpole_v1'."""
  return re.sub(r"[^a-z0-9]+", "_", env_id.lower()).strip("_")


def make_config(num_actions, obs_space, args):
  """The harness's IMPALAConfig, with the variant's `env_groups` and
  `batched_inference` (default 1 and off)."""
  return dataclasses.replace(
    impala_harness.make_config(num_actions, obs_space, args),
    env_groups=args.get("env_groups", 1),
    batched_inference=bool(args.get("batched_inference", 0)),
  )


def bench_env(env_id, configs, args, profile):
  """Builds the learner bench and one harness per config (mode, processes,
  N, overrides), interleaves ALL their phases `reps` times (a quiesced
  harness uses no CPU, so configs are compared at the same times), closes
  them. Returns {config key or "learner": {phase: records}}, info."""
  t = time.perf_counter()
  learner = LearnerOnly(env_id, args)
  harnesses = {}
  try:
    for key, (processes, n, overrides) in configs.items():
      harnesses[key] = Harness(
        env_id, n, processes, dict(args, **overrides), make_config
      )
    build_s = time.perf_counter() - t
    # The built graphs are ~0.5M Python objects: a full collection scans
    # them for ~0.5 s, stalling every thread mid-window. Frozen, they are
    # skipped (as a long-running trainer would do after building).
    gc.collect()
    gc.freeze()
    fns = {"learner/learner_only": learner.run}
    for key, h in harnesses.items():
      fns[f"{key}/raw_threads"] = h.raw
      if h.num_actors > 1 and serial_raw(env_id, h.processes, args):
        fns[f"{key}/raw_serial"] = functools.partial(h.raw, serial=True)
      fns[f"{key}/actors_only"] = h.actors_only
      fns[f"{key}/end_to_end"] = h.end_to_end
    flat = common.interleave(
      fns, reps=args["reps"], warmup=args["warmup_rounds"]
    )
    records = {}
    for name, recs in flat.items():
      key, phase = name.rsplit("/", 1)
      records.setdefault(key, {})[phase] = recs
    info = {
      "build_s (all configs)": round(build_s, 2),
      "learner_only": {
        "build_s": round(learner.build_s, 2),
        "updates_per_rep": learner.K,
        "queue_capacity": learner.queue_capacity,
      },
    }
    for key, h in harnesses.items():
      rec = records[key]
      # The ceiling: the faster way to step the same envs without TF.
      rec["raw"] = [
        max(rs, key=lambda r: r["env_steps_per_s"])
        for rs in zip(
          rec["raw_threads"], rec.get("raw_serial", rec["raw_threads"])
        )
      ]
      info[key] = {
        "build_s": round(h.build_s, 2),
        "drained_rollouts": h.drained,
        "learner_updates": len(h.updates),
      }
      if profile:
        info[key]["act_s"] = [h.act_only_seconds() for _ in range(3)]
  finally:
    learner.close()
    alive = [a for h in harnesses.values() for a in h.close()]
    gc.unfreeze()
  if alive:
    raise RuntimeError(f"threads still alive after stop: {alive}")
  return records, info


# Variant flag -> key in `args` (and the short tag in case names).
VARIANT_KEYS = {
  "envs_per_actor": ("E", "E"),
  "unroll_length": ("T", "T"),
  "batch_size": ("B", "B"),
  "queue_capacity": ("queue_capacity", "Q"),
  "ale_num_threads": ("ale_num_threads", "ale_threads"),
  "env_groups": ("env_groups", "groups"),
  "batched_inference": ("batched_inference", "batched"),
}
# Variant flags whose value is 0 or 1 (also 'false' / 'true').
BOOL_VARIANTS = ("batched_inference",)
VARIANT_KEYS_BY_ARG = {a: f for f, (a, _) in VARIANT_KEYS.items()}


def parse_variant(text):
  """'envs_per_actor=16+unroll_length=50' -> ('E16_T50', {'E': 16,
  'T': 50}); 'env_groups=2' -> ('groups2', {'env_groups': 2});
  'batched_inference=1' (or 'true') -> ('batched1',
  {'batched_inference': 1})."""
  tags, overrides = [], {}
  for part in text.split("+"):
    flag, _, value = part.partition("=")
    if flag in BOOL_VARIANTS:
      value = {"true": "1", "false": "0"}.get(value.lower(), value)
      if value not in ("0", "1"):
        raise app.UsageError(f"--variants: bad {part!r}; {flag} is 0 or 1")
    if flag not in VARIANT_KEYS or not value.isdigit():
      raise app.UsageError(
        f"--variants: bad {part!r}; use flag=int with "
        f"flag in {sorted(VARIANT_KEYS)}"
      )
    arg, tag = VARIANT_KEYS[flag]
    overrides[arg] = int(value)
    tags.append(f"{tag}{int(value)}")
  return "_".join(tags), overrides


def serial_raw(env_id, processes, args):
  if args["raw_serial"] != "auto":
    return args["raw_serial"] == "always"
  return env_kind(env_id) == "gymnasium" and not processes


def mode_name(env_id, processes):
  if env_kind(env_id) != "gymnasium":
    return "native"
  return "processes" if processes else "threads"


def main(argv):
  del argv
  quick = _QUICK.value
  envs = _ENV.value or (
    ["CartPole-v1"] if quick else ["ALE/Pong-v5", "CartPole-v1"]
  )
  actor_counts = [
    int(n) for n in (_NUM_ACTORS.value or (["2"] if quick else ["1", "2", "4"]))
  ]
  procs = [
    p.lower() in ("true", "1", "yes")
    for p in (_PROCESSES.value or ["false", "true"])
  ]
  args = {
    "E": _ENVS_PER_ACTOR.value,
    "T": _UNROLL_LENGTH.value,
    "B": _BATCH_SIZE.value,
    "queue_capacity": _QUEUE_CAPACITY.value,
    "ale_num_threads": _ALE_NUM_THREADS.value,
    "duration": _DURATION.value or (0.5 if quick else 2.0),
    "warmup_s": _WARMUP_S.value or (0.3 if quick else 0.7),
    "reps": _REPS.value or (1 if quick else 3),
    "warmup_rounds": 0,
    "raw_serial": _RAW_SERIAL.value,
    "learner_updates": _LEARNER_UPDATES.value or (2 if quick else 8),
    "repeats": {
      e: num_action_repeats_for(e, _NUM_ACTION_REPEATS.value) for e in envs
    },
  }
  variant_texts = _VARIANTS.value or []
  if env_kind(envs[0]) == "dmlab" and not flags.FLAGS["variants"].present:
    variant_texts = []  # Each would add N x E more env processes.
  run_variants = not quick or flags.FLAGS["variants"].present
  variants = [parse_variant(v) for v in variant_texts] if run_variants else []
  dmlab_fake = _DMLAB_FAKE.value and any(env_kind(e) == "dmlab" for e in envs)
  if dmlab_fake:
    # Env workers inherit this process's environment: they import the fake
    # as `deepmind_lab` (this process never imports it).
    shim_dir = tempfile.TemporaryDirectory(prefix="fake_deepmind_lab_")
    use_fake_deepmind_lab(directory=shim_dir.name)
  variant_actors = [int(n) for n in _VARIANT_ACTORS.value]
  threads = common.experiment_threads(_THREADS.value)
  rows, ratios, env_cfg, series = [], {}, {}, {}
  t_start = time.perf_counter()
  for k, env_id in enumerate(envs):
    s, kind, repeats = slug(env_id), env_kind(env_id), args["repeats"][env_id]
    modes = procs if kind == "gymnasium" else [False]
    cfg = env_cfg[s] = {
      "env": env_id,
      "kind": kind,
      "frames_per_env_step": repeats,
      "configs": {},
    }
    if kind == "dmlab":
      cfg["deepmind_lab"] = (
        DMLAB_FAKE_NOTE
        if dmlab_fake
        else "an installed deepmind_lab, in env worker processes"
      )
    profile = _PROFILE.value and (k == 0 or kind == "atari")
    configs = {
      f"{mode_name(env_id, p)}/actors_{n}": (p, n, {})
      for p in modes
      for n in actor_counts
    }
    if k == 0:  # Cheap wins: variants of the first env.
      for tag, overrides in variants:
        if "ale_num_threads" in overrides and kind != "atari":
          continue  # Would be the base config again.
        for n in variant_actors:
          configs[f"{mode_name(env_id, modes[0])}_{tag}/actors_{n}"] = (
            modes[0],
            n,
            overrides,
          )

    def add(case, stat, repeats=repeats):
      rows.append(
        common.Row(case, "throughput", "frames/s", stat.scaled(repeats))
      )
      rows.append(common.Row(case, "throughput", "env steps/s", stat))

    records, info = bench_env(env_id, configs, args, profile)
    lrec = records["learner"]["learner_only"]
    lstat = common.Stat.of(r["env_steps_per_s"] for r in lrec)
    add(f"{s}/learner_only", lstat)
    rows.append(
      common.Row(
        f"{s}/learner_only",
        "update",
        "ms",
        common.Stat.of(r["update_ms"] for r in lrec),
      )
    )
    cfg["learner_only"] = info["learner_only"]
    cfg["build_s (all configs)"] = info["build_s (all configs)"]
    for key, (_, n, overrides) in configs.items():
      mode = key.split("/")[0]
      rec = records[key]
      per = {}
      for phase in (
        "raw",
        "raw_threads",
        "raw_serial",
        "actors_only",
        "end_to_end",
      ):
        if phase in rec:
          per[phase] = common.column(rec[phase], "env_steps_per_s")
          add(f"{s}/{key}/{phase}", common.Stat.of(per[phase]))
      trained = common.column(rec["end_to_end"], "trained_env_steps_per_s")
      add(f"{s}/{key}/end_to_end_trained", common.Stat.of(trained))
      r = f"{s}_{mode}_actors_{n}"
      for phase in ("actors_only", "end_to_end"):
        ratios[f"{r}_{phase}_over_raw"] = common.paired_ratio(
          per[phase], per["raw"]
        )
      ratios[f"{r}_learner_only_over_raw"] = common.paired_ratio(
        common.column(lrec, "env_steps_per_s"), per["raw"]
      )
      if kind == "dmlab":
        # CPU (this process and the env workers) per env step: the ratio
        # a 2-core machine that nothing else uses would show, also when
        # other work shares this one.
        cpu = {
          p: common.Stat.of(common.column(rec[p], "cpu_s_per_env_step"))
          for p in ("raw", "actors_only")
        }
        for p, stat in cpu.items():
          rows.append(
            common.Row(
              f"{s}/{key}/{p}", "cpu per env step", "ms", stat.scaled(1e3)
            )
          )
        ratios[f"{r}_cpu_actors_only_over_raw"] = (
          cpu["raw"].median / cpu["actors_only"].median
        )
      series[(s, mode, n)] = {
        p: common.Stat.of(v)
        for p, v in dict(per, end_to_end_trained=trained).items()
      }
      E = overrides.get("E", args["E"])
      c = {
        "overrides": {VARIANT_KEYS_BY_ARG[a]: v for a, v in overrides.items()},
        "build_s": info[key]["build_s"],
        "drained_rollouts": info[key]["drained_rollouts"],
        "learner_updates_run": info[key]["learner_updates"],
        "total_envs": n * E,
        # Few events make a window's rate coarse: shown, not hidden.
        "min_unrolls_per_window": min(
          r["unrolls"] for p in ("actors_only", "end_to_end") for r in rec[p]
        ),
        "min_updates_per_window": min(r["updates"] for r in rec["end_to_end"]),
      }
      if profile:
        c["profile_actors_only"] = profile_of(rec, info[key], n, E)
      cfg["configs"][key] = c
      print(
        f"[{time.perf_counter() - t_start:6.0f} s] {s}/{key}: raw "
        f"{common.Stat.of(per['raw']).median * repeats:,.0f}  actors "
        f"{common.Stat.of(per['actors_only']).median * repeats:,.0f}  "
        f"e2e {common.Stat.of(per['end_to_end']).median * repeats:,.0f}"
        f" frames/s",
        flush=True,
      )
    for mode in dict.fromkeys(key.split("/")[0] for key in configs):
      # The machine's view: the best actor count against the best raw of
      # this env class (a variant's own raw may be a weaker ceiling).
      base = mode.split("_")[0]
      best_raw = max(
        st["raw"].median
        for (e, m, _), st in series.items()
        if e == s and m.split("_")[0] == base
      )
      for phase in ("actors_only", "end_to_end"):
        best = max(
          st[phase].median
          for (e, m, _), st in series.items()
          if e == s and m == mode
        )
        ratios[f"{s}_{mode}_best_{phase}_over_best_raw"] = best / best_raw
    if (
      kind == "dmlab"
      and dmlab_fake
      and "dmlab_fake_actors_only_over_raw" not in ratios
    ):
      ratios["dmlab_fake_actors_only_over_raw"] = ratios[
        f"{s}_native_best_actors_only_over_best_raw"
      ]
      for n in actor_counts:  # Per layout, as the real module was measured.
        layout = f"actors_{n}_envs_{args['E']}"
        ratios[f"dmlab_fake_actors_only_over_raw_{layout}"] = ratios[
          f"{s}_native_actors_{n}_actors_only_over_raw"
        ]
        ratios[f"dmlab_fake_cpu_actors_only_over_raw_{layout}"] = ratios[
          f"{s}_native_actors_{n}_cpu_actors_only_over_raw"
        ]
    if len(modes) == 2:
      faster = {}
      for n in actor_counts:
        for phase in ("raw", "actors_only", "end_to_end"):
          ratio = (
            series[(s, "processes", n)][phase].median
            / series[(s, "threads", n)][phase].median
          )
          ratios[f"{s}_processes_over_threads_actors_{n}_{phase}"] = ratio
          faster[f"actors_{n}/{phase}"] = (
            "processes" if ratio > 1 else "threads"
          )
      cfg["faster_env_mode (medians)"] = faster

  config = {
    "envs": env_cfg,
    "num_actors": actor_counts,
    "envs_per_actor": args["E"],
    "unroll_length": args["T"],
    "batch_size": args["B"],
    "queue_capacity": args["queue_capacity"],
    "torso": "IMPALAConfig(torso='small') (IMPALA's shallow conv torso) "
    "for image observations, the default MLP (64, 64 tanh) for "
    "vectors; feed-forward (no LSTM)",
    "ale_num_threads": args["ale_num_threads"] or "ale-py default",
    "env_groups": "1 (variants: env_groups)",
    "batched_inference": "off (variants: batched_inference)",
    "reps": args["reps"],
    "warmup_rounds": args["warmup_rounds"],
    "phase_warmup_s": args["warmup_s"],
    "phase_duration_s": args["duration"],
    "raw_serial_when": args["raw_serial"]
    + (
      " (gymnasium envs in this process only)"
      if args["raw_serial"] == "auto"
      else ""
    ),
    "variants (first env only)": {
      f"{tag}": {VARIANT_KEYS_BY_ARG[a]: v for a, v in o.items()}
      for tag, o in variants
    },
    "variant_actors": variant_actors,
    "learner_updates_per_rep": args["learner_updates"],
    "units": "env step = one env advancing one agent step; frames = env "
    "steps x frames_per_env_step (action repeats: Pong frameskip "
    "4, gymnasium 1)",
    "phases": {
      "raw_threads": "N threads, each stepping its own make_actor_env("
      "env, envs_per_actor, ...) (the actors' call) with "
      "uniform random actions, no TF",
      "raw_serial": "one thread stepping the same N envs in turn (N > "
      "1; see raw_serial_when)",
      "raw": "the ceiling: per rep, the faster of raw_threads and raw_serial",
      "actors_only": "ActorLearnerDriver actor threads; a drain thread "
      "dequeue_many(batch_size) from a FIFOQueue executor "
      "with the driver's queue_name; no learning",
      "end_to_end": "actor threads + a learner thread calling "
      "driver.update() (actors load new weights before "
      "each unroll); figure = actor env steps, "
      "end_to_end_trained = learner-consumed env steps",
      "learner_only": "IMPALALearner on its own queue filled with "
      "synthetic rollouts beforehand (untimed); "
      "updates timed back to back",
    },
    "how": "per (env, mode, N) one driver; raw_threads / raw_serial / "
    "actors_only / end_to_end interleaved per rep, rotating the "
    "order, no warm-up round (every phase warms up for "
    "phase_warmup_s first; graphs are traced at build); between "
    "phases the "
    "queue fills and actors block (idle cores); actor rate = env "
    "steps of unrolls finished in the window / time first..last",
    "ratios": "<phase>_over_raw: median of per-rep paired ratios; "
    "learner_only_over_raw: ratio of medians; "
    "<mode>_best_<phase>_over_best_raw: the best median over "
    "num_actors over the best raw median of ANY config of that "
    "env class (base and variants, e.g. native and native_E16); "
    "processes_over_threads: ratio of medians",
    "profile": PROFILE_HOW,
    "threads": threads,
    "targets (reported, not asserted; atari envs)": {
      f"{k}_over_raw": f">= {v:g}" for k, v in TARGETS.items()
    },
    "targets (reported, not asserted; dmlab envs)": {
      f"{k}_over_raw": f">= {v:g}" for k, v in DMLAB_TARGETS.items()
    },
  }
  summary_parts = targets_summary(envs, series, ratios, config)
  path = common.write_results(NAME, quick, config, rows, ratios)
  if not quick:
    print(f"wrote {plot(envs, series, rows, args)}")
  summary = f"{NAME}{' [quick]' if quick else ''}: " + "; ".join(summary_parts)
  common.print_table(NAME, rows, ratios, summary, quick=quick, path=path)


def profile_of(records, info, n, E):
  """Where actor time goes in the actors-only phase (medians over reps)."""
  recs = records["actors_only"]
  thread_s = [r["window_s"] * n for r in recs]
  env_share = [r["env_step_s"] / t for r, t in zip(recs, thread_s)]
  env_ms = [r["env_step_s"] / max(r["env_step_calls"], 1) * 1e3 for r in recs]
  raw_ms = [E * n / r["env_steps_per_s"] * 1e3 for r in records["raw"]]
  step_ms = [E * n / r["env_steps_per_s"] * 1e3 for r in recs]
  act_ms = float(np.median(info["act_s"])) * 1e3
  return {
    "actor_ms_per_vector_step": round(float(np.median(step_ms)), 3),
    "env_step_ms_per_call_in_actors": round(float(np.median(env_ms)), 3),
    "raw_ms_per_vector_step": round(float(np.median(raw_ms)), 3),
    "env_step_share_of_actor_thread_time": round(
      float(np.median(env_share)), 3
    ),
    "act_only_ms_per_call (actors idle)": round(act_ms, 3),
    "act_only_over_actor_step": round(act_ms / float(np.median(step_ms)), 3),
  }


PROFILE_HOW = (
  "configs.*.profile_actors_only, medians over reps of the actors-only "
  "phase: actor_ms_per_vector_step = wall time of one actor's vector step "
  "(N x envs_per_actor / rate, actors run in parallel); "
  "env_step_ms_per_call_in_actors = time inside env.step (the "
  "numpy_function body) per call; env_step_share = that time summed over "
  "actors / (N x window); the rest of an actor's time is policy "
  "inference, the while_loop, the enqueue, and waiting for the GIL or a "
  "core; raw_ms_per_vector_step = the ceiling's time for the same N "
  "vector steps; act_only = one call of actor 0's act tf.function (with "
  "batched_inference: the inference server's act) on envs_per_actor "
  "observations, with every actor blocked (idle cores); with env_groups, "
  "env_step calls count an actor's vector steps (all its groups' steps)"
)


def targets_summary(envs, series, ratios, config):
  """Summary parts; records met / MISSED per target in `config`, for every
  actor count (against the same run's ceiling for that many envs) and for
  the best actor count against the best ceiling."""
  parts, verdicts = [], {}
  for env_id in envs:
    s, kind = slug(env_id), env_kind(env_id)
    modes = dict.fromkeys(m for (e, m, _) in series if e == s)
    for mode in modes:
      ns = sorted(n for (e, m, n) in series if e == s and m == mode)
      kind_targets = (
        TARGETS
        if kind in TARGET_KINDS
        else DMLAB_TARGETS
        if kind == "dmlab"
        else {}
      )
      for phase in TARGETS:
        target = kind_targets.get(phase)
        keyed = [
          (f"N={n}", f"{s}_{mode}_actors_{n}_{phase}_over_raw") for n in ns
        ]
        keyed.append(("best/best", f"{s}_{mode}_best_{phase}_over_best_raw"))
        text = f"{s} {mode} {phase}/raw " + " ".join(
          f"{label} {ratios[k]:.2f}" for label, k in keyed
        )
        if target is not None:
          marks = {
            label: "met" if ratios[k] >= target else "MISSED"
            for label, k in keyed
          }
          verdicts[f"{s}_{mode}_{phase}_over_raw >= {target:g}"] = marks
          text += (
            f" (target >= {target:g}: "
            + ", ".join(f"{label} {m}" for label, m in marks.items())
            + ")"
          )
        parts.append(text)
    if "processes" in modes and "threads" in modes:
      vals = [
        (n, ratios.get(f"{s}_processes_over_threads_actors_{n}_end_to_end"))
        for (e, m, n) in series
        if e == s and m == "processes"
      ]
      parts.append(
        f"{s} end_to_end processes/threads "
        + " ".join(f"N={n} {v:.2f}" for n, v in vals if v is not None)
      )
  config["targets_verdict"] = verdicts
  return parts


def plot(envs, series, rows, args):
  """Frames/s against num_actors, one panel per env: raw (ceiling), actors
  only, end to end; the base config as lines (gymnasium: threads solid,
  processes dashed), variants as single points beside their N; the learner
  alone as a horizontal line."""
  plt = common.pyplot()
  learner = {
    r.case.split("/")[0]: r.stat.median
    for r in rows
    if r.case.endswith("/learner_only") and r.unit == "frames/s"
  }
  fig, axes = plt.subplots(
    1, len(envs), figsize=(6.2 * len(envs), 5.6), squeeze=False
  )
  colors = {"raw": "#8C8C8C", "actors_only": "#4C72B0", "end_to_end": "#DD8452"}
  labels = {
    "raw": "raw stepping (ceiling)",
    "actors_only": "actors only",
    "end_to_end": "end to end",
  }
  markers = ("o", "s", "^", "D", "v", "P", "X", "*")
  for ax, env_id in zip(axes[0], envs):
    s = slug(env_id)
    repeats = args["repeats"][env_id]
    modes = list(dict.fromkeys(m for (e, m, _) in series if e == s))
    variants = [m for m in modes if "_" in m]
    for i, mode in enumerate(modes):
      ns = sorted(n for (e, m, n) in series if e == s and m == mode)
      is_variant = mode in variants
      # Variants sit just right of their N, so points do not overlap.
      dx = 0.07 * (variants.index(mode) + 1) if is_variant else 0.0
      style = "none" if is_variant else "--" if mode == "processes" else "-"
      for phase, color in colors.items():
        st = [series[(s, mode, n)][phase] for n in ns]
        med = [x.median * repeats for x in st]
        err = [
          [(x.median - x.min) * repeats for x in st],
          [(x.max - x.median) * repeats for x in st],
        ]
        ax.errorbar(
          [n + dx for n in ns],
          med,
          yerr=err,
          color=color,
          ls=style,
          marker=markers[i % len(markers)],
          ms=5,
          capsize=3,
          label=f"{labels[phase]} [{mode}]",
        )
    ax.set_xticks(sorted({n for (e, _, n) in series if e == s}))
    if s in learner:
      ax.axhline(
        learner[s],
        color="#55A868",
        ls=":",
        lw=1.5,
        label="learner alone (frames consumed)",
      )
    ax.set_yscale("log")
    ax.set_xlabel("num_actors (threads in one process)")
    ax.set_ylabel(f"frames/s (= {repeats} x env steps/s)")
    ax.set_title(
      f"{env_id}: {args['E']} envs/actor, T={args['T']}, "
      f"B={args['B']} (variants: overrides)",
      fontsize=9,
    )
    ax.legend(
      fontsize=6, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.14)
    )
  fig.suptitle(
    "IMPALA throughput (small net for frames), median and min-max", fontsize=10
  )
  return common.save_plot(fig, NAME)


if __name__ == "__main__":
  app.run(main)
