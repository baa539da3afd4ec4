"""What an env worker (worker_main.py) and its parent (workers.py, which
describes the data path) share: the control messages, the spaces as JSON,
and the `Layout` of a worker's shared-memory segment. Imports neither
tensorflow nor torch, as workers must not.
"""

import contextlib
import json
import os
import signal
import struct
import threading
import uuid
from multiprocessing import shared_memory

import numpy as np

from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import BoolBox, BoxSpace, Dict, FloatBox, IntBox, TextBox

SHM_PREFIX = "ingraph_rl_env_"

# Control messages: code (command or status), an int64 argument, and the
# byte length of an optional payload that follows (JSON or a name).
HEADER = struct.Struct("<BqI")
ATTACH, RESET, STEP, MODULES, CLOSE = 1, 2, 3, 4, 5
OK, ERROR = 0, 1
COMMAND_NAMES = {
  ATTACH: "attach",
  RESET: "reset",
  STEP: "step",
  MODULES: "modules",
  CLOSE: "close",
}

_BOXES = {cls.__name__: cls for cls in (FloatBox, IntBox, BoolBox, TextBox)}


# --- messages ----------------------------------------------------------------


def send_message(sock, code, arg=0, payload=b""):
  sock.sendall(HEADER.pack(code, arg, len(payload)) + payload)


