"""C++ custom ops (segment-tree sampling and updates) with pure-TF fallbacks.

`segment_tree_ops.cc` compiles to `_segment_tree_ops.so` next to this file:
`pip install -e .` (so `make venv`) builds it with g++ and TensorFlow's own
flags (see setup.py); Bazel builds the same library (see BUILD). Its ops:

  SegmentTreeUpdate(tree: resource, indices, values, op="sum"|"min")
      updates a float32 variable in place.
  SegmentTreeFindPrefixsumIdx(tree: float, masses: float) -> int32
  ResourceSegmentTreeFindPrefixsumIdx(tree: resource, masses) -> int32
      the same descent, reading a variable under its lock without a copy.

Callers use `ingraph_rl.components.memories.segment_tree`, which falls back to
plain TF ops when `load_segment_tree_ops()` returns None. Set
INGRAPH_RL_DISABLE_CUSTOM_OPS=1 to force that fallback.
"""

import os
import threading

from absl import logging

LIBRARY_PATH = os.path.join(
  os.path.dirname(os.path.abspath(__file__)), "_segment_tree_ops.so"
)
DISABLE_ENV = "INGRAPH_RL_DISABLE_CUSTOM_OPS"

_lock = threading.Lock()
_loaded = False
_library = None


def load_segment_tree_ops():
  """The loaded op library (a module with `segment_tree_update`,
  `segment_tree_find_prefixsum_idx`, `resource_segment_tree_find_prefixsum_idx`)
  or None: when INGRAPH_RL_DISABLE_CUSTOM_OPS=1, or the library is missing or
  fails to load. Tries once per process and logs once which path is in use.
  """
  global _loaded, _library
  with _lock:
    if not _loaded:
      _library, message, level = _load()
      _loaded = True
      logging.log(level, message)
    return _library


def _load():
  if os.environ.get(DISABLE_ENV, "") not in ("", "0"):
    return (
      None,
      (
        f"segment tree: pure-TF fallback: custom ops disabled by "
        f"{DISABLE_ENV}={os.environ[DISABLE_ENV]}"
      ),
      logging.INFO,
    )
  if not os.path.exists(LIBRARY_PATH):
    return (
      None,
      (
        f"segment tree: pure-TF fallback: {LIBRARY_PATH} is not "
        f"built (run `pip install -e .` or `make venv`)"
      ),
      logging.WARNING,
    )
  import tensorflow as tf

  try:
    library = tf.load_op_library(LIBRARY_PATH)
  except Exception as e:
    reason = " ".join(str(e).split())[:500]
    return (
      None,
      (
        f"segment tree: pure-TF fallback: loading {LIBRARY_PATH} "
        f"failed ({type(e).__name__}: {reason}); rebuild it with "
        f"`pip install -e .`"
      ),
      logging.WARNING,
    )
  return (
    library,
    f"segment tree: custom op library {LIBRARY_PATH}",
    logging.INFO,
  )
