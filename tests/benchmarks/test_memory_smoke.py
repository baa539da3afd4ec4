"""The replay-memory benchmark's --quick run works and writes the contract's
JSON (into a temporary folder, not over the committed results)."""

import pytest


# 20-50 s: `make test-all` (the impala_throughput smoke stays in `make test`).
@pytest.mark.slow
def test_quick_run_writes_contract_json(run_quick, tmp_path):
  doc, out = run_quick("memory")
  assert doc["benchmark"] == "memory" and doc["quick"] is True
  assert set(doc["machine"]) >= {"cpu", "cores", "gpu", "tf", "torch"}
  assert not (tmp_path / "memory.png").exists()  # Plots: full runs only.

  config = doc["config"]
  assert config["capacities"] == [1000, 10000]
  custom_op = config["custom_op"].startswith("loaded")
  impls = ["tf"] + (["custom_op"] if custom_op else [])
  cases = {r["case"] for r in doc["results"]}
  for records in ("cartpole", "atari84"):
    for cap in ("1e3", "1e4"):
      assert {
        f"{records}/{cap}/{v}"
        for v in [
          "uniform_ours",
          "uniform_numpy",
          "per_python",
          "tf_call_floor",
        ]
        + [f"per_{i}" for i in impls]
      } <= cases
  metrics = {(r["case"], r["metric"], r["unit"]) for r in doc["results"]}
  for impl in ["python"] + impls:
    for op in (
      "insert b64",
      "sample b512",
      "update b512",
      "sample+update b512",
    ):
      for unit in ("us/op", "records/s"):
        assert (f"cartpole/1e4/per_{impl}", op, unit) in metrics
  for r in doc["results"]:
    assert r["min"] <= r["median"] <= r["max"] and r["reps"] >= 1
    assert r["median"] > 0

  ratios = doc["ratios"]
  for key in [
    "per_sample_update_1e4_python_over_tf",
    "per_sample_update_fused_1e4_python_over_tf",
    "atari84_per_sample_update_1e4_python_over_tf",
    "cost_growth_1e3_to_1e4_python",
    "cost_growth_1e3_to_1e4_tf",
    "uniform_cartpole_1e4_sample_ours_over_numpy",
  ]:
    assert isinstance(ratios[key], float) and ratios[key] > 0, key
  if custom_op:
    for key in (
      "per_sample_update_1e4_python_over_custom_op",
      "per_sample_update_1e3_tf_over_custom_op",
      "cost_growth_1e3_to_1e4_custom_op",
    ):
      assert isinstance(ratios[key], float) and ratios[key] > 0, key

  # The frame-stack memory: measured in a subprocess, or said why not.
  frame_stack = config["frame_stack"]
  assert frame_stack["naive_gib"] > 0
  if frame_stack["status"] == "measured":
    assert frame_stack["peak_rss_gib"] > frame_stack["rss_gib_after_import"]
    assert "frame_stack_peak_rss_over_8gib_target" in ratios
  else:
    assert frame_stack["status"].startswith("not measured")

  # The summary line comes last.
  assert out.stdout.strip().splitlines()[-1].startswith("memory [quick]")
