"""Tests of `FIFOQueue` (ingraph_rl/components/queues/fifo_queue.py): FIFO
order against a Python deque, blocking across threads, close, SavedModel
export, and bad input. TF only: the torch executor refuses a queue."""

import collections
import copy
import doctest
import gc
import json
import os
import subprocess
import sys
import uuid

import numpy as np
import pytest
import tensorflow as tf
import tree

from ingraph_rl.components.queues import FIFOQueue
from ingraph_rl.components.queues import fifo_queue as fifo_queue_module
from ingraph_rl.core import Component, api
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.executors.torch import TorchExecutor
from ingraph_rl.spaces import BoolBox, Dict, FloatBox, IntBox, Tuple
from ingraph_rl.testing.component_test import to_numpy

# A nested record: uint8 frames, float and int leaves, a float64 and a bool
# inside a Tuple.
RECORD = Dict(
  image=IntBox(256, shape=(6, 5, 3), dtype=np.uint8),
  reward=FloatBox(),
  action=IntBox(6),
  extra=Tuple(FloatBox((2,), dtype=np.float64), BoolBox()),
)
BATCH = RECORD.with_batch_rank()
SPACES = {
  "records": RECORD,
  "batch": BATCH,
  "num_records": IntBox(),
  "cancel_pending_enqueues": BoolBox(),
}
OUT_OF_RANGE = tf.errors.OutOfRangeError
CANCELLED = tf.errors.CancelledError


def build(
  capacity=256,
  shared_name=None,
  record_space=RECORD,
  spaces=SPACES,
  block_rows=1,
  **kwargs,
):
  queue = FIFOQueue(
    record_space, capacity, shared_name=shared_name, block_rows=block_rows
  )
  return TFExecutor(queue, spaces, **kwargs)


def run(executor, api_name, *args):
  return to_numpy(executor.execute(api_name, *args))


def closer(executor):
  """Teardown for blocked calls: close with cancel wakes every waiter."""
  return lambda: executor.execute("close", True)


def record(seed):
  return RECORD.sample(seed=seed)


def stack(records):
  if not records:
    return BATCH.zeros(0)
  return tree.map_structure(lambda *xs: np.stack(xs), *records)


def unstack(batch):
  n = len(tree.flatten(batch)[0])
  return [tree.map_structure(lambda x, i=i: x[i], batch) for i in range(n)]


def assert_same_records(expected, got):
  """Same structure, exact dtypes, equal values."""
  tree.assert_same_structure(expected, got)

  def leaf(e, g):
    e, g = np.asarray(e), np.asarray(g)
    assert g.dtype == e.dtype, (g.dtype, e.dtype)
    np.testing.assert_array_equal(g, e)

  tree.map_structure(leaf, expected, got)


# --- FIFO order ------------------------------------------------------------


def test_fifo_order_against_deque_reference():
  ex = build()
  ref = collections.deque()
  rng = np.random.default_rng(0)
  used = collections.Counter()
  for step in range(80):
    op = rng.choice(
      ["enqueue", "enqueue_many", "dequeue", "dequeue_many", "size"]
    )
    if op == "enqueue":
      rec = record(1000 + step)
      ref.append(rec)
      assert run(ex, "enqueue", rec) == len(ref)
    elif op == "enqueue_many":
      batch = BATCH.sample(int(rng.integers(0, 5)), seed=2000 + step)
      ref.extend(unstack(batch))
      assert run(ex, "enqueue_many", batch) == len(ref)
    elif op == "dequeue" and ref:
      assert_same_records(ref.popleft(), run(ex, "dequeue"))
    elif op == "dequeue_many":
      n = int(rng.integers(0, len(ref) + 1))
      expected = stack([ref.popleft() for _ in range(n)])
      assert_same_records(expected, run(ex, "dequeue_many", np.int32(n)))
      used["dequeue_many>=2"] += n >= 2
    used[op] += 1
    size = run(ex, "size")
    assert size.dtype == np.int32 and size.shape == ()
    assert size == len(ref)
  assert min(used.values()) >= 5, used
  assert len(ref) > 0
  assert_same_records(
    stack(list(ref)), run(ex, "dequeue_many", np.int32(len(ref)))
  )
  assert run(ex, "size") == 0


