"""Optimizers: TF vs torch executors, against torch.optim on the same
gradients, and against NumPy references of TF's update rules."""

import numpy as np
import pytest
import tensorflow as tf
import torch

from ingraph_rl.components.networks import NeuralNetwork
from ingraph_rl.components.optimizers import Adam, GradientDescent, RMSProp
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import SpaceError
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing import ComponentTest

SPACES = {
  "x": FloatBox((3,), add_batch_rank=True),
  "y": FloatBox(add_batch_rank=True),
}
X = np.random.RandomState(0).randn(8, 3).astype(np.float32)
Y = np.random.RandomState(1).randn(8).astype(np.float32)


class Regression(Component):
  """tanh MLP with squared loss; `update` = forward + optimizer step."""

  def __init__(self, optimizer):
    super().__init__(scope="reg")
    self.net = NeuralNetwork(
      [
        {"type": "dense", "units": 5, "activation": "tanh"},
        {"type": "dense", "units": 1},
      ]
    )
    self.optimizer = optimizer

  @api
  def update(self, x, y):
    loss = self._graph_fn_loss(self.net.call(x), y)
    stats = self.optimizer.step(loss, self.net.variables())
    return {"loss": loss, "grad_norm": stats["grad_norm"]}

  @api
  def train_step(self):
    return self.optimizer.get_iterations()

  @graph_fn
  def _graph_fn_loss(self, pred, y):
    return tf.reduce_mean((tf.squeeze(pred, -1) - y) ** 2)

  @_graph_fn_loss.torch
  def _graph_fn_loss(self, pred, y):
    return ((pred.squeeze(-1) - y) ** 2).mean()


