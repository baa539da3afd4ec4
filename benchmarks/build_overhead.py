r"""Build overhead of the TF executor against the same model in plain TF.

Three cases, ours and the hand-written baseline interleaved in one run,
fresh component objects every repetition:

1. single: one replay-memory-sized component (ring-buffer variables for
   CartPole records, capacity 10,000; APIs `insert` and `get`) against the
   same tf.Variables and two hand-written tf.functions traced with
   `get_concrete_function`.
2. stack40: a dueling DQN with prioritized replay of at least 40 components
   against the same variables made by hand and one hand-written tf.function
   per root API.
3. call: per-call cost of `executor.execute("call", x)` on a built
   Dense(64), batch 32 (a FloatBox input), and on a table lookup by
   IntBox indices (whose range the executor checks in the graph), with
   every check on (the default) and off, against calling a hand-written
   tf.function on the same variables.

No replay memory, segment tree or loss exists in the library yet: the
benchmark defines stand-ins for them (marked in `config`).

    python -m benchmarks.build_overhead            # the measurement
    python -m benchmarks.build_overhead --quick    # smoke run, < 60 s

Writes benchmarks/results/build_overhead.json (and build_overhead.png
without --quick).
"""

import collections
import time

import numpy as np
import tensorflow as tf
from absl import app, flags

from benchmarks import common  # Sets OMP_WAIT_POLICY before TF loads.
from ingraph_rl.components.common import (
  ContainerMerger,
  ContainerSplitter,
  Synchronizable,
  TimeRankFolder,
)
from ingraph_rl.components.layers import Dense, Embedding
from ingraph_rl.components.networks import NeuralNetwork
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.spaces import (
  BoolBox,
  Dict,
  FloatBox,
  IntBox,
)

NAME = "build_overhead"

_QUICK = flags.DEFINE_bool(
  "quick", False, "Smoke run (< 60 s): few repetitions and calls."
)
_REPS = flags.DEFINE_integer(
  "reps", None, "Timed repetitions per case (default 10; 3 with --quick)."
)
_CALLS = flags.DEFINE_integer(
  "calls",
  None,
  "Calls per repetition in the per-call case (default 2000; 200 with --quick).",
)

CAPACITY = 10_000
NUM_ACTIONS = 2
OBS_DIM = 4
TRUNK_UNITS = (64, 64, 64, 64)
HEAD_UNITS = (32, 32)
DISCOUNT = 0.99
ALPHA = 0.6
CALL_UNITS = 64
CALL_BATCH = 32
LOOKUP_ROWS = 1000

_now = time.perf_counter

TARGETS = {"single_ms": 50.0, "stack_ms": 300.0, "call_ratio": 1.1}

# --- stand-ins for components the library does not have yet ------------------


class ReplayStandIn(Component):
  """STAND-IN for a replay memory: ring buffers, one per record field.

  `insert(records)` scatters a batch at the index variable and advances it
  (wrapping at `capacity`); returns the new index. `get(indices)` gathers.
  """

  variable_args = ("records",)

  def __init__(self, capacity, scope="replay"):
    super().__init__(scope=scope)
    self.capacity = int(capacity)

  def create_variables(self, input_spaces):
    space = self.expect_space(input_spaces, "records", Dict)
    self.buffers = {
      key: self.add_variable(
        f"buffer_{key}",
        (self.capacity,) + leaf.shape,
        leaf.dtype,
        trainable=False,
      )
      for key, leaf in space.items()
    }
    self.index = self.add_variable("index", (), np.int32, trainable=False)
    self.size = self.add_variable("size", (), np.int32, trainable=False)

  @api
  def insert(self, records):
    return self._graph_fn_insert(records)

  @api
  def get(self, indices):
    return self._graph_fn_get(indices)

  @graph_fn
  def _graph_fn_insert(self, records):
    return ring_insert(
      self.buffers, self.index, self.size, self.capacity, records
    )

  @graph_fn
  def _graph_fn_get(self, indices):
    return {k: tf.gather(buf, indices) for k, buf in self.buffers.items()}


class SegmentTreeStandIn(Component):
  """STAND-IN for a sum or min segment tree: a (2 * capacity,) array whose
  leaves `set(indices, values)` writes (no propagation up the tree); it
  returns the reduction over the leaves."""

  variable_args = ()

  def __init__(self, capacity, reduce, scope):
    super().__init__(scope=scope)
    self.capacity = int(capacity)
    self.reduce = reduce

  def create_variables(self, input_spaces):
    self.tree = self.add_variable(
      "tree",
      (2 * self.capacity,),
      np.float32,
      0.0 if self.reduce == "sum" else float("inf"),
      trainable=False,
    )

  @api
  def set(self, indices, values):
    return self._graph_fn_set(indices, values)

  @graph_fn
  def _graph_fn_set(self, indices, values):
    return tree_set(self.tree, self.capacity, self.reduce, indices, values)


