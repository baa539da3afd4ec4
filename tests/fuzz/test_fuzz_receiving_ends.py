"""Fuzz: the receiving ends of Ape-X and IMPALA, fed through their queues
by a faulty peer (an executor of the same shared-name queue with its value
checks off), standing in for a buggy or corrupted process.

Every round enqueues rows of which some are bad (NaN and inf floats,
actions out of range, priorities <= 0, indices beyond the stored
transitions, negative importance weights, a shard index out of range,
TD errors that overflow) and calls the receiver's API. The model says what
must happen: bad rows are dropped alone (counted), good rows are applied
exactly (the shard's ring contents and priorities, the learner's frames
and the priorities it sends back), and a batch with nothing good (or a
non-finite update) is refused with no state change (but for the input
queue, which the call consumes). A bad row found stored is a wrong value
accepted.
"""

import dataclasses

import hypothesis.strategies as st
import numpy as np
import pytest

from ingraph_rl.agents.apex import ApexBuilder, ApexConfig, queues
from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing.fuzz import REJECT, VALID, Target, numpy_of
from ingraph_rl.testing.queues import (
  queue_executor,
  queue_feeder,
  random_rollouts,
  unique_queue_name,
)

OBS = FloatBox((4,))
APEX = ApexConfig(
  num_actions=2,
  n_step=3,
  discount=0.9,
  train_batch_size=8,
  learning_starts=16,
  buffer_size=32,
  rollout_fragment_length=10,
)
GENERATION = 77


def transitions(rng, n, ids):
  """n good transitions; states[:, 0] carries a unique id per row."""
  states = rng.normal(size=(n, 4)).astype(np.float32)
  states[:, 0] = ids
  return {
    "states": states,
    "actions": rng.integers(0, 2, n).astype(np.int64),
    "rewards": rng.normal(size=n).astype(np.float32),
    "next_states": rng.normal(size=(n, 4)).astype(np.float32),
    "terminals": rng.uniform(size=n) < 0.2,
    "discounts": np.full(n, 0.729, np.float32),
  }


BAD_FLOATS = (np.nan, np.inf, -np.inf)


def spoil_record(rng, records, i):
  """Makes row i of `records` break the record space."""
  kind = rng.integers(0, 4)
  if kind == 0:
    records["actions"][i] = rng.choice([2, 5, -1, 2**40])
  elif kind == 1:
    records["states"][i, rng.integers(1, 4)] = rng.choice(BAD_FLOATS)
  elif kind == 2:
    records["rewards"][i] = rng.choice(BAD_FLOATS)
  else:
    records["discounts"][i] = rng.choice(BAD_FLOATS)


