"""DMLab-30: the 30 levels, their train -> test mapping and human-normalized
scores (the IMPALA paper's per-level human and random scores).

Levels live under `contributed/dmlab30/`. Two levels have separate train
and test variants (`rooms_collect_good_objects_*`,
`rooms_exploit_deferred_effects_*`); the other 28 are trained and tested
as they are. A train level's returns are scored against its test entry,
as scalable_agent does.

>>> env_levels(2, offset=29)[1]
'contributed/dmlab30/rooms_collect_good_objects_train'
>>> round(human_normalized_score("rooms_watermaze", [4.065, 54.0]), 6)
50.0
>>> scoring_level("dmlab:contributed/dmlab30/rooms_collect_good_objects_train")
'rooms_collect_good_objects_test'

`make_vector_env("dmlab:dmlab30", n)` steps env i on level `i % 30` (the
train variants; "dmlab:dmlab30_test" or `test=True`: the test variants).

What real DM Lab refuses (confirmed from its level scripts):

- the hold-out levels (`HOLD_OUT_LEVELS`, the two `_test` variants, which
  DM Lab's `decorators/test_only.lua` wraps) load only with the `Lab`
  config `allowHoldOutLevels="true"`: evaluation sets it, training on
  them is refused (`check_trainable`);
- `DATASET_LEVELS` read the Brady, Konkle & Oliva (2008) images
  (`datasets/brady_konkle_oliva2008.lua`) from the `Lab` config
  `datasetPath`, and fail at reset without it (`check_dataset`).

>>> needs_dataset("psychlab_continuous_recognition"), is_hold_out(
...   "dmlab:contributed/dmlab30/rooms_collect_good_objects_test")
(True, True)
"""

import os

import numpy as np

LEVEL_DIR = "contributed/dmlab30/"

# The 30 training levels, in the order of the IMPALA paper's tables.
_LEVELS = (
  "rooms_collect_good_objects_train",
  "rooms_exploit_deferred_effects_train",
  "rooms_select_nonmatching_object",
  "rooms_watermaze",
  "rooms_keys_doors_puzzle",
  "language_select_described_object",
  "language_select_located_object",
  "language_execute_random_task",
  "language_answer_quantitative_question",
  "lasertag_one_opponent_small",
  "lasertag_three_opponents_small",
  "lasertag_one_opponent_large",
  "lasertag_three_opponents_large",
  "natlab_fixed_large_map",
  "natlab_varying_map_regrowth",
  "natlab_varying_map_randomized",
  "skymaze_irreversible_path_hard",
  "skymaze_irreversible_path_varied",
  "psychlab_arbitrary_visuomotor_mapping",
  "psychlab_continuous_recognition",
  "psychlab_sequential_comparison",
  "psychlab_visual_search",
  "explore_object_locations_small",
  "explore_object_locations_large",
  "explore_obstructed_goals_small",
  "explore_obstructed_goals_large",
  "explore_goal_locations_small",
  "explore_goal_locations_large",
  "explore_object_rewards_few",
  "explore_object_rewards_many",
)
# The two levels with separate test variants; the other 28 are tested
# as they are trained.
_TEST_VARIANTS = {
  "rooms_collect_good_objects_train": "rooms_collect_good_objects_test",
  "rooms_exploit_deferred_effects_train": "rooms_exploit_deferred_effects_test",
}
# Train level -> the test level it is evaluated (and scored) as.
LEVEL_MAPPING = {level: _TEST_VARIANTS.get(level, level) for level in _LEVELS}
TRAIN_LEVELS = tuple(LEVEL_MAPPING)
TEST_LEVELS = tuple(LEVEL_MAPPING.values())

