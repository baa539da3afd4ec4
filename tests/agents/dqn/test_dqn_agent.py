"""The DQN agent: config checks, API spaces and errors, TF-vs-torch parity of
acting, the in-graph loop's bookkeeping, n-step transitions in the memory
against a Python recomputation, and learning CartPole."""

import numpy as np
import pytest

from ingraph_rl.agents.dqn import DQNAgent, DQNBuilder, DQNConfig
from ingraph_rl.environments import GymnasiumVectorEnv
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.runners.evaluation import mean_greedy_return
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing.component_test import to_numpy
from ingraph_rl.testing.references import RecordingEnv, recompute_n_step

OBS = FloatBox((4,))


def test_config_checks_name_every_problem():
  with pytest.raises(BuildError) as e:
    DQNConfig(
      num_actions=1,
      discount=1.5,
      batch_size=0,
      n_step=0,
      compute_dtype="float16",
    )
  msg = str(e.value)
  for part in (
    "compute_dtype must be one of ('float32', 'bfloat16'), got 'float16'",
    "num_actions must be >= 2",
    "discount must lie in [0, 1]",
    "n_step must be >= 1",
    "batch_size",
  ):
    assert part in msg


def test_bfloat16_update():
  # The config reaches the torso (the head stays float32), and an update
  # through bfloat16 products moves the float32 variables.
  config = DQNConfig(
    num_actions=3, batch_size=8, learning_starts=8, compute_dtype="bfloat16"
  )
  agent = DQNAgent(config)
  torso = [c for c in agent.online.torso.walk() if hasattr(c, "compute_dtype")]
  assert torso and all(c.compute_dtype == "bfloat16" for c in torso)
  ex = DQNBuilder(config).make_agent(OBS).build()
  states = FloatBox((4,), add_batch_rank=True).sample(16, seed=0)
  ex.execute(
    "observe",
    states,
    np.arange(16) % 3,
    np.ones(16, np.float32),
    states,
    np.zeros(16, bool),
  )
  before = ex.get_weights()
  stats = {k: float(v) for k, v in ex.execute("update").items()}
  assert np.isfinite(stats["loss"]) and stats["grad_norm"] > 0
  after = ex.get_weights()
  kernel = "dqn/online/torso/dense_0/kernel"
  assert after[kernel].dtype == np.float32
  assert not np.array_equal(after[kernel], before[kernel])


@pytest.mark.slow
@pytest.mark.parametrize("prioritized", [False, True])
def test_apis_and_output_spaces(prioritized):
  builder = DQNBuilder(
    DQNConfig(
      num_actions=3, prioritized=prioritized, batch_size=8, learning_starts=8
    )
  )
  ex = builder.make_agent(OBS).build()
  assert set(ex.apis) == {
    "get_actions",
    "observe",
    "update",
    "sync_target",
    "get_weights",
    "get_train_step",
  }
  out = ex.apis["get_actions"].output_space
  assert out["actions"].num_categories == 3
  states = FloatBox((4,), add_batch_rank=True).sample(16, seed=0)
  actions = np.arange(16) % 3
  ex.execute(
    "observe",
    states,
    actions,
    np.ones(16, np.float32),
    states,
    np.zeros(16, bool),
  )
  assert int(ex.execute("get_train_step")) == 0
  stats = {k: float(v) for k, v in ex.execute("update").items()}
  assert set(stats) == {"loss", "grad_norm", "mean_q"}
  assert int(ex.execute("get_train_step")) == 1
  weights = ex.execute("get_weights")
  assert set(weights) == {
    k[len("dqn/online/") :]
    for k in ex.get_weights()
    if k.startswith("dqn/online/")
  }
  assert np.isfinite(list(stats.values())).all()
  assert bool(ex.execute("sync_target"))


def test_bad_input_is_named():
  ex = DQNBuilder(DQNConfig(num_actions=2)).make_agent(OBS).build()
  with pytest.raises(
    SpaceError,
    match="component 'dqn', API method "
    "'get_actions', argument 'states': shape mismatch",
  ):
    ex.execute("get_actions", np.zeros((2, 5), np.float32), True)
  with pytest.raises(SpaceError, match="argument 'actions': dtype mismatch"):
    s = np.zeros((2, 4), np.float32)
    ex.execute(
      "observe",
      s,
      np.zeros(2, np.int32),
      np.zeros(2, np.float32),
      s,
      np.zeros(2, bool),
    )


