"""The callable form: MultiStep, SubsamplingStep, ClippedStep and
Synchronization, TF vs torch and against NumPy."""

import numpy as np
import pytest
import tensorflow as tf
import torch

from ingraph_rl.components.explorations import LinearDecay
from ingraph_rl.components.networks import NeuralNetwork
from ingraph_rl.components.optimizers import (
  Adam,
  ClippedStep,
  GradientDescent,
  MultiStep,
  SubsamplingStep,
  Synchronization,
)
from ingraph_rl.core import Component, api, graph_fn, inline
from ingraph_rl.errors import BuildError
from ingraph_rl.spaces import FloatBox, IntBox
from ingraph_rl.testing import ComponentTest

N = 10
SPACES = {
  "x": FloatBox((3,), add_batch_rank=True),
  "y": FloatBox(add_batch_rank=True),
}
X = np.random.RandomState(0).randn(N, 3).astype(np.float32)
Y = np.random.RandomState(1).randn(N).astype(np.float32)


class LossOwner(Component):
  """Its `loss` API is inlined only (not a root API)."""

  @classmethod
  def internal_apis(cls):
    return super().internal_apis() | {"loss"}


class Regression(LossOwner):
  """tanh MLP, squared loss as a loss API of one nest argument."""

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
  def loss(self, batch):
    return self._graph_fn_loss(self.net.call(batch["x"]), batch["y"])

  @api
  def update(self, x, y):
    return self.optimizer.minimize(
      inline(self.loss), self.net.variables(), {"x": x, "y": y}
    )

  @api
  def predict(self, x):
    # The inlined loss replays the network: a root API makes its variables.
    return self.net.call(x)

  @graph_fn
  def _graph_fn_loss(self, pred, y):
    err = tf.squeeze(pred, -1) - y
    return {"loss": tf.reduce_mean(err**2), "max_err": tf.reduce_max(err)}

  @_graph_fn_loss.torch
  def _graph_fn_loss(self, pred, y):
    err = pred.squeeze(-1) - y
    return {"loss": (err**2).mean(), "max_err": err.max()}


def _pair(optimizer):
  component = Regression(optimizer)
  tests = [ComponentTest(component, SPACES, b) for b in ("tf", "torch")]
  tests[1].set_weights(tests[0].get_weights())
  return tests


def _assert_same_weights(tests, rtol=1e-4, atol=1e-6):
  a, b = (t.get_weights() for t in tests)
  assert sorted(a) == sorted(b)
  for key in a:
    np.testing.assert_allclose(
      b[key], a[key], rtol=rtol, atol=atol, err_msg=key
    )


PPO_LIKE = {
  "adam": lambda: Adam(0.01),
  "multi_adam": lambda: MultiStep(Adam(0.01), 3),
  "ppo": lambda: MultiStep(
    SubsamplingStep(
      Adam(LinearDecay(0.02, 0.0, 40, scope="lr"), clip_global_norm=0.5),
      num_minibatches=3,
    ),
    num_steps=4,
  ),
  "clipped": lambda: ClippedStep(GradientDescent(0.5), clip_value=0.01),
  "clipped_norm": lambda: ClippedStep(
    MultiStep(GradientDescent(0.1), 2), clip_norm=0.05
  ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PPO_LIKE))
def test_tf_and_torch_agree_update_by_update(name):
  tests = _pair(PPO_LIKE[name]())
  losses = []
  for _ in range(3):
    outs = [t.test("update", X, Y) for t in tests]
    assert sorted(outs[0]) == sorted(outs[1])
    for k in outs[0]:
      np.testing.assert_allclose(outs[1][k], outs[0][k], rtol=1e-4, err_msg=k)
    losses.append(float(outs[0]["loss"]))
    _assert_same_weights(tests)
  assert losses[-1] < losses[0]


def test_ppo_composition_takes_epochs_times_minibatches_adam_steps():
  t = ComponentTest(Regression(PPO_LIKE["ppo"]()), SPACES)
  out = t.test("update", X, Y)
  assert int(out["steps"]) == 4
  assert sorted(out) == ["grad_norm", "loss", "max_err", "steps"]
  w = t.get_weights()
  assert int(w["reg/multi_step/subsampling_step/adam/iterations"]) == 12
  assert int(w["reg/multi_step/subsampling_step/draws"]) == 4