# Per test level: the human tester's and a uniformly random agent's mean
# episode return (IMPALA paper, Espeholt et al. 2018).
HUMAN_SCORES = {
  "rooms_collect_good_objects_test": 10.0,
  "rooms_exploit_deferred_effects_test": 85.65,
  "rooms_select_nonmatching_object": 65.9,
  "rooms_watermaze": 54.0,
  "rooms_keys_doors_puzzle": 53.8,
  "language_select_described_object": 389.5,
  "language_select_located_object": 280.7,
  "language_execute_random_task": 254.05,
  "language_answer_quantitative_question": 184.5,
  "lasertag_one_opponent_small": 12.65,
  "lasertag_three_opponents_small": 18.55,
  "lasertag_one_opponent_large": 18.6,
  "lasertag_three_opponents_large": 31.5,
  "natlab_fixed_large_map": 36.9,
  "natlab_varying_map_regrowth": 24.45,
  "natlab_varying_map_randomized": 42.35,
  "skymaze_irreversible_path_hard": 100.0,
  "skymaze_irreversible_path_varied": 100.0,
  "psychlab_arbitrary_visuomotor_mapping": 58.75,
  "psychlab_continuous_recognition": 58.3,
  "psychlab_sequential_comparison": 39.5,
  "psychlab_visual_search": 78.5,
  "explore_object_locations_small": 74.45,
  "explore_object_locations_large": 65.65,
  "explore_obstructed_goals_small": 206.0,
  "explore_obstructed_goals_large": 119.5,
  "explore_goal_locations_small": 267.5,
  "explore_goal_locations_large": 194.5,
  "explore_object_rewards_few": 77.7,
  "explore_object_rewards_many": 106.7,
}
RANDOM_SCORES = {
  "rooms_collect_good_objects_test": 0.073,
  "rooms_exploit_deferred_effects_test": 8.501,
  "rooms_select_nonmatching_object": 0.312,
  "rooms_watermaze": 4.065,
  "rooms_keys_doors_puzzle": 4.135,
  "language_select_described_object": -0.07,
  "language_select_located_object": 1.929,
  "language_execute_random_task": -5.913,
  "language_answer_quantitative_question": -0.33,
  "lasertag_one_opponent_small": -0.224,
  "lasertag_three_opponents_small": -0.214,
  "lasertag_one_opponent_large": -0.083,
  "lasertag_three_opponents_large": -0.102,
  "natlab_fixed_large_map": 2.173,
  "natlab_varying_map_regrowth": 2.989,
  "natlab_varying_map_randomized": 7.346,
  "skymaze_irreversible_path_hard": 0.1,
  "skymaze_irreversible_path_varied": 14.4,
  "psychlab_arbitrary_visuomotor_mapping": 0.163,
  "psychlab_continuous_recognition": 0.224,
  "psychlab_sequential_comparison": 0.129,
  "psychlab_visual_search": 0.085,
  "explore_object_locations_small": 3.575,
  "explore_object_locations_large": 4.673,
  "explore_obstructed_goals_small": 6.76,
  "explore_obstructed_goals_large": 2.61,
  "explore_goal_locations_small": 7.66,
  "explore_goal_locations_large": 3.14,
  "explore_object_rewards_few": 2.073,
  "explore_object_rewards_many": 2.438,
}

# The set names `make_vector_env` knows ("dmlab:dmlab30", ...).
SET_NAMES = ("dmlab30", "dmlab30_test")

# Levels DM Lab refuses outside evaluation (its test_only decorator), and
# its reason.
HOLD_OUT_LEVELS = tuple(_TEST_VARIANTS.values())
HOLD_OUT_REASON = (
  "This level must only be used during evaluation. For training, use the "
  "*_train.lua version of the level. (DM Lab's "
  "game_scripts/decorators/test_only.lua; evaluation sets "
  '"allowHoldOutLevels" = "true")'
)
# Levels whose factories (game_scripts/factories/psychlab/
# {arbitrary_visuomotor_mapping,continuous_recognition}_factory.lua) load
# the dataset below; psychlab_sequential_comparison and _visual_search
# draw their own stimuli.
DATASET_LEVELS = (
  "psychlab_arbitrary_visuomotor_mapping",
  "psychlab_continuous_recognition",
)
DATASET = "the Brady, Konkle & Oliva (2008) image dataset"
DATASET_README = (
  "data/brady_konkle_oliva2008/README.md in DM Lab's repository "
  "(https://github.com/deepmind/lab/tree/master/data/brady_konkle_oliva2008)"
)


def is_hold_out(level):
  """True for a hold-out (`_test`) level of DMLab-30."""
  return short_name(level) in HOLD_OUT_LEVELS


def needs_dataset(level):
  """True for the levels that need `datasetPath` (`DATASET_LEVELS`)."""
  return short_name(level) in DATASET_LEVELS


class DatasetMissingError(ValueError):
  """Levels need the psychlab dataset and no `datasetPath` was given."""