def test_output_spaces_are_fixed():
  specs = build().apis
  per_item = [(p, s.dtype, s.shape) for p, s in RECORD.flatten()]
  out = specs["dequeue"].output_space
  assert [(p, s.dtype, s.shape) for p, s in out.flatten()] == per_item
  assert not any(s.has_batch_rank for _, s in out.flatten())
  out = specs["dequeue_many"].output_space
  assert [(p, s.dtype, s.shape) for p, s in out.flatten()] == per_item
  assert all(s.has_batch_rank for _, s in out.flatten())
  for name in ["enqueue", "enqueue_many", "size", "close"]:
    assert specs[name].output_space == IntBox(None, (), dtype=np.int32)


def test_the_torch_executor_refuses_a_queue_by_name():
  # A queue holds no number to compare, so the torch mirror has none.
  with pytest.raises(BuildError, match="fifo_queue"):
    TorchExecutor(FIFOQueue(RECORD, 4), SPACES)


class Learner(Component):
  """Dequeues a Python-int number of records (as IMPALA's learner does)."""

  def __init__(self, num_records):
    super().__init__(scope="learner")
    self.num_records = num_records
    self.queue = FIFOQueue(RECORD, capacity=16)

  @api
  def put(self, batch):
    return self.queue.enqueue_many(batch)

  @api
  def take(self):
    return self.queue.dequeue_many(self.num_records)


def test_dequeue_many_python_int_keeps_batch_rank():
  ex = TFExecutor(Learner(3), {"batch": BATCH})
  out_space = ex.apis["take"].output_space
  assert all(s.has_batch_rank for _, s in out_space.flatten())
  batch = BATCH.sample(5, seed=4)
  assert run(ex, "put", batch) == 5
  recs = unstack(batch)
  assert_same_records(stack(recs[:3]), run(ex, "take"))
  assert run(ex, "put", BATCH.sample(1, seed=5)) == 3


def test_enqueued_values_are_copies():
  # The queue keeps what was enqueued, not a view of the caller's arrays.
  ex = build()
  rec, batch = record(5), BATCH.sample(2, seed=6)
  keep_rec, keep_batch = copy.deepcopy(rec), copy.deepcopy(batch)
  run(ex, "enqueue", rec)
  run(ex, "enqueue_many", batch)
  rec["image"][...] = 7
  batch["image"][...] = 9
  assert_same_records(keep_rec, run(ex, "dequeue"))
  assert_same_records(keep_batch, run(ex, "dequeue_many", np.int32(2)))


# --- blocking across threads -------------------------------------------------


def test_dequeue_blocks_until_another_thread_enqueues(background):
  ex = build()
  call = background(closer(ex), run, ex, "dequeue")
  assert call.still_blocked()
  assert run(ex, "size") == 0
  rec = record(3)
  run(ex, "enqueue", rec)
  assert_same_records(rec, call.finish())
  assert run(ex, "size") == 0


def test_dequeue_many_waits_for_all_its_records(background, wait_until):
  # Capacity 2 < 3 records: the pending dequeue_many takes records as they
  # arrive (size() no longer counts them), which makes room for the rest;
  # a later dequeue waits behind it.
  ex = build(capacity=2)
  recs = [record(30 + i) for i in range(4)]
  run(ex, "enqueue", recs[0])
  many = background(closer(ex), run, ex, "dequeue_many", np.int32(3))
  wait_until(
    lambda: run(ex, "size") == 0,
    "the pending dequeue_many took the first record",
  )
  one = background(closer(ex), run, ex, "dequeue")
  assert many.still_blocked() and one.still_blocked()
  for rec in recs[1:]:
    run(ex, "enqueue", rec)
  assert_same_records(stack(recs[:3]), many.finish())
  assert_same_records(recs[3], one.finish())
  assert run(ex, "size") == 0


# --- close -------------------------------------------------------------------


