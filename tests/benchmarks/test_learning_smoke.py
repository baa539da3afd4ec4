"""The learning benchmark's --quick run trains both CartPole presets for a
few seconds each and writes the contract's JSON with the curves read back
from TensorBoard (into a temporary folder, not over the committed
results)."""

import pytest


@pytest.mark.slow
def test_quick_run_writes_curves_and_ratios(run_quick, tmp_path):
  doc, out = run_quick("learning", timeout=400)
  assert doc["benchmark"] == "learning" and doc["quick"] is True
  assert set(doc["cases"]) == {"impala_cartpole", "dqn_cartpole"}
  for name, case in doc["cases"].items():
    (run,) = case["runs"]
    curve = run["curve"]
    assert curve, name
    frames = [p["frames"] for p in curve]
    seconds = [p["seconds"] for p in curve]
    assert frames == sorted(frames) and frames[-1] > 0
    assert seconds == sorted(seconds) and 0 < seconds[-1] <= run["wall_s"]
    # CartPole returns lie in [1, 500].
    assert all(1.0 <= p["last100"] <= 500.0 for p in curve)
    assert run["greedy"] is not None and 1.0 <= run["greedy"] <= 500.0
  # The ratios count the seeds that met each case's threshold.
  (dqn,) = doc["cases"]["dqn_cartpole"]["runs"]
  assert doc["ratios"]["dqn_cartpole_seeds_reaching_195"] == int(
    dqn["greedy"] >= 195
  )
  (impala,) = doc["cases"]["impala_cartpole"]["runs"]
  assert doc["ratios"]["impala_cartpole_seeds_reaching_500_in_120s"] == int(
    impala["greedy"] >= 500
  )
  assert not (tmp_path / "learning.png").exists()
  assert out.stdout.strip().splitlines()[-1].startswith("learning")
