"""The build-overhead benchmark's --quick run works and writes the
contract's JSON (into a temporary folder, not over the committed results)."""

import pytest


# 20-50 s: `make test-all` (the impala_throughput smoke stays in `make test`).
@pytest.mark.slow
def test_quick_run_writes_contract_json(run_quick):
  doc, out = run_quick("build_overhead")
  assert doc["benchmark"] == "build_overhead" and doc["quick"] is True
  assert set(doc["machine"]) >= {"cpu", "cores", "gpu", "tf", "torch"}
  cases = {r["case"] for r in doc["results"]}
  assert {
    "single/ours",
    "single/plain",
    "stack40/ours",
    "stack40/plain",
    "call/plain",
  } <= cases
  for r in doc["results"]:
    assert r["min"] <= r["median"] <= r["max"] and r["reps"] >= 1
  for key in (
    "single_component_overhead_ms",
    "stack40_overhead_ms",
    "call_overhead_ratio_checked",
    "call_overhead_ratio_unchecked",
  ):
    assert isinstance(doc["ratios"][key], float)
  assert doc["config"]["stack40"]["components"] >= 40
  # The summary line comes last.
  assert out.stdout.strip().splitlines()[-1].startswith("build_overhead")
