"""The exported IMPALA policy acts identically in a fresh process that
cannot import ingraph_rl, for feed-forward and LSTM policies, with the
previous reward and action as inputs, and for Dict observations with an
instruction string (one input per leaf)."""

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig
from ingraph_rl.environments import make_vector_env
from ingraph_rl.export import export_policy
from ingraph_rl.testing.instruction_env import InstructionVectorEnv

# Runs in `python -I` from / (the `fresh_python` fixture: no PYTHONPATH, no
# cwd on sys.path, `import ingraph_rl` blocked).
PLAYER = r"""
import json, sys
import numpy as np
import tensorflow as tf
try:
  import ingraph_rl
  sys.exit("ingraph_rl is importable")
except ImportError:
  pass
path, obs_file = sys.argv[1], sys.argv[2]
data = dict(np.load(obs_file, allow_pickle=True))
policy = tf.saved_model.load(path)
sig = policy.signatures
obs_keys = [k for k in data if k.startswith("observation")]
state = sig["get_initial_state"](batch_size=tf.constant(len(data["first"][0])))
out = {"greedy": [], "logits": [], "value": [], "state_h": []}
for t in range(data["first"].shape[0]):
  obs = {k: tf.constant(data[k][t]) for k in obs_keys}
  res = sig["action"](**obs, first=tf.constant(data["first"][t]),
                      prev_reward=tf.constant(data["prev_reward"][t]),
                      prev_action=tf.constant(data["prev_action"][t]),
                      **state)
  state = {"state_c": res["state_c"], "state_h": res["state_h"]}
  out["greedy"].append(res["greedy_action"].numpy().tolist())
  out["logits"].append(res["logits"].numpy().tolist())
  out["value"].append(res["value"].numpy().tolist())
  out["state_h"].append(res["state_h"].numpy().tolist())
out["train_step"] = int(sig["get_train_step"]()["train_step"])
print(json.dumps(out))
"""


def in_process(actor_ex, net, obs, first, prev_reward, prev_action):
  """The same steps through the actor's `act` API (ingraph_rl); `obs` is
  [T, B, ...] (a dict of them for Dict observations)."""
  state = net.zero_state(first.shape[1])
  out = {"greedy": [], "logits": [], "value": [], "state_h": []}
  step = lambda x, t: x[t][:, None]
  for t in range(first.shape[0]):
    o = (
      {k: step(v, t) for k, v in obs.items()}
      if isinstance(obs, dict)
      else step(obs, t)
    )
    res = actor_ex.execute(
      "act",
      o,
      state,
      step(first, t),
      step(prev_reward, t),
      step(prev_action, t),
    )
    state = {k: v.numpy() for k, v in res["state"].items()}
    out["greedy"].append(res["greedy_action"].numpy()[:, 0])
    out["logits"].append(res["logits"].numpy()[:, 0])
    out["value"].append(res["values"].numpy()[:, 0])
    out["state_h"].append(state["h"])
  return out


@pytest.mark.parametrize(
  # LSTM: make test-all (~7 s; make test's margin).
  "lstm_units",
  [None, pytest.param(16, marks=pytest.mark.slow)],
)
@pytest.mark.slow
def test_exported_policy_matches_in_process_policy(
  tmp_path, lstm_units, fresh_python
):
  env = make_vector_env("CartPole-v1", 3, seed=0)
  config = IMPALAConfig(num_actions=2, lstm_units=lstm_units, seed=3)
  builder = IMPALABuilder(config)
  lex = builder.make_learner(
    env.observation_space, f"export_test_{lstm_units}"
  ).build()
  weights = lex.execute("get_weights")
  # Non-initial weights: scale them so a wrong copy would show.
  weights = {k: v * 1.7 for k, v in weights.items()}
  path = export_policy(
    builder,
    env.observation_space,
    weights,
    str(tmp_path / "policy"),
    train_step=42,
  )
  actor_root = builder.make_actor(env, f"export_test_{lstm_units}")
  actor = actor_root.component
  aex = actor_root.build()
  aex.execute("set_weights", weights)

  rng = np.random.default_rng(0)
  obs = rng.normal(size=(6, 3, 4)).astype(np.float32)
  first, prev_reward, prev_action = steps_data(rng, 6, 3, 2)
  loaded = play_in_fresh_process(
    fresh_python,
    tmp_path,
    path,
    dict(
      observation=obs,
      first=first,
      prev_reward=prev_reward,
      prev_action=prev_action,
    ),
  )
  expected = in_process(
    aex, actor.stepper.policy.network, obs, first, prev_reward, prev_action
  )
  assert loaded["train_step"] == 42
  assert_same(loaded, expected)
  if lstm_units:
    # The reset at t=3 matters: without it env 1's state would differ.
    assert np.abs(np.array(expected["state_h"])[3, 1]).sum() > 0
  # The previous reward and action are inputs that matter.
  other = in_process(
    aex, actor.stepper.policy.network, obs, first, prev_reward, 1 - prev_action
  )
  assert (
    np.abs(np.array(other["logits"]) - np.array(expected["logits"])).max()
    > 1e-4
  )
  env.close()


