"""The fake deepmind_lab fails where the real one fails (next to
tensorflow, hold-out levels, the psychlab dataset), prints what real
levels print, costs its calibrated CPU per frame and per step, knows
DMLab-30, and is importable as `deepmind_lab` through a shim."""

import doctest
import json
import os
import signal
import subprocess
import sys

import pytest

from ingraph_rl.environments import dmlab30
from ingraph_rl.testing import deepmind_lab_shim, fake_deepmind_lab
from ingraph_rl.testing.fresh_process import ROOT


def _python(code, extra_path=(), timeout=120):
  env = dict(
    os.environ,
    PYTHONPATH=os.pathsep.join([*extra_path, str(ROOT)]),
    TF_CPP_MIN_LOG_LEVEL="3",
  )
  return subprocess.run(
    [sys.executable, "-c", code],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=timeout,
  )


LAB = (
  "fake_deepmind_lab.Lab('seekavoid_arena_01', ['RGB_INTERLEAVED'], "
  "{'width': '16', 'height': '12'})"
)


def test_aborts_at_lab_in_a_process_that_imported_tensorflow():
  # What the fake checks is sys.modules (a stand-in saves a slow TF import
  # here; the next test imports the real one).
  out = _python(
    "import sys, types\n"
    "sys.modules['tensorflow'] = types.ModuleType('tensorflow')\n"
    "from ingraph_rl.testing import fake_deepmind_lab\n"
    f"{LAB}\nprint('not reached')"
  )
  assert out.returncode == -signal.SIGABRT, out.stderr[-2000:]
  assert "not reached" not in out.stdout
  assert (
    "FATAL: Lab(...) in a process that has imported tensorflow" in out.stderr
  )


@pytest.mark.slow
def test_aborts_at_reset_once_tensorflow_is_imported_after_lab():
  out = _python(
    "from ingraph_rl.testing import fake_deepmind_lab\n"
    f"lab = {LAB}\nlab.reset(seed=1)\nprint('reset ok', "
    "flush=True)\nimport tensorflow\nlab.reset(seed=2)\n"
    "print('not reached')"
  )
  assert out.returncode == -signal.SIGABRT, out.stderr[-2000:]
  assert "reset ok" in out.stdout and "not reached" not in out.stdout
  assert (
    "FATAL: Lab.reset in a process that has imported tensorflow" in out.stderr
  )


CPU = """
import json, time
import numpy as np
from ingraph_rl.testing import fake_deepmind_lab
out = {}
for w, h in ((96, 72), (192, 144)):
  lab = fake_deepmind_lab.Lab("seekavoid_arena_01", ["RGB_INTERLEAVED"],
                              {"width": str(w), "height": str(h),
                               "episodeLengthFrames": "100000"})
  lab.reset(seed=0)
  action = np.zeros(7, np.intc)
  for _ in range(5):  # Warm-up: first calls pay one-off costs (~25 ms).
    lab.step(action, num_steps=4)
  start = time.process_time()
  for _ in range(200):
    lab.step(action, num_steps=4)
    lab.observations()
  out[f"{w}x{h}"] = (time.process_time() - start) / 200 * 1e3
print(json.dumps(out))
"""


def test_a_step_of_four_frames_costs_its_calibrated_cpu():
  out = _python(CPU)
  assert out.returncode == 0, out.stderr[-2000:]
  ms = json.loads(out.stdout)
  # CPU time (not wall time): the machine's load does not change it.
  # Four frames' spin (scaled by pixels) and one step call's, plus the
  # fake's own numpy work (< 0.6 ms).
  frame = fake_deepmind_lab.FRAME_CPU_SECONDS * 1e3
  call = fake_deepmind_lab.STEP_CPU_SECONDS * 1e3
  assert 4 * frame + call <= ms["96x72"] <= 4 * frame + call + 0.6, ms
  big = 4 * 4 * frame + call
  assert big <= ms["192x144"] <= big + 1.2, ms


def test_every_dmlab30_level_is_known_with_a_short_episode():
  for name in dmlab30.TRAIN_LEVELS + dmlab30.TEST_LEVELS:
    frames = fake_deepmind_lab.LEVELS[dmlab30.level_path(name)]
    assert 0 < frames <= 60, name
  assert "seekavoid_arena_01" in fake_deepmind_lab.LEVELS
  # Levels of a set end at different steps.
  assert (
    len({fake_deepmind_lab.LEVELS[level] for level in dmlab30.env_levels(30)})
    >= 5
  )


def test_shim_makes_the_fake_importable_as_deepmind_lab(tmp_path):
  shim = deepmind_lab_shim.write_deepmind_lab_shim(tmp_path / "shim")
  out = _python(
    "import sys, deepmind_lab\n"
    "print(deepmind_lab.Lab.__module__, "
    "'tensorflow' in sys.modules)",
    extra_path=[shim],
  )
  assert out.returncode == 0, out.stderr[-2000:]
  assert out.stdout.split() == ["ingraph_rl.testing.fake_deepmind_lab", "False"]
  environ = {"PYTHONPATH": "/elsewhere"}
  assert deepmind_lab_shim.use_fake_deepmind_lab(environ, shim) == shim
  assert environ["PYTHONPATH"] == shim + os.pathsep + "/elsewhere"
  failures, tried = doctest.testmod(deepmind_lab_shim)
  assert tried >= 4 and failures == 0