class PrioritizedReplayStandIn(Component):
  """STAND-IN for prioritized replay: a ring buffer plus sum and min trees.
  New records get the max priority seen so far."""

  variable_args = ()

  def __init__(self, capacity, alpha=ALPHA, scope="prioritized_replay"):
    super().__init__(scope=scope)
    self.capacity = int(capacity)
    self.alpha = alpha
    self.memory = ReplayStandIn(capacity, scope="ring_buffer")
    self.sum_tree = SegmentTreeStandIn(capacity, "sum", scope="sum_tree")
    self.min_tree = SegmentTreeStandIn(capacity, "min", scope="min_tree")

  def create_variables(self, input_spaces):
    self.max_priority = self.add_variable(
      "max_priority", (), np.float32, 1.0, trainable=False
    )

  @api
  def insert(self, records):
    index = self.memory.insert(records)
    indices, priorities = self._graph_fn_new_priorities(index, records)
    self.sum_tree.set(indices, priorities)
    self.min_tree.set(indices, priorities)
    return index

  @api
  def get(self, indices):
    return self.memory.get(indices)

  @api
  def update_priorities(self, indices, priorities):
    scaled = self._graph_fn_scale_priorities(priorities)
    self.min_tree.set(indices, scaled)
    return self.sum_tree.set(indices, scaled)

  @graph_fn(returns=2)
  def _graph_fn_new_priorities(self, index, records):
    return new_priorities(
      self.max_priority, self.capacity, self.alpha, index, records
    )

  @graph_fn
  def _graph_fn_scale_priorities(self, priorities):
    return scale_priorities(self.max_priority, self.alpha, priorities)


class TDErrorStandIn(Component):
  """STAND-IN for a DQN loss: TD errors and their mean Huber loss."""

  def __init__(self, discount=DISCOUNT, scope="td_error"):
    super().__init__(scope=scope)
    self.discount = discount

  @api
  def td(self, q, q_next, actions, rewards, terminals):
    return self._graph_fn_td(q, q_next, actions, rewards, terminals)

  @graph_fn(returns=2)
  def _graph_fn_td(self, q, q_next, actions, rewards, terminals):
    return td_error(self.discount, q, q_next, actions, rewards, terminals)


# The bodies the stand-ins and the plain-TF baselines share (same math).


def ring_insert(buffers, index, size, capacity, records):
  n = tf.shape(tf.nest.flatten(records)[0])[0]
  rows = ((index + tf.range(n)) % capacity)[:, None]
  for key, buf in buffers.items():
    buf.scatter_nd_update(rows, records[key])
  new_index = (index + n) % capacity
  size.assign(tf.minimum(size + n, capacity))
  index.assign(new_index)
  return new_index


def tree_set(tree, capacity, reduce, indices, values):
  tree.scatter_nd_update((indices + capacity)[:, None], values)
  leaves = tree[capacity:]
  return tf.reduce_sum(leaves) if reduce == "sum" else tf.reduce_min(leaves)


def new_priorities(max_priority, capacity, alpha, index, records):
  n = tf.shape(tf.nest.flatten(records)[0])[0]
  indices = (index - n + tf.range(n)) % capacity
  return indices, tf.fill([n], max_priority**alpha)


def scale_priorities(max_priority, alpha, priorities):
  max_priority.assign(tf.maximum(max_priority, tf.reduce_max(priorities)))
  return (tf.abs(priorities) + 1e-6) ** alpha


def dueling(value, advantage):
  return value + advantage - tf.reduce_mean(advantage, axis=-1, keepdims=True)


def td_error(discount, q, q_next, actions, rewards, terminals):
  q_taken = tf.reduce_sum(q * tf.one_hot(actions, tf.shape(q)[-1]), axis=-1)
  not_done = 1.0 - tf.cast(terminals, q.dtype)
  target = rewards + discount * not_done * tf.reduce_max(q_next, axis=-1)
  td = tf.stop_gradient(target) - q_taken
  abs_td = tf.abs(td)
  huber = tf.where(abs_td <= 1.0, 0.5 * td * td, abs_td - 0.5)
  return td, tf.reduce_mean(huber)


# --- the stack ---------------------------------------------------------------


class TargetNet(Synchronizable, NeuralNetwork):
  """A network whose weights `sync` copies from another of the same shape."""


def _dense_specs(units, last=None):
  specs = [{"type": "dense", "units": u, "activation": "relu"} for u in units]
  if last is not None:
    specs.append({"type": "dense", "units": last})
  return specs


