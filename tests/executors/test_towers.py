"""Device strategies: synchronous multi-tower updates give the update of one
tower on the whole batch; mistakes are named at build.

Here (the test process, whose TF runtime other tests may have started) the
towers share "/cpu:0"; `towers_on_logical_cpus.py` runs in a fresh process
with 4 logical CPUs: DQN and IMPALA equivalence with towers on distinct
devices, and the traced ops on every tower device.
"""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.agents.dqn import DQNBuilder, DQNConfig
from ingraph_rl.components.networks import NeuralNetwork
from ingraph_rl.components.optimizers import GradientDescent
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.executors.strategies import (
  DefaultStrategy,
  DeviceMapStrategy,
  MultiTowerStrategy,
)
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing.fresh_process import ROOT

HERE = pathlib.Path(__file__).resolve().parent
CPU0 = "/device:CPU:0"
OBS = FloatBox((4,))


class Regression(Component):
  """update(x, y): mean squared error of a dense layer, one SGD step;
  returns per-sample predictions too (merged by concatenation)."""

  def __init__(self):
    super().__init__(scope="regression")
    self.net = NeuralNetwork(
      [
        {"type": "dense", "units": 2, "activation": "tanh"},
        {"type": "dense", "units": 1},
      ]
    )
    self.optimizer = GradientDescent(0.5)

  @api
  def update(self, x, y):
    pred = self.net.call(x)
    loss = self._graph_fn_loss(pred, y)
    stats = self.optimizer.step(loss, self.net.variables())
    return {"loss": loss, "pred": pred, "grad_norm": stats["grad_norm"]}

  @api
  def predict(self, x):
    return self.net.call(x)

  @graph_fn
  def _graph_fn_loss(self, pred, y):
    return tf.reduce_mean(tf.square(pred[:, 0] - y))


REGRESSION_SPACES = {
  "x": FloatBox((3,), add_batch_rank=True),
  "y": FloatBox(add_batch_rank=True),
}


def regression(strategy=None, **kwargs):
  return TFExecutor(
    Regression(), REGRESSION_SPACES, seed=5, strategy=strategy, **kwargs
  )


def towers(num, **kwargs):
  return MultiTowerStrategy([CPU0] * num, **kwargs)


def float_weights(executor):
  return {
    k: v for k, v in executor.get_weights().items() if v.dtype.kind == "f"
  }


@pytest.mark.slow
@pytest.mark.parametrize("num_towers", [1, 2, 4])
def test_towers_on_the_api_arguments_match_one_tower(num_towers):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(8, 3)).astype(np.float32)
  y = rng.normal(size=8).astype(np.float32)
  plain = regression()
  split = regression(towers(num_towers, split_at=None))
  for _ in range(3):
    a, b = plain.execute("update", x, y), split.execute("update", x, y)
    np.testing.assert_allclose(b["loss"], a["loss"], rtol=1e-6)
    np.testing.assert_allclose(b["grad_norm"], a["grad_norm"], rtol=1e-5)
    # Per-sample outputs come back in batch order.
    np.testing.assert_allclose(b["pred"], a["pred"], rtol=1e-5, atol=1e-6)
  wa, wb = plain.get_weights(), split.get_weights()
  for k in wa:
    np.testing.assert_allclose(wb[k], wa[k], rtol=1e-5, atol=1e-6, err_msg=k)
  # One optimizer step per update, not one per tower.
  assert wb["regression/gradient_descent/iterations"] == 3
  # Other APIs are untouched.
  np.testing.assert_allclose(
    split.execute("predict", x), plain.execute("predict", x), rtol=1e-5
  )


def test_towers_are_traced_once_per_tower_and_apply_one_update():
  ex = regression(towers(2, split_at=None))
  graph = ex.function("update").get_concrete_function().graph
  names = [
    op.name
    for op in graph.get_operations()
    if op.type == "MatMul" and "gradient" not in op.name
  ]
  assert sorted(n.split("/")[0] for n in names) == [
    "tower0_regression_network_dense_0",
    "tower0_regression_network_dense_1",
    "tower1_regression_network_dense_0",
    "tower1_regression_network_dense_1",
  ]
  assigns = [
    op for op in graph.get_operations() if op.type == "AssignAddVariableOp"
  ]
  assert len(assigns) == 1  # The step count, once.


def test_uneven_batch_is_a_clear_error():
  ex = regression(towers(2, split_at=None))
  with pytest.raises(SpaceError, match="split evenly into 2 towers"):
    ex.execute("update", np.zeros((5, 3), np.float32), np.zeros(5, np.float32))
  # A static batch size that does not divide fails at build.
  config = DQNConfig(num_actions=2, batch_size=9, learning_starts=9)
  with pytest.raises(
    BuildError,
    match=r"has 9 rows .* 2 towers cannot "
    r"split evenly; use a batch size divisible by 2",
  ):
    DQNBuilder(config).make_agent(OBS).build(
      strategy=towers(2, split_at="dqn/memory")
    )


