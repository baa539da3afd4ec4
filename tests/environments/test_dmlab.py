"""DM Lab through env worker processes, against the fake `deepmind_lab`.

This test process imports tensorflow, next to which real DM Lab crashes
(and the fake aborts): here DM Lab runs only in workers. The in-process
`DMLabVectorEnv` checks run in a fresh TF-free process
(dmlab_in_process_checks.py), and so do the in-process references that the
worker envs are compared with (env_rollout.py).
"""

import importlib.util
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf  # noqa: F401  (DM Lab's enemy, as in experiments)

from ingraph_rl.environments import (
  DMLabVectorEnv,
  WorkerDiedError,
  WorkerVectorEnv,
  dmlab30,
  make_vector_env,
)
from ingraph_rl.errors import EnvironmentNotAvailableError
from ingraph_rl.spaces import Dict, IntBox, TextBox
from ingraph_rl.testing import fake_deepmind_lab
from ingraph_rl.testing.deepmind_lab_shim import write_deepmind_lab_shim
from ingraph_rl.testing.fresh_process import ROOT

HERE = pathlib.Path(__file__).resolve().parent
FAKE = "ingraph_rl.testing.fake_deepmind_lab"
ARENA = "seekavoid_arena_01"
LANGUAGE = "contributed/dmlab30/language_select_described_object"
SMALL = dict(width=16, height=12, lab_module=FAKE)  # Cheap fake frames.


def _load(name):
  spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


rollouts = _load("env_rollout")


def _tf_free_environ():
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
  )
  return env