class DuelingQ(Component):
  """Trunk -> value head and advantage head -> v + a - mean(a)."""

  def __init__(self, network_cls=NeuralNetwork, scope="q"):
    super().__init__(scope=scope)
    self.trunk = network_cls(
      [{"type": "flatten"}] + _dense_specs(TRUNK_UNITS), scope="trunk"
    )
    self.value = network_cls(_dense_specs(HEAD_UNITS, 1), scope="value")
    self.advantage = network_cls(
      _dense_specs(HEAD_UNITS, NUM_ACTIONS), scope="advantage"
    )

  @api
  def call(self, states):
    hidden = self.trunk.call(states)
    return self._graph_fn_dueling(
      self.value.call(hidden), self.advantage.call(hidden)
    )

  @graph_fn
  def _graph_fn_dueling(self, value, advantage):
    return dueling(value, advantage)


class DuelingDQNStack(Component):
  """Root of the stack: online and target dueling Q-networks, TD errors
  over [B, T] batches (fold -> network -> unfold) and prioritized replay."""

  NETWORKS = ("trunk", "value", "advantage")

  def __init__(self, capacity=CAPACITY):
    super().__init__(scope="agent")
    self.splitter = ContainerSplitter(
      "states", "actions", "rewards", "terminals", "next_states"
    )
    self.merger = ContainerMerger("q", "td", "loss")
    self.sync_merger = ContainerMerger(*self.NETWORKS, scope="sync_merger")
    self.folder = TimeRankFolder()
    self.q_online = DuelingQ(scope="q_online")
    self.q_target = DuelingQ(TargetNet, scope="q_target")
    self.td_error = TDErrorStandIn()
    self.replay = PrioritizedReplayStandIn(capacity)

  @api
  def get_q(self, states):
    return self.q_online.call(states)

  @api
  def insert_records(self, records):
    return self.replay.insert(records)

  @api
  def get_records(self, indices):
    return self.replay.get(indices)

  @api
  def update_priorities(self, indices, priorities):
    return self.replay.update_priorities(indices, priorities)

  @api
  def update_forward(self, batch):
    states, actions, rewards, terminals, next_states = self.splitter.split(
      batch
    )
    q = self.folder.unfold(self.q_online.call(self.folder.fold(states)), states)
    q_next = self.folder.unfold(
      self.q_target.call(self.folder.fold(next_states)), next_states
    )
    td, loss = self.td_error.td(q, q_next, actions, rewards, terminals)
    return self.merger.merge(q, td, loss)

  @api
  def sync(self):
    done = [
      getattr(self.q_target, n).sync(getattr(self.q_online, n).variables())
      for n in self.NETWORKS
    ]
    return self.sync_merger.merge(*done)


# --- spaces and hand-written tensor specs ------------------------------------


def record_fields(**ranks):
  return dict(
    obs=FloatBox((OBS_DIM,)),
    action=IntBox(NUM_ACTIONS),
    reward=FloatBox(()),
    terminal=BoolBox(),
    **ranks,
  )


def single_spaces():
  return {
    "records": Dict(record_fields(), add_batch_rank=True),
    "indices": IntBox(CAPACITY, add_batch_rank=True),
  }


def stack_spaces():
  return {
    "states": FloatBox((OBS_DIM,), add_batch_rank=True),
    "records": Dict(record_fields(), add_batch_rank=True),
    "indices": IntBox(CAPACITY, add_batch_rank=True),
    "priorities": FloatBox((), add_batch_rank=True),
    "batch": Dict(
      states=FloatBox((OBS_DIM,)),
      actions=IntBox(NUM_ACTIONS),
      rewards=FloatBox(()),
      terminals=BoolBox(),
      next_states=FloatBox((OBS_DIM,)),
      add_batch_rank=True,
      add_time_rank=True,
    ),
  }


RECORDS_SPEC = {
  "action": tf.TensorSpec([None], tf.int32),
  "obs": tf.TensorSpec([None, OBS_DIM], tf.float32),
  "reward": tf.TensorSpec([None], tf.float32),
  "terminal": tf.TensorSpec([None], tf.bool),
}
INDICES_SPEC = tf.TensorSpec([None], tf.int32)


# --- plain TF, written by hand -----------------------------------------------


def _var(value, dtype, trainable=False):
  return tf.Variable(value, dtype=dtype, trainable=trainable)


