"""CheckpointSaver: a process killed (-9) in the middle of saving leaves a
latest checkpoint that restores cleanly; leftovers of the killed save are
removed; a save at the latest number never rewrites it in place."""

import doctest
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.testing.fresh_process import ROOT
from ingraph_rl.utils import checkpoints
from ingraph_rl.utils.checkpoints import CheckpointSaver

SIZE = 4 << 20  # float32s: 16 MB, so a save takes a while.

# Saves forever; every value equals the checkpoint's number, so a restored
# checkpoint is whole exactly when all of them agree. Each number is saved
# three times (plain CheckpointManager would rewrite it in place, and a kill
# then can corrupt the latest checkpoint).
CHILD = textwrap.dedent(f"""
    import sys
    import tensorflow as tf
    from ingraph_rl.utils.checkpoints import CheckpointSaver
    v = tf.Variable(tf.zeros([{SIZE}]))
    step = tf.Variable(0, dtype=tf.int64)
    saver = CheckpointSaver(tf.train.Checkpoint(v=v, step=step), sys.argv[1],
                            max_to_keep=2)
    for n in range(int(sys.argv[2]), 10**9):
      step.assign(n)
      v.assign(tf.fill([{SIZE}], float(n)))
      print("saving", n, flush=True)
      for _ in range(3):
        saver.save(checkpoint_number=n)
""")


def restore(directory):
  """(number in the name, step, first and last v) of the latest checkpoint."""
  latest = tf.train.latest_checkpoint(directory)
  assert latest is not None
  v = tf.Variable(tf.zeros([SIZE]))
  step = tf.Variable(0, dtype=tf.int64)
  tf.train.Checkpoint(v=v, step=step).restore(latest).assert_consumed()
  return (int(latest.rsplit("-", 1)[1]), int(step), float(v[0]), float(v[-1]))


@pytest.mark.slow
def test_kill_9_during_saves_never_corrupts_the_latest(tmp_path):
  directory = str(tmp_path / "ckpts")
  rng = random.Random(0)
  first = 1
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  for _ in range(3):  # Each start imports TF: ~10 s on 2 cores.
    proc = subprocess.Popen(
      [sys.executable, "-c", CHILD, directory, str(first)],
      cwd=ROOT,
      env=env,
      stdout=subprocess.PIPE,
      stderr=subprocess.DEVNULL,
      text=True,
    )
    try:
      # Let a few numbers be saved, timing them, then kill at a random moment
      # of the next one's saves.
      times = []
      for _ in range(rng.randint(3, 5)):
        line = proc.stdout.readline()
        assert line.startswith("saving"), line
        times.append(time.monotonic())
      time.sleep(rng.uniform(0.0, max(np.diff(times))))
    finally:
      proc.send_signal(signal.SIGKILL)
      proc.wait(timeout=30)
      proc.stdout.close()
    number, step, v_first, v_last = restore(directory)
    assert number == step == v_first == v_last
    first = number + 1
  # What a kill during a save left (its scratch files; unlisted ones) goes
  # when a saver is made; the listed checkpoints stay.
  saver = CheckpointSaver(tf.train.Checkpoint(), directory)
  listed = {os.path.basename(p) for p in saver.manager.checkpoints}
  for name in os.listdir(directory):
    assert name == "checkpoint" or name.split(".")[0] in listed, name


def test_same_number_is_not_rewritten_and_older_numbers_raise(tmp_path):
  step = tf.Variable(1, dtype=tf.int64)
  saver = CheckpointSaver(tf.train.Checkpoint(step=step), str(tmp_path))
  path = saver.save(checkpoint_number=1)
  index = path + ".index"
  mtime = os.stat(index).st_mtime_ns
  step.assign(2)
  assert saver.save(checkpoint_number=1) == path
  assert os.stat(index).st_mtime_ns == mtime
  saver.save(checkpoint_number=2)
  with pytest.raises(ValueError, match="must increase"):
    saver.save(checkpoint_number=1)


def test_restore_and_leftovers_of_a_first_killed_save(tmp_path):
  directory = str(tmp_path)
  step = tf.Variable(7, dtype=tf.int64)
  # No state file yet: a complete-looking unlisted checkpoint is kept, the
  # scratch dir goes.
  os.makedirs(os.path.join(directory, "ckpt-5_temp"))
  tf.train.Checkpoint(step=step).write(os.path.join(directory, "ckpt-5"))
  saver = CheckpointSaver(tf.train.Checkpoint(step=step), directory)
  assert not os.path.exists(os.path.join(directory, "ckpt-5_temp"))
  assert os.path.exists(os.path.join(directory, "ckpt-5.index"))
  assert saver.restore() is None
  saver.save(checkpoint_number=7)
  # Now the state lists ckpt-7 only: ckpt-5 is a leftover.
  step.assign(0)
  saver = CheckpointSaver(tf.train.Checkpoint(step=step), directory)
  assert not any(n.startswith("ckpt-5") for n in os.listdir(directory))
  assert saver.restore().endswith("ckpt-7")
  assert int(step) == 7
  assert np.array_equal(
    sorted(os.listdir(directory)),
    ["checkpoint", "ckpt-7.data-00000-of-00001", "ckpt-7.index"],
  )


def test_docstring_example_runs():
  result = doctest.testmod(checkpoints)
  assert result.attempted and not result.failed
