"""A complete IMPALA agent (actor policy + learner) as one SavedModel: in a
fresh process without ingraph_rl it acts with an LSTM state, updates on
given rollouts, publishes the new weights to the actor, saves again, and
matches the in-process actor and learner; the rollout queue comes back
empty. The action signature takes the previous reward and action; the
update signature the rollouts' truncation flags and bootstrap values."""

import numpy as np
import pytest

from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig
from ingraph_rl.environments import make_vector_env
from ingraph_rl.errors import ExportError
from ingraph_rl.export import export_actor_learner

QUEUE = "impala_agent_export_test"

PLAY = r"""
import numpy as np

def play(act, update, sync, data, prefix):
  out = {"action": [], "logits": [], "value": [], "state_h": [],
         "loss": [], "train_step": []}
  state = None

  def steps(n, offset):
    nonlocal state
    for t in range(n):
      res = act(data[prefix + "obs"][offset + t],
                data[prefix + "first"][offset + t],
                data[prefix + "prev_reward"][offset + t],
                data[prefix + "prev_action"][offset + t], state)
      state = res["state"]
      out["action"].append(res["action"].tolist())
      out["logits"].append(res["logits"].tolist())
      out["value"].append(res["value"].tolist())
      out["state_h"].append(state["h"].tolist())

  steps(2, 0)
  for b in range(data[prefix + "num_batches"]):
    batch = {k[len(prefix) + 6:]: v[b] for k, v in data.items()
             if k.startswith(prefix + "batch_")}
    losses = update(batch)
    out["loss"].append(float(losses["loss"]))
  out["train_step"].append(int(sync()))
  steps(2, 2)
  return out
"""

CHILD = (
  PLAY
  + r"""
import json
import tensorflow as tf

path, resaved, data_file = sys.argv[1:4]
data = dict(np.load(data_file))


def functions(agent):
  sig = agent.signatures

  def act(obs, first, prev_reward, prev_action, state):
    if state is None:
      state = sig["get_initial_state"](batch_size=tf.constant(len(obs)))
      state = {"c": state["state_c"], "h": state["state_h"]}
    res = sig["action"](observation=tf.constant(obs),
                        first=tf.constant(first),
                        prev_reward=tf.constant(prev_reward),
                        prev_action=tf.constant(prev_action),
                        state_c=state["c"], state_h=state["h"])
    out = {k: v.numpy() for k, v in res.items()}
    out["state"] = {"c": out["state_c"], "h": out["state_h"]}
    return out

  def update(batch):
    return sig["update"](**{"rollouts_" + k: tf.constant(v)
                            for k, v in batch.items()})

  def sync():
    return sig["sync_weights"]()["train_step"]

  return act, update, sync


agent = tf.saved_model.load(path)
queue_size = int(agent.signatures["queue_size"]()["size"])
first = play(*functions(agent), data, "a_")
tf.saved_model.save(agent, resaved, signatures=agent.signatures)
again = tf.saved_model.load(resaved)
second = play(*functions(again), data, "b_")
print(json.dumps({"first": first, "second": second,
                  "queue_size": queue_size,
                  "signatures": sorted(agent.signatures)}))
"""
)


def in_process(aex, lex, state_size):
  def act(obs, first, prev_reward, prev_action, state):
    if state is None:
      z = np.zeros((len(obs), state_size), np.float32)
      state = {"c": z, "h": z}
    res = aex.execute(
      "act",
      obs[:, None],
      state,
      first[:, None],
      prev_reward[:, None],
      prev_action[:, None],
    )
    return {
      "action": res["action"].numpy()[:, 0],
      "logits": res["logits"].numpy()[:, 0],
      "value": res["values"].numpy()[:, 0],
      "state": {k: v.numpy() for k, v in res["state"].items()},
    }

  def update(batch):
    nested = {
      k: v for k, v in batch.items() if not k.startswith("initial_state_")
    }
    nested["initial_state"] = {
      "c": batch["initial_state_c"],
      "h": batch["initial_state_h"],
    }
    return lex.execute("update_from_batch", nested)

  def sync():
    aex.execute("set_weights", lex.execute("get_weights"))
    return lex.execute("get_train_step")

  return act, update, sync


