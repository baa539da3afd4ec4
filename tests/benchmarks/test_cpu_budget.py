"""The CPU-budget benchmark: its in-graph repeat really runs the work, its
DQN limits are the formulas on a hand-computed case, and its --quick run
writes the contract's JSON (into a temporary folder)."""

import json

import numpy as np
import pytest
import tensorflow as tf

from benchmarks.graph_loops import repeat_in_graph
from ingraph_rl.testing.fresh_process import run_python


def test_repeat_in_graph_computes_every_call():
  x = np.arange(6, dtype=np.float32).reshape(2, 3)

  @tf.function
  def policy(obs, scale):
    return {"a": tf.reduce_sum(obs * scale, axis=1), "b": tf.constant(1)}

  run = repeat_in_graph(policy, (x, np.float32(2.0)), 7)
  # Each call's outputs sum to 2 * 15 + 1: the loop returns 7 of them (the
  # work is neither pruned nor done once).
  assert run() == pytest.approx(7 * 31.0)


def test_repeat_in_graph_repeats_state_changes():
  v = tf.Variable(0)

  @tf.function
  def bump():
    return v.assign_add(1)

  run = repeat_in_graph(bump, (), 5)  # Traces and runs once.
  assert int(v.numpy()) == 5
  run()
  assert int(v.numpy()) == 10


# Run in a subprocess: benchmarks.cpu_budget defines absl flags that other
# benchmark modules imported by this suite define too.
_ANALYSE = """
import json, sys, types
from benchmarks import cpu_budget
records = json.load(sys.stdin)
budget = object.__new__(cpu_budget.DqnBudget)
budget.values, budget.config = {}, types.SimpleNamespace(env_groups=1)
_, ratios, summary = cpu_budget.analyse("dqn_pong", budget, records, 2)
limits = summary["limit_env_steps_per_s"]
print(json.dumps({"ratios": ratios, "limits": limits}))
"""


@pytest.mark.slow
def test_dqn_limits_on_a_hand_computed_case():
  def part(cpu_us, wall_us):
    return [{"cpu_s_per_step": cpu_us / 1e6, "wall_s_per_step": wall_us / 1e6}]

  def system(rate):
    return [{"env_steps_per_s": rate, "cpu_s_per_step": 1e-4}]

  records = {
    "part_env": part(300, 150),
    "part_inference": part(60, 50),
    "part_insert": part(40, 40),
    "part_update": part(600, 600),
    "raw": system(5000.0),
    "in_graph_off": system(3000.0),
    "in_graph_on": system(800.0),
  }
  doc = run_python(_ANALYSE, stdin=json.dumps(records), timeout=120)
  ratios, limits = doc["ratios"], doc["limits"]
  # L = 2 cores / (300 + 60 + 40) us = 5000/s, raw's rate: 1.0 of raw.
  assert ratios["dqn_pong_limit_over_raw_updates_off"] == pytest.approx(1.0)
  # Serial: raw's 200 us + the act's 50 us of wall per env step = 4000/s.
  assert ratios["dqn_pong_serial_limit_over_raw_updates_off"] == (
    pytest.approx(0.8)
  )
  assert limits["in_graph_off/serial"] == pytest.approx(4000.0)
  assert ratios["dqn_pong_in_graph_over_raw_updates_off"] == pytest.approx(0.6)
  # Updates on: L = 2 / 1000 us = 2000/s.
  assert ratios["dqn_pong_end_to_end_over_limit_updates_on"] == (
    pytest.approx(0.4)
  )


@pytest.mark.slow  # ~25 s: make test-all.
def test_quick_run_writes_contract_json(run_quick):
  variant = "num_actors=1+num_envs_per_actor=4"
  doc, _ = run_quick(
    "cpu_budget",
    f"--variants=env_groups=2,compute_dtype=bfloat16,{variant}",
    timeout=300,
  )
  assert doc["benchmark"] == "cpu_budget" and doc["quick"] is True
  cases = {(r["case"], r["metric"]) for r in doc["results"]}
  for part in ("env", "inference", "learner"):
    assert (f"impala_cartpole/part/{part}", "cpu") in cases
  for phase in ("raw", "actors_only", "end_to_end"):
    assert (f"impala_cartpole/{phase}", "throughput") in cases
    assert (f"impala_cartpole/{phase}", "cpu_per_env_step") in cases
  setup = doc["config"]["setups"]["impala_cartpole"]
  parts = setup["parts_us_per_env_step"]
  assert all(v > 0 for v in parts.values())
  # L = cores / sum of the parts' CPU per env step; the network variant
  # (compute_dtype, a default variant) with its own inference and learner.
  cores = doc["config"]["cores"]
  limits = setup["limit_env_steps_per_s"]
  own = "compute_dtype_bfloat16"
  for key, names in (
    ("end_to_end", ("env", "inference", "learner")),
    ("actors_only", ("env", "inference")),
    (f"end_to_end/{own}", ("env", f"inference/{own}", f"learner/{own}")),
  ):
    total = sum(parts[name] for name in names) * 1e-6
    assert limits[key] == pytest.approx(cores / total, rel=0.02), key
  # A variant runs its own actors and envs per actor (the flagfile: 2 x 32).
  shapes = setup["actors_x_envs"]
  assert shapes[""] == [2, 32] and shapes["env_groups_2"] == [2, 32]
  own_envs = "num_actors_1__num_envs_per_actor_4"
  assert shapes[own_envs] == [1, 4]
  # Its actors' batch has its own network parts (and limit).
  own_parts = ("env", f"inference/{own_envs}", f"learner/{own_envs}")
  assert limits[f"end_to_end/{own_envs}"] == pytest.approx(
    cores / (sum(parts[name] for name in own_parts) * 1e-6), rel=0.02
  )
  # A variant of the same network keeps the flagfile's parts.
  assert limits["end_to_end/env_groups_2"] == pytest.approx(
    limits["end_to_end"], rel=0.02
  )
  for key in (
    "impala_cartpole_end_to_end_over_limit",
    "impala_cartpole_end_to_end_over_raw",
    "impala_cartpole_actors_only_over_raw",
    "impala_cartpole_end_to_end_fps",
  ):
    assert doc["ratios"][key] > 0
  # The actors' limit leaves out the learner's part, round by round.
  ratios = doc["ratios"]
  assert (
    0
    < ratios["impala_cartpole_limit_over_raw"]
    < ratios["impala_cartpole_actors_only_limit_over_raw"]
  )
