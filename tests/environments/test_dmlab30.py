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
    "rooms_exploit_deferred_effects_train": (
      "rooms_exploit_deferred_effects_test"
    ),
  }
  assert (
    set(dmlab30.HUMAN_SCORES)
    == set(dmlab30.RANDOM_SCORES)
    == set(dmlab30.TEST_LEVELS)
  )
  assert all(
    dmlab30.HUMAN_SCORES[k] > dmlab30.RANDOM_SCORES[k]
    for k in dmlab30.TEST_LEVELS
  )
  levels = dmlab30.env_levels(62)
  assert levels[0] == "contributed/dmlab30/rooms_collect_good_objects_train"
  assert levels[29] == "contributed/dmlab30/explore_object_rewards_many"
  assert levels[30:60] == levels[:30] and levels[60:] == levels[:2]
  assert dmlab30.env_levels(2, test=True, offset=29) == (
    "contributed/dmlab30/explore_object_rewards_many",
    "contributed/dmlab30/rooms_collect_good_objects_test",
  )


def test_level_names():
  for name in (
    "rooms_watermaze",
    "contributed/dmlab30/rooms_watermaze",
    "dmlab:contributed/dmlab30/rooms_watermaze",
  ):
    assert dmlab30.short_name(name) == "rooms_watermaze"
    assert dmlab30.level_path(name) == "contributed/dmlab30/rooms_watermaze"
    assert dmlab30.scoring_level(name) == "rooms_watermaze"
  assert (
    dmlab30.scoring_level("rooms_exploit_deferred_effects_train")
    == "rooms_exploit_deferred_effects_test"
  )
  assert (
    dmlab30.scoring_level("rooms_exploit_deferred_effects_test")
    == "rooms_exploit_deferred_effects_test"
  )
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
  assert score(
    "contributed/dmlab30/rooms_collect_good_objects_train", [10.073]
  ) == pytest.approx(100.73537826130754)
  # Negative random score: language_execute_random_task, human 254.05,
  # random -5.913: (0 + 5.913) / 259.963 * 100.
  assert score("language_execute_random_task", [-10.0, 10.0]) == pytest.approx(
    2.274554455826406
  )
  with pytest.raises(ValueError, match="no returns"):
    score("rooms_watermaze", [])


def _at(fraction):
  """Returns at `fraction` of the way from random to human, per level."""
  return {
    level: dmlab30.RANDOM_SCORES[level]
    + fraction * (dmlab30.HUMAN_SCORES[level] - dmlab30.RANDOM_SCORES[level])
    for level in dmlab30.TEST_LEVELS
  }


def test_mean_capped_score_by_hand():
  mean = dmlab30.mean_capped_human_normalized_score
  assert mean(_at(0.0)) == pytest.approx(0.0)
  assert mean(_at(1.0)) == pytest.approx(100.0)
  assert mean(_at(2.0)) == pytest.approx(100.0)  # Capped.
  assert mean(_at(2.0), cap=None) == pytest.approx(200.0)
  returns = _at(0.0)
  returns["rooms_watermaze"] = [54.0]  # 100.
  returns["skymaze_irreversible_path_hard"] = [199.9]  # 200 -> 100.
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
  with pytest.raises(
    ValueError,
    match=r"missing DMLab-30 levels \(2 of "
    r"30\): \['rooms_watermaze', 'psychlab_visual_search'",
  ):
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


def test_score_report_of_all_levels_gives_the_dmlab30_figure():
  returns = _at(0.5)
  returns["rooms_watermaze"] = 54.0 + 2 * (54.0 - 4.065)  # HNS 300.
  del returns["rooms_collect_good_objects_test"]
  # A train level is scored as its test entry (human 10, random 0.073).
  returns["rooms_collect_good_objects_train"] = 5.0
  report = dmlab30.score_report(
    {
      dmlab30.level_path(k): {"mean_return": v, "episodes": 3, "extra": k}
      for k, v in returns.items()
    }
  )
  assert report["complete"] and report["num_levels"] == 30
  assert list(report["levels"])[:2] == [
    "rooms_collect_good_objects_train",
    "rooms_exploit_deferred_effects_test",
  ]
  row = report["levels"]["rooms_collect_good_objects_train"]
  assert row["scoring_level"] == "rooms_collect_good_objects_test"
  assert row["extra"] == "rooms_collect_good_objects_train"
  assert row["human_normalized_score"] == pytest.approx(
    100 * (5.0 - 0.073) / (10.0 - 0.073)
  )
  watermaze = report["levels"]["rooms_watermaze"]
  assert watermaze["human_normalized_score"] == pytest.approx(300.0)
  assert watermaze["capped_score"] == 100.0
  # 28 levels at 50, watermaze capped at 100, rooms_collect at 49.63.
  expected = (28 * 50.0 + 100.0 + row["human_normalized_score"]) / 30
  assert report["mean_capped_hns"] == pytest.approx(expected)
  assert report["mean_capped_hns"] == pytest.approx(
    dmlab30.mean_capped_human_normalized_score(returns)
  )
  assert report["mean_hns"] == pytest.approx(expected + 200.0 / 30)
  text = dmlab30.format_report(report)
  assert text.splitlines()[0].split() == [
    "level",
    "mean",
    "return",
    "episodes",
    "HNS",
  ]
  assert "rooms_watermaze" in text and " 300.0" in text
  assert text.splitlines()[-1].endswith(f"(cap 100, DMLab-30): {expected:.2f}")


def test_score_report_of_some_levels():
  report = dmlab30.score_report(
    {
      "rooms_watermaze": {"mean_return": 29.0325, "episodes": 2},
      "explore_goal_locations_small": {"mean_return": None, "episodes": 0},
      "language_execute_random_task": {"mean_return": -5.913, "episodes": 1},
    }
  )
  assert not report["complete"] and report["num_levels"] == 2
  assert list(report["levels"]) == [
    "rooms_watermaze",
    "language_execute_random_task",
    "explore_goal_locations_small",
  ]
  assert (
    report["levels"]["explore_goal_locations_small"]["human_normalized_score"]
    is None
  )
  assert report["mean_capped_hns"] == pytest.approx(25.0)  # (50 + 0) / 2.
  assert report["mean_hns"] == pytest.approx(25.0)
  assert (
    dmlab30.format_report(report)
    .splitlines()[-1]
    .endswith("(cap 100, 2 of 30 levels, not the DMLab-30 figure): 25.00")
  )
  assert dmlab30.score_report({})["mean_capped_hns"] is None
  with pytest.raises(ValueError, match="both scored as"):
    dmlab30.score_report(
      {
        "rooms_collect_good_objects_train": {"mean_return": 1.0, "episodes": 1},
        "rooms_collect_good_objects_test": {"mean_return": 1.0, "episodes": 1},
      }
    )
  with pytest.raises(ValueError, match="not a DMLab-30 level"):
    dmlab30.score_report(
      {"seekavoid_arena_01": {"mean_return": 1.0, "episodes": 1}}
    )
