"""EpsilonGreedy: exploration statistics, the greedy path, the step counter
and the schedule, parity where deterministic, bad input."""

import doctest

import numpy as np
import pytest

from ingraph_rl.components.explorations import (
  Constant,
  EpsilonGreedy,
  LinearDecay,
)
from ingraph_rl.core import Component, api
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.executors.torch import TorchExecutor
from ingraph_rl.spaces import BoolBox, FloatBox, IntBox
from ingraph_rl.testing import assert_parity
from ingraph_rl.testing.component_test import to_numpy

EXECUTORS = [TFExecutor, TorchExecutor]
A = 4
SPACES = {"q_values": FloatBox((A,), add_batch_rank=True), "explore": BoolBox()}


def _q(n, seed):
  return np.random.default_rng(seed).standard_normal((n, A)).astype(np.float32)


def _timestep(ex):
  return int(ex.get_weights()["epsilon_greedy/timestep"])


def _act(ex, q, explore):
  out = to_numpy(ex.execute("get_action", q, explore))
  return out["action"], float(out["epsilon"])


@pytest.mark.parametrize("executor", EXECUTORS)
def test_per_row_rates_cycle_over_the_rows(executor):
  """Rates (0, 1, 0.5): rows 0, 3, 6, ... are always greedy, rows 1, 4, ...
  explore always (non-greedy 3/4 of the time) and rows 2, 5, ... half the
  time (3/8); "epsilon" is the rate vector."""
  rates = (0.0, 1.0, 0.5)
  ex = executor(EpsilonGreedy(A, Constant(rates), seed=3), SPACES)
  q = _q(6000, 0)
  q[:, 0] = q.max(1) + 1.0
  out = to_numpy(ex.execute("get_action", q, True))
  np.testing.assert_allclose(out["epsilon"], rates)
  non_greedy = (out["action"] != 0).reshape(-1, 3).mean(0)
  assert non_greedy[0] == 0.0
  for got, p in zip(non_greedy[1:], (0.75, 0.375)):
    assert abs(got - p) < 5 * np.sqrt(p * (1 - p) / 2000)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_equal_per_row_rates_act_as_one_rate(executor):
  """The same draws: a vector of k equal rates picks exactly the actions of
  the scalar rate, on a batch of any size (rank-2 leading dims too)."""
  spaces = {
    "q_values": FloatBox((A,), add_batch_rank=True, add_time_rank=True),
    "explore": BoolBox(),
  }
  q = _q(35, 1).reshape(5, 7, A)
  scalar = executor(EpsilonGreedy(A, Constant(0.3), seed=5), spaces)
  vector = executor(EpsilonGreedy(A, Constant((0.3,) * 4), seed=5), spaces)
  for _ in range(3):
    want = to_numpy(scalar.execute("get_action", q, True))["action"]
    got = to_numpy(vector.execute("get_action", q, True))["action"]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_non_greedy_fraction_is_epsilon_times_other_actions(executor):
  eps, n, calls = 0.3, 5000, 4
  ex = executor(EpsilonGreedy(A, Constant(eps), seed=7), SPACES)
  counts = np.zeros(A)
  non_greedy = 0
  for i in range(calls):
    # Action 0 is always greedy, so the action counts show the random part.
    q = _q(n, i)
    q[:, 0] = q.max(1) + 1.0
    action, epsilon = _act(ex, q, True)
    assert epsilon == pytest.approx(eps)
    assert action.dtype == np.int64 and action.shape == (n,)
    non_greedy += (action != 0).sum()
    counts += np.bincount(action, minlength=A)
  total = n * calls
  p = eps * (1 - 1 / A)
  # 5 binomial standard deviations.
  assert abs(non_greedy / total - p) < 5 * np.sqrt(p * (1 - p) / total)
  # Random actions are uniform over all actions (greedy one included).
  probs = np.full(A, eps / A)
  probs[0] += 1 - eps
  chi2 = ((counts - total * probs) ** 2 / (total * probs)).sum()
  assert chi2 < 16.27  # 99.9% quantile of chi2 with 3 degrees of freedom.


@pytest.mark.parametrize("executor", EXECUTORS)
def test_explore_false_is_greedy_and_keeps_the_step(executor):
  ex = executor(EpsilonGreedy(A, LinearDecay(1.0, 0.0, steps=10)), SPACES)
  for i in range(3):
    q = _q(64, i)
    action, epsilon = _act(ex, q, False)
    np.testing.assert_array_equal(action, q.argmax(1))
    assert epsilon == 1.0  # The schedule at step 0 (the step stays).
    assert _timestep(ex) == 0
  # Epsilon 1 when exploring: many rows leave the argmax.
  q = _q(64, 9)
  action, _ = _act(ex, q, True)
  assert (action != q.argmax(1)).sum() > 20
  assert _timestep(ex) == 1