def reference_run(tmp_path, env_id, num_envs, seed, kwargs, plan):
  """`run_plan` of the env built in a fresh process without tensorflow."""
  spec = {
    "env_id": env_id,
    "num_envs": num_envs,
    "seed": seed,
    "kwargs": kwargs,
    "plan": plan,
  }
  out = tmp_path / "reference.npz"
  proc = subprocess.run(
    [sys.executable, str(HERE / "env_rollout.py"), json.dumps(spec), str(out)],
    env=_tf_free_environ(),
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  with np.load(out) as data:
    return dict(data)


def _plan(num_envs, steps, seed=0, reset_at=(), num_actions=9):
  rng = np.random.default_rng(seed)
  plan = [["reset", None]]
  for t in range(steps):
    if t in reset_at:
      plan.append(["reset", reset_at[t]])
    plan.append(["step", rng.integers(0, num_actions, num_envs).tolist()])
  return plan


@pytest.mark.slow
def test_in_process_checks_pass_in_a_tf_free_process():
  proc = subprocess.run(
    [
      sys.executable,
      "-m",
      "pytest",
      "-q",
      "-p",
      "no:cacheprovider",
      "--noconftest",
      str(HERE / "dmlab_in_process_checks.py"),
    ],
    cwd=ROOT,
    env=_tf_free_environ(),
    capture_output=True,
    text=True,
    timeout=180,
  )
  assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
  passed = re.search(r"(\d+) passed", proc.stdout)
  assert passed and int(passed.group(1)) >= 14, proc.stdout[-2000:]
  assert "failed" not in proc.stdout and "error" not in proc.stdout


def test_dmlab_vector_env_refuses_a_process_with_tensorflow():
  assert "tensorflow" in sys.modules
  for make in (
    lambda: DMLabVectorEnv(ARENA, 1, lab_module=FAKE),
    lambda: make_vector_env(
      "dmlab:" + ARENA, 1, processes=False, lab_module=FAKE
    ),
  ):
    with pytest.raises(RuntimeError, match="imported tensorflow") as info:
      make()
    assert "segfault" in str(info.value)
    assert "make_vector_env('dmlab:<level>'" in str(info.value)


@pytest.mark.slow
@pytest.mark.parametrize("envs_per_worker", [1, 2])
def test_workers_match_the_in_process_env(tmp_path, envs_per_worker):
  # 12..18 frames at 2 repeats and a 7-step limit: episodes end by the
  # level (terminated) and by the limit (truncated), at different steps.
  kwargs = dict(
    SMALL,
    num_action_repeats=2,
    max_episode_steps=7,
    config={"episodeLengthFrames": "12", "episodeLengthJitter": "6"},
  )
  plan = _plan(3, 26, reset_at={12: 11, 20: None})
  expected = reference_run(tmp_path, "dmlab:" + ARENA, 3, 2, kwargs, plan)
  assert expected["terminated"].any() and expected["truncated"].any()
  assert (expected["final_obs"] != expected["obs"]).any()
  with make_vector_env(
    "dmlab:" + ARENA, 3, seed=2, envs_per_worker=envs_per_worker, **kwargs
  ) as env:
    assert isinstance(env, WorkerVectorEnv)
    assert env.num_workers == (3 if envs_per_worker == 1 else 2)
    assert env.observation_space == IntBox(256, (12, 16, 3), dtype=np.uint8)
    assert env.action_space == IntBox(9)
    assert env.levels == (ARENA,) * 3
    rollouts.assert_same_runs(rollouts.run_plan(env, plan), expected)


def test_language_dict_observations_round_trip(tmp_path):
  kwargs = dict(SMALL, instructions=True, config={"episodeLengthFrames": "10"})
  plan = _plan(3, 12)
  expected = reference_run(tmp_path, "dmlab:" + LANGUAGE, 3, 1, kwargs, plan)
  with make_vector_env("dmlab:" + LANGUAGE, 3, seed=1, **kwargs) as env:
    assert env.observation_space == Dict(
      RGB_INTERLEAVED=IntBox(256, (12, 16, 3), dtype=np.uint8), INSTR=TextBox()
    )
    got = rollouts.run_plan(env, plan)
    obs = env.reset(seed=1)
    assert sorted(obs) == ["INSTR", "RGB_INTERLEAVED"]
    assert obs["INSTR"].dtype == object and obs["INSTR"].shape == (3,)
    assert all(
      isinstance(t, str) and t in fake_deepmind_lab.INSTRUCTIONS
      for t in obs["INSTR"]
    )
  rollouts.assert_same_runs(got, expected)
  assert obs["INSTR"].tolist() == expected["reset.INSTR"][0].tolist()
  # The texts changed at episode ends, and final_obs kept the old ones.
  assert (got["obs.INSTR"] != got["final_obs.INSTR"]).any()


def test_texts_longer_than_their_slot_are_a_clear_error():
  with pytest.raises(
    ValueError,
    match=r"\d+ bytes in UTF-8, longer than "
    r"its 8-byte shared-memory slot",
  ):
    env = make_vector_env(
      "dmlab:" + LANGUAGE,
      1,
      seed=0,
      instructions=True,
      worker_options={"text_bytes": 8},
      **SMALL,
    )
    try:
      env.reset()  # Every fake instruction is longer than 8 bytes.
    finally:
      env.close()


@pytest.mark.slow
def test_dmlab30_runs_level_i_mod_30_in_its_own_worker(tmp_path):
  plan = _plan(4, 20, seed=3)
  kwargs = dict(SMALL)
  expected = reference_run(tmp_path, "dmlab:dmlab30", 4, 5, kwargs, plan)
  with make_vector_env("dmlab:dmlab30", 4, seed=5, **kwargs) as env:
    assert env.num_workers == 4
    assert env.levels == dmlab30.env_levels(4)
    assert env.observation_space == Dict(
      RGB_INTERLEAVED=IntBox(256, (12, 16, 3), dtype=np.uint8), INSTR=TextBox()
    )
    got = rollouts.run_plan(env, plan)
  rollouts.assert_same_runs(got, expected)
  # Each env's episodes last its own level's length (4 frames a step).
  for i, level in enumerate(env.levels):
    lengths = set(got["episode_lengths"][:, i]) - {0}
    assert lengths == {-(-fake_deepmind_lab.LEVELS[level] // 4)}, level
  # Grouped workers continue the level cycle; the test variants.
  with make_vector_env("dmlab:dmlab30", 5, envs_per_worker=2, **kwargs) as env:
    assert env.num_workers == 3 and env.levels == dmlab30.env_levels(5)
  with make_vector_env("dmlab:dmlab30_test", 2, **kwargs) as env:
    assert env.levels == dmlab30.env_levels(2, test=True)
    assert env.levels[0].endswith("rooms_collect_good_objects_test")
  with make_vector_env("dmlab:dmlab30", 1, test=True, **kwargs) as env:
    assert env.levels == dmlab30.env_levels(1, test=True)


def test_workers_import_neither_tensorflow_nor_torch(tmp_path, monkeypatch):
  with make_vector_env("dmlab:dmlab30", 2, envs_per_worker=1, **SMALL) as env:
    for modules in env.worker_modules():
      assert FAKE in modules and "ingraph_rl.environments.dmlab" in modules
      assert not [
        m for m in modules if m.split(".")[0] in ("tensorflow", "torch")
      ]
  # The fake under the real module's name, as experiments use it.
  shim = write_deepmind_lab_shim(tmp_path / "shim")
  monkeypatch.setenv("PYTHONPATH", shim)
  with make_vector_env("dmlab:" + ARENA, 2, width=16, height=12) as env:
    env.reset()
    env.step([0, 1])
    for modules in env.worker_modules():
      assert "deepmind_lab" in modules and FAKE in modules
      assert "tensorflow" not in modules and "torch" not in modules


def test_without_deepmind_lab_workers_raise_the_install_hint(monkeypatch):
  monkeypatch.delenv("PYTHONPATH", raising=False)
  with pytest.raises(EnvironmentNotAvailableError) as info:
    make_vector_env("dmlab:" + ARENA, 2)
  assert isinstance(info.value, ImportError)
  assert info.value.name == "deepmind_lab"
  message = str(info.value)
  # Both workers fail; whichever answers first is named.
  assert re.search(r"env worker [01] ", message), message
  assert "dmlab:" + ARENA in message
  for hint in ("github.com/deepmind/lab", "bazel", "pip install"):
    assert hint in message, hint


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
def test_a_worker_that_dies_mid_run_is_a_clear_error(sig):
  env = make_vector_env("dmlab:" + ARENA, 3, seed=0, **SMALL)
  try:
    env.reset()
    victim = env.pids[1]
    timer = threading.Timer(0.3, os.kill, (victim, sig))
    timer.start()
    start = time.monotonic()
    with pytest.raises(WorkerDiedError) as info:
      while time.monotonic() - start < 20:
        env.step(np.zeros(3, np.int64))
    timer.join()
    assert time.monotonic() - start < 10
    message = str(info.value)
    assert (
      f"env worker 1 (pid {victim}; env 1 of 3: dmlab:{ARENA})" in message
    ), message
    assert f"exit code {-sig} ({sig.name})" in message, message
    with pytest.raises(WorkerDiedError, match="env worker 1"):
      env.step(np.zeros(3, np.int64))
  finally:
    start = time.monotonic()
    env.close()
    assert time.monotonic() - start < 6
