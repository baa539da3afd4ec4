r"""Replay memories: insert / sample / priority-update cost against capacity,
our in-graph segment trees against a classic Python segment tree, and the
resident memory of a million Atari transitions.

Variants, at capacities 1e3 .. 1e6, for CartPole-sized records (obs float32
(4,), action int32, reward float32, terminal bool) and for 84x84 uint8 frames
(obs uint8 (84, 84) instead):

  uniform_ours    ReplayMemory through TFExecutor
  uniform_numpy   baseline: a NumPy ring buffer (fancy-index write / gather)
  per_tf          PrioritizedReplay, segment trees impl="tf" (plain TF ops)
  per_custom_op   PrioritizedReplay, impl="custom_op" (the C++ kernels;
                  skipped, and said so in config, when the library isn't built)
  per_python      baseline: the classic proportional PER -- sum and min
                  segment trees in Python lists, one Python loop per sampled
                  record (a descent per mass) and per updated index (a walk
                  to the root per tree), records in NumPy arrays

Operations: insert (batch 64; on a full memory it overwrites the oldest),
sample (batch 512), update_priorities (batch 512, random indices) and
sample+update (sample 512, then update the sampled indices), each on a memory
filled to capacity. Ours is timed through `executor.function(api)` (the raw
tf.function, tf tensors prepared beforehand: no input checks, no NumPy
conversion), so the figure is the memory itself.

Per (records, capacity) group every variant is built and filled, then all
their operations run interleaved (`common.interleave`, rotating order), each
repetition `calls` operations back to back (calibrated once per operation to
~`target` seconds). A group that would hold more than --interleave_budget_gib
(84x84 at 1e6: 7 GB per variant) builds ONE variant at a time, measures its
operations interleaved among themselves, frees it (del + gc) and goes on:
those groups' ratios pair repetitions of sequential runs.

Frame-stack memory: a subprocess builds `FrameStackReplay(1e6, num_streams=
32, stack=4)` over 84x84 uint8 frames, inserts 1e6 steps (so every frame
slot is written) and reports its peak RSS, against the 8 GiB target and the
naive size (obs and next_obs of 84x84x4 uint8 per transition: 52.6 GiB). If
the module is missing the JSON says "not measured". --quick does the same at
capacity 1e4.

    python -m benchmarks.memory            # the measurement (< ~15 min)
    python -m benchmarks.memory --quick    # smoke run, < 60 s

Writes benchmarks/results/memory.json (and memory.png without --quick).
"""

import gc
import importlib
import importlib.util
import inspect
import json
import math
import os
import resource
import subprocess
import sys
import time

import numpy as np
import psutil
import tensorflow as tf
from absl import app, flags

from benchmarks import common  # Sets OMP_WAIT_POLICY before TF loads.
from benchmarks.python_replay import ALPHA, BETA, NumpyRing, PythonPER
from ingraph_rl import ops
from ingraph_rl.components.memories import segment_tree
from ingraph_rl.components.memories.prioritized_replay import (
  PrioritizedReplay,
)
from ingraph_rl.components.memories.replay_memory import (
  ReplayMemory,
)
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.spaces import (
  BoolBox,
  Dict,
  FloatBox,
  IntBox,
)

NAME = "memory"

_QUICK = flags.DEFINE_bool(
  "quick",
  False,
  "Smoke run (< 60 s): capacities 1e3 and 1e4, few reps, "
  "short repetitions, no plot.",
)
_REPS = flags.DEFINE_integer(
  "reps", None, "Timed repetitions per operation (default 5; 2 with --quick)."
)
_CAPACITIES = flags.DEFINE_list(
  "capacities",
  None,
  "Memory capacities (default 1000,10000,100000,"
  "1000000; 1000,10000 with --quick). 84x84 frames skip 1e6 with --quick.",
)
_INTERLEAVE_BUDGET_GIB = flags.DEFINE_float(
  "interleave_budget_gib",
  4.0,
  "A (records, capacity) group whose variants "
  "together would hold more than this builds and measures one variant at a "
  "time.",
)
# Internal: the frame-stack RSS subprocess.
_RSS_CHILD = flags.DEFINE_integer(
  "rss_child",
  0,
  "(internal) Build FrameStackReplay of this capacity, "
  "print its RSS as JSON and exit.",
)
_RSS_CHILD_STREAMS = flags.DEFINE_integer(
  "rss_child_streams", 32, "(internal) num_streams of that memory."
)
_RSS_CHILD_FILL = flags.DEFINE_bool(
  "rss_child_fill", False, "(internal) Insert `rss_child` steps first."
)
_FRAME_STACK_CAPACITY = flags.DEFINE_integer(
  "frame_stack_capacity",
  None,
  "Capacity of the FrameStackReplay whose "
  "resident memory is measured (default 1000000; 10000 with --quick; 0 "
  "skips it).",
)
_FRAME_STACK_STREAMS = flags.DEFINE_integer(
  "frame_stack_streams",
  32,
  "num_streams (parallel environments) of the "
  "FrameStackReplay whose resident memory is measured.",
)


INSERT_BATCH, SAMPLE_BATCH, UPDATE_BATCH = 64, 512, 512
FRAME = (84, 84)
FRAME_STACK = 4
NUM_ATARI_ACTIONS = 18
GIB = 2.0**30
FRAME_STACK_CAPACITY = 1_000_000
FRAME_STACK_QUICK_CAPACITY = 10_000

