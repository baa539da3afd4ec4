"""DMLabVectorEnv stepped in THIS process against the fake `deepmind_lab`.

Not collected by the main test run (whose process imports tensorflow, next
to which DM Lab, and the fake, die): test_dmlab.py runs this file with
pytest in a fresh process that imports neither tensorflow nor torch.
"""

import importlib.util
import sys

import numpy as np
import pytest

from ingraph_rl.environments import (
  DMLabVectorEnv,
  dmlab30,
  dmlab_level_name,
  is_dmlab_id,
  make_vector_env,
)
from ingraph_rl.environments.dmlab import (
  DEFAULT_ACTION_SET,
  IMPALA_ACTION_SET,
  NOOP_ACTION_SET,
)
from ingraph_rl.errors import EnvironmentNotAvailableError
from ingraph_rl.spaces import Dict, IntBox, TextBox
from ingraph_rl.testing import fake_deepmind_lab

ARENA = "seekavoid_arena_01"
ROOMS = "contributed/dmlab30/rooms_collect_good_objects_train"
LANGUAGE = "contributed/dmlab30/language_select_described_object"
SMALL = dict(width=16, height=12)  # Small frames keep the fake cheap.

# (look_lr, look_du, strafe_lr, move_bf, fire, jump, crouch) per action.
# scalable_agent's DEFAULT_ACTION_SET, written out independently.
EXPECTED_VECTORS = [
  [0, 0, 0, 1, 0, 0, 0],  # Forward.
  [0, 0, 0, -1, 0, 0, 0],  # Backward.
  [0, 0, -1, 0, 0, 0, 0],  # Strafe left.
  [0, 0, 1, 0, 0, 0, 0],  # Strafe right.
  [-20, 0, 0, 0, 0, 0, 0],  # Look left.
  [20, 0, 0, 0, 0, 0, 0],  # Look right.
  [-20, 0, 0, 1, 0, 0, 0],  # Forward + look left.
  [20, 0, 0, 1, 0, 0, 0],  # Forward + look right.
  [0, 0, 0, 0, 1, 0, 0],  # Fire.
]


@pytest.fixture(autouse=True)
def _no_tensorflow():
  # The point of running here: with tensorflow loaded, the fake aborts.
  assert "tensorflow" not in sys.modules and "torch" not in sys.modules
  yield
  assert "tensorflow" not in sys.modules and "torch" not in sys.modules


@pytest.fixture
def fake():
  """A fresh fake module per test (its module state does not leak)."""
  spec = importlib.util.spec_from_file_location(
    "fake_deepmind_lab_copy", fake_deepmind_lab.__file__
  )
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _env(fake, level=ARENA, num_envs=2, seed=0, **kwargs):
  for key, value in SMALL.items():
    kwargs.setdefault(key, value)
  # Most tests below index actions as no-op 0, forward 1, ...
  kwargs.setdefault("action_set", NOOP_ACTION_SET)
  return DMLabVectorEnv(level, num_envs, seed=seed, lab_module=fake, **kwargs)


def test_spaces_action_mapping_repeats_and_rewards(fake):
  with _env(
    fake, num_envs=9, num_action_repeats=3, action_set=DEFAULT_ACTION_SET
  ) as env:
    assert env.observation_space == IntBox(256, (12, 16, 3), dtype=np.uint8)
    assert env.action_space == IntBox(9)
    labs = env.labs
    assert [lab.observation_names for lab in labs] == [["RGB_INTERLEAVED"]] * 9
    obs = env.reset()
    assert obs.shape == (9, 12, 16, 3) and obs.dtype == np.uint8
    result = env.step(np.arange(9))
    for a, lab in enumerate(labs):
      ((vector, num_steps),) = lab.steps
      assert vector.dtype == np.intc and vector.shape == (7,)
      assert vector.tolist() == EXPECTED_VECTORS[a], a
      assert num_steps == 3
      # Lab.step's reward is already the sum over the 3 repeated frames.
      assert result.rewards[a] == 3 * fake.frame_reward(vector)
    # Actions matter: every action has its own reward.
    assert len(set(result.rewards.tolist())) == 9
    assert result.rewards.dtype == np.float32
  assert [list(v) for v in DEFAULT_ACTION_SET] == EXPECTED_VECTORS
  assert [list(v) for v in IMPALA_ACTION_SET] == EXPECTED_VECTORS
  assert [list(v) for v in NOOP_ACTION_SET] == [
    [0, 0, 0, 0, 0, 0, 0]
  ] + EXPECTED_VECTORS[:-1]


