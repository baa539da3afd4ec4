"""Fuzz: replay, prioritized replay (both segment-tree paths), frame-stack
replay, n-step accumulator and episode buffer, on both executors.

Each target keeps a model of the memory (what went in, where) and checks
every accepted call against it: records read back equal what went in,
priorities and the running maximum match, sizes advance as they should.
"""

import contextlib

import numpy as np
import pytest

from ingraph_rl.components.memories import (
  EpisodeBuffer,
  FrameStackReplay,
  NStepAccumulator,
  PrioritizedReplay,
  ReplayMemory,
  segment_tree,
)
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.executors.torch import TorchExecutor
from ingraph_rl.spaces import BoolBox, Dict, FloatBox, IntBox
from ingraph_rl.testing.fuzz import (
  REJECT,
  VALID,
  Target,
  numpy_of,
  same,
  sample,
)

EXECUTORS = {"tf": TFExecutor, "torch": TorchExecutor}
CAPACITY = 16
RECORDS = Dict(
  obs=FloatBox((3,)),
  action=IntBox(4),
  reward=FloatBox(),
  done=BoolBox(),
  add_batch_rank=True,
)


class Ring:
  """The model of a ring memory: records by slot, write index, size."""

  def __init__(self, capacity):
    self.capacity = capacity
    self.slots = [None] * capacity
    self.index = self.size = 0

  def insert(self, rows):
    for row in rows:
      self.slots[self.index] = row
      self.index = (self.index + 1) % self.capacity
      self.size = min(self.size + 1, self.capacity)

  def at(self, indices):
    return [self.slots[int(i)] for i in indices]


def rows_of(records):
  """A batch of records (nest of arrays, or Python lists) -> list of
  per-row nests in the space's dtypes."""
  arrays = {
    k: np.asarray(records[k], dtype=RECORDS[k].dtype) for k in sorted(records)
  }
  n = len(next(iter(arrays.values())))
  return [{k: v[i] for k, v in arrays.items()} for i in range(n)]


def stack_rows(rows):
  return {k: np.stack([r[k] for r in rows]) for k in sorted(RECORDS.keys())}


class ReplayTarget(Target):
  name = "replay"
  weights = {"insert": 4, "sample": 3, "get_records": 3, "get_size": 1}
  edge_sizes = (0, 3 * CAPACITY)

  def make(self):
    return ReplayMemory(CAPACITY, seed=3)

  def spaces(self):
    return {
      "records": RECORDS,
      "batch_size": IntBox(64),
      "indices": IntBox(CAPACITY, add_batch_rank=True),
    }

  def __init__(self, backend):
    super().__init__(backend, EXECUTORS[backend](self.make(), self.spaces()))
    self.ring = Ring(CAPACITY)

  def good_args(self, api, rng, batch=None):
    if api == "insert":
      n = int(rng.integers(1, 6)) if batch is None else batch
      return [sample(RECORDS, rng, batch=n)], VALID
    if api == "sample":
      n = int(rng.integers(1, 9)) if batch is None else min(batch, 63)
      return [np.int32(n) if rng.integers(2) else n], self.nonempty()
    if api == "get_records":
      n = int(rng.integers(1, 6)) if batch is None else batch
      size = max(self.ring.size, 1)
      return [rng.integers(0, size, n).astype(np.int32)], self.nonempty()
    return [], VALID

  def nonempty(self):
    return VALID if self.ring.size else REJECT

  def check(self, api, args, out):
    out = numpy_of(out)
    if api == "insert":
      self.ring.insert(rows_of(args[0]))
      if int(out) != self.ring.size:
        self.fuzzer.inconsistent(api, f"size {out} != {self.ring.size}")
    elif api in ("sample", "get_records"):
      records = out["records"] if api == "sample" else out
      indices = out["indices"] if api == "sample" else np.asarray(args[0])
      if api == "sample" and (
        len(indices) != int(args[0])
        or np.any(indices < 0)
        or np.any(indices >= self.ring.size)
      ):
        self.fuzzer.inconsistent(api, f"indices {indices}")
        return
      if len(indices) and not same(records, stack_rows(self.ring.at(indices))):
        self.fuzzer.inconsistent(api, "records differ from what went in")
    elif int(out) != self.ring.size:
      self.fuzzer.inconsistent(api, f"size {out} != {self.ring.size}")


