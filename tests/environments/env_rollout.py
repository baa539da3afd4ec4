"""Env runs as flat dicts of arrays, to compare two envs exactly.

A plan is a list of steps: ["reset", seed] or ["step", actions]. `run_plan`
records every reset's observation and every step's `StepResult` field
(Dict observations leaf by leaf, texts as numpy str arrays).

As a script it runs a plan on an env built IN a fresh process that never
imports tensorflow, the in-process reference for DM Lab (whose fake aborts
next to tensorflow, as the real one crashes):

    python tests/environments/env_rollout.py '<spec json>' out.npz

spec: {"env_id", "num_envs", "seed", "kwargs", "plan"}.
"""

import json
import sys

import numpy as np


def _record(name, value, out):
  if isinstance(value, dict):
    for key in sorted(value):
      _record(f"{name}.{key}", value[key], out)
    return
  arr = np.asarray(value)
  if arr.dtype == object:
    arr = arr.astype(str)
  out.setdefault(name, []).append(arr)


def run_plan(env, plan):
  """{name: array [calls, N, ...]}: "reset.<leaf>" per reset and
  "<field>.<leaf>" per step."""
  out = {}
  for kind, arg in plan:
    if kind == "reset":
      _record("reset", env.reset(seed=arg), out)
    else:
      result = env.step(np.asarray(arg))
      for field, value in zip(result._fields, result):
        _record(field, value, out)
  return {name: np.stack(values) for name, values in out.items()}


def assert_same_runs(got, expected):
  assert sorted(got) == sorted(expected)
  for name in expected:
    assert got[name].dtype == expected[name].dtype, name
    np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def main(argv):
  spec = json.loads(argv[1])
  from ingraph_rl.environments import make_vector_env

  env = make_vector_env(
    spec["env_id"],
    spec["num_envs"],
    seed=spec["seed"],
    processes=False,
    **spec["kwargs"],
  )
  try:
    arrays = run_plan(env, spec["plan"])
  finally:
    env.close()
  loaded = [m for m in ("tensorflow", "torch") if m in sys.modules]
  if loaded:
    raise RuntimeError(f"the reference process imported {loaded}")
  np.savez(argv[2], **arrays)


if __name__ == "__main__":
  main(sys.argv)
