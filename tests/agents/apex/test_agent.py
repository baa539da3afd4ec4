"""The complete Ape-X agent (`ApexAgent`): observe's initial priorities
against NumPy, update's effect, and its SavedModel, which a fresh process
without ingraph_rl acts, observes and updates with exactly the numbers of
the agent that was exported."""

import numpy as np
import pytest

from ingraph_rl.components.memories import segment_tree
from ingraph_rl.environments import GymnasiumVectorEnv
from ingraph_rl.export import export_agent
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing import assert_parity
from ingraph_rl.testing.component_test import to_numpy
from ingraph_rl.testing.references import (
  RecordingEnv,
  numpy_q_values,
  recompute_n_step,
)

from .conftest import SMALL, small_builder
from .test_actor import numpy_priorities

NUM_ENVS = 3


def build(monkeypatch, **changes):
  # Pure-TF segment trees: plain TF loads the SavedModel.
  monkeypatch.setattr(segment_tree, "DEFAULT_IMPL", "tf")
  env = RecordingEnv(
    GymnasiumVectorEnv(
      "CartPole-v1", num_envs=NUM_ENVS, seed=4, max_episode_steps=15
    )
  )
  builder = small_builder(**changes)
  return env, builder.make_agent(env.observation_space, NUM_ENVS).build()


def play_env(env, agent, steps, seed):
  obs = env.reset(seed)
  out = []
  for _ in range(steps):
    actions = to_numpy(agent.execute("get_actions", obs, True))["actions"]
    step = env.step(actions)
    out.append(
      to_numpy(agent.execute("observe", *step.transition(obs, actions)))
    )
    obs = step.obs
  return out


@pytest.mark.slow
def test_observe_inserts_n_step_transitions_with_numpy_priorities(
  monkeypatch,
):
  env, agent = build(monkeypatch, epsilon=1.0, buffer_size=1000)
  weights = to_numpy(agent.execute("get_weights"))
  out = play_env(env, agent, 40, seed=4)
  want, terminated, truncated = recompute_n_step(env, SMALL.n_step, 0.9)
  assert terminated > 0 and truncated > 0
  transitions = sum(int(o["transitions"]) for o in out)
  assert transitions == len(want["rewards"]) == int(out[-1]["size"])
  expected = numpy_priorities(want, weights, SMALL)
  got = sum(float(o["priority_sum"]) for o in out)
  assert got == pytest.approx(expected.sum(), rel=1e-4)

  # update: one Adam step on the online network; the target syncs only
  # on its period.
  before = to_numpy(agent.execute("get_weights"))
  result = to_numpy(agent.execute("update"))
  after = to_numpy(agent.execute("get_weights"))
  assert int(result["train_step"]) == 1 and np.isfinite(result["loss"])
  kernel = "torso/dense_0/kernel"
  assert not np.allclose(after["online"][kernel], before["online"][kernel])
  np.testing.assert_array_equal(
    after["target"][kernel], before["target"][kernel]
  )
  env.close()


CHILD = r"""
import json, sys
import numpy as np
import tensorflow as tf

path, data_file = sys.argv[1:3]
data = np.load(data_file)
agent = tf.saved_model.load(path)

def call(name, **inputs):
  res = agent.signatures[name](**{k: tf.constant(v) for k, v in inputs.items()})
  return {k: v.numpy() for k, v in res.items()}

out = {"sizes": [], "losses": []}
for i in range(len(data["states"])):
  o = call("observe", **{k: data[k][i] for k in
    ("states", "actions", "rewards", "next_states", "terminals", "truncated")})
  out["sizes"].append(int(o["size"]))
for _ in range(3):
  out["losses"].append(float(call("update")["loss"]))
greedy = call("action", states=data["states"][0], explore=np.bool_(False))
out["greedy"] = greedy["actions"].tolist()
out["q"] = greedy["q_values"].tolist()
out["train_step"] = int(call("get_train_step")["train_step"])
print(json.dumps(out))
"""