class PrioritizedTarget(ReplayTarget):
  name = "prioritized_replay"
  weights = dict(ReplayTarget.weights, update_priorities=4)
  alpha = 0.6

  def make(self):
    return PrioritizedReplay(CAPACITY, alpha=self.alpha, seed=3)

  def spaces(self):
    return dict(
      super().spaces(),
      priorities=FloatBox(add_batch_rank=True),
      beta=FloatBox(low=0.0, high=1.0),
    )

  def __init__(self, backend, impl):
    self.name = f"prioritized_replay[{impl}]"
    with _segment_tree_impl(impl) if backend == "tf" else _nothing():
      super().__init__(backend)
    self.priorities = np.zeros(CAPACITY, np.float32)
    self.max_priority = np.float32(1.0)

  def good_args(self, api, rng, batch=None):
    if api == "sample":
      args, valid = super().good_args(api, rng, batch)
      return args + [np.float32(rng.uniform())], valid
    if api == "update_priorities":
      n = int(rng.integers(1, 6)) if batch is None else batch
      size = max(self.ring.size, 1)
      indices = rng.integers(0, size, n).astype(np.int32)
      priorities = rng.uniform(0.01, 5.0, n).astype(np.float32)
      # Indices must lie in [0, size): none yet is a refusal.
      return [indices, priorities], self.nonempty()
    return super().good_args(api, rng, batch)

  def check(self, api, args, out):
    if api == "insert":
      start, n = self.ring.index, len(rows_of(args[0]))
      for i in range(max(n - CAPACITY, 0), n):
        self.priorities[(start + i) % CAPACITY] = self.max_priority
    if api == "update_priorities":
      indices = np.asarray(args[0]).astype(np.int64)
      priorities = np.asarray(args[1], np.float32)
      for i, p in zip(indices, priorities):
        self.priorities[i] = p
      if len(priorities):
        self.max_priority = max(self.max_priority, priorities.max())
      if float(numpy_of(out)) != float(self.max_priority):
        self.fuzzer.inconsistent(api, f"max priority {out}")
      self._check_trees(api)
      return
    super().check(api, args, out)
    if api == "sample":
      weights = numpy_of(out)["weights"]
      if not np.all(np.isfinite(weights)):
        self.fuzzer.inconsistent(api, f"weights {weights}")

  def _check_trees(self, api):
    state = self.fuzzer.state
    leaves = segment_tree.num_leaves_pow2(CAPACITY)
    tree = state["var:prioritized_replay/sum_tree"][leaves : leaves + CAPACITY]
    stored = self.ring.size
    want = self.priorities[:stored].astype(np.float32) ** np.float32(self.alpha)
    if not np.allclose(tree[:stored], want, rtol=1e-5, atol=0):
      self.fuzzer.inconsistent(api, f"sum-tree leaves {tree} vs {want}")
    if state["var:prioritized_replay/max_priority"] != self.max_priority:
      self.fuzzer.inconsistent(api, "running maximum differs")


@contextlib.contextmanager
def _nothing():
  yield


@contextlib.contextmanager
def _segment_tree_impl(impl):
  before = segment_tree.DEFAULT_IMPL
  segment_tree.DEFAULT_IMPL = impl
  try:
    yield
  finally:
    segment_tree.DEFAULT_IMPL = before


# --- frame-stack replay ------------------------------------------------------

STREAMS, PER_STREAM, STACK = 2, 6, 2
FS_RECORDS = Dict(
  states=IntBox(256, (2, 2, STACK), dtype=np.uint8),
  actions=IntBox(3),
  rewards=FloatBox(),
  terminals=BoolBox(),
  add_batch_rank=True,
)


