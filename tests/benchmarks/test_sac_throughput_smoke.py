"""The SAC throughput benchmark's --quick run works and writes the
contract's JSON (into a temporary folder, not over the committed
results)."""

import pytest


# Two agents built and ~700 env steps with updates each: `make test-all`.
@pytest.mark.slow
def test_quick_run_writes_contract_json(run_quick, tmp_path):
  doc, out = run_quick("sac_throughput")
  assert doc["benchmark"] == "sac_throughput" and doc["quick"] is True
  assert set(doc["machine"]) >= {"cpu", "cores", "gpu", "tf", "torch"}
  units = {r["unit"] for r in doc["results"]}
  assert {"ours", "cleanrl_style_torch", "ms"} <= units
  for r in doc["results"]:
    assert r["reps"] >= 1 and r["min"] <= r["median"] <= r["max"]
  for key in (
    "halfcheetah_env_steps_per_s_over_cleanrl_style_torch",
    "halfcheetah_in_graph_over_update_limit",
  ):
    assert doc["ratios"][key] > 0
  assert not (tmp_path / "sac_throughput.png").exists()  # Full runs only.
  assert out.stdout.strip().splitlines()[-1].startswith("sac_throughput")