def test_greedy_actions_match_between_backends():
  config = DQNConfig(num_actions=2)
  tf_ex = DQNBuilder(config).make_agent(OBS).build()
  torch_ex = DQNBuilder(config).make_agent(OBS).build("torch")
  torch_ex.set_weights(tf_ex.get_weights())
  states = FloatBox((4,), add_batch_rank=True).sample(32, seed=1)
  a = to_numpy(tf_ex.execute("get_actions", states, False))
  b = to_numpy(torch_ex.execute("get_actions", states, False))
  np.testing.assert_allclose(b["q_values"], a["q_values"], rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(b["actions"], a["actions"])
  np.testing.assert_array_equal(a["actions"], a["q_values"].argmax(-1))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_in_graph_loop_bookkeeping(backend):
  env = GymnasiumVectorEnv("CartPole-v1", num_envs=2, seed=3)
  config = DQNConfig(
    num_actions=2, batch_size=16, learning_starts=40, target_sync_every=7
  )
  ex = DQNBuilder(config).make_agent(env=env).build(backend)
  ex.execute("reset_env", 3)
  stats = {
    k: int(v) if "sum" not in k else float(v)
    for k, v in ex.execute("train", 60).items()
  }
  assert stats["env_steps"] == 120
  # Updates once 40 env steps (20 vector steps) are in: steps 20..60.
  assert stats["updates"] == 41
  assert (
    int(
      ex.execute("get_actions", np.zeros((1, 4), np.float32), False)[
        "actions"
      ].shape[0]
    )
    == 1
  )
  # CartPole pays 1 per step: finished returns equal finished lengths.
  assert stats["return_sum"] == stats["length_sum"] > 0
  assert stats["episodes"] >= 1
  assert int(ex.get_weights()["dqn/memory/size"]) == 120


# Each backend and each memory once in `make test`; the other two pairs in
# `make test-all` (suite time).
@pytest.mark.parametrize(
  "backend,prioritized",
  [
    pytest.param("tf", False, marks=pytest.mark.slow),
    ("tf", True),
    ("torch", False),
    pytest.param("torch", True, marks=pytest.mark.slow),
  ],
)
@pytest.mark.slow
def test_n_step_memory_matches_a_python_recomputation(backend, prioritized):
  """3-step in-graph training on CartPole with a 15-step time limit (so
  episodes end both ways); the memory holds exactly the n-step transitions
  recomputed from the recorded steps, rewards and discounts included."""
  env = RecordingEnv(
    GymnasiumVectorEnv("CartPole-v1", num_envs=3, seed=5, max_episode_steps=15)
  )
  config = DQNConfig(
    num_actions=2,
    n_step=3,
    discount=0.9,
    batch_size=16,
    learning_starts=64,
    replay_capacity=1000,
    prioritized=prioritized,
    target_sync_every=50,
  )
  ex = DQNBuilder(config).make_agent(env=env).build(backend)
  ex.execute("reset_env", 5)
  stats = to_numpy(ex.execute("train", 200))
  assert int(stats["updates"]) > 100 and np.isfinite(stats["loss_sum"])
  want, num_terminated, num_truncated = recompute_n_step(env, 3, 0.9)
  assert num_terminated > 5 and num_truncated > 5
  w = ex.get_weights()
  size = int(w["dqn/memory/size"])
  assert size == len(want["rewards"]) > 500
  for k in want:
    np.testing.assert_allclose(
      w[f"dqn/memory/buffer.{k}"][:size], want[k], rtol=1e-5, err_msg=k
    )
  assert set(np.round(want["discounts"], 6)) == {0.9, 0.81, 0.729}
  # What is still pending: at most n - 1 = 2 steps per env.
  assert len(want["rewards"]) + w["dqn/n_step/pending"].sum() == 600


@pytest.mark.slow
def test_n_step_user_api():
  config = DQNConfig(
    num_actions=3, n_step=2, num_envs=4, batch_size=8, learning_starts=8
  )
  ex = DQNBuilder(config).make_agent(OBS).build()
  assert list(ex.apis["observe"].arg_spaces) == [
    "states",
    "actions",
    "rewards",
    "next_states",
    "terminals",
    "truncated",
  ]
  states = FloatBox((4,), add_batch_rank=True).sample(4, seed=0)
  actions = np.arange(4) % 3
  no = np.zeros(4, bool)
  sizes = [
    int(
      ex.execute(
        "observe", states, actions, np.ones(4, np.float32), states, no, no
      )
    )
    for _ in range(3)
  ]
  assert sizes == [0, 4, 8]
  truncated = np.array([False, True, False, False])
  assert (
    int(
      ex.execute(
        "observe",
        states,
        actions,
        np.ones(4, np.float32),
        states,
        no,
        truncated,
      )
    )
    == 8 + 4 + 1
  )
  assert np.isfinite(float(ex.execute("update")["loss"]))
  with pytest.raises(
    SpaceError, match="n-step accumulation keeps 4 environment streams"
  ):
    ex.execute(
      "observe",
      states[:2],
      actions[:2],
      np.ones(2, np.float32),
      states[:2],
      no[:2],
      no[:2],
    )


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_n_step_update_bootstraps_with_the_stored_discount(backend):
  """Every step truncated: all 2-step transitions shrink to 1 step, so the
  target must use discount^1 (the stored one), not discount^2. With one
  repeated transition the loss does not depend on which rows are sampled."""
  config = DQNConfig(
    num_actions=2,
    n_step=2,
    num_envs=2,
    discount=0.5,
    huber_delta=None,
    batch_size=8,
    learning_starts=8,
  )
  ex = DQNBuilder(config).make_agent(OBS).build(backend)
  ex.execute("sync_target")  # Target = online.
  s = np.full((2, 4), 3.0, np.float32)
  s2 = np.full((2, 4), -2.0, np.float32)
  actions, yes = np.array([1, 1]), np.ones(2, bool)
  for _ in range(5):
    ex.execute("observe", s, actions, np.ones(2, np.float32), s2, ~yes, yes)
  q = to_numpy(ex.execute("get_actions", s, False)["q_values"])[0]
  q2 = to_numpy(ex.execute("get_actions", s2, False)["q_values"])[0]
  td = 1.0 + 0.5 * q2.max() - q[1]
  assert abs((1.0 + 0.25 * q2.max() - q[1]) ** 2 - td**2) > 1e-3
  loss = float(to_numpy(ex.execute("update")["loss"]))
  np.testing.assert_allclose(loss, 0.5 * td**2, rtol=1e-4)


def test_n_step_settings_are_checked():
  with pytest.raises(BuildError, match="give DQNConfig\\(num_envs=...\\)"):
    DQNAgent(DQNConfig(num_actions=2, n_step=3))
  env = GymnasiumVectorEnv("CartPole-v1", num_envs=4)
  with pytest.raises(BuildError, match="config.num_envs=2 but the env has 4"):
    DQNAgent(DQNConfig(num_actions=2, n_step=3, num_envs=2), env)
  # train's first update samples before its vector step is stored.
  for n_step, bound in ((3, 12), (1, 4)):
    with pytest.raises(
      BuildError, match=f"must exceed \\(n_step\\) \\* num_envs = {bound}"
    ):
      DQNAgent(
        DQNConfig(
          num_actions=2, n_step=n_step, batch_size=4, learning_starts=bound
        ),
        env,
      )
    DQNAgent(
      DQNConfig(
        num_actions=2, n_step=n_step, batch_size=4, learning_starts=bound + 1
      ),
      env,
    )


def evaluate(executor, episodes, seed):
  return mean_greedy_return(
    lambda obs: to_numpy(
      executor.execute("get_actions", obs, False)["actions"]
    ),
    "CartPole-v1",
    episodes,
    seed,
  )


def learn_cartpole(seed, max_rounds=10, n_step=1):
  """Best greedy 20-episode mean return, evaluated every 8k env steps."""
  env = GymnasiumVectorEnv("CartPole-v1", num_envs=4, seed=seed)
  config = DQNConfig(
    num_actions=2,
    learning_rate=2.5e-4,
    target_sync_every=500,
    epsilon_steps=10_000,
    seed=seed,
    n_step=n_step,
  )
  ex = DQNBuilder(config).make_agent(env=env).build()
  ex.execute("reset_env", seed)
  best = 0.0
  for _ in range(max_rounds):  # Each round: 2000 vector steps = 8k env steps.
    for _ in range(4):
      ex.execute("train", 500)
    best = max(best, evaluate(ex, 20, seed=1000))
    if best >= 195:
      break
  return best


# ~9 s: the 3-step preset's learning test below stays in make test.
@pytest.mark.slow
def test_learns_cartpole():
  """DQN with the in-graph loop reaches a greedy mean return >= 195 over 20
  episodes within 80k env steps.

  Settings: 4 envs, Adam 2.5e-4, replay 50k, batch 64, target sync every
  500 vector steps, epsilon 1 -> 0.05 over 10k env steps, double-Q, dueling;
  greedy evaluation every 8k env steps. Flakiness, measured with
  `learn_cartpole(seed)` for seeds 0-4: 5 of 5 passed (best returns 209.6,
  208.3, 229.9, 197.9, 199.5; 8-36 s each on this 2-core machine, with
  another process running). Seed 0 is fixed here.
  """
  best = learn_cartpole(seed=0)
  assert best >= 195, best


def test_learns_cartpole_with_3_step_returns():
  """As `test_learns_cartpole`, with n_step=3 (the same settings
  otherwise). Flakiness, measured with `learn_cartpole(seed, n_step=3)` for
  seeds 0-4: 5 of 5 passed (best returns 313.1, 225.8, 212.6, 285.5, 280.6;
  14-33 s each on this 2-core machine under load). Since the evaluation
  plays its 20 episodes side by side (2026-11-27, alone): 5 of 5 (206.1,
  252.9, 284.3, 199.0, 209.7; 6-13 s). Seed 0 is fixed here.
  """
  best = learn_cartpole(seed=0, n_step=3)
  assert best >= 195, best
