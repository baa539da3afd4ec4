"""`EnvironmentStepper` against plain-Python gymnasium stepping: the rollouts
it records (observations, rewards, dones, truncation flags) equal a replay
of its recorded actions on freshly seeded `gymnasium.make` envs (same-step
autoreset done by hand), consecutive unrolls overlap by one step, the
episode stats (totals and per env) equal the replay's, an LSTM policy's
carried state and logits are reproduced by a learner-style recomputation
(which needs the recorded rewards and actions as the network's last reward
and action), the recorded bootstrap values of truncated episodes are the
network's values of their true final observations, and `reset(seed)`
resets all carried state. All of it with one env group and with two
(double-buffered: `env_groups=2` over a `GroupedVectorEnv`), whose
rollouts hold group A's envs then group B's."""

import gymnasium as gym
import numpy as np
import pytest

from ingraph_rl.agents.impala import (
  IMPALABuilder,
  IMPALAConfig,
  IMPALAPolicy,
  make_network,
)
from ingraph_rl.components.env_stepping import (
  ROLLOUT_FIELDS,
  EnvironmentStepper,
)
from ingraph_rl.environments.env_groups import GroupedVectorEnv, group_sizes
from ingraph_rl.environments.gymnasium_env import GymnasiumVectorEnv
from ingraph_rl.errors import BuildError
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.spaces import IntBox
from ingraph_rl.testing.component_test import to_numpy

ENV_ID = "CartPole-v1"
T = 6
NUM_ENVS = 3
NUM_UNROLLS = 8  # 48 steps per env: random CartPole episodes end often.


def make_env(seed, env_groups=1, **make_kwargs):
  """`NUM_ENVS` CartPoles seeded `seed + i`, in `env_groups` groups (2: of
  2 and 1 envs)."""
  if env_groups == 1:
    return GymnasiumVectorEnv(ENV_ID, NUM_ENVS, seed=seed, **make_kwargs)
  groups, first = [], 0
  for size in group_sizes(NUM_ENVS, env_groups):
    groups.append(
      GymnasiumVectorEnv(ENV_ID, size, seed=seed + first, **make_kwargs)
    )
    first += size
  return GroupedVectorEnv(groups)


def build(
  seed, lstm_units=None, config_kwargs=None, env_groups=1, **make_kwargs
):
  """A stepper executor over `NUM_ENVS` CartPoles seeded `seed + i`."""
  config = IMPALAConfig(
    num_actions=2,
    unroll_length=T,
    lstm_units=lstm_units,
    **(config_kwargs or {}),
  )
  env = make_env(seed, env_groups, **make_kwargs)
  network = make_network(config, env.observation_space)
  stepper = EnvironmentStepper(
    env,
    IMPALAPolicy(network, seed=seed),
    network.state_space(),
    2,
    T,
    bootstrap_on_truncation=config.bootstrap_on_truncation,
    env_groups=env_groups,
  )
  spaces = dict(
    IMPALABuilder(config).policy_input_spaces(env.observation_space),
    seed=IntBox(1 << 30, low=-1),
  )
  ex = TFExecutor(stepper, spaces, api_names=["act", "reset", "unroll"])
  return ex, env


def unrolls(ex, n):
  return [to_numpy(ex.execute("unroll")) for _ in range(n)]


