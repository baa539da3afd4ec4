"""SAC's updates on a fixed batch against a NumPy reference of the paper's
(and CleanRL's) formulas, in both backends (so TF and torch agree through
the same reference): the critic loss and its step, the actor loss and its
step, the temperature's Adam step, Polyak averaging of the targets, the
update schedule (target copy, delayed actor), the training loop's random
phase, and the config's checks.

Each update draws its actions' noise from the actor distribution's own
generator; the reference draws the same noise from a copy of it.
"""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.agents.sac import SACBuilder, SACConfig
from ingraph_rl.environments import make_vector_env
from ingraph_rl.errors import BuildError
from ingraph_rl.spaces import FloatBox

LOW, HIGH = (-2.0, -1.0), (2.0, 3.0)
OBS, B, H = FloatBox((3,)), 8, 16
GAMMA, TAU, LR = 0.9, 0.1, 1e-3
TARGET_APIS = ("update_critic", "sync_targets", "copy_targets")
# `update` inlines these: their components get their spaces from them.
UPDATE_APIS = (
  "observe",
  "update_critic",
  "update_actor",
  "update",
  "update_alpha",
)


def make_config(**kwargs):
  base = dict(
    action_low=LOW,
    action_high=HIGH,
    hidden_units=H,
    hidden_layers=2,
    buffer_size=100,
    batch_size=B,
    learning_starts=B,
    gamma=GAMMA,
    tau=TAU,
    policy_lr=LR,
    q_lr=LR,
    seed=3,
  )
  base.update(kwargs)
  return SACConfig(**base)


@pytest.fixture(params=["tf", "torch"])
def backend(request):
  return request.param


def build(backend, apis, **kwargs):
  """The agent with only `apis` built (each test's own: the builds are
  most of this file's time)."""
  root = SACBuilder(make_config(**kwargs)).make_agent(OBS)
  return dataclasses.replace(root, api_names=list(apis)).build(backend)


# --- the NumPy reference ---------------------------------------------------


def relu(x):
  return np.maximum(x, 0.0)


def mlp(w, prefix, x):
  for i in range(2):
    x = relu(
      x @ w[f"{prefix}/torso/dense_{i}/kernel"]
      + w[f"{prefix}/torso/dense_{i}/bias"]
    )
  return x @ w[f"{prefix}/head/kernel"] + w[f"{prefix}/head/bias"]


def actor(w, states, noise):
  """(actions, log_prob): CleanRL's Actor.get_action in float64."""
  out = mlp(w, "sac/actor", states)
  mean, raw = np.split(out, 2, axis=-1)
  log_std = -5.0 + 0.5 * 7.0 * (np.tanh(raw) + 1.0)
  std = np.exp(log_std)
  u = mean + std * noise
  low, high = np.array(LOW), np.array(HIGH)
  scale, shift = (high - low) / 2, (high + low) / 2
  y = np.tanh(u)
  log_normal = -0.5 * noise**2 - log_std - 0.5 * np.log(2 * np.pi)
  log_prob = np.sum(log_normal - np.log(scale * (1 - y**2)), axis=-1)
  return y * scale + shift, log_prob


def q(w, prefix, states, actions):
  x = np.concatenate([states, actions], -1)
  return mlp(w, prefix, x)[:, 0]


def weights(executor):
  return {k: np.float64(v) for k, v in executor.get_weights().items()}


def draw_noise(executor, shape):
  """The next normal draw of the actor distribution's generator (the
  executor's generator does not move)."""
  rng = executor.root.actor.distribution.rng
  if isinstance(rng, tf.random.Generator):
    # checks.tf_draw's seed: the ends of the generator's state.
    state = rng.state.numpy()
    seed = tf.constant([state[0], state[-1]])
    return np.float64(tf.random.stateless_normal(shape, seed).numpy())
  import torch

  copy = torch.Generator()
  copy.set_state(rng.get_state())
  return np.float64(torch.randn(shape, generator=copy).numpy())


def fixed_batch(seed=0):
  rng = np.random.default_rng(seed)
  low, high = np.array(LOW), np.array(HIGH)
  return dict(
    states=rng.normal(size=(B, 3)).astype(np.float32),
    actions=rng.uniform(low, high, size=(B, 2)).astype(np.float32),
    rewards=rng.normal(size=B).astype(np.float32),
    next_states=rng.normal(size=(B, 3)).astype(np.float32),
    terminals=np.array([0, 0, 1, 0, 0, 0, 1, 0], bool),
  )


