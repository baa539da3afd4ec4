"""NStepAccumulator against an offline reference computed from whole
trajectories (terminations and truncations in different envs at different
steps), n = 1 as plain 1-step transitions, hand-checked n = 3 rows, TF vs
torch, batch-size errors, clear, and memories fed with its 0..n*E rows."""

import doctest

import numpy as np
import pytest

from ingraph_rl.components.memories import (
  NStepAccumulator,
  PrioritizedReplay,
  ReplayMemory,
)
from ingraph_rl.components.memories import n_step as n_step_module
from ingraph_rl.core import Component, api
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.executors.torch import TorchExecutor
from ingraph_rl.spaces import BoolBox, FloatBox, IntBox
from ingraph_rl.testing import assert_parity
from ingraph_rl.testing.component_test import to_numpy

EXECUTORS = [TFExecutor, TorchExecutor]
E, T = 3, 9
KEYS = ["states", "actions", "rewards", "next_states", "terminals", "discounts"]
OBS = FloatBox((2,), add_batch_rank=True)
SPACES = {
  "states": OBS,
  "next_states": OBS,
  "actions": IntBox(4, dtype=np.int64, add_batch_rank=True),
  "rewards": FloatBox(add_batch_rank=True),
  "terminals": BoolBox(add_batch_rank=True),
  "truncated": BoolBox(add_batch_rank=True),
}


def make_sequence():
  """T steps of E envs with episode ends:
    env 0: truncated at t=2, terminated at t=6;
    env 1: terminated at t=0 and t=1 (a 1-step episode), terminated AND
      truncated at t=5;
    env 2: one long episode, truncated at the last step t=8.
  Observations are unique per (t, env); after an end, `next_states` holds
  the final observation and the next `states` a fresh reset observation.
  """
  term = np.zeros((T, E), bool)
  trunc = np.zeros((T, E), bool)
  trunc[2, 0] = term[6, 0] = True
  term[0, 1] = term[1, 1] = True
  term[5, 1] = trunc[5, 1] = True
  trunc[8, 2] = True
  t_idx, e_idx = np.meshgrid(np.arange(T), np.arange(E), indexing="ij")
  rewards = (t_idx + 1 + 10 * e_idx).astype(np.float32)
  actions = ((t_idx * 3 + e_idx) % 4).astype(np.int64)
  states = np.zeros((T, E, 2), np.float32)
  next_states = np.zeros((T, E, 2), np.float32)
  obs = np.stack([np.zeros(E), np.arange(E)], -1).astype(np.float32)
  for t in range(T):
    states[t] = obs
    next_states[t] = obs + [1.0, 0.0]
    done = term[t] | trunc[t]
    final = next_states[t].copy()
    final[done] = [-100.0 - t, 0.0]  # A recognizable final obs.
    next_states[t] = final
    # Reset observations differ from every stepped one.
    obs = np.where(done[:, None], [[1000.0 + t, 0.0]], next_states[t])
    obs[:, 1] = np.arange(E)
    obs = obs.astype(np.float32)
  return dict(
    states=states,
    actions=actions,
    rewards=rewards,
    next_states=next_states,
    terminals=term,
    truncated=trunc,
  )


def reference(seq, n, discount):
  """Offline: the transition starting at each step t of env i spans
  m = min(n, steps up to and including its episode's end) steps and is
  emitted at step t + m - 1, if that is inside the sequence. Returns, per
  push, the rows ordered by env, then by start step."""
  term, trunc = seq["terminals"], seq["truncated"]
  num_t, num_e = term.shape
  out = [{k: [] for k in KEYS} for _ in range(num_t)]
  for i in range(num_e):
    for t in range(num_t):
      m = n
      for k in range(n):
        if t + k < num_t and (term[t + k, i] or trunc[t + k, i]):
          m = k + 1
          break
      last = t + m - 1
      if last >= num_t:
        continue  # Not matured yet.
      row = out[last]
      row["states"].append(seq["states"][t, i])
      row["actions"].append(seq["actions"][t, i])
      row["rewards"].append(
        sum(discount**k * float(seq["rewards"][t + k, i]) for k in range(m))
      )
      row["next_states"].append(seq["next_states"][last, i])
      row["terminals"].append(bool(term[last, i]))
      row["discounts"].append(discount**m)
  # Rows were appended env by env, start step ascending: already ordered.
  return [{k: np.array(v) for k, v in row.items()} for row in out]