@pytest.mark.parametrize("executor", EXECUTORS)
def test_step_advances_per_call_and_epsilon_follows_the_schedule(executor):
  ex = executor(
    EpsilonGreedy(A, LinearDecay(1.0, 0.0, steps=4, begin=1)), SPACES
  )
  # Steps 0..6 used by the calls: 1.0 up to step 1, then -0.25 per step.
  expected = [1.0, 1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
  got = []
  for i, eps in enumerate(expected):
    q = _q(256, i)
    action, epsilon = _act(ex, q, True)
    got.append(epsilon)
    assert _timestep(ex) == i + 1
    if eps == 0.0:
      np.testing.assert_array_equal(action, q.argmax(1))
  np.testing.assert_allclose(got, expected, atol=1e-7)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_default_explore_without_a_space_always_explores(executor):
  ex = executor(
    EpsilonGreedy(A, LinearDecay(0.5, 0.1, steps=2)),
    {"q_values": SPACES["q_values"]},
  )
  epsilons = [
    float(to_numpy(ex.execute("get_action", _q(8, i))["epsilon"]))
    for i in range(3)
  ]
  np.testing.assert_allclose(epsilons, [0.5, 0.3, 0.1], atol=1e-7)
  assert _timestep(ex) == 3


def test_action_space_is_bounded():
  ex = TFExecutor(EpsilonGreedy(A, 0.1), SPACES)
  out = ex.apis["get_action"].output_space
  assert out["action"] == IntBox(A, dtype=np.int64, add_batch_rank=True)
  assert out["epsilon"] == FloatBox()


def test_parity_when_not_exploring():
  qs = [_q(32, i) for i in range(3)]
  assert_parity(
    EpsilonGreedy(A, LinearDecay(0.9, 0.1, steps=3)),
    SPACES,
    [("get_action", [q, False]) for q in qs],
  )


def test_parity_of_schedule_and_step_while_exploring():
  # Random actions differ across backends; epsilon, the step counter and
  # the greedy actions afterwards do not.
  results = []
  for executor in EXECUTORS:
    ex = executor(EpsilonGreedy(A, LinearDecay(0.9, 0.1, steps=3)), SPACES)
    eps = [_act(ex, _q(16, i), True)[1] for i in range(5)]
    action, last = _act(ex, _q(16, 5), False)
    results.append((eps, _timestep(ex), action, last))
  (e1, t1, a1, l1), (e2, t2, a2, l2) = results
  np.testing.assert_allclose(e1, e2, rtol=1e-6)
  assert t1 == t2 == 5 and l1 == l2
  np.testing.assert_array_equal(a1, a2)


# --- bad input ----------------------------------------------------------------


@pytest.mark.parametrize(
  "bad",
  [
    np.zeros((8, A), np.int32),  # Wrong dtype.
    np.zeros((8, A), np.float64),  # Wrong float dtype.
    np.zeros((8,), np.float32),  # Missing the action axis.
    np.zeros((8, A, 1), np.float32),  # Rank too high.
    np.zeros((8, A + 1), np.float32),  # Wrong number of actions.
  ],
)
@pytest.mark.parametrize("executor", EXECUTORS)
def test_bad_q_values_are_a_space_error(executor, bad):
  ex = executor(EpsilonGreedy(A, 0.1), SPACES)
  with pytest.raises(SpaceError) as e:
    ex.execute("get_action", bad, True)
  assert (e.value.component, e.value.api, e.value.argument) == (
    "epsilon_greedy",
    "get_action",
    "q_values",
  )
  assert _timestep(ex) == 0


@pytest.mark.parametrize(
  "q_space",
  [
    IntBox(10, shape=(A,), add_batch_rank=True),  # Not floats.
    FloatBox((A, 2), add_batch_rank=True),  # Per-item rank 2.
    FloatBox((A + 1,), add_batch_rank=True),  # Not num_actions.
  ],
)
@pytest.mark.parametrize("executor", EXECUTORS)
def test_bad_q_value_spaces_are_a_space_error(executor, q_space):
  with pytest.raises(SpaceError) as e:
    executor(
      EpsilonGreedy(A, 0.1, scope="explorer"), {**SPACES, "q_values": q_space}
    )
  assert (e.value.component, e.value.api, e.value.argument) == (
    "explorer",
    "get_action",
    "q_values",
  )


@pytest.mark.parametrize("executor", EXECUTORS)
def test_batched_explore_space_is_a_space_error(executor):
  with pytest.raises(SpaceError) as e:
    executor(
      EpsilonGreedy(A, 0.1), {**SPACES, "explore": BoolBox(add_batch_rank=True)}
    )
  assert (e.value.api, e.value.argument) == ("get_action", "explore")


def test_docstring_examples_run():
  from ingraph_rl.components.explorations import epsilon_greedy, schedules

  for module in (epsilon_greedy, schedules):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 3 and result.failed == 0, module.__name__


class HeldThenAdvanced(Component):
  """act(q): one held call, then one advancing call, on one schedule step
  (a loop acting on a vector step in two parts)."""

  def __init__(self, schedule):
    super().__init__(scope="held")
    self.exploration = EpsilonGreedy(A, schedule, seed=5)

  @api
  def act(self, q_values):
    held = self.exploration.get_action(q_values, True, advance=False)
    moved = self.exploration.get_action(q_values, True)
    return {"held": held["epsilon"], "moved": moved["epsilon"]}


@pytest.mark.parametrize("executor", EXECUTORS)
def test_held_calls_share_the_schedule_step_of_the_advancing_one(executor):
  ex = executor(
    HeldThenAdvanced(LinearDecay(1.0, 0.0, steps=4)),
    {"q_values": SPACES["q_values"]},
  )
  for i, eps in enumerate([1.0, 0.75, 0.5, 0.25, 0.0]):
    out = to_numpy(ex.execute("act", _q(8, i)))
    assert float(out["held"]) == float(out["moved"]) == pytest.approx(eps)
    assert int(ex.get_weights()["held/epsilon_greedy/timestep"]) == i + 1


def test_advance_must_be_a_python_bool():
  class Bad(HeldThenAdvanced):
    @api
    def act(self, q_values):
      return self.exploration.get_action(q_values, True, advance=1)

  with pytest.raises(BuildError, match="advance must be a Python bool"):
    TFExecutor(
      Bad(LinearDecay(1.0, 0.0, steps=4)), {"q_values": SPACES["q_values"]}
    )
