r"""The CPU budget: how close each system runs to what the cores can do.

On CPU the policy and the learner share the cores with the envs, so a ratio
to raw stepping cannot reach 1. Every env step costs CPU in each part:

  env        stepping the envs with random actions (one thread, the
             shipped number of envs per actor / vector env);
  inference  one policy forward at the actor batch size, per env step;
  learner    IMPALA: one update (dequeue, V-trace, RMSProp) per env step
             trained (T x B per update, fed synthetic rollouts);
  insert     DQN: `observe` (n-step push and replay insert) per env step;
  update     DQN: `update` (sample, loss, Adam) per env step: one update of
             batch 32 every `update_every` vector steps of `num_envs`.

Each part runs ALONE in this process and is charged the process's CPU
seconds (all threads: ale-py's C++ stepping threads, TF's pools). Their sum
s (CPU seconds per env step) bounds any system on `cores` cores:

  L = cores / s     env steps/s (the limit)

Then the system itself, at the shipped flagfile's settings, runs end to end
in the same process, interleaved with the parts (`common.interleave`, the
order rotating per repetition):

  impala_pong      experiments/flagfiles/impala_pong.cfg: `ActorLearnerDriver`
                   (actor threads + learner thread, as experiments/impala.py)
                   via benchmarks/impala_harness's `Harness`: raw (N
                   threads stepping N actors' envs), actors_only, end_to_end.
  impala_cartpole  the same for impala_cartpole.cfg.
  dqn_pong         experiments/flagfiles/dqn_pong.cfg: the agent's in-graph
                   `train` loop (one graph call per 100 vector steps), with
                   updates off (learning_starts never reached) and on (every
                   `update_every` vector steps), and raw stepping (ale-py's
                   threads pinned: `common.raw_env_kwargs`).

Ratios: end to end over L (how much of the machine the system uses well),
end to end over raw (the usual figure), L over raw (`<setup>_limit_over_raw`:
the most end to end over raw can reach with these parts; for IMPALA also
`<setup>_actors_only_limit_over_raw`, cores / (env + inference) over raw,
the most actors only can reach; for DQN also
`<setup>_serial_limit_over_raw_updates_off`: with one env group the act
and the env step take turns, so the loop reaches at most 1 / (raw's wall +
the inference part's wall) per env step), and for each end-to-end phase its
own CPU seconds per env step over s (> 1: overhead outside the parts, e.g.
the GIL, queues, numpy_function hops; the rate over L is then below
cores-busy x s / that).

Units: env steps (agent steps). Pong frames = 4 x env steps (frameskip 4);
CartPole frames = env steps.

    python -m benchmarks.cpu_budget            # the measurement (12-21 min)
    python -m benchmarks.cpu_budget --quick    # smoke: CartPole, short

Writes benchmarks/results/cpu_budget.json and cpu_budget.png (not --quick).
"""

import dataclasses
import gc
import os
import time

import numpy as np
from absl import app, flags

from benchmarks import (
  common,  # Sets OMP_WAIT_POLICY before TF loads.
  impala_harness,
)
from benchmarks.graph_loops import repeat_in_graph
from experiments import config_flags, configs
from ingraph_rl.agents.dqn import DQNBuilder
from ingraph_rl.environments import is_atari_id, make_vector_env
from ingraph_rl.runners.environments import (
  make_actor_env,
  num_action_repeats_for,
)

NAME = "cpu_budget"

_QUICK = flags.DEFINE_bool("quick", False, "Smoke run: CartPole, short.")
_SETUPS = flags.DEFINE_list(
  "setups",
  None,
  "Setups to run (default impala_pong,impala_cartpole,dqn_pong; "
  "impala_cartpole with --quick).",
)
_REPS = flags.DEFINE_integer("reps", None, "Repetitions (3; 1 --quick).")
_DURATION = flags.DEFINE_float(
  "duration", None, "Seconds counted per IMPALA phase (4; 0.5 --quick)."
)
_DQN_REPLAY_CAP = flags.DEFINE_integer(
  "dqn_replay_capacity",
  100_000,
  "Caps the DQN replay (its size does not change per-step costs; two "
  "agents are built).",
)
_VARIANTS = flags.DEFINE_list(
  "variants",
  ["env_groups=2", "batched_inference=true", "compute_dtype=bfloat16"],
  "Config changes whose end-to-end systems run beside the flagfile's, "
  "interleaved ('field=value', '+'-joined for several; each applies to "
  "the agents whose config has the fields): e.g. env_groups=2.",
)
_OVERRIDES = flags.DEFINE_multi_string(
  "override",
  [],
  "Flag overrides after the flagfile for every setup of that agent, as "
  "'impala:--env_groups=2' or 'dqn:--update_every=4'.",
)

