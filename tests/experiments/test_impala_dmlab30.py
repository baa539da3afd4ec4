"""experiments/impala.py on DMLab-30 (`--env=dmlab:dmlab30`) with the fake
`deepmind_lab` (a shim on the env workers' PYTHONPATH): 2 actors x 15
envs cover the 30 levels; per-level returns and human-normalized scores
reach TensorBoard, the run ends with the per-level table and its JSON, and
the exported policy is evaluated on the 30 test levels in a fresh
process."""

import json
import re

import numpy as np
import pytest

from ingraph_rl.environments import dmlab30
from ingraph_rl.testing.tensorboard import scalars


# ~15 s: make test-all (make test's margin; the DM Lab worker path stays
# in make test through test_impala_dmlab and test_evaluate_dmlab).
@pytest.mark.slow
def test_dmlab30_training_logs_scores_per_level(tmp_path, fake_dmlab):
  logdir = tmp_path / "run"
  out = fake_dmlab.run(
    "impala",
    "--env=dmlab:dmlab30",
    "--num_actors=2",
    "--num_envs_per_actor=15",
    "--torso=small",
    "--unroll_length=10",
    "--batch_size=15",
    "--total_environment_frames=4200",
    "--queue_capacity=30",
    "--eval_episodes=1",
    "--log_every_seconds=0",
    f"--logdir={logdir}",
    # Two psychlab levels read it (the fake checks it is given).
    f"--dataset_path={tmp_path}",
    timeout=600,
  )
  assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
  stdout = out.stdout
  train = [dmlab30.short_name(level) for level in dmlab30.TRAIN_LEVELS]
  logged = scalars(logdir)

  # Every level's returns, as their own curves.
  for name in train:
    assert logged.get(f"charts/episodic_return/{name}"), name
  report = json.loads((logdir / "dmlab30_scores.json").read_text())
  assert list(report["levels"]) == train
  assert report["complete"] and report["window"] == 10
  capped, all_in_window = [], 0
  for name in train:
    row = report["levels"][name]
    test_name = dmlab30.LEVEL_MAPPING[name]
    assert row["scoring_level"] == test_name
    # The last 10 episodes; where those are all, their mean lies within
    # the level's logged per-update means.
    assert 1 <= row["episodes"] == min(row["total_episodes"], 10), name
    if row["total_episodes"] <= 10:
      all_in_window += 1
      points = [v for _, v in logged[f"charts/episodic_return/{name}"]]
      assert min(points) - 1e-4 <= row["mean_return"] <= max(points) + 1e-4
    human = dmlab30.HUMAN_SCORES[test_name]
    random = dmlab30.RANDOM_SCORES[test_name]
    score = 100 * (row["mean_return"] - random) / (human - random)
    assert row["human_normalized_score"] == pytest.approx(score)
    # The last periodic log (every update here) saw the same episodes.
    assert logged[f"dmlab30/hns/{name}"][-1][1] == pytest.approx(
      score, rel=1e-5
    )
    capped.append(min(score, 100.0))
  assert all_in_window >= 20
  assert report["mean_capped_hns"] == pytest.approx(np.mean(capped))
  assert logged["dmlab30/mean_capped_hns"][-1][1] == pytest.approx(
    np.mean(capped), rel=1e-5
  )

  # The table in the output, then the test levels' evaluation.
  table = stdout[stdout.index("[impala] DMLab-30 training returns") :]
  table = table[: table.index("mean capped")].splitlines()
  assert [line.split()[0] for line in table[2:]] == train
  assert f"(cap 100, DMLab-30): {np.mean(capped):.2f}" in stdout
  test = json.loads((logdir / "dmlab30_test_scores.json").read_text())
  assert list(test["levels"]) == list(dmlab30.TEST_LEVELS)
  assert all(row["episodes"] == 1 for row in test["levels"].values())
  assert test["complete"] and test["actions"] == "greedy"
  mean = np.mean([row["mean_return"] for row in test["levels"].values()])
  assert re.search(
    rf"greedy return of the exported policy in a fresh "
    rf"process: {mean:.1f} over 30 episodes",
    stdout,
  )
  assert logged["eval/dmlab30/mean_capped_hns"][-1][1] == pytest.approx(
    test["mean_capped_hns"], rel=1e-5
  )
  assert re.search(
    r"^\[impala\] last-100 training return -?\d+\.\d+ "
    r"\(\d+ of \d+ episodes\); wall time",
    stdout.strip().splitlines()[-1],
  )