def plain_ring_variables():
  return (
    {
      "action": _var(tf.zeros([CAPACITY], tf.int32), tf.int32),
      "obs": _var(tf.zeros([CAPACITY, OBS_DIM]), tf.float32),
      "reward": _var(tf.zeros([CAPACITY]), tf.float32),
      "terminal": _var(tf.zeros([CAPACITY], tf.bool), tf.bool),
    },
    _var(0, tf.int32),
    _var(0, tf.int32),
  )


def plain_single():
  """The single case by hand: variables, then two traced tf.functions."""
  start = _now()
  buffers, index, size = plain_ring_variables()
  made = _now()

  @tf.function(input_signature=[RECORDS_SPEC], autograph=False)
  def insert(records):
    return ring_insert(buffers, index, size, CAPACITY, records)

  @tf.function(input_signature=[INDICES_SPEC], autograph=False)
  def get(indices):
    return {k: tf.gather(buf, indices) for k, buf in buffers.items()}

  insert.get_concrete_function()
  get.get_concrete_function()
  end = _now()
  return {
    "variables_s": made - start,
    "trace_s": end - made,
    "total_s": end - start,
    "fns": {"insert": insert, "get": get},
  }


def _glorot(rng, shape):
  limit = np.sqrt(6.0 / (shape[0] + shape[1]))
  return rng.uniform(-limit, limit, size=shape).astype(np.float32)


def plain_mlp_variables(rng, sizes, name, weights):
  """[(kernel, bias)] of a dense stack; `weights` (path -> array) overrides
  the random init (to check the math against ours)."""
  layers = []
  for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
    path = f"{name}/dense_{i}"
    kernel = weights.get(f"{path}/kernel", None)
    if kernel is None:
      kernel = _glorot(rng, (n_in, n_out))
    layers.append(
      (
        tf.Variable(kernel),
        tf.Variable(weights.get(f"{path}/bias", tf.zeros([n_out]))),
      )
    )
  return layers


def mlp(x, layers, relu_last):
  for i, (kernel, bias) in enumerate(layers):
    x = tf.matmul(x, kernel) + bias
    if relu_last or i < len(layers) - 1:
      x = tf.nn.relu(x)
  return x


def plain_q(nets, states):
  hidden = mlp(tf.reshape(states, [-1, OBS_DIM]), nets["trunk"], True)
  return dueling(
    mlp(hidden, nets["value"], False), mlp(hidden, nets["advantage"], False)
  )


def _bt_fold(x):
  return tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], 0))


def _bt_unfold(x, like):
  return tf.reshape(x, tf.concat([tf.shape(like)[:2], tf.shape(x)[1:]], 0))


def plain_stack(weights=None):
  """The stack by hand: the same variables, one tf.function per root API."""
  weights = weights or {}
  start = _now()
  rng = np.random.default_rng(0)
  nets = {}
  for which in ("q_online", "q_target"):
    prefix = f"agent/{which}"
    nets[which] = {
      "trunk": plain_mlp_variables(
        rng, (OBS_DIM,) + TRUNK_UNITS, f"{prefix}/trunk", weights
      ),
      "value": plain_mlp_variables(
        rng, (TRUNK_UNITS[-1],) + HEAD_UNITS + (1,), f"{prefix}/value", weights
      ),
      "advantage": plain_mlp_variables(
        rng,
        (TRUNK_UNITS[-1],) + HEAD_UNITS + (NUM_ACTIONS,),
        f"{prefix}/advantage",
        weights,
      ),
    }
  buffers, index, size = plain_ring_variables()
  sum_tree = _var(tf.zeros([2 * CAPACITY]), tf.float32)
  min_tree = _var(tf.fill([2 * CAPACITY], float("inf")), tf.float32)
  max_priority = _var(1.0, tf.float32)
  made = _now()

  online, target = nets["q_online"], nets["q_target"]
  batch_spec = {
    "actions": tf.TensorSpec([None, None], tf.int32),
    "next_states": tf.TensorSpec([None, None, OBS_DIM], tf.float32),
    "rewards": tf.TensorSpec([None, None], tf.float32),
    "states": tf.TensorSpec([None, None, OBS_DIM], tf.float32),
    "terminals": tf.TensorSpec([None, None], tf.bool),
  }

  @tf.function(
    input_signature=[tf.TensorSpec([None, OBS_DIM], tf.float32)],
    autograph=False,
  )
  def get_q(states):
    return plain_q(online, states)

  @tf.function(input_signature=[RECORDS_SPEC], autograph=False)
  def insert_records(records):
    new_index = ring_insert(buffers, index, size, CAPACITY, records)
    indices, prio = new_priorities(
      max_priority, CAPACITY, ALPHA, new_index, records
    )
    tree_set(sum_tree, CAPACITY, "sum", indices, prio)
    tree_set(min_tree, CAPACITY, "min", indices, prio)
    return new_index

  @tf.function(input_signature=[INDICES_SPEC], autograph=False)
  def get_records(indices):
    return {k: tf.gather(buf, indices) for k, buf in buffers.items()}

  @tf.function(
    input_signature=[INDICES_SPEC, tf.TensorSpec([None], tf.float32)],
    autograph=False,
  )
  def update_priorities(indices, priorities):
    scaled = scale_priorities(max_priority, ALPHA, priorities)
    tree_set(min_tree, CAPACITY, "min", indices, scaled)
    return tree_set(sum_tree, CAPACITY, "sum", indices, scaled)

  @tf.function(input_signature=[batch_spec], autograph=False)
  def update_forward(batch):
    states, next_states = batch["states"], batch["next_states"]
    q = _bt_unfold(plain_q(online, _bt_fold(states)), states)
    q_next = _bt_unfold(plain_q(target, _bt_fold(next_states)), next_states)
    td, loss = td_error(
      DISCOUNT,
      q,
      q_next,
      batch["actions"],
      batch["rewards"],
      batch["terminals"],
    )
    return {"q": q, "td": td, "loss": loss}

  @tf.function(input_signature=[], autograph=False)
  def sync():
    for net in DuelingDQNStack.NETWORKS:
      for src, dst in zip(online[net], target[net]):
        for s, d in zip(src, dst):
          d.assign(s)
    return {n: tf.constant(True) for n in DuelingDQNStack.NETWORKS}

  fns = {
    "get_q": get_q,
    "insert_records": insert_records,
    "get_records": get_records,
    "update_priorities": update_priorities,
    "update_forward": update_forward,
    "sync": sync,
  }
  for fn in fns.values():
    fn.get_concrete_function()
  end = _now()
  return {
    "variables_s": made - start,
    "trace_s": end - made,
    "total_s": end - start,
    "fns": fns,
  }


