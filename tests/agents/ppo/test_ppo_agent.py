"""The PPO agent: rollout and update as one graph call each, TF <-> torch
parity of the update, target_kl's early stop, observation normalization
against NumPy, Gaussian actions on MuJoCo, and refused bad input."""

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.agents.ppo import PPOBuilder, PPOConfig
from ingraph_rl.environments import make_vector_env
from ingraph_rl.errors import SpaceError

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def cartpole_agent(num_envs=2, **kwargs):
  env = make_vector_env("CartPole-v1", num_envs=num_envs, seed=0)
  config = PPOConfig(
    num_actions=2, num_steps=kwargs.pop("num_steps", 16), **kwargs
  )
  agent = PPOBuilder(config).make_agent(env=env).build()
  agent.execute("reset_env", 0)
  return agent, env


def numpy_tree(x):
  return tf.nest.map_structure(lambda v: np.asarray(v), x)


@pytest.mark.slow
def test_rollout_layout_and_stats():
  agent, env = cartpole_agent(num_envs=3, num_steps=40)
  first = agent.variables()["ppo/last_obs"].numpy()
  out = agent.execute("rollout")
  batch = numpy_tree(out["batch"])
  assert batch["observations"].shape == (3, 40, 4)
  assert batch["actions"].shape == (3, 40) and batch[
    "bootstrap_value"
  ].shape == (3,)
  np.testing.assert_array_equal(batch["observations"][:, 0], first)
  # Rewards are CartPole's 1 per step; an ended episode's next obs is a reset.
  assert (batch["rewards"] == 1.0).all()
  # Each step's log prob and value are the policy's (same weights).
  probs = np.exp(batch["log_probs"])
  assert ((probs > 0.3) & (probs < 0.7)).all()  # Near-uniform at init.
  stats = numpy_tree(out["stats"])
  assert stats["env_steps"] == 120
  assert stats["episodes"] == batch["dones"].sum()
  if stats["episodes"]:
    assert stats["length_sum"] == stats["return_sum"]
  # The next rollout starts where this one ended.
  last = agent.variables()["ppo/last_obs"].numpy()
  out2 = agent.execute("rollout")
  np.testing.assert_array_equal(
    numpy_tree(out2["batch"])["observations"][:, 0], last
  )
  assert int(out2["stats"]["env_steps"]) == 240


@pytest.mark.slow
def test_rollout_steps_the_env_after_the_act_and_skips_the_mode():
  # The env step waits on the act's outputs (the executor then runs it
  # inline, no hop to another thread), and no argmax is computed to be
  # dropped by the exploring rollout.
  agent, _ = cartpole_agent()
  graph = agent.function("rollout").get_concrete_function().graph
  (body,) = [
    f
    for f in graph.as_graph_def().library.function
    if "while_body" in f.signature.name
  ]
  ops = [n.op for n in body.node_def]
  (step,) = [n for n in body.node_def if n.op == "PyFunc"]
  waits_on = {i[1:].split(":")[0] for i in step.input if i.startswith("^")}
  assert any("distribution" in name for name in waits_on), waits_on
  assert "ArgMax" not in ops


@pytest.mark.slow
def test_update_tf_matches_torch():
  """Two epochs of two minibatches (SubsamplingStep's counter-based
  shuffle draws the same minibatches in both backends) give the same
  stats and weights."""
  env = make_vector_env("CartPole-v1", num_envs=2, seed=0)
  config = PPOConfig(
    num_actions=2,
    num_steps=16,
    num_minibatches=2,
    update_epochs=2,
    num_updates=10,
  )
  builder = PPOBuilder(config)
  tf_agent = builder.make_agent(env=env).build()
  tf_agent.execute("reset_env", 0)
  batch = numpy_tree(tf_agent.execute("rollout")["batch"])
  torch_agent = builder.make_agent(
    observation_space=env.observation_space,
    # get_actions' flow builds the network the inlined loss uses.
    api_names=("get_actions", "update", "get_weights", "set_weights"),
  ).build("torch")
  before = tf_agent.execute("get_weights")
  torch_agent.execute("set_weights", numpy_tree(before))
  a = numpy_tree(tf_agent.execute("update", batch))
  b = numpy_tree(torch_agent.execute("update", batch))
  for k in (
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "grad_norm",
    "explained_variance",
  ):
    np.testing.assert_allclose(a[k], b[k], rtol=2e-4, atol=2e-6, err_msg=k)
  assert a["train_step"] == b["train_step"] == 4
  after_tf = numpy_tree(tf_agent.execute("get_weights"))
  after_torch = numpy_tree(torch_agent.execute("get_weights"))
  moved = 0
  for path, value in after_tf.items():
    np.testing.assert_allclose(
      value, after_torch[path], rtol=1e-4, atol=1e-6, err_msg=path
    )
    moved += not np.allclose(value, np.asarray(before[path]))
  assert moved >= 4  # The update changed the weights.