OPTIMIZERS = {
  "gd": lambda: GradientDescent(0.1),
  "adam": lambda: Adam(0.01),
  "rmsprop_impala": lambda: RMSProp(
    0.01, decay=0.99, momentum=0.0, epsilon=0.1
  ),
  "rmsprop_momentum_clip": lambda: RMSProp(
    0.01, decay=0.9, momentum=0.9, clip_global_norm=0.5
  ),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_tf_and_torch_executors_agree_step_by_step(name):
  calls = [("update", [X, Y])] * 4
  tests = [
    ComponentTest(Regression(OPTIMIZERS[name]()), SPACES, b)
    for b in ("tf", "torch")
  ]
  tests[1].set_weights(tests[0].get_weights())
  losses = []
  for call in calls:
    outs = [t.test(*call[:1], *call[1]) for t in tests]
    np.testing.assert_allclose(outs[1]["loss"], outs[0]["loss"], rtol=1e-5)
    np.testing.assert_allclose(
      outs[1]["grad_norm"], outs[0]["grad_norm"], rtol=1e-5
    )
    losses.append(float(outs[0]["loss"]))
  assert losses[-1] < losses[0]  # It trains.
  assert [int(t.test("train_step")) for t in tests] == [4, 4]
  a, b = (t.get_weights() for t in tests)
  for key in a:  # Variables and slots, TF layout.
    np.testing.assert_allclose(
      b[key], a[key], rtol=1e-4, atol=1e-6, err_msg=key
    )


def _torch_replica(weights):
  """The same MLP as torch leaf tensors (TF layout), for torch.optim."""
  params = {
    k: torch.tensor(v, requires_grad=True)
    for k, v in weights.items()
    if "/network/" in k
  }

  def loss():
    h = torch.tanh(
      torch.from_numpy(X) @ params["reg/network/dense_0/kernel"]
      + params["reg/network/dense_0/bias"]
    )
    pred = (
      h @ params["reg/network/dense_1/kernel"]
      + params["reg/network/dense_1/bias"]
    )
    return ((pred.squeeze(-1) - torch.from_numpy(Y)) ** 2).mean()

  return params, loss


@pytest.mark.parametrize(
  "ours,theirs",
  [
    (lambda: GradientDescent(0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
    (
      lambda: Adam(0.01, epsilon=1e-8),
      lambda p: torch.optim.Adam(p, lr=0.01, eps=1e-8),
    ),
    # Same rule as torch's when epsilon is negligible (TF adds it inside
    # the square root, torch outside).
    (
      lambda: RMSProp(0.01, decay=0.9, momentum=0.5, epsilon=1e-12),
      lambda p: torch.optim.RMSprop(
        p, lr=0.01, alpha=0.9, momentum=0.5, eps=1e-12
      ),
    ),
  ],
  ids=["sgd", "adam", "rmsprop"],
)
@pytest.mark.slow
def test_matches_torch_optim_on_the_same_gradients(ours, theirs):
  ex = TFExecutor(Regression(ours()), SPACES)
  params, loss_fn = _torch_replica(ex.get_weights())
  opt = theirs(list(params.values()))
  for _ in range(5):
    ex.execute("update", X, Y)
    opt.zero_grad()
    loss_fn().backward()
    opt.step()
  w = ex.get_weights()
  for k, p in params.items():
    np.testing.assert_allclose(
      w[k], p.detach().numpy(), rtol=2e-5, atol=1e-6, err_msg=k
    )


class Params(Component):
  """One used and one unused variable; loss = sum(w * c), so the gradient
  is exactly c, every step."""

  def __init__(self, c):
    super().__init__(scope="params")
    self.c = np.asarray(c, np.float32)

  def create_variables(self, input_spaces):
    self.w = self.add_variable("w", self.c.shape, initializer="ones")
    self.unused = self.add_variable("unused", (2,), initializer="ones")

  @api
  def loss(self, dummy):
    return self._graph_fn_loss(dummy)

  @graph_fn
  def _graph_fn_loss(self, dummy):
    return tf.reduce_sum(self.w * self.c) + 0.0 * tf.reduce_sum(dummy)

  @_graph_fn_loss.torch
  def _graph_fn_loss(self, dummy):
    return (self.w * torch.from_numpy(self.c)).sum() + 0.0 * dummy.sum()


class Linear(Component):
  def __init__(self, optimizer, c):
    super().__init__(scope="lin")
    self.params = Params(c)
    self.optimizer = optimizer

  @api
  def update(self, dummy):
    return self.optimizer.step(self.params.loss(dummy), self.params.variables())


def _run_linear(optimizer, c, steps, backend):
  t = ComponentTest(Linear(optimizer, c), {"dummy": FloatBox((1,))}, backend)
  outs = [t.test("update", np.zeros(1, np.float32)) for _ in range(steps)]
  return t.get_weights(), outs


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_rmsprop_impala_settings_match_numpy(backend):
  c = np.array([0.5, -2.0, 3.0], np.float32)
  lr, decay, eps = 0.00048, 0.99, 0.1
  w, _ = _run_linear(
    RMSProp(lr, decay=decay, momentum=0.0, epsilon=eps), c, 6, backend
  )
  ref, ms = np.ones(3), np.zeros(3)
  for _ in range(6):
    ms = decay * ms + (1 - decay) * c**2
    ref = ref - lr * c / np.sqrt(ms + eps)  # epsilon inside the sqrt
  np.testing.assert_allclose(w["lin/params/w"], ref, rtol=1e-5)
  np.testing.assert_allclose(w["lin/params/unused"], [1, 1])  # No gradient.
  assert int(w["lin/rmsprop/iterations"]) == 6


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_adam_matches_numpy_tf_rule(backend):
  c = np.array([1.0, -0.1], np.float32)
  lr, b1, b2, eps = 0.1, 0.9, 0.999, 1e-7
  w, _ = _run_linear(Adam(lr, b1, b2, eps), c, 4, backend)
  ref, m, v = np.ones(2), np.zeros(2), np.zeros(2)
  for t in range(1, 5):
    m = b1 * m + (1 - b1) * c
    v = b2 * v + (1 - b2) * c**2
    ref = ref - lr * np.sqrt(1 - b2**t) / (1 - b1**t) * m / (np.sqrt(v) + eps)
  np.testing.assert_allclose(w["lin/params/w"], ref, rtol=1e-5)


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_global_norm_clipping(backend):
  c = np.array([3.0, 4.0], np.float32)  # Norm 5.
  w, outs = _run_linear(
    GradientDescent(0.1, clip_global_norm=1.0), c, 1, backend
  )
  np.testing.assert_allclose(outs[0]["grad_norm"], 5.0, rtol=1e-6)
  np.testing.assert_allclose(w["lin/params/w"], 1 - 0.1 * c / 5.0, rtol=1e-6)
  w, _ = _run_linear(GradientDescent(0.1, clip_global_norm=10.0), c, 1, backend)
  np.testing.assert_allclose(w["lin/params/w"], 1 - 0.1 * c, rtol=1e-6)


def test_variables_must_come_from_a_variables_api():
  class Wrong(Component):
    def __init__(self):
      super().__init__(scope="wrong")
      self.optimizer = GradientDescent(0.1)

    @api
    def update(self, loss, params):
      return self.optimizer.step(loss, params)

  with pytest.raises(SpaceError) as e:
    TFExecutor(Wrong(), {"loss": FloatBox(), "params": FloatBox((3,))})
  assert "component 'wrong/gradient_descent'" in str(e.value)
  assert "argument 'variables'" in str(e.value)
  assert "expected: Dict" in str(e.value)


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_learning_rate_schedule_is_read_at_each_step(backend):
  from ingraph_rl.components.explorations import LinearDecay

  c = np.array([1.0, -2.0], np.float32)
  schedule = LinearDecay(0.4, 0.1, steps=3, scope="lr")
  w, _ = _run_linear(GradientDescent(schedule), c, 4, backend)
  # Steps 0..3 of the schedule: 0.4, 0.3, 0.2, 0.1.
  np.testing.assert_allclose(
    w["lin/params/w"], 1 - 1.0 * c, rtol=1e-5, atol=1e-6
  )
  w, _ = _run_linear(
    GradientDescent(LinearDecay(0.4, 0.1, steps=3, scope="lr")), c, 2, backend
  )
  np.testing.assert_allclose(w["lin/params/w"], 1 - 0.7 * c, rtol=1e-5)
