"""The export benchmark's --quick run works and writes the contract's JSON
(into a temporary folder, not over the committed results)."""

import pytest


# ~60 s of real processes: `make test-all` runs it (the benchmark has
# its own full run); the default suite stays under 15 min on 2 cores.
@pytest.mark.slow
def test_quick_run_writes_contract_json(run_quick):
  doc, out = run_quick("export", timeout=280)
  assert doc["benchmark"] == "export" and doc["quick"] is True
  assert set(doc["machine"]) >= {"cpu", "cores", "gpu", "tf", "torch"}
  assert doc["config"]["dqn_replay"] == 1000
  cases = {(r["case"], r["metric"]) for r in doc["results"]}
  for agent, modes in (("dqn", ("greedy", "explore")), ("impala", ("sample",))):
    assert (f"{agent}/export", "export time") in cases
    assert (f"{agent}/size", "SavedModel size") in cases
    assert (f"{agent}/fresh_process", "fresh-process load") in cases
    for b in (1, 32):
      for mode in modes:
        for v in ("executor", "raw_function", "loaded"):
          assert (f"{agent}/b{b}/{mode}/{v}", "throughput") in cases
      key = f"loaded_over_executor_throughput_{agent}_b{b}"
      assert doc["ratios"][key] > 0
      assert isinstance(doc["config"]["targets"][key]["met"], bool)
    assert 1.0 <= doc["ratios"][f"{agent}_savedmodel_over_variables"] < 2.0
    assert isinstance(doc["config"]["targets"][f"{agent}_size"]["met"], bool)
  for r in doc["results"]:
    assert r["min"] <= r["median"] <= r["max"] and r["reps"] >= 1
  # The summary line comes last.
  assert out.stdout.strip().splitlines()[-1].startswith("export [quick]")