def push_args(seq, t):
  return [
    seq[k][t]
    for k in (
      "states",
      "actions",
      "rewards",
      "next_states",
      "terminals",
      "truncated",
    )
  ]


def run(executor, n, discount, seq):
  ex = executor(NStepAccumulator(n, discount, num_envs=E), SPACES)
  return [to_numpy(ex.execute("push", *push_args(seq, t))) for t in range(T)]


def assert_rows_equal(got, want, t):
  assert got["rewards"].shape[0] == len(want["rewards"]), (t, got, want)
  if not len(want["rewards"]):
    return
  for k in KEYS:
    np.testing.assert_allclose(
      got[k], want[k], rtol=1e-6, err_msg=f"step {t}, {k}"
    )


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 2, 3, 5])
@pytest.mark.parametrize("executor", EXECUTORS)
def test_matches_the_offline_reference(executor, n):
  seq = make_sequence()
  got, want = run(executor, n, 0.9, seq), reference(seq, n, 0.9)
  for t in range(T):
    assert_rows_equal(got[t], want[t], t)
  # Each env leaves at most n - 1 steps pending (env 2 none: it ended).
  emitted = sum(len(w["rewards"]) for w in want)
  assert T * E - (n - 1) * (E - 1) <= emitted <= T * E


@pytest.mark.parametrize("executor", EXECUTORS)
def test_n1_emits_plain_one_step_transitions(executor):
  seq = make_sequence()
  for t, got in enumerate(run(executor, 1, 0.9, seq)):
    for k in ("states", "actions", "rewards", "next_states", "terminals"):
      np.testing.assert_array_equal(got[k], seq[k][t])
    np.testing.assert_allclose(got["discounts"], np.full(E, 0.9), rtol=1e-7)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_n3_rows_checked_by_hand(executor):
  seq = make_sequence()
  got = run(executor, 3, 0.5, seq)
  # Step 0: env 1 terminated at once -> its 1-step transition; env 0 and
  # env 2 have 1 pending step each.
  np.testing.assert_array_equal(got[0]["rewards"], [11.0])
  np.testing.assert_array_equal(got[0]["terminals"], [True])
  np.testing.assert_array_equal(got[0]["discounts"], [0.5])
  # Step 2: env 0 truncated with steps 0, 1, 2 pending (rewards 1, 2, 3):
  # all three, not terminal, bootstrapping from the final obs of step 2;
  # env 2's step 0 matured (rewards 21, 22, 23). Env 1's step 2 waits.
  g = got[2]
  np.testing.assert_array_equal(
    g["rewards"],
    [1 + 0.5 * 2 + 0.25 * 3, 2 + 0.5 * 3, 3, 21 + 0.5 * 22 + 0.25 * 23],
  )
  np.testing.assert_array_equal(g["discounts"], [0.125, 0.25, 0.5, 0.125])
  np.testing.assert_array_equal(g["terminals"], [False] * 4)
  np.testing.assert_array_equal(g["states"][:, 0], [0, 1, 2, 0])
  np.testing.assert_array_equal(g["next_states"][:, 0], [-102, -102, -102, 3])
  np.testing.assert_array_equal(g["actions"], [0, 3, 6 % 4, 2])
  # Step 5: env 1 terminated and truncated at once (counts as terminated)
  # with steps 3, 4, 5 pending (rewards 14, 15, 16); step 2's transition
  # left at step 4.
  g = got[5]
  rows1 = g["states"][:, 1] == 1
  np.testing.assert_array_equal(
    g["rewards"][rows1], [14 + 0.5 * 15 + 0.25 * 16, 15 + 0.5 * 16, 16]
  )
  np.testing.assert_array_equal(g["terminals"][rows1], [True] * 3)
  np.testing.assert_array_equal(g["discounts"][rows1], [0.125, 0.25, 0.5])
  np.testing.assert_array_equal(
    got[4]["rewards"][got[4]["states"][:, 1] == 1], [13 + 0.5 * 14 + 0.25 * 15]
  )