def plain_weights_from(ours_weights):
  """Our variable paths -> the names `plain_stack` looks up (our trunks
  start with a Flatten, so their first Dense is dense_1)."""
  out = {}
  for path, value in ours_weights.items():
    parts = path.split("/")
    if len(parts) == 5 and parts[2] == "trunk":
      parts[3] = f"dense_{int(parts[3].split('_')[1]) - 1}"
    out["/".join(parts)] = value
  return out


# --- ours --------------------------------------------------------------------


def ours(make_root, spaces):
  root = make_root()
  ex = TFExecutor(root, spaces)
  s = ex.stats
  return {
    "assembly_s": s.assembly_s,
    "build_s": s.build_s,
    "trace_s": s.trace_s,
    "total_s": s.total_s,
    "executor": ex,
  }


def strip(fn):
  """Runs `fn` and drops the objects it returns (kept only for checks)."""

  def run():
    out = fn()
    return {k: v for k, v in out.items() if k.endswith("_s")}

  return run


# --- checks that ours and plain do the same work -----------------------------


def _close(a, b, what):
  for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b), strict=True):
    np.testing.assert_allclose(
      np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-6, err_msg=what
    )


def check_single():
  ex = ours(lambda: ReplayStandIn(CAPACITY), single_spaces())["executor"]
  fns = plain_single()["fns"]
  rng = np.random.default_rng(1)
  space = ex.apis["insert"].arg_spaces["records"]
  for n in (CAPACITY - 5, 12):  # The second batch wraps around.
    records = space.sample(n, rng)
    _close(ex.execute("insert", records), fns["insert"](records), "insert")
  indices = np.array([0, 3, 6, 7, CAPACITY - 1], np.int32)
  _close(ex.execute("get", indices), fns["get"](indices), "get")


def check_stack():
  ex = ours(DuelingDQNStack, stack_spaces())["executor"]
  plain = plain_stack(plain_weights_from(ex.get_weights()))["fns"]
  rng = np.random.default_rng(2)
  for name in (
    "get_q",
    "insert_records",
    "get_records",
    "update_forward",
    "update_priorities",
    "sync",
    "update_forward",
  ):
    args = ex.sample_inputs(
      name, (8, 5) if name == "update_forward" else 16, seed=rng
    )
    if name == "update_priorities":
      args[1] = np.abs(args[1])
    _close(ex.execute(name, *args), plain[name](*args), name)


# --- case 3: per call --------------------------------------------------------


