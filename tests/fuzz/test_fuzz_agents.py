"""Fuzz: the DQN agent (uniform, prioritized, n-step), the IMPALA actor
and learner, and the Ape-X actor, replay shard and learner, on every root
API their builders declare, on both executors where they have both.

Models: the replay size and the update count (a refused update advances
nothing: not the optimizer's step, not the exploration schedule); after
every accepted call the stored actions lie in their range and stored
floats are finite; weights read back equal the variables.
"""

import dataclasses

import hypothesis.strategies as st
import numpy as np
import pytest

from ingraph_rl.agents.apex import ApexBuilder, ApexConfig
from ingraph_rl.agents.dqn import DQNBuilder, DQNConfig
from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig
from ingraph_rl.environments import make_vector_env
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing.fuzz import (
  MAY,
  REJECT,
  VALID,
  Fuzzer,
  Mutation,
  Target,
  mutate,
  numpy_of,
  sample,
)

BACKENDS = ["tf", "torch"]
NUM_ACTIONS, CAPACITY, ENVS, N_STEP = 3, 32, 2, 3
OBS = FloatBox((3,))
NET = ({"type": "dense", "units": 8, "activation": "relu"},)


def n_step_rows(pending, terminals, truncated):
  """(transitions emitted, new pending counts) of one vector step through
  an n-step accumulator holding `pending` steps per env."""
  done = np.asarray(terminals, bool) | np.asarray(truncated, bool)
  length = pending + 1
  rows = np.where(done, length, (length == N_STEP).astype(np.int64))
  return int(rows.sum()), np.where(done, 0, np.minimum(length, N_STEP - 1))


