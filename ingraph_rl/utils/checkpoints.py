"""Checkpoints that survive `kill -9` (and, on local disks, power loss).

    >>> import tempfile
    >>> import tensorflow as tf
    >>> step = tf.Variable(0, dtype=tf.int64)
    >>> saver = CheckpointSaver(tf.train.Checkpoint(step=step),
    ...                         tempfile.mkdtemp())
    >>> saver.restore() is None                    # Nothing saved yet.
    True
    >>> _ = step.assign(250)
    >>> saver.save(checkpoint_number=250).endswith("ckpt-250")
    True

`tf.train.CheckpointManager` (TF 2.21) already orders a save safely: the
tensors go to `ckpt-N_temp/`, are merged into `ckpt-N.index` and
`ckpt-N.data-*`, and only then is the `checkpoint` state file (what
`tf.train.latest_checkpoint` reads) replaced by an atomic rename. A kill at
any point leaves the state naming the previous, complete checkpoint. Three
gaps remain, which `CheckpointSaver` closes:

* Saving the number of the latest checkpoint again rewrites its files in
  place (the data file is renamed over, the index truncated and rewritten),
  so a kill in between leaves the latest checkpoint failing its checksums.
  The experiments do that when the final save follows a periodic one at the
  same step, or when a finished run is rerun. Here a save at the latest
  checkpoint's number is skipped: the number is the step counter, and a
  step counter that did not move means a state that did not change.
* Nothing is fsync'ed, so after an OS crash the renamed state file can name
  data that never reached the disk. Here the checkpoint's files and
  directory are synced before the state file names them, and the state file
  after.
* A killed save leaves `ckpt-N_temp/` or an unlisted `ckpt-N.*` behind, and
  the manager never deletes them (they are not in its list). Here they are
  removed when the saver is made.

One saver (one process) per directory.
"""

import os
import re
import shutil
import threading

import tensorflow as tf

# What a save of prefix "ckpt" leaves: `ckpt-N.index`, `ckpt-N.data-*`, the
# merge's scratch dir `ckpt-N_temp`, and BundleWriter's `*.tempstate*`.
_FILE = re.compile(r"^(ckpt-\d+)(\.index|\.data-\d+-of-\d+|_temp)$")
_TEMP = re.compile(r"(\.tempstate\d*|^checkpoint\.tmp[0-9a-f]+)$")


def _local(path):
  return "://" not in path


def _fsync(path):
  fd = os.open(path, os.O_RDONLY)
  try:
    os.fsync(fd)
  finally:
    os.close(fd)


def _fsync_dir(path):
  if os.name == "posix":  # Windows cannot open a directory to sync it.
    _fsync(path)


class CheckpointSaver:
  """A `tf.train.CheckpointManager` (prefix "ckpt", so
  `tf.train.latest_checkpoint` and a plain manager read its directory) whose
  saves never leave a corrupt latest checkpoint; see the module docstring.

  Args:
    checkpoint: the `tf.train.Checkpoint` to save and restore.
    directory: where the checkpoints go (made if missing).
    max_to_keep: checkpoints kept (>= 2, so the one the state named before a
      save still exists until the new state is on disk).
  """

  def __init__(self, checkpoint, directory, max_to_keep=3):
    if max_to_keep < 2:
      raise ValueError(f"max_to_keep must be >= 2, got {max_to_keep}")
    self.checkpoint = checkpoint
    self.directory = directory
    self._lock = threading.Lock()
    if _local(directory):
      os.makedirs(directory, exist_ok=True)
      self._remove_leftovers()
    self.manager = tf.train.CheckpointManager(
      checkpoint, directory, max_to_keep=max_to_keep
    )

  @property
  def latest_checkpoint(self):
    """The prefix of the newest complete checkpoint, or None."""
    return self.manager.latest_checkpoint

  def restore(self):
    """Restores the latest checkpoint, if any, and returns its prefix (None
    when there is none). Every object of `checkpoint` must be in it."""
    path = self.latest_checkpoint
    if path is not None:
      self.checkpoint.restore(path).assert_existing_objects_matched()
    return path

  def save(self, checkpoint_number):
    """Writes checkpoint `ckpt-{checkpoint_number}` and makes it the latest
    (the older ones beyond `max_to_keep` are deleted). Returns its prefix;
    at the latest checkpoint's number, saves nothing and returns that."""
    number = int(checkpoint_number)
    with self._lock:
      latest = self.latest_checkpoint
      if latest is not None and os.path.basename(latest) == f"ckpt-{number}":
        return latest
      if number in self._numbers():
        # An older number again: it would overwrite a listed checkpoint.
        raise ValueError(
          f"checkpoint {number} already exists in "
          f"{self.directory} and is not the latest; "
          f"checkpoint numbers must increase"
        )
      callbacks = [self._sync_files] if _local(self.directory) else None
      # The manager runs its own callback (the state-file update) after ours.
      path = self.manager.save(
        checkpoint_number=number,
        options=tf.train.CheckpointOptions(
          experimental_write_callbacks=callbacks
        ),
      )
      if _local(self.directory):
        _fsync(os.path.join(self.directory, "checkpoint"))
        _fsync_dir(self.directory)
      return path

  def next_number(self):
    """One above the highest checkpoint number kept (1 when none)."""
    return max(self._numbers(), default=0) + 1

  def _numbers(self):
    return {int(p.rsplit("-", 1)[1]) for p in self.manager.checkpoints}

  def _sync_files(self, prefix):
    """fsyncs the files of the checkpoint at `prefix` and their directory."""
    head, base = os.path.split(prefix)
    for name in os.listdir(head):
      match = _FILE.match(name)
      if match and match.group(1) == base and match.group(2) != "_temp":
        _fsync(os.path.join(head, name))
    _fsync_dir(head)

  def _remove_leftovers(self):
    """Deletes what interrupted saves left: scratch files and dirs always,
    checkpoint files the state does not list when there is a state."""
    state = tf.train.get_checkpoint_state(self.directory)
    listed = (
      None
      if state is None
      else {os.path.basename(p) for p in state.all_model_checkpoint_paths}
    )
    for name in os.listdir(self.directory):
      path = os.path.join(self.directory, name)
      match = _FILE.match(name)
      if _TEMP.search(name) or (match and match.group(2) == "_temp"):
        stale = True
      else:
        # Without a state file nothing is known to be complete: keep all.
        stale = (
          match is not None
          and listed is not None
          and match.group(1) not in listed
        )
      if not stale:
        continue
      if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
      else:
        os.remove(path)