class ShardTarget(Target):
  """An Ape-X replay shard's `serve`, fed inserts and priority updates."""

  name = "apex_shard_queues"
  weights = {"serve": 1}

  def __init__(self):
    builder = ApexBuilder(APEX)
    names = builder.queue_names(unique_queue_name("fuzz_shard"), 1)
    record = builder.record_space(OBS)
    self.shard = builder.make_shard(OBS, names, 0, GENERATION)
    ex = self.shard.build()
    super().__init__("tf", ex)
    c = APEX
    self.inserts = queue_executor(
      queues.insert_queue(record, c, names, 0, "inserts"), check_values=False
    )
    self.updates = queue_executor(
      queues.update_queue(c, names, 0, "updates"), check_values=False
    )
    self.samples = queue_executor(
      queues.sample_queue(record, c, names),
      ("dequeue_many", "size"),
    )
    self.memory = self.shard.component.memory
    self.ids = []  # The id stored at each ring position.
    self.priority = []
    self.pos = 0  # The ring's next write position.
    self.next_id = 1

  def step(self, draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    cap = self.memory.capacity
    # Inserts: 0 to 6 rows, some bad.
    n = int(rng.integers(0, 7))
    ids = np.arange(self.next_id, self.next_id + n)
    self.next_id += n
    records = transitions(rng, n, ids)
    prio = rng.uniform(0.1, 3.0, n).astype(np.float32)
    bad_ins = rng.uniform(size=n) < 0.3
    for i in np.flatnonzero(bad_ins):
      if rng.uniform() < 0.5:
        spoil_record(rng, records, i)
      else:
        prio[i] = rng.choice([np.nan, np.inf, 0.0, -1.0])
    # Updates: one learner batch, when anything is stored.
    size = len(self.ids)
    updates = None
    if size and rng.uniform() < 0.6:
      b = APEX.train_batch_size
      index = rng.integers(0, size, b).astype(np.int32)
      p = rng.uniform(0.1, 3.0, b).astype(np.float32)
      gen = np.full(b, GENERATION, np.int64)
      bad_up = rng.uniform(size=b) < 0.3
      for i in np.flatnonzero(bad_up):
        kind = rng.integers(0, 4)
        if kind == 0:
          index[i] = rng.choice([size, cap, -1, 2**31 - 1])
        elif kind == 1:
          p[i] = rng.choice([np.nan, np.inf, 0.0, -2.0])
        elif kind == 2:
          gen[i] = -5  # Out of the row space.
        else:  # Another generation: a good row, dropped.
          gen[i] = GENERATION + 1
          bad_up[i] = False
      stale = gen == GENERATION + 1
      updates = dict(index=index, priority=p, generation=gen)
      self.updates.execute("enqueue_many", updates)
    if n:
      self.inserts.execute(
        "enqueue_many", {"records": records, "priority": prio}
      )
    # Keep the sample queue from filling up (it is not what is under test).
    waiting = int(self.samples.execute("size"))
    if waiting:
      self.samples.execute("dequeue_many", waiting)
    self.fuzzer.resync()
    status, out = self.fuzzer.call("serve", [], VALID, "faulty_peer")
    if status != "accepted":
      return
    out = numpy_of(out)
    # The model: updates first (against the size before the inserts).
    want_updated = want_dropped = 0
    want_rejected = int(bad_ins.sum())
    if updates is not None:
      want_rejected += int(bad_up.sum())
      for i in range(len(index)):
        if bad_up[i]:
          continue
        if stale[i]:
          want_dropped += 1
          continue
        want_updated += 1
        self.priority[index[i]] = float(p[i])
    for i in np.flatnonzero(~bad_ins):
      if len(self.ids) < cap:
        self.ids.append(int(ids[i]))
        self.priority.append(float(prio[i]))
      else:
        self.ids[self.pos], self.priority[self.pos] = (
          int(ids[i]),
          float(prio[i]),
        )
      self.pos = (self.pos + 1) % cap
    got = (
      int(out["inserted"]),
      int(out["updated"]),
      int(out["dropped_updates"]),
      int(out["rejected_rows"]),
    )
    want = (int((~bad_ins).sum()), want_updated, want_dropped, want_rejected)
    if got != want:
      self.fuzzer.inconsistent("serve", f"counts {got} != model {want}")
    weights = self.fuzzer.executor.get_weights()
    stored = np.asarray(weights["shard_0/memory/buffer.states"])[
      : len(self.ids), 0
    ]
    bad_ids = set(ids[bad_ins].tolist())
    if bad_ids & set(stored.astype(np.int64).tolist()):
      self.fuzzer.stats.add(self.fuzzer.key("serve"), "wrong_accepted")
      self.fuzzer.stats.fail(self.fuzzer.key("serve"), "a bad row was stored")
    if not np.array_equal(stored, np.asarray(self.ids, np.float32)):
      self.fuzzer.inconsistent("serve", "ring contents differ from the model")
    tree_ = np.asarray(weights["shard_0/memory/sum_tree"])
    leaves = tree_[
      self.memory.num_leaves : self.memory.num_leaves + len(self.ids)
    ]
    alpha = APEX.prioritized_replay_alpha
    if not np.allclose(leaves, np.asarray(self.priority) ** alpha, rtol=1e-5):
      self.fuzzer.inconsistent("serve", "priorities differ from the model")


class ApexLearnerTarget(Target):
  """The Ape-X learner's `update`, fed sampled batches."""

  name = "apex_learner_queues"
  weights = {"update": 1}

  def __init__(self):
    builder = ApexBuilder(APEX)
    names = builder.queue_names(unique_queue_name("fuzz_learner"), 2)
    record = builder.record_space(OBS)
    ex = builder.make_learner(OBS, names).build()
    super().__init__("tf", ex)
    self.feeder = queue_executor(
      queues.sample_queue(record, APEX, names), check_values=False
    )
    self.replies = [
      queue_executor(
        queues.update_queue(APEX, names, i, f"replies_{i}"),
        ("dequeue_many", "size"),
      )
      for i in range(2)
    ]
    # Taking the batch off the sample queue is part of every call.
    self.fuzzer.consumed = frozenset(
      k for k in self.fuzzer.state if k.endswith("samples/queue")
    )
    assert self.fuzzer.consumed, sorted(self.fuzzer.state)

  def step(self, draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    b = APEX.train_batch_size
    shard = int(rng.integers(0, 2))
    records = transitions(rng, b, np.arange(b))
    rows = {
      "records": records,
      "index": rng.integers(0, APEX.buffer_size, b).astype(np.int32),
      "weight": rng.uniform(0.1, 1.0, b).astype(np.float32),
      "shard": np.full(b, shard, np.int32),
      "generation": np.full(b, GENERATION, np.int64),
    }
    mode = rng.choice(["some", "some", "none", "all", "overflow"])
    bad = np.zeros(b, bool)
    if mode == "some":
      bad = rng.uniform(size=b) < 0.3
    elif mode == "all":
      bad[:] = True
    for i in np.flatnonzero(bad):
      kind = rng.integers(0, 4)
      if kind == 0:
        spoil_record(rng, records, i)
      elif kind == 1:
        rows["weight"][i] = rng.choice([np.nan, -0.5, np.inf])
      elif kind == 2:
        rows["index"][i] = -3
      else:
        rows["shard"][i] = 1 - shard if i else 7  # Mixed, or out of range.
        if i == 0:  # Row 0 decides the shard: every row is then bad.
          bad[:] = True
    if mode == "overflow":
      records["rewards"][:] = 3e38  # Finite rows, non-finite TD.
    expect = REJECT if bad.all() or mode == "overflow" else VALID
    self.feeder.execute("enqueue_many", rows)
    self.fuzzer.resync()
    status, out = self.fuzzer.call("update", [], expect, f"rows_{mode}")
    # What went back to the shards (nothing when refused).
    sent = {}
    for i, q in enumerate(self.replies):
      size = int(q.execute("size"))
      if size:
        sent[i] = numpy_of(q.execute("dequeue_many", size))
    self.fuzzer.resync()
    if status == "rejected":
      if sent:
        self.fuzzer.inconsistent("update", "a refused update sent priorities")
      return
    if status != "accepted":
      return
    out = numpy_of(out)
    got = (int(out["frames"]), int(out["rejected_rows"]))
    if got != (int((~bad).sum()), int(bad.sum())):
      self.fuzzer.inconsistent("update", f"frames, rejected {got}; bad {bad}")
    back = sent.get(shard)
    if back is None or set(sent) != {shard}:
      self.fuzzer.inconsistent("update", f"priorities went to {set(sent)}")
      return
    if not np.array_equal(back["generation"] == 0, bad):
      self.fuzzer.inconsistent("update", "rejected rows not marked")
    good = ~bad
    if not (
      np.isfinite(back["priority"]).all()
      and np.array_equal(back["index"][good], rows["index"][good])
    ):
      self.fuzzer.inconsistent("update", "priorities sent back are wrong")


IMPALA = IMPALAConfig(
  num_actions=3,
  unroll_length=4,
  batch_size=3,
  queue_capacity=12,
  use_staging=False,
  lstm_units=4,
)


class IMPALALearnerTarget(Target):
  """The IMPALA learner's `update`, fed rollouts."""

  name = "impala_learner_queue"
  weights = {"update": 1}

  def __init__(self):
    name = unique_queue_name("fuzz_impala")
    builder = IMPALABuilder(IMPALA)
    ex = builder.make_learner(OBS, name).build()
    super().__init__("tf", ex)
    self.feeder = queue_feeder(
      builder.record_space(OBS), IMPALA.queue_capacity, name, check_values=False
    )
    self.fuzzer.consumed = frozenset(
      k for k in self.fuzzer.state if k.startswith("res:") and "queue" in k
    )
    assert self.fuzzer.consumed, sorted(self.fuzzer.state)

  def step(self, draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    batch = random_rollouts(IMPALA, seed % 1000)
    b = IMPALA.batch_size
    bad = rng.uniform(size=b) < 0.35
    for i in np.flatnonzero(bad):
      kind = rng.integers(0, 5)
      t = rng.integers(0, IMPALA.unroll_length + 1)
      if kind == 0:
        batch["actions"][i, t] = rng.choice([3, -1, 99])
      elif kind == 1:
        batch["observations"][i, t, 1] = rng.choice(BAD_FLOATS)
      elif kind == 2:
        batch["rewards"][i, t] = rng.choice(BAD_FLOATS)
      elif kind == 3:
        batch["logits"][i, t, 0] = rng.choice(BAD_FLOATS)
      else:
        batch["initial_state"]["c"][i, 0] = rng.choice(BAD_FLOATS)
    expect = REJECT if bad.all() else VALID
    self.feeder.execute("enqueue_many", batch)
    self.fuzzer.resync()
    status, out = self.fuzzer.call("update", [], expect, "rollouts")
    if status != "accepted":
      return
    out = numpy_of(out)
    got = (int(out["frames"]), int(out["rejected_rows"]))
    want = (int((~bad).sum()) * IMPALA.unroll_length, int(bad.sum()))
    if got != want:
      self.fuzzer.inconsistent("update", f"frames, rejected {got} != {want}")
    if not np.isfinite(out["loss"]):
      self.fuzzer.inconsistent("update", "non-finite loss accepted")


def smaller(budget):
  """A call here trains or serves (~30-75 ms with the snapshots): fewer
  examples than the suite's, to keep make test and make fuzz in time."""
  return dataclasses.replace(budget, examples=max(3, budget.examples // 3))


@pytest.mark.slow
def test_apex_shard_fed_by_a_faulty_peer(budget, run):
  run(ShardTarget(), smaller(budget))


@pytest.mark.slow
def test_apex_learner_fed_by_a_faulty_peer(budget, run):
  run(ApexLearnerTarget(), smaller(budget))


@pytest.mark.slow
def test_impala_learner_fed_by_a_faulty_peer(budget, run):
  run(IMPALALearnerTarget(), smaller(budget))
