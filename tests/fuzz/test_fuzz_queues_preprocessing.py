"""Fuzz: FIFO queue and staging area (TF only: the torch mirror has no
queues) and preprocessors, on both executors.

The queue targets never make a call that would block (an enqueue on a full
queue, a dequeue of more than is queued): their models know the size.
Records dequeued must be the ones enqueued, in order.
"""

import collections

import numpy as np
import pytest

from ingraph_rl.components.preprocessing import (
  AtariPreprocessor,
  Clip,
  Divide,
  PreprocessorStack,
  RewardClipping,
)
from ingraph_rl.components.queues import FIFOQueue, StagingArea
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
BACKENDS = ["tf", "torch"]
RECORD = Dict(a=FloatBox((2,)), b=IntBox(3), c=BoolBox())
QUEUE_CAPACITY = 8


def as_record_rows(batch, space):
  """A batch (possibly Python lists) -> list of per-row dicts, in the
  space's dtypes."""
  arrays = {k: np.asarray(batch[k], space[k].dtype) for k in sorted(batch)}
  n = len(next(iter(arrays.values())))
  return [{k: v[i] for k, v in arrays.items()} for i in range(n)]


def stacked(rows, space):
  return {
    k: np.stack([r[k] for r in rows])
    if rows
    else np.zeros((0,) + space[k].shape, space[k].dtype)
    for k in sorted(space.keys())
  }


def rows_in(args, key="a"):
  """Rows of a batch argument (None if it is not a well-formed batch)."""
  try:
    return len(np.asarray(args[0][key]))
  except (TypeError, KeyError, IndexError):
    return None


class FIFOTarget(Target):
  name = "fifo_queue"
  weights = {
    "enqueue": 3,
    "enqueue_many": 3,
    "dequeue": 2,
    "dequeue_many": 3,
    "size": 1,
  }
  edge_sizes = (0, 20)

  def __init__(self, backend):
    ex = EXECUTORS[backend](
      FIFOQueue(RECORD, QUEUE_CAPACITY),
      {
        "records": RECORD,
        "batch": RECORD.with_batch_rank(),
        "num_records": IntBox(64),
      },
    )
    super().__init__(backend, ex)
    self.model = collections.deque()

  def free(self):
    return QUEUE_CAPACITY - len(self.model)

  def good_args(self, api, rng, batch=None):
    if api == "enqueue":
      return [sample(RECORD, rng)], VALID if self.free() else None
    if api == "enqueue_many":
      n = int(rng.integers(1, 4)) if batch is None else batch
      ok = VALID if n <= self.free() else None
      return [sample(RECORD.with_batch_rank(), rng, batch=n)], ok
    if api == "dequeue":
      return [], VALID if self.model else None
    if api == "dequeue_many":
      return [int(rng.integers(0, len(self.model) + 1))], VALID
    return [], VALID

  def safe(self, api, args):
    if api == "enqueue":
      return self.free() > 0
    if api == "enqueue_many":
      n = rows_in(args)
      return n is not None and n <= self.free()
    if api == "dequeue":
      return bool(self.model)
    if api == "dequeue_many":
      try:
        return 0 <= int(np.asarray(args[0])) <= len(self.model)
      except (TypeError, ValueError, IndexError):
        return False
    return True

  def check(self, api, args, out):
    out = numpy_of(out)
    if api == "enqueue":
      self.model.extend(
        as_record_rows({k: [np.asarray(v)] for k, v in args[0].items()}, RECORD)
      )
    elif api == "enqueue_many":
      self.model.extend(as_record_rows(args[0], RECORD))
    elif api == "dequeue":
      want = self.model.popleft()
      if not same(out, want):
        self.fuzzer.inconsistent(api, f"dequeued {out}, enqueued {want}")
      return
    elif api == "dequeue_many":
      n = int(np.asarray(args[0]))
      want = [self.model.popleft() for _ in range(n)]
      if not same(out, stacked(want, RECORD)):
        self.fuzzer.inconsistent(api, "records differ from what went in")
      return
    if int(out) != len(self.model):
      self.fuzzer.inconsistent(api, f"size {out} != {len(self.model)}")


STAGED = Dict(x=FloatBox((3,)), n=IntBox(5), add_batch_rank=True)


