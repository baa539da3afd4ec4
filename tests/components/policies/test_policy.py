"""Policy: a NumPy reference of logits, log-probs and values; TF vs torch."""

import numpy as np
import pytest

from ingraph_rl.components.policies import Policy
from ingraph_rl.errors import SpaceError
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing import ComponentTest, assert_parity

SPEC = [{"type": "dense", "units": 8, "activation": "tanh"}]
SPACES = {"states": FloatBox((5,), add_batch_rank=True)}
STATES = FloatBox((5,), add_batch_rank=True).sample(6, seed=0)


def log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def reference(w, states):
  h = np.tanh(
    states @ w["policy/network/dense_0/kernel"]
    + w["policy/network/dense_0/bias"]
  )
  logits = (
    h @ w["policy/action_adapter/kernel"] + w["policy/action_adapter/bias"]
  )
  value = h @ w["policy/value_head/kernel"] + w["policy/value_head/bias"]
  return logits, log_softmax(logits), value[:, 0]


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize("deterministic", [True, False])
def test_matches_numpy(backend, deterministic):
  t = ComponentTest(
    Policy(SPEC, 3, deterministic=deterministic), SPACES, backend
  )
  w = t.get_weights()
  w["policy/value_head/bias"] = np.array([0.5], np.float32)
  t.set_weights(w)
  out = t.test("get_action", STATES)
  logits, logp, value = reference(w, STATES)
  np.testing.assert_allclose(out["logits"], logits, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out["value"], value, rtol=1e-5, atol=1e-6)
  rows = np.arange(len(STATES))
  np.testing.assert_allclose(
    out["log_prob"], logp[rows, out["action"]], rtol=1e-5, atol=1e-6
  )
  if deterministic:
    np.testing.assert_array_equal(out["action"], logits.argmax(-1))
  assert set(out) == {"action", "logits", "log_prob", "value"}


def test_parity_deterministic():
  assert_parity(
    Policy(SPEC, 4, deterministic=True), SPACES, [("get_action", [STATES])]
  )


def test_no_value_head_means_no_value_key():
  out = ComponentTest(Policy(SPEC, 2, value_head=False), SPACES).test(
    "get_action", STATES
  )
  assert set(out) == {"action", "logits", "log_prob"}


def test_bad_states_are_named():
  ex = TFExecutor(Policy(SPEC, 2), SPACES)
  with pytest.raises(
    SpaceError,
    match="component 'policy', API method "
    "'get_action', argument 'states': shape mismatch",
  ):
    ex.execute("get_action", np.zeros((2, 4), np.float32))
