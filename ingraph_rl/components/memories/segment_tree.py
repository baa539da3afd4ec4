"""Sum and min segment trees for prioritized replay: pure TF, C++ op, torch.

Layout: a tree over `capacity` leaves is a flat float32 array of size 2*P,
P = the next power of two >= capacity (P >= 1). The root is at index 1,
leaf i at P + i, and node n has children 2n and 2n+1; index 0 is unused.
Empty leaves hold 0 in a sum tree and +inf in a min tree, so leaves beyond
`capacity` (or not written yet) add nothing and never win a min.

    tree = tf.Variable(initial_tree(5, "sum"))         # 2 * 8 floats
    update(tree, [0, 3, 0], [1.0, 2.0, 4.0], "sum")    # leaf 0 = 4 (last wins)
    total(tree)                                         # 6.0
    find_prefixsum_idx(tree, [0.0, 3.9, 4.0, 5.5])      # [0, 0, 3, 3]

Semantics shared by every implementation:
  * `update` writes the leaves and recomputes all their ancestors (sum or
    min of the two children). When the same index occurs several times in
    one batch, the value at its LAST occurrence wins, as if the batch were
    applied in order. Indices must lie in [0, P); anything else raises
    (InvalidArgumentError in TF, IndexError in torch) and changes nothing.
  * `find_prefixsum_idx` (sum trees) descends once for the whole batch, one
    step per level: at node n with left child sum L, a mass < L goes left,
    otherwise L is subtracted and it goes right. For masses in [0, total)
    the result is the leaf i with cumsum[i-1] <= mass < cumsum[i], so a
    leaf of priority 0 is never returned. One guard: a mass never enters a
    right subtree whose sum is 0 (it stays left); with exact arithmetic that
    changes nothing, but a mass that rounding carried to >= total lands on
    the last non-empty leaf instead of an empty one beyond `capacity`.
  * All three implementations do the same float32 operations in the same
    order, so they return identical trees and indices (subnormal values
    aside: TF's CPU kernels may flush them to zero).

Implementations, picked with `impl=` (None: `DEFAULT_IMPL`):
  "tf": plain TF ops, log2(P) levels of ResourceGather/ResourceScatterUpdate
    on the variable: O(batch * log P) work, never a copy of the tree; also
    compiles with XLA (jit_compile=True).
  "custom_op": the C++ kernels of `ingraph_rl/ops/segment_tree_ops.cc`
    (SegmentTreeUpdate updates the variable in place under its lock;
    [Resource]SegmentTreeFindPrefixsumIdx reads it under a shared lock).
    One op per call instead of ~5 per level. Needs the compiled library
    (built by `pip install -e .` / `make venv`); CPU only; not under XLA
    (impl=None picks "tf" there), and a SavedModel using it needs
    `ingraph_rl.ops.load_segment_tree_ops()` before `tf.saved_model.load`.
  Both work on CPU variables inside `tf.function`s; their ordering with other
  reads and writes of the variable comes from tf.function's automatic
  control dependencies (both are stateful ops on the variable's resource).
  Prefer `tf.gather(tree, ...)` (or `total`, `min_value`, `leaf_values`) over
  reading the whole variable: TF puts a variable that sparse ops touch in a
  copy-on-read mode where every full read copies the tree.

Torch (`torch_update`, `torch_find_prefixsum_idx`) works in place on a flat
float32 tensor with the same layout, for the PyTorch mirror.
"""

import numpy as np
import tensorflow as tf

# Tells whether a graph is being traced for XLA (no public API for it).
from tensorflow.python.ops import control_flow_util

from ingraph_rl import ops as _ops
from ingraph_rl.utils.lazy import torch

OPS = ("sum", "min")
IMPLS = ("tf", "custom_op")
_MAX_LEAVES = 2**30  # Node indices stay int32.

# The implementation used when a call passes impl=None. Both paths stay
# supported and tested for parity; `benchmarks/memory.py` decides which one
# should win by default (set this attribute to switch at run time). Inside a
# function compiled with XLA, impl=None always means "tf".
DEFAULT_IMPL = "custom_op" if _ops.load_segment_tree_ops() is not None else "tf"


# --- layout ----------------------------------------------------------------


def num_leaves_pow2(capacity):
  """P: the next power of two >= capacity (at least 1)."""
  capacity = int(capacity)
  if capacity < 1:
    raise ValueError(f"segment tree capacity must be >= 1, got {capacity}")
  if capacity > _MAX_LEAVES:
    raise ValueError(f"segment tree capacity must be <= 2**30, got {capacity}")
  return 1 << (capacity - 1).bit_length()


def tree_size(capacity):
  """Length of the flat tree array: 2 * P."""
  return 2 * num_leaves_pow2(capacity)