def steps_data(rng, steps, batch, num_actions):
  """first [T, B] (all at t=0, one mid-sequence), prev_reward float32 and
  prev_action int64 [T, B] (0 where first)."""
  first = np.zeros((steps, batch), bool)
  first[0] = True
  first[3, 1] = True  # An episode starts mid-sequence.
  prev_reward = np.where(first, 0.0, rng.normal(0, 2, (steps, batch)))
  prev_action = np.where(first, 0, rng.integers(0, num_actions, (steps, batch)))
  return first, prev_reward.astype(np.float32), prev_action.astype(np.int64)


def play_in_fresh_process(fresh_python, tmp_path, path, data):
  np.savez(tmp_path / "obs.npz", **data)
  return fresh_python(PLAYER, path, tmp_path / "obs.npz", timeout=120)


def assert_same(loaded, expected):
  for key in ("greedy", "logits", "value", "state_h"):
    np.testing.assert_allclose(
      np.array(loaded[key]),
      np.array(expected[key]),
      rtol=1e-5,
      atol=1e-5,
      err_msg=key,
    )


@pytest.mark.slow  # ~7 s: make test-all (make test's margin).
def test_dict_observations_with_instructions(tmp_path, fresh_python):
  """DM Lab-style observations: `observation_RGB_INTERLEAVED` uint8 and
  `observation_INSTR` string inputs; the instruction changes the output."""
  env = InstructionVectorEnv(3, seed=0, frame_shape=(36, 48, 3))
  config = IMPALAConfig(num_actions=3, torso="small", lstm_units=8, seed=1)
  name = "export_test_dict"
  builder = IMPALABuilder(config)
  lex = builder.make_learner(env.observation_space, name).build()
  weights = lex.execute("get_weights")
  path = export_policy(
    builder, env.observation_space, weights, str(tmp_path / "policy")
  )
  inputs = (
    tf.saved_model.load(path).signatures["action"].structured_input_signature[1]
  )
  assert {
    k: (v.dtype, v.shape.as_list())
    for k, v in inputs.items()
    if k.startswith("observation")
  } == {
    "observation_RGB_INTERLEAVED": (tf.uint8, [None, 36, 48, 3]),
    "observation_INSTR": (tf.string, [None]),
  }
  actor_root = builder.make_actor(env, name)
  actor = actor_root.component
  aex = actor_root.build()
  aex.execute("set_weights", weights)
  rng = np.random.default_rng(1)
  frames = rng.integers(0, 256, (5, 3, 36, 48, 3), np.uint8)
  instr = np.array([["go left", "go right", ""]] * 5, object)
  instr[2] = ["pick up the red ball", "go left", "go  left"]
  first, prev_reward, prev_action = steps_data(rng, 5, 3, 3)
  loaded = play_in_fresh_process(
    fresh_python,
    tmp_path,
    path,
    {
      "observation_RGB_INTERLEAVED": frames,
      "observation_INSTR": instr,
      "first": first,
      "prev_reward": prev_reward,
      "prev_action": prev_action,
    },
  )
  obs = {"RGB_INTERLEAVED": frames, "INSTR": instr}
  net = actor.stepper.policy.network
  expected = in_process(aex, net, obs, first, prev_reward, prev_action)
  assert_same(loaded, expected)
  swapped = dict(obs, INSTR=instr[:, ::-1].copy())
  other = in_process(aex, net, swapped, first, prev_reward, prev_action)
  assert (
    np.abs(
      np.array(other["logits"])[:, 0] - np.array(expected["logits"])[:, 0]
    ).max()
    > 1e-4
  )
  env.close()


@pytest.mark.slow
def test_signatures_have_named_inputs_and_open_batch(tmp_path):
  env = make_vector_env("CartPole-v1", 1)
  config = IMPALAConfig(num_actions=2, lstm_units=8)
  builder = IMPALABuilder(config)
  lex = builder.make_learner(env.observation_space, "export_sig").build()
  path = export_policy(
    builder,
    env.observation_space,
    lex.execute("get_weights"),
    str(tmp_path / "p"),
  )
  sigs = tf.saved_model.load(path).signatures
  assert set(sigs) == {"action", "get_initial_state", "get_train_step"}
  inputs = sigs["action"].structured_input_signature[1]
  assert {k: (v.dtype, v.shape.as_list()) for k, v in inputs.items()} == {
    "observation": (tf.float32, [None, 4]),
    "first": (tf.bool, [None]),
    "prev_reward": (tf.float32, [None]),
    "prev_action": (tf.int64, [None]),
    "state_c": (tf.float32, [None, 8]),
    "state_h": (tf.float32, [None, 8]),
  }
  assert set(sigs["action"].structured_outputs) == {
    "action",
    "greedy_action",
    "logits",
    "value",
    "state_c",
    "state_h",
  }
  # Bad input fails with TF's signature error, not a crash.
  with pytest.raises((TypeError, ValueError, tf.errors.InvalidArgumentError)):
    sigs["action"](
      observation=tf.zeros([2, 5]),
      first=tf.zeros([2], bool),
      prev_reward=tf.zeros([2]),
      prev_action=tf.zeros([2], tf.int64),
      state_c=tf.zeros([2, 8]),
      state_h=tf.zeros([2, 8]),
    )
  env.close()
