"""IMPALA's network as published (ingraph_rl/agents/impala/networks.py):
TF vs torch on the whole network with the last reward and action as inputs
(MLP and conv torsos, with and without an LSTM), a NumPy reference of one
step with set weights (frame torso, clipped reward, one-hot action,
instruction encoder on a string, LSTM core, heads), the inputs ignored
when `feed_reward_action=False`, and Dict observation checks."""

import math

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig, make_network
from ingraph_rl.agents.impala.networks import observation_keys
from ingraph_rl.errors import BuildError
from ingraph_rl.spaces import Dict, FloatBox, IntBox, TextBox
from ingraph_rl.testing import ComponentTest
from ingraph_rl.testing.component_test import to_numpy

A = 3
FRAMES = IntBox(256, (36, 48, 3), dtype=np.uint8)  # Small conv torso fits.

BF16 = "bfloat16"


def network_test(config, obs_space, backend, seed=0, weights_dtype=None):
  network = make_network(config, obs_space, weights_dtype=weights_dtype)
  spaces = IMPALABuilder(config).policy_input_spaces(obs_space)
  spaces["initial_state"] = spaces.pop("state")
  return ComponentTest(
    network, spaces, backend, seed=seed, api_names=["unroll"]
  )


def inputs(obs_space, units, b=3, t=4, seed=0):
  """observations (a sample of the space), a random state, resets with an
  episode start inside, rewards beyond [-1, 1] and random last actions."""
  rng = np.random.default_rng(seed)
  obs = obs_space.with_batch_rank().with_time_rank().sample((b, t), seed)
  state = {
    k: rng.normal(size=(b, units)).astype(np.float32) for k in ("c", "h")
  }
  resets = np.zeros((b, t), bool)
  resets[1, 2] = True
  rewards = rng.normal(0, 2, (b, t)).astype(np.float32)
  actions = rng.integers(0, A, (b, t)).astype(np.int64)
  return obs, state, resets, rewards, actions


def scaled_weights(test, seed=0):
  """Kernels ~ N(0, 1/fan_in), biases ~ N(0, 0.1^2), embeddings N(0, 1):
  activations stay O(1), so every weight matters."""
  rng = np.random.default_rng(seed)
  w = {}
  for path, v in test.get_weights().items():
    scale = (
      1.0
      if "embeddings" in path
      else 0.1
      if v.ndim == 1
      else 1.0 / math.sqrt(math.prod(v.shape[:-1]))
    )
    w[path] = (rng.normal(size=v.shape) * scale).astype(v.dtype)
  test.set_weights(w)
  return w


NETWORKS = {
  "mlp": (dict(), FloatBox((4,))),
  "mlp_lstm": (dict(lstm_units=8), FloatBox((4,))),
  "small_lstm": (dict(torso="small", lstm_units=8), FRAMES),
  "large": (dict(torso="large"), IntBox(256, (12, 10, 3), dtype=np.uint8)),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(NETWORKS))
def test_parity_with_last_reward_and_action(kind):
  kwargs, obs_space = NETWORKS[kind]
  config = IMPALAConfig(num_actions=A, **kwargs)
  tf_test = network_test(config, obs_space, "tf")
  torch_test = network_test(config, obs_space, "torch", seed=1)
  scaled_weights(tf_test)
  torch_test.set_weights(tf_test.get_weights())
  args = inputs(obs_space, config.lstm_units or 0)
  a = tf_test.test("unroll", *args)
  b = torch_test.test("unroll", *args)
  for key in ("logits", "values"):
    np.testing.assert_allclose(
      b[key], a[key], rtol=1e-4, atol=1e-4, err_msg=key
    )
  for key in ("c", "h"):
    np.testing.assert_allclose(
      b["state"][key], a["state"][key], rtol=1e-4, atol=1e-4
    )
  assert a["logits"].shape == (3, 4, A)
  # The last reward and action are inputs: other ones, other outputs.
  other = tf_test.test("unroll", *args[:3], -args[3], (args[4] + 1) % A)
  assert np.abs(other["logits"] - a["logits"]).max() > 1e-3


def test_without_reward_and_action_the_inputs_are_ignored():
  config = IMPALAConfig(num_actions=A, lstm_units=8, feed_reward_action=False)
  test = network_test(config, FloatBox((4,)), "tf")
  assert test.get_weights()["impala_network/lstm/kernel"].shape == (64 + 8, 32)
  args = inputs(FloatBox((4,)), 8)
  a = test.test("unroll", *args)
  b = test.test("unroll", *args[:3], -args[3], (args[4] + 1) % A)
  np.testing.assert_array_equal(a["logits"], b["logits"])
  with_inputs = network_test(
    IMPALAConfig(num_actions=A, lstm_units=8), FloatBox((4,)), "tf"
  )
  assert with_inputs.get_weights()["impala_network/lstm/kernel"].shape == (
    64 + 1 + A + 8,
    32,
  )


