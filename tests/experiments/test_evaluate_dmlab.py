"""experiments/evaluate_dmlab.py end to end on the fake DM Lab (a shim on
the env workers' PYTHONPATH): a tiny exported LSTM policy plays the test
variants of three levels; the JSON's per-episode returns equal an
independent replay with the SavedModel, and its scores equal the IMPALA
paper's formula with the paper's numbers written out here."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig
from ingraph_rl.environments import make_vector_env
from ingraph_rl.export import export_policy
from ingraph_rl.spaces import Dict, IntBox, TextBox
from ingraph_rl.testing.deepmind_lab_shim import write_deepmind_lab_shim
from ingraph_rl.testing.fresh_process import ROOT

SCRIPT = ROOT / "experiments" / "evaluate_dmlab.py"
# Test level: (its index in the DMLab-30 table, human, random score).
PAPER = {
  "rooms_collect_good_objects_test": (0, 10.0, 0.073),
  "language_select_located_object": (6, 280.7, 1.929),
  "rooms_watermaze": (3, 54.0, 4.065),
}
SEED, EPISODES = 5, 2


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
  space = Dict(
    RGB_INTERLEAVED=IntBox(256, (12, 16, 3), dtype=np.uint8), INSTR=TextBox()
  )
  config = IMPALAConfig(
    num_actions=9,
    lstm_units=4,
    seed=2,
    torso=(
      {"type": "flatten"},
      {"type": "dense", "units": 8, "activation": "tanh"},
    ),
  )
  builder = IMPALABuilder(config)
  learner = builder.make_learner(space, "evaluate_dmlab_test").build()
  # Random weights of the learner's shapes, large enough that actions
  # change with the frames (not the near-uniform initial policy).
  rng = np.random.default_rng(0)
  weights = {
    k: rng.normal(0.0, 2.0 / np.sqrt(v.shape[0]), v.shape)
    for k, v in learner.execute("get_weights").items()
  }
  # Often forward (+1 a frame): a score above the cap somewhere.
  weights["policy_head/bias"][0] += 1.25
  weights = {k: tf.constant(v, tf.float32) for k, v in weights.items()}
  return export_policy(
    builder,
    space,
    weights,
    str(tmp_path_factory.mktemp("p") / "policy"),
    train_step=7,
  )


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
  return write_deepmind_lab_shim(tmp_path_factory.mktemp("shim"))


def evaluate(policy_dir, shim, output, *extra):
  out = run_script(policy_dir, shim, output, *extra)
  assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
  with open(output) as f:
    return json.load(f), out.stdout


def run_script(policy_dir, shim, output, *extra, environ=None):
  env = dict(os.environ, PYTHONPATH=shim, **(environ or {}))
  return subprocess.run(
    [
      sys.executable,
      str(SCRIPT),
      f"--saved_model={policy_dir}",
      f"--episodes={EPISODES}",
      f"--seed={SEED}",
      f"--output={output}",
      *extra,
    ],
    cwd="/",
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
  )


def replay(policy_dir, level, seed, episodes):
  """`episodes` greedy episode returns of the SavedModel on `level`, one
  env in a worker process (the fake by module name), fed step by step."""
  policy = tf.saved_model.load(policy_dir)
  act = policy.signatures["action"]
  env = make_vector_env(
    f"dmlab:contributed/dmlab30/{level}",
    1,
    seed=seed,
    width=16,
    height=12,
    instructions=True,
    lab_module="ingraph_rl.testing.fake_deepmind_lab",
  )
  try:
    obs = env.reset()
    state = policy.signatures["get_initial_state"](batch_size=tf.constant(1))
    first, reward, action, total, returns = True, 0.0, 0, 0.0, []
    while len(returns) < episodes:
      out = act(
        observation_RGB_INTERLEAVED=tf.constant(obs["RGB_INTERLEAVED"]),
        observation_INSTR=tf.constant(obs["INSTR"].astype(str)),
        first=tf.constant([first]),
        prev_reward=tf.constant([reward], tf.float32),
        prev_action=tf.constant([action], tf.int64),
        state_c=state["state_c"],
        state_h=state["state_h"],
      )
      state = {"state_c": out["state_c"], "state_h": out["state_h"]}
      action = int(out["greedy_action"].numpy()[0])
      step = env.step(np.array([action]))
      obs, reward = step.obs, float(step.rewards[0])
      total += reward
      first = bool(step.terminated[0] or step.truncated[0])
      if first:
        returns.append(total)
        total, reward, action = 0.0, 0.0, 0
    return returns
  finally:
    env.close()


@pytest.mark.slow
def test_scores_three_levels_as_an_independent_replay(
  policy_dir, shim, tmp_path
):
  # A train name is played (and scored) as its test variant.
  report, stdout = evaluate(
    policy_dir,
    shim,
    tmp_path / "scores.json",
    "--levels=rooms_collect_good_objects_train,"
    "language_select_located_object,contributed/dmlab30/rooms_watermaze",
    "--parallel=2",
  )
  assert list(report["levels"]) == [
    "rooms_collect_good_objects_test",
    "rooms_watermaze",
    "language_select_located_object",
  ]
  assert report["actions"] == "greedy" and report["train_step"] == 7
  assert report["episodes_per_level"] == EPISODES
  assert report["num_levels"] == 3 and not report["complete"]
  capped = []
  for level, (index, human, random) in PAPER.items():
    row = report["levels"][level]
    assert row["seed"] == SEED + index
    assert row["level"] == f"contributed/dmlab30/{level}"
    expected = replay(policy_dir, level, SEED + index, EPISODES)
    assert row["returns"] == expected, level
    assert row["episodes"] == EPISODES
    assert row["mean_return"] == pytest.approx(np.mean(expected))
    score = 100.0 * (np.mean(expected) - random) / (human - random)
    assert row["human_normalized_score"] == pytest.approx(score)
    capped.append(min(score, 100.0))
  assert report["mean_capped_hns"] == pytest.approx(np.mean(capped))
  # The episodes differ (the actions follow the frames), and a score is
  # capped (rooms_collect: human 10).
  assert (
    len({r for row in report["levels"].values() for r in row["returns"]}) >= 5
  )
  assert (
    max(row["human_normalized_score"] for row in report["levels"].values())
    > 100.0
  )
  lines = stdout.strip().splitlines()
  # The levels load in two batches of --parallel=2: a line as each starts
  # and one with the time it took.
  loading = [line for line in lines if line.startswith("loading")]
  assert [line.split(" in ")[0] for line in loading] == [
    "loading 2 DM Lab levels: 0/2",
    "loading 2 DM Lab levels: 2/2",
    "loading 1 DM Lab levels: 0/1",
    "loading 1 DM Lab levels: 1/1",
  ]
  assert re.fullmatch(r".* in \d+\.\d s", loading[1])
  head = next(i for i, line in enumerate(lines) if "[evaluate_dmlab]" in line)
  lines = lines[head:]
  assert lines[1].split() == ["level", "mean", "return", "episodes", "HNS"]
  assert lines[2].split()[0] == "rooms_collect_good_objects_test"
  assert lines[-2].endswith(
    f"(cap 100, 3 of 30 levels, not the DMLab-30 figure): {np.mean(capped):.2f}"
  )


@pytest.mark.slow
def test_sample_plays_sampled_actions(policy_dir, shim, tmp_path):
  level = "rooms_watermaze"
  report, _ = evaluate(
    policy_dir, shim, tmp_path / "s.json", f"--levels={level}", "--sample"
  )
  assert report["actions"] == "sampled"
  greedy = replay(policy_dir, level, SEED + 3, EPISODES)
  assert report["levels"][level]["returns"] != greedy


DATASET_LEVELS = (
  "psychlab_arbitrary_visuomotor_mapping",
  "psychlab_continuous_recognition",
)


LEVELS = "--levels=" + ",".join(DATASET_LEVELS + ("rooms_watermaze",))


@pytest.mark.slow
def test_dataset_levels_without_dataset_path_stop_before_any_env(
  policy_dir, shim, tmp_path
):
  # Without --dataset_path: stopped before any env starts, saying which
  # levels, which dataset, where to get it and what to pass.
  out = run_script(policy_dir, shim, tmp_path / "none.json", LEVELS)
  assert out.returncode != 0
  for text in DATASET_LEVELS + (
    "Brady, Konkle & Oliva (2008)",
    "data/brady_konkle_oliva2008/README.md",
    "--dataset_path=",
    "--skip_levels_without_dataset",
  ):
    assert text in out.stderr, text
  assert "loading" not in out.stdout
  assert not (tmp_path / "env_workers").exists()
  assert not (tmp_path / "none.json").exists()


@pytest.mark.slow  # ~30 s: make test-all.
def test_dataset_levels_are_skipped_or_played_with_the_dataset(
  policy_dir, shim, tmp_path
):
  # Skipped: the other levels are scored, the report says it is not whole
  # (exit 1 unless --allow_incomplete).
  skip = "--skip_levels_without_dataset"
  out = run_script(policy_dir, shim, tmp_path / "skip.json", LEVELS, skip)
  assert out.returncode == 1, out.stderr[-2000:]
  report, stdout = json.loads((tmp_path / "skip.json").read_text()), out.stdout
  assert report["skipped_levels"] == list(DATASET_LEVELS)
  assert report["failed_levels"] == [] and not report["complete"]
  assert report["num_levels"] == 1
  row = report["levels"]["rooms_watermaze"]
  assert row["returns"] == replay(policy_dir, "rooms_watermaze", SEED + 3, 2)
  for level in DATASET_LEVELS:
    assert report["levels"][level]["status"] == "skipped"
    assert report["levels"][level]["mean_return"] is None
  assert "loading 1 DM Lab levels: 1/1 in" in stdout
  assert "(cap 100, 1 of 30 levels, not the DMLab-30 figure)" in stdout
  assert "skipped: needs the Brady, Konkle & Oliva (2008)" in stdout
  assert "[evaluate_dmlab] incomplete: 0 level(s) failed, 2 skipped" in stdout

  # With the dataset (the fake needs a path, DM Lab reads its images).
  report, _ = evaluate(
    policy_dir,
    shim,
    tmp_path / "all.json",
    LEVELS,
    f"--dataset_path={tmp_path}",
  )
  assert report["num_levels"] == 3 and not report["skipped_levels"]
  for level in DATASET_LEVELS:
    assert report["levels"][level]["episodes"] == EPISODES


@pytest.mark.slow
def test_a_failing_level_is_reported_and_the_others_scored(
  policy_dir, shim, tmp_path
):
  # One level's worker crashes as it loads, one mid-episode; the hold-out
  # level (allowHoldOutLevels) and the maze level are still scored.
  output = tmp_path / "scores.json"
  out = run_script(
    policy_dir,
    shim,
    output,
    "--levels=rooms_watermaze,language_select_located_object,"
    "rooms_collect_good_objects_test,rooms_keys_doors_puzzle",
    "--allow_incomplete",  # Else exit 1 (test_..._skipped_or_played...).
    environ={
      "FAKE_DEEPMIND_LAB_ABORT": "rooms_watermaze@0,"
      "language_select_located_object@10"
    },
  )
  assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
  report = json.loads(output.read_text())
  assert report["failed_levels"] == [
    "language_select_located_object",
    "rooms_watermaze",
  ]
  assert not report["complete"] and report["num_levels"] == 2
  for level, frame in (
    ("rooms_watermaze", 0),
    ("language_select_located_object", 10),
  ):
    row = report["levels"][level]
    assert row["status"] == "failed" and row["mean_return"] is None
    assert "WorkerDiedError" in row["error"] and "SIGABRT" in row["error"]
    # The tail of the dead worker's log (its env_workers/ file).
    assert f"crashed at frame {frame}" in row["error"], row["error"]
    assert (
      str(tmp_path / "env_workers" / f"{level}_worker0.log") in (row["error"])
    )
  for level, index in (
    ("rooms_collect_good_objects_test", 0),
    ("rooms_keys_doors_puzzle", 4),
  ):
    row = report["levels"][level]
    assert row["returns"] == replay(policy_dir, level, SEED + index, EPISODES)
  lines = out.stdout.splitlines()
  failed = [line for line in lines if "  failed: WorkerDiedError" in line]
  assert [line.split()[0] for line in failed] == [
    "rooms_watermaze",
    "language_select_located_object",
  ]
  assert "(cap 100, 2 of 30 levels, not the DMLab-30 figure)" in out.stdout
  # The levels' own output stayed in their logs.
  assert "Instruction" not in out.stdout + out.stderr
  assert "Generated maze" not in out.stdout + out.stderr
  assert (
    "Generated maze"
    in (
      tmp_path / "env_workers" / "rooms_keys_doors_puzzle_worker0.log"
    ).read_text()
  )
