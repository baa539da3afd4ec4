"""The fake deepmind_lab fails where the real one fails (next to
tensorflow), costs ~0.4 ms of CPU per 96x72 frame, knows DMLab-30, and is
importable as `deepmind_lab` through a shim."""

import doctest
import json
import os
import signal
import subprocess
import sys

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


def test_a_step_of_four_frames_costs_about_1_6_ms_of_cpu():
  out = _python(CPU)
  assert out.returncode == 0, out.stderr[-2000:]
  ms = json.loads(out.stdout)
  # CPU time (not wall time): the machine's load does not change it.
  assert 1.55 <= ms["96x72"] <= 2.2, ms
  assert 4 * 1.55 <= ms["192x144"] <= 4 * 2.2, ms


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
