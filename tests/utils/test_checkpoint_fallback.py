"""A checkpoint that does not read (truncated, or bytes flipped in its data
file) is reported in one line, moved aside as `ckpt-N.corrupt` (its files
kept) and the newest one that reads is restored; with none that reads,
restore stops with a CheckpointError, on this run and the next."""

import os

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.utils.checkpoints import CheckpointError, CheckpointSaver

SIZE = 4096


def saved(directory, numbers=(400, 600, 800)):
  """Checkpoints whose values equal their number."""
  v = tf.Variable(tf.zeros([SIZE]))
  saver = CheckpointSaver(tf.train.Checkpoint(v=v), directory)
  for n in numbers:
    v.assign(tf.fill([SIZE], float(n)))
    saver.save(n)
  return saver


def fresh(directory):
  """A new run's saver and variable."""
  v = tf.Variable(tf.zeros([SIZE]))
  return CheckpointSaver(tf.train.Checkpoint(v=v), directory), v


def data_file(directory, number):
  (name,) = [
    n for n in os.listdir(directory) if n.startswith(f"ckpt-{number}.data")
  ]
  return os.path.join(directory, name)


def truncate(path):
  with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) // 2)


def flip(path):
  with open(path, "r+b") as f:
    f.seek(1000)
    data = f.read(64)
    f.seek(1000)
    f.write(bytes(b ^ 0xFF for b in data))


@pytest.mark.parametrize("damage", [truncate, flip], ids=["truncated", "flip"])
def test_falls_back_to_the_newest_that_reads(tmp_path, damage):
  directory = str(tmp_path / "ckpts")
  saved(directory)
  damage(data_file(directory, 800))
  saver, v = fresh(directory)
  lines = []
  path = saver.restore(log=lines.append)
  assert path.endswith("ckpt-600")
  np.testing.assert_array_equal(v.numpy(), 600.0)
  # One line for the bad one (which, why, where it went), one for the
  # fallback.
  assert len(lines) == 2 and all("\n" not in x for x in lines)
  assert "ckpt-800 does not read (" in lines[0]
  assert "ckpt-800.corrupt" in lines[0] and "ckpt-600" in lines[1]
  aside = os.path.join(directory, "ckpt-800.corrupt")
  assert sorted(os.listdir(aside))[0] == "ckpt-800.data-00000-of-00001"
  assert not any(
    n.startswith("ckpt-800.")
    for n in os.listdir(directory)
    if n != "ckpt-800.corrupt"
  )
  # The next run restores ckpt-600 without a word; saving goes on.
  again, v = fresh(directory)
  quiet = []
  assert again.restore(log=quiet.append).endswith("ckpt-600") and not quiet
  v.assign(tf.fill([SIZE], 900.0))
  assert again.save(900).endswith("ckpt-900")
  assert fresh(directory)[0].restore().endswith("ckpt-900")


def test_none_readable_stops_with_a_clear_error(tmp_path):
  directory = str(tmp_path / "ckpts")
  saved(directory)
  for n in (400, 600, 800):
    truncate(data_file(directory, n))
  saver, _ = fresh(directory)
  lines = []
  with pytest.raises(CheckpointError, match="no checkpoint in .* reads"):
    saver.restore(log=lines.append)
  assert len(lines) == 3
  corrupt = sorted(n for n in os.listdir(directory) if ".corrupt" in n)
  assert corrupt == [f"ckpt-{n}.corrupt" for n in (400, 600, 800)]
  # Nothing deleted: every data file is still there, aside.
  for n in (400, 600, 800):
    assert os.listdir(os.path.join(directory, f"ckpt-{n}.corrupt"))
  # A rerun does not silently start over either.
  with pytest.raises(CheckpointError, match="Not starting over"):
    fresh(directory)[0].restore()
