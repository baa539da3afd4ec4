"""The exported IMPALA policy acts identically in a fresh process that
cannot import ingraph_rl, for feed-forward and LSTM policies."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.agents.impala import IMPALAActor, IMPALAConfig, IMPALALearner
from ingraph_rl.environments import make_vector_env
from ingraph_rl.export import export_impala_policy

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Runs in `python -I` from /: no PYTHONPATH, no cwd on sys.path.
PLAYER = r"""
import json, sys
sys.modules["ingraph_rl"] = None       # Blocks an editable install too.
import numpy as np
import tensorflow as tf
try:
  import ingraph_rl
  sys.exit("ingraph_rl is importable")
except ImportError:
  pass
path, obs_file = sys.argv[1], sys.argv[2]
data = np.load(obs_file)
policy = tf.saved_model.load(path)
sig = policy.signatures
state = sig["get_initial_state"](batch_size=tf.constant(data["obs"].shape[1]))
out = {"greedy": [], "logits": [], "value": [], "state_h": []}
for t in range(data["obs"].shape[0]):
  res = sig["action"](observation=tf.constant(data["obs"][t]),
                      first=tf.constant(data["first"][t]), **state)
  state = {"state_c": res["state_c"], "state_h": res["state_h"]}
  out["greedy"].append(res["greedy_action"].numpy().tolist())
  out["logits"].append(res["logits"].numpy().tolist())
  out["value"].append(res["value"].numpy().tolist())
  out["state_h"].append(res["state_h"].numpy().tolist())
out["train_step"] = int(sig["get_train_step"]()["train_step"])
print(json.dumps(out))
"""


def in_process(actor_ex, net, obs, first):
  """The same steps through the actor's `act` API (ingraph_rl)."""
  state = net.zero_state(obs.shape[1])
  out = {"greedy": [], "logits": [], "value": [], "state_h": []}
  for t in range(obs.shape[0]):
    res = actor_ex.execute("act", obs[t][:, None], state, first[t][:, None])
    state = {k: v.numpy() for k, v in res["state"].items()}
    out["greedy"].append(res["greedy_action"].numpy()[:, 0])
    out["logits"].append(res["logits"].numpy()[:, 0])
    out["value"].append(res["values"].numpy()[:, 0])
    out["state_h"].append(state["h"])
  return out


@pytest.mark.parametrize("lstm_units", [None, 16])
def test_exported_policy_matches_in_process_policy(tmp_path, lstm_units):
  env = make_vector_env("CartPole-v1", 3, seed=0)
  config = IMPALAConfig(num_actions=2, lstm_units=lstm_units, seed=3)
  learner = IMPALALearner(config, env.observation_space,
                          queue_name=f"export_test_{lstm_units}")
  lex = learner.build()
  weights = lex.execute("get_weights")
  # Non-initial weights: scale them so a wrong copy would show.
  weights = {k: v * 1.7 for k, v in weights.items()}
  path = export_impala_policy(config, env.observation_space, weights,
                              str(tmp_path / "policy"), train_step=42)
  actor = IMPALAActor(config, env, queue_name=f"export_test_{lstm_units}")
  aex = actor.build(IMPALALearner.weights_space(lex))
  aex.execute("set_weights", weights)

  rng = np.random.default_rng(0)
  obs = rng.normal(size=(6, 3, 4)).astype(np.float32)
  first = np.zeros((6, 3), bool)
  first[0] = True
  first[3, 1] = True                   # An episode starts mid-sequence.
  np.savez(tmp_path / "obs.npz", obs=obs, first=first)
  env_vars = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  res = subprocess.run(
      [sys.executable, "-I", "-c", PLAYER, path, str(tmp_path / "obs.npz")],
      cwd="/", env=env_vars, capture_output=True, text=True, timeout=120)
  assert res.returncode == 0, res.stderr[-3000:]
  loaded = json.loads(res.stdout.strip().splitlines()[-1])
  expected = in_process(aex, actor.stepper.policy.network, obs, first)
  assert loaded["train_step"] == 42
  for key in ("greedy", "logits", "value", "state_h"):
    np.testing.assert_allclose(np.array(loaded[key]), np.array(expected[key]),
                               rtol=1e-5, atol=1e-5, err_msg=key)
  if lstm_units:
    # The reset at t=3 matters: without it env 1's state would differ.
    assert np.abs(np.array(expected["state_h"])[3, 1]).sum() > 0
  env.close()


def test_signatures_have_named_inputs_and_open_batch(tmp_path):
  env = make_vector_env("CartPole-v1", 1)
  config = IMPALAConfig(num_actions=2, lstm_units=8)
  lex = IMPALALearner(config, env.observation_space,
                      queue_name="export_sig").build()
  path = export_impala_policy(config, env.observation_space,
                              lex.execute("get_weights"), str(tmp_path / "p"))
  sigs = tf.saved_model.load(path).signatures
  assert set(sigs) == {"action", "get_initial_state", "get_train_step"}
  inputs = sigs["action"].structured_input_signature[1]
  assert {k: v.shape.as_list() for k, v in inputs.items()} == {
      "observation": [None, 4], "first": [None], "state_c": [None, 8],
      "state_h": [None, 8]}
  assert set(sigs["action"].structured_outputs) == {
      "action", "greedy_action", "logits", "value", "state_c", "state_h"}
  # Bad input fails with TF's signature error, not a crash.
  with pytest.raises((TypeError, ValueError, tf.errors.InvalidArgumentError)):
    sigs["action"](observation=tf.zeros([2, 5]), first=tf.zeros([2], bool),
                   state_c=tf.zeros([2, 8]), state_h=tf.zeros([2, 8]))
  env.close()