class FrameStackTarget(Target):
  name = "frame_stack_replay"
  weights = {"insert": 4, "sample": 2, "get_transitions": 2, "get_size": 1}
  edge_sizes = (0, 40)

  def __init__(self, backend):
    ex = EXECUTORS[backend](
      FrameStackReplay(STREAMS * PER_STREAM, STREAMS, stack=STACK, seed=2),
      {
        "records": FS_RECORDS,
        "batch_size": IntBox(64),
        "indices": IntBox(STREAMS * PER_STREAM, add_batch_rank=True),
      },
    )
    super().__init__(backend, ex)
    self.steps = []  # Inserted steps, oldest first.

  def _valid(self):
    """Sampleable (stream, slot) pairs."""
    n, c = len(self.steps), PER_STREAM
    if n < 2:
      return []
    back = range(1, n) if n < c else range(1, c - STACK + 1)
    slots = [(n - 1 - b) % c for b in back]
    return [s * c + slot for s in range(STREAMS) for slot in slots]

  def good_args(self, api, rng, batch=None):
    if api == "insert":
      rows = STREAMS if batch is None else batch
      ok = VALID if batch in (None, STREAMS) else REJECT
      return [sample(FS_RECORDS, rng, batch=rows)], ok
    if api == "sample":
      n = int(rng.integers(1, 9)) if batch is None else min(batch, 63)
      return [n], VALID if self._valid() else REJECT
    if api == "get_transitions":
      valid = self._valid()
      n = int(rng.integers(1, 5)) if batch is None else batch
      idx = rng.choice(valid, n) if valid else np.zeros(n, np.int64)
      return [np.asarray(idx, np.int32)], VALID if valid else REJECT
    return [], VALID

  def check(self, api, args, out):
    out = numpy_of(out)
    if api == "insert":
      self.steps.append(
        {k: np.asarray(v, FS_RECORDS[k].dtype) for k, v in args[0].items()}
      )
    if api in ("insert", "get_size"):
      want = STREAMS * min(len(self.steps), PER_STREAM)
      if int(out) != want:
        self.fuzzer.inconsistent(api, f"size {out} != {want}")
      return
    valid = set(self._valid())
    for i, idx in enumerate(out["indices"].tolist()):
      if idx not in valid:
        self.fuzzer.inconsistent(api, f"index {idx} is not sampleable")
        return
      stream, slot = divmod(idx, PER_STREAM)
      n = len(self.steps)
      t = n - 1 - ((n - 1 - slot) % PER_STREAM)
      step = self.steps[t]
      if (
        out["actions"][i] != step["actions"][stream]
        or out["rewards"][i] != step["rewards"][stream]
        or out["terminals"][i] != step["terminals"][stream]
      ):
        self.fuzzer.inconsistent(api, f"transition {idx} differs")
        return


# --- n-step accumulator ------------------------------------------------------

ENVS, N_STEP = 2, 3
OBS = FloatBox((2,), add_batch_rank=True)
NSTEP_SPACES = {
  "states": OBS,
  "next_states": OBS,
  "actions": IntBox(4, dtype=np.int64, add_batch_rank=True),
  "rewards": FloatBox(add_batch_rank=True),
  "terminals": BoolBox(add_batch_rank=True),
  "truncated": BoolBox(add_batch_rank=True),
}