def make_data(config, obs_space, prefix, num_batches, seed):
  rng = np.random.default_rng(seed)
  data = {
    prefix + "obs": obs_space.with_batch_rank()
    .sample(8, seed=seed)
    .reshape(4, 2, -1),
    prefix + "first": rng.random((4, 2)) < 0.3,
    prefix + "prev_reward": rng.normal(size=(4, 2)).astype(np.float32),
    prefix + "prev_action": rng.integers(0, 2, (4, 2)),
    prefix + "num_batches": np.int64(num_batches),
  }
  data[prefix + "first"][0] = True
  record = IMPALABuilder(config).record_space(obs_space).with_batch_rank()
  batches = [record.sample(3, seed=seed + i) for i in range(num_batches)]
  for key in batches[0]:
    if key == "initial_state":
      for part in ("c", "h"):
        data[f"{prefix}batch_initial_state_{part}"] = np.stack(
          [b[key][part] for b in batches]
        )
    else:
      data[f"{prefix}batch_{key}"] = np.stack([b[key] for b in batches])
  return data


@pytest.mark.slow
def test_impala_agent_in_fresh_process(tmp_path, fresh_python):
  env = make_vector_env("CartPole-v1", 2, seed=0)
  config = IMPALAConfig(
    num_actions=2,
    lstm_units=8,
    unroll_length=4,
    batch_size=3,
    queue_capacity=8,
    seed=3,
    torso=({"type": "dense", "units": 16, "activation": "tanh"},),
  )
  builder = IMPALABuilder(config)
  lex = builder.make_learner(
    env.observation_space, QUEUE, update_from_batch=True
  ).build()
  aex = builder.make_actor(env, QUEUE).build()
  with pytest.raises(ExportError, match="update_from_batch=True"):
    export_actor_learner(aex, aex, str(tmp_path / "no"), name=builder.name)
  aex.execute("set_weights", lex.execute("get_weights"))
  aex.execute("reset_env", 0)
  assert int(aex.execute("unroll")["queue_size"]) == 2  # Saved, not kept.

  path = str(tmp_path / "agent")
  result = export_actor_learner(aex, lex, path, name=builder.name)
  signatures = {
    "action",
    "get_initial_state",
    "update",
    "get_weights",
    "get_train_step",
    "sync_weights",
    "queue_size",
  }
  assert set(result.exported) == signatures
  described = result.metadata["signatures"]
  assert {"prev_reward", "prev_action"} <= set(described["action"]["inputs"])
  assert {"rollouts_truncated", "rollouts_bootstrap_value"} <= set(
    described["update"]["inputs"]
  )
  assert result.exported["update"] == "learner.update_from_batch"
  assert "numpy_function" in result.skipped["actor.unroll"]
  assert "numpy_function" in result.skipped["actor.reset_env"]
  assert "would block" in result.skipped["learner.update"]

  data = {
    **make_data(config, env.observation_space, "a_", 2, 10),
    **make_data(config, env.observation_space, "b_", 1, 20),
  }
  np.savez(tmp_path / "data.npz", **data)
  loaded = fresh_python(
    CHILD, path, tmp_path / "resaved", tmp_path / "data.npz"
  )

  namespace = {}
  exec(PLAY, namespace)
  fns = in_process(aex, lex, config.lstm_units)
  expected = {p: namespace["play"](*fns, data, f"{p[0]}_") for p in ("a", "b")}
  assert loaded["signatures"] == sorted(signatures | {"get_metadata"})
  assert loaded["queue_size"] == 0
  assert int(lex.execute("queue_size")) == 2
  for p, part in (("a", "first"), ("b", "second")):
    got, want = loaded[part], expected[p]
    assert got["action"] == want["action"], part
    assert got["train_step"] == want["train_step"], part
    for key in ("logits", "value", "state_h", "loss"):
      np.testing.assert_allclose(
        got[key], want[key], rtol=1e-5, atol=1e-6, err_msg=f"{part} {key}"
      )
  assert expected["b"]["train_step"] == [3]
  env.close()