_THREADS = common.define_intra_op_threads_flag()

SEED = 0
DQN_FILL_STEPS = 2_000  # Env steps before DQN "updates on" is timed.
NEVER = 10**12  # learning_starts for "updates off".


@dataclasses.dataclass(frozen=True)
class Setup:
  agent: str  # "impala" or "dqn".
  flagfile: str


SETUPS = {
  "impala_pong": Setup("impala", "impala_pong.cfg"),
  "impala_cartpole": Setup("impala", "impala_cartpole.cfg"),
  "dqn_pong": Setup("dqn", "dqn_pong.cfg"),
}
TARGETS = {
  "impala_pong_end_to_end_over_limit": 0.85,
  "impala_pong_end_to_end_over_raw": 0.65,
  "impala_pong_actors_only_over_raw": 0.9,
  "dqn_pong_in_graph_over_raw_updates_off": 0.6,
  "dqn_pong_end_to_end_over_limit_updates_on": 0.85,
  "impala_cartpole_end_to_end_fps": 12_600,
}


def _classes(setup):
  return {
    "impala": (configs.IMPALA_CLASSES, configs.IMPALA_CARTPOLE),
    "dqn": (configs.DQN_CLASSES, configs.DQN_CARTPOLE),
  }[setup.agent]


def flagfile_values(setup, variant=None):
  """The run's values as the experiment resolves them from the flagfile
  (the preset overridden by the flagfile, then by `--override`s, then by
  the variant's 'field=value's)."""
  classes, preset = _classes(setup)
  extra = [
    o.split(":", 1)[1]
    for o in _OVERRIDES.value
    if o.split(":", 1)[0] == setup.agent
  ]
  extra += [f"--{change}" for change in (variant or "").split("+") if change]
  return configs.flagfile_values(classes, preset, setup.flagfile, extra)


# Variants changing these fields change what the network parts cost (the
# precision, or the actor's batch of envs), so they get their own inference
# and learner (IMPALA) or update (DQN) parts and their own limit; other
# variants run the flagfile's network. The env part stays the flagfile's.
NETWORK_FIELDS = (
  "compute_dtype",
  "actor_weights_dtype",
  "num_envs_per_actor",
)


def network_variants(setup):
  """{label: variant} of `variants_of(setup)` that change the network."""
  return {
    label: variant
    for label, variant in variants_of(setup).items()
    if any(
      change.split("=", 1)[0] in NETWORK_FIELDS for change in variant.split("+")
    )
  }


def variants_of(setup):
  """{label: variant} of `--variants` whose fields this agent has."""
  classes, _ = _classes(setup)
  names = {f.name for cls in classes for f in config_flags.flag_fields(cls)}
  out = {}
  for variant in _VARIANTS.value:
    fields = [change.split("=", 1)[0] for change in variant.split("+")]
    if variant and all(f in names for f in fields):
      out[variant.replace("=", "_").replace("+", "__")] = variant
  return out


# --- IMPALA ---------------------------------------------------------------