def test_minimize_as_one_step_equals_step_with_a_loss_tensor():
  """Adam.minimize(loss_fn) is the same update as Adam.step(loss)."""

  class ByTensor(Regression):
    @api
    def update(self, x, y):
      out = self.loss({"x": x, "y": y})
      return self.optimizer.step(out["loss"], self.net.variables())

  a = ComponentTest(Regression(Adam(0.05)), SPACES)
  b = ComponentTest(ByTensor(Adam(0.05)), SPACES)
  b.set_weights(a.get_weights())
  for _ in range(3):
    ga = a.test("update", X, Y)["grad_norm"]
    gb = b.test("update", X, Y)["grad_norm"]
    np.testing.assert_allclose(ga, gb, rtol=1e-6)
  _assert_same_weights([a, b], rtol=1e-6)


class Visits(LossOwner):
  """A loss that records which samples each evaluation saw: row `calls`
  of `seen` gets a 1 for each index in the minibatch."""

  def __init__(self, optimizer, rows):
    super().__init__(scope="visits")
    self.optimizer = optimizer
    self.rows = rows

  def create_variables(self, input_spaces):
    self.w = self.add_variable("w", (1,), initializer="ones")
    self.calls = self.add_variable("calls", (), np.int64, trainable=False)
    self.seen = self.add_variable("seen", (self.rows, N), trainable=False)

  variable_args = ()

  @api
  def loss(self, batch):
    return self._graph_fn_loss(batch)

  @api
  def update(self, index):
    return self.optimizer.minimize(
      inline(self.loss), self._graph_fn_vars(), {"index": index}
    )

  @graph_fn
  def _graph_fn_vars(self):
    return {"w": self.w}

  @_graph_fn_vars.torch
  def _graph_fn_vars(self):
    return {"w": self.w}

  @graph_fn
  def _graph_fn_loss(self, batch):
    row = self.calls.assign_add(1) - 1
    idx = tf.stack([tf.fill(tf.shape(batch["index"]), row), batch["index"]], 1)
    self.seen.scatter_nd_add(idx, tf.ones(tf.shape(batch["index"])))
    return {"loss": tf.reduce_sum(self.w**2)}

  @_graph_fn_loss.torch
  def _graph_fn_loss(self, batch):
    with torch.no_grad():
      self.seen[int(self.calls), batch["index"]] += 1.0
      self.calls += 1
    return {"loss": (self.w**2).sum()}


def _visits(backend, epochs=3, minibatches=4):
  """seen[epoch, minibatch, sample] of one MultiStep(SubsamplingStep) call."""
  opt = MultiStep(SubsamplingStep(GradientDescent(0.1), minibatches), epochs)
  rows = epochs * minibatches
  # Room for the torch build's sample passes (reset after them).
  t = ComponentTest(
    Visits(opt, 4 * rows),
    {"index": IntBox(N, dtype=np.int64, add_batch_rank=True)},
    backend,
  )
  t.test("update", np.arange(N, dtype=np.int64))
  seen = t.get_weights()["visits/seen"]
  assert seen[rows:].sum() == 0
  return seen[:rows].reshape(epochs, minibatches, N)


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_every_sample_once_per_epoch_in_a_fresh_order(backend):
  epochs = 3
  seen = _visits(backend, epochs, 4)
  # Every sample exactly once per epoch; minibatch sizes 10 / 4 -> 2 or 3.
  np.testing.assert_array_equal(seen.sum(1), np.ones((epochs, N)))
  assert set(seen.sum(2).ravel()) == {2.0, 3.0}
  # A fresh shuffle each epoch.
  parts = [tuple(np.argmax(seen[e], 0)) for e in range(epochs)]
  assert len(set(parts)) == epochs


def test_tf_and_torch_draw_the_same_minibatches():
  np.testing.assert_array_equal(_visits("tf"), _visits("torch"))


class KLStop(LossOwner):
  """loss = (w - 3)^2; "approx_kl" = w, so the early stop fires once w
  passes a threshold."""

  def __init__(self, optimizer):
    super().__init__(scope="kl_stop")
    self.optimizer = optimizer

  variable_args = ()

  def create_variables(self, input_spaces):
    self.w = self.add_variable("w", (), initializer="zeros")

  @api
  def loss(self, batch):
    return self._graph_fn_loss(batch)

  @api
  def update(self, x):
    return self.optimizer.minimize(
      inline(self.loss), self._graph_fn_vars(), {"x": x}
    )

  @graph_fn
  def _graph_fn_vars(self):
    return {"w": self.w}

  @_graph_fn_vars.torch
  def _graph_fn_vars(self):
    return {"w": self.w}

  @graph_fn
  def _graph_fn_loss(self, batch):
    loss = (self.w - 3.0) ** 2 + 0.0 * tf.reduce_sum(batch["x"])
    return {"loss": loss, "approx_kl": tf.identity(self.w)}

  @_graph_fn_loss.torch
  def _graph_fn_loss(self, batch):
    loss = (self.w - 3.0) ** 2 + 0.0 * batch["x"].sum()
    return {"loss": loss, "approx_kl": self.w.detach().clone()}


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_multi_step_stops_early_inside_the_loop(backend):
  # GD with lr 0.25 on (w - 3)^2: w_k = 3 - 3 * 0.5^k = 1.5, 2.25, 2.625...
  # The stats of step k are taken before it: approx_kl = w_{k-1}.
  opt = MultiStep(GradientDescent(0.25), 10, "approx_kl", 2.0)
  t = ComponentTest(KLStop(opt), {"x": FloatBox(add_batch_rank=True)}, backend)
  out = t.test("update", np.zeros(2, np.float32))
  # Steps see w = 0, 1.5, 2.25 (> 2.0: stop after that third step).
  assert int(out["steps"]) == 3
  np.testing.assert_allclose(out["approx_kl"], 2.25)
  np.testing.assert_allclose(t.get_weights()["kl_stop/w"], 2.625)


