"""The acting-throughput benchmark's --quick run works and writes the
contract's JSON (into a temporary folder, not over the committed results)."""

import pytest

VARIANTS = ("tf_checked", "tf_raw", "plain_tf", "torch_executor", "plain_torch")


# 20-50 s: `make test-all` (the impala_throughput smoke stays in `make test`).
@pytest.mark.slow
def test_quick_run_writes_contract_json(run_quick):
  doc, out = run_quick("act_throughput")
  assert doc["benchmark"] == "act_throughput" and doc["quick"] is True
  assert set(doc["machine"]) >= {"cpu", "cores", "gpu", "tf", "torch"}
  assert doc["config"]["batch_sizes"] == [1, 32]
  assert isinstance(doc["config"]["threads"]["torch_threads"], int)
  assert doc["config"]["threads"]["OMP_WAIT_POLICY"] == "PASSIVE"
  cases = {(r["case"], r["metric"]) for r in doc["results"]}
  for b in (1, 32):
    for mode in ("greedy", "explore"):
      for v in VARIANTS:
        assert (f"b{b}/{mode}/{v}", "time per call") in cases
        assert (f"b{b}/{mode}/{v}", "throughput") in cases
  for r in doc["results"]:
    assert r["min"] <= r["median"] <= r["max"] and r["reps"] >= 1
    assert r["median"] > 0
  for b in (1, 32):
    for key in (
      f"tf_executor_over_plain_tf_b{b}",
      f"tf_executor_raw_over_plain_tf_b{b}",
      f"torch_executor_over_plain_torch_b{b}",
      f"tf_executor_over_plain_tf_explore_b{b}",
      f"torch_executor_over_plain_torch_explore_b{b}",
    ):
      assert isinstance(doc["ratios"][key], float) and doc["ratios"][key] > 0
  # The summary line comes last.
  assert out.stdout.strip().splitlines()[-1].startswith("act_throughput")
