"""The Ape-X throughput benchmark's --quick run works and writes the
contract's JSON (into a temporary folder, not over the committed
results)."""

import pytest


@pytest.mark.slow  # ~60 s: make test-all.
def test_quick_run_writes_contract_json(run_quick):
  doc, _ = run_quick(
    "apex_throughput",
    "--parts=learner,frames",
    "--envs=CartPole-v1",
    "--reps=1",
    timeout=300,
  )
  assert doc["benchmark"] == "apex_throughput" and doc["quick"] is True
  cases = {(r["case"], r["metric"]) for r in doc["results"]}
  for name in ("ours", "python"):
    assert (f"learner/b512/1e4/{name}", "sample_update_writeback") in cases
  ratio = doc["ratios"]["learner_sample_update_over_python_b512_1e4"]
  assert ratio > 0
  for name in ("raw", "actors_only", "end_to_end"):
    assert (f"CartPole-v1/a2/s2/{name}", "env_steps_per_s") in cases
  for name in ("actors_only", "end_to_end"):
    # Actors that also run a Q-network cannot outrun raw stepping.
    assert 0 < doc["ratios"][f"cartpole_{name}_over_raw_actors_2"] < 1
  for part in ("env", "q_pass_acting", "q_pass_target"):
    assert (f"CartPole-v1/a2/s2/part/{part}", "cpu") in cases
  # The limit leaves the actors their passes: below raw stepping.
  assert 0 < doc["ratios"]["cartpole_limit_over_raw_actors_2"] < 1
  assert doc["ratios"]["cartpole_actors_only_over_limit_actors_2"] > 0
  # The same rounds with bfloat16 actor weights.
  assert (
    "CartPole-v1/a2/s2/actors_only/actor_bfloat16",
    "env_steps_per_s",
  ) in (cases)
  assert ("CartPole-v1/a2/s2/part/actor_bfloat16/env", "cpu") in cases
  assert (
    doc["ratios"]["cartpole_actor_bfloat16_over_float32_actors_only_actors_2"]
    > 0
  )
