"""DQN loss against a NumPy reference of the Q-learning target, double-Q,
n-step discounting (constant or per sample), Huber loss and importance
weights; TF vs torch."""

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.components.losses import DQNLoss
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import SpaceError
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.spaces import BoolBox, FloatBox, IntBox
from ingraph_rl.testing import ComponentTest, assert_parity
from ingraph_rl.testing.references import numpy_dqn_loss

A = 4
SPACES = {
  "q_values": FloatBox((A,), add_batch_rank=True),
  "actions": IntBox(A, add_batch_rank=True),
  "rewards": FloatBox(add_batch_rank=True),
  "terminals": BoolBox(add_batch_rank=True),
  "next_q_target": FloatBox((A,), add_batch_rank=True),
  "next_q_online": FloatBox((A,), add_batch_rank=True),
  "importance_weights": FloatBox(low=0.0, high=1.0, add_batch_rank=True),
}
ORDER = [
  "q_values",
  "actions",
  "rewards",
  "terminals",
  "next_q_target",
  "next_q_online",
  "importance_weights",
]


def batch(seed, size=16):
  rng = np.random.default_rng(seed)
  b = {k: SPACES[k].sample(size, rng) for k in ORDER}
  b["q_values"] = (3 * b["q_values"]).astype(np.float32)  # Some |td| > 1.
  return [b[k] for k in ORDER]


CONFIGS = [
  dict(discount=0.99, n_step=1, double_q=True, huber_delta=1.0),
  dict(discount=0.9, n_step=3, double_q=False, huber_delta=1.0),
  dict(discount=0.97, n_step=5, double_q=True, huber_delta=None),
  dict(discount=0.5, n_step=2, double_q=False, huber_delta=0.3),
]


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_matches_numpy_reference(config, backend):
  t = ComponentTest(DQNLoss(**config), SPACES, backend)
  args = batch(0)
  out = t.test("loss", *args)
  loss, td = numpy_dqn_loss(*args, **config)
  np.testing.assert_allclose(out["loss"], loss, rtol=1e-5)
  np.testing.assert_allclose(out["td_errors"], td, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_parity(config):
  assert_parity(
    DQNLoss(**config), SPACES, [("loss", batch(1)), ("loss", batch(2, 3))]
  )


def test_double_q_changes_the_target_when_networks_disagree():
  q = np.zeros((1, 2), np.float32)
  args = [
    q,
    np.array([0], np.int32),
    np.zeros(1, np.float32),
    np.array([False]),
    np.array([[1.0, 5.0]], np.float32),
    np.array([[2.0, 0.0]], np.float32),
    np.ones(1, np.float32),
  ]
  spaces = {
    k: (
      s
      if k not in ("q_values", "next_q_target", "next_q_online")
      else FloatBox((2,), add_batch_rank=True)
    )
    for k, s in SPACES.items()
  }
  spaces["actions"] = IntBox(2, add_batch_rank=True)
  double = TFExecutor(DQNLoss(discount=1.0, huber_delta=None), spaces)
  single = TFExecutor(
    DQNLoss(discount=1.0, double_q=False, huber_delta=None), spaces
  )
  # Online picks action 0 -> target 1.0; max over target -> 5.0.
  assert float(double.execute("loss", *args)["td_errors"][0]) == 1.0
  assert float(single.execute("loss", *args)["td_errors"][0]) == 5.0


DISCOUNTED = {
  **SPACES,
  "discounts": FloatBox(low=0.0, high=1.0, add_batch_rank=True),
}


def batch_with_discounts(seed, size=16, discount=0.9, n_step=3):
  """Per-sample discount^m, m in 1..n_step (shortened at episode ends)."""
  m = np.random.default_rng(seed + 100).integers(1, n_step + 1, size)
  return batch(seed, size) + [(discount**m).astype(np.float32)]


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_per_sample_discounts_match_numpy_reference(config, backend):
  t = ComponentTest(DQNLoss(**config), DISCOUNTED, backend)
  args = batch_with_discounts(5)
  assert len(np.unique(args[-1])) == 3
  out = t.test("loss", *args)
  loss, td = numpy_dqn_loss(*args[:-1], **config, discounts=args[-1])
  np.testing.assert_allclose(out["loss"], loss, rtol=1e-5)
  np.testing.assert_allclose(out["td_errors"], td, rtol=1e-5, atol=1e-6)
  # The per-sample discounts are used, not the constant discount^n_step.
  _, td_const = numpy_dqn_loss(*args[:-1], **config)
  assert not np.allclose(out["td_errors"], td_const, rtol=1e-3)


def test_constant_per_sample_discounts_equal_the_default():
  config = CONFIGS[1]
  args = batch(6)
  const = np.full(16, config["discount"] ** config["n_step"], np.float32)
  with_d = TFExecutor(DQNLoss(**config), DISCOUNTED).execute(
    "loss", *args, const
  )
  without = TFExecutor(DQNLoss(**config), SPACES).execute("loss", *args)
  np.testing.assert_allclose(
    with_d["td_errors"].numpy(), without["td_errors"].numpy(), rtol=1e-6
  )


def test_parity_with_per_sample_discounts():
  assert_parity(
    DQNLoss(**CONFIGS[2]),
    DISCOUNTED,
    [("loss", batch_with_discounts(7)), ("loss", batch_with_discounts(8, 3))],
  )


class Differentiates(Component):
  """Gradient of the loss w.r.t. q_values and the target values."""

  def __init__(self):
    super().__init__(scope="root")
    self.dqn = DQNLoss(discount=0.9, huber_delta=None, double_q=False)

  @api
  def grads(
    self,
    q_values,
    actions,
    rewards,
    terminals,
    next_q_target,
    next_q_online,
    importance_weights,
  ):
    return self._graph_fn_grads(
      q_values,
      actions,
      rewards,
      terminals,
      next_q_target,
      next_q_online,
      importance_weights,
    )

  @graph_fn
  def _graph_fn_grads(self, *args):
    args = list(args)
    with tf.GradientTape(persistent=True) as tape:
      tape.watch(args[0])
      tape.watch(args[4])
      out = DQNLoss._graph_fn_loss.tf_body(self.dqn, *args)
    g_q, g_target = tape.gradient(out["loss"], [args[0], args[4]])
    return {
      "q": g_q,
      "target": tf.zeros_like(args[4]) if g_target is None else g_target,
    }


def test_no_gradient_flows_into_the_target():
  ex = TFExecutor(Differentiates(), SPACES)
  args = batch(3, 5)
  out = ex.execute("grads", *args)
  np.testing.assert_array_equal(out["target"].numpy(), 0.0)
  # d/dq 0.5 mean(w td^2) = -w td / B at the taken action.
  _, td = numpy_dqn_loss(
    *args, discount=0.9, n_step=1, double_q=False, huber_delta=None
  )
  expected = np.zeros_like(args[0])
  expected[np.arange(5), args[1]] = -args[6] * td / 5
  np.testing.assert_allclose(out["q"].numpy(), expected, rtol=1e-5, atol=1e-6)


def test_bad_input_is_named():
  ex = TFExecutor(DQNLoss(), SPACES)
  args = batch(4)
  args[1] = args[1].astype(np.float32)
  with pytest.raises(
    SpaceError,
    match="component 'dqn_loss', API method "
    "'loss', argument 'actions': dtype mismatch",
  ):
    ex.execute("loss", *args)
