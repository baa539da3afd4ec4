"""SAC's critic and actor losses against NumPy (the SAC paper's soft
Bellman target with twin Qs, CleanRL's form), in both backends."""

import numpy as np
import pytest

from ingraph_rl.components.losses import SACLoss
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.executors.torch import TorchExecutor
from ingraph_rl.spaces import BoolBox, FloatBox

EXECUTORS = {"tf": TFExecutor, "torch": TorchExecutor}
GAMMA, B = 0.9, 7
NAMES = ("q1", "q2", "next_q1", "next_q2", "next_log_probs", "rewards")


@pytest.fixture(scope="module", params=sorted(EXECUTORS))
def executor(request):
  vec = FloatBox(add_batch_rank=True)
  spaces = {name: vec for name in NAMES + ("log_probs",)}
  spaces["terminals"] = BoolBox(add_batch_rank=True)
  spaces["alpha"] = FloatBox()
  return EXECUTORS[request.param](SACLoss(GAMMA), spaces)


def batch(seed=0):
  rng = np.random.default_rng(seed)
  out = {n: rng.normal(size=B).astype(np.float32) for n in NAMES}
  out["terminals"] = np.array([0, 1, 0, 0, 1, 0, 0], bool)
  return out


def numpy(x):
  return np.asarray(x.detach() if hasattr(x, "detach") else x)


def test_critic_loss_matches_numpy(executor):
  b, alpha = batch(), np.float32(0.3)
  out = executor.execute(
    "critic_loss",
    *[b[n] for n in NAMES[:-1]],
    b["rewards"],
    b["terminals"],
    alpha,
  )
  y = b["rewards"] + GAMMA * (1 - b["terminals"]) * (
    np.minimum(b["next_q1"], b["next_q2"]) - alpha * b["next_log_probs"]
  )
  qf1 = np.mean((b["q1"] - y) ** 2)
  qf2 = np.mean((b["q2"] - y) ** 2)
  np.testing.assert_allclose(numpy(out["targets"]), y, rtol=1e-5)
  np.testing.assert_allclose(numpy(out["qf1_loss"]), qf1, rtol=1e-5)
  np.testing.assert_allclose(numpy(out["qf2_loss"]), qf2, rtol=1e-5)
  np.testing.assert_allclose(numpy(out["loss"]), qf1 + qf2, rtol=1e-5)


def test_terminal_rows_do_not_bootstrap(executor):
  b = batch(1)
  b["terminals"][:] = True
  out = executor.execute(
    "critic_loss",
    *[b[n] for n in NAMES[:-1]],
    b["rewards"],
    b["terminals"],
    1.0,
  )
  np.testing.assert_allclose(numpy(out["targets"]), b["rewards"], rtol=1e-6)


def test_actor_loss_matches_numpy(executor):
  b, alpha = batch(2), np.float32(0.25)
  out = executor.execute(
    "actor_loss", b["next_log_probs"], b["q1"], b["q2"], alpha
  )
  expected = np.mean(alpha * b["next_log_probs"] - np.minimum(b["q1"], b["q2"]))
  np.testing.assert_allclose(numpy(out), expected, rtol=1e-5)