def test_close_wakes_a_blocked_dequeue(background, wait_until):
  ex = build()
  rec = record(40)
  run(ex, "enqueue", rec)
  one = background(closer(ex), run, ex, "dequeue_many", np.int32(2))
  wait_until(
    lambda: run(ex, "size") == 0, "the pending dequeue_many took the record"
  )
  assert one.still_blocked()
  # Closing fails the partly served dequeue_many at once, which puts its
  # record back in front (before close returns the size).
  assert run(ex, "close", False) == 1
  with pytest.raises(OUT_OF_RANGE):
    one.finish()
  assert run(ex, "size") == 1
  assert_same_records(rec, run(ex, "dequeue"))
  with pytest.raises(OUT_OF_RANGE):
    run(ex, "dequeue")


def test_after_close():
  ex = build()
  recs = [record(50 + i) for i in range(3)]
  run(ex, "enqueue_many", stack(recs))
  assert run(ex, "close", False) == 3
  with pytest.raises(CANCELLED):
    run(ex, "enqueue", recs[0])
  with pytest.raises(CANCELLED):
    run(ex, "enqueue_many", stack(recs))
  with pytest.raises(CANCELLED):
    run(ex, "close", False)  # Already closed.
  assert run(ex, "close", True) == 3  # Closing with cancel never fails.
  # Remaining records still come out, in order; a dequeue that cannot be
  # served fails at once and loses nothing.
  assert_same_records(recs[0], run(ex, "dequeue"))
  with pytest.raises(OUT_OF_RANGE):
    run(ex, "dequeue_many", np.int32(3))
  assert run(ex, "size") == 2
  assert_same_records(stack(recs[1:]), run(ex, "dequeue_many", np.int32(2)))
  assert_same_records(stack([]), run(ex, "dequeue_many", np.int32(0)))
  with pytest.raises(OUT_OF_RANGE):
    run(ex, "dequeue")


@pytest.mark.parametrize("cancel", [False, True])
def test_close_and_a_pending_enqueue(cancel, background):
  ex = build(capacity=1)
  a, b = record(60), record(61)
  run(ex, "enqueue", a)
  enqueue = background(closer(ex), run, ex, "enqueue", b)
  assert enqueue.still_blocked(0.5)  # Full: it waits for room.
  if cancel:
    # Closes at once; the pending enqueue fails.
    assert run(ex, "close", True) == 1
    with pytest.raises(CANCELLED):
      enqueue.finish()
    assert_same_records(a, run(ex, "dequeue"))
  else:
    # Closes after the enqueues pending before it are done.
    close = background(closer(ex), run, ex, "close", False)
    assert close.still_blocked()
    assert_same_records(a, run(ex, "dequeue"))
    assert enqueue.finish() == 1
    assert close.finish() == 1
    assert_same_records(b, run(ex, "dequeue"))
  with pytest.raises(OUT_OF_RANGE):
    run(ex, "dequeue")


# --- sharing -----------------------------------------------------------------


def test_queues_are_private_unless_shared():
  # In eager TF, two FIFOQueueV2 ops with an empty shared_name and the
  # same attributes are ONE queue; each built component must get its own.
  rec = record(70)
  a, b = build(), build()
  run(a, "enqueue", rec)
  assert run(b, "size") == 0 and run(a, "size") == 1
  name = f"test_fifo_shared_{uuid.uuid4().hex}"
  c, d = build(shared_name=name), build(shared_name=name)
  run(c, "enqueue", rec)
  assert run(d, "size") == 1
  assert_same_records(rec, run(d, "dequeue"))
  assert run(c, "size") == 0
  with pytest.raises(BuildError, match=name):
    build(capacity=3, shared_name=name)


def test_private_tf_queue_is_destroyed_with_its_executor():
  ex = build(capacity=4)
  name = ex.root.resource_name
  run(ex, "enqueue", record(71))
  del ex
  gc.collect()
  # A queue with this name but other settings can only be made if the old
  # one is gone.
  handle = tf.raw_ops.FIFOQueueV2(
    component_types=[tf.float32],
    shapes=[[]],
    capacity=1,
    container="",
    shared_name=name,
  )
  tf.raw_ops.DestroyResourceOp(resource=handle)