def test_custom_action_set_is_checked_against_the_action_spec(fake):
  with _env(fake, num_envs=1, action_set=NOOP_ACTION_SET) as env:
    env.reset()
    env.step([0])
    assert env.labs[0].steps[-1][0].tolist() == [0, 0, 0, 0, 0, 0, 0]
  with pytest.raises(ValueError, match="outside the DM Lab action spec"):
    _env(fake, action_set=[(0, 0, 0, 2, 0, 0, 0)])
  with pytest.raises(ValueError, match="7-int vectors"):
    _env(fake, action_set=[(0, 0, 1)])


def test_bad_actions_and_call_order(fake):
  env = _env(fake)
  with pytest.raises(RuntimeError, match="reset"):
    env.step([0, 0])
  env.reset()
  with pytest.raises(ValueError, match=r"\[0, 9\)"):
    env.step([0, 9])
  with pytest.raises(ValueError, match="integer actions"):
    env.step([0.0, 1.0])
  with pytest.raises(ValueError, match="integer actions"):
    env.step([0, 1, 2])
  labs = env.labs
  env.close()
  env.close()  # Idempotent: each Lab is closed exactly once.
  assert not any(lab.is_running() for lab in labs)
  with pytest.raises(RuntimeError, match="closed"):
    env.reset()


def test_seeding_is_reproducible_and_differs_per_env(fake):
  actions = np.array([1, 7, 3])

  def rollout(env, steps=20, seed=None):
    frames = [env.reset(seed=seed)]
    frames += [env.step(actions).obs for _ in range(steps)]
    return np.stack(frames)

  level = dict(config={"episodeLengthFrames": "24"})  # 6 steps/episode.
  with (
    _env(fake, num_envs=3, seed=7, **level) as a,
    _env(fake, num_envs=3, seed=7, **level) as b,
  ):
    first = rollout(a)
    np.testing.assert_array_equal(first, rollout(b))
    seeds = [lab.reset_seeds for lab in a.labs]
    # A new seed per episode, and different seeds for different envs.
    assert all(len(s) == len(set(s)) == 4 for s in seeds)
    assert len({s[0] for s in seeds}) == 3
    assert not np.array_equal(first[:, 0], first[:, 1])
    # reset() continues the seed streams; reset(7) restarts them.
    assert not np.array_equal(rollout(a)[0], first[0])
    np.testing.assert_array_equal(rollout(a, seed=7), first)
    # Seeds reach Lab.reset as Python ints (the fake rejects numpy ints).
    assert all(type(s) is int for lab in a.labs for s in lab.reset_seeds)
  # Environment i is seeded with seed + i, like the other VectorEnvs.
  with _env(fake, num_envs=1, seed=8, **level) as env:
    frames = [env.reset()[0]] + [env.step([7]).obs[0] for _ in range(20)]
  np.testing.assert_array_equal(np.stack(frames), first[:, 1])


