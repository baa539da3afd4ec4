"""Complete DQN SavedModels: a fresh process without ingraph_rl acts,
observes, updates, saves again and matches the in-process agent; env
stepping stays out (by name); saved_model_cli shows named signatures with an
open batch dim; bad inputs fail with TF's errors; incompatible format
versions and custom ops are reported clearly."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.agents.dqn import DQNBuilder, DQNConfig
from ingraph_rl.components.memories import segment_tree
from ingraph_rl.environments import make_vector_env
from ingraph_rl.errors import ExportError
from ingraph_rl.export import agent as export_lib
from ingraph_rl.export import export_agent, load, read_metadata
from ingraph_rl.spaces import FloatBox

SIGNATURES = {
  "action",
  "observe",
  "update",
  "sync_target",
  "get_weights",
  "get_train_step",
}

# The same calls in both processes: `call(signature, **inputs)` returns
# {output name: numpy}.
PLAY = r"""
import numpy as np

def play(call, data):
  out = {"actions": [], "q": [], "epsilon": [], "size": [], "loss": [],
         "grad_norm": []}
  for i in range(len(data["states"])):
    s = data["states"][i]
    a = call("action", states=s, explore=np.bool_(True))
    out["actions"].append(a["actions"].tolist())
    out["q"].append(a["q_values"].tolist())
    out["epsilon"].append(float(a["epsilon"]))
    n = call("observe", states=s, actions=a["actions"],
             rewards=data["rewards"][i], next_states=data["next_states"][i],
             terminals=data["terminals"][i])
    out["size"].append(int(n["size"]))
    u = call("update")
    out["loss"].append(float(u["loss"]))
    out["grad_norm"].append(float(u["grad_norm"]))
    if i % 2:
      assert bool(call("sync_target")["synced"])
  out["train_step"] = int(call("get_train_step")["train_step"])
  out["greedy"] = call("action", states=data["states"][0],
                       explore=np.bool_(False))["actions"].tolist()
  out["weights"] = {k: float(np.abs(v).sum())
                    for k, v in call("get_weights").items()}
  return out
"""

CHILD = (
  PLAY
  + r"""
import json
import tensorflow as tf

path, resaved, data_file = sys.argv[1:4]
data = np.load(data_file)
agent = tf.saved_model.load(path)

def caller(model):
  def call(name, **inputs):
    res = model.signatures[name](**{k: tf.constant(v)
                                    for k, v in inputs.items()})
    return {k: v.numpy() for k, v in res.items()}
  return call

meta = agent.signatures["get_metadata"]()
first = play(caller(agent), {k[2:]: data[k] for k in data if k[:2] == "a_"})
tf.saved_model.save(agent, resaved, signatures=agent.signatures)
again = tf.saved_model.load(resaved)
second = play(caller(again), {k[2:]: data[k] for k in data if k[:2] == "b_"})
print(json.dumps({"first": first, "second": second,
                  "format_version": int(meta["format_version"]),
                  "skipped": [s.decode() for s in meta["skipped"].numpy()],
                  "ingraph_rl_loaded": sys.modules.get("ingraph_rl")
                                       is not None}))