TARGETS = {
  "python_over_ours_at_1e6": 10.0,
  "growth_1e4_to_1e6": 2.0,
  "frame_stack_rss_gib": 8.0,
}

OP_LABEL = {
  "insert": f"insert b{INSERT_BATCH}",
  "sample": f"sample b{SAMPLE_BATCH}",
  "update": f"update b{UPDATE_BATCH}",
  "sample_update": f"sample+update b{SAMPLE_BATCH}",
  "sample_update_fused": f"sample+update b{SAMPLE_BATCH}, fused",
  "call": "no-op tf.function call",
}
OP_RECORDS = {
  "insert": INSERT_BATCH,
  "sample": SAMPLE_BATCH,
  "update": UPDATE_BATCH,
  "sample_update": SAMPLE_BATCH,
  "sample_update_fused": SAMPLE_BATCH,
}
VARIANTS = (
  "uniform_ours",
  "uniform_numpy",
  "per_tf",
  "per_custom_op",
  "per_python",
)
PER_IMPLS = ("python", "tf", "custom_op")


# --- records -----------------------------------------------------------------


class RecordKind:
  """A record layout: its space and how to make random batches of it."""

  def __init__(self, name, obs_shape, obs_dtype, num_actions):
    self.name = name
    self.obs_shape, self.obs_dtype = tuple(obs_shape), np.dtype(obs_dtype)
    self.num_actions = num_actions
    if self.obs_dtype == np.uint8:
      obs = IntBox(256, shape=self.obs_shape, dtype=np.uint8)
    else:
      obs = FloatBox(self.obs_shape)
    self.space = Dict(
      obs=obs,
      action=IntBox(num_actions),
      reward=FloatBox(),
      terminal=BoolBox(),
      add_batch_rank=True,
    )
    self.bytes_per_record = (
      int(np.prod(self.obs_shape)) * self.obs_dtype.itemsize + 4 + 4 + 1
    )

  def batch(self, n, rng):
    """A dict of NumPy arrays: n random records."""
    if self.obs_dtype == np.uint8:
      obs = rng.integers(0, 256, (n,) + self.obs_shape, dtype=np.uint8)
    else:
      obs = rng.standard_normal((n,) + self.obs_shape).astype(self.obs_dtype)
    return {
      "obs": obs,
      "action": rng.integers(0, self.num_actions, n, dtype=np.int32),
      "reward": rng.standard_normal(n).astype(np.float32),
      "terminal": rng.random(n) < 0.01,
    }

  def describe(self):
    return (
      f"obs {self.obs_dtype.name} {self.obs_shape}, action int32, "
      f"reward float32, terminal bool ({self.bytes_per_record} B)"
    )


RECORDS = {
  "cartpole": RecordKind("cartpole", (4,), np.float32, 2),
  "atari84": RecordKind("atari84", FRAME, np.uint8, NUM_ATARI_ACTIONS),
}


def cap_label(capacity):
  """1000 -> "1e3"; anything not a power of ten stays a plain number."""
  exp = round(math.log10(capacity))
  return f"1e{exp}" if 10**exp == capacity else str(capacity)


def tensors(nest):
  return tf.nest.map_structure(tf.constant, nest)


# --- ours --------------------------------------------------------------------

# Op types that appear only when the C++ segment tree kernels are in a graph.
_CUSTOM_OP_TYPES = {
  "SegmentTreeUpdate",
  "SegmentTreeFindPrefixsumIdx",
  "ResourceSegmentTreeFindPrefixsumIdx",
}


def custom_op_status():
  """(available, words for config)."""
  if ops.load_segment_tree_ops() is None:
    return False, (
      "not built or disabled: per_custom_op skipped (see "
      "ingraph_rl.ops; build with `pip install -e .`)"
    )
  return True, f"loaded from {ops.LIBRARY_PATH}"


def how_impl_is_chosen():
  if "impl" in inspect.signature(PrioritizedReplay.__init__).parameters:
    return "PrioritizedReplay(..., impl=<impl>)"
  return (
    "segment_tree.DEFAULT_IMPL set to <impl> while the executor builds "
    "and traces (segment_tree reads it at call time, i.e. when a graph "
    "function is traced; the traced functions keep that impl), then "
    "restored; the traced graphs are checked for the custom op types"
  )


def spaces_for(kind, capacity):
  return {
    "records": kind.space,
    "batch_size": IntBox(1 << 20, low=1),
    "indices": IntBox(capacity, add_batch_rank=True),
    "priorities": FloatBox(low=0.1, high=2.0, add_batch_rank=True),
  }