# --- SavedModel --------------------------------------------------------------

SAVE_RECORD = Dict(
  image=IntBox(256, shape=(3, 2), dtype=np.uint8),
  reward=FloatBox(),
  action=IntBox(6),
)

# Runs in a fresh interpreter that cannot import ingraph_rl.
_LOAD_AND_USE = r"""
import json, sys
sys.modules["ingraph_rl"] = None  # Even an installed copy stays unused.
try:
  import ingraph_rl
  importable = True
except ImportError:
  importable = False
import numpy as np
import tensorflow as tf

path, records = sys.argv[1], json.loads(sys.argv[2])
model = tf.saved_model.load(path)
enqueue, dequeue, size = (model.signatures[k]
                          for k in ("enqueue", "dequeue", "size"))
inputs = enqueue.structured_input_signature[1]  # {input name: TensorSpec}
assert len(inputs) == 3, inputs

def feed(rec):  # Leaves have distinct dtypes: match inputs by dtype.
  kwargs = {}
  for name, spec in inputs.items():
    [key] = [k for k, v in rec.items()
             if np.dtype(v["dtype"]) == spec.dtype.as_numpy_dtype]
    kwargs[name] = tf.constant(np.asarray(rec[key]["value"],
                                          rec[key]["dtype"]))
  return kwargs

def scalar(outputs):
  [value] = outputs.values()
  return int(value.numpy())

out = {"importable": importable, "size_at_load": scalar(size())}
out["enqueue_sizes"] = [scalar(enqueue(**feed(r))) for r in records]
out["dequeued"] = [
    {k: {"dtype": v.dtype.name, "value": v.numpy().tolist()}
     for k, v in dequeue().items()} for _ in records]
out["size_at_end"] = scalar(size())
print(json.dumps(out))
"""


@pytest.mark.slow
def test_saved_model_round_trip_in_fresh_process(tmp_path):
  names = ["enqueue", "dequeue", "size"]
  ex = TFExecutor(
    FIFOQueue(SAVE_RECORD, capacity=8),
    {"records": SAVE_RECORD},
    api_names=names,
  )
  run(ex, "enqueue", SAVE_RECORD.sample(seed=0))  # Not part of the model.
  path = str(tmp_path / "model")
  tf.saved_model.save(
    ex.module,
    path,
    signatures={n: ex.function(n).get_concrete_function() for n in names},
  )

  recs = [SAVE_RECORD.sample(seed=s) for s in (1, 2)]
  payload = [
    {
      k: {"dtype": np.asarray(v).dtype.name, "value": np.asarray(v).tolist()}
      for k, v in r.items()
    }
    for r in recs
  ]
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  env["TF_CPP_MIN_LOG_LEVEL"] = "2"
  proc = subprocess.run(
    [sys.executable, "-c", _LOAD_AND_USE, path, json.dumps(payload)],
    env=env,
    cwd=tmp_path,
    capture_output=True,
    text=True,
    timeout=180,
    check=False,
  )
  assert proc.returncode == 0, proc.stderr[-4000:]
  out = json.loads(proc.stdout.strip().splitlines()[-1])
  assert out["importable"] is False
  assert out["size_at_load"] == 0  # The loaded queue starts empty.
  assert out["enqueue_sizes"] == [1, 2]
  for rec, got in zip(recs, out["dequeued"]):
    assert sorted(got) == sorted(rec)
    for key, value in rec.items():
      value = np.asarray(value)
      assert got[key]["dtype"] == value.dtype.name, key
      np.testing.assert_array_equal(np.asarray(got[key]["value"]), value)
  assert out["size_at_end"] == 0
  assert run(ex, "size") == 1  # The live queue is untouched.


# --- bad input ---------------------------------------------------------------


def _bad_record(case):
  rec = record(80)
  if case == "missing_key":
    del rec["action"]
  elif case == "extra_key":
    rec["done"] = np.bool_(True)
  elif case == "image_dtype":
    rec["image"] = rec["image"].astype(np.float32)
  elif case == "image_shape":
    rec["image"] = rec["image"][:5]
  elif case == "tuple_length":
    rec["extra"] = rec["extra"][:1]
  return rec