class PythonReplay:
  """`NUM_ENVS` separate `gym.make(ENV_ID)` envs, env i reset with seed
  `seed + i`; an env that ends (terminated or truncated) is reset unseeded
  in the same step, as gymnasium's SAME_STEP autoreset does."""

  def __init__(self, seed, **make_kwargs):
    self.envs = [gym.make(ENV_ID, **make_kwargs) for _ in range(NUM_ENVS)]
    self.first_obs = np.stack(
      [env.reset(seed=seed + i)[0] for i, env in enumerate(self.envs)]
    )
    self.returns = np.zeros(NUM_ENVS)
    self.lengths = np.zeros(NUM_ENVS, np.int64)

  def step(self, actions):
    """-> obs, rewards, terminated, truncated, the (env, return, length) of
    each episode that ended, and the final observations (the true last
    one where an episode ended, else obs)."""
    obs, final, rewards, term, trunc, ended = [], [], [], [], [], []
    for i, (env, a) in enumerate(zip(self.envs, actions)):
      o, r, te, tr, _ = env.step(int(a))
      final.append(o)
      self.returns[i] += r
      self.lengths[i] += 1
      if te or tr:
        ended.append((i, self.returns[i], self.lengths[i]))
        self.returns[i], self.lengths[i] = 0.0, 0
        o, _ = env.reset()
      obs.append(o)
      rewards.append(r)
      term.append(te)
      trunc.append(tr)
    return (
      np.stack(obs),
      np.array(rewards, np.float32),
      np.array(term),
      np.array(trunc),
      ended,
      np.stack(final),
    )

  def replay(self, outs):
    """Replays the actions of consecutive stepper unrolls `outs`; returns,
    per unroll, the expected {"observations", "rewards", "dones"} [T, N]
    (indices 1..T of the rollout), terminated and truncated flags, the
    final observations, and the expected stats (totals and per env)."""
    expected = []
    for out in outs:
      steps = [self.step(a) for a in out["rollout"]["actions"][1:]]
      ended = [e for s in steps for e in s[4]]
      per_env = np.zeros((3, NUM_ENVS))
      for i, r, n in ended:
        per_env[:, i] += (1, r, n)
      expected.append(
        {
          "observations": np.stack([s[0] for s in steps]),
          "rewards": np.stack([s[1] for s in steps]),
          "terminated": np.stack([s[2] for s in steps]),
          "truncated": np.stack([s[3] for s in steps]),
          "dones": np.stack([s[2] | s[3] for s in steps]),
          "final_obs": np.stack([s[5] for s in steps]),
          "stats": {
            "episodes": len(ended),
            "return_sum": sum(r for _, r, _ in ended),
            "length_sum": sum(n for _, _, n in ended),
            "episodes_per_env": per_env[0],
            "return_sum_per_env": per_env[1],
            "length_sum_per_env": per_env[2],
          },
        }
      )
    return expected


# (seed, make kwargs): natural CartPole ends, and a 7-step TimeLimit whose
# ends are truncations.
CASES = {"terminations": (3, {}), "truncations": (11, {"max_episode_steps": 7})}
# Env groups: 1 (policy, then env step), 2 (double-buffered).
GROUPS = {"1group": 1, "2groups": 2}


@pytest.fixture(
  scope="module",
  params=[(case, groups) for groups in GROUPS for case in CASES],
  ids="-".join,
)
def replayed(request):
  case, groups = request.param
  seed, make_kwargs = CASES[case]
  ex, env = build(seed, env_groups=GROUPS[groups], **make_kwargs)
  first_obs = to_numpy(ex.execute("reset", seed))
  outs = unrolls(ex, NUM_UNROLLS)
  replay = PythonReplay(seed, **make_kwargs)
  expected = replay.replay(outs)
  env.close()
  return case, first_obs, replay.first_obs, outs, expected


@pytest.mark.slow
def test_rollouts_match_python_replay(replayed):
  case, first_obs, python_first_obs, outs, expected = replayed
  np.testing.assert_array_equal(first_obs, python_first_obs)
  for k, (out, exp) in enumerate(zip(outs, expected)):
    rollout = out["rollout"]
    assert set(rollout) == set(ROLLOUT_FIELDS) | {"initial_state"}
    assert rollout["observations"].shape == (T + 1, NUM_ENVS, 4)
    for field in ("observations", "rewards", "dones"):
      np.testing.assert_array_equal(
        rollout[field][1:], exp[field], err_msg=f"unroll {k}: {field}"
      )
    # Truncated: cut short, not terminal (a terminal last step is not
    # bootstrapped).
    np.testing.assert_array_equal(
      rollout["truncated"][1:], exp["truncated"] & ~exp["terminated"]
    )
    np.testing.assert_array_equal(
      rollout["bootstrap_value"][1:][~rollout["truncated"][1:]], 0.0
    )
  # The data covers what it is meant to: episodes end inside unrolls, by
  # termination (natural ends) or by truncation (the TimeLimit).
  terminated = np.concatenate([e["terminated"] for e in expected])
  truncated = np.concatenate([e["truncated"] for e in expected])
  if case == "terminations":
    assert terminated.sum() >= 3
  else:
    assert truncated.sum() >= 3 * NUM_ENVS
  # Both actions were taken (the replay is not a constant action).
  actions = np.concatenate([o["rollout"]["actions"][1:] for o in outs])
  assert set(np.unique(actions)) == {0, 1}


