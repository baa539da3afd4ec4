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

On restore, a checkpoint that fails to read (a truncated or flipped data
file, a missing index) is reported in one line (which, and why), moved
aside as `ckpt-N.corrupt/` (never deleted: the user can inspect it), and
the next newest is tried; the run says which one it fell back to. With
checkpoints but none that reads, `restore` raises `CheckpointError` rather
than starting over, also on later runs while a `ckpt-N.corrupt` is there.

One saver (one process) per directory.
"""

import os
import re
import shutil
import sys
import threading

import tensorflow as tf

from ingraph_rl.errors import CheckpointError

# What a save of prefix "ckpt" leaves: `ckpt-N.index`, `ckpt-N.data-*`, the
# merge's scratch dir `ckpt-N_temp`, and BundleWriter's `*.tempstate*`.
_FILE = re.compile(r"^(ckpt-\d+)(\.index|\.data-\d+-of-\d+|_temp)$")
_TEMP = re.compile(r"(\.tempstate\d*|^checkpoint\.tmp[0-9a-f]+)$")


_CORRUPT = re.compile(r"^ckpt-\d+\.corrupt(\.\d+)?$")
# What reading a checkpoint that does not read raises (IndexError: a
# truncated data file, "Read less bytes than requested").
_UNREADABLE = (tf.errors.OpError, IndexError)


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
    self.max_to_keep = max_to_keep
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

  def restore(self, log=None):
    """Restores the newest checkpoint that reads and returns its prefix
    (None when the directory has none). Every object of `checkpoint` must
    be in it. One that does not read is reported through `log` (one line;
    default: stderr), moved aside as `ckpt-N.corrupt` and the next one
    tried; when none reads, raises CheckpointError."""
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    kept = list(self.manager.checkpoints)
    failed = []
    for path in reversed(kept):
      try:
        _read_all(path)
      except _UNREADABLE as e:
        why = f"{type(e).__name__}: {_first_line(e)}"
        aside = self._move_aside(path)
        log(f"checkpoint {path} does not read ({why}); moved aside to {aside}")
        failed.append(f"{os.path.basename(path)} ({why})")
        kept.remove(path)
        continue
      self.checkpoint.restore(path).assert_existing_objects_matched()
      if failed:
        self._forget_moved(kept)
        log(f"restored the newest checkpoint that reads instead: {path}")
      return path
    corrupt = sorted(n for n in _listdir(self.directory) if _CORRUPT.match(n))
    if failed or corrupt:
      if failed:
        self._forget_moved(kept)
      raise CheckpointError(
        f"no checkpoint in {self.directory} reads"
        + (f": {'; '.join(failed)}" if failed else "")
        + f"; the unreadable ones are kept aside there ({', '.join(corrupt)})."
        " Not starting over in a directory that had checkpoints: use another"
        " directory (e.g. --logdir), or move the .corrupt ones away"
      )
    return None

  def _move_aside(self, prefix):
    """Moves the files of the checkpoint at `prefix` into a new directory
    `ckpt-N.corrupt` (`.corrupt.K` if taken); returns its path."""
    head, base = os.path.split(prefix)
    aside, k = f"{prefix}.corrupt", 0
    while os.path.exists(aside):
      k += 1
      aside = f"{prefix}.corrupt.{k}"
    os.makedirs(aside)
    for name in os.listdir(head):
      match = _FILE.match(name)
      if match and match.group(1) == base:
        os.replace(os.path.join(head, name), os.path.join(aside, name))
    _fsync_dir(head)
    return aside

  def _forget_moved(self, kept):
    """Points the state file at the checkpoints `kept` (oldest first),
    with their timestamps (the manager tracks only those newer than the
    last preserved one), atomically; reloads the manager. With none kept,
    the state file goes (it would name files that are aside)."""
    state = tf.train.get_checkpoint_state(self.directory)
    path = os.path.join(self.directory, "checkpoint")
    if not kept:
      os.remove(path)
    else:
      # Relative names, as the manager writes them.
      names = [os.path.basename(p) for p in kept]
      stamps = dict(
        zip(
          (os.path.basename(p) for p in state.all_model_checkpoint_paths),
          state.all_model_checkpoint_timestamps,
        )
      )
      tf.compat.v1.train.update_checkpoint_state(
        self.directory,
        names[-1],
        all_model_checkpoint_paths=names,
        all_model_checkpoint_timestamps=[stamps[n] for n in names],
        last_preserved_timestamp=state.last_preserved_timestamp,
      )
      if _local(self.directory):
        _fsync(path)
    _fsync_dir(self.directory)
    self.manager = tf.train.CheckpointManager(
      self.checkpoint, self.directory, max_to_keep=self.max_to_keep
    )

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


def _first_line(error):
  text = str(getattr(error, "message", None) or error).strip()
  return text.splitlines()[0][:200] if text else "no message"


def _listdir(directory):
  return os.listdir(directory) if os.path.isdir(directory) else []


def _read_all(prefix):
  """Reads every tensor of the checkpoint at `prefix` (checking each
  one's checksum) without touching any object: a restore that fails
  part-way leaves restorations pending on the objects, which a later
  restore from another checkpoint then trips over. Costs one more read
  of the checkpoint, one tensor at a time."""
  reader = tf.train.load_checkpoint(prefix)
  for name in reader.get_variable_to_dtype_map():
    reader.get_tensor(name)