@pytest.mark.parametrize(
  "case",
  ["missing_key", "extra_key", "image_dtype", "image_shape", "tuple_length"],
)
def test_bad_enqueue_input(case):
  ex = build()
  run(ex, "enqueue", record(81))
  with pytest.raises(SpaceError) as info:
    ex.execute("enqueue", _bad_record(case))
  msg = str(info.value)
  assert "component 'fifo_queue'" in msg
  assert "API method 'enqueue'" in msg
  assert "argument 'records'" in msg
  assert run(ex, "size") == 1


def test_bad_enqueue_many_and_dequeue_many_input():
  ex = build()
  run(ex, "enqueue", record(82))
  bad = BATCH.sample(3, seed=1)
  bad["image"] = bad["image"].astype(np.int32)
  with pytest.raises(SpaceError) as info:
    ex.execute("enqueue_many", bad)
  msg = str(info.value)
  assert "API method 'enqueue_many'" in msg and "argument 'batch'" in msg
  assert "component 'fifo_queue'" in msg
  ragged = BATCH.sample(3, seed=1)
  ragged["reward"] = ragged["reward"][:2]
  with pytest.raises(SpaceError, match="argument 'batch'"):
    ex.execute("enqueue_many", ragged)
  with pytest.raises(SpaceError) as info:
    ex.execute("dequeue_many", np.int32(-1))
  msg = str(info.value)
  assert "API method 'dequeue_many'" in msg
  assert "argument 'num_records'" in msg and "component 'fifo_queue'" in msg
  assert run(ex, "size") == 1


class Actor(Component):
  """Feeds its own input to a nested queue."""

  def __init__(self, record_space):
    super().__init__(scope="actor")
    self.queue = FIFOQueue(record_space, capacity=4)

  @api
  def push(self, rollout):
    return self.queue.enqueue(rollout)


@pytest.mark.parametrize("wrong", ["dtype", "structure", "batch_rank"])
def test_mismatched_space_is_a_build_error(wrong):
  bad_space = {
    "dtype": Dict(
      image=FloatBox(shape=(6, 5, 3)),
      reward=FloatBox(),
      action=IntBox(6),
      extra=Tuple(FloatBox((2,), dtype=np.float64), BoolBox()),
    ),
    "structure": Dict(image=RECORD["image"], reward=FloatBox()),
    "batch_rank": BATCH,
  }[wrong]
  with pytest.raises(SpaceError) as info:
    TFExecutor(Actor(RECORD), {"rollout": bad_space})
  msg = str(info.value)
  assert "component 'actor/fifo_queue'" in msg
  assert "API method 'enqueue'" in msg and "argument 'records'" in msg
  # The matching space builds.
  ex = TFExecutor(Actor(RECORD), {"rollout": RECORD})
  assert run(ex, "push", record(1)) == 1


BLOCK_SPACES = {"batch": BATCH, "num_records": IntBox()}
BLOCK_APIS = ["enqueue_many", "dequeue_many", "size"]