def test_stop_key_must_be_a_stat():
  opt = MultiStep(GradientDescent(0.25), 2, "kl", 2.0)
  with pytest.raises(BuildError, match="stop_key 'kl'"):
    ComponentTest(KLStop(opt), {"x": FloatBox(add_batch_rank=True)})


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_clipped_step_matches_numpy(backend):
  opt = ClippedStep(GradientDescent(0.25), clip_norm=0.6)
  t = ComponentTest(KLStop(opt), {"x": FloatBox(add_batch_rank=True)}, backend)
  out = t.test("update", np.zeros(2, np.float32))
  # GD's step: -0.25 * 2 * (0 - 3) = 1.5, clipped to norm 0.6.
  np.testing.assert_allclose(out["step_norm"], 1.5, rtol=1e-6)
  np.testing.assert_allclose(t.get_weights()["kl_stop/w"], 0.6, rtol=1e-6)


class Pair(Component):
  def __init__(self, sync):
    super().__init__(scope="pair")
    self.sync = sync

  variable_args = ()

  def create_variables(self, input_spaces):
    self.online = self.add_variable("online", (2,), initializer="ones")
    self.target = self.add_variable("target", (2,), initializer="zeros")

  @api
  def update(self, x):
    return self.sync.sync(*self._graph_fn_vars(x))

  @graph_fn(returns=2)
  def _graph_fn_vars(self, x):
    self.online.assign_add(x)
    return {"v": self.target}, {"v": self.online}

  @_graph_fn_vars.torch
  def _graph_fn_vars(self, x):
    with torch.no_grad():
      self.online += x
    return {"v": self.target}, {"v": self.online}


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_synchronization_every_n_with_polyak_averaging(backend):
  t = ComponentTest(
    Pair(Synchronization(sync_every=2, tau=0.5)), {"x": FloatBox((2,))}, backend
  )
  online, target = np.ones(2), np.zeros(2)
  for k in range(1, 6):
    x = np.array([k, -k], np.float32)
    out = t.test("update", x)
    online = online + x
    if k % 2 == 0:
      target = 0.5 * online + 0.5 * target
    assert bool(out["synced"]) == (k % 2 == 0)
    np.testing.assert_allclose(t.get_weights()["pair/target"], target)


def test_loss_fn_must_be_an_inline_api_of_one_argument():
  class Wrong(Regression):
    @api
    def update(self, x, y):
      return self.optimizer.minimize(
        self._graph_fn_loss(self.net.call(x), y), self.net.variables(), {"x": x}
      )

  with pytest.raises(BuildError, match="core.inline"):
    ComponentTest(Wrong(Adam(0.1)), SPACES)


def test_loss_outputs_may_not_reuse_stats_names():
  class Clash(Regression):
    @graph_fn
    def _graph_fn_loss(self, pred, y):
      return {"loss": tf.reduce_mean(pred), "grad_norm": tf.reduce_mean(y)}

  with pytest.raises(BuildError, match="grad_norm"):
    ComponentTest(Clash(Adam(0.1)), SPACES)


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_an_empty_batch_takes_no_step(backend):
  opt = MultiStep(SubsamplingStep(GradientDescent(0.25), 3), 2)
  t = ComponentTest(KLStop(opt), {"x": FloatBox(add_batch_rank=True)}, backend)
  out = t.test("update", np.zeros(0, np.float32))
  assert int(out["steps"]) == 2
  np.testing.assert_array_equal(out["loss"], 0.0)  # Zero stats.
  w = t.get_weights()
  assert w["kl_stop/w"] == 0.0
  assert (
    int(w["kl_stop/multi_step/subsampling_step/gradient_descent/iterations"])
    == 0
  )