@pytest.mark.slow  # ~30 s on a loaded 2-core machine (two builds).
def test_update_counts_and_target_kl_stops_early():
  agent, _ = cartpole_agent(
    num_steps=32,
    num_minibatches=4,
    update_epochs=3,
    learning_rate=1e-3,
    num_updates=4,
  )
  batch = agent.execute("rollout")["batch"]
  out = numpy_tree(agent.execute("update", batch))
  assert out["epochs"] == 3 and out["train_step"] == 12
  assert out["frames"] == 64
  # lr annealed: update 0 at the full rate, update 1 at 3/4 of it.
  assert out["learning_rate"] == pytest.approx(1e-3)
  out = numpy_tree(agent.execute("update", batch))
  assert out["learning_rate"] == pytest.approx(0.75e-3)
  # A tiny target_kl: the first epoch's last minibatch exceeds it.
  agent, _ = cartpole_agent(
    num_steps=32, update_epochs=5, learning_rate=1e-2, target_kl=1e-9
  )
  out = numpy_tree(agent.execute("update", agent.execute("rollout")["batch"]))
  assert out["epochs"] == 1 and out["train_step"] == 4


@pytest.mark.slow  # ~25 s on a loaded 2-core machine.
def test_observation_normalization_matches_numpy_running_stats():
  """Gaussian PPO on HalfCheetah-v5 with CleanRL's normalizations: the
  stored observations are NumPy's running-mean/std normalization of the
  raw ones (gymnasium's formula), the actions are [T, 6] floats."""
  env = make_vector_env("HalfCheetah-v5", num_envs=2, seed=0)
  config = PPOConfig(
    action_dim=6,
    num_steps=8,
    normalize_observations=True,
    normalize_rewards=True,
    ent_coef=0.0,
  )
  agent = PPOBuilder(config).make_agent(env=env).build()
  raw = [env.reset(seed=5)]
  agent.execute("reset_env", 5)
  out = agent.execute("rollout")
  batch = numpy_tree(out["batch"])
  assert (
    batch["actions"].shape == (2, 8, 6) and batch["actions"].dtype == np.float32
  )
  # Replay the same env steps in NumPy: the raw observations are what the
  # env gave for the batch's (clipped) actions.
  env2 = make_vector_env("HalfCheetah-v5", num_envs=2, seed=0)
  raw = [env2.reset(seed=5)]
  for t in range(8):
    raw.append(env2.step(np.clip(batch["actions"][:, t], -1, 1)).obs)
  mean, var, count = np.zeros(17), np.ones(17), 1e-4
  normalized = []
  for x in raw:
    bm, bv, n = x.mean(0), x.var(0), x.shape[0]
    delta, total = bm - mean, count + n
    mean = mean + delta * n / total
    var = (var * count + bv * n + delta**2 * count * n / total) / total
    count = total
    normalized.append(np.clip((x - mean) / np.sqrt(var + 1e-8), -10, 10))
  np.testing.assert_allclose(
    batch["observations"], np.stack(normalized[:8], 1), rtol=1e-4, atol=1e-4
  )
  stats = agent.variables()
  np.testing.assert_allclose(
    stats["ppo/model/obs_rms/mean"].numpy(), mean, rtol=1e-6
  )
  # Rewards are scaled (the running std of the discounted return).
  assert (
    np.isfinite(batch["rewards"]).all()
    and (np.abs(batch["rewards"]) <= 10).all()
  )
  out = numpy_tree(agent.execute("update", out["batch"]))
  assert np.isfinite(out["policy_loss"]) and out["train_step"] == 4 * 4


@pytest.mark.slow
def test_bad_batch_is_refused_without_state_change():
  agent, _ = cartpole_agent()
  batch = numpy_tree(agent.execute("rollout")["batch"])
  before = numpy_tree(agent.execute("get_weights"))
  step = int(agent.execute("get_train_step"))
  bad = dict(batch, rewards=batch["rewards"].copy())
  bad["rewards"][0, 3] = np.nan
  with pytest.raises(SpaceError, match="rewards"):
    agent.execute("update", bad)
  bad = dict(batch, actions=batch["actions"] + 5)  # Outside [0, 2).
  with pytest.raises(SpaceError, match="actions"):
    agent.execute("update", bad)
  bad = dict(batch, values=batch["values"][:, :-1])  # Wrong T.
  with pytest.raises(SpaceError):
    agent.execute("update", bad)
  assert int(agent.execute("get_train_step")) == step
  for path, value in numpy_tree(agent.execute("get_weights")).items():
    np.testing.assert_array_equal(value, before[path])