def initial_tree(capacity, op):
  """An empty tree: zeros for "sum", +inf for "min" (float32)."""
  _check_op(op)
  fill = 0.0 if op == "sum" else np.inf
  return np.full(tree_size(capacity), fill, np.float32)


def _check_op(op):
  if op not in OPS:
    raise ValueError(f"segment tree op must be one of {OPS}, got {op!r}")


def _num_leaves_of(tree):
  """P from the static length of a tree (variable or tensor)."""
  n = tree.shape[0] if tree.shape.rank == 1 else None
  if n is None or n < 2 or n & (n - 1):
    raise ValueError(
      f"a segment tree is a 1-D array of length 2 * P, P a power of two; "
      f"got shape {tree.shape}"
    )
  return n // 2


def _as_tree(tree):
  """A tf.Variable as it is (read in place), anything else as a tensor."""
  if isinstance(tree, tf.Variable):
    return tree
  return tf.convert_to_tensor(tree, tf.float32)


def _in_xla_context():
  """Tracing a function compiled with XLA (jit_compile=True)?"""
  return control_flow_util.GraphOrParentsInXlaContext(
    tf.compat.v1.get_default_graph()
  )


def _resolve_impl(impl):
  if impl is None:
    impl = DEFAULT_IMPL
    if impl == "custom_op" and _in_xla_context():
      impl = "tf"  # XLA cannot compile the custom ops.
  if impl not in IMPLS:
    raise ValueError(f"segment tree impl must be one of {IMPLS}, got {impl!r}")
  if impl == "custom_op":
    if _in_xla_context():
      raise ValueError(
        "segment tree impl='custom_op' cannot be compiled by "
        "XLA (jit_compile=True); use impl='tf' or impl=None"
      )
    lib = _ops.load_segment_tree_ops()
    if lib is None:
      raise RuntimeError(
        "segment tree impl='custom_op' but the op library is not loaded "
        "(see the log of ingraph_rl.ops; build it with `pip install -e .`)"
      )
    return impl, lib
  return impl, None


# --- TensorFlow ------------------------------------------------------------


def update(tree_var, indices, values, op, impl=None):
  """Sets leaves `indices` to `values` in the variable `tree_var` and
  recomputes their ancestors; for a repeated index the LAST occurrence in
  the batch wins. Returns None (graph ordering: see the module doc).

  tree_var: a float32 tf.Variable of shape (2P,).
  indices: int32/int64 of shape (B,), each in [0, P).
  values: float32 of shape (B,).
  op: "sum" or "min".
  """
  _check_op(op)
  impl, lib = _resolve_impl(impl)
  if not isinstance(tree_var, tf.Variable):
    raise TypeError(
      f"segment tree update needs a tf.Variable, got {type(tree_var).__name__}"
    )
  num_leaves = _num_leaves_of(tree_var)
  indices = tf.convert_to_tensor(indices)
  if indices.dtype not in (tf.int32, tf.int64):
    raise TypeError(
      f"segment tree indices must be int32 or int64, got {indices.dtype.name}"
    )
  values = tf.convert_to_tensor(values, tf.float32)
  if indices.shape.rank not in (None, 1) or values.shape.rank not in (None, 1):
    raise ValueError(
      f"segment tree update: indices and values must be 1-D, "
      f"got shapes {indices.shape} and {values.shape}"
    )
  if impl == "custom_op":
    lib.segment_tree_update(tree_var.handle, indices, values, op=op)
    return None

  checks = [
    tf.debugging.Assert(
      tf.reduce_all((indices >= 0) & (indices < num_leaves)),
      [
        f"segment tree update: indices must lie in [0, {num_leaves}), got",
        indices,
      ],
      summarize=8,
    ),
    tf.debugging.Assert(
      tf.equal(tf.size(indices), tf.size(values)),
      [
        "segment tree update: indices and values differ in size:",
        tf.shape(indices),
        tf.shape(values),
      ],
    ),
  ]
  indices = tf.cast(indices, tf.int32)
  with tf.control_dependencies(checks):
    # Last occurrence wins: sort stably by index, so that each run of equal
    # indices keeps batch order, and give every member of a run the value of
    # its run's last member. Repeated writes then write identical values, in
    # whatever order the scatter applies them.
    order = tf.argsort(indices, stable=True)
  size = tf.size(indices)
  nodes = tf.gather(indices, order)
  run_starts = tf.concat(  # [] for B = 0
    [tf.ones_like(nodes[:1], tf.bool), nodes[1:] != nodes[:-1]], 0
  )
  run = tf.cumsum(tf.cast(run_starts, tf.int32)) - 1
  run_end = tf.math.unsorted_segment_max(tf.range(size), run, size)
  written = tf.gather(values, tf.gather(order, tf.gather(run_end, run)))
  nodes = nodes + num_leaves
  tf.raw_ops.ResourceScatterUpdate(
    resource=tree_var.handle, indices=nodes, updates=written
  )
  # Ancestors, one level per step. A parent that occurs several times is
  # recomputed from the same children each time (same value), so the batch
  # keeps its static size: no tf.unique, and the function stays
  # XLA-compilable (jit_compile=True).
  combine = tf.add if op == "sum" else tf.minimum
  for _ in range(num_leaves.bit_length() - 1):  # log2(P) levels
    nodes = nodes // 2
    children = tf.gather(tree_var, tf.stack([2 * nodes, 2 * nodes + 1]))
    tf.raw_ops.ResourceScatterUpdate(
      resource=tree_var.handle,
      indices=nodes,
      updates=combine(children[0], children[1]),
    )
  return None