class ImpalaBudget:
  """One IMPALA flagfile: its parts and its `Harness` (the driver)."""

  def __init__(self, name, setup, quick):
    self.name = name
    values = flagfile_values(setup)
    self.values = values
    settings = configs.impala_settings(values)
    env_id = settings.env
    repeats = num_action_repeats_for(env_id, settings.num_action_repeats)
    self.E = settings.num_envs_per_actor
    self.T, self.B = values["unroll_length"], values["batch_size"]
    self.repeats = repeats
    duration = _DURATION.value or (0.5 if quick else 4.0)
    args = {
      "E": self.E,
      "T": self.T,
      "B": self.B,
      "queue_capacity": values["queue_capacity"],
      "repeats": {env_id: settings.num_action_repeats},
      "ale_num_threads": 0,
      "warmup_s": 0.3 if quick else 1.0,
      "duration": duration,
      "learner_updates": 2 if quick else max(4, 6400 // (self.T * self.B)),
    }

    def config_fn_of(values):
      def config_fn(num_actions, obs_space, args):
        del obs_space, args
        return configs.impala_config(
          values, num_actions, self.B * self.T * repeats
        )

      return config_fn

    def harness_of(values):
      # The variant's own actors and envs per actor (e.g. num_actors=4).
      s = configs.impala_settings(values)
      return impala_harness.Harness(
        env_id,
        s.num_actors,
        s.env_processes,
        dict(args, E=s.num_envs_per_actor),
        config_fn_of(values),
      )

    config_fn = config_fn_of(values)
    self.harness = harness_of(values)
    # Each variant's own driver (the parts are the flagfile's).
    self.variants = {
      label: harness_of(flagfile_values(setup, variant))
      for label, variant in variants_of(setup).items()
    }
    # [actor threads, envs per actor] each driver runs ("": the flagfile's).
    self.actors_x_envs = {
      label: [len(h.driver.envs), h.driver.envs[0].num_envs]
      for label, h in {"": self.harness, **self.variants}.items()
    }
    self.learner = impala_harness.LearnerOnly(env_id, args, config_fn)
    self.variant_learners = {
      label: impala_harness.LearnerOnly(
        env_id, args, config_fn_of(flagfile_values(setup, variant))
      )
      for label, variant in network_variants(setup).items()
    }
    self.env = make_actor_env(
      env_id,
      self.E,
      SEED + 77,
      settings.num_action_repeats,
      settings.env_processes,
    )
    self.env.reset(SEED + 77)
    self.step_random = common.random_stepper(self.env, SEED)
    self.env_calls = 20 if quick else 200
    self.act_loops = {}

  def fns(self):
    h = self.harness
    fns = {
      "part_env": lambda: self._part(
        "env", lambda: self.step_random(self.env_calls), self.env_calls * self.E
      ),
      "part_inference": lambda: self._inference(h),
      "part_learner": lambda: self._learner(self.learner),
      "raw": lambda: self._phase(h, h.raw),
      "actors_only": lambda: self._phase(h, h.actors_only),
      "end_to_end": lambda: self._phase(h, h.end_to_end),
    }
    for label, v in self.variants.items():
      fns[f"actors_only/{label}"] = lambda v=v: self._phase(v, v.actors_only)
      fns[f"end_to_end/{label}"] = lambda v=v: self._phase(v, v.end_to_end)
    for label, learner in self.variant_learners.items():
      v = self.variants[label]
      fns[f"part_inference/{label}"] = lambda v=v: self._inference(v)
      fns[f"part_learner/{label}"] = lambda x=learner: self._learner(x)
    return fns

  def _part(self, part, fn, units):
    cpu, wall = common.cpu_per(fn, units)
    return {"part": part, "cpu_s_per_step": cpu, "wall_s_per_step": wall}

  def _inference(self, harness):
    if harness not in self.act_loops:
      fn, args = harness.act_inputs()
      self.act_loops[harness] = repeat_in_graph(
        fn, args, impala_harness.ACT_CALLS
      )
    return self._part(
      "inference",
      self.act_loops[harness],
      impala_harness.ACT_CALLS * harness.E,
    )

  def _learner(self, learner):
    out = learner.run()
    return {
      "part": "learner",
      "cpu_s_per_step": out["cpu_s_per_env_step"],
      "wall_s_per_step": 1.0 / out["env_steps_per_s"],
    }

  def _phase(self, harness, phase):
    out = phase()
    # End to end: what the learner trained, where the actors ran ahead of
    # it in the window (the queue's slack).
    rate = min(
      out["env_steps_per_s"], out.get("trained_env_steps_per_s", np.inf)
    )
    # CPU over the phase's counted window (not its warmup and quiesce).
    cpu = harness.window_cpu_s / out["window_s"]
    return dict(out, env_steps_per_s=rate, cpu_s_per_step=cpu / rate)

  def close(self):
    self.learner.close()
    for learner in self.variant_learners.values():
      learner.close()
    self.harness.close()
    for harness in self.variants.values():
      harness.close()
    self.env.close()


# --- DQN ------------------------------------------------------------------


class DqnBudget:
  """dqn_pong.cfg: its parts, the in-graph loop (updates off / on), raw."""

  def __init__(self, name, setup, quick):
    self.name = name
    values = dict(flagfile_values(setup))
    values["replay_capacity"] = min(
      values["replay_capacity"], _DQN_REPLAY_CAP.value
    )
    settings = configs.dqn_settings(values)
    self.values = values
    self.env_id, self.n = settings.env, settings.num_envs
    self.repeats = num_action_repeats_for(self.env_id, None)
    self.steps_per_call = settings.steps_per_call
    atari = is_atari_id(self.env_id)
    probe = make_vector_env(self.env_id, 1, SEED)
    num_actions = probe.action_space.num_categories
    self.obs_space = probe.observation_space
    probe.close()
    base = configs.dqn_config(values, num_actions, atari)
    pre = configs.scaled_frames if atari else None
    self.config = base
    self.calls = 2 if quick else 10  # train() calls per rep (x100 steps).
    configs_by_label = {"": base}
    for label, variant in variants_of(setup).items():
      v = dict(flagfile_values(setup, variant))
      if v["num_envs"] != values["num_envs"]:
        # The parts and raw stepping run the flagfile's vector env.
        raise ValueError(
          f"--variants={variant}: DQN variants keep num_envs "
          f"({values['num_envs']}); use --override=dqn:--num_envs=..."
        )
      v["replay_capacity"] = values["replay_capacity"]
      configs_by_label[label] = configs.dqn_config(v, num_actions, atari)
    # The in-graph loop, updates off and on, per variant ("": the
    # flagfile's): key "off", "on", "off/<label>", "on/<label>".
    self.agents = {}
    for label, config in configs_by_label.items():
      for setting, starts in (("off", NEVER), ("on", DQN_FILL_STEPS)):
        env = make_actor_env(
          self.env_id,
          self.n,
          SEED + len(self.agents),
          env_groups=config.env_groups,
        )
        ex = (
          DQNBuilder(
            dataclasses.replace(config, learning_starts=starts),
            preprocessor=pre,
          )
          .make_agent(env=env)
          .build()
        )
        ex.execute("reset_env", SEED)
        if setting == "on":
          # Fill past learning_starts (untimed): every timed step updates.
          ex.execute("train", -(-DQN_FILL_STEPS // self.n) + 1)
        self.agents[f"{setting}/{label}" if label else setting] = (ex, env)
    # The parts: separate agents without env (observe / update APIs), the
    # flagfile's ("") and each network variant's.
    self.parts_agents = {
      label: DQNBuilder(
        dataclasses.replace(
          configs_by_label[label],
          learning_starts=base.batch_size,
          num_envs=self.n,
        ),
        preprocessor=pre,
      )
      .make_agent(self.obs_space)
      .build()
      for label in [""] + list(network_variants(setup))
    }
    self.env = make_vector_env(self.env_id, self.n, SEED + 9)
    self.obs = self.env.reset(SEED + 9)
    self.step_random = common.random_stepper(self.env, SEED)
    self.raw_env = make_vector_env(
      self.env_id, self.n, SEED + 11, **common.raw_env_kwargs(self.env_id)
    )
    self.raw_env.reset(SEED + 11)
    self.raw_step = common.random_stepper(self.raw_env, SEED + 1)
    self._fill_parts_agent(DQN_FILL_STEPS // self.n + 1)
    self.part_calls = 20 if quick else 200
    self.act_loops, self.update_loops = {}, {}
    self.insert_loop = None

  def _observe_args(self, step, actions):
    extra = (step.truncated,) if self.config.n_step > 1 else ()
    return (
      self.obs,
      actions,
      step.rewards,
      step.final_obs,
      step.terminated,
      *extra,
    )

  def _fill_parts_agent(self, vector_steps):
    rng = np.random.default_rng(SEED)
    k = self.env.action_space.num_categories
    for _ in range(vector_steps):
      actions = rng.integers(0, k, self.n, dtype=np.int64)
      step = self.env.step(actions)
      for agent in self.parts_agents.values():
        agent.execute("observe", *self._observe_args(step, actions))
      self.obs = step.obs

  def fns(self):
    steps = self.calls * self.steps_per_call
    fns = {
      "part_env": lambda: self._part(
        "env", lambda: self.step_random(self.part_calls), self.part_calls
      ),
      "part_insert": lambda: self._insert(),
      "raw": lambda: self._rate(lambda: self.raw_step(steps), steps),
    }
    for label in self.parts_agents:
      tag = f"/{label}" if label else ""
      fns[f"part_inference{tag}"] = lambda x=label: self._part(
        "inference", lambda: self._act(x), self.part_calls
      )
      fns[f"part_update{tag}"] = lambda x=label: self._part(
        "update", lambda: self._update(x), self.part_calls
      )
    return fns | {
      f"in_graph_{key}": lambda k=key: self._train(k) for key in self.agents
    }

  def _part(self, part, fn, calls):
    cpu, wall = common.cpu_per(fn, calls)
    # Per env step: inference and insert serve n envs per call; an update
    # serves num_envs x update_every env steps.
    per = self.n * (self.config.update_every if part == "update" else 1)
    return {
      "part": part,
      "cpu_s_per_step": cpu / per,
      "wall_s_per_step": wall / per,
    }

  def _act(self, label):
    if label not in self.act_loops:
      fn = self.parts_agents[label].function("get_actions")
      self.act_loops[label] = repeat_in_graph(
        fn, (self.obs, True), self.part_calls
      )
    self.act_loops[label]()

  def _update(self, label):
    if label not in self.update_loops:
      fn = self.parts_agents[label].function("update")
      self.update_loops[label] = repeat_in_graph(fn, (), self.part_calls)
    self.update_loops[label]()

  def _insert(self):
    # The same recorded steps again (the memory is a ring: inserting more
    # changes nothing about its cost).
    if self.insert_loop is None:
      rng = np.random.default_rng(SEED + 3)
      k = self.env.action_space.num_categories
      actions = rng.integers(0, k, self.n, dtype=np.int64)
      step = self.env.step(actions)
      fn = self.parts_agents[""].function("observe")
      self.insert_loop = repeat_in_graph(
        fn, self._observe_args(step, actions), self.part_calls
      )
    return self._part("insert", self.insert_loop, self.part_calls)

  def _rate(self, fn, vector_steps):
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    steps = vector_steps * self.n
    return {
      "env_steps_per_s": steps / (time.perf_counter() - wall),
      "cpu_s_per_step": (time.process_time() - cpu) / steps,
    }

  def _train(self, setting):
    ex = self.agents[setting][0]

    def run():
      for _ in range(self.calls):
        out = ex.execute("train", self.steps_per_call)
      out["updates"].numpy()

    return self._rate(run, self.calls * self.steps_per_call)

  def close(self):
    for _, env in self.agents.values():
      env.close()
    self.env.close()
    self.raw_env.close()


# --- the report -----------------------------------------------------------


def part_stats(records, keys):
  """{part: Stat of CPU seconds per env step}."""
  return {
    k.removeprefix("part_"): common.Stat.of(
      r["cpu_s_per_step"] for r in records[k]
    )
    for k in keys
  }


def analyse(name, budget, records, cores):
  """(rows, ratios, summary dict) of one setup."""
  part_keys = [k for k in records if k.startswith("part_")]
  parts = part_stats(records, part_keys)
  rows, ratios = [], {}
  for part, stat in parts.items():
    rows.append(
      common.Row(f"{name}/part/{part}", "cpu", "us/env step", stat.scaled(1e6))
    )
  systems = [k for k in records if not k.startswith("part_")]
  for key in systems:
    rows.append(
      common.Row(
        f"{name}/{key}",
        "throughput",
        "env steps/s",
        common.Stat.of(r["env_steps_per_s"] for r in records[key]),
      )
    )
    rows.append(
      common.Row(
        f"{name}/{key}",
        "cpu_per_env_step",
        "us/env step",
        common.Stat.of(r["cpu_s_per_step"] for r in records[key]).scaled(1e6),
      )
    )

  def limit(keys, rnd, label=""):
    """cores / the parts' sum in round `rnd`; a network variant's own
    parts where it has them."""

    def cpu(k):
      own = f"part_{k}/{label}"
      key = own if label and own in records else f"part_{k}"
      return records[key][rnd]["cpu_s_per_step"]

    return cores / sum(cpu(k) for k in keys)

  def rate(key, rnd):
    return records[key][rnd]["env_steps_per_s"]

  def serial_limit(rnd):
    """DQN with one env group: the act needs the observations the env step
    returns and the next env step the actions, so the two take turns: at
    most 1 / (raw's wall + the inference part's wall) env steps/s, however
    many cores are idle meanwhile."""
    act = records["part_inference"][rnd]["wall_s_per_step"]
    return 1 / (1 / rate("raw", rnd) + act)

  reps = len(records["raw"])

  def over(key, ref):
    """Median over rounds of `key`'s rate over `ref` (a system or a list
    of limits per round)."""
    return median(
      rate(key, i) / (ref[i] if isinstance(ref, list) else rate(ref, i))
      for i in range(reps)
    )

  def limit_over_raw(limits):
    """Median over rounds of a limit over raw stepping: the most a ratio
    over raw can reach with those parts on these cores."""
    return median(limits[i] / rate("raw", i) for i in range(reps))

  def variants(system):
    """(key suffix, ratio suffix) of the flagfile's run and each variant
    of `system`."""
    labels = [k.split("/", 1)[1] for k in records if k.startswith(system)]
    return [("", "")] + [(f"/{x}", f"_{x}") for x in labels]

  limit_rows = {}
  if isinstance(budget, ImpalaBudget):
    for suffix, tag in variants("end_to_end/"):
      e2e, actors = f"end_to_end{suffix}", f"actors_only{suffix}"
      limits = [
        limit(["env", "inference", "learner"], i, suffix[1:])
        for i in range(reps)
      ]
      actor_limits = [
        limit(["env", "inference"], i, suffix[1:]) for i in range(reps)
      ]
      limit_rows[e2e], limit_rows[actors] = limits, actor_limits
      ratios[f"{name}_end_to_end_over_limit{tag}"] = over(e2e, limits)
      ratios[f"{name}_end_to_end_over_raw{tag}"] = over(e2e, "raw")
      ratios[f"{name}_limit_over_raw{tag}"] = limit_over_raw(limits)
      ratios[f"{name}_actors_only_over_raw{tag}"] = over(actors, "raw")
      ratios[f"{name}_actors_only_limit_over_raw{tag}"] = limit_over_raw(
        actor_limits
      )
      ratios[f"{name}_end_to_end_fps{tag}"] = median(
        rate(e2e, i) * budget.repeats for i in range(reps)
      )
  else:
    for suffix, tag in variants("in_graph_off/"):
      off, on = f"in_graph_off{suffix}", f"in_graph_on{suffix}"
      limits_off, limits_on = (
        [limit(keys, i, suffix[1:]) for i in range(reps)]
        for keys in (
          ["env", "inference", "insert"],
          ["env", "inference", "insert", "update"],
        )
      )
      limit_rows[off], limit_rows[on] = limits_off, limits_on
      ratios[f"{name}_in_graph_over_raw_updates_off{tag}"] = over(off, "raw")
      ratios[f"{name}_limit_over_raw_updates_off{tag}"] = limit_over_raw(
        limits_off
      )
      if not suffix and budget.config.env_groups == 1:
        serial = [serial_limit(i) for i in range(reps)]
        limit_rows[f"{off}/serial"] = serial
        ratios[f"{name}_serial_limit_over_raw_updates_off"] = limit_over_raw(
          serial
        )
      ratios[f"{name}_in_graph_over_raw_updates_on{tag}"] = over(on, "raw")
      ratios[f"{name}_end_to_end_over_limit_updates_off{tag}"] = over(
        off, limits_off
      )
      ratios[f"{name}_end_to_end_over_limit_updates_on{tag}"] = over(
        on, limits_on
      )
  for key, values in limit_rows.items():
    rows.append(
      common.Row(
        f"{name}/{key}/limit",
        "throughput",
        "env steps/s",
        common.Stat.of(values),
      )
    )
  summary = {
    "flagfile": f"experiments/flagfiles/{SETUPS[name].flagfile}",
    "values": {
      k: v
      for k, v in budget.values.items()
      if isinstance(v, (int, float, str, bool)) or v is None
    },
    "parts_us_per_env_step": {
      p: round(s.median * 1e6, 2) for p, s in parts.items()
    },
    "limit_env_steps_per_s": {
      k: round(median(v), 1) for k, v in limit_rows.items()
    },
  }
  return rows, ratios, summary


def median(values):
  values = sorted(values)
  n = len(values)
  return (values[(n - 1) // 2] + values[n // 2]) / 2


def plot(summaries, ratios):
  """Per setup: the parts' CPU per env step stacked (their sum sets L),
  beside each system's own CPU per env step (flagfile's dark, variants
  light)."""
  plt = common.pyplot()
  if plt is None:
    return
  names = list(summaries)
  fig, axes = plt.subplots(
    1, len(names), figsize=(4.2 * len(names), 4.8), squeeze=False
  )
  colors = {
    "env": "tab:green",
    "inference": "tab:blue",
    "learner": "tab:red",
    "insert": "tab:orange",
    "update": "tab:red",
  }
  for ax, name in zip(axes[0], names):
    bottom = 0.0
    for part, us in summaries[name]["parts_us_per_env_step"].items():
      if "/" in part:  # A network variant's: its limit is in the JSON.
        continue
      ax.bar(0, us, bottom=bottom, color=colors[part], label=part)
      bottom += us
    systems = summaries[name]["end_to_end_cpu_us"]
    for x, (key, cpu) in enumerate(systems.items(), 1):
      ax.bar(x, cpu, color="0.75" if "/" in key else "0.35")
    ax.set_xticks(
      range(len(systems) + 1),
      ["parts"] + list(systems),
      rotation=60,
      ha="right",
      fontsize=7,
    )
    over = ratios.get(f"{name}_end_to_end_over_limit") or ratios.get(
      f"{name}_end_to_end_over_limit_updates_on"
    )
    ax.set_title(f"{name}: end to end / L = {over:.2f}", fontsize=9)
    ax.legend(fontsize=7)
  axes[0][0].set_ylabel("CPU us per env step")
  fig.suptitle(
    "Where an env step's CPU goes (2 cores): the parts alone and each "
    "system's own",
    fontsize=10,
  )
  fig.tight_layout()
  common.save_plot(fig, NAME)


def main(argv):
  del argv
  quick = _QUICK.value
  names = _SETUPS.value or (["impala_cartpole"] if quick else list(SETUPS))
  reps = _REPS.value or (1 if quick else 3)
  threads = common.experiment_threads(_THREADS.value)
  cores = os.cpu_count()
  rows, ratios, summaries = [], {}, {}
  for name in names:
    setup = SETUPS[name]
    cls = ImpalaBudget if setup.agent == "impala" else DqnBudget
    t = time.perf_counter()
    budget = cls(name, setup, quick)
    build_s = time.perf_counter() - t
    try:
      records = common.interleave(budget.fns(), reps=reps, warmup=1)
    finally:
      budget.close()
    r, q, summary = analyse(name, budget, records, cores)
    summary["build_s"] = round(build_s, 1)
    if hasattr(budget, "actors_x_envs"):
      summary["actors_x_envs"] = budget.actors_x_envs
    summary["end_to_end_cpu_us"] = {
      row.case.split("/", 1)[1]: round(row.stat.median, 1)
      for row in r
      if row.metric == "cpu_per_env_step"
    }
    rows += r
    ratios.update(q)
    summaries[name] = summary
    del budget
    gc.collect()
  config = {
    "reps": reps,
    "cores": cores,
    "threads": threads,
    "unit": "env steps (agent steps); Pong frames = 4 x env steps",
    "targets": {k: v for k, v in TARGETS.items() if k in ratios},
    "overrides": list(_OVERRIDES.value),
    "setups": summaries,
    "cpu_clock": "time.process_time(): this process, all threads",
  }
  path = common.write_results(NAME, quick, config, rows, ratios)
  if not quick:
    plot(summaries, ratios)
  common.print_table(NAME, rows, ratios, summary=str(summaries), path=path)


if __name__ == "__main__":
  app.run(main)