def test_blocks_keep_fifo_order_and_count_records():
  ex = build(
    capacity=12, block_rows=3, spaces=BLOCK_SPACES, api_names=BLOCK_APIS
  )
  ref = collections.deque()
  rng = np.random.default_rng(5)
  for step in range(30):
    if rng.random() < 0.5 and len(ref) <= 6:
      batch = BATCH.sample(3 * int(rng.integers(0, 3)), seed=100 + step)
      ref.extend(unstack(batch))
      assert run(ex, "enqueue_many", batch) == len(ref)
    else:
      n = 3 * int(rng.integers(0, len(ref) // 3 + 1))
      expected = stack([ref.popleft() for _ in range(n)])
      out = run(ex, "dequeue_many", np.int32(n))
      assert_same_records(expected, out)
    assert run(ex, "size") == len(ref)
  # 12 records fill it: 4 blocks, the capacity.
  ex.execute("enqueue_many", BATCH.sample(12 - len(ref), seed=7))
  assert run(ex, "size") == 12


def test_blocks_refuse_counts_that_are_not_multiples():
  ex = build(
    capacity=12, block_rows=3, spaces=BLOCK_SPACES, api_names=BLOCK_APIS
  )
  run(ex, "enqueue_many", BATCH.sample(3, seed=1))
  with pytest.raises(SpaceError) as info:
    ex.execute("enqueue_many", BATCH.sample(4, seed=2))
  msg = str(info.value)
  assert "component 'fifo_queue'" in msg and "argument 'batch'" in msg
  assert "API method 'enqueue_many'" in msg and "block_rows (3)" in msg
  with pytest.raises(SpaceError) as info:
    ex.execute("dequeue_many", np.int32(2))
  msg = str(info.value)
  assert "argument 'num_records'" in msg and "block_rows (3)" in msg
  assert run(ex, "size") == 3  # Neither call changed the queue.


class Drainer(Component):
  """Dequeues a fixed count given at build time (a Python int)."""

  def __init__(self, count):
    super().__init__(scope="drainer")
    self.count = count
    self.queue = FIFOQueue(RECORD, capacity=6, block_rows=3)

  @api
  def drain(self):
    return self.queue.dequeue_many(self.count)


def test_blocks_refuse_single_records_and_bad_counts_at_build():
  for name in ["enqueue", "dequeue"]:
    with pytest.raises(BuildError, match=f"{name} moves one record"):
      build(capacity=6, block_rows=3, spaces=SPACES, api_names=[name])
  with pytest.raises(SpaceError, match="multiple of block_rows"):
    TFExecutor(Drainer(4), {})
  assert TFExecutor(Drainer(3), {}).apis  # A multiple builds.
  for block_rows in [0, 4, 2.0, True]:
    with pytest.raises(BuildError, match="block_rows"):
      FIFOQueue(RECORD, 6, block_rows=block_rows)


def test_constructor_checks():
  with pytest.raises(SpaceError, match="batch"):
    FIFOQueue(BATCH, 4)
  with pytest.raises(SpaceError, match="unknown dim"):
    FIFOQueue(FloatBox(shape=(None, 2)), 4)
  with pytest.raises(SpaceError, match="not a Space"):
    FIFOQueue({"a": FloatBox()}, 4)
  for capacity in [0, -1, 2.0, True, None]:
    with pytest.raises(BuildError, match="capacity"):
      FIFOQueue(RECORD, capacity)
  with pytest.raises(BuildError, match="shared_name"):
    FIFOQueue(RECORD, 4, shared_name="")


def test_docstring_example_runs():
  result = doctest.testmod(fifo_queue_module, optionflags=doctest.ELLIPSIS)
  assert result.attempted >= 8
  assert result.failed == 0


def test_queue_spec_orders_leaves_and_refuses_shapes_a_queue_cannot_hold():
  space = Dict(
    obs=FloatBox((2, 3), add_batch_rank=True), id=IntBox(5, dtype="int64")
  )
  dtypes, shapes = fifo_queue_module.queue_spec(space, batch_size=4)
  # Dict leaves in sorted-key order: "id", then "obs".
  assert dtypes == [tf.int64, tf.float32]
  assert shapes == [(), (4, 2, 3)]
  for bad, size in (
    (FloatBox((2,), add_batch_rank=True), None),
    (FloatBox((2,), add_batch_rank=True, add_time_rank=True), 4),
    (FloatBox((None, 2)), None),
  ):
    with pytest.raises(BuildError, match="needs a fixed shape"):
      fifo_queue_module.queue_spec(bad, batch_size=size)


def test_queue_resource_of_a_taken_name_with_other_records_fails_at_once():
  name = f"spec_{uuid.uuid4().hex}"
  first = fifo_queue_module.queue_resource(FloatBox((2,)), 4, name)
  assert first.dtypes == [tf.float32] and first.shapes == [(2,)]
  with pytest.raises(tf.errors.InvalidArgumentError):
    fifo_queue_module.queue_resource(IntBox(3), 4, name)