@pytest.mark.slow
def test_saved_model_acts_observes_and_updates_in_a_fresh_process(
  monkeypatch, tmp_path, fresh_python
):
  env, agent = build(monkeypatch)
  play_env(env, agent, 6, seed=1)  # Some state: replay, windows, RNGs.
  path = str(tmp_path / "agent")
  result = export_agent(agent, path)
  assert set(result.exported) == {
    "action",
    "observe",
    "update",
    "get_weights",
    "set_weights",
    "get_train_step",
  }
  assert result.custom_ops == []
  rng = np.random.default_rng(0)
  steps = 10
  states = rng.normal(size=(steps, NUM_ENVS, 4)).astype(np.float32)
  data = {
    "states": states,
    "actions": rng.integers(0, 2, (steps, NUM_ENVS)).astype(np.int64),
    "rewards": rng.normal(size=(steps, NUM_ENVS)).astype(np.float32),
    "next_states": states + 0.1,
    "terminals": rng.random((steps, NUM_ENVS)) < 0.2,
    "truncated": np.zeros((steps, NUM_ENVS), bool),
  }
  np.savez(tmp_path / "data.npz", **data)
  loaded = fresh_python(CHILD, path, tmp_path / "data.npz")

  # The same calls on the agent that was exported give the same numbers.
  sizes = [
    int(
      to_numpy(agent.execute("observe", *(data[k][i] for k in list(data))))[
        "size"
      ]
    )
    for i in range(steps)
  ]
  losses = [float(to_numpy(agent.execute("update"))["loss"]) for _ in range(3)]
  greedy = to_numpy(agent.execute("get_actions", data["states"][0], False))
  assert loaded["sizes"] == sizes and sizes[-1] > sizes[0]
  np.testing.assert_allclose(loaded["losses"], losses, rtol=1e-5)
  assert loaded["greedy"] == greedy["actions"].tolist()
  assert loaded["train_step"] == 3
  # Greedy Q-values against the NumPy forward pass of the weights.
  online = to_numpy(agent.execute("get_weights"))["online"]
  np.testing.assert_allclose(
    loaded["q"], numpy_q_values(data["states"][0], online), rtol=1e-4
  )
  env.close()


@pytest.mark.slow
def test_observe_parity_tf_torch():
  """n-step windows, initial priorities and inserts, step by step (update
  samples with each backend's own RNG, so it is compared through the
  shared Q-learning core's parity test instead)."""
  builder = small_builder()
  obs = FloatBox((4,))
  root = builder.make_agent(obs, NUM_ENVS)
  rng = np.random.default_rng(3)
  calls = []
  for _ in range(6):
    states = rng.normal(size=(NUM_ENVS, 4)).astype(np.float32)
    calls.append(
      (
        "observe",
        (
          states,
          rng.integers(0, 2, NUM_ENVS).astype(np.int64),
          rng.normal(size=NUM_ENVS).astype(np.float32),
          states + 0.1,
          rng.random(NUM_ENVS) < 0.3,
          np.zeros(NUM_ENVS, bool),
        ),
      )
    )
  tf_out, _ = assert_parity(
    root.component,
    root.input_spaces,
    calls,
    rtol=1e-4,
    api_names=("observe",),
  )
  assert int(tf_out[-1]["size"]) > 0


@pytest.mark.slow
def test_weights_cross_backends_in_tf_layout():
  """get_weights of a TF agent, set on a torch agent through its
  `set_weights` API, gives the same Q-values (the 64x64 kernel would be
  transposed, silently, were the layouts mixed up); the torch agent's
  `get_weights` API returns the same TF-layout values, as copies that a
  later `set_weights` does not change."""
  obs = FloatBox((4,))
  tf_agent = small_builder().make_agent(obs, NUM_ENVS).build()
  torch_agent = small_builder(seed=1).make_agent(obs, NUM_ENVS).build("torch")
  states = np.random.default_rng(5).normal(size=(7, 4)).astype(np.float32)

  def q_values(agent):
    return to_numpy(agent.execute("get_actions", states, False))["q_values"]

  weights = to_numpy(tf_agent.execute("get_weights"))
  before = to_numpy(torch_agent.execute("get_weights"))
  assert not np.allclose(q_values(torch_agent), q_values(tf_agent))
  torch_agent.execute("set_weights", weights)
  np.testing.assert_allclose(
    q_values(torch_agent), q_values(tf_agent), rtol=1e-5, atol=1e-6
  )
  got = to_numpy(torch_agent.execute("get_weights"))
  for net in ("online", "target"):
    for path, value in weights[net].items():
      np.testing.assert_array_equal(got[net][path], value, err_msg=path)
      if path.endswith("kernel"):  # Biases start at zero in both.
        assert not np.array_equal(before[net][path], value), path
