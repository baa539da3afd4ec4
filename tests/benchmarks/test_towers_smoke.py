"""The towers benchmark's --quick run works and writes the contract's JSON
(into a temporary folder, not over the committed results)."""

import pytest


# 20-50 s: `make test-all` (the impala_throughput smoke stays in `make test`).
@pytest.mark.slow
def test_quick_run_writes_contract_json(run_quick, tmp_path):
  doc, out = run_quick("towers")
  assert doc["benchmark"] == "towers" and doc["quick"] is True
  assert set(doc["machine"]) >= {"cpu", "cores", "gpu", "tf", "torch"}
  cases = {r["case"] for r in doc["results"]}
  assert cases == {
    f"{c}/{v}"
    for c in ("impala_b8", "dqn_b64")
    for v in ("default", "towers_1", "towers_2")
  }
  for r in doc["results"]:
    assert r["reps"] >= 1 and 0 < r["min"] <= r["median"] <= r["max"]
    assert r["unit"] in ("updates/s", "ms")
  for c in ("impala_b8", "dqn_b64"):
    for key in (
      "towers_1_over_default",
      "towers_2_over_default",
      "towers_2_over_towers_1",
    ):
      assert doc["ratios"][f"{c}_{key}"] > 0
    first = doc["config"]["cases"][c]["first_update_loss (checked equal)"]
    assert set(first) == {"default", "towers_1", "towers_2"}
  if doc["machine"]["gpu"] is None:
    assert "OVERHEAD of towers, not a speed-up" in doc["config"]["devices_are"]
    assert doc["config"]["tower_devices"] == ["/device:CPU:0", "/device:CPU:1"]
  assert not (tmp_path / "towers.png").exists()  # Plots: full runs only.
  last = out.stdout.strip().splitlines()[-1]
  assert last.startswith("towers [quick]")