def check_trainable(levels):
  """ValueError naming the hold-out levels among `levels`, with DM Lab's
  reason: they are for evaluation only."""
  held = sorted({short_name(level) for level in levels if is_hold_out(level)})
  if held:
    raise ValueError(f"cannot train on {held}: {HOLD_OUT_REASON}")


def check_dataset(
  levels,
  dataset_path,
  flag="--dataset_path",
  skip_flag="--skip_levels_without_dataset",
):
  """`DatasetMissingError` when some of `levels` need the dataset and
  `dataset_path` is empty: it names those levels, the dataset, where to get
  it and the flags that fix it (`skip_flag` None: no skipping, e.g. a
  single level). A `dataset_path` that is given must be a
  directory (or DM Lab's "dummy" placeholder images)."""
  need = [short_name(level) for level in levels if needs_dataset(level)]
  need = list(dict.fromkeys(need))
  if dataset_path and dataset_path != "dummy":
    if not os.path.isdir(dataset_path):
      raise DatasetMissingError(
        f"{flag}={dataset_path!r} is not a directory; it must hold "
        f"{DATASET} (see {DATASET_README})"
      )
    return
  if need and not dataset_path:
    raise DatasetMissingError(
      f"levels {need} need {DATASET}, which DM Lab reads from the Lab "
      f"setting datasetPath: download it as {DATASET_README} says and "
      f"pass {flag}=<its directory>"
      + (
        f", or pass {skip_flag} to run the other levels (the report is "
        f"then incomplete)"
        if skip_flag
        else ""
      )
    )


def short_name(level):
  """'dmlab:contributed/dmlab30/rooms_watermaze' -> 'rooms_watermaze'."""
  if level.startswith("dmlab:"):
    level = level[len("dmlab:") :]
  return level[len(LEVEL_DIR) :] if level.startswith(LEVEL_DIR) else level


def level_path(level):
  """The level script path: 'rooms_watermaze' ->
  'contributed/dmlab30/rooms_watermaze'."""
  return LEVEL_DIR + short_name(level)


def scoring_level(level):
  """The test level whose scores a DMLab-30 level's returns are compared
  with (train levels -> their test entry); ValueError for other levels."""
  name = short_name(level)
  if name in LEVEL_MAPPING:
    return LEVEL_MAPPING[name]
  if name in HUMAN_SCORES:
    return name
  raise ValueError(
    f"{level!r} is not a DMLab-30 level; expected one of "
    f"{list(TRAIN_LEVELS)} or a test variant, with or without "
    f"the {LEVEL_DIR!r} prefix"
  )


def env_levels(num_envs, test=False, offset=0, skip=()):
  """Level paths of envs 0..num_envs-1: env i runs level (offset + i) % 30
  (train variants, or test variants with `test`); the levels in `skip`
  (short names or paths, e.g. `DATASET_LEVELS`) are left out of the
  cycle."""
  skipped = {short_name(level) for level in skip}
  names = [
    name
    for name in (TEST_LEVELS if test else TRAIN_LEVELS)
    if name not in skipped and LEVEL_MAPPING.get(name, name) not in skipped
  ]
  if not names:
    raise ValueError(f"every DMLab-30 level is skipped ({sorted(skipped)})")
  return tuple(
    level_path(names[(offset + i) % len(names)]) for i in range(int(num_envs))
  )


def human_normalized_score(level, returns):
  """`100 * (mean(returns) - random) / (human - random)` with the scores of
  `scoring_level(level)`. `returns`: an episode return or a sequence."""
  returns = np.asarray(returns, np.float64).reshape(-1)
  if not returns.size:
    raise ValueError(f"no returns for level {level!r}")
  name = scoring_level(level)
  human, random = HUMAN_SCORES[name], RANDOM_SCORES[name]
  return float(100.0 * (returns.mean() - random) / (human - random))


