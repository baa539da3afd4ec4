"""DM Lab levels as the real module loads them (issue 39), through env
workers on the strict fake `deepmind_lab`: hold-out levels, quiet workers
with their logs, a dead worker's log tail, LP_NUM_THREADS, and levels that
load in parallel with one progress line.

This test process imports tensorflow (DM Lab's enemy): DM Lab runs only in
workers here.
"""

import io
import os
import re
import time

import numpy as np
import pytest
import tensorflow as tf  # noqa: F401  (as in the experiments)

from ingraph_rl.environments import WorkerDiedError, make_vector_env
from ingraph_rl.environments.load_progress import LoadProgress
from ingraph_rl.runners.environments import make_actor_env

FAKE = "ingraph_rl.testing.fake_deepmind_lab"
SMALL = dict(width=16, height=12, lab_module=FAKE)
HOLD_OUT = "dmlab:contributed/dmlab30/rooms_collect_good_objects_test"


def test_hold_out_levels_load_for_evaluation_not_for_training():
  # Asked for by name (evaluation), a hold-out level gets
  # allowHoldOutLevels: the fake, like DM Lab, refuses it otherwise.
  with make_vector_env(HOLD_OUT, 1, seed=0, **SMALL) as env:
    assert env.reset().shape == (1, 12, 16, 3)
  with make_vector_env("dmlab:dmlab30_test", 2, seed=0, **SMALL) as env:
    env.reset()
  # Said explicitly, the refusal is DM Lab's, with its message.
  with pytest.raises(RuntimeError, match="test_only.lua:33: This level must"):
    make_vector_env(
      HOLD_OUT, 1, config={"allowHoldOutLevels": False}, **SMALL
    ).close()
  # Actors train on their envs: refused before any worker starts.
  for env_id, kwargs in ((HOLD_OUT, {}), ("dmlab:dmlab30", {"test": True})):
    with pytest.raises(ValueError, match="must only be used during evaluation"):
      make_actor_env(env_id, 1, **kwargs, **SMALL)


def _actions(n, seed=0):
  return np.random.default_rng(seed).integers(0, 9, n)


def test_workers_keep_levels_quiet_and_log_what_they_print(capfd, tmp_path):
  # Levels 4..7: a maze level (an ASCII map per episode) and three
  # language levels (an instruction per episode).
  env = make_vector_env(
    "dmlab:dmlab30",
    4,
    seed=0,
    level_offset=4,
    worker_options={"log_dir": str(tmp_path), "log_name": "w"},
    **SMALL,
  )
  with env:
    env.reset()
    for i in range(40):  # Several episodes each.
      env.step(_actions(4, i))
  out, err = capfd.readouterr()
  for text in (out, err):
    assert "Instruction" not in text and "Generated maze" not in text
    assert "deprecated" not in text  # No observation_spec() listing.
  logs = {p.name: p.read_text() for p in tmp_path.iterdir()}
  assert sorted(logs) == ["w0.log", "w1.log", "w2.log", "w3.log"]
  assert logs["w0.log"].count("Generated maze with entity layer:") >= 2
  for name in ("w1.log", "w2.log", "w3.log"):
    assert logs[name].count("Instruction: ") >= 2, name
  assert not any("deprecated" in text for text in logs.values())


def test_a_dead_workers_error_ends_with_its_log(monkeypatch):
  language = "language_select_described_object"
  monkeypatch.setenv("FAKE_DEEPMIND_LAB_ABORT", f"{language}@9")
  env = make_vector_env(f"dmlab:contributed/dmlab30/{language}", 1, **SMALL)
  log_dir = env.log_dir
  with pytest.raises(WorkerDiedError) as info:
    env.reset()
    for i in range(10):
      env.step(_actions(1, i))
  message = str(info.value)
  assert "exit code -6 (SIGABRT)" in message
  tail = message[message.index("the end of its log") :]
  assert f"{log_dir}/env" in tail
  assert "Instruction: " in tail and "crashed at frame 9" in tail
  env.close()
  assert os.path.isdir(log_dir)  # Kept: a worker died.
  monkeypatch.delenv("FAKE_DEEPMIND_LAB_ABORT")
  with make_vector_env("dmlab:seekavoid_arena_01", 1, **SMALL) as env:
    env.reset()
    log_dir = env.log_dir
  assert not os.path.exists(log_dir)  # A temporary one, nothing died.


def _environ(pid):
  with open(f"/proc/{pid}/environ", "rb") as f:
    return dict(
      item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item
    )


def test_dmlab_workers_rasterize_on_their_own_thread(monkeypatch):
  monkeypatch.delenv("LP_NUM_THREADS", raising=False)
  with make_vector_env("dmlab:seekavoid_arena_01", 1, **SMALL) as env:
    assert _environ(env.pids[0])[b"LP_NUM_THREADS"] == b"0"
  with make_vector_env("CartPole-v1", 1, processes=True) as env:
    assert b"LP_NUM_THREADS" not in _environ(env.pids[0])
  monkeypatch.setenv("LP_NUM_THREADS", "3")  # The user's choice stays.
  with make_vector_env("dmlab:seekavoid_arena_01", 1, **SMALL) as env:
    assert _environ(env.pids[0])[b"LP_NUM_THREADS"] == b"3"


@pytest.mark.slow
def test_levels_load_in_parallel_with_one_progress_line(monkeypatch):
  def build(load_s, progress=None):
    monkeypatch.setenv("FAKE_DEEPMIND_LAB_MAZE_LOAD_SECONDS", str(load_s))
    start = time.monotonic()
    # Four maze levels (explore_*), each compiling its map for load_s.
    env = make_vector_env(
      "dmlab:dmlab30",
      4,
      seed=3,
      level_offset=22,
      worker_options={"load_progress": progress},
      **SMALL,
    )
    return env, time.monotonic() - start

  env, startup = build(0.0)  # The workers' own start (a loaded machine).
  env.close()
  load_s = 2.0
  stream = io.StringIO()
  progress = LoadProgress(4, stream=stream)
  env, took = build(load_s, progress)
  with env:
    progress.finish()
    assert all("explore_" in level for level in env.levels)
    # In turn they would add 4 x load_s; the first reset is loaded.
    assert load_s <= took - startup + 0.5 and took - startup < 3 * load_s, (
      took,
      startup,
    )
    start = time.monotonic()
    env.reset()
    assert time.monotonic() - start < load_s / 2
  lines = stream.getvalue().splitlines()
  assert lines[0] == "loading 4 DM Lab levels: 0/4"
  assert re.fullmatch(r"loading 4 DM Lab levels: 4/4 in \d+\.\d s", lines[-1])