def call_case(calls):
  """Per call: Dense on a FloatBox (in-graph finiteness check) and a table
  lookup on an IntBox (in-graph range check), each with every check on
  (the default) and off (check_inputs=False, check_values=False), against
  hand-written tf.functions on the same variables."""
  dense_space = {"inputs": FloatBox((CALL_UNITS,), add_batch_rank=True)}
  ex = TFExecutor(Dense(CALL_UNITS), dense_space)
  ex_off = TFExecutor(
    Dense(CALL_UNITS), dense_space, check_inputs=False, check_values=False
  )
  ex_off.set_weights(ex.get_weights())
  kernel, bias = ex.root.kernel, ex.root.bias

  @tf.function(
    input_signature=[tf.TensorSpec([None, CALL_UNITS], tf.float32)],
    autograph=False,
  )
  def plain(x):
    return tf.matmul(x, kernel) + bias

  x = (
    np.random.default_rng(3)
    .standard_normal((CALL_BATCH, CALL_UNITS))
    .astype(np.float32)
  )
  _close(ex.execute("call", x), plain(x), "call")
  _close(ex_off.execute("call", x), plain(x), "call")

  int_space = {"ids": IntBox(LOOKUP_ROWS, add_batch_rank=True)}
  lookup = TFExecutor(Embedding(LOOKUP_ROWS, CALL_UNITS), int_space)
  lookup_off = TFExecutor(
    Embedding(LOOKUP_ROWS, CALL_UNITS),
    int_space,
    check_inputs=False,
    check_values=False,
  )
  lookup_off.set_weights(lookup.get_weights())
  table = lookup.root.embeddings

  @tf.function(
    input_signature=[tf.TensorSpec([None], tf.int32)], autograph=False
  )
  def plain_lookup(indices):
    return tf.gather(table, indices)

  idx = (
    np.random.default_rng(4)
    .integers(0, LOOKUP_ROWS, CALL_BATCH)
    .astype(np.int32)
  )
  _close(lookup.execute("call", idx), plain_lookup(idx), "lookup")
  _close(lookup_off.execute("call", idx), plain_lookup(idx), "lookup")

  def loop(fn):
    def run():
      for _ in range(calls):
        fn()

    return run

  return {
    "ours_checked": loop(lambda: ex.execute("call", x)),
    "ours_unchecked": loop(lambda: ex_off.execute("call", x)),
    "plain": loop(lambda: plain(x)),
    "int_ours_checked": loop(lambda: lookup.execute("call", idx)),
    "int_ours_unchecked": loop(lambda: lookup_off.execute("call", idx)),
    "int_plain": loop(lambda: plain_lookup(idx)),
  }


# --- main --------------------------------------------------------------------


def stack_pieces():
  root = DuelingDQNStack()
  comps = list(root.walk())
  kinds = collections.Counter(type(c).__name__ for c in comps)
  return len(comps), dict(sorted(kinds.items()))


