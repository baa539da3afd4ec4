"""The baselines' replay memories, in NumPy and plain Python (no TF): a
uniform NumPy ring and the classic proportional PER on Python-list segment
trees (baselines-style). benchmarks/memory.py and
benchmarks/apex_throughput.py measure ours against them.

`kind` is any object with `obs_shape` and `obs_dtype` (memory.py's
`RecordKind`); `store` may be replaced by other record arrays before
`fill`.
"""

import math
import random

import numpy as np

ALPHA, BETA = 0.6, 0.4


# --- baseline 1: a NumPy ring buffer (uniform) -------------------------------


class NumpyRing:
  """Uniform replay in NumPy arrays: a ring write and a uniform gather."""

  def __init__(self, capacity, kind, seed=0):
    self.capacity = capacity
    self.store = {
      "obs": np.zeros((capacity,) + kind.obs_shape, kind.obs_dtype),
      "action": np.zeros(capacity, np.int32),
      "reward": np.zeros(capacity, np.float32),
      "terminal": np.zeros(capacity, bool),
    }
    self.index = self.size = 0
    self.rng = np.random.default_rng(seed)

  def _write(self, batch):
    n = len(next(iter(batch.values())))
    positions = (self.index + np.arange(n)) % self.capacity
    for key, buf in self.store.items():
      buf[positions] = batch[key]
    self.index = (self.index + n) % self.capacity
    self.size = min(self.size + n, self.capacity)
    return positions

  def insert(self, batch):
    self._write(batch)
    return self.size

  def sample(self, batch_size):
    indices = self.rng.integers(0, self.size, batch_size)
    return {k: buf[indices] for k, buf in self.store.items()}, indices


# --- baseline 2: the classic Python segment tree -----------------------------


class PySegmentTree:
  """A segment tree in a Python list (root at 1, leaf i at P + i, P the next
  power of two >= capacity), updated one index at a time: set the leaf, then
  recompute each ancestor from its two children up to the root."""

  def __init__(self, capacity, combine, neutral):
    self.num_leaves = 1 << (int(capacity) - 1).bit_length()
    self.combine, self.neutral = combine, neutral
    self.value = [neutral] * (2 * self.num_leaves)

  def __setitem__(self, index, val):
    value, combine = self.value, self.combine
    node = index + self.num_leaves
    value[node] = val
    node >>= 1
    while node >= 1:
      value[node] = combine(value[2 * node], value[2 * node + 1])
      node >>= 1

  def __getitem__(self, index):
    return self.value[index + self.num_leaves]

  def root(self):
    return self.value[1]

  def find_prefixsum_idx(self, mass):
    """The leaf i with prefix sum [i-1] <= mass < prefix sum [i] (sum tree):
    one descent, left when the mass is below the left child's sum."""
    value, num_leaves = self.value, self.num_leaves
    node = 1
    while node < num_leaves:
      left = value[2 * node]
      if left > mass:
        node = 2 * node
      else:
        mass -= left
        node = 2 * node + 1
    return node - num_leaves

  def bulk_fill(self, leaves):
    """Set-up only (never timed): all leaves at once, parents level by level
    in NumPy; what a loop of __setitem__ would leave, without 40M Python
    steps at 1e6."""
    tree = np.full(2 * self.num_leaves, self.neutral, np.float64)
    tree[self.num_leaves : self.num_leaves + len(leaves)] = leaves
    reduce = np.add if self.combine is _add else np.minimum
    lo = self.num_leaves // 2
    while lo >= 1:
      tree[lo : 2 * lo] = reduce(
        tree[2 * lo : 4 * lo : 2], tree[2 * lo + 1 : 4 * lo : 2]
      )
      lo //= 2
    self.value = tree.tolist()


def _add(a, b):
  return a + b


class PythonPER(NumpyRing):
  """Proportional prioritized replay the classic way (baselines-style):
  records in NumPy arrays, priorities in two PySegmentTrees.

  insert: ring write; each new record gets max_priority^alpha in both trees,
    one __setitem__ per index.
  sample: stratified; per sample one Python descent of the sum tree; the
    importance weight per sample from its leaf; records gathered with NumPy.
  update: per index p^alpha into both trees (a loop of __setitem__).
  """

  def __init__(self, capacity, kind, alpha=ALPHA, beta=BETA, seed=0):
    super().__init__(capacity, kind, seed)
    self.alpha, self.beta = alpha, beta
    self.sum_tree = PySegmentTree(capacity, _add, 0.0)
    self.min_tree = PySegmentTree(capacity, min, math.inf)
    self.max_priority = 1.0
    self.random = random.Random(seed).random

  def insert(self, batch):
    positions = self._write(batch)
    p = self.max_priority**self.alpha
    sum_tree, min_tree = self.sum_tree, self.min_tree
    for i in positions.tolist():
      sum_tree[i] = p
      min_tree[i] = p
    return self.size

  def fill(self, batch):
    """Set-up only: fills the memory with copies of `batch` and sets every
    priority as inserting them one by one would."""
    n = len(next(iter(batch.values())))
    for start in range(0, self.capacity, n):
      stop = min(start + n, self.capacity)
      for key, buf in self.store.items():
        buf[start:stop] = batch[key][: stop - start]
    self.index, self.size = 0, self.capacity
    leaves = np.full(self.capacity, self.max_priority**self.alpha)
    self.sum_tree.bulk_fill(leaves)
    self.min_tree.bulk_fill(leaves)

  def sample(self, batch_size):
    sum_tree, rand = self.sum_tree, self.random
    total = sum_tree.root()
    segment = total / batch_size
    last = self.size - 1
    indices = [
      min(sum_tree.find_prefixsum_idx((i + rand()) * segment), last)
      for i in range(batch_size)
    ]
    size, beta = self.size, self.beta
    max_weight = (self.min_tree.root() / total * size) ** -beta
    weights = [
      (sum_tree[i] / total * size) ** -beta / max_weight for i in indices
    ]
    indices = np.array(indices, np.int64)
    records = {k: buf[indices] for k, buf in self.store.items()}
    return records, indices, np.array(weights, np.float32)

  def update(self, indices, priorities):
    sum_tree, min_tree, alpha = self.sum_tree, self.min_tree, self.alpha
    max_p = self.max_priority
    for i, p in zip(indices.tolist(), priorities.tolist()):
      v = p**alpha
      sum_tree[i] = v
      min_tree[i] = v
      max_p = max(max_p, p)
    self.max_priority = max_p