def critic_loss(w, b, noise):
  alpha = np.exp(w["sac/temperature/log_alpha"])
  nxt, logp = actor(w, np.float64(b["next_states"]), noise)
  soft = (
    np.minimum(
      q(w, "sac/target_critic/q1", b["next_states"], nxt),
      q(w, "sac/target_critic/q2", b["next_states"], nxt),
    )
    - alpha * logp
  )
  y = b["rewards"] + GAMMA * (1 - b["terminals"]) * soft
  q1 = q(w, "sac/critic/q1", b["states"], b["actions"])
  q2 = q(w, "sac/critic/q2", b["states"], b["actions"])
  return np.mean((q1 - y) ** 2), np.mean((q2 - y) ** 2), q1, q2


def actor_loss(w, states, noise):
  alpha = np.exp(w["sac/temperature/log_alpha"])
  pi, logp = actor(w, np.float64(states), noise)
  m = np.minimum(
    q(w, "sac/critic/q1", states, pi), q(w, "sac/critic/q2", states, pi)
  )
  return np.mean(alpha * logp - m), logp


def part(w, prefix):
  return {k: v for k, v in w.items() if k.startswith(prefix)}


def assert_same(a, b):
  assert a.keys() == b.keys()
  for k in a:
    np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def numpy(x):
  return np.asarray(x.detach() if hasattr(x, "detach") else x)


# --- the updates -------------------------------------------------------------


@pytest.mark.slow
def test_critic_update_matches_numpy(backend):
  ex, b = build(backend, ["update_critic", "get_train_step"]), fixed_batch()
  before = weights(ex)
  noise = draw_noise(ex, (B, 2))
  qf1, qf2, q1, q2 = critic_loss(before, b, noise)
  out = {
    k: numpy(v) for k, v in ex.execute("update_critic", *b.values()).items()
  }
  np.testing.assert_allclose(out["qf1_loss"], qf1, rtol=2e-4)
  np.testing.assert_allclose(out["qf2_loss"], qf2, rtol=2e-4)
  np.testing.assert_allclose(out["qf_loss"], (qf1 + qf2) / 2, rtol=2e-4)
  np.testing.assert_allclose(out["qf1_values"], q1.mean(), rtol=2e-4, atol=1e-6)
  np.testing.assert_allclose(out["alpha"], 1.0, rtol=1e-6)  # log alpha 0.
  after = weights(ex)
  # Only the Qs moved, and their loss on the same draw went down.
  for prefix in ("sac/actor", "sac/target_critic", "sac/temperature"):
    assert_same(part(before, prefix), part(after, prefix))
  assert all(
    not np.array_equal(before[k], after[k]) for k in part(before, "sac/critic/")
  )
  new1, new2, _, _ = critic_loss(after, b, noise)
  assert new1 + new2 < qf1 + qf2
  assert int(ex.execute("get_train_step")) == 1


def test_actor_update_matches_numpy(backend):
  ex, b = build(backend, ["update_actor"]), fixed_batch(1)
  before = weights(ex)
  noise = draw_noise(ex, (B, 2))
  loss, logp = actor_loss(before, b["states"], noise)
  out = ex.execute("update_actor", b["states"])
  np.testing.assert_allclose(
    numpy(out["actor_loss"]), loss, rtol=2e-4, atol=1e-5
  )
  np.testing.assert_allclose(numpy(out["entropy"]), -logp.mean(), rtol=2e-4)
  after = weights(ex)
  for prefix in ("sac/critic", "sac/target_critic", "sac/temperature"):
    assert_same(part(before, prefix), part(after, prefix))
  assert actor_loss(after, b["states"], noise)[0] < loss