class StagingTarget(Target):
  name = "staging_area"
  weights = {"put": 3, "get": 3, "size": 1}
  edge_sizes = (0, 50)
  capacity = 2

  def __init__(self, backend):
    ex = EXECUTORS[backend](
      StagingArea(STAGED, capacity=self.capacity), {"records": STAGED}
    )
    super().__init__(backend, ex)
    self.model = collections.deque()

  def good_args(self, api, rng, batch=None):
    if api == "put":
      n = int(rng.integers(1, 5)) if batch is None else batch
      ok = VALID if len(self.model) < self.capacity else None
      return [sample(STAGED, rng, batch=n)], ok
    if api == "get":
      return [], VALID if self.model else None
    return [], VALID

  def safe(self, api, args):
    if api == "put":
      return len(self.model) < self.capacity
    if api == "get":
      return bool(self.model)
    return True

  def check(self, api, args, out):
    out = numpy_of(out)
    if api == "put":
      self.model.append(
        {k: np.asarray(v, STAGED[k].dtype) for k, v in args[0].items()}
      )
    elif api == "get":
      want = self.model.popleft()
      if not same(out, want):
        self.fuzzer.inconsistent(api, "staged value differs from what went in")
      return
    if int(out) != len(self.model):
      self.fuzzer.inconsistent(api, f"size {out} != {len(self.model)}")


# --- preprocessors -----------------------------------------------------------

ENVS, FRAME, SIZE, FRAMES = 2, (12, 10, 3), 6, 2


class AtariTarget(Target):
  """The Atari stack (grayscale, resize, frame stack with per-env resets):
  a stack where an env was reset holds one frame repeated; elsewhere it is
  the previous stack shifted by one."""

  name = "atari_preprocessor"
  weights = {"call": 1}
  edge_sizes = (0, 5)

  def __init__(self, backend):
    self.spaces = {
      "inputs": IntBox(256, FRAME, dtype=np.uint8, add_batch_rank=True),
      "resets": BoolBox(add_batch_rank=True),
    }
    ex = EXECUTORS[backend](
      AtariPreprocessor(num_envs=ENVS, size=SIZE, num_frames=FRAMES),
      self.spaces,
    )
    super().__init__(backend, ex)
    self.last = np.zeros((ENVS, SIZE, SIZE, FRAMES), np.uint8)

  def good_args(self, api, rng, batch=None):
    n = ENVS if batch is None else batch
    frames = sample(self.spaces["inputs"], rng, batch=n)
    resets = rng.uniform(size=n) < 0.3
    return [frames, resets], VALID if n == ENVS else REJECT

  def check(self, api, args, out):
    out = numpy_of(out)
    resets = np.asarray(args[1], bool)
    for e in range(ENVS):
      if resets[e]:
        ok = all(
          np.array_equal(out[e, ..., 0], out[e, ..., k]) for k in range(FRAMES)
        )
      else:
        ok = np.array_equal(out[e, ..., :-1], self.last[e, ..., 1:])
      if not ok:
        self.fuzzer.inconsistent(api, f"stack of env {e} is not consistent")
    self.last = out


class StatelessTarget(Target):
  """Clip then divide, and reward clipping: outputs equal a NumPy
  reference exactly."""

  name = "preprocessor_stack"
  weights = {"call": 1}
  edge_sizes = (0, 300)

  def __init__(self, backend):
    self.space = FloatBox((3,), add_batch_rank=True, add_time_rank=True)
    ex = EXECUTORS[backend](
      PreprocessorStack(Clip(-1.0, 1.0), Divide(4.0)), {"inputs": self.space}
    )
    super().__init__(backend, ex)

  def good_args(self, api, rng, batch=None):
    b = int(rng.integers(1, 4)) if batch is None else batch
    return [sample(self.space, rng, batch=b, time=int(rng.integers(1, 3)))], (
      VALID
    )

  def check(self, api, args, out):
    x = np.asarray(args[0], np.float32)
    want = np.clip(x, np.float32(-1), np.float32(1)) / np.float32(4)
    if not np.array_equal(numpy_of(out), want):
      self.fuzzer.inconsistent(api, "output differs from clip / 4")


class RewardClippingTarget(StatelessTarget):
  name = "reward_clipping"

  def __init__(self, backend):
    self.space = FloatBox(add_batch_rank=True, add_time_rank=True)
    ex = EXECUTORS[backend](RewardClipping("abs_one"), {"inputs": self.space})
    Target.__init__(self, backend, ex)

  def check(self, api, args, out):
    x = np.asarray(args[0], np.float32)
    if not np.array_equal(numpy_of(out), np.clip(x, -1, 1)):
      self.fuzzer.inconsistent(api, "output differs from clip(-1, 1)")


@pytest.mark.slow
def test_fifo_queue(budget, run):
  run(FIFOTarget("tf"), budget)


def test_staging_area(budget, run):
  run(StagingTarget("tf"), budget)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_atari_preprocessor(backend, budget, run):
  run(AtariTarget(backend), budget)


@pytest.mark.parametrize(
  "make", [StatelessTarget, RewardClippingTarget], ids=["stack", "rewards"]
)
@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_stateless_preprocessors(make, backend, budget, run):
  run(make(backend), budget)