def main(argv):
  del argv
  quick = _QUICK.value
  reps = _REPS.value or (3 if quick else 10)
  calls = _CALLS.value or (200 if quick else 2000)
  threads = common.configure_threads()

  n_components, kinds = stack_pieces()
  assert n_components >= 40, f"the stack has {n_components} components"

  check_single()
  check_stack()

  single = common.interleave(
    {
      "ours": strip(
        lambda: ours(lambda: ReplayStandIn(CAPACITY), single_spaces())
      ),
      "plain": strip(plain_single),
    },
    reps=reps,
  )
  stack = common.interleave(
    {
      "ours": strip(lambda: ours(DuelingDQNStack, stack_spaces())),
      "plain": strip(plain_stack),
    },
    reps=reps,
  )
  per_call = common.interleave(call_case(calls), reps=reps)

  rows, ratios = [], {}
  for case, runs in (("single", single), ("stack40", stack)):
    o, p = runs["ours"], runs["plain"]
    for metric in ("assembly", "build", "trace", "total"):
      rows.append(
        common.Row(
          f"{case}/ours",
          metric,
          "ms",
          common.Stat.of(common.column(o, f"{metric}_s")).scaled(1e3),
        )
      )
    rows.append(
      common.Row(
        f"{case}/ours",
        "wall (with composition)",
        "ms",
        common.Stat.of(common.column(o, "wall_s")).scaled(1e3),
      )
    )
    for metric in ("variables", "trace", "total"):
      rows.append(
        common.Row(
          f"{case}/plain",
          metric,
          "ms",
          common.Stat.of(common.column(p, f"{metric}_s")).scaled(1e3),
        )
      )
    ours_total = common.column(o, "total_s")
    plain_total = common.column(p, "total_s")
    label = "single_component" if case == "single" else "stack40"
    ratios[f"{label}_overhead_ms"] = 1e3 * common.paired_difference(
      ours_total, plain_total
    )
    ratios[f"{label}_ours_over_plain"] = common.paired_ratio(
      ours_total, plain_total
    )
    ratios[f"{label}_wall_overhead_ms"] = 1e3 * common.paired_difference(
      common.column(o, "wall_s"), plain_total
    )

  us = {
    n: [1e6 * t / calls for t in common.column(r, "wall_s")]
    for n, r in per_call.items()
  }
  for name in ("ours_checked", "ours_unchecked", "plain"):
    rows.append(
      common.Row(
        f"call/{name}", "time per call", "us", common.Stat.of(us[name])
      )
    )
    rows.append(
      common.Row(
        f"call_int/{name}",
        "time per call",
        "us",
        common.Stat.of(us["int_" + name]),
      )
    )
  for prefix, label in (("", "call"), ("int_", "call_int")):
    ratios[f"{label}_overhead_ratio_checked"] = common.paired_ratio(
      us[prefix + "ours_checked"], us[prefix + "plain"]
    )
    ratios[f"{label}_overhead_ratio_unchecked"] = common.paired_ratio(
      us[prefix + "ours_unchecked"], us[prefix + "plain"]
    )
    ratios[f"{label}_checks_us"] = common.paired_difference(
      us[prefix + "ours_checked"], us[prefix + "ours_unchecked"]
    )

  config = {
    "reps": reps,
    "warmup_reps": 1,
    "calls_per_rep": calls,
    "interleaving": "cases alternate within each rep, rotating which goes "
    "first; gc.collect() before each; fresh components "
    "and variables every rep",
    "ratios": "median over reps of per-rep paired figures (ours - plain, "
    "ours / plain); *_overhead_ms uses executor.stats total "
    "(assembly + build + trace), *_wall_overhead_ms adds "
    "composing the components",
    "threads": threads,
    "targets (reported, not asserted)": {
      "single_component_overhead_ms": f"< {TARGETS['single_ms']:g}",
      "stack40_overhead_ms": f"< {TARGETS['stack_ms']:g}",
      "call_overhead_ratio_*": f"<= {TARGETS['call_ratio']:g}",
    },
    "single": {
      "component": "ReplayStandIn (defined in this benchmark): a "
      "STAND-IN for a replay memory, none exists yet",
      "capacity": CAPACITY,
      "records": "obs FloatBox(4,), action IntBox(2), reward FloatBox(), "
      "terminal BoolBox()",
      "root_apis": ["insert(records)", "get(indices)"],
      "plain": "same tf.Variables + 2 hand-written tf.functions "
      "(input_signature, autograph=False) traced with "
      "get_concrete_function",
    },
    "stack40": {
      "components": n_components,
      "component_types": kinds,
      "library_pieces": [
        "ContainerSplitter",
        "ContainerMerger",
        "TimeRankFolder",
        "NeuralNetwork",
        "Dense",
        "Flatten",
        "Synchronizable (TargetNet)",
      ],
      "stand_ins (defined in this benchmark, none exist yet)": [
        "ReplayStandIn",
        "SegmentTreeStandIn (sum, min; no propagation)",
        "PrioritizedReplayStandIn",
        "TDErrorStandIn",
      ],
      "networks": f"online and target dueling Q: trunk Flatten + Dense "
      f"{list(TRUNK_UNITS)} relu, value and advantage heads "
      f"Dense {list(HEAD_UNITS)} relu + Dense 1 / "
      f"{NUM_ACTIONS}",
      "root_apis": [
        "get_q(states)",
        "insert_records(records)",
        "get_records(indices)",
        "update_priorities(indices, priorities)",
        "update_forward(batch) [split, fold, online and "
        "target Q, unfold, TD error, merge]",
        "sync()",
      ],
      "plain": "same variables by hand (numpy glorot init, like ours) + "
      "one hand-written tf.function per root API "
      "(input_signature, autograph=False), traced with "
      "get_concrete_function",
      "checked": "ours and plain give the same outputs on every API "
      "(same weights), before timing",
    },
    "call": {
      "layer": f"Dense({CALL_UNITS}) on FloatBox(({CALL_UNITS},)), batch "
      f"{CALL_BATCH}, numpy float32 input",
      "ours": "executor.execute('call', x): checked = the default (Python "
      "space check + the in-graph finiteness check), unchecked = "
      "check_inputs=False, check_values=False (same weights)",
      "plain": "hand-written tf.function (matmul + bias) on the same "
      "variables, called with the same numpy x",
    },
    "call_int": {
      "component": f"Embedding: tf.gather from a ({LOOKUP_ROWS}, {CALL_UNITS}) "
      f"table by IntBox({LOOKUP_ROWS}) indices, batch {CALL_BATCH}, numpy "
      f"int32 input",
      "ours": "checked = the default (Python space check + the in-graph "
      "range check), unchecked = check_inputs=False, check_values=False",
      "plain": "hand-written tf.function (tf.gather) on the same variable",
    },
  }
  path = common.write_results(NAME, quick, config, rows, ratios)

  if not quick:
    png = plot(rows)
    print(f"wrote {png}")

  def verdict(value, limit, le=False):
    ok = value <= limit if le else value < limit
    return "met" if ok else "MISSED"

  r = ratios
  single_ms, stack_ms = (
    r["single_component_overhead_ms"],
    r["stack40_overhead_ms"],
  )
  checked, unchecked = (
    max(r["call_overhead_ratio_checked"], r["call_int_overhead_ratio_checked"]),
    max(
      r["call_overhead_ratio_unchecked"], r["call_int_overhead_ratio_unchecked"]
    ),
  )
  summary = (
    f"{NAME}{' [quick]' if quick else ''}: single component "
    f"+{single_ms:.1f} ms ({r['single_component_ours_over_plain']:.2f}x "
    f"plain; target < {TARGETS['single_ms']:g} ms "
    f"{verdict(single_ms, TARGETS['single_ms'])}), {n_components}-component "
    f"stack +{stack_ms:.1f} ms ({r['stack40_ours_over_plain']:.2f}x; target "
    f"< {TARGETS['stack_ms']:g} ms {verdict(stack_ms, TARGETS['stack_ms'])}),"
    f" per call (worse of Dense and lookup) {checked:.2f}x checked / "
    f"{unchecked:.2f}x unchecked (target "
    f"<= {TARGETS['call_ratio']:g}: "
    f"{verdict(checked, TARGETS['call_ratio'], le=True)} / "
    f"{verdict(unchecked, TARGETS['call_ratio'], le=True)})"
  )
  common.print_table(NAME, rows, ratios, summary, quick=quick, path=path)