@pytest.mark.slow
def test_split_at_not_found_names_the_candidates():
  config = DQNConfig(num_actions=2, batch_size=8, learning_starts=8)
  with pytest.raises(BuildError) as e:
    DQNBuilder(config).make_agent(OBS).build(
      strategy=towers(2, split_at="dqn/nope")
    )
  msg = str(e.value)
  assert "API 'update': split_at 'dqn/nope' runs no graph function" in msg
  assert msg.endswith(
    "a batch that feeds the loss starts belong to ['dqn/memory']"
  )
  with pytest.raises(
    BuildError,
    match="no graph function of split_at "
    "'dqn/adam' feeds the optimizer step's loss",
  ):
    DQNBuilder(config).make_agent(OBS).build(
      strategy=towers(2, split_at="dqn/adam")
    )
  with pytest.raises(
    BuildError,
    match="split_at=None splits the API's arguments, but it takes none",
  ):
    DQNBuilder(config).make_agent(OBS).build(strategy=towers(2, split_at=None))


def test_api_without_optimizer_step_or_not_built_is_an_error():
  with pytest.raises(BuildError, match="API 'predict': no optimizer step"):
    regression(towers(2, split_at=None, apis=("predict",)))
  with pytest.raises(
    BuildError,
    match=r"no built root API \['learn'\] of "
    r"'regression'; built APIs: \['predict', 'update'\]",
  ):
    regression(towers(2, split_at=None, apis=("learn",)))


def test_bad_settings_are_errors():
  with pytest.raises(BuildError, match="loss_reduction must be one of"):
    towers(2, split_at=None, loss_reduction="first")
  with pytest.raises(BuildError, match=r"output_reductions\['a'\] must be"):
    towers(2, split_at=None, output_reductions={"a": "max"})
  with pytest.raises(BuildError, match="devices must be a non-empty list"):
    MultiTowerStrategy("/gpu:0", split_at=None)
  with pytest.raises(BuildError, match="either device_map or strategy"):
    regression(DefaultStrategy(), device_map={"regression": CPU0})


def test_device_map_is_a_strategy():
  ex = regression(device_map={"regression/network": CPU0})
  assert isinstance(ex.strategy, DeviceMapStrategy)
  assert ex.device_for(ex.root.net) == CPU0
  assert isinstance(regression().strategy, DefaultStrategy)


def test_output_reductions_pick_how_scalars_merge():
  # A summed loss: the merged loss is the sum of the tower sums, a "mean_*"
  # statistic the mean of the tower means.
  class Summed(Regression):
    @api
    def update(self, x, y):
      out = self._graph_fn_losses(self.net.call(x), y)
      self.optimizer.step(out["loss"], self.net.variables())
      return out

    @graph_fn
    def _graph_fn_losses(self, pred, y):
      err = tf.square(pred[:, 0] - y)
      return {
        "loss": tf.reduce_sum(err),
        "mean_err": tf.reduce_mean(err),
        "size": tf.size(y),
      }

  rng = np.random.default_rng(1)
  x = rng.normal(size=(6, 3)).astype(np.float32)
  y = rng.normal(size=6).astype(np.float32)
  plain = TFExecutor(Summed(), REGRESSION_SPACES, seed=5, api_names=["update"])
  split = TFExecutor(
    Summed(),
    REGRESSION_SPACES,
    seed=5,
    api_names=["update"],
    strategy=towers(
      3,
      split_at=None,
      loss_reduction="sum",
      output_reductions={"mean_*": "mean"},
    ),
  )
  a, b = plain.execute("update", x, y), split.execute("update", x, y)
  for k in ("loss", "mean_err", "size"):
    np.testing.assert_allclose(b[k], a[k], rtol=1e-5, err_msg=k)
  wa, wb = plain.get_weights(), split.get_weights()
  for k in wa:
    np.testing.assert_allclose(wb[k], wa[k], rtol=1e-5, atol=1e-6, err_msg=k)


# ~25 s: make test-all (make test's margin went to the Ape-X tests).
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_logical_cpu_towers_in_a_fresh_process():
  # Logical devices must be configured before TF starts: a fresh process
  # running the tests of towers_on_logical_cpus.py.
  env = dict(
    os.environ,
    PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
  )
  out = subprocess.run(
    [
      sys.executable,
      "-m",
      "pytest",
      "-q",
      "-p",
      "no:cacheprovider",
      str(HERE / "towers_on_logical_cpus.py"),
    ],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=570,
  )
  assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
  assert " passed" in out.stdout and "failed" not in out.stdout