"""
)


def in_process_call(executor):
  def call(name, **inputs):
    api = {"action": "get_actions"}.get(name, name)
    out = executor.execute(api, **inputs)
    flat = export_lib.flat_outputs(
      out, export_lib.SINGLE_OUTPUT_NAMES.get(api, "output")
    )
    return {k: np.asarray(v) for k, v in flat.items()}

  return call


def make_data(space, steps, batch, seed):
  rng = np.random.default_rng(seed)
  states = space.with_batch_rank()
  return {
    "states": np.stack(
      [states.sample(batch, seed=seed + i) for i in range(steps)]
    ),
    "next_states": np.stack(
      [states.sample(batch, seed=seed + 99 + i) for i in range(steps)]
    ),
    "rewards": rng.normal(size=(steps, batch)).astype(np.float32),
    "terminals": rng.random((steps, batch)) < 0.2,
  }


def build_dqn(prioritized=False, seed=0):
  env = make_vector_env("CartPole-v1", 2, seed=seed)
  config = DQNConfig(
    num_actions=2,
    prioritized=prioritized,
    batch_size=8,
    learning_starts=16,
    epsilon_steps=200,
    target_sync_every=5,
    network=({"type": "dense", "units": 16, "activation": "relu"},),
    seed=seed,
  )
  return env, DQNBuilder(config).make_agent(env=env).build()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  """One built agent (prioritized replay on pure-TF segment trees, so
  plain TF loads it) and its export before any training."""
  with pytest.MonkeyPatch.context() as mp:
    mp.setattr(segment_tree, "DEFAULT_IMPL", "tf")
    env, ex = build_dqn(prioritized=True)
  path = str(tmp_path_factory.mktemp("dqn") / "agent")
  result = export_agent(ex, path)
  yield ex, path, result
  env.close()


@pytest.mark.slow
def test_fresh_process_acts_observes_updates_and_saves_again(
  exported, tmp_path, fresh_python
):
  ex = exported[0]
  space = ex.root.env.observation_space
  # A trained state: replay, priorities, Adam slots, epsilon step, RNGs.
  ex.execute("reset_env", 0)
  assert int(ex.execute("train", 30)["updates"]) > 0
  path = tmp_path / "agent"
  result = export_agent(ex, str(path))
  assert set(result.exported) == SIGNATURES
  assert set(result.skipped) == {"reset_env", "train"}
  assert result.custom_ops == []

  # Part a: 4 steps of batch 3; part b (after the re-save): 2 of batch 5.
  data = {
    **{f"a_{k}": v for k, v in make_data(space, 4, 3, 1).items()},
    **{f"b_{k}": v for k, v in make_data(space, 2, 5, 2).items()},
  }
  np.savez(tmp_path / "data.npz", **data)
  loaded = fresh_python(
    CHILD, path, tmp_path / "resaved", tmp_path / "data.npz"
  )

  namespace = {}
  exec(PLAY, namespace)
  call = in_process_call(ex)
  expected = {
    part: namespace["play"](
      call, {k[2:]: v for k, v in data.items() if k[:2] == prefix}
    )
    for part, prefix in (("first", "a_"), ("second", "b_"))
  }
  assert not loaded["ingraph_rl_loaded"]
  assert loaded["format_version"] == export_lib.FORMAT_VERSION
  assert loaded["skipped"] == ["reset_env", "train"]
  for part in ("first", "second"):
    got, want = loaded[part], expected[part]
    for key in ("actions", "size", "greedy", "train_step"):
      assert got[key] == want[key], (part, key)
    for key in ("q", "epsilon", "loss", "grad_norm"):
      np.testing.assert_allclose(
        got[key], want[key], rtol=1e-5, atol=1e-6, err_msg=f"{part} {key}"
      )
    assert got["weights"] == pytest.approx(want["weights"], rel=1e-5)
  # The re-saved agent kept the step count (two more updates in part b).
  assert expected["second"]["train_step"] == expected["first"]["train_step"] + 2


@pytest.mark.slow
def test_env_stepping_api_raises_naming_it(exported, tmp_path):
  ex, _, result = exported
  for api in ("train", "reset_env"):
    with pytest.raises(
      ExportError,
      match=f"API '{api}' steps an environment through tf.numpy_function",
    ) as e:
      export_agent(ex, str(tmp_path / api), apis=["get_actions", api])
    assert e.value.api == api
    assert not (tmp_path / api).exists()
  # Everything else: exported, and why the rest is not is recorded.
  assert set(result.exported) == SIGNATURES
  assert result.exported["action"] == "get_actions"
  assert set(result.skipped) == {"reset_env", "train"}
  assert "numpy_function" in result.skipped["train"]
  meta = read_metadata(result.path)
  assert meta["skipped"] == result.skipped
  assert meta["format_version"] == export_lib.FORMAT_VERSION
  with pytest.raises(ExportError, match="no built API"):
    export_agent(ex, str(tmp_path / "x"), apis=["act"])
  # A chosen subset is exported alone.
  part = export_agent(ex, str(tmp_path / "part"), apis=["get_actions"])
  assert set(part.exported) == {"action"} and part.skipped == {}


@pytest.mark.slow
def test_saved_model_cli_shows_named_signatures_with_open_batch(exported):
  cli = pathlib.Path(sys.executable).with_name("saved_model_cli")
  if not cli.exists():
    pytest.skip("saved_model_cli is not installed next to python")
  _, path, _ = exported
  out = subprocess.run(
    [str(cli), "show", "--dir", path, "--all"],
    capture_output=True,
    text=True,
    timeout=120,
    env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
  )
  assert out.returncode == 0, out.stderr[-3000:]
  sigs = {}
  for chunk in out.stdout.split("signature_def['")[1:]:
    name, body = chunk.split("']", 1)
    sigs[name] = body
  assert set(sigs) >= SIGNATURES | {"get_metadata"}

  def tensor(sig, kind, name):
    body = sigs[sig].split(f"{kind}['{name}'] tensor_info:", 1)[1]
    lines = body.strip().splitlines()[:2]
    return lines[0].split(":")[1].strip(), lines[1].split(":")[1].strip()

  assert tensor("action", "inputs", "states") == ("DT_FLOAT", "(-1, 4)")
  assert tensor("action", "inputs", "explore") == ("DT_BOOL", "()")
  assert tensor("action", "outputs", "actions") == ("DT_INT64", "(-1)")
  assert tensor("action", "outputs", "q_values") == ("DT_FLOAT", "(-1, 2)")
  assert tensor("observe", "inputs", "actions") == ("DT_INT64", "(-1)")
  assert tensor("observe", "inputs", "next_states") == ("DT_FLOAT", "(-1, 4)")
  assert tensor("update", "outputs", "loss") == ("DT_FLOAT", "()")
  assert tensor("get_train_step", "outputs", "train_step") == ("DT_INT64", "()")
  assert tensor("get_weights", "outputs", "torso/dense_0/kernel") == (
    "DT_FLOAT",
    "(4, 16)",
  )


def test_bad_input_fails_with_tf_signature_errors(exported):
  _, path, _ = exported
  sigs = tf.saved_model.load(path).signatures
  errors = (TypeError, ValueError, tf.errors.InvalidArgumentError)
  ok = sigs["action"](states=tf.zeros([2, 4]), explore=tf.constant(False))
  assert ok["actions"].shape == (2,)
  bad_calls = [
    lambda: sigs["action"](
      states=tf.zeros([2, 5]), explore=tf.constant(True)
    ),  # Shape.
    lambda: sigs["action"](
      states=tf.zeros([2, 4], tf.int32), explore=tf.constant(True)
    ),  # Dtype.
    lambda: sigs["action"](
      states=tf.zeros([4]), explore=tf.constant(True)
    ),  # Rank.
    lambda: sigs["action"](states=tf.zeros([2, 4])),  # Missing.
    lambda: sigs["action"](
      states=tf.zeros([2, 4]), explore=tf.constant(True), seed=tf.constant(1)
    ),  # Unknown.
    lambda: sigs["observe"](  # Batch dims
      states=tf.zeros([3, 4]),
      actions=tf.zeros([2], tf.int64),  # differ.
      rewards=tf.zeros([3]),
      next_states=tf.zeros([3, 4]),
      terminals=tf.zeros([3], tf.bool),
    ),
  ]
  for i, bad in enumerate(bad_calls):
    with pytest.raises(errors):
      bad()
      pytest.fail(f"bad call {i} did not raise")
  # Still usable afterwards.
  again = sigs["action"](states=tf.zeros([1, 4]), explore=tf.constant(False))
  assert again["actions"].shape == (1,)


def test_incompatible_format_version_gives_a_clear_message(exported, tmp_path):
  _, path, _ = exported
  assert int(load(path).signatures["get_train_step"]()["train_step"]) >= 0
  copy = tmp_path / "future"
  subprocess.run(["cp", "-r", path, str(copy)], check=True)
  meta_file = copy / "assets" / export_lib.METADATA_FILE
  meta = json.loads(meta_file.read_text())
  meta.update(format_version=99, ingraph_rl_version="9.0.0")
  meta_file.write_text(json.dumps(meta))
  with pytest.raises(
    ExportError,
    match=r"export format version 99, written "
    r"by ingraph_rl 9\.0\.0; this ingraph_rl .* reads "
    r"format version\(s\) \[1\]",
  ):
    load(str(copy))
  meta_file.unlink()
  with pytest.raises(ExportError, match="not an agent SavedModel"):
    load(str(copy))


@pytest.mark.slow
def test_custom_ops_are_recorded_or_refused(tmp_path, monkeypatch):
  from ingraph_rl import ops

  if ops.load_segment_tree_ops() is None:
    pytest.skip("the segment-tree op library is not built")
  monkeypatch.setattr(segment_tree, "DEFAULT_IMPL", "custom_op")
  config = DQNConfig(
    num_actions=2,
    prioritized=True,
    batch_size=4,
    learning_starts=4,
    network=({"type": "dense", "units": 8},),
  )
  ex = DQNBuilder(config).make_agent(FloatBox((4,))).build()
  with pytest.raises(ExportError, match="custom segment-tree ops"):
    export_agent(ex, str(tmp_path / "plain"), require_plain_tf=True)
  result = export_agent(ex, str(tmp_path / "agent"))
  assert "SegmentTreeUpdate" in result.custom_ops
  assert read_metadata(result.path)["custom_ops"] == result.custom_ops
  # ingraph_rl.export.load registers the ops, then loads.
  states = np.zeros((4, 4), np.float32)
  sigs = load(result.path).signatures
  sigs["observe"](
    states=states,
    actions=np.zeros(4, np.int64),
    rewards=np.ones(4, np.float32),
    next_states=states,
    terminals=np.zeros(4, bool),
  )
  assert np.isfinite(float(sigs["update"]()["loss"]))