def plot(rows):
  """Stacked bars of the build phases (medians; the label is the median
  total), ours vs plain, for both cases; per-call times beside them."""
  plt = common.pyplot()
  med = {(r.case, r.metric): r.stat.median for r in rows}
  fig, axes = plt.subplots(
    1, 3, figsize=(13, 4.2), gridspec_kw={"width_ratios": [1, 1, 1.2]}
  )
  colors = {
    "assembly": "#4C72B0",
    "build": "#DD8452",
    "trace": "#55A868",
    "variables": "#8172B3",
  }
  for ax, case, title in (
    (axes[0], "single", "single component (replay stand-in)"),
    (axes[1], "stack40", "dueling DQN + PER stack"),
  ):
    for x, (who, phases) in enumerate(
      (
        ("ours", ("assembly", "build", "trace")),
        ("plain", ("variables", "trace")),
      )
    ):
      bottom = 0.0
      for phase in phases:
        h = med[(f"{case}/{who}", phase)]
        ax.bar(x, h, bottom=bottom, color=colors[phase], label=phase)
        bottom += h
      total = med[(f"{case}/{who}", "total")]
      ax.text(x, bottom, f"total {total:.0f} ms", ha="center", va="bottom")
    ax.set_xticks([0, 1], ["ours", "plain TF"])
    ax.set_ylabel("ms (median)")
    ax.set_title(title, fontsize=10)
    ax.margins(y=0.12)
  handles = {}
  for ax in axes[:2]:
    for h, lab in zip(*ax.get_legend_handles_labels()):
      handles.setdefault(lab, h)
  axes[0].legend(handles.values(), handles.keys(), fontsize=8)
  names = ("ours_checked", "ours_unchecked", "plain")
  colors = ["#4C72B0", "#64B5CD", "#8C8C8C"]
  ticks, labels = [], []
  for offset, case in ((0, "call"), (4, "call_int")):
    vals = [med[(f"{case}/{n}", "time per call")] for n in names]
    xs = [offset + i for i in range(3)]
    axes[2].bar(xs, vals, color=colors)
    for x, v in zip(xs, vals):
      axes[2].text(x, v, f"{v:.0f}", ha="center", va="bottom", fontsize=8)
    kind = "Dense" if case == "call" else "lookup"
    ticks += xs
    labels += [f"{kind}\nchecks", f"{kind}\nno checks", f"{kind}\nplain"]
  axes[2].set_xticks(ticks, labels, fontsize=7)
  axes[2].margins(y=0.12)
  axes[2].set_ylabel("us per call (median)")
  axes[2].set_title(
    f"per call: Dense({CALL_UNITS}) (FloatBox) and a lookup (IntBox), "
    f"batch {CALL_BATCH}",
    fontsize=9,
  )
  return common.save_plot(fig, NAME)


if __name__ == "__main__":
  app.run(main)
