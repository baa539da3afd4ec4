"""The towers benchmark's --quick run works and writes the contract's JSON
(into a temporary folder, not over the committed results)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


# 20-50 s: `make test-all` (the impala_throughput smoke stays in `make test`).
@pytest.mark.slow
def test_quick_run_writes_contract_json(tmp_path):
  env = dict(os.environ, INGRAPH_RL_BENCH_RESULTS=str(tmp_path))
  out = subprocess.run(
    [sys.executable, "-m", "benchmarks.towers", "--quick"],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=240,
  )
  assert out.returncode == 0, out.stderr[-3000:]
  doc = json.loads((tmp_path / "towers.json").read_text())
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