def test_temperature_update_is_adams_first_step(backend):
  ex, b = build(backend, ["update_alpha"]), fixed_batch(2)
  w = weights(ex)
  noise = draw_noise(ex, (B, 2))
  _, logp = actor(w, np.float64(b["states"]), noise)
  target_entropy = -2.0
  log_alpha = w["sac/temperature/log_alpha"]
  held = logp + target_entropy
  # loss = mean(-exp(log_alpha) * held); d/dlog_alpha = the same.
  grad = -np.exp(log_alpha) * held.mean()
  # Adam's first step: lr * m_hat / (sqrt(v_hat) + eps) = lr * sign(grad).
  expected = log_alpha - LR * grad / (abs(grad) + 1e-8)
  out = ex.execute("update_alpha", b["states"])
  np.testing.assert_allclose(numpy(out["alpha_loss"]), grad, rtol=2e-4)
  new = weights(ex)["sac/temperature/log_alpha"]
  np.testing.assert_allclose(new, expected, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(numpy(out["alpha"]), np.exp(expected), rtol=1e-5)
  assert_same(part(w, "sac/actor"), part(weights(ex), "sac/actor"))


@pytest.mark.slow
def test_targets_copy_and_polyak_average(backend):
  ex = build(backend, TARGET_APIS, target_network_frequency=2)
  w = weights(ex)
  critic = {
    k[len("sac/critic/") :]: v for k, v in part(w, "sac/critic/").items()
  }
  target = {
    k[len("sac/target_critic/") :]: v
    for k, v in part(w, "sac/target_critic/").items()
  }
  assert not np.allclose(critic["q1/head/kernel"], target["q1/head/kernel"])
  assert not bool(numpy(ex.execute("sync_targets")))  # 1st call of every 2.
  assert_same(
    part(weights(ex), "sac/target_critic"), part(w, "sac/target_critic")
  )
  assert bool(numpy(ex.execute("sync_targets")))
  now = weights(ex)
  for k in critic:
    np.testing.assert_allclose(
      now[f"sac/target_critic/{k}"],
      TAU * critic[k] + (1 - TAU) * target[k],
      rtol=1e-5,
      atol=1e-7,
    )
  assert bool(numpy(ex.execute("copy_targets")))
  now = weights(ex)
  for k in critic:
    np.testing.assert_array_equal(now[f"sac/target_critic/{k}"], critic[k])


@pytest.mark.slow
def test_update_schedule_copies_targets_and_delays_the_actor(backend):
  """Update 1: targets start as the Qs, one critic step, no actor step,
  then the Polyak move. Update 2: critic step and policy_frequency actor
  and temperature steps."""
  ex = build(backend, UPDATE_APIS, policy_frequency=2)
  b = fixed_batch(3)
  ex.execute("observe", *b.values())
  w0 = weights(ex)
  out = {k: numpy(v) for k, v in ex.execute("update").items()}
  assert not bool(out["actor_updated"]) and float(out["actor_loss"]) == 0.0
  w1 = weights(ex)
  assert_same(part(w0, "sac/actor"), part(w1, "sac/actor"))
  for k in part(w0, "sac/critic/"):
    name = k[len("sac/critic/") :]
    np.testing.assert_allclose(
      w1[f"sac/target_critic/{name}"],
      TAU * w1[k] + (1 - TAU) * w0[k],
      rtol=1e-5,
      atol=1e-7,
    )
  out = {k: numpy(v) for k, v in ex.execute("update").items()}
  assert bool(out["actor_updated"]) and np.isfinite(out["actor_loss"])
  state = ex.get_weights()
  assert int(state["sac/q_optimizer/iterations"]) == 2
  assert int(state["sac/policy_optimizer/iterations"]) == 2
  assert int(state["sac/alpha_optimizer/iterations"]) == 2


@pytest.mark.slow
def test_fixed_temperature_without_autotune(backend):
  ex = build(backend, UPDATE_APIS[:-1], autotune=False, alpha=0.05)
  assert "update_alpha" not in SACBuilder(
    make_config(autotune=False)
  ).api_names(False)
  b = fixed_batch(4)
  out = ex.execute("update_critic", *b.values())
  np.testing.assert_allclose(numpy(out["alpha"]), 0.05, rtol=1e-6)
  ex.execute("observe", *b.values())
  for _ in range(2):
    out = ex.execute("update")
  np.testing.assert_allclose(numpy(out["alpha"]), 0.05, rtol=1e-6)
  assert float(numpy(out["alpha_loss"])) == 0.0


@pytest.mark.slow
def test_deterministic_actions_are_the_squashed_mean(backend):
  ex = build(backend, ["get_actions"])
  states = fixed_batch()["states"]
  got = numpy(ex.execute("get_actions", states, False)["actions"])
  out = mlp(weights(ex), "sac/actor", np.float64(states))
  low, high = np.array(LOW), np.array(HIGH)
  expected = np.tanh(out[:, :2]) * (high - low) / 2 + (high + low) / 2
  np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
  explored = numpy(ex.execute("get_actions", states, True)["actions"])
  assert np.all(explored >= low) and np.all(explored <= high)
  assert not np.allclose(explored, got)


# --- the in-graph loop ------------------------------------------------------


def pendulum_loop(backend, num_envs=1, batch_size=16, learning_starts=40):
  """(env, executor) of a small SAC on Pendulum, its env reset."""
  env = make_vector_env("Pendulum-v1", num_envs, 0)
  config = SACConfig.for_env(
    env,
    hidden_units=H,
    batch_size=batch_size,
    learning_starts=learning_starts,
    buffer_size=500,
  )
  ex = SACBuilder(config).make_agent(env=env).build(backend)
  ex.execute("reset_env", 0)
  return env, ex


def train(ex, steps):
  return {k: numpy(v) for k, v in ex.execute("train", steps).items()}


@pytest.mark.slow
def test_training_loop_random_phase_then_one_update_per_step(backend):
  env, ex = pendulum_loop(backend)
  stats = train(ex, 30)
  assert int(stats["env_steps"]) == 30 and int(stats["updates"]) == 0
  state = ex.get_weights()
  assert int(state["sac/policy_optimizer/iterations"]) == 0
  actions = state["sac/memory/buffer.actions"][:30]
  assert np.all(np.abs(actions) <= 2.0) and actions.std() > 0.5  # U(-2, 2).
  stats = train(ex, 30)
  # Updates once more than learning_starts env steps are done.
  assert int(stats["env_steps"]) == 60 and int(stats["updates"]) == 20
  assert int(stats["actor_updates"]) == 10
  assert int(ex.execute("get_train_step")) == 20
  state = ex.get_weights()
  stored = state["sac/memory/buffer.states"][:60]
  # Each stored next state is the following step's state (one env, no
  # episode end in 60 of Pendulum's 200 steps).
  np.testing.assert_array_equal(
    state["sac/memory/buffer.next_states"][:59], stored[1:]
  )
  env.close()


@pytest.mark.slow
def test_training_loop_first_vector_step_stores_before_any_update(backend):
  # 4 envs, learning_starts 2: the first vector step is past it, but its
  # update would come before anything is stored (nothing to sample).
  env, ex = pendulum_loop(backend, num_envs=4, batch_size=2, learning_starts=2)
  stats = train(ex, 1)
  assert int(stats["env_steps"]) == 4 and int(stats["updates"]) == 0
  stats = train(ex, 3)
  assert int(stats["env_steps"]) == 16 and int(stats["updates"]) == 3
  env.close()


def _node_name(ref):
  return ref.lstrip("^").split(":")[0]


def _calls(node):
  """Names of the functions a FunctionDef node calls (If branches, ...)."""
  return [v.func.name for v in node.attr.values() if v.func.name]


def _reaches(graph, start, target):
  """Whether `target` feeds `start` (through data or control inputs)."""
  seen, todo = set(), [start]
  while todo:
    name = todo.pop()
    if name == target:
      return True
    if name not in seen and name in graph:
      seen.add(name)
      todo.extend(_node_name(i) for i in graph[name].input)
  return False


@pytest.mark.slow
def test_training_loop_env_step_does_not_wait_for_the_update():
  # The env step needs only the actions: nothing orders it after (or
  # before) the update, so the executor overlaps the two.
  env, ex = pendulum_loop("tf")
  graph = ex.function("train").get_concrete_function().graph.as_graph_def()
  library = {f.signature.name: f for f in graph.library.function}

  def applies_adam(name, seen=()):
    fn = library.get(name)
    if fn is None or name in seen:
      return False
    return any(
      n.op == "ResourceApplyAdam"
      or any(applies_adam(f, seen + (name,)) for f in _calls(n))
      for n in fn.node_def
    )

  (body,) = [
    f for f in library.values() if any(n.op == "PyFunc" for n in f.node_def)
  ]
  nodes = {n.name: n for n in body.node_def}
  (env_step,) = [n.name for n in body.node_def if n.op == "PyFunc"]
  (update,) = [
    n.name
    for n in body.node_def
    if n.op in ("If", "StatelessIf") and any(map(applies_adam, _calls(n)))
  ]
  assert not _reaches(nodes, env_step, update)
  assert not _reaches(nodes, update, env_step)
  env.close()


# --- the config --------------------------------------------------------------


@pytest.mark.parametrize(
  "kwargs, message",
  [
    (dict(action_low=(1.0,), action_high=(-1.0,)), "finite with high > low"),
    (dict(action_low=(-1.0, -1.0), action_high=(1.0,)), "one bound per"),
    (dict(tau=0.0), "tau"),
    (dict(gamma=1.5), "gamma"),
    (dict(batch_size=500), "batch_size"),
    (dict(learning_starts=2), "learning_starts"),
    (dict(policy_frequency=0), "policy_frequency"),
    (dict(q_lr=0.0), "q_lr"),
    (dict(alpha=float("nan"), autotune=False), "alpha"),
  ],
)
def test_config_refuses(kwargs, message):
  with pytest.raises(BuildError, match=message):
    make_config(**kwargs)


def test_builder_refuses_an_env_of_another_box():
  env = make_vector_env("Pendulum-v1", 1, 0)
  with pytest.raises(BuildError, match="action space"):
    SACBuilder(make_config()).make_agent(env=env)
  env.close()