def test_first_unroll_starts_from_reset(replayed):
  _, first_obs, _, outs, _ = replayed
  rollout = outs[0]["rollout"]
  np.testing.assert_array_equal(rollout["observations"][0], first_obs)
  assert rollout["dones"][0].all()
  np.testing.assert_array_equal(rollout["rewards"][0], 0.0)
  np.testing.assert_array_equal(rollout["actions"][0], 0)
  np.testing.assert_array_equal(rollout["logits"][0], 0.0)
  assert not rollout["truncated"][0].any()
  np.testing.assert_array_equal(rollout["bootstrap_value"][0], 0.0)


def test_unrolls_overlap_by_one_step(replayed):
  """Index 0 of unroll k is index T of unroll k - 1 (IMPALA's layout)."""
  outs = replayed[3]
  for k in range(1, len(outs)):
    previous, current = outs[k - 1]["rollout"], outs[k]["rollout"]
    for field in ROLLOUT_FIELDS:
      np.testing.assert_array_equal(
        current[field][0], previous[field][T], err_msg=f"unroll {k}: {field}"
      )


@pytest.mark.slow
def test_actions_are_sampled_from_the_logits_at_their_index():
  """With a policy head scaled up, sampling is (nearly) argmax: the action
  recorded at index t is the argmax of the logits recorded at t."""
  ex, env = build(2)
  kernel = ex.variables()[
    "environment_stepper/policy/impala_network/policy_head/kernel"
  ]
  kernel.assign(kernel * 1e5)
  ex.execute("reset", 2)
  outs = unrolls(ex, 4)
  env.close()
  logits = np.concatenate([o["rollout"]["logits"][1:] for o in outs])
  actions = np.concatenate([o["rollout"]["actions"][1:] for o in outs])
  sure = np.abs(logits[..., 0] - logits[..., 1]) > 30.0  # p < 1e-13.
  assert sure.mean() > 0.6
  np.testing.assert_array_equal(actions[sure], logits.argmax(-1)[sure])
  assert set(np.unique(actions[sure])) == {0, 1}


def test_episode_stats_match_python_replay(replayed):
  _, _, _, outs, expected = replayed
  total = 0
  for k, (out, exp) in enumerate(zip(outs, expected)):
    stats = out["stats"]
    assert int(stats["episodes"]) == exp["stats"]["episodes"], k
    assert int(stats["length_sum"]) == exp["stats"]["length_sum"], k
    np.testing.assert_allclose(
      stats["return_sum"], exp["stats"]["return_sum"], rtol=1e-6
    )
    assert int(stats["env_steps"]) == NUM_ENVS * T
    for key in ("episodes_per_env", "length_sum_per_env"):
      assert stats[key].dtype == np.int64
      np.testing.assert_array_equal(stats[key], exp["stats"][key])
    np.testing.assert_allclose(
      stats["return_sum_per_env"], exp["stats"]["return_sum_per_env"], rtol=1e-6
    )
    total += exp["stats"]["episodes"]
  # Some episodes span unroll boundaries (lengths > T), so the carried
  # per-env return and length are exercised.
  assert total >= 3
  assert sum(e["stats"]["length_sum"] for e in expected) > total * T


# --- LSTM policy -------------------------------------------------------------

LSTM_SEED = 5
LSTM_LIMIT = 4  # Episode ends (resets) inside and across unrolls.


@pytest.fixture(
  scope="module",
  params=[
    "1group",
    # The LSTM with 2 groups: make test-all (the make test budget); the
    # replay tests above run 2 groups in make test.
    pytest.param("2groups", marks=pytest.mark.slow),
  ],
)
def lstm(request):
  ex, env = build(
    LSTM_SEED,
    lstm_units=8,
    env_groups=GROUPS[request.param],
    max_episode_steps=LSTM_LIMIT,
  )
  ex.execute("reset", LSTM_SEED)
  outs = unrolls(ex, 4)
  yield ex, outs
  env.close()


def batch_major(x):
  return np.swapaxes(x, 0, 1)