def test_parity():
  seq = make_sequence()
  calls = [("push", push_args(seq, t)) for t in range(T)] + [("clear", [])]
  assert_parity(
    NStepAccumulator(3, 0.9, num_envs=E), SPACES, calls, rtol=1e-6, atol=0
  )


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_wrong_batch_size_is_a_space_error_and_changes_nothing(executor):
  seq = make_sequence()
  ex = executor(NStepAccumulator(3, 0.9, num_envs=E), SPACES)
  ex.execute("push", *push_args(seq, 0))
  before = ex.get_weights()
  args = [x[:2] for x in push_args(seq, 1)]
  with pytest.raises(
    SpaceError,
    match="component 'n_step', API method "
    "'push', argument 'states': n-step accumulation keeps 3 "
    "environment streams",
  ):
    ex.execute("push", *args)
  args = push_args(seq, 1)
  args[2] = args[2][:2]  # Only the rewards are short: the executor's own
  # check that arguments agree on the batch size refuses them.
  with pytest.raises(
    SpaceError,
    match="argument 'rewards': batch size 2 differs from the batch size 3 "
    "of argument 'states'",
  ):
    ex.execute("push", *args)
  for k, v in ex.get_weights().items():
    np.testing.assert_array_equal(v, before[k])


@pytest.mark.parametrize("executor", EXECUTORS)
def test_clear_drops_pending_steps(executor):
  seq = make_sequence()
  ex = executor(NStepAccumulator(3, 0.9, num_envs=E), SPACES)
  for t in (3, 4):  # Steps without episode ends: 2 pending per env.
    assert len(to_numpy(ex.execute("push", *push_args(seq, t)))["rewards"]) == 0
  assert int(to_numpy(ex.execute("clear"))) == 2 * E
  # After the clear, 2 more steps still emit nothing: no old step matures.
  for t in (3, 4):
    assert len(to_numpy(ex.execute("push", *push_args(seq, t)))["rewards"]) == 0
  out = to_numpy(ex.execute("push", *push_args(seq, 3)))
  np.testing.assert_array_equal(out["states"], seq["states"][3])


def test_bad_settings_are_build_errors():
  with pytest.raises(BuildError, match="need n_step >= 1, num_envs >= 1"):
    NStepAccumulator(0, 0.9, num_envs=2)
  with pytest.raises(BuildError, match="need n_step >= 1, num_envs >= 1"):
    NStepAccumulator(3, 0.9, num_envs=0)


def test_docstring_example_runs():
  result = doctest.testmod(n_step_module)
  assert result.attempted > 0 and result.failed == 0


class IntoMemory(Component):
  """Accumulator -> memory, as in the DQN agent."""

  def __init__(self, memory, n):
    super().__init__(scope="root")
    self.acc = NStepAccumulator(n, 0.9, num_envs=E)
    self.memory = memory

  @api
  def observe(
    self, states, actions, rewards, next_states, terminals, truncated
  ):
    return self.memory.insert(
      self.acc.push(states, actions, rewards, next_states, terminals, truncated)
    )

  @api
  def get_records(self, indices):
    return self.memory.get_records(indices)

  @api
  def sample(self, batch_size):
    return self.memory.sample(batch_size)


@pytest.mark.slow
@pytest.mark.parametrize("prioritized", [False, True])
@pytest.mark.parametrize("executor", EXECUTORS)
def test_memories_store_emitted_rows_of_any_count_including_zero(
  executor, prioritized
):
  seq = make_sequence()
  memory = (
    PrioritizedReplay(64, scope="memory")
    if prioritized
    else ReplayMemory(64, scope="memory")
  )
  ex = executor(
    IntoMemory(memory, 5),
    {
      **SPACES,
      "indices": IntBox(64, add_batch_rank=True),
      "batch_size": IntBox(9, low=1),
    },
  )
  want = reference(seq, 5, 0.9)
  sizes = []
  for t in range(T):
    sizes.append(int(to_numpy(ex.execute("observe", *push_args(seq, t)))))
  counts = [len(w["rewards"]) for w in want]
  assert 0 in counts and len(set(counts)) > 2  # 0 and varying rows.
  np.testing.assert_array_equal(sizes, np.cumsum(counts))
  stored = to_numpy(
    ex.execute("get_records", np.arange(sizes[-1], dtype=np.int32))
  )
  for k in KEYS:
    np.testing.assert_allclose(
      stored[k],
      np.concatenate([w[k] for w in want if len(w[k])]),
      rtol=1e-6,
      err_msg=k,
    )
  if prioritized:
    # Every stored row got the initial priority 1 (a 0-row insert adds no
    # mass and no phantom leaf).
    weights = ex.get_weights()
    total = weights["root/memory/sum_tree"][1]
    np.testing.assert_allclose(total, sizes[-1], rtol=1e-6)
  out = to_numpy(ex.execute("sample", 8))
  assert (out["indices"] < sizes[-1]).all()
