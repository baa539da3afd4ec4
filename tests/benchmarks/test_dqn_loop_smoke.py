"""The DQN-loop benchmark's --quick run works and writes the contract's
JSON (into a temporary folder, not over the committed results)."""

import pytest


# 20-50 s: `make test-all` (the impala_throughput smoke stays in `make test`).
@pytest.mark.slow
def test_quick_run_writes_contract_json(run_quick, tmp_path):
  doc, out = run_quick("dqn_loop")
  assert doc["benchmark"] == "dqn_loop" and doc["quick"] is True
  assert set(doc["machine"]) >= {"cpu", "cores", "gpu", "tf", "torch"}
  cases = {r["case"] for r in doc["results"]}
  assert {
    "cartpole/raw",
    "cartpole/updates_off/in_graph",
    "cartpole/updates_off/python",
    "cartpole/updates_on/in_graph",
    "cartpole/updates_on/python",
    # The in-graph loop over 2 double-buffered env groups.
    "cartpole/updates_off/in_graph_groups2",
    "cartpole/updates_on/in_graph_groups2",
  } <= cases
  for r in doc["results"]:
    assert r["reps"] >= 1
    assert r["min"] <= r["median"] <= r["max"]
    if r["metric"] == "throughput":
      assert r["unit"] == "env steps/s" and r["min"] > 0
  for key in (
    "cartpole_in_graph_over_python_updates_off",
    "cartpole_in_graph_over_python_updates_on",
    "cartpole_in_graph_over_raw_updates_off",
    "cartpole_in_graph_over_raw_updates_on",
    "cartpole_in_graph_groups2_over_raw_updates_off",
    "cartpole_in_graph_groups2_over_raw_updates_on",
    "cartpole_in_graph_groups2_over_in_graph_updates_off",
    "cartpole_in_graph_groups2_over_in_graph_updates_on",
  ):
    assert isinstance(doc["ratios"][key], float) and doc["ratios"][key] > 0
  cfg = doc["config"]["envs"]["cartpole"]
  # Every timed step of "updates on" did one update, "off" none.
  assert cfg["updates_per_vector_step_on (checked)"] == {
    "in_graph": [1.0],
    "in_graph_groups2": [1.0],
    "python": [1.0],
  }
  assert cfg["updates_in_timed_off_reps (checked)"] == 0
  assert "threads" in doc["config"]
  assert not (tmp_path / "dqn_loop.png").exists()  # Plots: full runs only.
  # The summary line comes last.
  assert out.stdout.strip().splitlines()[-1].startswith("dqn_loop")