def test_same_step_autoreset_final_obs_and_episode_statistics(fake):
  # 30 frames with 4 repeats: the 8th step ends the episode after 2 frames.
  with _env(fake, num_envs=2, config={"episodeLengthFrames": "30"}) as env:
    obs = env.reset()
    labs = env.labs
    ret = np.zeros(2)
    for t in range(8):
      prev = obs
      result = env.step(np.array([1, 8]))  # Forward; forward + look right.
      obs = result.obs
      ret += result.rewards
      if t < 7:
        assert not (result.terminated | result.truncated).any()
        np.testing.assert_array_equal(result.final_obs, obs)
        np.testing.assert_array_equal(result.episode_returns, [0, 0])
        np.testing.assert_array_equal(result.episode_lengths, [0, 0])
    assert result.terminated.all() and not result.truncated.any()
    # Forward earns 1 per frame: 7 full steps of 4 frames and one of 2.
    np.testing.assert_array_equal(result.rewards, [2.0, 2.25])
    np.testing.assert_array_equal(result.episode_returns, [30.0, 33.75])
    np.testing.assert_array_equal(result.episode_returns, ret)
    np.testing.assert_array_equal(result.episode_lengths, [8, 8])
    assert result.episode_returns.dtype == np.float32
    assert result.episode_lengths.dtype == np.int32
    # The ended episode has no last frame: its last valid one stands in.
    np.testing.assert_array_equal(result.final_obs, prev)
    # obs is the first frame of a new, newly seeded episode.
    assert all(lab.is_running() and lab.num_steps() == 0 for lab in labs)
    assert all(len(lab.reset_seeds) == 2 for lab in labs)
    np.testing.assert_array_equal(
      obs, [lab.observations()["RGB_INTERLEAVED"] for lab in labs]
    )
    assert not np.array_equal(obs, result.final_obs)
    # Counters restart.
    result = env.step(np.array([1, 1]))
    assert not result.terminated.any()
    np.testing.assert_array_equal(result.episode_lengths, [0, 0])


def test_staggered_episode_ends_keep_per_env_statistics(fake):
  # Episode lengths depend on each episode's seed: envs end at other steps.
  config = {"episodeLengthFrames": "12", "episodeLengthJitter": "20"}
  rng = np.random.default_rng(0)
  with _env(
    fake, num_envs=4, seed=3, config=config, num_action_repeats=2
  ) as env:
    obs = env.reset()
    ret, length = np.zeros(4), np.zeros(4, np.int64)
    partial_ends = 0
    for _ in range(60):
      prev = obs
      result = env.step(rng.integers(0, 9, 4))
      obs = result.obs
      ret += result.rewards
      length += 1
      done = result.terminated
      assert not result.truncated.any()
      partial_ends += 0 < done.sum() < 4
      np.testing.assert_array_equal(result.final_obs[done], prev[done])
      np.testing.assert_array_equal(result.final_obs[~done], obs[~done])
      np.testing.assert_allclose(
        result.episode_returns, np.where(done, ret, 0), rtol=1e-6
      )
      np.testing.assert_array_equal(
        result.episode_lengths, np.where(done, length, 0)
      )
      ret[done], length[done] = 0, 0
    assert partial_ends >= 5


def test_max_episode_steps_truncates_with_the_real_last_frame(fake):
  actions = np.array([1, 5])
  with _env(fake, max_episode_steps=3) as env, _env(fake) as ref:
    env.reset(), ref.reset()
    for _ in range(2):
      result, expected = env.step(actions), ref.step(actions)
      np.testing.assert_array_equal(result.obs, expected.obs)
    result, expected = env.step(actions), ref.step(actions)
    assert result.truncated.all() and not result.terminated.any()
    np.testing.assert_array_equal(result.final_obs, expected.obs)
    np.testing.assert_array_equal(result.episode_lengths, [3, 3])
    np.testing.assert_array_equal(result.episode_returns, [12.0, -1.5])
    assert all(len(lab.reset_seeds) == 2 for lab in env.labs)
    assert not np.array_equal(result.obs, result.final_obs)


def test_not_installed_error_is_clear_and_raised_at_construction(monkeypatch):
  # The package imported without deepmind_lab: the import is lazy.
  assert sys.modules.get("deepmind_lab") is None
  monkeypatch.setitem(sys.modules, "deepmind_lab", None)  # Not importable.
  for make in (
    lambda: DMLabVectorEnv(ARENA, 2),
    lambda: make_vector_env("dmlab:" + ROOMS, 2, seed=1, processes=False),
  ):
    with pytest.raises(EnvironmentNotAvailableError) as info:
      make()
    assert isinstance(info.value, ImportError)
    assert info.value.name == "deepmind_lab"
    message = str(info.value)
    for hint in (
      "github.com/deepmind/lab",
      "bazel",
      "pip install",
      "PYTHONPATH",
    ):
      assert hint in message, hint


