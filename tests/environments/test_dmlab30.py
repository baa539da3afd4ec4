"""DMLab-30 levels and human-normalized scores against hand-computed
values."""

import doctest

import pytest

from ingraph_rl.environments import dmlab30


def test_thirty_levels_with_train_and_test_variants():
  assert len(dmlab30.TRAIN_LEVELS) == len(set(dmlab30.TRAIN_LEVELS)) == 30
  assert len(set(dmlab30.TEST_LEVELS)) == 30
  differ = {t: s for t, s in dmlab30.LEVEL_MAPPING.items() if t != s}
  assert differ == {
      "rooms_collect_good_objects_train": "rooms_collect_good_objects_test",
      "rooms_exploit_deferred_effects_train":
          "rooms_exploit_deferred_effects_test"}
  assert set(dmlab30.HUMAN_SCORES) == set(dmlab30.RANDOM_SCORES) == \
      set(dmlab30.TEST_LEVELS)
  assert all(dmlab30.HUMAN_SCORES[k] > dmlab30.RANDOM_SCORES[k]
             for k in dmlab30.TEST_LEVELS)
  levels = dmlab30.env_levels(62)
  assert levels[0] == "contributed/dmlab30/rooms_collect_good_objects_train"
  assert levels[29] == "contributed/dmlab30/explore_object_rewards_many"
  assert levels[30:60] == levels[:30] and levels[60:] == levels[:2]
  assert dmlab30.env_levels(2, test=True, offset=29) == (
      "contributed/dmlab30/explore_object_rewards_many",
      "contributed/dmlab30/rooms_collect_good_objects_test")


def test_level_names():
  for name in ("rooms_watermaze", "contributed/dmlab30/rooms_watermaze",
               "dmlab:contributed/dmlab30/rooms_watermaze"):
    assert dmlab30.short_name(name) == "rooms_watermaze"
    assert dmlab30.level_path(name) == "contributed/dmlab30/rooms_watermaze"
    assert dmlab30.scoring_level(name) == "rooms_watermaze"
  assert dmlab30.scoring_level("rooms_exploit_deferred_effects_train") == \
      "rooms_exploit_deferred_effects_test"
  assert dmlab30.scoring_level("rooms_exploit_deferred_effects_test") == \
      "rooms_exploit_deferred_effects_test"
  with pytest.raises(ValueError, match="not a DMLab-30 level"):
    dmlab30.scoring_level("seekavoid_arena_01")


def test_human_normalized_score_by_hand():
  score = dmlab30.human_normalized_score
  # rooms_watermaze: human 54, random 4.065.
  assert score("rooms_watermaze", 4.065) == pytest.approx(0.0)
  assert score("rooms_watermaze", [4.065, 54.0]) == pytest.approx(50.0)
  assert score("rooms_watermaze", 54.0) == pytest.approx(100.0)
  # A train level is scored with its test entry: human 10, random 0.073;
  # (10.073 - 0.073) / (10 - 0.073) * 100 = 1000 / 9.927.
  assert score("contributed/dmlab30/rooms_collect_good_objects_train",
               [10.073]) == pytest.approx(100.73537826130754)
  # Negative random score: language_execute_random_task, human 254.05,
  # random -5.913: (0 + 5.913) / 259.963 * 100.
  assert score("language_execute_random_task", [-10.0, 10.0]) == \
      pytest.approx(2.274554455826406)
  with pytest.raises(ValueError, match="no returns"):
    score("rooms_watermaze", [])


def _at(fraction):
  """Returns at `fraction` of the way from random to human, per level."""
  return {level: dmlab30.RANDOM_SCORES[level] + fraction * (
      dmlab30.HUMAN_SCORES[level] - dmlab30.RANDOM_SCORES[level])
          for level in dmlab30.TEST_LEVELS}


def test_mean_capped_score_by_hand():
  mean = dmlab30.mean_capped_human_normalized_score
  assert mean(_at(0.0)) == pytest.approx(0.0)
  assert mean(_at(1.0)) == pytest.approx(100.0)
  assert mean(_at(2.0)) == pytest.approx(100.0)          # Capped.
  assert mean(_at(2.0), cap=None) == pytest.approx(200.0)
  returns = _at(0.0)
  returns["rooms_watermaze"] = [54.0]                       # 100.
  returns["skymaze_irreversible_path_hard"] = [199.9]       # 200 -> 100.
  assert mean(returns) == pytest.approx(200.0 / 30)
  assert mean(returns, cap=None) == pytest.approx(300.0 / 30)
  # Train names (and full paths) stand for their test entries.
  train = dict(returns)
  value = train.pop("rooms_collect_good_objects_test")
  train["contributed/dmlab30/rooms_collect_good_objects_train"] = value
  assert mean(train) == pytest.approx(200.0 / 30)


def test_mean_capped_score_errors_name_the_levels():
  mean = dmlab30.mean_capped_human_normalized_score
  returns = _at(0.5)
  del returns["rooms_watermaze"], returns["psychlab_visual_search"]
  with pytest.raises(ValueError, match=r"missing DMLab-30 levels \(2 of "
                     r"30\): \['rooms_watermaze', 'psychlab_visual_search'"):
    mean(returns)
  returns = _at(0.5)
  returns["rooms_collect_good_objects_train"] = 1.0
  with pytest.raises(ValueError, match="given twice.*rooms_collect_good"):
    mean(returns)
  returns = _at(0.5)
  returns["seekavoid_arena_01"] = 1.0
  with pytest.raises(ValueError, match="not DMLab-30 levels.*seekavoid"):
    mean(returns)
  returns = _at(0.5)
  returns["rooms_watermaze"] = []
  with pytest.raises(ValueError, match="no returns.*rooms_watermaze"):
    mean(returns)


def test_docstring_examples():
  failures, tried = doctest.testmod(dmlab30)
  assert tried >= 3 and failures == 0