def recompute(ex, rollout, steps, resets=None, shift=0):
  """Runs the policy's `act` over the first `steps` recorded observations
  from the rollout's initial state, resets = the recorded dones (done t:
  observation t starts an episode, so the state is zeroed before it), last
  rewards and actions = the recorded ones (`shift` 1: one step late)."""
  obs = batch_major(rollout["observations"][:steps])
  if resets is None:
    resets = batch_major(rollout["dones"][:steps])
  late = lambda x: np.concatenate([np.zeros_like(x[:shift]), x])[:steps]
  return to_numpy(
    ex.execute(
      "act",
      obs,
      rollout["initial_state"],
      resets,
      batch_major(late(rollout["rewards"])),
      batch_major(late(rollout["actions"])),
    )
  )


@pytest.mark.slow
def test_lstm_state_carries_over_between_unrolls(lstm):
  ex, outs = lstm
  for k in range(len(outs) - 1):
    rollout = outs[k]["rollout"]
    # The state after acting on observations 0..T-1 (observation T is
    # acted on first in the next unroll, where it is index 0).
    state = recompute(ex, rollout, T)["state"]
    next_state = outs[k + 1]["rollout"]["initial_state"]
    assert np.abs(next_state["h"]).max() > 1e-3  # Not a zero state.
    for key in ("c", "h"):
      np.testing.assert_allclose(
        next_state[key],
        state[key],
        rtol=1e-5,
        atol=1e-6,
        err_msg=f"unroll {k}: {key}",
      )


def test_lstm_recomputation_reproduces_behaviour_logits(lstm):
  """What the learner does: the network over all T + 1 steps from
  `initial_state` with resets = dones; its logits at step t are the
  behaviour logits recorded at t + 1."""
  ex, outs = lstm
  dones = np.concatenate([o["rollout"]["dones"][1:] for o in outs])
  assert dones.sum() >= NUM_ENVS * 2  # Resets happen mid-rollout.
  for k, out in enumerate(outs):
    rollout = out["rollout"]
    logits = recompute(ex, rollout, T + 1)["logits"]
    np.testing.assert_allclose(
      logits[:, :T],
      batch_major(rollout["logits"][1:]),
      rtol=1e-5,
      atol=1e-6,
      err_msg=f"unroll {k}",
    )
  # The comparison can tell: resets one step late give other logits, and
  # so do last rewards and actions one step late.
  rollout = outs[1]["rollout"]
  late = batch_major(
    np.concatenate([np.zeros_like(rollout["dones"][:1]), rollout["dones"][:T]])
  )
  wrong = recompute(ex, rollout, T + 1, resets=late)["logits"]
  assert np.abs(wrong[:, :T] - batch_major(rollout["logits"][1:])).max() > 1e-4
  wrong = recompute(ex, rollout, T + 1, shift=1)["logits"]
  assert np.abs(wrong[:, :T] - batch_major(rollout["logits"][1:])).max() > 1e-4


def test_reset_resets_carried_state(lstm):
  # The LSTM stepper's rollouts are already recorded (`act` is all the
  # other tests call on it), so this test may move it on and reset it.
  ex, _ = lstm
  unrolls(ex, 1)
  # Mid-episode before the reset: there is a carried return, length and
  # recurrent state to forget.
  carried = {
    k.split("/")[-1]: v.numpy()
    for k, v in ex.variables().items()
    if k.startswith("environment_stepper/")
  }
  assert (carried["episode_length"] > 0).any()
  assert carried["last_reward"].any() and carried["last_action"].any()
  assert (carried["episode_return"] > 0).any()
  assert not carried["last_done"].all()
  assert np.abs(carried["state_h"]).max() > 1e-3
  new_seed = 40
  obs = to_numpy(ex.execute("reset", new_seed))
  after = unrolls(ex, 3)
  first = after[0]["rollout"]
  replay = PythonReplay(new_seed, max_episode_steps=LSTM_LIMIT)
  np.testing.assert_array_equal(obs, replay.first_obs)
  np.testing.assert_array_equal(first["observations"][0], obs)
  assert first["dones"][0].all()
  np.testing.assert_array_equal(first["rewards"][0], 0.0)
  np.testing.assert_array_equal(first["actions"][0], 0)
  np.testing.assert_array_equal(first["logits"][0], 0.0)
  assert not first["truncated"][0].any()
  np.testing.assert_array_equal(first["bootstrap_value"][0], 0.0)
  for key in ("c", "h"):
    np.testing.assert_array_equal(first["initial_state"][key], 0.0)
  # Episode returns and lengths restart from the reset: the stats match a
  # replay that starts there.
  expected = replay.replay(after)
  for out, exp in zip(after, expected):
    np.testing.assert_array_equal(
      out["rollout"]["observations"][1:], exp["observations"]
    )
    assert int(out["stats"]["episodes"]) == exp["stats"]["episodes"]
    assert int(out["stats"]["length_sum"]) == exp["stats"]["length_sum"]
    np.testing.assert_allclose(
      out["stats"]["return_sum"], exp["stats"]["return_sum"], rtol=1e-6
    )
  assert sum(e["stats"]["episodes"] for e in expected) >= NUM_ENVS