# What the real module refuses or prints (issue 39), in a TF-free process.
STRICT = r"""
import json, os, sys, time
import numpy as np
from ingraph_rl.testing import fake_deepmind_lab as f
out = {}
def lab(level, **config):
  config = {"width": "16", "height": "12", **config}
  return f.Lab(level, ["RGB_INTERLEAVED", "INSTR"], config)
d = "contributed/dmlab30/"
try:
  lab(d + "rooms_collect_good_objects_test")
except RuntimeError as e:
  out["hold_out"] = str(e)
held = lab(d + "rooms_collect_good_objects_test", allowHoldOutLevels="true")
held.reset(seed=1)
psy = lab(d + "psychlab_continuous_recognition")  # Loads: fails at reset.
try:
  psy.reset(seed=1)
except RuntimeError as e:
  out["dataset"] = str(e)
lab(d + "psychlab_continuous_recognition", datasetPath="/data").reset(seed=1)
lab(d + "psychlab_arbitrary_visuomotor_mapping", datasetPath="dummy").reset(
  seed=1)
lab(d + "psychlab_visual_search").reset(seed=1)  # Needs no dataset.
sys.stdout.write("--- specs\n"); sys.stdout.flush()
out["specs"] = [s["name"] for s in held.observation_spec()]
sys.stdout.write("--- maze\n"); sys.stdout.flush()
maze = lab(d + "explore_goal_locations_small")
for key, seed in (("first_reset_s", 3), ("second_reset_s", 4)):
  t = time.monotonic(); maze.reset(seed=seed); out[key] = time.monotonic() - t
sys.stdout.write("--- language\n"); sys.stdout.flush()
lab(d + "language_select_described_object").reset(seed=2)
print(json.dumps(out))
"""


def test_refuses_and_prints_what_the_real_module_does(monkeypatch):
  monkeypatch.setenv("FAKE_DEEPMIND_LAB_MAZE_LOAD_SECONDS", "0.5")
  out = _python(STRICT)
  assert out.returncode == 0, out.stderr[-2000:]
  stdout = out.stdout
  res = json.loads(stdout.strip().splitlines()[-1])
  # DM Lab's test_only.lua: at Lab(...), unless allowHoldOutLevels.
  assert res["hold_out"].startswith("Failed to init environment - ")
  assert (
    "test_only.lua:33: This level must only be used during evaluation"
    in (res["hold_out"])
  )
  assert '"allowHoldOutLevels" = "true" explicitly' in res["hold_out"]
  # brady_konkle_oliva2008.lua: at reset, unless datasetPath.
  assert res["dataset"].startswith("Failed to start environment - ")
  assert "brady_konkle_oliva2008.lua:37:" in res["dataset"]
  assert "data/brady_konkle_oliva2008/README.md" in res["dataset"]
  # Listing the specs warns of each deprecated name, on stderr.
  assert "RGB_INTERLACED" in res["specs"] and "RGBD_INTERLACED" in res["specs"]
  assert out.stderr.count("Using deprecated observation format:") == 2
  assert "Using deprecated observation format: 'RGB_INTERLACED'" in out.stderr
  # A maze level prints its map at each episode and compiles it once.
  maze = stdout[stdout.index("--- maze") : stdout.index("--- language")]
  assert maze.count("Generated maze with entity layer:") == 2
  assert res["first_reset_s"] >= 0.5 > res["second_reset_s"]
  language = stdout[stdout.index("--- language") :]
  assert "Instruction: " in language.splitlines()[1]
  assert "Instruction" not in stdout[: stdout.index("--- maze")]


def test_abort_on_demand_crashes_at_the_frame(monkeypatch):
  monkeypatch.setenv("FAKE_DEEPMIND_LAB_ABORT", "rooms_watermaze@6")
  out = _python(
    "import numpy as np\n"
    "from ingraph_rl.testing import fake_deepmind_lab as f\n"
    "lab = f.Lab('contributed/dmlab30/rooms_watermaze', ['RGB_INTERLEAVED'],"
    " {'width': '16', 'height': '12'})\n"
    "lab.reset(seed=0)\n"
    "lab.step(np.zeros(7, np.intc), num_steps=4)\n"
    "print('4 frames', flush=True)\n"
    "lab.step(np.zeros(7, np.intc), num_steps=4)\n"
    "print('not reached')"
  )
  assert out.returncode == -signal.SIGABRT
  assert "4 frames" in out.stdout and "not reached" not in out.stdout
  assert "crashed at frame 6" in out.stderr