def test_deepmind_lab_is_imported_when_lab_module_is_none(fake, monkeypatch):
  monkeypatch.setitem(sys.modules, "deepmind_lab", fake)
  with DMLabVectorEnv(ARENA, 1, runfiles_path="/opt/dmlab", **SMALL) as env:
    assert isinstance(env.labs[0], fake.Lab)
    assert fake.runfiles_path == "/opt/dmlab"
  # A module name is imported too.
  monkeypatch.setitem(sys.modules, "my_lab", fake)
  with DMLabVectorEnv(ARENA, 1, lab_module="my_lab", **SMALL) as env:
    assert isinstance(env.labs[0], fake.Lab)


def test_level_names_and_make_vector_env(fake):
  assert is_dmlab_id("dmlab:" + ARENA) and not is_dmlab_id("CartPole-v1")
  assert dmlab_level_name("dmlab:" + ARENA) == ARENA
  assert dmlab_level_name("dmlab:" + ROOMS) == ROOMS
  assert dmlab_level_name(ROOMS) == ROOMS
  for bad in ("dmlab:", "dmlab:/rooms", "dmlab:rooms/", "dmlab: arena"):
    with pytest.raises(ValueError, match="level name"):
      dmlab_level_name(bad)
  with make_vector_env(
    "dmlab:" + ROOMS,
    3,
    seed=5,
    lab_module=fake,
    processes=False,
    renderer="hardware",
    level_cache="cache",
    **SMALL,
  ) as env:
    assert isinstance(env, DMLabVectorEnv) and env.num_envs == 3
    assert env.level == ROOMS and env.levels == (ROOMS,) * 3
    assert all(
      lab.level == ROOMS
      and lab.renderer == "hardware"
      and lab.level_cache == "cache"
      for lab in env.labs
    )
    assert env.reset().shape == (3, 12, 16, 3)
  with _env(fake, level="dmlab:" + ARENA) as env:
    assert env.labs[0].level == ARENA
  with pytest.raises(ValueError, match="Failed to open level"):
    _env(fake, level="dmlab:contributed/dmlab30/no_such_level")
  with pytest.raises(ValueError, match="renderer"):
    _env(fake, renderer="opengl")
  with pytest.raises(ValueError, match="level sets"):
    make_vector_env(
      "dmlab:" + ARENA, 1, processes=False, test=True, lab_module=fake
    )


def test_config_width_height(fake):
  with DMLabVectorEnv(ARENA, 1, lab_module=fake) as env:
    assert env.labs[0].config == {"width": "96", "height": "72"}
    assert env.observation_space.shape == (72, 96, 3)
    assert env.reset().shape == (1, 72, 96, 3)
  config = {
    "width": "80",
    "height": 60,
    "allowHoldOutLevels": True,
    "logLevel": "WARN",
  }
  with DMLabVectorEnv(ARENA, 1, lab_module=fake, config=config) as env:
    assert env.labs[0].config == {
      "width": "80",
      "height": "60",
      "allowHoldOutLevels": "true",
      "logLevel": "WARN",
    }
    assert env.reset().shape == (1, 60, 80, 3)
  with DMLabVectorEnv(
    ARENA, 1, lab_module=fake, width=32, height=24, config={"width": "32"}
  ) as env:
    assert env.reset().shape == (1, 24, 32, 3)
  with pytest.raises(ValueError, match="conflicts"):
    DMLabVectorEnv(ARENA, 1, lab_module=fake, width=32, config={"width": "64"})


