"""Exported signatures check their inputs in the exported graph: a wrong
shape, rank or dtype of any input (LSTM state included), or a negative
`batch_size`, is refused with the library's message naming the signature,
the argument, and expected against received, in a fresh process that has
only TensorFlow; a good call still works there."""

import pytest

from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig
from ingraph_rl.export import export_policy
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing.fresh_process import run_fresh

# In `python -I` without ingraph_rl (`run_fresh`). Each case
# calls a signature and records the first line of what it raised.
PROBE = r"""
import json, sys
import numpy as np
import tensorflow as tf
sig = tf.saved_model.load(sys.argv[1]).signatures

def good(b=2):
  state = sig["get_initial_state"](batch_size=tf.constant(b))
  return dict(observation=tf.zeros([b, 4]), first=tf.ones([b], tf.bool),
              prev_reward=tf.zeros([b]), prev_action=tf.zeros([b], tf.int64),
              **state)

def act(**changes):
  return sig["action"](**dict(good(), **changes))

cases = {
  "obs_shape": lambda: act(observation=tf.zeros([2, 3])),
  "obs_rank": lambda: act(observation=tf.zeros([4])),
  "obs_dtype": lambda: act(observation=tf.zeros([2, 4], tf.float64)),
  "state_shape": lambda: act(state_h=tf.zeros([2, 7])),
  "first_rank": lambda: act(first=tf.ones([2, 1], tf.bool)),
  "batch_size": lambda: sig["get_initial_state"](batch_size=tf.constant(-1)),
}
out = {}
for name, call in cases.items():
  try:
    call()
    out[name] = "accepted"
  except Exception as e:
    out[name] = type(e).__name__ + ": " + str(e)
res = sig["action"](**good(3))
out["good"] = res["logits"].numpy().shape
print(json.dumps(out))
"""

EXPECTED = {
  # case: (argument, expected, received)
  "obs_shape": ("observation", "[None, 4]", "[2, 3]"),
  "obs_rank": ("observation", "[None, 4]", "[4]"),
  "state_shape": ("state_h", "[None, 8]", "[2, 7]"),
  "first_rank": ("first", "[None]", "[2, 1]"),
  "batch_size": ("batch_size", ">= 0", "-1"),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
  config = IMPALAConfig(num_actions=2, lstm_units=8, seed=3)
  builder = IMPALABuilder(config)
  obs = FloatBox((4,))
  weights = (
    builder.make_learner(obs, "sig_checks").build().execute("get_weights")
  )
  path = str(tmp_path_factory.mktemp("export") / "policy")
  export_policy(builder, obs, weights, path)
  return run_fresh(PROBE, path)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_bad_input_is_refused_with_a_clear_message(results, case):
  argument, expected, received = EXPECTED[case]
  message = results[case]
  assert message != "accepted"
  (first,) = [x for x in message.splitlines() if "[ingraph_rl check]" in x]
  signature = "get_initial_state" if case == "batch_size" else "action"
  assert f"signature `{signature}`" in first, first
  assert f"argument `{argument}`" in first, first
  assert f"expected {expected}" in first and f"received {received}" in first, (
    first
  )


@pytest.mark.slow
def test_a_wrong_dtype_is_refused_by_tf_before_the_graph(results):
  """TF's own call check: the graph never sees a wrong dtype, so its
  message is TF's (the input's position, expected against received)."""
  message = results["obs_dtype"]
  assert "expected to be a float tensor but is a double tensor" in message


@pytest.mark.slow  # The fixture's export and fresh process: ~15 s.
def test_a_good_call_still_works(results):
  assert results["good"] == [3, 2]