def build_ours(variant, kind, capacity):
  """A TFExecutor over ReplayMemory or PrioritizedReplay with the variant's
  segment-tree implementation; checks which kernels its graphs hold."""
  spaces = spaces_for(kind, capacity)
  if variant == "uniform_ours":
    return TFExecutor(ReplayMemory(capacity), spaces, check_inputs=False)
  impl = variant[len("per_") :]
  if "impl" in inspect.signature(PrioritizedReplay.__init__).parameters:
    ex = TFExecutor(
      PrioritizedReplay(capacity, alpha=ALPHA, beta=BETA, impl=impl),
      spaces,
      check_inputs=False,
    )
  else:
    saved = segment_tree.DEFAULT_IMPL
    segment_tree.DEFAULT_IMPL = impl
    try:
      ex = TFExecutor(
        PrioritizedReplay(capacity, alpha=ALPHA, beta=BETA),
        spaces,
        check_inputs=False,
        trace_at_build=True,
      )
    finally:
      segment_tree.DEFAULT_IMPL = saved
  for api_name in ("insert", "sample", "update_priorities"):
    graph = ex.function(api_name).get_concrete_function().graph
    found = {op.type for op in graph.get_operations()} & _CUSTOM_OP_TYPES
    if bool(found) != (impl == "custom_op"):
      raise RuntimeError(
        f"{variant}: the traced '{api_name}' holds custom op "
        f"types {sorted(found)}: the impl switch did not "
        f"take effect"
      )
  return ex