def test_instructions_are_a_dict_observation(fake):
  with _env(
    fake,
    level=LANGUAGE,
    num_envs=3,
    seed=1,
    instructions=True,
    config={"episodeLengthFrames": "8"},
  ) as env:
    assert env.labs[0].observation_names == ["RGB_INTERLEAVED", "INSTR"]
    assert env.observation_space == Dict(
      RGB_INTERLEAVED=IntBox(256, (12, 16, 3), dtype=np.uint8), INSTR=TextBox()
    )
    obs = env.reset()
    assert sorted(obs) == ["INSTR", "RGB_INTERLEAVED"]
    assert obs["RGB_INTERLEAVED"].shape == (3, 12, 16, 3)
    texts = obs["INSTR"]
    assert texts.dtype == object and texts.shape == (3,)
    assert texts.tolist() == [
      fake.INSTRUCTIONS[lab.reset_seeds[-1] % 3] for lab in env.labs
    ]
    assert env.observation_space.with_batch_rank().contains(obs)
    first = env.step([1, 1, 1])
    np.testing.assert_array_equal(first.final_obs["INSTR"], texts)
    result = env.step([1, 1, 1])  # 8 frames: episode ends.
    assert result.terminated.all()
    # final_obs is the last observation, leaf by leaf.
    assert result.final_obs["INSTR"].tolist() == texts.tolist()
    np.testing.assert_array_equal(
      result.final_obs["RGB_INTERLEAVED"], first.obs["RGB_INTERLEAVED"]
    )
    assert result.obs["INSTR"].tolist() == [
      fake.INSTRUCTIONS[lab.reset_seeds[-1] % 3] for lab in env.labs
    ]
    assert result.obs["INSTR"].tolist() != texts.tolist()


def test_truncation_keeps_the_real_last_instruction(fake):
  with _env(
    fake,
    level=LANGUAGE,
    num_envs=2,
    seed=4,
    instructions=True,
    max_episode_steps=2,
  ) as env:
    obs = env.reset()
    env.step([1, 2])
    result = env.step([1, 2])
    assert result.truncated.all()
    assert result.final_obs["INSTR"].tolist() == obs["INSTR"].tolist()
    assert not np.array_equal(
      result.final_obs["RGB_INTERLEAVED"], result.obs["RGB_INTERLEAVED"]
    )


def test_level_sets_run_one_level_per_env(fake):
  with make_vector_env(
    "dmlab:dmlab30",
    32,
    seed=0,
    lab_module=fake,
    processes=False,
    config={"datasetPath": "dummy"},  # Two psychlab levels read it.
    **SMALL,
  ) as env:
    assert env.levels == dmlab30.env_levels(32)
    assert [lab.level for lab in env.labs] == list(env.levels)
    assert env.levels[30:] == env.levels[:2]
    assert env.level is None
    assert all(
      lab.observation_names == ["RGB_INTERLEAVED", "INSTR"] for lab in env.labs
    )
    obs = env.reset()
    language = ["language" in level for level in env.levels]
    assert [bool(t) for t in obs["INSTR"]] == language
  with make_vector_env(
    "dmlab:dmlab30_test", 2, lab_module=fake, processes=False, **SMALL
  ) as env:
    assert [dmlab30.short_name(lv) for lv in env.levels] == [
      "rooms_collect_good_objects_test",
      "rooms_exploit_deferred_effects_test",
    ]
  with make_vector_env(
    "dmlab:dmlab30",
    2,
    lab_module=fake,
    test=True,
    level_offset=1,
    processes=False,
    **SMALL,
  ) as env:
    assert [dmlab30.short_name(lv) for lv in env.levels] == [
      "rooms_exploit_deferred_effects_test",
      "rooms_select_nonmatching_object",
    ]
  with pytest.raises(ValueError, match="INSTR"):
    make_vector_env(
      "dmlab:dmlab30", 1, lab_module=fake, processes=False, instructions=False
    )
  with pytest.raises(ValueError, match="one per env"):
    DMLabVectorEnv([ARENA, ARENA], 3, lab_module=fake)