def mean_capped_human_normalized_score(level_returns, cap=100.0):
  """The mean over the 30 levels of `min(human_normalized_score, cap)`
  (`cap=None`: uncapped), IMPALA's DMLab-30 summary.

  `level_returns`: {level (train or test name, short or full path): returns
  (a float or a sequence of episode returns)}. Every DMLab-30 level must be
  there exactly once (a train level stands for its test entry); a missing
  one, one without returns, a level given twice or a level that is not in
  DMLab-30 raise ValueError naming them.
  """
  by_test, unknown, twice = {}, [], []
  for level, returns in level_returns.items():
    try:
      name = scoring_level(level)
    except ValueError:
      unknown.append(level)
      continue
    if name in by_test:
      twice.append(name)
    by_test[name] = (level, returns)
  if unknown:
    raise ValueError(f"not DMLab-30 levels: {unknown}")
  if twice:
    raise ValueError(
      f"levels given twice (a train level counts as its test entry): {twice}"
    )
  missing = [name for name in TEST_LEVELS if name not in by_test]
  if missing:
    raise ValueError(
      f"missing DMLab-30 levels ({len(missing)} of 30): {missing}"
    )
  scores = []
  for name in TEST_LEVELS:
    level, returns = by_test[name]
    score = human_normalized_score(level, returns)
    scores.append(score if cap is None else min(score, cap))
  return float(np.mean(scores))


def score_report(level_stats, cap=100.0):
  """The per-level table and the mean capped score of some DMLab-30 levels.

  `level_stats`: {level (train or test name, short or full path): {
  "mean_return": float or None (no episodes), "episodes": int, ...}}; the
  other keys are kept. Returns a JSON-able dict:

    {"levels": {short name: {..., "mean_return", "episodes",
                "scoring_level", "human_normalized_score" (None without
                episodes), "capped_score"}},     # in the paper's order
     "num_levels": levels with a score,
     "complete": every DMLab-30 level has a score,
     "cap": cap,
     "mean_capped_hns": mean of the capped scores of the scored levels
       (the DMLab-30 figure where "complete"; None without scores),
     "mean_hns": the same uncapped}

  ValueError for a level that is not in DMLab-30, or two entries scored
  as the same test level.
  """
  rows, seen = {}, {}
  for level, stats in level_stats.items():
    name = scoring_level(level)
    if name in seen:
      raise ValueError(
        f"levels {seen[name]!r} and {level!r} are both scored as {name!r}"
      )
    seen[name] = level
    row = dict(stats, scoring_level=name)
    mean = row.get("mean_return")
    if mean is None or not row.get("episodes"):
      row.update(
        mean_return=None, human_normalized_score=None, capped_score=None
      )
    else:
      score = human_normalized_score(name, [mean])
      row.update(
        mean_return=float(mean),
        human_normalized_score=score,
        capped_score=min(score, cap),
      )
    rows[short_name(level)] = row
  order = sorted(
    rows, key=lambda k: TEST_LEVELS.index(rows[k]["scoring_level"])
  )
  scored = [rows[k] for k in order if rows[k]["capped_score"] is not None]
  return {
    "levels": {k: rows[k] for k in order},
    "num_levels": len(scored),
    "complete": len(scored) == len(TEST_LEVELS),
    "cap": cap,
    "mean_capped_hns": float(np.mean([r["capped_score"] for r in scored]))
    if scored
    else None,
    "mean_hns": float(np.mean([r["human_normalized_score"] for r in scored]))
    if scored
    else None,
  }


def format_report(report):
  """`score_report`'s table as text: one line per level, then the mean."""
  width = max([len(k) for k in report["levels"]] + [5])
  lines = [
    f"{'level':<{width}}  {'mean return':>11}  {'episodes':>8}  {'HNS':>8}"
  ]
  for name, row in report["levels"].items():
    mean, score = row["mean_return"], row["human_normalized_score"]
    line = (
      f"{name:<{width}}  "
      f"{'-' if mean is None else f'{mean:.2f}':>11}  "
      f"{row['episodes']:>8}  "
      f"{'-' if score is None else f'{score:.1f}':>8}"
    )
    if row.get("error"):  # A level that failed or was skipped: why.
      line += f"  {row.get('status', 'failed')}: " + _first_line(row["error"])
    lines.append(line)
  mean = report["mean_capped_hns"]
  what = (
    "DMLab-30"
    if report["complete"]
    else f"{report['num_levels']} of {len(TEST_LEVELS)} levels, not the "
    f"DMLab-30 figure"
  )
  lines.append(
    f"mean capped human-normalized score (cap {report['cap']:g}, "
    f"{what}): {'-' if mean is None else f'{mean:.2f}'}"
  )
  return "\n".join(lines)


def _first_line(text, limit=160):
  line = str(text).strip().splitlines()[0] if str(text).strip() else ""
  return line if len(line) <= limit else line[: limit - 3] + "..."