class Variant:
  """One memory under test: `ops` maps an operation name to a zero-argument
  callable doing it once; `fill()` fills the memory to capacity."""

  def __init__(self, name, kind, capacity, seed=0):
    self.name, self.kind, self.capacity = name, kind, capacity
    rng = np.random.default_rng(seed)
    insert_np = kind.batch(INSERT_BATCH, rng)
    indices_np = rng.integers(0, capacity, UPDATE_BATCH).astype(np.int32)
    prio_np = rng.uniform(0.1, 2.0, UPDATE_BATCH).astype(np.float32)
    self.fill_batch = kind.batch(
      min(capacity, max(4096, (64 << 20) // kind.bytes_per_record)), rng
    )
    start = time.perf_counter()
    if name in ("uniform_ours", "per_tf", "per_custom_op"):
      self.executor = build_ours(name, kind, capacity)
      self.build_s = time.perf_counter() - start
      fn = self.executor.function
      insert, sample = fn("insert"), fn("sample")
      rec, bs = tensors(insert_np), tf.constant(SAMPLE_BATCH, tf.int32)
      self.ops = {"insert": lambda: insert(rec), "sample": lambda: sample(bs)}
      if name != "uniform_ours":
        update = fn("update_priorities")
        idx, prio = tf.constant(indices_np), tf.constant(prio_np)
        self.ops["update"] = lambda: update(idx, prio)
        self.ops["sample_update"] = lambda: update(sample(bs)["indices"], prio)

        # As an agent's update() runs them: both APIs in ONE graph call (the
        # executor's functions inlined into an outer tf.function).
        # It returns the sampled records too, so none of the sampling work
        # can be pruned from the fused graph.
        def fused():
          out = sample(bs)
          return out, update(out["indices"], prio)

        self.ops["sample_update_fused"] = tf.function(fused, autograph=False)
      self._insert_fill = lambda b: insert(b)
    else:
      cls = NumpyRing if name == "uniform_numpy" else PythonPER
      self.memory = cls(capacity, kind, seed)
      self.build_s = time.perf_counter() - start
      m = self.memory
      self.ops = {
        "insert": lambda: m.insert(insert_np),
        "sample": lambda: m.sample(SAMPLE_BATCH),
      }
      if name == "per_python":
        self.ops["update"] = lambda: m.update(indices_np, prio_np)
        self.ops["sample_update"] = lambda: m.update(
          m.sample(SAMPLE_BATCH)[1], prio_np
        )

  def fill(self):
    """Fills to capacity in big batches (untimed set-up); returns seconds."""
    start = time.perf_counter()
    if hasattr(self, "executor"):
      batch = tensors(self.fill_batch)
      n = len(self.fill_batch["reward"])
      for _ in range(-(-self.capacity // n)):
        size = self._insert_fill(batch)
      assert int(size) == self.capacity, (self.name, int(size))
    elif isinstance(self.memory, PythonPER):
      self.memory.fill(self.fill_batch)
    else:
      n = len(self.fill_batch["reward"])
      for _ in range(-(-self.capacity // n)):
        self.memory.insert(self.fill_batch)
    self.fill_batch = None
    return time.perf_counter() - start


def variants_to_run(custom_op_ok):
  return [v for v in VARIANTS if v != "per_custom_op" or custom_op_ok]


# --- measuring ---------------------------------------------------------------


def calibrate(fn, target_s, lo=2, hi=2000):
  """Operations per repetition so one repetition takes ~target_s."""
  fn()
  start = time.perf_counter()
  fn()
  dt = max(time.perf_counter() - start, 1e-7)
  return int(min(hi, max(lo, round(target_s / dt))))


def loop(fn, calls):
  def run():
    for _ in range(calls):
      fn()
    return {"calls": calls}

  return run


class CallFloor:
  """Not a memory: a no-op tf.function (identity of an int32 scalar), the
  fixed cost of one call into TF on this machine at this moment; each of
  our operations pays it once (sample+update twice)."""

  name = "tf_call_floor"

  def __init__(self):
    noop = tf.function(
      lambda x: x,
      autograph=False,
      input_signature=[tf.TensorSpec([], tf.int32)],
    )
    x = tf.constant(1, tf.int32)
    self.ops = {"call": lambda: noop(x)}


def measure_ops(variants, reps, target_s):
  """Interleaves every operation of every variant given; returns
  {(variant, op): [us per op, one per rep]} and the calls per rep.

  Everything alive now is moved to gc's permanent generation first
  (gc.freeze), so the gc.collect() before each timed call costs ~ms instead
  of ~170 ms with TF loaded, and collections never walk the memories'
  (the Python trees' millions of list slots) during timing; gc.unfreeze()
  at the end."""
  fns, calls = {}, {}
  for v in variants:
    for op, fn in v.ops.items():
      calls[(v.name, op)] = calibrate(fn, target_s)
      fns[(v.name, op)] = loop(fn, calls[(v.name, op)])
  gc.collect()
  gc.freeze()
  try:
    runs = common.interleave(fns, reps=reps)
  finally:
    gc.unfreeze()
  us = {
    key: [1e6 * r["wall_s"] / r["calls"] for r in recs]
    for key, recs in runs.items()
  }
  return us, calls


def rss_gib():
  return psutil.Process().memory_info().rss / GIB


def peak_rss_gib():
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB


def run_group(kind, capacity, names, reps, target_s, budget_gib, log):
  """Measures every variant of one (records, capacity) group (plus the
  tf.function call floor). Returns ({(variant, op): [us]}, config notes)."""
  est_gib = (
    len(names) * capacity * kind.bytes_per_record
    + 3 * 8 * 2 * capacity * len(names)
  ) / GIB
  interleaved = est_gib <= budget_gib
  notes = {
    "mode": "interleaved"
    if interleaved
    else "sequential (one variant at a time, freed before the next)",
    "estimated_gib_all_variants": round(est_gib, 2),
    "build_s": {},
    "fill_s": {},
    "calls_per_rep": {},
  }
  floor = [CallFloor()]
  if interleaved:
    variants = []
    for name in names:
      v = Variant(name, kind, capacity)
      notes["build_s"][name] = round(v.build_s, 3)
      notes["fill_s"][name] = round(v.fill(), 3)
      variants.append(v)
    us, calls = measure_ops(variants + floor, reps, target_s)
    del variants, v
    gc.collect()
  else:
    us, calls = {}, {}
    notes["rss_gib_after_free"] = {}
    for name in names:
      log(f"  {name}: build + fill ...")
      v = Variant(name, kind, capacity)
      notes["build_s"][name] = round(v.build_s, 3)
      notes["fill_s"][name] = round(v.fill(), 3)
      u, c = measure_ops([v] + floor, reps, target_s)
      floor = []  # Measured with the first variant only.
      us.update(u)
      calls.update(c)
      del v
      gc.collect()
      notes["rss_gib_after_free"][name] = round(rss_gib(), 2)
  notes["calls_per_rep"] = {f"{n}/{op}": c for (n, op), c in calls.items()}
  return us, notes


# --- checks: the baseline does the same work as ours -------------------------


def check_baseline_matches(custom_op_ok):
  """At capacity 1000: after the same inserts and priority updates, the
  Python trees hold the same leaves and root as ours (float32 vs float64),
  and for the indices ours samples, the Python memory computes the same
  importance weights."""
  kind, capacity = RECORDS["cartpole"], 1000
  rng = np.random.default_rng(7)
  batch = kind.batch(capacity, rng)
  idx = rng.permutation(capacity)[:600].astype(np.int32)
  prio = rng.uniform(0.1, 5.0, 600).astype(np.float32)
  py = PythonPER(capacity, kind)
  py.insert(batch)
  py.update(idx, prio)
  p = segment_tree.num_leaves_pow2(capacity)
  for impl in ["tf"] + (["custom_op"] if custom_op_ok else []):
    ex = build_ours(f"per_{impl}", kind, capacity)
    ex.function("insert")(tensors(batch))
    ex.function("update_priorities")(tf.constant(idx), tf.constant(prio))
    w = ex.get_weights()
    for name, tree in (("sum_tree", py.sum_tree), ("min_tree", py.min_tree)):
      ours = w[f"prioritized_replay/{name}"]
      np.testing.assert_allclose(
        ours[p : p + capacity],
        tree.value[p : p + capacity],
        rtol=1e-5,
        err_msg=name,
      )
      np.testing.assert_allclose(ours[1], tree.root(), rtol=1e-4, err_msg=name)
    out = ex.function("sample")(tf.constant(SAMPLE_BATCH, tf.int32))
    total = py.sum_tree.root()
    max_w = (py.min_tree.root() / total * capacity) ** -BETA
    ref = [
      (py.sum_tree[i] / total * capacity) ** -BETA / max_w
      for i in out["indices"].numpy().tolist()
    ]
    np.testing.assert_allclose(
      out["weights"].numpy(), ref, rtol=1e-4, err_msg=f"weights ({impl})"
    )
  # Python sampling follows the priorities: each block of 100 leaves gets
  # its share of the total mass of 50,000 samples.
  counts = np.zeros(capacity)
  for _ in range(100):
    np.add.at(counts, py.sample(500)[1], 1)
  leaves = np.array(py.sum_tree.value[p : p + capacity])
  got = counts.reshape(10, -1).sum(1)
  want = leaves.reshape(10, -1).sum(1) / leaves.sum() * counts.sum()
  np.testing.assert_allclose(got, want, rtol=0.05, err_msg="python sampling")


# --- frame-stack resident memory (subprocess) --------------------------------

FRAME_STACK_MODULE = "ingraph_rl.components.memories.frame_stack_replay"


def _frame_stack_executor(cls, capacity, num_streams):
  """FrameStackReplay(capacity, num_streams, stack=4) over 84x84 frames:
  records {"states": [streams, 84, 84, 4] uint8, "actions", "rewards",
  "terminals"}, one step of every stream per insert."""
  records = Dict(
    states=IntBox(256, FRAME + (FRAME_STACK,), dtype=np.uint8),
    actions=IntBox(NUM_ATARI_ACTIONS),
    rewards=FloatBox(),
    terminals=BoolBox(),
    add_batch_rank=True,
  )
  ex = TFExecutor(
    cls(capacity, num_streams, stack=FRAME_STACK),
    {
      "records": records,
      "batch_size": IntBox(1 << 20, low=1),
      "indices": IntBox(capacity, add_batch_rank=True),
    },
    check_inputs=False,
  )
  return ex


def frame_stack_child(capacity, num_streams, fill):
  """Runs in the subprocess: prints one JSON line (the last)."""
  out = {
    "capacity": capacity,
    "num_streams": num_streams,
    "rss_gib_after_import": round(rss_gib(), 3),
  }
  try:
    cls = importlib.import_module(FRAME_STACK_MODULE).FrameStackReplay
  except (ImportError, AttributeError) as e:
    out["status"] = f"not measured: FrameStackReplay missing ({e})"
    print(json.dumps(out), flush=True)
    return
  start = time.perf_counter()
  try:
    ex = _frame_stack_executor(cls, capacity, num_streams)
  except Exception as e:
    out["status"] = (
      f"not measured: building FrameStackReplay failed: "
      f"{type(e).__name__}: {' '.join(str(e).split())[:500]}"
    )
    print(json.dumps(out), flush=True)
    return
  variables = ex.variables()
  out.update(
    build_s=round(time.perf_counter() - start, 2),
    variables_gib=round(
      sum(v.shape.num_elements() * v.dtype.size for v in variables.values())
      / GIB,
      3,
    ),
    rss_gib_after_build=round(rss_gib(), 3),
  )
  if fill:
    rng = np.random.default_rng(1)
    states = tf.constant(
      rng.integers(
        0, 256, (num_streams,) + FRAME + (FRAME_STACK,), dtype=np.uint8
      )
    )
    actions = tf.constant(
      rng.integers(0, NUM_ATARI_ACTIONS, num_streams, dtype=np.int32)
    )
    rewards = tf.constant(rng.standard_normal(num_streams).astype(np.float32))
    # Episodes of ~1000 steps, the streams' ends staggered: some inserts
    # start episodes, so the start-frame ring is written too.
    period = 1000
    ends = [
      tf.constant((np.arange(num_streams) * 37 + t) % period == 0)
      for t in range(period)
    ]
    insert = ex.function("insert")
    steps = -(-capacity // num_streams)
    start = time.perf_counter()
    for t in range(steps):
      size = insert(
        {
          "states": states,
          "actions": actions,
          "rewards": rewards,
          "terminals": ends[t % period],
        }
      )
    out.update(
      steps_inserted=steps * num_streams,
      stored=int(size),
      fill_s=round(time.perf_counter() - start, 2),
      rss_gib_after_fill=round(rss_gib(), 3),
    )
    ex.function("sample")(tf.constant(SAMPLE_BATCH, tf.int32))
  out["peak_rss_gib"] = round(peak_rss_gib(), 3)
  out["peak_rss_gib_minus_import"] = round(
    out["peak_rss_gib"] - out["rss_gib_after_import"], 3
  )
  out["status"] = "measured"
  print(json.dumps(out), flush=True)


def frame_stack_rss(capacity, num_streams, fill, timeout_s):
  """Runs `frame_stack_child` in a fresh Python; returns its dict."""
  naive = capacity * int(np.prod(FRAME)) * FRAME_STACK * 2 / GIB
  base = {
    "capacity": capacity,
    "num_streams": num_streams,
    "fill": fill,
    "naive_gib": round(naive, 2),
    "naive": "capacity x (obs + next_obs) x 84x84x4 uint8",
    "target_gib": TARGETS["frame_stack_rss_gib"],
    "how": "a subprocess (`python -m benchmarks.memory --rss_child=N`) "
    "builds FrameStackReplay(N, num_streams, stack=4) through "
    "TFExecutor"
    + (
      ", inserts N steps (one step of every stream per call, "
      "episodes ~1000 steps)"
      if fill
      else ""
    )
    + " and samples once; peak_rss_gib is its "
    "getrusage ru_maxrss, which includes TF itself "
    "(rss_gib_after_import)",
  }
  if importlib.util.find_spec(FRAME_STACK_MODULE) is None:
    base["status"] = "not measured: FrameStackReplay missing"
    return base
  cmd = [
    sys.executable,
    "-m",
    "benchmarks.memory",
    f"--rss_child={capacity}",
    f"--rss_child_streams={num_streams}",
    f"--rss_child_fill={fill}",
  ]
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  try:
    proc = subprocess.run(
      cmd,
      cwd=root,
      capture_output=True,
      text=True,
      timeout=timeout_s,
      check=False,
    )
  except subprocess.TimeoutExpired:
    base["status"] = f"not measured: the subprocess ran past {timeout_s} s"
    return base
  lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
  if proc.returncode != 0 or not lines:
    base["status"] = (
      f"not measured: the subprocess failed (rc "
      f"{proc.returncode}): "
      f"{' '.join(proc.stderr.split())[-600:]}"
    )
    return base
  base.update(json.loads(lines[-1]))
  return base


# --- main --------------------------------------------------------------------


def growth_pair(capacities):
  """(1e4, 1e6) when both are measured, else (smallest, largest), or None."""
  if 10_000 in capacities and 1_000_000 in capacities:
    return (10_000, 1_000_000)
  if len(capacities) > 1:
    return (capacities[0], capacities[-1])
  return None


def ratio_keys(rec):
  return "" if rec == "cartpole" else f"{rec}_"


def main(argv):
  del argv
  if _RSS_CHILD.value:
    frame_stack_child(
      _RSS_CHILD.value, _RSS_CHILD_STREAMS.value, _RSS_CHILD_FILL.value
    )
    return
  quick = _QUICK.value
  reps = _REPS.value or (2 if quick else 5)
  target_s = 0.015 if quick else 0.25
  capacities = sorted(
    int(float(c))
    for c in (
      _CAPACITIES.value
      or (
        ["1000", "10000"] if quick else ["1000", "10000", "100000", "1000000"]
      )
    )
  )
  threads = common.configure_threads()
  custom_op_ok, custom_op_words = custom_op_status()
  names = variants_to_run(custom_op_ok)
  impls = [i for i in PER_IMPLS if i != "custom_op" or custom_op_ok]
  started = time.perf_counter()

  def log(msg):
    print(f"[{time.perf_counter() - started:6.1f} s] {msg}", flush=True)

  check_baseline_matches(custom_op_ok)
  log("baseline check passed")

  fs_capacity = _FRAME_STACK_CAPACITY.value
  if fs_capacity is None:
    fs_capacity = FRAME_STACK_QUICK_CAPACITY if quick else FRAME_STACK_CAPACITY
  if fs_capacity:
    frame_stack = frame_stack_rss(
      fs_capacity,
      _FRAME_STACK_STREAMS.value,
      fill=True,
      timeout_s=120 if quick else 900,
    )
  else:
    frame_stack = {
      "capacity": 0,
      "status": "not measured: --frame_stack_capacity=0",
    }
  log(f"frame stack: {frame_stack['status']}")

  us, groups, skipped = {}, {}, []
  for rec, kind in RECORDS.items():
    for cap in capacities:
      if quick and rec == "atari84" and cap >= 1_000_000:
        skipped.append(f"{rec}/{cap_label(cap)} (--quick)")
        continue
      log(f"{rec} capacity {cap_label(cap)} ...")
      u, notes = run_group(
        kind, cap, names, reps, target_s, _INTERLEAVE_BUDGET_GIB.value, log
      )
      for (name, op), vals in u.items():
        us[(rec, cap, name, op)] = vals
      groups[f"{rec}/{cap_label(cap)}"] = notes

  # --- rows ---
  rows = []
  for (rec, cap, name, op), vals in us.items():
    case = f"{rec}/{cap_label(cap)}/{name}"
    rows.append(common.Row(case, OP_LABEL[op], "us/op", common.Stat.of(vals)))
  per_s_rows = []
  for (rec, cap, name, op), vals in us.items():
    if op not in OP_RECORDS:
      continue
    case = f"{rec}/{cap_label(cap)}/{name}"
    per_s_rows.append(
      common.Row(
        case,
        OP_LABEL[op],
        "records/s",
        common.Stat.of(OP_RECORDS[op] * 1e6 / v for v in vals),
      )
    )
  if frame_stack.get("status") == "measured":
    for key, metric in (
      ("peak_rss_gib", "peak RSS"),
      ("rss_gib_after_import", "RSS after importing TF"),
      ("peak_rss_gib_minus_import", "peak RSS - RSS after import"),
    ):
      rows.append(
        common.Row(
          f"frame_stack/{cap_label(fs_capacity)}",
          metric,
          "GiB",
          common.Stat.of([frame_stack[key]]),
        )
      )

  # --- ratios ---
  ratios = {}

  def t(rec, cap, impl, op="sample_update"):
    return us.get((rec, cap, f"per_{impl}", op))

  for rec in RECORDS:
    pre = ratio_keys(rec)
    for cap in capacities:
      lab = cap_label(cap)
      py = t(rec, cap, "python")
      if py is None:
        continue
      for impl in impls[1:]:
        ratios[f"{pre}per_sample_update_{lab}_python_over_{impl}"] = (
          common.paired_ratio(py, t(rec, cap, impl))
        )
        ratios[f"{pre}per_sample_update_fused_{lab}_python_over_{impl}"] = (
          common.paired_ratio(py, t(rec, cap, impl, "sample_update_fused"))
        )
      if custom_op_ok:
        ratios[f"{pre}per_sample_update_{lab}_tf_over_custom_op"] = (
          common.paired_ratio(t(rec, cap, "tf"), t(rec, cap, "custom_op"))
        )
    pairs = sorted(
      p
      for p in {growth_pair(capacities), (capacities[0], capacities[-1])}
      if p is not None and p[0] != p[1]
    )
    for lo, hi in pairs:
      for impl in impls:
        a, b = t(rec, lo, impl), t(rec, hi, impl)
        if a is not None and b is not None:
          ratios[
            f"{pre}cost_growth_{cap_label(lo)}_to_{cap_label(hi)}_{impl}"
          ] = float(np.median(b)) / float(np.median(a))
    for cap in capacities:
      for op in ("insert", "sample"):
        ours = us.get((rec, cap, "uniform_ours", op))
        base = us.get((rec, cap, "uniform_numpy", op))
        if ours is not None and base is not None:
          ratios[f"uniform_{rec}_{cap_label(cap)}_{op}_ours_over_numpy"] = (
            common.paired_ratio(ours, base)
          )
  if frame_stack.get("status") == "measured":
    ratios["frame_stack_peak_rss_over_8gib_target"] = (
      frame_stack["peak_rss_gib"] / TARGETS["frame_stack_rss_gib"]
    )
    ratios["frame_stack_rss_minus_import_over_naive"] = (
      frame_stack["peak_rss_gib_minus_import"] / frame_stack["naive_gib"]
    )

  config = {
    "reps": reps,
    "warmup_reps": 1,
    "target_s_per_rep": target_s,
    "capacities": capacities,
    "skipped": skipped,
    "records": {k: v.describe() for k, v in RECORDS.items()},
    "batch": {
      "insert": INSERT_BATCH,
      "sample": SAMPLE_BATCH,
      "update": UPDATE_BATCH,
    },
    "per": {
      "alpha": ALPHA,
      "beta": BETA,
      "priorities": "uniform in [0.1, 2.0)",
    },
    "variants": {
      "uniform_ours": "ReplayMemory via TFExecutor",
      "uniform_numpy": "baseline: NumPy ring buffer (fancy-index write, "
      "uniform integers + gather)",
      "per_tf": "PrioritizedReplay, segment trees impl='tf'",
      "per_custom_op": "PrioritizedReplay, segment trees impl='custom_op'",
      "per_python": "baseline: classic proportional PER written in this "
      "file: sum/min segment trees in Python lists, one "
      "Python descent per sampled record and one "
      "__setitem__ (leaf + walk to the root) per index and "
      "tree; records in NumPy arrays (gathered with fancy "
      "indexing)",
      "tf_call_floor": "not a memory: a no-op tf.function (identity of "
      "an int32 scalar) called the same way, measured "
      "in every group: the fixed cost of one call into "
      "TF that each of our operations pays (sample+"
      "update: two calls)",
    },
    "ours_called_through": "executor.function(api): the raw tf.function, "
    "with tf tensors made beforehand (executors "
    "built with check_inputs=False too)",
    "impl_switch": how_impl_is_chosen(),
    "default_impl_at_import": segment_tree.DEFAULT_IMPL,
    "custom_op": custom_op_words,
    "operations": {
      "insert": f"{INSERT_BATCH} records into a full memory (overwrites "
      f"the oldest; PER: new priority = max^alpha)",
      "sample": f"{SAMPLE_BATCH} records (PER: stratified, with weights)",
      "update": f"priorities of {UPDATE_BATCH} random indices (fixed "
      f"per variant)",
      "sample_update": f"sample {SAMPLE_BATCH}, then update the sampled "
      f"indices (two API calls)",
      "sample_update_fused": "the same two APIs inside ONE outer "
      "tf.function call, as an agent's update() "
      "fuses them (ours only; its ratio is over "
      "per_python's sample_update)",
    },
    "fill": "every memory is filled to capacity before timing (untimed), "
    "in big batches; per_python's trees are set in bulk with NumPy "
    "(what a loop of inserts would leave)",
    "interleaving": "within a group all variants' operations alternate, "
    "rotating which goes first each rep; gc.collect() "
    "before each (untimed) with everything built so far "
    "in gc.freeze()'s permanent generation during "
    "timing; each operation's calls per rep calibrated "
    "once to ~target_s_per_rep; groups over "
    "interleave_budget_gib run one variant at a time "
    "(their ratios pair reps of sequential runs)",
    "interleave_budget_gib": _INTERLEAVE_BUDGET_GIB.value,
    "groups": groups,
    "ratios": "python_over_X and tf_over_custom_op: median over reps of "
    "paired time ratios (> 1: X is faster); cost_growth_A_to_B: "
    "median time at B / median time at A (sample+update); "
    "*_ours_over_numpy: paired time ratios (< 1: ours faster); "
    "keys without a records prefix are CartPole records, "
    "atari84_* are 84x84 frames",
    "checked": "before timing, at capacity 1e3: after the same inserts and "
    "updates the Python trees hold the same leaves and roots as "
    "ours, and give the same importance weights for the indices "
    "ours samples; Python sampling frequencies follow the "
    "priorities",
    "targets (reported, not asserted)": {
      "per_sample_update_1e6_python_over_*": (
        f">= {TARGETS['python_over_ours_at_1e6']:g}"
      ),
      "cost_growth_1e4_to_1e6_*": f"<= {TARGETS['growth_1e4_to_1e6']:g}",
      "frame_stack peak RSS at 1e6": f"<= "
      f"{TARGETS['frame_stack_rss_gib']:g}"
      f" GiB",
    },
    "frame_stack": frame_stack,
    "parent_peak_rss_gib": round(peak_rss_gib(), 2),
    "total_s": round(time.perf_counter() - started, 1),
    "threads": threads,
  }
  path = common.write_results(NAME, quick, config, rows + per_s_rows, ratios)
  if not quick:
    print(f"wrote {plot(us, capacities, impls)}")
  common.print_table(
    NAME,
    rows,
    ratios,
    summary_line(
      quick, us, capacities, impls, ratios, frame_stack, custom_op_ok
    ),
    quick=quick,
    path=path,
  )


def summary_line(
  quick, us, capacities, impls, ratios, frame_stack, custom_op_ok
):
  top = 1_000_000 if 1_000_000 in capacities else capacities[-1]
  lab = cap_label(top)
  parts = []
  med = {
    i: us.get(("cartpole", top, f"per_{i}", "sample_update")) for i in impls
  }
  figs = ", ".join(
    f"{i} {np.median(v):,.0f} us" for i, v in med.items() if v is not None
  )
  floor = us.get(("cartpole", top, "tf_call_floor", "call"))
  if floor is not None:
    figs += f" (a no-op tf.function call: {np.median(floor):,.0f} us)"
  parts.append(f"PER sample+update b{SAMPLE_BATCH} at {lab}: {figs}")
  goal = TARGETS["python_over_ours_at_1e6"]
  speed = []
  for impl in impls[1:]:
    r = ratios.get(f"per_sample_update_{lab}_python_over_{impl}")
    if r is not None:
      verdict = (
        ("met" if r >= goal else "MISSED")
        if top == 1_000_000
        else "n/a below 1e6"
      )
      speed.append(f"python/{impl} {r:.1f}x ({verdict})")
    r = ratios.get(f"per_sample_update_fused_{lab}_python_over_{impl}")
    if r is not None:
      verdict = (
        ("met" if r >= goal else "MISSED")
        if top == 1_000_000
        else "n/a below 1e6"
      )
      speed.append(f"fused python/{impl} {r:.1f}x ({verdict})")
  if speed:
    parts.append("; ".join(speed) + f" [target >= {goal:g}x at 1e6]")
  pair = growth_pair(capacities)
  g_goal = TARGETS["growth_1e4_to_1e6"]
  if pair is not None:
    lo, hi = (cap_label(c) for c in pair)
    # The target is ours; the Python baseline's growth is for contrast.
    words = ", ".join(
      f"{impl} {ratios[k]:.2f}x"
      f"{'' if impl == 'python' or ratios[k] <= g_goal else ' MISSED'}"
      for impl in impls
      if (k := f"cost_growth_{lo}_to_{hi}_{impl}") in ratios
    )
    parts.append(f"growth {lo}->{hi} {words} [target <= {g_goal:g}x 1e4->1e6]")
  if frame_stack.get("status") == "measured":
    rss, goal = frame_stack["peak_rss_gib"], TARGETS["frame_stack_rss_gib"]
    verdict = (
      ("met" if rss <= goal else "MISSED")
      if frame_stack["capacity"] >= FRAME_STACK_CAPACITY
      else "n/a below 1e6"
    )
    parts.append(
      f"frame stack {cap_label(frame_stack['capacity'])}: peak "
      f"RSS {rss:.2f} GiB ({verdict}; target <= {goal:g} GiB at "
      f"1e6; naive {frame_stack['naive_gib']:.1f} GiB)"
    )
  else:
    parts.append(f"frame stack: {frame_stack['status'].split(' (')[0]}")
  if not custom_op_ok:
    parts.append("custom op not built: skipped")
  return f"{NAME}{' [quick]' if quick else ''}: " + " | ".join(parts)


def plot(us, capacities, impls):
  """Sample+update cost (median, min-max bars) vs capacity, log-log, one
  line per implementation; solid CartPole records, dashed 84x84 frames."""
  plt = common.pyplot()
  fig, ax = plt.subplots(figsize=(7, 4.5))
  colors = {"python": "#8C8C8C", "tf": "#4C72B0", "custom_op": "#DD8452"}
  for rec, style in (("cartpole", "-o"), ("atari84", "--s")):
    for impl in impls:
      pts = [
        (c, us[(rec, c, f"per_{impl}", "sample_update")])
        for c in capacities
        if (rec, c, f"per_{impl}", "sample_update") in us
      ]
      if not pts:
        continue
      xs = [c for c, _ in pts]
      med = np.array([np.median(v) for _, v in pts])
      lo = med - np.array([min(v) for _, v in pts])
      hi = np.array([max(v) for _, v in pts]) - med
      ax.errorbar(
        xs,
        med,
        yerr=[lo, hi],
        fmt=style,
        color=colors[impl],
        capsize=3,
        label=f"{impl} ({rec})",
        alpha=1.0 if rec == "cartpole" else 0.6,
      )
  keys = [(c, ("cartpole", c, "tf_call_floor", "call")) for c in capacities]
  floor = [(c, 2 * np.median(us[k])) for c, k in keys if k in us]
  if floor:
    ax.plot(
      [c for c, _ in floor],
      [f for _, f in floor],
      ":",
      color="k",
      label="2 no-op tf.function calls",
    )
  ax.set_xscale("log")
  ax.set_yscale("log")
  ax.set_xlabel("capacity (records, memory full)")
  ax.set_ylabel(f"sample+update b{SAMPLE_BATCH}, us (median)")
  ax.set_title(
    "Prioritized replay: sample + priority update vs capacity", fontsize=10
  )
  ax.grid(True, which="both", alpha=0.3)
  ax.legend(fontsize=8)
  return common.save_plot(fig, NAME)


if __name__ == "__main__":
  app.run(main)