@pytest.mark.parametrize("shared,continuous", [(False, True), (True, False)])
def test_actor_critic_variables_split_into_policy_and_value(shared, continuous):
  """policy_variables and value_variables partition the network's
  variables (TRPO moves them with different optimizers)."""
  from ingraph_rl.agents.ppo import ActorCritic
  from ingraph_rl.executors.tensorflow import TFExecutor
  from ingraph_rl.spaces import FloatBox

  config = PPOConfig(
    num_actions=None if continuous else 3,
    action_dim=2 if continuous else None,
    shared_torso=shared,
  )
  ex = TFExecutor(
    ActorCritic(config),
    {"observations": FloatBox((4,), add_batch_rank=True)},
    api_names=["call", "variables", "policy_variables", "value_variables"],
  )
  every = set(ex.execute("variables"))
  policy = set(ex.execute("policy_variables"))
  value = set(ex.execute("value_variables"))
  assert policy | value == every and not policy & value
  assert ("log_std/log_std" in policy) == continuous
  assert any(p.startswith("value_torso/") for p in value) == (not shared)


@pytest.mark.slow  # ~30 s on a loaded 2-core machine (two builds).
def test_minibatch_step_is_one_step_of_update():
  """With one epoch of one minibatch, `update` is GAE plus ONE Adam step on
  the whole batch: `minibatch_step` on the same samples (advantages from
  the NumPy reference of GAE) leaves the same weights. What the Python
  minibatch loop of benchmarks/ppo_throughput.py drives."""
  from tests.agents.ppo.test_gae_and_loss import numpy_gae

  env = make_vector_env("CartPole-v1", num_envs=2, seed=0)
  config = PPOConfig(
    num_actions=2, num_steps=16, num_minibatches=1, update_epochs=1
  )
  builder = PPOBuilder(config)
  a = builder.make_agent(env=env).build()
  b = builder.make_agent(env=env).build()  # Same seed: same weights.
  a.execute("reset_env", 0)
  batch = numpy_tree(a.execute("rollout")["batch"])
  adv, ret = numpy_gae(
    batch["rewards"],
    batch["values"],
    batch["dones"],
    batch["bootstrap_value"],
    config.gamma,
    config.gae_lambda,
  )

  def flat(x):
    return np.asarray(x).reshape((-1,) + np.shape(x)[2:])

  a.execute("update", batch)
  b.execute(
    "minibatch_step",
    flat(batch["observations"]),
    flat(batch["actions"]),
    flat(batch["log_probs"]),
    flat(batch["values"]),
    flat(adv).astype(np.float32),
    flat(ret).astype(np.float32),
  )
  wa, wb = (
    numpy_tree(a.execute("get_weights")),
    numpy_tree(b.execute("get_weights")),
  )
  for path in wa:
    np.testing.assert_allclose(wa[path], wb[path], rtol=1e-5, atol=1e-6)
  assert (
    int(a.execute("get_train_step")) == int(b.execute("get_train_step")) == 1
  )


@pytest.mark.parametrize(
  "returns, values",
  [([1.0, 2.0, 4.0], [1.5, 2.0, 3.0]), ([3.0, 3.0], [1.0, 2.0]), ([], [])],
)
def test_explained_variance_matches_numpy_without_warnings(returns, values):
  import warnings

  import torch

  from ingraph_rl.agents.ppo.agent import (
    tf_explained_variance,
    torch_explained_variance,
  )

  r, v = np.asarray(returns, np.float32), np.asarray(values, np.float32)
  with np.errstate(all="ignore"), warnings.catch_warnings():
    warnings.simplefilter("ignore")
    var = np.mean((r - r.mean()) ** 2)  # NaN when empty.
    expected = np.nan if var == 0 or r.size == 0 else 1 - np.var(r - v) / var
  with warnings.catch_warnings():
    warnings.simplefilter("error", UserWarning)  # torch's var() warned.
    got_torch = float(
      torch_explained_variance(torch.tensor(r), torch.tensor(v))
    )
  got_tf = float(tf_explained_variance(tf.constant(r), tf.constant(v)))
  np.testing.assert_allclose([got_tf, got_torch], [expected] * 2, rtol=1e-6)