@contextlib.contextmanager
def interrupts_after():
  """Holds Ctrl-C (SIGINT) back until the block is done, then delivers it:
  a message and the count of replies owed must change together, or the
  next call would read the previous call's reply (or wait for one that
  never comes). Waiting for a reply stays interruptible. Only the main
  thread receives signals, so elsewhere this does nothing."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  held = []
  previous = signal.signal(signal.SIGINT, lambda *args: held.append(args))
  try:
    yield
  finally:
    signal.signal(signal.SIGINT, previous)
    if held and callable(previous):
      previous(*held[0])


def _recv_exactly(sock, n):
  buf = bytearray(n)
  view, got = memoryview(buf), 0
  while got < n:
    k = sock.recv_into(view[got:])
    if not k:
      return None  # EOF: the other side is gone.
    got += k
  return bytes(buf)


def recv_message(sock):
  """(code, arg, payload bytes), or None at EOF."""
  head = _recv_exactly(sock, HEADER.size)
  if head is None:
    return None
  code, arg, size = HEADER.unpack(head)
  payload = b""
  if size:
    payload = _recv_exactly(sock, size)
    if payload is None:
      return None
  return code, arg, payload


def error_payload(exc, traceback_text=""):
  name = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
  return json.dumps(
    {
      "type": type(exc).__name__,
      "message": str(exc),
      "name": name,
      "traceback": traceback_text,
    }
  ).encode()


# --- spaces as data ----------------------------------------------------------


def _bound_to_json(bound):
  if bound is None:
    return None
  arr = np.asarray(bound)
  return {"dtype": arr.dtype.str, "value": arr.tolist()}


def _bound_from_json(obj):
  return None if obj is None else np.asarray(obj["value"], obj["dtype"])


def space_to_json(space):
  """A JSON-able description of a box or (nested) Dict space of boxes."""
  if isinstance(space, Dict):
    return {"Dict": {k: space_to_json(s) for k, s in space.items()}}
  if isinstance(space, BoxSpace) and type(space).__name__ in _BOXES:
    if space.has_batch_rank or space.has_time_rank:
      raise SpaceError(f"an env space has no batch or time rank, got {space!r}")
    return {
      "box": type(space).__name__,
      "shape": list(space.shape),
      "dtype": space.dtype.str,
      "low": _bound_to_json(space.low),
      "high": _bound_to_json(space.high),
    }
  raise SpaceError(
    f"worker envs support box spaces and Dicts of boxes, got {space!r}"
  )


def space_from_json(obj):
  if "Dict" in obj:
    return Dict({k: space_from_json(v) for k, v in obj["Dict"].items()})
  return _BOXES[obj["box"]](
    shape=tuple(obj["shape"]),
    dtype=obj["dtype"],
    low=_bound_from_json(obj["low"]),
    high=_bound_from_json(obj["high"]),
  )


# --- shared memory -----------------------------------------------------------


def _untracked(fn):
  """Runs `fn()` without multiprocessing's resource tracker, which would
  start a helper process and unlink segments it thinks leaked; we unlink
  ourselves (Python < 3.13 has no `track=False`)."""
  from multiprocessing import resource_tracker

  register, unregister = resource_tracker.register, resource_tracker.unregister
  resource_tracker.register = resource_tracker.unregister = lambda *args: None
  try:
    return fn()
  finally:
    resource_tracker.register, resource_tracker.unregister = (
      register,
      unregister,
    )


def create_shared_memory(size):
  name = f"{SHM_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:12]}"
  return _untracked(
    lambda: shared_memory.SharedMemory(
      name=name, create=True, size=max(int(size), 1)
    )
  )


def attach_shared_memory(name):
  return _untracked(lambda: shared_memory.SharedMemory(name=name))


def unlink_shared_memory(shm):
  """Unlinks the name (the mapping stays valid); a no-op if gone."""
  try:
    _untracked(shm.unlink)
  except FileNotFoundError:
    pass


class _Leaf:
  """One observation leaf: its path in the Dict ((), for a box space), its
  space, and how it is stored (box: [k, ...] of its dtype; text: UTF-8
  bytes [k, ..., text_bytes] and their lengths [k, ...])."""

  def __init__(self, path, space):
    self.path, self.space = path, space
    self.is_text = isinstance(space, TextBox)
    self.name = "/".join(path) or "obs"


class Layout:
  """Where each array of one worker (k envs) lives in its segment."""

  ALIGN = 64

  def __init__(self, num_envs, observation_space, action_space, text_bytes):
    k = int(num_envs)
    self.text_bytes = int(text_bytes)
    self.leaves = [
      _Leaf(tuple(path), leaf) for path, leaf in observation_space.flatten()
    ]
    if not isinstance(action_space, BoxSpace) or isinstance(
      action_space, TextBox
    ):
      raise SpaceError(
        f"worker envs need a numeric box action space, got {action_space!r}"
      )
    self.fields = [
      ("actions", (k,) + tuple(action_space.shape), action_space.dtype)
    ]
    for prefix in ("obs", "final"):
      for leaf in self.leaves:
        shape = (k,) + tuple(leaf.space.shape)
        if leaf.is_text:
          self.fields.append(
            ((prefix, leaf.name, "text"), shape + (self.text_bytes,), np.uint8)
          )
          self.fields.append(((prefix, leaf.name, "len"), shape, np.int32))
        else:
          self.fields.append(((prefix, leaf.name), shape, leaf.space.dtype))
    self.fields += [
      ("rewards", (k,), np.float32),
      ("terminated", (k,), np.bool_),
      ("truncated", (k,), np.bool_),
      ("episode_returns", (k,), np.float32),
      ("episode_lengths", (k,), np.int32),
    ]
    self.offsets, offset = {}, 0
    for name, shape, dtype in self.fields:
      self.offsets[name] = offset
      size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
      offset += -(-size // self.ALIGN) * self.ALIGN
    self.size = offset

  def views(self, buf):
    return {
      name: np.ndarray(shape, dtype, buf, self.offsets[name])
      for name, shape, dtype in self.fields
    }

  # Writers (worker side) and readers (parent side) of observations.

  def write_obs(self, views, prefix, obs, rows=None):
    """Writes obs (a box array or a dict) into `prefix` ("obs" or
    "final"); only `rows` (a bool mask) when given."""
    for leaf in self.leaves:
      value = lookup_path(obs, leaf.path)
      if leaf.is_text:
        self._write_text(views, (prefix, leaf.name), leaf, value, rows)
      elif rows is None:
        views[(prefix, leaf.name)][...] = value
      else:
        views[(prefix, leaf.name)][rows] = np.asarray(value)[rows]

  def _write_text(self, views, key, leaf, value, rows):
    text, lens = views[key + ("text",)], views[key + ("len",)]
    value = np.asarray(value, object)
    for idx in np.ndindex(*value.shape):
      if rows is not None and not rows[idx[0]]:
        continue
      item = value[idx]
      data = item if isinstance(item, bytes) else str(item).encode("utf-8")
      if len(data) > self.text_bytes:
        raise ValueError(
          f"text observation {leaf.name!r} of env {idx[0]} is "
          f"{len(data)} bytes in UTF-8, longer than its "
          f"{self.text_bytes}-byte shared-memory slot (raise "
          f"WorkerVectorEnv(..., text_bytes=)): {item!r:.80}"
        )
      text[idx][: len(data)] = np.frombuffer(data, np.uint8)
      lens[idx] = len(data)

  def read_text(self, views, prefix, leaf, rows=None):
    """A text leaf [k, ...] as an object array of str (only `rows`, a bool
    mask, are decoded when given; the others are None)."""
    text = views[(prefix, leaf.name, "text")]
    lens = views[(prefix, leaf.name, "len")]
    out = np.empty(lens.shape, object)
    for idx in np.ndindex(*lens.shape):
      if rows is None or rows[idx[0]]:
        out[idx] = text[idx][: lens[idx]].tobytes().decode("utf-8")
    return out


def lookup_path(nest, path):
  for key in path:
    nest = nest[key]
  return nest


def nest_values(leaves, values):
  """{path: value} -> the observation (an array, or nested dicts)."""
  if len(leaves) == 1 and leaves[0].path == ():
    return values[0]
  out = {}
  for leaf, value in zip(leaves, values):
    node = out
    for key in leaf.path[:-1]:
      node = node.setdefault(key, {})
    node[leaf.path[-1]] = value
  return out