# --- time limits --------------------------------------------------------------


@pytest.mark.parametrize(
  "lstm_units, env_groups",
  [(None, 1), (8, 1), (8, 2)],
  ids=["mlp", "lstm", "lstm-2groups"],
)
@pytest.mark.slow
def test_bootstrap_values_are_values_of_the_true_final_observations(
  lstm_units, env_groups
):
  """A 5-step TimeLimit: where the stepper recorded a truncation at index
  t + 1, its bootstrap value is the policy's value of the episode's true
  last observation (the replay's, before its reset), acted on from the
  state after observation t without a reset, with reward t + 1 and action
  t + 1 as the last reward and action."""
  seed, limit = 21, 5
  ex, env = build(
    seed, lstm_units, env_groups=env_groups, max_episode_steps=limit
  )
  ex.execute("reset", seed)
  outs = unrolls(ex, 4)
  env.close()
  expected = PythonReplay(seed, max_episode_steps=limit).replay(outs)
  checked = 0
  for out, exp in zip(outs, expected):
    rollout = out["rollout"]
    truncated = rollout["truncated"][1:]
    np.testing.assert_array_equal(
      truncated, exp["truncated"] & ~exp["terminated"]
    )
    for t in np.flatnonzero(truncated.any(axis=1)):
      state = recompute(ex, rollout, t + 1)["state"]
      values = to_numpy(
        ex.execute(
          "act",
          exp["final_obs"][t][:, None],
          state,
          np.zeros((NUM_ENVS, 1), bool),
          rollout["rewards"][t + 1][:, None],
          rollout["actions"][t + 1][:, None],
        )
      )["values"][:, 0]
      where = truncated[t]
      np.testing.assert_allclose(
        rollout["bootstrap_value"][t + 1][where],
        values[where],
        rtol=1e-5,
        atol=1e-6,
      )
      # The true final observation, not the next episode's first one.
      assert not np.allclose(
        exp["final_obs"][t][where], rollout["observations"][t + 1][where]
      )
      checked += where.sum()
    np.testing.assert_array_equal(
      rollout["bootstrap_value"][1:][~truncated], 0.0
    )
  assert checked >= NUM_ENVS * 3


@pytest.mark.slow
def test_without_bootstrap_on_truncation_the_values_are_zero():
  ex, env = build(
    4, config_kwargs=dict(bootstrap_on_truncation=False), max_episode_steps=3
  )
  ex.execute("reset", 4)
  outs = unrolls(ex, 2)
  env.close()
  assert sum(o["rollout"]["truncated"].sum() for o in outs) >= NUM_ENVS
  for out in outs:
    np.testing.assert_array_equal(out["rollout"]["bootstrap_value"], 0.0)


# --- env groups --------------------------------------------------------------


def test_env_groups_need_an_env_of_as_many_groups():
  env = make_env(0)
  network = make_network(IMPALAConfig(num_actions=2), env.observation_space)
  with pytest.raises(BuildError, match="env_groups=2 needs an env of"):
    EnvironmentStepper(
      env, IMPALAPolicy(network), network.state_space(), 2, T, env_groups=2
    )
  env.close()


def test_grouped_env_steps_as_one_env():
  """A GroupedVectorEnv is the VectorEnv of its groups' envs, in order:
  the same steps as one env of them all."""
  one = make_env(9, max_episode_steps=5)
  grouped = make_env(9, 2, max_episode_steps=5)
  assert grouped.num_envs == NUM_ENVS and grouped.offsets == (0, 2)
  np.testing.assert_array_equal(grouped.reset(9), one.reset(9))
  actions = np.random.default_rng(0).integers(0, 2, (12, NUM_ENVS))
  for a in actions:
    for x, y in zip(grouped.step(a), one.step(a)):
      np.testing.assert_array_equal(x, y)
  one.close()
  grouped.close()