class NStepTarget(Target):
  name = "n_step"
  weights = {"push": 5, "clear": 1}
  edge_sizes = (0, 7)

  def __init__(self, backend):
    ex = EXECUTORS[backend](
      NStepAccumulator(N_STEP, 0.9, num_envs=ENVS), NSTEP_SPACES
    )
    super().__init__(backend, ex)
    self.pending = np.zeros(ENVS, np.int64)

  def good_args(self, api, rng, batch=None):
    if api == "clear":
      return [], VALID
    rows = ENVS if batch is None else batch
    args = [
      sample(NSTEP_SPACES[k], rng, batch=rows)
      for k in (
        "states",
        "actions",
        "rewards",
        "next_states",
        "terminals",
        "truncated",
      )
    ]
    args[4] = rng.uniform(size=rows) < 0.2
    args[5] = rng.uniform(size=rows) < 0.1
    return args, VALID if rows == ENVS else REJECT

  def check(self, api, args, out):
    out = numpy_of(out)
    if api == "clear":
      if int(out) != int(self.pending.sum()):
        self.fuzzer.inconsistent(api, f"dropped {out} != {self.pending}")
      self.pending[:] = 0
      return
    done = np.asarray(args[4], bool) | np.asarray(args[5], bool)
    length = self.pending + 1
    emitted = np.where(done, length, (length == N_STEP).astype(np.int64))
    self.pending = np.where(done, 0, np.minimum(length, N_STEP - 1))
    if len(out["rewards"]) != int(emitted.sum()):
      self.fuzzer.inconsistent(
        api, f"{len(out['rewards'])} rows, expected {emitted.sum()}"
      )
    actions = out["actions"]
    if np.any((actions < 0) | (actions >= 4)) or not np.all(
      np.isfinite(out["rewards"])
    ):
      self.fuzzer.inconsistent(api, "emitted values outside their spaces")


# --- episode buffer ----------------------------------------------------------

EB_RECORDS = Dict(
  obs=FloatBox((2,)), action=IntBox(3), terminals=BoolBox(), add_batch_rank=True
)


class EpisodeBufferTarget(Target):
  name = "episode_buffer"
  weights = {"insert": 4, "get_records": 2, "get_episodes": 2, "clear": 1}
  edge_sizes = (0, 40)

  def __init__(self, backend):
    ex = EXECUTORS[backend](
      EpisodeBuffer(CAPACITY),
      {
        "records": EB_RECORDS,
        "num_records": IntBox(64),
        "num_episodes": IntBox(64),
      },
    )
    super().__init__(backend, ex)
    self.steps = []  # Stored steps, oldest first.

  def good_args(self, api, rng, batch=None):
    if api == "insert":
      n = int(rng.integers(1, 6)) if batch is None else batch
      records = sample(EB_RECORDS, rng, batch=n)
      records["terminals"] = rng.uniform(size=n) < 0.3
      return [records], VALID
    if api in ("get_records", "get_episodes"):
      return [int(rng.integers(0, 20))], VALID
    return [], VALID

  def check(self, api, args, out):
    out = numpy_of(out)
    if api == "insert":
      r = args[0]
      n = len(np.asarray(r["terminals"]))
      for i in range(n):
        self.steps.append(
          {k: np.asarray(r[k], EB_RECORDS[k].dtype)[i] for k in sorted(r)}
        )
      self.steps = self.steps[-CAPACITY:]
      if int(out) != len(self.steps):
        self.fuzzer.inconsistent(api, f"size {out} != {len(self.steps)}")
    elif api == "clear":
      self.steps = []
    elif api == "get_records":
      want = self.steps[len(self.steps) - min(int(args[0]), len(self.steps)) :]
      got = len(out["terminals"])
      if got != len(want) or (
        want and not np.array_equal(out["action"], [s["action"] for s in want])
      ):
        self.fuzzer.inconsistent(api, "records differ from what went in")


# --- the tests ---------------------------------------------------------------

BACKENDS = ["tf", "torch"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_replay(backend, budget, run):
  run(ReplayTarget(backend), budget)


def _impls(backend):
  if backend == "torch":
    return ["torch"]
  impls = ["tf"]
  if segment_tree.DEFAULT_IMPL == "custom_op":
    impls.append("custom_op")
  return impls


@pytest.mark.parametrize(
  "backend,impl",
  [(b, i) for b in BACKENDS for i in _impls(b)],
)
@pytest.mark.slow
def test_prioritized_replay(backend, impl, budget, run):
  run(PrioritizedTarget(backend, impl), budget)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_frame_stack_replay(backend, budget, run):
  run(FrameStackTarget(backend), budget)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_n_step_accumulator(backend, budget, run):
  run(NStepTarget(backend), budget)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_episode_buffer(backend, budget, run):
  run(EpisodeBufferTarget(backend), budget)
