"""experiments/impala.py on DM Lab levels as the real module loads them
(issue 39), with the strict fake: what it refuses before any env starts
(hold-out levels, the psychlab dataset), the actors' levels loading at
once with one progress line, and a DMLab-30 run without the dataset that
skips its levels (training and the end-of-run evaluation: complete:
false)."""

import dataclasses
import json
import os
import re
import time

import pytest
from absl import app

from experiments import configs, dmlab_settings, impala_envs
from ingraph_rl.environments import dmlab30


@pytest.mark.slow
def test_refused_before_any_env_starts(tmp_path, fake_dmlab):
  # The dataset levels of DMLab-30, from the command line.
  logdir = tmp_path / "run"
  out = fake_dmlab.run(
    "impala", "--env=dmlab:dmlab30", f"--logdir={logdir}", timeout=300
  )
  assert out.returncode != 0
  assert (
    "levels ['psychlab_arbitrary_visuomotor_mapping', "
    "'psychlab_continuous_recognition'] need the Brady, Konkle & Oliva "
    "(2008) image dataset" in out.stderr
  ), out.stderr[-2000:]
  assert "data/brady_konkle_oliva2008/README.md" in out.stderr
  assert not (logdir / "env_workers").exists()  # No env worker started.
  # Training on a hold-out level: DM Lab's reason, before any env.
  for env in (
    "dmlab:contributed/dmlab30/rooms_exploit_deferred_effects_test",
    "dmlab:dmlab30_test",
  ):
    settings = dataclasses.replace(configs.IMPALASettings(), env=env)
    with pytest.raises(
      app.UsageError, match="must only be used during evaluation"
    ):
      impala_envs.dmlab_preflight(settings, dmlab_settings.DMLabSettings())
  # With the dataset (or skipping its levels) DMLab-30 passes.
  settings = dataclasses.replace(configs.IMPALASettings(), env="dmlab:dmlab30")
  for dmlab in (
    dmlab_settings.DMLabSettings(dataset_path=str(tmp_path)),
    dmlab_settings.DMLabSettings(skip_levels_without_dataset=True),
  ):
    impala_envs.dmlab_preflight(settings, dmlab)


@pytest.mark.slow
def test_actor_levels_load_at_once(tmp_path, monkeypatch, capsys, fake_dmlab):
  monkeypatch.setenv("PYTHONPATH", fake_dmlab.env["PYTHONPATH"])
  settings = dataclasses.replace(
    configs.IMPALASettings(),
    env="dmlab:dmlab30",
    num_envs_per_actor=2,
    num_actors=2,
  )
  dmlab = dmlab_settings.DMLabSettings()

  def build(load_s, log_dir):
    monkeypatch.setenv("FAKE_DEEPMIND_LAB_MAZE_LOAD_SECONDS", str(load_s))
    factory = impala_envs.env_factory(settings, 1, dmlab, str(log_dir))
    start = time.monotonic()
    envs = impala_envs.make_actor_envs(factory, 2, 2)
    took = time.monotonic() - start
    levels = [env.levels for env in envs]
    for env in envs:
      env.close()
    return took, levels

  startup, _ = build(0.0, tmp_path / "startup")  # Workers start (loaded CI).
  capsys.readouterr()
  load_s = 3.0
  took, levels = build(load_s, tmp_path / "logs")
  # Levels 0-3: rooms levels, each compiling a maze for load_s. An actor
  # after the other would add 2 x load_s at least.
  assert levels == [dmlab30.env_levels(2), dmlab30.env_levels(2, offset=2)]
  assert load_s <= took - startup + 0.5 and took - startup < 1.5 * load_s, (
    took,
    startup,
  )
  lines = capsys.readouterr().out.splitlines()
  assert lines[0] == "loading 4 DM Lab levels: 0/4"
  assert re.fullmatch(r"loading 4 DM Lab levels: 4/4 in \d+\.\d s", lines[-1])
  logs = tmp_path / "logs"
  assert sorted(os.listdir(logs)) == [
    "actor0_worker0.log",
    "actor0_worker1.log",
    "actor1_worker0.log",
    "actor1_worker1.log",
  ]
  assert "Generated maze" in (logs / "actor1_worker1.log").read_text()


# ~20 s: make test-all.
@pytest.mark.slow
def test_dmlab30_without_the_dataset_skips_its_levels(tmp_path, fake_dmlab):
  logdir = tmp_path / "run"
  out = fake_dmlab.run(
    "impala",
    "--env=dmlab:dmlab30",
    "--skip_levels_without_dataset",
    "--num_actors=2",
    "--num_envs_per_actor=14",
    "--torso=small",
    "--unroll_length=10",
    "--batch_size=14",
    "--total_environment_frames=2000",
    "--queue_capacity=28",
    "--eval_episodes=1",
    f"--logdir={logdir}",
    timeout=600,
  )
  assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
  # Trained on the 28 others; no level output on the console.
  train = json.loads((logdir / "dmlab30_scores.json").read_text())
  trained = [k for k, row in train["levels"].items() if row["episodes"]]
  assert sorted(trained) == sorted(
    dmlab30.short_name(level)
    for level in dmlab30.TRAIN_LEVELS
    if not dmlab30.needs_dataset(level)
  )
  assert "loading 28 DM Lab levels: 28/28 in" in out.stdout
  for text in ("Instruction", "Generated maze", "deprecated"):
    assert text not in out.stdout + out.stderr, text
  assert len(os.listdir(logdir / "env_workers")) >= 28
  # The end-of-run evaluation skipped them too, and says so.
  test = json.loads((logdir / "dmlab30_test_scores.json").read_text())
  assert not test["complete"] and test["num_levels"] == 28
  assert test["skipped_levels"] == list(dmlab30.DATASET_LEVELS)
  assert "(cap 100, 28 of 30 levels, not the DMLab-30 figure)" in out.stdout
  assert "evaluation incomplete (complete: false)" in out.stdout


# ~15 s: make test-all.
@pytest.mark.slow
def test_a_dataset_level_trains_and_plays_with_dataset_path(
  tmp_path, fake_dmlab
):
  env = "--env=dmlab:contributed/dmlab30/psychlab_continuous_recognition"
  out = fake_dmlab.run("impala", env, f"--logdir={tmp_path}/a", timeout=300)
  assert out.returncode != 0
  assert "--dataset_path=<its directory>" in out.stderr
  assert "--skip_levels_without_dataset" not in out.stderr  # One level.
  out = fake_dmlab.run(
    "impala",
    env,
    f"--dataset_path={tmp_path}",
    "--num_actors=1",
    "--num_envs_per_actor=2",
    "--torso=small",
    "--unroll_length=10",
    "--batch_size=2",
    "--total_environment_frames=400",
    "--eval_episodes=1",
    f"--logdir={tmp_path}/b",
    timeout=600,
  )
  assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
  # The fresh-process player got the dataset too.
  assert "greedy return of the exported policy in a fresh process" in (
    out.stdout
  )
  assert sorted(os.listdir(tmp_path / "b" / "env_workers")) == [
    "actor0_worker0.log",
    "actor0_worker1.log",
    "probe_worker0.log",
  ]