def find_prefixsum_idx(tree, masses, impl=None):
  """For each mass in [0, total), the leaf index whose prefix-sum segment
  holds it (int32, shape of `masses`). `tree` is a sum tree: a tf.Variable
  (read without copying) or a tensor."""
  impl, lib = _resolve_impl(impl)
  tree = _as_tree(tree)
  num_leaves = _num_leaves_of(tree)
  masses = tf.convert_to_tensor(masses, tf.float32)
  if impl == "custom_op":
    if isinstance(tree, tf.Variable):
      return lib.resource_segment_tree_find_prefixsum_idx(tree.handle, masses)
    return lib.segment_tree_find_prefixsum_idx(tree, masses)

  nodes = tf.ones_like(masses, tf.int32)
  for _ in range(num_leaves.bit_length() - 1):
    left = 2 * nodes
    children = tf.gather(tree, tf.stack([left, left + 1]))
    left_sum, right_sum = children[0], children[1]
    go_right = (masses >= left_sum) & (right_sum > 0)
    masses = tf.where(go_right, masses - left_sum, masses)
    nodes = tf.where(go_right, left + 1, left)
  return nodes - num_leaves


def total(tree):
  """The root of a sum tree (a scalar): the sum of all leaves."""
  return tf.gather(tree, 1)


def min_value(tree):
  """The root of a min tree (a scalar): the smallest leaf (+inf if empty)."""
  return tf.gather(tree, 1)


def leaf_values(tree, indices):
  """The leaves at `indices` (gathered, so a variable is not copied)."""
  tree = _as_tree(tree)
  num_leaves = _num_leaves_of(tree)
  return tf.gather(tree, tf.cast(indices, tf.int32) + num_leaves)


# --- torch -----------------------------------------------------------------


def torch_update(tree, indices, values, op):
  """`update` for a flat float32 torch tensor, in place (LAST occurrence of a
  repeated index wins). Returns None."""
  _check_op(op)
  num_leaves = tree.shape[0] // 2
  indices = torch.as_tensor(indices, device=tree.device).long().reshape(-1)
  values = torch.as_tensor(
    values, dtype=tree.dtype, device=tree.device
  ).reshape(-1)
  if indices.shape != values.shape:
    raise ValueError(
      f"segment tree update: {indices.shape[0]} indices but "
      f"{values.shape[0]} values"
    )
  if indices.numel() == 0:
    return None
  if bool(((indices < 0) | (indices >= num_leaves)).any()):
    raise IndexError(
      f"segment tree update: indices must lie in "
      f"[0, {num_leaves}), got {indices.tolist()}"
    )
  with torch.no_grad():
    nodes, which = torch.unique(indices, return_inverse=True)
    last = torch.full(nodes.shape, -1, dtype=torch.long, device=tree.device)
    last.scatter_reduce_(
      0, which, torch.arange(indices.numel(), device=tree.device), "amax"
    )
    nodes = nodes + num_leaves
    tree[nodes] = values[last]
    combine = torch.add if op == "sum" else torch.minimum
    for _ in range(num_leaves.bit_length() - 1):
      nodes = torch.unique(nodes // 2)
      tree[nodes] = combine(tree[2 * nodes], tree[2 * nodes + 1])
  return None


def torch_find_prefixsum_idx(tree, masses):
  """`find_prefixsum_idx` for a flat float32 torch tensor; int64 indices of
  the shape of `masses`."""
  num_leaves = tree.shape[0] // 2
  masses = torch.as_tensor(masses, dtype=tree.dtype, device=tree.device)
  nodes = torch.ones(masses.shape, dtype=torch.long, device=tree.device)
  for _ in range(num_leaves.bit_length() - 1):
    left = 2 * nodes
    left_sum, right_sum = tree[left], tree[left + 1]
    go_right = (masses >= left_sum) & (right_sum > 0)
    masses = torch.where(go_right, masses - left_sum, masses)
    nodes = torch.where(go_right, left + 1, left)
  return nodes - num_leaves