# --- NumPy reference of one step, instruction included -----------------------


def sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def np_lstm_step(x, c, h, kernel, bias):
  i, f, g, o = np.split(np.concatenate([x, h], -1) @ kernel + bias, 4, -1)
  c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
  return c, sigmoid(o) * np.tanh(c)


def np_instruction(text, w, p):
  """Words (split on whitespace) -> hash buckets (TF's hash function:
  the tokenizer's) -> embedding -> LSTM from zeros; the last word's output
  (zeros for no words)."""
  units = w[p + "lstm/bias"].shape[0] // 4
  c = h = np.zeros(units)
  words = text.split()
  if not words:
    return h
  ids = tf.strings.to_hash_bucket_fast(words, 1000).numpy()
  for i in ids:
    c, h = np_lstm_step(
      w[p + "embedding/embeddings"][i],
      c,
      h,
      w[p + "lstm/kernel"],
      w[p + "lstm/bias"],
    )
  return h


def test_one_step_matches_numpy_reference():
  """observation {frame uint8 [4, 5, 3], instruction}; torso flatten ->
  dense 6 relu on frame / 255; core input torso || clip(reward) ||
  one_hot(action) || instruction (64); LSTM 5; heads."""
  obs_space = Dict(
    RGB_INTERLEAVED=IntBox(256, (4, 5, 3), dtype=np.uint8), INSTR=TextBox()
  )
  config = IMPALAConfig(
    num_actions=A,
    lstm_units=5,
    torso=(
      {"type": "flatten"},
      {"type": "dense", "units": 6, "activation": "relu"},
    ),
  )
  test = network_test(config, obs_space, "tf")
  w = {
    k[len("impala_network/") :]: v.astype(np.float64)
    for k, v in scaled_weights(test, seed=3).items()
  }
  rng = np.random.default_rng(4)
  frames = rng.integers(0, 256, (3, 1, 4, 5, 3), np.uint8)
  text = np.array([["go to the  red ball"], [""], ["go"]], object)
  state = {k: rng.normal(size=(3, 5)).astype(np.float32) for k in "ch"}
  resets = np.array([[False], [True], [False]])
  rewards = np.array([[2.5], [-0.3], [-7.0]], np.float32)
  actions = np.array([[2], [0], [1]], np.int64)
  out = test.test(
    "unroll",
    {"RGB_INTERLEAVED": frames, "INSTR": text},
    state,
    resets,
    rewards,
    actions,
  )

  torso = np.maximum(
    frames[:, 0].reshape(3, -1) / 255.0 @ w["torso/dense_1/kernel"]
    + w["torso/dense_1/bias"],
    0,
  )
  instructions = np.stack(
    [np_instruction(s, w, "instruction_encoder/") for s in text[:, 0]]
  )
  np.testing.assert_array_equal(instructions[1], 0.0)  # No words.
  core_in = np.concatenate(
    [torso, np.clip(rewards, -1, 1), np.eye(A)[actions[:, 0]], instructions], -1
  )
  keep = 1.0 - resets
  c, h = np_lstm_step(
    core_in,
    state["c"] * keep,
    state["h"] * keep,
    w["lstm/kernel"],
    w["lstm/bias"],
  )
  logits = h @ w["policy_head/kernel"] + w["policy_head/bias"]
  value = h @ w["value_head/kernel"] + w["value_head/bias"]
  np.testing.assert_allclose(out["logits"][:, 0], logits, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(
    out["values"][:, 0], value[:, 0], rtol=1e-5, atol=1e-5
  )
  np.testing.assert_allclose(out["state"]["h"], h, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(out["state"]["c"], c, rtol=1e-5, atol=1e-5)


def test_unroll_over_time_equals_steps():
  """A [B, T] unroll (learner) equals T one-step calls (actor), the
  instruction encoded per step."""
  obs_space = Dict(RGB_INTERLEAVED=FRAMES, INSTR=TextBox())
  config = IMPALAConfig(num_actions=A, torso="small", lstm_units=4)
  test = network_test(config, obs_space, "tf")
  obs, state, resets, rewards, actions = inputs(obs_space, 4, b=2, t=3)
  obs["INSTR"] = np.array(
    [["go left", "go right", ""], ["a b c", "a b", "a"]], object
  )
  whole = test.test("unroll", obs, state, resets, rewards, actions)
  s = state
  for t in range(3):
    step = test.test(
      "unroll",
      {k: v[:, t : t + 1] for k, v in obs.items()},
      s,
      resets[:, t : t + 1],
      rewards[:, t : t + 1],
      actions[:, t : t + 1],
    )
    np.testing.assert_allclose(
      step["logits"][:, 0], whole["logits"][:, t], rtol=1e-5, atol=1e-5
    )
    s = step["state"]
  np.testing.assert_allclose(s["h"], whole["state"]["h"], rtol=1e-5, atol=1e-5)


def test_observation_keys():
  assert observation_keys(FRAMES) == (None, None)
  assert observation_keys(Dict(RGB_INTERLEAVED=FRAMES, INSTR=TextBox())) == (
    "RGB_INTERLEAVED",
    "INSTR",
  )
  assert observation_keys(Dict(pixels=FRAMES)) == ("pixels", None)
  with pytest.raises(BuildError, match="one frame"):
    observation_keys(Dict(a=FRAMES, b=FloatBox((2,))))
  with pytest.raises(BuildError, match="one frame"):
    make_network(
      IMPALAConfig(num_actions=A), Dict(a=FRAMES, b=TextBox(), c=TextBox())
    )


@pytest.mark.slow
def test_policy_values_equal_act_values():
  from ingraph_rl.agents.impala import IMPALAPolicy
  from ingraph_rl.executors.tensorflow import TFExecutor

  config = IMPALAConfig(num_actions=A, lstm_units=4)
  network = make_network(config, FloatBox((4,)))
  ex = TFExecutor(
    IMPALAPolicy(network),
    IMPALABuilder(config).policy_input_spaces(FloatBox((4,))),
    api_names=["act", "values"],
  )
  args = inputs(FloatBox((4,)), 4)
  np.testing.assert_array_equal(
    to_numpy(ex.execute("values", *args)),
    to_numpy(ex.execute("act", *args))["values"],
  )


def test_config_names_every_bad_choice():
  with pytest.raises(BuildError) as e:
    IMPALAConfig(
      num_actions=A,
      torso="tiny",
      reward_clipping="x",
      compute_dtype="half",
      actor_weights_dtype="float16",
    )
  for part in (
    "torso must be one of",
    "reward_clipping",
    "compute_dtype",
    "actor_weights_dtype",
  ):
    assert part in str(e.value)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["compute_dtype", "weights_dtype"])
@pytest.mark.parametrize("kind", ["mlp_lstm", "small_lstm", "large"])
def test_bfloat16_torso(kind, how):
  # The torso's layers multiply in bfloat16 (`compute_dtype`: mixed
  # precision; `weights_dtype`: an actor's copy, its variables bfloat16
  # too), the LSTM and heads in float32; TF and torch agree to bfloat16's
  # precision, and the outputs stay near (not at) the float32 network's
  # with the same weights.
  kwargs, obs_space = NETWORKS[kind]
  if how == "compute_dtype":
    config, dtypes = (
      IMPALAConfig(num_actions=A, compute_dtype=BF16, **kwargs),
      {},
    )
  else:
    config, dtypes = IMPALAConfig(num_actions=A, **kwargs), {how: BF16}
  network = make_network(config, obs_space, **dtypes)
  multiply = [c for c in network.torso.walk() if hasattr(c, "compute_dtype")]
  assert multiply and all(c.compute_dtype == BF16 for c in multiply)
  assert network.policy_head.compute_dtype is None
  tests = {
    "tf": network_test(config, obs_space, "tf", **dtypes),
    "torch": network_test(config, obs_space, "torch", seed=1, **dtypes),
    "fp32": network_test(
      IMPALAConfig(num_actions=A, **kwargs), obs_space, "tf", seed=2
    ),
  }
  weights = scaled_weights(tests["tf"])
  stored = {p: w.dtype.name for p, w in weights.items()}
  want = BF16 if how == "weights_dtype" else "float32"
  assert {d for p, d in stored.items() if "torso/" in p} == {want}
  assert {d for p, d in stored.items() if "torso/" not in p} == {"float32"}
  tests["torch"].set_weights(weights)
  tests["fp32"].set_weights(
    {p: w.astype(np.float32) for p, w in weights.items()}
  )
  args = inputs(obs_space, config.lstm_units or 0)
  out = {k: t.test("unroll", *args) for k, t in tests.items()}
  for key in ("logits", "values"):
    assert out["tf"][key].dtype == np.float32
    np.testing.assert_allclose(
      out["torch"][key], out["tf"][key], rtol=3e-2, atol=3e-2, err_msg=key
    )
    np.testing.assert_allclose(
      out["tf"][key], out["fp32"][key], rtol=5e-2, atol=5e-2, err_msg=key
    )
    assert not np.array_equal(out["tf"][key], out["fp32"][key]), key