class DQNTarget(Target):
  weights = {
    "get_actions": 3,
    "observe": 5,
    "update": 3,
    "sync_target": 1,
    "get_weights": 1,
    "get_train_step": 1,
  }
  edge_sizes = (0, 50)

  def __init__(self, backend, kind):
    self.name = f"dqn[{kind}]"
    self.kind = kind
    config = DQNConfig(
      num_actions=NUM_ACTIONS,
      network=NET,
      replay_capacity=CAPACITY,
      batch_size=4,
      learning_starts=4,
      epsilon_steps=50,
      prioritized=kind == "prioritized",
      n_step=N_STEP if kind == "n_step" else 1,
      num_envs=ENVS if kind == "n_step" else None,
      seed=1,
    )
    root = DQNBuilder(config).make_agent(OBS)
    self.spaces = dict(root.input_spaces)
    super().__init__(backend, root.build(backend))
    self.size = 0
    self.train_step = 0
    self.pending = np.zeros(ENVS, np.int64)

  def observe_names(self):
    names = ["states", "actions", "rewards", "next_states", "terminals"]
    return names + (["truncated"] if self.kind == "n_step" else [])

  def good_args(self, api, rng, batch=None):
    if api == "get_actions":
      b = int(rng.integers(1, 5)) if batch is None else batch
      return [
        sample(self.spaces["states"], rng, batch=b),
        bool(rng.integers(2)),
      ], VALID
    if api == "observe":
      rows = ENVS if self.kind == "n_step" else int(rng.integers(1, 5))
      rows = rows if batch is None else batch
      args = [
        sample(self.spaces[n], rng, batch=rows) for n in self.observe_names()
      ]
      args[4] = rng.uniform(size=rows) < 0.2
      if self.kind == "n_step":
        args[5] = rng.uniform(size=rows) < 0.1
        return args, VALID if rows == ENVS else REJECT
      return args, VALID
    if api == "update":
      return [], VALID if self.size else REJECT
    return [], VALID

  def check(self, api, args, out):
    out = numpy_of(out)
    state = self.fuzzer.state
    if api == "observe":
      if self.kind == "n_step":
        added, self.pending = n_step_rows(self.pending, args[4], args[5])
      else:
        added = len(np.asarray(args[1]))
      self.size = min(self.size + added, CAPACITY)
      if int(out) != self.size:
        self.fuzzer.inconsistent(api, f"size {out} != {self.size}")
    elif api == "update":
      self.train_step += 1
      if not np.isfinite(out["loss"]):
        self.fuzzer.inconsistent(api, f"loss {out['loss']}")
    elif api == "get_actions":
      a = out["actions"]
      if np.any((a < 0) | (a >= NUM_ACTIONS)) or len(a) != len(args[0]):
        self.fuzzer.inconsistent(api, f"actions {a}")
    elif api == "get_train_step":
      if int(out) != self.train_step:
        self.fuzzer.inconsistent(api, f"train step {out} != {self.train_step}")
    elif api == "get_weights":
      for path, value in out.items():
        # TF layout, the weights space's, in both backends.
        want = state[f"var:dqn/online/{path}"]
        if not np.array_equal(value, want):
          self.fuzzer.inconsistent(api, f"weight {path} differs")
    self._check_state(api)

  def _check_state(self, api):
    state = self.fuzzer.state
    steps = [v for k, v in state.items() if k.endswith("/iterations")]
    if int(steps[0]) != self.train_step:
      self.fuzzer.inconsistent(api, f"optimizer step {steps} != model")
    if int(state["var:dqn/memory/size"]) != self.size:
      self.fuzzer.inconsistent(api, "memory size differs from the model")
    actions = state["var:dqn/memory/buffer.actions"]
    if np.any((actions < 0) | (actions >= NUM_ACTIONS)):
      self.fuzzer.inconsistent(api, f"stored actions {actions}")
    for k, v in state.items():
      if v.dtype.kind == "f" and k.startswith("var:") and "min_tree" not in k:
        if not np.all(np.isfinite(v)):
          self.fuzzer.inconsistent(api, f"non-finite values in {k}")
          return


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["uniform", "prioritized", "n_step"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_dqn(backend, kind, budget, run):
  run(DQNTarget(backend, kind), budget)


# --- IMPALA ------------------------------------------------------------------

UNROLL, BATCH, QUEUE = 3, 2, 8


class MultiRootTarget(Target):
  """Roots of one agent that share queues; each call goes to one of them
  ("actor.act", "learner.update"), and after it every other root's
  snapshot is taken again (the queues moved)."""

  def _setup(self, backend, roots):
    self.roots = roots
    first = next(iter(roots.values()))
    super().__init__(backend, first)
    self.fuzzers = {
      name: Fuzzer(f"{self.name}_{name}", backend, ex)
      for name, ex in roots.items()
    }

  def _root(self, api):
    """Points `self.fuzzer` at the root of `api`; returns the plain name."""
    root, name = api.split(".")
    self.fuzzer = self.fuzzers[root]
    return name

  def step(self, draw):
    api = draw(st.sampled_from(self._apis))
    name = self._root(api)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    mode = draw(st.sampled_from(["good", "bad", "bad", "edge"]))
    if mode == "edge" and not self.has_batch(name):
      mode = "good"
    batch = draw(st.sampled_from(self.edge_sizes)) if mode == "edge" else None
    args, status = self.good_args(name, rng, batch)
    if mode != "bad":
      if status is None:
        return
      expect = MAY if mode == "edge" and status == VALID else status
      m = Mutation(mode, list(args), expect)
    else:
      m = mutate(draw, self.fuzzer.arg_spaces(name), args)
      if m.expect != REJECT and status is None:
        return
    result, out = self.fuzzer.call(name, m.args, m.expect, m.kind, m.note)
    if result == "accepted":
      self.check(name, m.args, out)
    for fuzzer in self.fuzzers.values():
      if fuzzer is not self.fuzzer:
        fuzzer.resync()

  def _check_finite(self, api):
    for root, fuzzer in self.fuzzers.items():
      for k, v in fuzzer.state.items():
        if v.dtype.kind == "f" and "min_tree" not in k:
          if not np.all(np.isfinite(v)):
            self.fuzzer.inconsistent(api, f"non-finite {root} {k}")
            return


class IMPALATarget(MultiRootTarget):
  """The actor and the learner of one IMPALA agent, sharing the rollout
  queue; each call goes to one of them ("actor.act", "learner.update"):
  the model knows the queue's size, so no call blocks."""

  name = "impala"
  weights = {
    "actor.act": 3,
    "actor.reset_env": 1,
    "actor.unroll": 2,
    "actor.set_weights": 2,
    "learner.update": 2,
    "learner.update_from_batch": 3,
    "learner.get_weights": 1,
    "learner.get_train_step": 1,
    "learner.queue_size": 1,
  }
  edge_sizes = (0, 9)

  def __init__(self, backend):
    config = IMPALAConfig(
      num_actions=2,
      unroll_length=UNROLL,
      batch_size=BATCH,
      queue_capacity=QUEUE,
      use_staging=False,
      torso=({"type": "dense", "units": 8, "activation": "tanh"},),
      seed=2,
    )
    builder = IMPALABuilder(config)
    env = make_vector_env("CartPole-v1", ENVS, seed=3)
    queue = f"fuzz_impala_{backend}"
    actor = builder.make_actor(env, queue)
    learner = builder.make_learner(
      env.observation_space, queue, update_from_batch=True
    )
    self.spaces = dict(actor.input_spaces, **learner.input_spaces)
    self._setup(
      backend,
      {"learner": learner.build(backend), "actor": actor.build(backend)},
    )
    self.roots["actor"].execute("reset_env", 0)
    self.fuzzers["actor"].resync()
    self.queued = 0
    self.train_step = 0

  def good_args(self, api, rng, batch=None):
    if api == "act":
      b = int(rng.integers(1, 4)) if batch is None else batch
      t = int(rng.integers(1, 3))
      names = ("observations", "state", "resets", "last_rewards")
      args = [sample(self.spaces[n], rng, batch=b, time=t) for n in names]
      args.append(sample(self.spaces["last_actions"], rng, batch=b, time=t))
      return args, VALID
    if api == "reset_env":
      return [int(rng.integers(0, 1000))], VALID
    if api == "unroll":
      return [], VALID if self.queued + ENVS <= QUEUE else None
    if api == "set_weights":
      weights = numpy_of(self.roots["learner"].execute("get_weights"))
      return [weights], VALID
    if api == "update":
      return [], VALID if self.queued >= BATCH else None
    if api == "update_from_batch":
      b = BATCH if batch is None else batch
      return [sample(self.spaces["rollouts"], rng, batch=b)], VALID
    return [], VALID

  def check(self, api, args, out):
    out = numpy_of(out)
    if api == "unroll":
      self.queued += ENVS
    elif api == "update":
      self.queued -= BATCH
      self.train_step += 1
    elif api == "update_from_batch":
      self.train_step += 1
    if api in ("update", "update_from_batch"):
      if int(out["train_step"]) != self.train_step or not np.isfinite(
        out["loss"]
      ):
        self.fuzzer.inconsistent(api, f"train step / loss {out}")
    elif api == "queue_size" and int(out) != self.queued:
      self.fuzzer.inconsistent(api, f"queue size {out} != {self.queued}")
    elif api == "get_train_step" and int(out) != self.train_step:
      self.fuzzer.inconsistent(api, f"train step {out}")
    elif api == "act":
      a = out["action"]
      if np.any((a < 0) | (a >= 2)):
        self.fuzzer.inconsistent(api, f"actions {a}")
    elif api == "set_weights":
      actor = self.fuzzers["actor"].state
      for path, value in args[0].items():
        got = [v for k, v in actor.items() if k.endswith("/" + path)]
        if not got or not np.array_equal(got[0], np.asarray(value)):
          self.fuzzer.inconsistent(api, f"weight {path} not set")
          return
    self._check_finite(api)


@pytest.mark.slow
def test_impala_actor_and_learner(budget, run):
  # TF only: IMPALA's roots have no torch mirror (the env stepper and the
  # learner's graph functions have no torch bodies).
  run(IMPALATarget("tf"), budget)


# --- Ape-X -------------------------------------------------------------------

APEX = ApexConfig(
  num_actions=2,
  network=({"type": "dense", "units": 8, "activation": "relu"},),
  n_step=N_STEP,
  buffer_size=CAPACITY,
  train_batch_size=4,
  learning_starts=8,
  rollout_fragment_length=3,
  insert_queue_capacity=200,
  max_inserts_per_serve=16,
  seed=4,
)
# What one rollout may emit at most: every pending step plus the new ones.
MAX_ROLLOUT_ROWS = (N_STEP - 1 + APEX.rollout_fragment_length) * ENVS


def apex_acting_args(spaces, api, rng, batch):
  """Arguments of an Ape-X actor's or agent's get_actions / observe (one
  row per env; another batch is refused)."""
  if api == "get_actions":
    b = int(rng.integers(1, 5)) if batch is None else batch
    return [sample(spaces["states"], rng, batch=b), True], VALID
  rows = ENVS if batch is None else batch
  names = ("states", "actions", "rewards", "next_states")
  args = [sample(spaces[n], rng, batch=rows) for n in names]
  args.append(rng.uniform(size=rows) < 0.2)
  args.append(rng.uniform(size=rows) < 0.1)
  return args, VALID if rows == ENVS else REJECT


class ApexTarget(MultiRootTarget):
  """The actor, a replay shard and the learner of one Ape-X agent, on
  their shared queues. The model follows every queue (inserts, samples,
  priority updates) and the shard's size, so no call blocks, and checks
  each serve's counts and each update's step."""

  name = "apex"
  weights = {
    "actor.get_actions": 2,
    "actor.observe": 2,
    "actor.priorities": 2,
    "actor.reset_env": 1,
    "actor.rollout": 3,
    "actor.set_weights": 2,
    "shard.serve": 3,
    "shard.stats": 1,
    "shard.get_generation": 1,
    "learner.update": 2,
    "learner.get_weights": 1,
    "learner.get_train_step": 1,
    "learner.queue_size": 1,
  }
  edge_sizes = (0, 9)

  def __init__(self, backend):
    builder = ApexBuilder(APEX)
    env = make_vector_env("CartPole-v1", ENVS, seed=3)
    names = builder.queue_names(f"fuzz_apex_{backend}", 1)
    actor = builder.make_actor(env, names, 0, 1)
    shard = builder.make_shard(env.observation_space, names, 0, 77)
    learner = builder.make_learner(env.observation_space, names)
    self.spaces = dict(actor.input_spaces)
    self._setup(
      backend,
      {
        "learner": learner.build(backend),
        "shard": shard.build(backend),
        "actor": actor.build(backend),
      },
    )
    self.roots["actor"].execute("reset_env", 0)
    self.fuzzers["actor"].resync()
    self.inserts = self.samples = self.updates = 0
    self.size = self.train_step = 0

  def good_args(self, api, rng, batch=None):
    spaces = self.spaces
    if api in ("get_actions", "observe"):
      return apex_acting_args(spaces, api, rng, batch)
    if api == "priorities":
      b = int(rng.integers(1, 5)) if batch is None else batch
      return [sample(spaces["records"], rng, batch=b)], VALID
    if api == "reset_env":
      return [int(rng.integers(0, 1000))], VALID
    if api == "rollout":
      room = self.inserts + MAX_ROLLOUT_ROWS <= APEX.insert_queue_capacity
      return [0], VALID if room else None
    if api == "set_weights":
      weights = numpy_of(self.roots["learner"].execute("get_weights"))
      return [weights], VALID
    if api == "update":
      batch_size = APEX.train_batch_size
      ok = self.samples >= batch_size and self.updates + batch_size <= (
        64 * batch_size
      )
      return [], VALID if ok else None
    return [], VALID

  def check(self, api, args, out):
    out = numpy_of(out)
    batch = APEX.train_batch_size
    if api == "observe":
      # The accumulator's pending steps moved: rollouts emit from them.
      pass
    elif api == "rollout":
      self.inserts += int(out["transitions"])
    elif api == "serve":
      inserted = min(self.inserts, APEX.max_inserts_per_serve)
      self.inserts -= inserted
      self.size = min(self.size + inserted, CAPACITY)
      room = APEX.prefetch_batches * batch - self.samples
      sampled = (
        batch if self.size >= APEX.learning_starts and room >= batch else 0
      )
      self.samples += sampled
      want = (inserted, self.updates, sampled, self.size)
      self.updates = 0
      got = tuple(
        int(out[k]) for k in ("inserted", "updated", "sampled", "size")
      )
      if got != want:
        self.fuzzer.inconsistent(api, f"serve {got} != model {want}")
    elif api == "update":
      self.samples -= batch
      self.updates += batch
      self.train_step += 1
      if int(out["train_step"]) != self.train_step or not np.isfinite(
        out["loss"]
      ):
        self.fuzzer.inconsistent(api, f"train step / loss {out}")
    elif api == "queue_size" and int(out) != self.samples:
      self.fuzzer.inconsistent(api, f"queue size {out} != {self.samples}")
    elif api == "get_train_step" and int(out) != self.train_step:
      self.fuzzer.inconsistent(api, f"train step {out}")
    elif api == "get_actions":
      a = out["actions"]
      if np.any((a < 0) | (a >= 2)) or len(a) != len(args[0]):
        self.fuzzer.inconsistent(api, f"actions {a}")
    elif api == "priorities":
      if np.any(out <= 0) or len(out) != len(args[0]["rewards"]):
        self.fuzzer.inconsistent(api, f"priorities {out}")
    self._check_finite(api)


class ApexAgentTarget(Target):
  """The complete Ape-X agent (`make_agent`: act, observe, update, weights)
  on both executors. The model follows the n-step windows, the memory
  size and the update count."""

  name = "apex_agent"
  weights = {
    "get_actions": 3,
    "observe": 5,
    "update": 3,
    "get_weights": 1,
    "set_weights": 1,
    "get_train_step": 1,
  }
  edge_sizes = (0, 50)

  def __init__(self, backend):
    config = ApexConfig(
      num_actions=NUM_ACTIONS,
      network=NET,
      n_step=N_STEP,
      train_batch_size=4,
      buffer_size=CAPACITY,
      learning_starts=4,
      seed=2,
    )
    root = ApexBuilder(config).make_agent(OBS, ENVS)
    if backend == "torch":
      # set_weights takes the TF layout (the builder's weights space); the
      # torch mirror keeps its kernels transposed.
      root = dataclasses.replace(
        root, api_names=[a for a in root.api_names if a != "set_weights"]
      )
      self.weights = {
        k: v for k, v in self.weights.items() if k != "set_weights"
      }
    self.spaces = dict(root.input_spaces)
    super().__init__(backend, root.build(backend))
    self.size = self.train_step = 0
    self.pending = np.zeros(ENVS, np.int64)

  def good_args(self, api, rng, batch=None):
    spaces = self.spaces
    if api in ("get_actions", "observe"):
      return apex_acting_args(spaces, api, rng, batch)
    if api == "update":
      return [], VALID if self.size else REJECT
    if api == "set_weights":
      return [numpy_of(self.executor.execute("get_weights"))], VALID
    return [], VALID

  def check(self, api, args, out):
    out = numpy_of(out)
    if api == "observe":
      added, self.pending = n_step_rows(self.pending, args[4], args[5])
      self.size = min(self.size + added, CAPACITY)
      if int(out["size"]) != self.size or int(out["transitions"]) != added:
        self.fuzzer.inconsistent(api, f"size {out} != {self.size}")
    elif api == "update":
      self.train_step += 1
      if int(out["train_step"]) != self.train_step or not np.isfinite(
        out["loss"]
      ):
        self.fuzzer.inconsistent(api, f"train step / loss {out}")
    elif api == "get_train_step" and int(out) != self.train_step:
      self.fuzzer.inconsistent(api, f"train step {out}")
    elif api == "get_actions":
      a = out["actions"]
      if np.any((a < 0) | (a >= NUM_ACTIONS)) or len(a) != len(args[0]):
        self.fuzzer.inconsistent(api, f"actions {a}")
    state = self.fuzzer.state
    if int(state["var:agent/memory/size"]) != self.size:
      self.fuzzer.inconsistent(api, "memory size differs from the model")


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_apex_agent(backend, budget, run):
  run(ApexAgentTarget(backend), budget)


@pytest.mark.slow
def test_apex_actor_shard_and_learner(budget, run):
  # TF only: the roots step envs and use TF queues (no torch mirror); the
  # Q-learning core's torch parity is in tests/agents/apex.
  run(ApexTarget("tf"), budget)
